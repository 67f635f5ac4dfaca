//! Shared by the property tests: Python indexing semantics, spelled out
//! with plain loops, and strategies for indices.

#![allow(dead_code)]

use ndobject::Index;
use proptest::prelude::*;

/// The positions a Python slice selects in a dimension of `n` elements.
pub fn py_slice(n: usize, start: Option<isize>, stop: Option<isize>, step: isize) -> Vec<usize> {
    let n = n as isize;
    let norm = |v: isize| if v < 0 { v + n } else { v };
    let mut out = vec![];
    if step > 0 {
        let a = start.map_or(0, |v| norm(v).clamp(0, n));
        let b = stop.map_or(n, |v| norm(v).clamp(0, n));
        let mut x = a;
        while x < b {
            out.push(x as usize);
            x += step;
        }
    } else {
        let a = start.map_or(n - 1, |v| norm(v).clamp(-1, n - 1));
        let b = stop.map_or(-1, |v| norm(v).clamp(-1, n - 1));
        let mut x = a;
        while x > b {
            out.push(x as usize);
            x += step;
        }
    }
    out
}

/// The position an integer index selects, if in range.
pub fn py_at(n: usize, i: isize) -> Option<usize> {
    let j = if i < 0 { i + n as isize } else { i };
    (0..n as isize).contains(&j).then_some(j as usize)
}

/// A slice with bounds in `-7..7` and a non-zero step.
pub fn slice() -> impl Strategy<Value = Index> {
    (
        proptest::option::of(-7isize..7),
        proptest::option::of(-7isize..7),
        prop_oneof![1isize..4, -3isize..0],
    )
        .prop_map(|(a, b, s)| Index::slice(a, b, s))
}

/// An integer in `-6..6` or a slice.
pub fn index() -> impl Strategy<Value = Index> {
    prop_oneof![(-6isize..6).prop_map(Index::At), slice()]
}
