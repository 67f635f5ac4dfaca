//! The parser rejects what datashape rejects, with a position and a caret.

use dtype::{ParseErrorKind, TypeError};

fn err(text: &str) -> dtype::ParseError {
    match dtype::parse(text) {
        Ok(t) => panic!("{text:?} parsed as {t}"),
        Err(e) => e,
    }
}

#[test]
fn rejects_with_offsets() {
    // (input, byte offset, a fragment of the message)
    let cases: &[(&str, usize, &str)] = &[
        (
            "3 *",
            3,
            "expected a type or a dimension, found end of input",
        ),
        ("??int32", 1, "option of an option"),
        ("{x: int32, x: int32}", 11, "duplicate field name \"x\""),
        ("-1 * int32", 0, "dimension size must be zero or more"),
        ("int33", 0, "unknown type name 'int33'"),
        ("string['latin1']", 7, "unknown string encoding 'latin1'"),
        (
            "string[3, 'U16']",
            7,
            "not a multiple of the 2-byte code unit",
        ),
        ("3 int32", 2, "expected '*' after a dimension size"),
        ("", 0, "expected a type or a dimension, found end of input"),
        ("int32 extra", 6, "expected end of input"),
        ("{}", 1, "expected a field name"),
        ("()", 1, "expected a type or a dimension"),
        ("{x int32}", 3, "expected ':' after the field name"),
        ("{x: int32", 9, "expected ',' or '}'"),
        ("N * int32", 0, "type variables"),
        ("... * int32", 0, "ellipsis"),
        ("(int32) -> int32", 0, "function prototypes"),
        ("fixed[3] * int32", 0, "dimension constructors"),
        ("var", 3, "expected '*' after a dimension"),
        ("int32 * int32", 6, "is not a dimension"),
        (
            "3 * strided * int32",
            0,
            "fixed dimension needs an element of fixed data size",
        ),
        (
            "unaligned[strided * int8]",
            0,
            "needs an element of fixed data size",
        ),
        (
            "big_endian[string]",
            11,
            "byte order applies only to primitive",
        ),
        ("99999999999999999999999 * int8", 0, "too large"),
        ("100000000000 * 100000000000 * int8", 0, "overflows"),
        ("complex[int32]", 8, "expected float32 or float64"),
        ("string[10", 9, "expected ',' or ']'"),
        ("{'a: int8}", 1, "unterminated string literal"),
        ("{'\\q': int8}", 2, "unknown escape"),
        ("int32 $", 6, "unexpected character '$'"),
        ("date", 0, "'date' is not supported"),
        ("int32[4]", 5, "takes no arguments"),
        ("007 * int8", 0, "leading zero"),
        (
            "?{x: int32, y: ?strided * int8}",
            15,
            "needs an element of fixed data size",
        ),
    ];
    for &(text, offset, fragment) in cases {
        let e = err(text);
        let shown = e.to_string();
        assert!(shown.contains(fragment), "{text:?}: {shown}");
        assert_eq!(e.offset(), offset, "{text:?}: {shown}");
    }
}

#[test]
fn caret_points_at_the_error_on_its_line() {
    let e = err("{x: int32,\n y: flaot32}");
    assert_eq!(e.offset(), 15);
    assert_eq!(e.caret(), "   y: flaot32}\n      ^");
    assert_eq!(
        e.to_string(),
        "invalid datashape at byte 15: unknown type name 'flaot32'\n   y: flaot32}\n      ^"
    );
    assert_eq!(e.kind(), &ParseErrorKind::UnknownType("flaot32".into()));
    // Columns count characters, not bytes.
    let e = err("{'é': int8, 'é': int8}");
    assert_eq!(
        e.kind(),
        &ParseErrorKind::Type(TypeError::DuplicateField("é".into()))
    );
    assert_eq!(e.caret().lines().nth(1), Some("              ^"));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    for (open, close) in [("unaligned[", "]"), ("(", ")"), ("{a: ", "}"), ("1 * ", "")] {
        let text = format!("{}int32{}", open.repeat(depth), close.repeat(depth));
        let e = err(&text);
        assert_eq!(e.kind(), &ParseErrorKind::TooDeep, "{open}");
    }
    // Up to the limit is fine.
    let ok = format!("{}int8", "1 * ".repeat(dtype::MAX_DEPTH - 1));
    assert_eq!(dtype::parse(&ok).unwrap().ndim(), dtype::MAX_DEPTH - 1);
}

#[test]
fn comments_whitespace_and_quoting() {
    let t = dtype::parse(
        "# a comment\n  3 * # dims\n {'x y': int8, \"q\\\"\": int8, '\\u00e9\\ud83d\\ude00': bool}",
    )
    .unwrap();
    assert_eq!(t.to_string(), "3 * {'x y': int8, 'q\"': int8, 'é😀': bool}");
    let weird = dtype::Type::record(vec![dtype::Field::new(
        "a'b\\c\n\u{1}",
        dtype::Type::primitive(dtype::Primitive::Int8),
    )])
    .unwrap();
    assert_eq!(weird.to_string(), "{'a\\'b\\u005cc\\n\\u0001': int8}");
    assert_eq!(dtype::parse(&weird.to_string()).unwrap(), weird);
    assert!(dtype::parse("{'\\ud800': int8}").is_err());
}
