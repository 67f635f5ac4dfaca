//! `fastio dtype show` as a user runs it.

use std::process::{Command, Output};

fn fastio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
        .args(args)
        .output()
        .expect("run fastio")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn prints_the_canonical_form_first_for_every_kind_of_type() {
    let cases = [
        ("bool", "bool"),
        ("int", "int32"),
        ("uint16", "uint16"),
        ("real", "float64"),
        ("bfloat16", "bfloat16"),
        ("complex64", "complex[float32]"),
        ("complex", "complex[float64]"),
        ("intptr", "int64"),
        ("uintptr", "uint64"),
        ("10 * 3 * float16", "10 * 3 * float16"),
        ("strided * strided * int32", "strided * strided * int32"),
        ("var * var * int8", "var * var * int8"),
        ("unaligned[float64]", "unaligned[float64]"),
        ("big_endian[int32]", "big_endian[int32]"),
        ("string['utf16']", "string['U16']"),
        ("string['U32']", "string['U32']"),
        ("string['ucs2']", "string['ucs2']"),
        ("string['A']", "string['A']"),
        ("string[8, 'ascii']", "string[8, 'A']"),
        ("string[12]", "string[12]"),
        ("bytes", "bytes"),
        ("{a: int8, 'b c': float32,}", "{a: int8, 'b c': float32}"),
        ("(int8, string)", "(int8, string)"),
        ("?int16", "?int16"),
        ("var * ?{x: int32}", "var * ?{x: int32}"),
    ];
    for (input, canonical) in cases {
        let out = fastio(&["dtype", "show", input]);
        assert!(out.status.success(), "{input}: {out:?}");
        let text = stdout(&out);
        assert_eq!(text.lines().next(), Some(canonical), "{input}");
        // The canonical line is itself accepted and shows the same.
        let again = fastio(&["dtype", "show", canonical]);
        assert_eq!(stdout(&again), text, "{canonical}");
    }
}

#[test]
fn shows_layout_and_metadata() {
    let text = stdout(&fastio(&[
        "dtype",
        "show",
        "{x: int8, y: float64, s: string}",
    ]));
    assert!(text.contains("size: 32\n"), "{text}");
    assert!(text.contains("alignment: 8\n"), "{text}");
    assert!(text.contains("  y: offset 8, size 8, float64\n"), "{text}");
    assert!(text.contains("  s: offset 16, size 16, string\n"), "{text}");
    assert!(text.contains("metadata: 8 bytes\n"), "{text}");
    let text = stdout(&fastio(&["dtype", "show", "strided * var * int32"]));
    assert!(text.contains("size: variable"), "{text}");
    assert!(text.contains("$ strided_dim: stride, size"), "{text}");
    assert!(
        text.contains("$[*] var_dim: blockref, stride, offset"),
        "{text}"
    );
}

#[test]
fn json_output_is_one_object_with_canonical() {
    let out = fastio(&["dtype", "show", "--json", "2 * {x: int32, y: ?float32}"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["canonical"], "2 * {x: int32, y: ?float32}");
    assert_eq!(v["size"], 24);
    assert_eq!(v["alignment"], 4);
    assert_eq!(v["pod"], true);
    assert_eq!(v["ndim"], 1);
    let scalar: serde_json::Value =
        serde_json::from_slice(&fastio(&["dtype", "show", "--json", "big_endian[float64]"]).stdout)
            .unwrap();
    assert_eq!(scalar["numpy"], ">f8");
    assert_eq!(scalar["dlpack"], serde_json::Value::Null);
    let f: serde_json::Value =
        serde_json::from_slice(&fastio(&["dtype", "show", "--json", "float32"]).stdout).unwrap();
    assert_eq!(
        f["dlpack"],
        serde_json::json!({"code": 2, "bits": 32, "lanes": 1})
    );
}

#[test]
fn invalid_input_exits_2_with_a_caret() {
    for (input, fragment, caret) in [
        ("3 *", "expected a type or a dimension", "     ^"),
        (
            "{x: int32, x: int8}",
            "duplicate field name",
            "             ^",
        ),
        ("??int32", "option of an option", "   ^"),
    ] {
        let out = fastio(&["dtype", "show", input]);
        assert_eq!(out.status.code(), Some(2), "{input}");
        assert!(out.stdout.is_empty(), "{input}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(fragment), "{input}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 3, "{err}");
        assert_eq!(lines[1], format!("  {input}"));
        assert_eq!(lines[2], caret, "{input}: {err}");
    }
}
