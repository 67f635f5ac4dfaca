//! Prints the `debug_repr` of an array and of a view into it (DyND's
//! `a[1]` example), of a string array and of a ragged view.

#![forbid(unsafe_code)]

fn main() -> Result<(), ndobject::Error> {
    let a = ndobject::Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    print!("{}", a.debug_repr());
    let b = a.index(1)?;
    print!("{}", b.debug_repr());
    let s =
        ndobject::Array::from_strings(&["This", "is", "unicode."], dtype::StringEncoding::Ucs2)?;
    print!("{}", s.debug_repr());
    // Ragged rows of pairs, `strided * var * 2 * int32`; the second value of
    // each pair in every row from the second on, last row first.
    let rows = [
        ndobject::Array::from_slice(&[1i32, 2, 3, 4], &[2, 2])?,
        ndobject::Array::from_slice(&[5i32, 6], &[1, 2])?,
    ];
    let r = ndobject::Array::from_ragged_arrays(&rows)?;
    let v = r.view(&[
        ndobject::Index::slice(None, None, -1),
        ndobject::Index::slice(Some(1), None, 1),
        ndobject::Index::at(1),
    ])?;
    print!("{}", v.debug_repr());
    Ok(())
}
