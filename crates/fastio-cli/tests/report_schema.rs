//! Issue 50 (8): `fastio run --report json` is an interface. Real reports
//! (one-shot runs that succeed, exit non-zero, are killed by a signal, time
//! out or cannot start; streaming runs that succeed, fail with a poisoned
//! consequence, and record) are validated against the schema shipped in
//! `docs/schemas/run-report.schema.json`, which is strict: a dropped,
//! renamed or added field fails. Every property of the schema is named in
//! `docs/pipelines.md`, and every key its tables list is in the schema, so
//! a change to the report changes the schema and its docs together.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let path = repo().join("docs/schemas/run-report.schema.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator() -> jsonschema::Validator {
    let schema = schema();
    jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("not a JSON Schema: {e}"));
    jsonschema::validator_for(&schema).unwrap()
}

/// The reasons `report` does not match the schema (empty when it does).
fn errors(v: &jsonschema::Validator, report: &Value) -> Vec<String> {
    v.iter_errors(report)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("fastio-cli-report-schema-{}", std::process::id()))
}

/// `fastio run FILE ARGS --report json`: the process's output and its
/// report (stdout is the report alone).
fn report(file: &Path, args: &[&str]) -> (Output, Value) {
    let out = Command::new(common::fastio())
        .arg("run")
        .arg(file)
        .args(args)
        .args(["--report", "json"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

/// `x` runs `script`; `y` publishes the string `y/note`, which nobody
/// consumes (a result).
fn one_shot(name: &str, script: &str) -> PathBuf {
    let testop = common::example("fio-testop").display().to_string();
    common::write(
        &dir(),
        &format!("{name}.yaml"),
        &format!(
            "api-version: 0.5.0\nname: {name}\noperators:\n\
- name: x\n  container: {{image: sh, command: [sh, -c, '{script}']}}\n\
- name: y\n  container: {{image: t, command: [{testop}, string, note, hello]}}\n  output:\n  - {{name: note, type: string}}\n"
        ),
    )
}

/// A source, a stage and a sink of `fio-streamop` (`stage_env`: the
/// stage's variables), `frames` frames.
fn streaming(name: &str, stage_env: &str, frames: u64, record: Option<&str>) -> PathBuf {
    let streamop = common::example("fio-streamop").display().to_string();
    let arr = "type: array, element-type: uint32, shape: [-1, 64]";
    let record = record.map_or(String::new(), |r| format!("  record: {r}\n"));
    common::write(
        &dir(),
        &format!("{name}.yaml"),
        &format!(
            "api-version: 0.5.0\nname: {name}\noperators:\n\
- name: src\n  container: {{image: t, command: [{streamop}, source, v]}}\n  output: [{{name: v, {arr}}}]\n\
- name: mid\n  container: {{image: t, command: [{streamop}, stage, v, w], variables: {{{stage_env}}}}}\n  input: [{{from: src, name: v, {arr}}}]\n  output: [{{name: w, {arr}}}]\n\
- name: sink\n  container: {{image: t, command: [{streamop}, sink, w]}}\n  input: [{{from: mid, name: w, {arr}}}]\n\
streaming:\n  frames: {frames}\n{record}  max-shape:\n    src/v: [4, 64]\n    mid/w: [4, 64]\n"
        ),
    )
}

/// The report's failure: `what` and `text` are the line the CLI printed
/// (`fastio: WHAT`, then the operator's last stderr lines if any).
fn failure_is_the_printed_line(out: &Output, report: &Value) -> Value {
    let f = report["failure"].clone();
    assert!(f.is_object(), "{report}");
    let what = f["what"].as_str().unwrap_or_else(|| panic!("no what: {f}"));
    assert_eq!(f["text"], f["what"], "{f}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("fastio: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(
        line == what || line == format!("{what}; its last stderr lines:"),
        "{line:?} against {what:?}"
    );
    f
}

/// Real reports of every shape a run gives, valid against the schema; the
/// failure's `what` is the line the CLI printed.
#[test]
fn real_reports_match_the_shipped_schema() {
    let v = validator();
    let check = |label: &str, report: &Value| {
        let e = errors(&v, report);
        assert!(e.is_empty(), "{label}: {e:#?}\n{report:#}");
    };

    // One-shot, succeeding: a string result nobody consumes.
    let (out, r) = report(&one_shot("ok", "echo fine"), &[]);
    assert!(out.status.success(), "{out:?}");
    check("one-shot ok", &r);
    assert_eq!(
        (r["succeeded"].as_bool(), r["failure"].is_null()),
        (Some(true), true)
    );
    assert_eq!(r["operators"].as_array().map(Vec::len), Some(2), "{r}");
    assert_eq!(
        r["results"],
        serde_json::json!([{"entry": "y/note", "text": "hello"}]),
        "{r}"
    );

    // One-shot, an operator exits 3 after a line on stderr.
    let (out, r) = report(&one_shot("exit", "echo bad >&2; exit 3"), &[]);
    assert_eq!(out.status.code(), Some(1));
    check("one-shot exit 3", &r);
    let f = failure_is_the_printed_line(&out, &r);
    assert_eq!(
        (
            f["kind"].as_str(),
            f["operator"].as_str(),
            f["code"].as_i64()
        ),
        (Some("exited"), Some("x"), Some(3)),
        "{f}"
    );
    assert_eq!(f["what"], "operator x exited with status 3");

    // Killed by a signal it did not get from the driver.
    let (out, r) = report(&one_shot("signal", "kill -9 $$"), &[]);
    check("one-shot signal 9", &r);
    let f = failure_is_the_printed_line(&out, &r);
    assert_eq!(
        (f["kind"].as_str(), f["signal"].as_i64()),
        (Some("signaled"), Some(9)),
        "{f}"
    );
    assert_eq!(f["what"], "operator x was killed by signal 9");

    // Past --timeout.
    let (out, r) = report(&one_shot("slow", "sleep 30"), &["--timeout", "0.3"]);
    check("one-shot timed out", &r);
    let f = failure_is_the_printed_line(&out, &r);
    assert_eq!(f["kind"], "timed-out", "{f}");

    // A command that cannot start.
    let nothing = common::write(
        &dir(),
        "spawn.yaml",
        "api-version: 0.5.0\nname: spawn\noperators:\n\
- name: x\n  container: {image: t, command: [/nonexistent/fastio-no-such-binary]}\n",
    );
    let (out, r) = report(&nothing, &[]);
    check("spawn failed", &r);
    let f = failure_is_the_printed_line(&out, &r);
    assert_eq!(
        (f["kind"].as_str(), f["operator"].as_str()),
        (Some("spawn-failed"), Some("x")),
        "{f}"
    );

    // Streaming, succeeding: every operator's frames.
    let (out, r) = report(&streaming("stream", "", 40, None), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check("streaming ok", &r);
    for o in r["operators"].as_array().unwrap() {
        assert!(o["frames"]["steps"].as_u64() == Some(40), "{o}");
    }
    let edge = r["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entry"] == "src/v");
    assert_eq!(edge.map(|e| e["frames"].clone()), Some(40.into()), "{r}");

    // Streaming, the stage exits at frame 17: the sink's own failure is a
    // poisoned stream, in its operator entry.
    let (out, r) = report(&streaming("poison", "FAIL_AT: '17'", 100_000, None), &[]);
    check("streaming failure", &r);
    let f = failure_is_the_printed_line(&out, &r);
    assert_eq!(
        (
            f["kind"].as_str(),
            f["operator"].as_str(),
            f["frame"].as_u64()
        ),
        (Some("exited"), Some("mid"), Some(17)),
        "{f}"
    );
    let sink = r["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "sink")
        .unwrap();
    assert_eq!(sink["failure"]["kind"], "poisoned", "{sink}");
    assert_eq!(sink["failure"]["what"], sink["failure"]["text"], "{sink}");

    // Streaming, recorded: the report's `recording`.
    let mcap = dir().join("run.mcap");
    let (out, r) = report(
        &streaming("recorded", "", 20, Some(&mcap.display().to_string())),
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    check("streaming recorded", &r);
    assert!(r["recording"].is_object(), "{r}");
    assert_eq!(
        r["recording"]["streams"].as_array().map(Vec::len),
        Some(2),
        "{r}"
    );
}

/// A change made to a copy of a real report.
type Change = Box<dyn Fn(&mut Value)>;

/// The schema is strict: a real report with a field dropped, renamed or
/// added, or a failure without its documented `what`, does not match.
#[test]
fn the_schema_refuses_a_dropped_renamed_or_added_field() {
    let v = validator();
    let (_, r) = report(&one_shot("strict", "echo bad >&2; exit 4"), &[]);
    assert!(errors(&v, &r).is_empty(), "{:#?}", errors(&v, &r));
    let broken: Vec<(&str, Change)> = vec![
        (
            "failure without what",
            Box::new(|r| {
                r["failure"].as_object_mut().unwrap().remove("what");
            }),
        ),
        (
            "failure without operator",
            Box::new(|r| {
                r["failure"].as_object_mut().unwrap().remove("operator");
            }),
        ),
        (
            "code renamed status",
            Box::new(|r| {
                let f = r["failure"].as_object_mut().unwrap();
                let code = f.remove("code").unwrap();
                f.insert("status".into(), code);
            }),
        ),
        (
            "an unknown kind",
            Box::new(|r| r["failure"]["kind"] = "exit".into()),
        ),
        ("a field added", Box::new(|r| r["extra"] = 1.into())),
        (
            "an operator without restarts",
            Box::new(|r| {
                r["operators"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("restarts");
            }),
        ),
        (
            "an edge with a field added",
            Box::new(|r| r["edges"][0]["consumers"] = 2.into()),
        ),
        (
            "wall_seconds as text",
            Box::new(|r| r["wall_seconds"] = "1.5".into()),
        ),
    ];
    for (label, change) in broken {
        let mut bad = r.clone();
        change(&mut bad);
        assert!(!v.is_valid(&bad), "{label}: still valid: {bad}");
    }
}

/// Every property the schema declares, every failure kind and every kind
/// of `lost`.
fn schema_names(node: &Value, out: &mut BTreeSet<String>) {
    match node {
        Value::Object(o) => {
            if let Some(Value::Object(props)) = o.get("properties") {
                for (k, p) in props {
                    out.insert(k.clone());
                    if let Some(Value::String(c)) = p.get("const") {
                        out.insert(c.clone());
                    }
                }
            }
            for v in o.values() {
                schema_names(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| schema_names(v, out)),
        _ => {}
    }
}

/// docs/pipelines.md's section on the report: its text up to the next
/// heading.
fn report_docs() -> String {
    let text = std::fs::read_to_string(repo().join("docs/pipelines.md")).unwrap();
    let start = text
        .find("### The report as JSON")
        .expect("docs/pipelines.md has a section `### The report as JSON`");
    let rest = &text[start + 1..];
    let end = rest.find("\n#").map_or(rest.len(), |i| i + 1);
    text[start..start + end].to_owned()
}

/// The docs name every property and kind of the schema (as `` `name` ``),
/// and every key in the first column of their tables is in the schema.
#[test]
fn the_docs_list_every_field_of_the_schema_and_no_other() {
    let mut names = BTreeSet::new();
    schema_names(&schema(), &mut names);
    assert!(names.len() > 40, "{names:?}");
    let docs = report_docs();
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !docs.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/pipelines.md does not name {missing:?}"
    );
    let listed: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect();
    assert!(listed.len() > 30, "{listed:?}");
    let unknown: Vec<_> = listed.difference(&names).collect();
    assert!(
        unknown.is_empty(),
        "docs/pipelines.md lists {unknown:?}, not in the schema"
    );
}
