//! Property tests of `var` dimensions against a `Vec<Vec<..>>` model:
//! slices of the outer and the ragged dimension, integers and slices of a
//! fixed dimension below it, composed over several steps, then integer
//! indices into single rows.

mod common;

use common::{index, py_at, py_slice, slice};
use ndobject::{Array, Error, Index};
use proptest::prelude::*;

/// Positions selected by an index of either kind (`None`: out of range).
fn select(n: usize, index: Index) -> Option<Vec<usize>> {
    match index {
        Index::At(i) => py_at(n, i).map(|j| vec![j]),
        Index::Slice { start, stop, step } => Some(py_slice(n, start, stop, step)),
    }
}

/// The model: rows of elements, each element a vector of the values of
/// the fixed dimension below the ragged one (or one value when there is
/// no such dimension, or it was removed).
#[derive(Clone, Debug)]
struct Ragged {
    rows: Vec<Vec<Vec<i32>>>,
    /// The size of the fixed dimension below the ragged one, while it is
    /// still there.
    fixed: Option<usize>,
}

fn build(lens: &[usize], width: Option<usize>) -> (Array, Ragged) {
    let mut next = 0;
    let rows: Vec<Vec<Vec<i32>>> = lens
        .iter()
        .map(|n| {
            (0..*n)
                .map(|_| {
                    (0..width.unwrap_or(1))
                        .map(|_| {
                            next += 1;
                            next
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let a = match width {
        Some(w) => {
            let arrays: Vec<Array> = rows
                .iter()
                .map(|r| Array::from_slice(&r.concat(), &[r.len(), w]).unwrap())
                .collect();
            Array::from_ragged_arrays(&arrays).unwrap()
        }
        None => {
            let flat: Vec<Vec<i32>> = rows.iter().map(|r| r.concat()).collect();
            Array::from_ragged(&flat).unwrap()
        }
    };
    (a, Ragged { rows, fixed: width })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn ragged_views_match_nested_vecs(
        lens in proptest::collection::vec(0usize..6, 1..5),
        width in proptest::option::of(1usize..4),
        steps in proptest::collection::vec((slice(), slice(), proptest::option::of(index())), 1..4),
        last in (-6isize..6, -6isize..6),
    ) {
        let (a, mut model) = build(&lens, width);
        let mut view = a.clone();
        for (outer, ragged, fixed) in steps {
            let mut idx = vec![outer, ragged];
            let fixed = fixed.filter(|_| model.fixed.is_some());
            idx.extend(fixed);
            let got = view.view(&idx);
            // An out-of-range integer into the fixed dimension is an error
            // whatever the rows hold.
            let (width, fixed_sel) = match (model.fixed, fixed) {
                (Some(w), Some(f)) => match select(w, f) {
                    Some(ps) => (
                        (!matches!(f, Index::At(_))).then_some(ps.len()),
                        Some(ps),
                    ),
                    None => {
                        prop_assert!(matches!(got, Err(Error::IndexOutOfRange { .. })), "{:?}", got);
                        return Ok(());
                    }
                },
                (w, _) => (w, None),
            };
            // Apply the step to the model.
            let mut next = Ragged { rows: vec![], fixed: width };
            for r in select(model.rows.len(), outer).unwrap() {
                let row = &model.rows[r];
                let new_row = select(row.len(), ragged)
                    .unwrap()
                    .into_iter()
                    .map(|p| match &fixed_sel {
                        Some(ps) => ps.iter().map(|q| row[p][*q]).collect(),
                        None => row[p].clone(),
                    })
                    .collect();
                next.rows.push(new_row);
            }
            view = got.unwrap();
            model = next;
            prop_assert_eq!(view.shape(), &[model.rows.len()][..]);
            prop_assert!(view.block().ptr_eq(a.block()));
        }
        for (i, row) in model.rows.iter().enumerate() {
            let elems = view.index(i as isize).unwrap().var_elements().unwrap();
            prop_assert!(elems.block().ptr_eq(a.metadata_blocks()[0]));
            let mut shape = vec![row.len()];
            shape.extend(model.fixed);
            prop_assert_eq!(elems.shape(), &shape[..]);
            prop_assert_eq!(elems.to_vec::<i32>().unwrap(), row.concat());
        }
        // Integers into one row: the row's own length bounds the index.
        let got = view.view(&[Index::At(last.0), Index::At(last.1)]);
        let want = py_at(model.rows.len(), last.0)
            .and_then(|r| py_at(model.rows[r].len(), last.1).map(|p| model.rows[r][p].clone()));
        match want {
            Some(values) => prop_assert_eq!(got.unwrap().to_vec::<i32>().unwrap(), values),
            None => prop_assert!(matches!(got, Err(Error::IndexOutOfRange { .. })), "{:?}", got),
        }
        drop(view);
        prop_assert_eq!(a.block().refcount(), 1);
    }
}
