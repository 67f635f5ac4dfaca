//! Property tests against a plain reference model: a `Vec` plus index
//! arithmetic for views, and Rust's `as` for casts.

mod common;

use common::{index, py_at, py_slice};
use ndobject::{Array, AssignErrorMode, Error, Index};
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
                Index::At(i) => m.offset += py_at(n, i)? as isize * s,
                Index::Slice { start, stop, step } => {
                    let positions = py_slice(n, start, stop, step);
                    if let Some(first) = positions.first() {
                        m.offset += *first as isize * s;
                    }
                    m.shape.push(positions.len());
                    m.strides.push(s * step);
                }
            }
        }
        Some(m)
    }
}

impl Model {
    /// Element offsets in C order.
    fn offsets(&self) -> Vec<isize> {
        let n: usize = self.shape.iter().product();
        (0..n)
            .map(|flat| {
                let mut rem = flat;
                let mut off = self.offset;
                for d in (0..self.shape.len()).rev() {
                    off += (rem % self.shape[d]) as isize * self.strides[d];
                    rem /= self.shape[d];
                }
                off
            })
            .collect()
    }

    /// Whether some strides give `shape` exactly these offsets in C order
    /// (by brute force: each dimension's stride is the step to the next
    /// position along it; then every element is checked).
    fn reshapable(&self, shape: &[usize]) -> bool {
        let offs = self.offsets();
        if offs.is_empty() {
            return true;
        }
        let mut strides = vec![0isize; shape.len()];
        let mut inner = 1;
        for d in (0..shape.len()).rev() {
            if shape[d] > 1 {
                strides[d] = offs[inner] - offs[0];
            }
            inner *= shape[d];
        }
        Model {
            offset: offs[0],
            shape: shape.to_vec(),
            strides,
        }
        .offsets()
            == offs
    }
}

/// A random shape with `n` elements: divisors of `n` picked by `picks`,
/// with dimensions of size 1 inserted.
fn factor(n: usize, picks: &[(usize, bool)]) -> Vec<usize> {
    let mut rest = n;
    let mut shape = vec![];
    for (pick, one) in picks {
        if *one {
            shape.push(1);
            continue;
        }
        let divisors: Vec<usize> = (2..=rest).filter(|d| rest.is_multiple_of(*d)).collect();
        if let Some(d) = divisors.get(pick % divisors.len().max(1)) {
            shape.push(*d);
            rest /= d;
        }
    }
    shape.push(rest);
    shape
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
        let c = view.to_contiguous().unwrap();
        prop_assert!(c.is_c_contiguous());
        prop_assert_eq!(c.reshape(&[c.len()]).unwrap().to_vec::<i32>().unwrap(), model.values(&data));
        // Every view shares the block; dropping them returns the count to 1.
        drop((view, c));
        prop_assert_eq!(a.block().refcount(), 1);
    }

    #[test]
    fn reshape_views_exactly_when_strides_exist(
        shape in proptest::collection::vec(1usize..5, 1..4),
        idx in proptest::collection::vec(index(), 0..4),
        order_seed in any::<u64>(),
        picks in proptest::collection::vec((any::<usize>(), any::<bool>()), 0..4),
    ) {
        let n: usize = shape.iter().product();
        let data: Vec<i32> = (0..n as i32).collect();
        let a = Array::from_slice(&data, &shape).unwrap();
        // A random permutation, then a random view.
        let mut order: Vec<usize> = (0..shape.len()).collect();
        let mut seed = order_seed;
        for i in (1..order.len()).rev() {
            order.swap(i, (seed % (i as u64 + 1)) as usize);
            seed /= i as u64 + 1;
        }
        let p = a.permute(&order).unwrap();
        let model = Model {
            offset: 0,
            shape: order.iter().map(|d| shape[*d]).collect(),
            strides: order.iter().map(|d| a.strides()[*d] / 4).collect(),
        };
        let idx: Vec<Index> = idx.into_iter().take(model.shape.len()).collect();
        let (Some(model), Ok(view)) = (model.apply(&idx), p.view(&idx)) else {
            return Ok(());
        };
        let new_shape = factor(view.len(), &picks);
        let got = view.reshape(&new_shape);
        prop_assert_eq!(got.is_ok(), model.reshapable(&new_shape), "{:?} {:?} -> {:?}", view.shape(), view.strides(), new_shape);
        match got {
            Ok(r) => {
                prop_assert!(r.block().ptr_eq(a.block()));
                prop_assert_eq!(r.shape(), &new_shape[..]);
                prop_assert_eq!(r.to_vec::<i32>().unwrap(), model.values(&data));
            }
            Err(e) => {
                prop_assert!(matches!(e, Error::Reshape { .. }), "{:?}", e);
                // The error says what to do, and doing it works.
                prop_assert!(e.to_string().contains("to_contiguous()"));
                let c = view.to_contiguous().unwrap().reshape(&new_shape).unwrap();
                prop_assert_eq!(c.to_vec::<i32>().unwrap(), model.values(&data));
            }
        }
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
