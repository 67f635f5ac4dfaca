//! Prints the `debug_repr` of an array and of a view into it (DyND's
//! `a[1]` example).

fn main() -> Result<(), ndobject::Error> {
    let a = ndobject::Array::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    print!("{}", a.debug_repr());
    let b = a.index(1)?;
    print!("{}", b.debug_repr());
    let s =
        ndobject::Array::from_strings(&["This", "is", "unicode."], dtype::StringEncoding::Ucs2)?;
    print!("{}", s.debug_repr());
    Ok(())
}
