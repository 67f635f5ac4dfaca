//! Every rule of a pipeline definition, one test each (or a few together):
//! the error, its line and column (1-based; columns count characters), its
//! YAML path, and a fragment of its message. Then what a valid definition
//! resolves to: entries, producers, consumers and schedule. Last, a corpus
//! of invalid files (`tests/data/invalid`), each naming the line and message
//! it must give in its first line.

use std::path::Path;
use std::time::{Duration, Instant};

use dtype::Primitive;
use fastio::plan::EntryKind;
use fastio_pipeline::{Definition, Diagnostic, IoType, MAX_DEFINITION_BYTES, Severity};

/// A valid pipeline: `gen` feeds both of its outputs to `sink`.
const BASE: &str = "\
api-version: 0.5.0
name: demo
operators:
- name: gen
  container: {image: local, command: [./produce]}
  output:
  - {name: volume, type: array, element-type: float32, shape: [3, -1]}
  - {name: label, type: string}
- name: sink
  container: {image: local, command: [./consume]}
  input:
  - {from: gen, name: volume, type: array, element-type: float32, shape: [3, -1]}
  - {from: gen, name: label, type: string}
";

/// A one-operator pipeline whose only output (line 7) is `output`.
fn single(output: &str) -> String {
    format!(
        "\
api-version: 0.5.0
name: demo
operators:
- name: solo
  container: {{image: local, command: [./run]}}
  output:
  - {output}
"
    )
}

/// A one-operator pipeline whose only input (line 7) is `input`.
fn single_input(input: &str) -> String {
    format!(
        "\
api-version: 0.5.0
name: demo
operators:
- name: solo
  container: {{image: local, command: [./run]}}
  input:
  - {input}
"
    )
}

/// `text` with `from` (which must occur exactly once) replaced by `to`.
#[track_caller]
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} must occur once in\n{text}"
    );
    text.replacen(from, to, 1)
}

/// The 1-based line and column (in characters) of `target`, the first
/// occurrence of it inside `context`, which occurs exactly once in `text`.
#[track_caller]
fn at(text: &str, context: &str, target: &str) -> (u64, u64) {
    assert_eq!(
        text.matches(context).count(),
        1,
        "{context:?} must occur once in\n{text}"
    );
    let offset = context
        .find(target)
        .unwrap_or_else(|| panic!("{target:?} is not in {context:?}"));
    let start = text.find(context).unwrap() + offset;
    let before = &text[..start];
    let line = before.matches('\n').count() as u64 + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() as u64 + 1;
    (line, column)
}

fn show(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[track_caller]
fn ok_with(text: &str, params: &[(String, String)]) -> Definition {
    match Definition::parse("test.yaml", text, params) {
        Ok(def) => def,
        Err(diags) => panic!(
            "expected a valid pipeline, got:\n{}\n--- in:\n{text}",
            show(&diags)
        ),
    }
}

#[track_caller]
fn ok(text: &str) -> Definition {
    ok_with(text, &[])
}

/// Every diagnostic of an invalid definition (warnings too).
#[track_caller]
fn diagnostics_with(text: &str, params: &[(String, String)]) -> Vec<Diagnostic> {
    match Definition::parse("test.yaml", text, params) {
        Ok(def) => panic!(
            "expected errors, got a pipeline (warnings:\n{})\n--- from:\n{text}",
            show(&def.warnings)
        ),
        Err(diags) => diags,
    }
}

/// The errors of an invalid definition, in position order.
#[track_caller]
fn errors_with(text: &str, params: &[(String, String)]) -> Vec<Diagnostic> {
    diagnostics_with(text, params)
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect()
}

#[track_caller]
fn errors(text: &str) -> Vec<Diagnostic> {
    errors_with(text, &[])
}

/// The one error of an invalid definition.
#[track_caller]
fn only_error(text: &str) -> Diagnostic {
    let errs = errors(text);
    assert_eq!(
        errs.len(),
        1,
        "expected one error, got:\n{}\n--- from:\n{text}",
        show(&errs)
    );
    errs.into_iter().next().unwrap()
}

/// Checks position, path and a fragment of the message.
#[track_caller]
fn check(d: &Diagnostic, (line, column): (u64, u64), path: &str, fragment: &str) {
    assert_eq!((d.line, d.column), (line, column), "position of `{d}`");
    assert_eq!(d.path, path, "path of `{d}`");
    assert!(d.message.contains(fragment), "`{d}` lacks {fragment:?}");
}

/// As [`check`], the line only.
#[track_caller]
fn check_line(d: &Diagnostic, line: u64, path: &str, fragment: &str) {
    assert_eq!(d.line, line, "line of `{d}`");
    assert_eq!(d.path, path, "path of `{d}`");
    assert!(d.message.contains(fragment), "`{d}` lacks {fragment:?}");
}

// ---------------------------------------------------------------- YAML level

#[test]
fn the_base_pipeline_is_valid_and_has_no_warning() {
    let def = ok(BASE);
    assert!(def.warnings.is_empty(), "{}", show(&def.warnings));
    assert_eq!(def.pipeline.name, "demo");
    assert_eq!(def.pipeline.api_version, "0.5.0");
    assert_eq!(def.pipeline.operators.len(), 2);
}

#[test]
fn unknown_keys_are_errors_at_the_key() {
    // (edit from, edit to, context of the unknown key, the key)
    let cases = [
        // top level
        (
            "name: demo\n",
            "name: demo\nowner: me\n",
            "owner: me",
            "owner",
        ),
        // operator (`image` belongs under `container`)
        (
            "- name: gen\n",
            "- name: gen\n  image: local\n",
            "  image: local\n",
            "image",
        ),
        // container
        (
            "{image: local, command: [./produce]}",
            "{image: local, entrypoint: x, command: [./produce]}",
            "entrypoint: x",
            "entrypoint",
        ),
        // output
        (
            "{name: label, type: string}",
            "{name: label, type: string, size: 4}",
            "size: 4",
            "size",
        ),
        // input
        (
            "{from: gen, name: label, type: string}",
            "{from: gen, name: label, type: string, optional: true}",
            "optional: true",
            "optional",
        ),
    ];
    for (from, to, context, key) in cases {
        let text = edit(BASE, from, to);
        let e = only_error(&text);
        check(
            &e,
            at(&text, context, key),
            "",
            &format!("unknown field `{key}`"),
        );
    }
    // serde lists the keys that are known, in kebab-case.
    let text = edit(BASE, "name: demo\n", "name: demo\nowner: me\n");
    let e = only_error(&text);
    assert!(
        e.message.contains(
            "api-version, name, version, description, orchestrator, parameters, pull-secrets, operators"
        ),
        "{e}"
    );
}

#[test]
fn duplicate_keys_are_errors_at_the_second_key() {
    let text = edit(BASE, "name: demo\n", "name: demo\nname: again\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "name: again", "name"),
        "",
        "duplicate mapping key",
    );

    let text = edit(
        BASE,
        "{name: label, type: string}",
        "{name: label, type: string, type: u8}",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: u8", "type"),
        "",
        "duplicate mapping key",
    );
}

#[test]
fn yaml_syntax_errors_are_reported_with_their_position() {
    // The mismatch is reported where the bracket opened.
    let text = edit(BASE, "name: demo\n", "name: demo\nversion: [1, 2}\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "version: [1, 2}", "["),
        "",
        "mismatched bracket",
    );
    assert_eq!(e.severity, Severity::Error);
}

// ------------------------------------------------------------------- names

#[test]
fn operator_names_are_checked() {
    let text = edit(BASE, "- name: sink\n", "- name: the sink\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "- name: the sink", "the sink"),
        "operators[1].name",
        "operator name \"the sink\" must be 1 to 255 characters of A-Z a-z 0-9 _ -",
    );
    // The Display form: file:line:col: error: path: message.
    assert_eq!(
        e.to_string(),
        format!(
            "test.yaml:9:9: error: operators[1].name: operator name \"the sink\" must be 1 to {} characters of A-Z a-z 0-9 _ -",
            fastio_pipeline::MAX_NAME_LEN
        )
    );

    let text = edit(BASE, "- name: sink\n", "- name: sink.v2\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "- name: sink.v2", "sink.v2"),
        "operators[1].name",
        "operator name \"sink.v2\"",
    );

    let long = "s".repeat(256);
    let text = edit(BASE, "- name: sink\n", &format!("- name: {long}\n"));
    let e = only_error(&text);
    check(
        &e,
        (9, 9),
        "operators[1].name",
        "must be 1 to 255 characters",
    );

    let longest = "s".repeat(255);
    let def = ok(&edit(
        BASE,
        "- name: sink\n",
        &format!("- name: {longest}\n"),
    ));
    assert_eq!(def.pipeline.operators[1].name, longest);
}

#[test]
fn operator_names_differing_only_in_case_are_duplicates() {
    let text = format!("{BASE}- name: GEN\n  container: {{image: local, command: [./again]}}\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "- name: GEN", "GEN"),
        "operators[2].name",
        "operator \"GEN\" is already defined (operators[0]; names are case-insensitive)",
    );
}

#[test]
fn output_names_are_unique_in_an_operator() {
    let text = edit(
        BASE,
        "  - {name: label, type: string}\n",
        "  - {name: label, type: string}\n  - {name: Volume, type: u8}\n",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "{name: Volume", "Volume"),
        "operators[0].output[2].name",
        "output \"Volume\" is already defined in this operator (output[0])",
    );

    let text = edit(
        BASE,
        "  - {name: label, type: string}\n",
        "  - {name: label, type: string}\n  - {name: the label, type: string}\n",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "name: the label", "the label"),
        "operators[0].output[2].name",
        "output name \"the label\" must be 1 to 255 characters",
    );
}

#[test]
fn two_operators_may_each_have_an_output_named_result() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: a
  container: {image: local, command: [./a]}
  output:
  - {name: result, type: f32}
- name: b
  container: {image: local, command: [./b]}
  output:
  - {name: result, type: f32}
- name: c
  container: {image: local, command: [./c]}
  input:
  - {from: a, name: result, type: f32}
  - {from: B, name: RESULT, type: float32}
";
    let def = ok(text);
    let entries = &def.pipeline.plan.entries;
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a/result", "b/result"]);
    assert_eq!(entries[0].consumers, [2]);
    assert_eq!(entries[1].consumers, [2]);
    assert_eq!(
        def.pipeline.plan.operators[2].inputs,
        [("result".to_owned(), 0), ("result".to_owned(), 1)]
    );
    assert_eq!(def.pipeline.operators[2].inputs[1].from, Some(1));
    assert_eq!(def.pipeline.schedule, [vec![0, 1], vec![2]]);
}

// ------------------------------------------------------------ `from` links

#[test]
fn from_must_name_an_operator() {
    let text = edit(
        BASE,
        "{from: gen, name: label, type: string}",
        "{from: ghost, name: label, type: string}",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "from: ghost", "ghost"),
        "operators[1].input[1].from",
        "`from` names no operator: \"ghost\"",
    );
}

#[test]
fn from_must_name_an_output_of_that_operator() {
    let text = edit(
        BASE,
        "{from: gen, name: label, type: string}",
        "{from: gen, name: caption, type: string}",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "name: caption", "caption"),
        "operators[1].input[1].name",
        "operator \"gen\" has no output \"caption\"",
    );

    // `from` without `name`.
    let text = edit(
        BASE,
        "{from: gen, name: label, type: string}",
        "{from: gen, type: string}",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "{from: gen, type: string}", "gen"),
        "operators[1].input[1]",
        "an input with `from` needs the `name` of the producer's output",
    );
}

#[test]
fn an_operator_cannot_feed_itself() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: solo
  container: {image: local, command: [./run]}
  input:
  - {from: solo, name: x, type: u8}
  output:
  - {name: x, type: u8}
";
    let e = only_error(text);
    check(
        &e,
        at(text, "from: solo", "solo"),
        "operators[0].input[0].from",
        "an operator cannot feed itself",
    );
}

#[test]
fn input_types_must_match_the_output_exactly() {
    const VOLUME_IN: &str =
        "{from: gen, name: volume, type: array, element-type: float32, shape: [3, -1]}";
    // (changed input, its type as described)
    let cases = [
        (
            "{from: gen, name: volume, type: array, element-type: float64, shape: [3, -1]}",
            "array<float64>[3, -1]",
        ),
        (
            "{from: gen, name: volume, type: array, element-type: float32, shape: [3, 4]}",
            "array<float32>[3, 4]",
        ),
        (
            "{from: gen, name: volume, type: array, element-type: float32, shape: [3, -1, 1]}",
            "array<float32>[3, -1, 1]",
        ),
        ("{from: gen, name: volume, type: string}", "string"),
    ];
    for (input, described) in cases {
        let text = edit(BASE, VOLUME_IN, input);
        let e = only_error(&text);
        // The input's position is that of its `type`.
        let context = format!("{input}\n");
        check(
            &e,
            at(
                &text,
                &context,
                if described == "string" {
                    "string"
                } else {
                    "array"
                },
            ),
            "operators[1].input[0]",
            &format!(
                "type {described} does not match output gen/volume of type array<float32>[3, -1] (types must match exactly)"
            ),
        );
    }

    let text = edit(
        BASE,
        "{from: gen, name: label, type: string}",
        "{from: gen, name: label, type: u8}",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "name: label, type: u8", "u8"),
        "operators[1].input[1]",
        "type uint8 does not match output gen/label of type string",
    );
}

#[test]
fn dynamic_dimensions_and_short_names_match_their_other_spellings() {
    // -1 and 0 are the same dynamic dimension; f32 is float32.
    let text = edit(
        BASE,
        "{from: gen, name: volume, type: array, element-type: float32, shape: [3, -1]}",
        "{from: gen, name: volume, type: array, element-type: f32, shape: [3, 0]}",
    );
    let def = ok(&text);
    assert_eq!(
        def.pipeline.operators[1].inputs[0].ty,
        IoType::Array {
            element: Primitive::Float32,
            shape: vec![Some(3), None],
        }
    );
}

#[test]
fn streams_match_on_their_element_type_not_their_path() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: gen
  container: {image: local, command: [./gen]}
  output:
  - {name: files, type: stream, element-type: dicom, path: /out/files}
- name: sink
  container: {image: local, command: [./sink]}
  input:
  - {from: gen, name: files, type: stream, element-type: dicom, path: /in/files}
";
    let def = ok(text);
    assert!(
        def.pipeline.plan.entries.is_empty(),
        "streams are not entries"
    );
    assert_eq!(
        def.pipeline.operators[1].inputs[0].ty,
        IoType::Stream {
            element: "dicom".to_owned(),
            path: "/in/files".to_owned(),
        }
    );
    assert_eq!(def.pipeline.schedule, [vec![0], vec![1]]);

    let bad = edit(
        text,
        "element-type: dicom, path: /in/files",
        "element-type: nifti, path: /in/files",
    );
    let e = only_error(&bad);
    check(
        &e,
        at(&bad, "{from: gen, name: files, type: stream", "stream"),
        "operators[1].input[0]",
        "type stream<nifti> does not match output gen/files of type stream<dicom>",
    );
}

#[test]
fn cycles_are_errors() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: alpha
  container: {image: local, command: [./alpha]}
  input:
  - {from: beta, name: y, type: u8}
  output:
  - {name: x, type: u8}
- name: beta
  container: {image: local, command: [./beta]}
  input:
  - {from: alpha, name: x, type: u8}
  output:
  - {name: y, type: u8}
";
    let e = only_error(text);
    check(
        &e,
        at(text, "- name: alpha", "alpha"),
        "operators[0]",
        "the operators form a cycle: alpha, beta",
    );
}

// ------------------------------------------------------------------- types

#[test]
fn shape_dimensions_are_minus_one_zero_or_positive() {
    let text = single("{name: v, type: array, element-type: u8, shape: [3, -2, 0, -1, 7]}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "-2", "-2"),
        "operators[0].output[0].shape[1]",
        "-2 is not -1, 0 or a positive size",
    );

    // Every bad dimension is reported.
    let text = single("{name: v, type: array, element-type: u8, shape: [-5, 2, -9]}");
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{}", show(&errs));
    check(
        &errs[0],
        at(&text, "-5", "-5"),
        "operators[0].output[0].shape[0]",
        "-5 is not -1, 0 or a positive size",
    );
    check(
        &errs[1],
        at(&text, "-9", "-9"),
        "operators[0].output[0].shape[2]",
        "-9 is not -1, 0 or a positive size",
    );

    let text = single("{name: v, type: array, element-type: u8, shape: []}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "shape: []", "["),
        "operators[0].output[0].shape",
        "the shape is empty",
    );

    let def = ok(&single(
        "{name: v, type: array, element-type: u8, shape: [3, 0, -1, 7]}",
    ));
    assert_eq!(
        def.pipeline.plan.entries[0].shape,
        [Some(3), None, None, Some(7)]
    );
}

#[test]
fn keys_that_do_not_belong_to_the_type_are_errors() {
    // (output, context of the value, the value, key, type)
    let cases = [
        (
            "{name: s, type: string, shape: [4]}",
            "shape: [4]",
            "[",
            "shape",
            "string",
        ),
        (
            "{name: s, type: string, element-type: u8}",
            "element-type: u8",
            "u8",
            "element-type",
            "string",
        ),
        (
            "{name: s, type: string, path: /s}",
            "path: /s",
            "/s",
            "path",
            "string",
        ),
        (
            "{name: n, type: u16, element-type: u16}",
            "element-type: u16",
            "u16",
            "element-type",
            "u16",
        ),
        (
            "{name: n, type: float64, shape: [1]}",
            "shape: [1]",
            "[",
            "shape",
            "float64",
        ),
        (
            "{name: n, type: i8, path: /n}",
            "path: /n",
            "/n",
            "path",
            "i8",
        ),
        (
            "{name: a, type: array, element-type: u8, shape: [2], path: /tmp/a}",
            "path: /tmp/a",
            "/tmp/a",
            "path",
            "array",
        ),
        (
            "{name: d, type: stream, element-type: dicom, path: /out, shape: [1]}",
            "shape: [1]",
            "[",
            "shape",
            "stream",
        ),
    ];
    for (output, context, value, key, ty) in cases {
        let text = single(output);
        let e = only_error(&text);
        check(
            &e,
            at(&text, context, value),
            &format!("operators[0].output[0].{key}"),
            &format!("`{key}` does not belong to type {ty}"),
        );
    }
}

#[test]
fn arrays_and_streams_need_their_keys() {
    let text = single("{name: a, type: array, shape: [2]}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: array", "array"),
        "operators[0].output[0]",
        "an array needs `element-type`",
    );

    let text = single("{name: a, type: array, element-type: u8}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: array", "array"),
        "operators[0].output[0]",
        "an array needs `shape`",
    );

    let text = single("{name: d, type: stream, path: /out}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: stream", "stream"),
        "operators[0].output[0]",
        "a stream needs `element-type`",
    );
}

#[test]
fn unknown_element_types_and_types_are_errors() {
    for element in ["bool", "float128", "complex64", "Float32"] {
        let text = single(&format!(
            "{{name: a, type: array, element-type: {element}, shape: [2]}}"
        ));
        let e = only_error(&text);
        check(
            &e,
            at(&text, &format!("element-type: {element}"), element),
            "operators[0].output[0].element-type",
            &format!("unknown element type {element:?}"),
        );
    }

    let text = single("{name: a, type: tensor}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: tensor", "tensor"),
        "operators[0].output[0].type",
        "unknown type \"tensor\" (array, string, stream, or a primitive such as float32 or f32)",
    );
}

const PRIMITIVES: [(&str, &str, Primitive); 11] = [
    ("uint8", "u8", Primitive::UInt8),
    ("uint16", "u16", Primitive::UInt16),
    ("uint32", "u32", Primitive::UInt32),
    ("uint64", "u64", Primitive::UInt64),
    ("int8", "i8", Primitive::Int8),
    ("int16", "i16", Primitive::Int16),
    ("int32", "i32", Primitive::Int32),
    ("int64", "i64", Primitive::Int64),
    ("float16", "f16", Primitive::Float16),
    ("float32", "f32", Primitive::Float32),
    ("float64", "f64", Primitive::Float64),
];

#[test]
fn short_names_are_the_long_names() {
    // The producer writes short names, the consumer long ones: they match.
    let mut outputs = String::new();
    let mut inputs = String::new();
    for (long, short, _) in PRIMITIVES {
        outputs.push_str(&format!("  - {{name: s-{long}, type: {short}}}\n"));
        outputs.push_str(&format!(
            "  - {{name: a-{long}, type: array, element-type: {short}, shape: [2, -1]}}\n"
        ));
        inputs.push_str(&format!(
            "  - {{from: gen, name: s-{long}, type: {long}}}\n"
        ));
        inputs.push_str(&format!(
            "  - {{from: gen, name: a-{long}, type: array, element-type: {long}, shape: [2, 0]}}\n"
        ));
    }
    let text = format!(
        "\
api-version: 0.5.0
name: demo
operators:
- name: gen
  container: {{image: local, command: [./gen]}}
  output:
{outputs}- name: sink
  container: {{image: local, command: [./sink]}}
  input:
{inputs}"
    );
    let def = ok(&text);
    let entries = &def.pipeline.plan.entries;
    assert_eq!(entries.len(), 2 * PRIMITIVES.len());
    for (k, (long, _, p)) in PRIMITIVES.into_iter().enumerate() {
        let scalar = &entries[2 * k];
        assert_eq!(scalar.name, format!("gen/s-{long}"));
        assert_eq!(scalar.kind, EntryKind::Scalar);
        assert_eq!(scalar.element.name(), long);
        assert_eq!(scalar.shape, [Some(1)]);
        assert_eq!(scalar.consumers, [1]);
        let array = &entries[2 * k + 1];
        assert_eq!(array.name, format!("gen/a-{long}"));
        assert_eq!(array.kind, EntryKind::Array);
        assert_eq!(array.element.name(), long);
        assert_eq!(array.shape, [Some(2), None]);
        assert_eq!(array.consumers, [1]);
        assert_eq!(
            def.pipeline.operators[0].outputs[2 * k].ty,
            IoType::Scalar(p)
        );
        assert_eq!(
            def.pipeline.operators[1].inputs[2 * k].ty,
            IoType::Scalar(p)
        );
        assert_eq!(dtype::clara::primitive(long), Some(p));
    }
}

#[test]
fn type_is_required() {
    let text = single("{name: a}");
    let e = only_error(&text);
    // Without a `type`, the output (or input) itself locates the problem,
    // not its operator.
    check(
        &e,
        at(&text, "- {name: a}", "{"),
        "operators[0].output[0]",
        "`type` is missing",
    );

    let text = single_input("{name: frames}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "- {name: frames}", "{"),
        "operators[0].input[0]",
        "`type` is missing",
    );
}

#[test]
fn outputs_need_a_name() {
    let text = single("{type: u8}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "{type: u8}", "u8"),
        "operators[0].output[0]",
        "an output needs a `name` (api-version 0.5.0+)",
    );
}

#[test]
fn streams_need_an_absolute_path() {
    let text = single("{name: d, type: stream, element-type: dicom, path: data/out}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "path: data/out", "data/out"),
        "operators[0].output[0].path",
        "a stream's path must be absolute, not \"data/out\"",
    );

    let text = single("{name: d, type: stream, element-type: dicom}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "type: stream", "stream"),
        "operators[0].output[0]",
        "a stream needs `path`",
    );

    // Payload inputs too.
    let text = single_input("{type: stream, element-type: dicom, path: input}");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "path: input", "input"),
        "operators[0].input[0].path",
        "a stream's path must be absolute, not \"input\"",
    );

    let def = ok(&single_input(
        "{type: stream, element-type: dicom, path: /input}",
    ));
    let input = &def.pipeline.operators[0].inputs[0];
    assert_eq!(input.from, None);
    assert_eq!(input.name, None);
    assert_eq!(
        input.ty,
        IoType::Stream {
            element: "dicom".to_owned(),
            path: "/input".to_owned(),
        }
    );
}

#[test]
fn api_versions_before_0_5_0_are_rejected() {
    for old in ["0.4.0", "0.4", "0.3.9", "zero"] {
        let text = edit(BASE, "api-version: 0.5.0", &format!("api-version: {old}"));
        let e = only_error(&text);
        check(
            &e,
            (1, 14),
            "api-version",
            &format!("api-version {old:?}: typed pipelines need 0.5.0 or later"),
        );
    }
    for new in ["0.5", "0.6.0", "1.0.0", "\"0.5.0\""] {
        let def = ok(&edit(
            BASE,
            "api-version: 0.5.0",
            &format!("api-version: {new}"),
        ));
        assert_eq!(def.pipeline.api_version, new.trim_matches('"'));
    }
}

#[test]
fn a_pipeline_needs_an_operator() {
    let text = "api-version: 0.5.0\nname: empty\noperators: []\n";
    let e = only_error(text);
    check(
        &e,
        at(text, "name: empty", "empty"),
        "operators",
        "the pipeline has no operator",
    );
}

// ------------------------------------------------------------- parameters

const WITH_PARAMETERS: &str = "\
api-version: 0.5.0
name: demo
parameters:
  width: 224
  image: local
operators:
- name: gen
  container: {image: ${{ image }}, command: [./produce]}
  output:
  - {name: volume, type: array, element-type: float32, shape: [3, ${{ width }}]}
- name: sink
  container: {image: ${{image}}, command: [./consume]}
  input:
  - {from: gen, name: volume, type: array, element-type: float32, shape: [3, ${{ width }}]}
";

#[test]
fn placeholders_take_the_default_values() {
    let def = ok(WITH_PARAMETERS);
    assert!(def.warnings.is_empty(), "{}", show(&def.warnings));
    assert_eq!(def.pipeline.plan.entries[0].shape, [Some(3), Some(224)]);
    assert_eq!(def.pipeline.operators[0].image.as_deref(), Some("local"));
    assert_eq!(def.pipeline.operators[1].image.as_deref(), Some("local"));
    let values: Vec<(&str, &str)> = def
        .parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(values, [("image", "local"), ("width", "224")]);
}

#[test]
fn params_override_the_defaults() {
    let def = ok_with(WITH_PARAMETERS, &params(&[("width", "512")]));
    assert_eq!(def.pipeline.plan.entries[0].shape, [Some(3), Some(512)]);
    assert_eq!(def.parameters["width"], "512");
    assert_eq!(def.parameters["image"], "local");
}

#[test]
fn unknown_params_are_rejected() {
    let errs = errors_with(WITH_PARAMETERS, &params(&[("height", "1")]));
    assert_eq!(errs.len(), 1, "{}", show(&errs));
    check(
        &errs[0],
        (0, 0),
        "parameters",
        "--param height: no such parameter (declared: image, width)",
    );

    let errs = errors_with(BASE, &params(&[("width", "1")]));
    assert_eq!(errs.len(), 1, "{}", show(&errs));
    check(
        &errs[0],
        (0, 0),
        "parameters",
        "--param width: no such parameter (declared: none)",
    );
}

#[test]
fn param_values_with_line_breaks_are_rejected() {
    let errs = errors_with(WITH_PARAMETERS, &params(&[("width", "1\n2")]));
    assert!(!errs.is_empty());
    for e in &errs {
        check(
            e,
            (0, 0),
            "parameters",
            "parameter width has a line break in its value",
        );
    }
}

#[test]
fn placeholders_need_a_declared_parameter() {
    let text = edit(
        WITH_PARAMETERS,
        "command: [./produce]",
        "command: [./produce, ${{ mode }}]",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "${{ mode }}", "${{"),
        "",
        "placeholder ${{ mode }} has no value: no such parameter",
    );
}

#[test]
fn unused_parameters_are_warnings() {
    let text = edit(
        WITH_PARAMETERS,
        "  image: local\n",
        "  image: local\n  unused: 7\n",
    );
    let def = ok(&text);
    assert_eq!(def.warnings.len(), 1, "{}", show(&def.warnings));
    let w = &def.warnings[0];
    assert_eq!(w.severity, Severity::Warning);
    check(
        w,
        at(&text, "unused: 7", "7"),
        "parameters.unused",
        "parameter unused is declared but nothing uses it",
    );
    assert!(
        w.to_string()
            .starts_with("test.yaml:6:11: warning: parameters.unused: ")
    );
    assert_eq!(def.parameters["unused"], "7");
}

// ---------------------------------------------------------------- warnings

#[test]
fn keys_the_local_driver_ignores_are_warnings() {
    let text = "\
api-version: 0.5.0
name: demo
pull-secrets: [regcred]
operators:
- name: gen
  container: {image: local, command: [./produce]}
  services: [{name: db, container: {image: postgres}}]
  models: [{name: segmentation}]
  requests: {gpu: 1, memory: 4096}
  output:
  - {name: volume, type: u8}
";
    let def = ok(text);
    let w = &def.warnings;
    assert_eq!(w.len(), 4, "{}", show(w));
    assert!(w.iter().all(|d| d.severity == Severity::Warning));
    check(
        &w[0],
        at(text, "pull-secrets: [regcred]", "["),
        "pull-secrets",
        "ignored by the local driver",
    );
    check(
        &w[1],
        at(text, "services: [", "["),
        "operators[0].services",
        "ignored by the local driver",
    );
    check(
        &w[2],
        at(text, "models: [", "["),
        "operators[0].models",
        "ignored by the local driver",
    );
    check(
        &w[3],
        at(text, "requests: {", "{"),
        "operators[0].requests",
        "ignored by the local driver",
    );
}

#[test]
fn container_tag_command_and_variables() {
    let text = edit(
        BASE,
        "{image: local, command: [./produce]}",
        "{image: registry/gen, tag: 20, command: [./produce, --fast], variables: {MODE: fast, LEVEL: 3}}",
    );
    let def = ok(&text);
    let gen_op = &def.pipeline.operators[0];
    assert_eq!(gen_op.image.as_deref(), Some("registry/gen"));
    assert_eq!(gen_op.tag, "20");
    assert_eq!(gen_op.command, ["./produce", "--fast"]);
    let vars: Vec<(&str, &str)> = gen_op
        .variables
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(vars, [("LEVEL", "3"), ("MODE", "fast")]);
    // Absent: "latest".
    assert_eq!(def.pipeline.operators[1].tag, "latest");

    for (written, read) in [("1.5", "1.5"), ("\"1.5\"", "1.5"), ("v2", "v2"), ("7", "7")] {
        let text = edit(
            BASE,
            "{image: local, command: [./produce]}",
            &format!("{{image: local, tag: {written}, command: [./produce]}}"),
        );
        assert_eq!(ok(&text).pipeline.operators[0].tag, read, "tag: {written}");
    }
}

/// A number-looking tag should be read as written. `Text` goes through
/// `deserialize_any`, so `1.10` becomes the float 1.1 (and `on` becomes
/// `true`, `0x10` becomes 16).
#[test]
fn tags_and_commands_are_read_as_written() {
    let text = edit(
        BASE,
        "{image: local, command: [./produce]}",
        "{image: local, tag: 1.10, command: [./produce, on, 010]}",
    );
    let def = ok(&text);
    assert_eq!(def.pipeline.operators[0].tag, "1.10");
    assert_eq!(
        def.pipeline.operators[0].command,
        ["./produce", "on", "010"]
    );
}

#[test]
fn an_operator_without_command_is_a_warning() {
    let text = edit(
        BASE,
        "{image: local, command: [./produce]}",
        "{image: local}",
    );
    let def = ok(&text);
    assert_eq!(def.warnings.len(), 1, "{}", show(&def.warnings));
    let w = &def.warnings[0];
    assert_eq!(w.severity, Severity::Warning);
    check(
        w,
        at(&text, "- name: gen", "gen"),
        "operators[0].container.command",
        "no command: `fastio run` cannot start this operator",
    );
    assert!(def.pipeline.operators[0].command.is_empty());

    // No container at all, or an empty command: the same.
    let text = edit(
        BASE,
        "  container: {image: local, command: [./consume]}\n",
        "",
    );
    let def = ok(&text);
    assert_eq!(def.warnings.len(), 1, "{}", show(&def.warnings));
    check(
        &def.warnings[0],
        at(&text, "- name: sink", "sink"),
        "operators[1].container.command",
        "no command",
    );
    assert_eq!(def.pipeline.operators[1].image, None);
    let text = edit(BASE, "command: [./consume]", "command: []");
    assert_eq!(ok(&text).warnings.len(), 1);
}

// ------------------------------------------------------------ hostile YAML

#[test]
fn alias_bombs_are_stopped_quickly() {
    let mut text = String::from("api-version: 0.5.0\nname: bomb\n");
    text.push_str("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let prev = format!("*l{}", level - 1);
        let refs = vec![prev; 10].join(", ");
        text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    text.push_str(&BASE["api-version: 0.5.0\nname: demo\n".len()..]);
    let start = Instant::now();
    let errs = errors(&text);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(errs.len(), 1, "{}", show(&errs));
    let message = errs[0].message.to_lowercase();
    assert!(
        message.contains("alias") || message.contains("budget"),
        "{}",
        errs[0]
    );
}

#[test]
fn deep_nesting_is_an_error() {
    let text = format!(
        "api-version: 0.5.0\nname: deep\ndescription: {}{}\n{}",
        "[".repeat(200),
        "]".repeat(200),
        &BASE["api-version: 0.5.0\nname: demo\n".len()..]
    );
    let start = Instant::now();
    let e = only_error(&text);
    assert!(start.elapsed() < Duration::from_secs(5));
    check_line(&e, 3, "", "Depth");
}

#[test]
fn definitions_over_the_byte_limit_are_refused() {
    let text = format!("{BASE}#{}\n", "x".repeat(2 << 20));
    let e = only_error(&text);
    check(
        &e,
        (0, 0),
        "",
        &format!(
            "the definition has {} bytes; at most {MAX_DEFINITION_BYTES} are read",
            text.len()
        ),
    );
    assert_eq!(MAX_DEFINITION_BYTES, 1 << 20);
}

#[test]
fn several_documents_are_an_error() {
    let text = format!("{BASE}---\n{BASE}");
    let e = only_error(&text);
    assert!(e.message.to_lowercase().contains("document"), "{e}");
}

// --------------------------------------------------------- every error

#[test]
fn every_error_is_reported() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: bad name
  container: {image: local, command: [./a]}
  output:
  - {name: a, type: array, element-type: complex64, shape: [2]}
- name: other
  container: {image: local, command: [./b]}
  output:
  - {name: b, type: array, element-type: u8, shape: [2, -7]}
";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{}", show(&errs));
    check(
        &errs[0],
        at(text, "- name: bad name", "bad name"),
        "operators[0].name",
        "operator name \"bad name\"",
    );
    check(
        &errs[1],
        at(text, "element-type: complex64", "complex64"),
        "operators[0].output[0].element-type",
        "unknown element type \"complex64\"",
    );
    check(
        &errs[2],
        at(text, "-7", "-7"),
        "operators[1].output[0].shape[1]",
        "-7 is not -1, 0 or a positive size",
    );
}

// ------------------------------------------------------ resolved pipelines

#[test]
fn entries_consumers_and_schedule_are_resolved() {
    let text = "\
api-version: 0.5.0
name: Demo
operators:
- name: Gen
  container: {image: local, command: [./produce]}
  output:
  - {name: Volume, type: array, element-type: f32, shape: [3, -1, 0, 5]}
  - {name: count, type: i64}
  - {name: label, type: string}
  - {name: frames, type: stream, element-type: dicom, path: /data/frames}
- name: left
  container: {image: local, command: [./left]}
  input:
  - {from: gen, name: volume, type: array, element-type: float32, shape: [3, 0, -1, 5]}
  - {from: GEN, name: COUNT, type: int64}
  output:
  - {name: out, type: u8}
- name: right
  container: {image: local, command: [./right]}
  input:
  - {from: Gen, name: Volume, type: array, element-type: float32, shape: [3, -1, -1, 5]}
  - {from: gen, name: frames, type: stream, element-type: dicom, path: /mnt/frames}
  output:
  - {name: out, type: u8}
- name: join
  container: {image: local, command: [./join]}
  input:
  - {from: left, name: out, type: uint8}
  - {from: right, name: out, type: u8}
  - {from: gen, name: label, type: string}
";
    let def = ok(text);
    let p = &def.pipeline;
    assert_eq!(p.name, "Demo");
    assert_eq!(p.plan.pipeline, "Demo");
    let names: Vec<&str> = p.operators.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["Gen", "left", "right", "join"]);

    let e = &p.plan.entries;
    assert_eq!(e.len(), 5, "the stream is not an entry: {e:?}");
    // Case kept in `name`, folded in `key`.
    assert_eq!(e[0].name, "Gen/Volume");
    assert_eq!(e[0].key, "gen/volume");
    assert_eq!(e[0].kind, EntryKind::Array);
    assert_eq!(e[0].element.name(), "float32");
    assert_eq!(e[0].shape, [Some(3), None, None, Some(5)]);
    assert_eq!(e[0].dynamic_indices(), [1, 2]);
    assert!(!e[0].is_static());
    assert_eq!(e[0].producer, 0);
    assert_eq!(e[0].consumers, [1, 2], "fan-out to two consumers");

    assert_eq!(e[1].name, "Gen/count");
    assert_eq!(e[1].kind, EntryKind::Scalar);
    assert_eq!(e[1].element.name(), "int64");
    assert_eq!(e[1].shape, [Some(1)]);
    assert!(e[1].is_static());
    assert_eq!(e[1].producer, 0);
    assert_eq!(e[1].consumers, [1]);

    assert_eq!(e[2].name, "Gen/label");
    assert_eq!(e[2].kind, EntryKind::String);
    assert_eq!(e[2].element.name(), "uint8");
    assert_eq!(e[2].shape, [None]);
    assert!(!e[2].is_static());
    assert_eq!(e[2].producer, 0);
    assert_eq!(e[2].consumers, [3]);

    assert_eq!(e[3].name, "left/out");
    assert_eq!(e[3].kind, EntryKind::Scalar);
    assert_eq!(e[3].element.name(), "uint8");
    assert_eq!(e[3].producer, 1);
    assert_eq!(e[3].consumers, [3]);
    assert_eq!(e[4].name, "right/out");
    assert_eq!(e[4].producer, 2);
    assert_eq!(e[4].consumers, [3]);

    // Each operator's share, with the output names as declared.
    let ops = &p.plan.operators;
    assert_eq!(
        ops[0].outputs,
        [
            ("Volume".to_owned(), 0),
            ("count".to_owned(), 1),
            ("label".to_owned(), 2)
        ]
    );
    assert!(ops[0].inputs.is_empty());
    assert_eq!(
        ops[1].inputs,
        [("Volume".to_owned(), 0), ("count".to_owned(), 1)]
    );
    assert_eq!(ops[2].inputs, [("Volume".to_owned(), 0)]);
    assert_eq!(
        ops[3].inputs,
        [
            ("out".to_owned(), 3),
            ("out".to_owned(), 4),
            ("label".to_owned(), 2)
        ]
    );
    assert_eq!(p.plan.operator("GEN"), Some(0));

    // The resolved inputs name their producer by index.
    let froms: Vec<Option<usize>> = p.operators[3].inputs.iter().map(|i| i.from).collect();
    assert_eq!(froms, [Some(1), Some(2), Some(0)]);
    assert_eq!(p.operators[1].inputs[0].name.as_deref(), Some("Volume"));

    // A diamond: Gen, then left and right together, then join.
    assert_eq!(p.schedule, [vec![0], vec![1, 2], vec![3]]);

    // The plan survives its encoding.
    let bytes = p.plan.encode().unwrap();
    assert_eq!(fastio::plan::Plan::decode(&bytes).unwrap(), p.plan);
}

#[test]
fn independent_operators_share_the_first_wave() {
    let text = "\
api-version: 0.5.0
name: demo
operators:
- name: late
  container: {image: local, command: [./late]}
  input:
  - {from: early, name: x, type: u8}
- name: early
  container: {image: local, command: [./early]}
  output:
  - {name: x, type: u8}
- name: alone
  container: {image: local, command: [./alone]}
";
    let def = ok(text);
    // Definition order does not have to follow the edges.
    assert_eq!(def.pipeline.schedule, [vec![1, 2], vec![0]]);
    assert_eq!(def.pipeline.plan.entries[0].name, "early/x");
    assert_eq!(def.pipeline.plan.entries[0].producer, 1);
    assert_eq!(def.pipeline.plan.entries[0].consumers, [0]);
}

// ---------------------------------------------------------- invalid corpus

/// Every file in `tests/data/invalid` starts with `# expect: <line>: <fragment>`;
/// parsing it must give an error on that line whose message has that
/// fragment.
#[test]
fn invalid_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/invalid");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 15,
        "only {} files in {}",
        files.len(),
        dir.display()
    );
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let first = text.lines().next().unwrap_or("");
        let expect = first
            .strip_prefix("# expect: ")
            .unwrap_or_else(|| panic!("{}: no `# expect:` line", path.display()));
        let (line, fragment) = expect
            .split_once(": ")
            .unwrap_or_else(|| panic!("{}: `# expect: <line>: <fragment>`", path.display()));
        let line: u64 = line
            .parse()
            .unwrap_or_else(|_| panic!("{}: bad line {line:?}", path.display()));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match Definition::parse(&name, &text, &[]) {
            Ok(_) => failures.push(format!("{name}: parsed without error")),
            Err(diags) => {
                let found = diags.iter().any(|d| {
                    d.severity == Severity::Error && d.line == line && d.message.contains(fragment)
                });
                if !found {
                    failures.push(format!(
                        "{name}: no error on line {line} with {fragment:?}; got:\n{}",
                        show(&diags)
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------- streaming

/// BASE with a `streaming:` section (starting at line 14).
fn streaming(section: &str) -> String {
    format!("{BASE}streaming:\n{section}")
}

const MAX_SHAPES: &str = "  max-shape:\n    gen/volume: [3, 640]\n    gen/label: [256]\n";

#[test]
fn a_streaming_section_resolves_into_the_plan() {
    let text = streaming(&format!(
        "  depth: 8\n  overflow: drop-oldest\n  frames: 100\n  duration: 2.5\n{MAX_SHAPES}  restart:\n    SINK: {{policy: on-failure}}\n"
    ));
    let def = ok(&text);
    let st = def.pipeline.plan.streaming.unwrap();
    assert_eq!((st.depth, st.drop_oldest), (8, true));
    assert_eq!((st.frames, st.duration_ms), (Some(100), Some(2500)));
    assert_eq!(st.max_shapes, vec![vec![3, 640], vec![256]]);
    assert_eq!(st.restarts, vec![0, 3]);
    // Defaults: depth 4, block, no restart.
    let def = ok(&streaming(MAX_SHAPES));
    let st = def.pipeline.plan.streaming.unwrap();
    assert_eq!((st.depth, st.drop_oldest, st.frames), (4, false, None));
}

#[test]
fn streaming_values_out_of_range_are_errors_at_the_value() {
    let cases = [
        (
            "  depth: 0\n",
            "depth: 0",
            "0",
            "streaming.depth",
            "depth 0",
        ),
        (
            "  depth: 5000\n",
            "depth: 5000",
            "5000",
            "streaming.depth",
            "1 to 4096",
        ),
        (
            "  overflow: newest\n",
            "overflow: newest",
            "newest",
            "streaming.overflow",
            "block or drop-oldest",
        ),
        (
            "  frames: 0\n",
            "frames: 0",
            "0",
            "streaming.frames",
            "at least 1",
        ),
        (
            "  duration: -1\n",
            "duration: -1",
            "-1",
            "streaming.duration",
            "more than 0",
        ),
    ];
    for (line, context, target, path, fragment) in cases {
        let text = streaming(&format!("{line}{MAX_SHAPES}"));
        let e = only_error(&text);
        check(&e, at(&text, context, target), path, fragment);
    }
}

#[test]
fn every_dynamic_output_needs_a_largest_shape_and_no_static_one_may_have_one() {
    // Missing: the error names the entry, at the section.
    let text = streaming("  max-shape:\n    gen/volume: [3, 640]\n");
    let e = only_error(&text);
    // (The section's position is that of its first key.)
    check_line(&e, 15, "streaming.max-shape", "gen/label is dynamic");
    // A fixed dimension must keep its size; ranks must match.
    let text = streaming("  max-shape:\n    gen/volume: [4, 640]\n    gen/label: [256]\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "[4, 640]", "4"),
        "streaming.max-shape.gen/volume[0]",
        "fixed at 3",
    );
    let text = streaming("  max-shape:\n    gen/volume: [640]\n    gen/label: [256]\n");
    let e = only_error(&text);
    check_line(&e, 16, "streaming.max-shape.gen/volume", "1 dimensions");
    // Unknown entries; dimensions out of range.
    let text = streaming(&format!("{MAX_SHAPES}    gen/nope: [1]\n"));
    let e = only_error(&text);
    check_line(
        &e,
        18,
        "streaming.max-shape.gen/nope",
        "no shared-memory output",
    );
    let text = streaming("  max-shape:\n    gen/volume: [3, 0]\n    gen/label: [256]\n");
    let e = only_error(&text);
    check(
        &e,
        at(&text, "[3, 0]", "0"),
        "streaming.max-shape.gen/volume[1]",
        "dimension 0",
    );
}

#[test]
fn a_static_output_with_a_largest_shape_is_a_contradiction() {
    let text = BASE.replace("[3, -1]", "[3, 2]");
    let text = format!("{text}streaming:\n{MAX_SHAPES}");
    let e = only_error(&text);
    check_line(&e, 16, "streaming.max-shape.gen/volume", "is static");
}

#[test]
fn restart_names_an_operator_and_the_only_policy() {
    let text = streaming(&format!(
        "{MAX_SHAPES}  restart:\n    nobody: {{policy: on-failure}}\n"
    ));
    let e = only_error(&text);
    check_line(&e, 19, "streaming.restart.nobody", "no operator named");
    let text = streaming(&format!(
        "{MAX_SHAPES}  restart:\n    sink: {{policy: always}}\n"
    ));
    let e = only_error(&text);
    check(
        &e,
        at(&text, "always", "always"),
        "streaming.restart.sink.policy",
        "only on-failure",
    );
    let text = streaming(&format!(
        "{MAX_SHAPES}  restart:\n    sink: {{policy: on-failure, limit: 0}}\n"
    ));
    let e = only_error(&text);
    check(
        &e,
        at(&text, "limit: 0", "0"),
        "streaming.restart.sink.limit",
        "1 to 100",
    );
}

#[test]
fn unknown_streaming_keys_and_disk_streams_are_errors() {
    let text = streaming(&format!("{MAX_SHAPES}  speed: 3\n"));
    let e = only_error(&text);
    check(
        &e,
        at(&text, "speed: 3", "speed"),
        "",
        "unknown field `speed`",
    );
    let text = edit(
        BASE,
        "  - {name: label, type: string}\n- name: sink",
        "  - {name: label, type: string}\n  - {name: log, type: stream, element-type: txt, path: /tmp/x}\n- name: sink",
    );
    let text = format!("{text}streaming:\n{MAX_SHAPES}");
    let e = only_error(&text);
    // At the disk output itself, not the `streaming:` section.
    check(
        &e,
        at(&text, "- {name: log, type: stream", "{"),
        "operators[0].output[2]",
        "disk",
    );
}

/// Issue 28: the same producer's output declared twice as an input of one
/// operator is an error at the second declaration, as duplicate outputs
/// are.
#[test]
fn the_same_input_twice_is_an_error_at_the_second() {
    let text = edit(
        BASE,
        "  - {from: gen, name: label, type: string}\n",
        "  - {from: gen, name: label, type: string}\n  - {from: GEN, name: Volume, type: array, element-type: float32, shape: [3, -1]}\n",
    );
    let e = only_error(&text);
    check(
        &e,
        at(&text, "name: Volume", "Volume"),
        "operators[1].input[2]",
        "input gen/volume is already declared in this operator (input[0])",
    );
}

/// Issue 28: a YAML comment that mentions a placeholder is not
/// substituted (it is text, not a use of a parameter).
#[test]
fn placeholders_in_comments_are_not_substituted() {
    let text = format!("# every ${{{{ name }}}} has a default\n{BASE}");
    let def = ok(&text);
    assert_eq!(def.pipeline.name, "demo");
}
