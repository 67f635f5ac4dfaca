//! Property tests against a plain reference model: a `Vec` plus index
//! arithmetic for views, and Rust's `as` for casts.

use ndobject::{Array, AssignErrorMode, Index};
use proptest::prelude::*;

/// The model of a view: element offset, shape, element strides over `data`.
#[derive(Clone, Debug)]
struct Model {
    offset: isize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl Model {
    fn values(&self, data: &[i32]) -> Vec<i32> {
        let n: usize = self.shape.iter().product();
        let mut out = Vec::with_capacity(n);
        for flat in 0..n {
            let mut rem = flat;
            let mut off = self.offset;
            for d in (0..self.shape.len()).rev() {
                let i = rem % self.shape[d];
                rem /= self.shape[d];
                off += i as isize * self.strides[d];
            }
            out.push(data[off as usize]);
        }
        out
    }

    fn apply(&self, idx: &[Index]) -> Option<Model> {
        let mut m = Model {
            offset: self.offset,
            shape: vec![],
            strides: vec![],
        };
        for (d, (&n, &s)) in self.shape.iter().zip(&self.strides).enumerate() {
            match idx.get(d).copied().unwrap_or(Index::all()) {
                Index::At(i) => {
                    let j = if i < 0 { i + n as isize } else { i };
                    if j < 0 || j >= n as isize {
                        return None;
                    }
                    m.offset += j * s;
                }
                Index::Slice { start, stop, step } => {
                    // Enumerate the positions a Python slice selects.
                    let n = n as isize;
                    let norm = |v: isize| if v < 0 { v + n } else { v };
                    let positions: Vec<isize> = if step > 0 {
                        let a = start.map_or(0, |v| norm(v).clamp(0, n));
                        let b = stop.map_or(n, |v| norm(v).clamp(0, n));
                        (a..b).step_by(step as usize).collect()
                    } else {
                        let a = start.map_or(n - 1, |v| norm(v).clamp(-1, n - 1));
                        let b = stop.map_or(-1, |v| norm(v).clamp(-1, n - 1));
                        let mut p = vec![];
                        let mut x = a;
                        while x > b {
                            p.push(x);
                            x += step;
                        }
                        p
                    };
                    if let Some(first) = positions.first() {
                        m.offset += first * s;
                    }
                    m.shape.push(positions.len());
                    m.strides.push(s * step);
                }
            }
        }
        Some(m)
    }
}

fn index() -> impl Strategy<Value = Index> {
    prop_oneof![
        (-6isize..6).prop_map(Index::At),
        (
            proptest::option::of(-7isize..7),
            proptest::option::of(-7isize..7),
            prop_oneof![1isize..4, -3isize..0]
        )
            .prop_map(|(a, b, s)| Index::slice(a, b, s)),
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..5, 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn views_match_the_model(
        shape in shape(),
        steps in proptest::collection::vec(proptest::collection::vec(index(), 0..4), 1..4),
        transpose_at in proptest::option::of(0usize..3),
    ) {
        let n: usize = shape.iter().product();
        let data: Vec<i32> = (0..n as i32).collect();
        let a = Array::from_slice(&data, &shape).unwrap();
        let strides: Vec<isize> = a.strides().iter().map(|s| s / 4).collect();
        let mut model = Model { offset: 0, shape: shape.clone(), strides };
        let mut view = a.clone();
        for (k, idx) in steps.iter().enumerate() {
            if transpose_at == Some(k) {
                view = view.transpose();
                model.shape.reverse();
                model.strides.reverse();
            }
            let idx: Vec<Index> = idx.iter().copied().take(model.shape.len()).collect();
            let expected = model.apply(&idx);
            let got = view.view(&idx);
            match expected {
                None => { prop_assert!(got.is_err()); }
                Some(m) => {
                    let v = got.unwrap();
                    prop_assert_eq!(v.shape(), &m.shape[..]);
                    prop_assert_eq!(v.to_vec::<i32>().unwrap(), m.values(&data));
                    model = m;
                    view = v;
                }
            }
        }
        // A copy is contiguous and equal; reshaping it to 1-D keeps order.
        let c = view.to_contiguous();
        prop_assert!(c.is_c_contiguous());
        prop_assert_eq!(c.reshape(&[c.len()]).unwrap().to_vec::<i32>().unwrap(), model.values(&data));
        // Every view shares the block; dropping them returns the count to 1.
        drop((view, c));
        prop_assert_eq!(a.block().refcount(), 1);
    }

    #[test]
    fn f64_to_int_casts_match_as(values in proptest::collection::vec(any::<f64>(), 0..20)) {
        let a = Array::from_slice(&values, &[values.len()]).unwrap();
        let i = a.cast(&"int16".parse().unwrap(), AssignErrorMode::None).unwrap();
        prop_assert_eq!(i.to_vec::<i16>().unwrap(), values.iter().map(|v| *v as i16).collect::<Vec<_>>());
        let u = a.cast(&"uint32".parse().unwrap(), AssignErrorMode::None).unwrap();
        prop_assert_eq!(u.to_vec::<u32>().unwrap(), values.iter().map(|v| *v as u32).collect::<Vec<_>>());
        let f = a.cast(&"float32".parse().unwrap(), AssignErrorMode::None).unwrap();
        let want: Vec<u32> = values.iter().map(|v| (*v as f32).to_bits()).collect();
        prop_assert_eq!(f.to_vec::<f32>().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
        // The checked modes fail exactly when `as` would lose something.
        for (k, v) in values.iter().enumerate() {
            let one = a.index(k as isize).unwrap();
            let over = one.cast(&"int16".parse().unwrap(), AssignErrorMode::Overflow);
            let in_range = v.is_finite() && v.trunc() >= f64::from(i16::MIN) && v.trunc() <= f64::from(i16::MAX);
            prop_assert_eq!(over.is_ok(), in_range, "{}", v);
            let frac = one.cast(&"int16".parse().unwrap(), AssignErrorMode::Fractional);
            prop_assert_eq!(frac.is_ok(), in_range && v.fract() == 0.0, "{}", v);
            let inexact = one.cast(&"float32".parse().unwrap(), AssignErrorMode::Inexact);
            let exact = v.is_nan() || f64::from(*v as f32) == *v;
            prop_assert_eq!(inexact.is_ok(), exact, "{}", v);
        }
    }

    #[test]
    fn int_casts_match_as(values in proptest::collection::vec(any::<i64>(), 0..20)) {
        let a = Array::from_slice(&values, &[values.len()]).unwrap();
        let u8s = a.cast(&"uint8".parse().unwrap(), AssignErrorMode::None).unwrap();
        prop_assert_eq!(u8s.to_vec::<u8>().unwrap(), values.iter().map(|v| *v as u8).collect::<Vec<_>>());
        let f = a.cast(&"float64".parse().unwrap(), AssignErrorMode::None).unwrap();
        prop_assert_eq!(f.to_vec::<f64>().unwrap(), values.iter().map(|v| *v as f64).collect::<Vec<_>>());
        let checked = a.cast(&"int32".parse().unwrap(), AssignErrorMode::Overflow);
        prop_assert_eq!(checked.is_ok(), values.iter().all(|v| i32::try_from(*v).is_ok()));
        let exact = a.cast(&"float64".parse().unwrap(), AssignErrorMode::Inexact);
        prop_assert_eq!(exact.is_ok(), values.iter().all(|v| (*v as f64) as i128 == i128::from(*v)));
    }

    #[test]
    fn strings_round_trip_in_every_encoding(texts in proptest::collection::vec(any::<String>(), 0..6)) {
        use dtype::StringEncoding as E;
        for enc in [E::Utf8, E::Utf16, E::Utf32] {
            let a = Array::from_strings(&texts, enc).unwrap();
            prop_assert_eq!(a.to_strings().unwrap(), texts.clone());
        }
        let bmp = texts.iter().all(|t| t.chars().all(|c| u32::from(c) <= 0xFFFF));
        prop_assert_eq!(Array::from_strings(&texts, E::Ucs2).is_ok(), bmp);
        let ascii = texts.iter().all(|t| t.is_ascii());
        prop_assert_eq!(Array::from_strings(&texts, E::Ascii).is_ok(), ascii);
    }
}
