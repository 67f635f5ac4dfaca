//! Random sequences of index, slice, transpose, reshape and cast
//! operations on a small array, then of indices and slices through the
//! ragged dimension of a `var` array: every step returns a value or an
//! error, never panics, and views always agree with a contiguous copy.

#![no_main]
#![forbid(unsafe_code)]

use dtype::Type;
use libfuzzer_sys::fuzz_target;
use ndobject::{Array, AssignErrorMode, Index};

const TYPES: [&str; 8] = ["int8", "uint16", "int32", "float16", "float32", "float64", "complex64", "bool"];
const MODES: [AssignErrorMode; 4] = [
    AssignErrorMode::None,
    AssignErrorMode::Overflow,
    AssignErrorMode::Fractional,
    AssignErrorMode::Inexact,
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let shape: Vec<usize> = data[..(data[0] % 4) as usize].iter().map(|b| (*b % 5) as usize).collect();
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| i as f64 * 1.5 - 3.0).collect();
    let Ok(mut a) = Array::from_slice(&values, &shape) else { return };
    for op in data[shape.len()..].chunks(3) {
        let [kind, x, y] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        let next = match kind % 7 {
            0 => a.index(x as i8 as isize),
            1 => a.view(&[Index::slice(Some(x as i8 as isize % 8), None, (y as i8 as isize % 4).max(1) * if y & 0x80 != 0 { -1 } else { 1 })]),
            2 => Ok(a.transpose()),
            3 => a.reshape(&[a.len()]),
            4 => {
                let ty: Type = TYPES[x as usize % TYPES.len()].parse().unwrap();
                a.cast(&ty, MODES[y as usize % 4])
            }
            5 => {
                // Split the first dimension, or merge the first two.
                let shape = a.shape().to_vec();
                match shape.split_first() {
                    Some((n, rest)) if x & 1 == 0 && *n > 0 && n % (1 + (y as usize % *n)) == 0 => {
                        let d = 1 + y as usize % *n;
                        a.reshape(&[[d, n / d].as_slice(), rest].concat())
                    }
                    Some((n, [m, rest @ ..])) => a.reshape(&[[n * m].as_slice(), rest].concat()),
                    _ => a.reshape(&[1]),
                }
            }
            _ => Ok(a.to_contiguous().unwrap()),
        };
        if let Ok(b) = next {
            // A view and its contiguous copy hold the same bytes.
            assert_eq!(b.to_bytes().unwrap(), b.to_contiguous().unwrap().to_bytes().unwrap());
            a = b;
        }
    }
    let _ = a.debug_repr();

    // Ragged rows of pairs, indexed through the var dimension.
    let rows: Vec<Array> = data
        .iter()
        .take(4)
        .map(|b| {
            let n = (*b % 4) as usize;
            let values: Vec<i16> = (0..2 * n as i16).collect();
            Array::from_slice(&values, &[n, 2]).unwrap()
        })
        .collect();
    let Ok(mut r) = Array::from_ragged_arrays(&rows) else { return };
    let index = |b: u8| match b % 3 {
        0 => Index::at((b as i8 >> 2) as isize),
        1 => Index::all(),
        _ => Index::slice(Some((b as i8 >> 3) as isize), None, if b & 0x80 != 0 { -1 } else { 2 }),
    };
    for op in data[1..].chunks(3).take(6) {
        let idx: Vec<Index> = op.iter().map(|b| index(*b)).collect();
        if let Ok(v) = r.view(&idx) {
            let _ = v.debug_repr();
            for i in 0..v.shape().first().copied().unwrap_or(0).min(4) {
                if let Ok(row) = v.index(i as isize).and_then(|x| x.var_elements()) {
                    assert_eq!(row.to_vec::<i16>().unwrap().len(), row.len());
                }
            }
            r = v;
        }
    }
});
