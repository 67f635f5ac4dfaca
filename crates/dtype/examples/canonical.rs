//! Prints the canonical text of one datashape per line: the types Blaze's
//! `datashape` package also has, for `cargo xtask blaze` to check that
//! Blaze reads each line as the same type and prints it the same way.
//! (`strided`, `unaligned`, byte order, `bfloat16`, `bytes` and `ucs2`
//! have no Blaze counterpart and are not listed.)

#![forbid(unsafe_code)]

const SHAPES: &[&str] = &[
    "bool",
    "int8",
    "int16",
    "int",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "real",
    "complex64",
    "complex",
    "complex[float32]",
    "intptr",
    "uintptr",
    "3 * int32",
    "0 * float64",
    "2 * 3 * 4 * uint8",
    "var * int8",
    "var * var * float32",
    "string",
    "string['ascii']",
    "string['utf8']",
    "string['utf16']",
    "string['U32']",
    "string[16]",
    "string[10, 'ascii']",
    "string[16, 'utf16']",
    "string[32, 'U32']",
    "{x: int32, y: float64}",
    "{'a b': int8, c: ?string}",
    "{x: int32,}",
    "(int8, float64)",
    "(int8)",
    "?int32",
    "?3 * int16",
    "2 * ?3 * int32",
    "option[float64]",
    "var * {name: string, pos: (float32, float32), tags: 4 * ?int16}",
];

fn main() -> Result<(), dtype::ParseError> {
    for text in SHAPES {
        println!("{}", dtype::parse(text)?);
    }
    Ok(())
}
