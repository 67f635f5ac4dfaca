//! The Rust side of ndobject's differential test against numpy (driven by
//! `cargo xtask numpy`; the cases and their JSON format come from
//! `compat/numpy_diff.py`).
//!
//! ```text
//! numpy_diff CASES.jsonl
//! ```
//!
//! For each case: builds the source array over a 16-byte aligned buffer at
//! the case's misalignment (`Array::from_block`), applies the view
//! operations, compares shape and strides with numpy's, casts under
//! `AssignErrorMode::None` (numpy's `casting='unsafe'`) or transcodes the
//! strings, and compares the C-order bytes; an expected error must be an
//! error of the same kind. Prints up to 20 disagreements, the failures per
//! class, then `numpy diff: N passed, M failed`; exits non-zero when
//! anything failed or nothing passed. Strides are compared only for
//! dimensions of size > 1 of non-empty arrays: the others address no
//! element, and numpy and ndobject choose them differently.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::process::ExitCode;

use dtype::{Type, TypeKind};
use ndobject::{Array, AssignErrorMode, BLOCK_ALIGN, Error, Index, MemoryBlock};
use serde_json::Value;

/// How many disagreements are printed in full.
const SHOWN: usize = 20;

/// A disagreement: its class (for the tally) and what differed.
struct Failure {
    class: String,
    message: String,
}

type CaseResult<T> = Result<T, Failure>;

fn fail<T>(class: &str, message: impl Into<String>) -> CaseResult<T> {
    Err(Failure {
        class: class.to_owned(),
        message: message.into(),
    })
}

/// A malformed case: a failure, never a panic.
fn malformed(what: &str) -> Failure {
    Failure {
        class: "malformed case".to_owned(),
        message: format!("malformed case: {what}"),
    }
}

/// `Array::to_bytes` returns a `Result` of the bytes (it returned the
/// bytes alone before); this checker works with either.
trait IntoBytes {
    fn into_bytes(self) -> Result<Vec<u8>, String>;
}

impl IntoBytes for Vec<u8> {
    fn into_bytes(self) -> Result<Vec<u8>, String> {
        Ok(self)
    }
}

impl IntoBytes for ndobject::Result<Vec<u8>> {
    fn into_bytes(self) -> Result<Vec<u8>, String> {
        self.map_err(|e| e.to_string())
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(v: &Value) -> CaseResult<Vec<u8>> {
    let s = v
        .as_str()
        .ok_or_else(|| malformed("hex data is not a string"))?;
    if !s.len().is_multiple_of(2) {
        return Err(malformed("hex data of odd length"));
    }
    let digit = |c: u8| char::from(c).to_digit(16);
    s.as_bytes()
        .chunks_exact(2)
        .map(|p| match (digit(p[0]), digit(p[1])) {
            (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
            _ => Err(malformed("a non-hex digit in hex data")),
        })
        .collect()
}

fn int(v: &Value, what: &str) -> CaseResult<isize> {
    v.as_i64()
        .and_then(|i| isize::try_from(i).ok())
        .ok_or_else(|| malformed(&format!("{what} is not an integer")))
}

fn usizes(v: &Value, what: &str) -> CaseResult<Vec<usize>> {
    v.as_array()
        .ok_or_else(|| malformed(&format!("{what} is not an array")))?
        .iter()
        .map(|x| {
            x.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| malformed(&format!("{what} holds a non-size")))
        })
        .collect()
}

fn parse_type(v: &Value, what: &str) -> CaseResult<Type> {
    let text = v
        .as_str()
        .ok_or_else(|| malformed(&format!("{what} is not a string")))?;
    text.parse::<Type>()
        .map_err(|e| malformed(&format!("{what} {text:?}: {}", e.message())))
}

/// The kind of error numpy's failure corresponds to.
fn category(e: &Error) -> &'static str {
    match e {
        Error::IndexOutOfRange { .. } | Error::InvalidIndex(_) => "index",
        Error::Reshape { .. } => "reshape",
        Error::Encoding(_) => "encoding",
        _ => "other",
    }
}

/// An ndobject error where `expect` may hold `{"error": category}`.
fn check_error(class: &str, expect: &Value, at: &str, e: &Error) -> CaseResult<()> {
    match expect["error"].as_str() {
        Some(want) if want == category(e) => Ok(()),
        Some(want) => fail(class, format!("{at}: expected a {want} error, got {e:?}")),
        None => fail(class, format!("{at}: expected success, got {e:?}")),
    }
}

/// The source array: the case's bytes at `misalign` bytes past a
/// 16-byte aligned address, in a block that ends where they end.
fn source(case: &Value, element: Type, shape: &[usize]) -> CaseResult<Array> {
    let data = from_hex(&case["data"])?;
    let misalign = usize::try_from(int(&case["misalign"], "misalign")?)
        .map_err(|_| malformed("negative misalign"))?;
    let mut buf = vec![0u8; data.len() + misalign + BLOCK_ALIGN];
    let start = (BLOCK_ALIGN - buf.as_ptr() as usize % BLOCK_ALIGN) % BLOCK_ALIGN + misalign;
    buf[start..start + data.len()].copy_from_slice(&data);
    // Shortening keeps the allocation (and so the address) in place.
    buf.truncate(start + data.len());
    let block = MemoryBlock::from_owner_mut(buf);
    let align = element.alignment();
    let a = Array::from_block(&block, start, element, shape)
        .or_else(|e| fail("from_block", format!("Array::from_block: {e}")))?;
    let unaligned = matches!(a.element_type().kind(), TypeKind::Unaligned(_));
    let misaligned = !a.data_address().is_multiple_of(align);
    if unaligned != misaligned {
        return fail(
            "from_block",
            format!(
                "element type {} at misalignment {misalign}",
                a.element_type()
            ),
        );
    }
    Ok(a)
}

fn index(v: &Value) -> CaseResult<Index> {
    if !v["at"].is_null() {
        return Ok(Index::at(int(&v["at"], "at")?));
    }
    match v["slice"].as_array().map(Vec::as_slice) {
        Some([start, stop, step]) => {
            let bound = |b: &Value| match b {
                Value::Null => Ok(None),
                b => int(b, "slice bound").map(Some),
            };
            Ok(Index::slice(
                bound(start)?,
                bound(stop)?,
                int(step, "step")?,
            ))
        }
        _ => Err(malformed(
            "an index is neither {at} nor {slice: [start, stop, step]}",
        )),
    }
}

/// One view operation: the case's error when it is malformed, else
/// ndobject's result.
fn apply(a: &Array, op: &Value) -> CaseResult<ndobject::Result<Array>> {
    Ok(match op["op"].as_str() {
        Some("index") => a.index(int(&op["i"], "i")?),
        Some("view") => {
            let indices = op["indices"]
                .as_array()
                .ok_or_else(|| malformed("indices is not an array"))?
                .iter()
                .map(index)
                .collect::<CaseResult<Vec<_>>>()?;
            a.view(&indices)
        }
        Some("transpose") => Ok(a.transpose()),
        Some("permute") => a.permute(&usizes(&op["order"], "order")?),
        Some("reshape") => a.reshape(&usizes(&op["shape"], "shape")?),
        other => return Err(malformed(&format!("unknown op {other:?}"))),
    })
}

/// Compares C-order bytes and names the first element that differs.
fn compare_bytes(class: &str, expect: &Value, got: &[u8], elem: usize) -> CaseResult<()> {
    let want = from_hex(&expect["bytes"])?;
    if want == got {
        return Ok(());
    }
    let elem = elem.max(1);
    let at = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()))
        / elem;
    let part = |b: &[u8]| {
        to_hex(
            b.get(at * elem..((at + 1) * elem).min(b.len()))
                .unwrap_or(&[]),
        )
    };
    fail(
        class,
        format!(
            "bytes differ first at element {at} (expected {} bytes, got {}): expected {}, got {}",
            want.len(),
            got.len(),
            part(want.as_slice()),
            part(got)
        ),
    )
}

/// An `array` case; `Ok(true)` when it passed with strides that differ
/// from numpy's only where they address no element.
fn array_case(case: &Value) -> CaseResult<bool> {
    let element = parse_type(&case["element"], "element")?;
    let cast = match &case["cast"] {
        Value::Null => None,
        t => Some(parse_type(t, "cast")?),
    };
    let class = match &cast {
        Some(t) => format!(
            "cast {} -> {t}",
            element.as_primitive().map_or("?", |p| p.name())
        ),
        None => "view".to_owned(),
    };
    let expect = &case["expect"];
    let mut a = source(case, element, &usizes(&case["shape"], "shape")?)?;
    let ops = case["ops"]
        .as_array()
        .ok_or_else(|| malformed("ops is not an array"))?;
    for (k, op) in ops.iter().enumerate() {
        match apply(&a, op)? {
            Ok(v) => a = v,
            Err(e) => {
                return check_error("view", expect, &format!("op {k} {op}"), &e).map(|()| false);
            }
        }
    }
    if let Some(want) = expect["error"].as_str() {
        return fail(
            "view",
            format!("expected a {want} error, got shape {:?}", a.shape()),
        );
    }
    let shape = usizes(&expect["shape"], "expect.shape")?;
    if a.shape() != shape.as_slice() {
        return fail(
            "view",
            format!("shape: expected {shape:?}, got {:?}", a.shape()),
        );
    }
    let strides: Vec<i64> = expect["strides"]
        .as_array()
        .ok_or_else(|| malformed("expect.strides is not an array"))?
        .iter()
        .map(|s| {
            s.as_i64()
                .ok_or_else(|| malformed("a stride is not an integer"))
        })
        .collect::<CaseResult<_>>()?;
    if strides.len() != shape.len() {
        return Err(malformed(
            "expect.strides and expect.shape differ in length",
        ));
    }
    let got = a.strides();
    let addressed = |d: usize| shape[d] > 1 && !a.is_empty();
    if (0..shape.len()).any(|d| addressed(d) && got[d] as i64 != strides[d]) {
        return fail(
            "view",
            format!("strides: expected {strides:?}, got {got:?} (shape {shape:?})"),
        );
    }
    let loose = (0..shape.len()).any(|d| got[d] as i64 != strides[d]);
    let out = match &cast {
        Some(t) => a
            .cast(t, AssignErrorMode::None)
            .or_else(|e| fail(&class, format!("cast to {t}: {e}")))?,
        None => a,
    };
    let bytes = out.to_bytes().into_bytes().or_else(|e| fail(&class, e))?;
    let elem = out.element_type().data_size().unwrap_or(1);
    compare_bytes(&class, expect, &bytes, elem).map(|()| loose)
}

/// The encoding of a fixed-size string type, for the failure tally.
fn encoding(t: &Type) -> &'static str {
    match t.kind() {
        TypeKind::FixedString { encoding, .. } => encoding.canonical_name(),
        _ => "?",
    }
}

/// A `string` case: a fixed-size string transcode.
fn string_case(case: &Value) -> CaseResult<()> {
    let from = parse_type(&case["from"], "from")?;
    let to = parse_type(&case["to"], "to")?;
    let misaligned = !case["misalign"]
        .as_u64()
        .unwrap_or(0)
        .is_multiple_of(from.alignment() as u64);
    let class = format!(
        "string {} -> {}{}",
        encoding(&from),
        encoding(&to),
        if misaligned { ", misaligned" } else { "" }
    );
    let expect = &case["expect"];
    let a = source(case, from, &usizes(&case["shape"], "shape")?)?;
    match a.cast(&to, AssignErrorMode::None) {
        Err(e) => check_error(&class, expect, "transcode", &e),
        Ok(out) => {
            if let Some(want) = expect["error"].as_str() {
                return fail(&class, format!("expected a {want} error, got strings"));
            }
            let bytes = out.to_bytes().into_bytes().or_else(|e| fail(&class, e))?;
            compare_bytes(&class, expect, &bytes, to.data_size().unwrap_or(1))
        }
    }
}

fn run_case(case: &Value) -> CaseResult<bool> {
    match case["kind"].as_str() {
        Some("array") => array_case(case),
        Some("string") => string_case(case).map(|()| false),
        other => Err(malformed(&format!("unknown kind {other:?}"))),
    }
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: numpy_diff CASES.jsonl");
        return ExitCode::FAILURE;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("numpy_diff: read {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    // A panic is a failure of its case; its message goes into the report.
    std::panic::set_hook(Box::new(|_| {}));
    let (mut passed, mut failed, mut loose) = (0usize, 0usize, 0usize);
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let (id, result) = match serde_json::from_str::<Value>(line) {
            Err(e) => (
                format!("line {}", n + 1),
                Err(malformed(&format!("not JSON: {e}"))),
            ),
            Ok(case) => {
                let id = format!("{} (line {})", case["id"], n + 1);
                let result = std::panic::catch_unwind(|| run_case(&case)).unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    fail("panic", format!("panicked: {msg}"))
                });
                (id, result)
            }
        };
        match result {
            Ok(l) => {
                passed += 1;
                loose += usize::from(l);
            }
            Err(f) => {
                if failed < SHOWN {
                    println!("FAIL case {id} [{}]: {}", f.class, f.message);
                }
                failed += 1;
                *classes.entry(f.class).or_default() += 1;
            }
        }
    }
    if failed > SHOWN {
        println!("... {} more failures", failed - SHOWN);
    }
    for (class, count) in &classes {
        println!("failed: {count:5} {class}");
    }
    println!(
        "note: {loose} passing views have strides unlike numpy's in dimensions of size <= 1 or without elements"
    );
    println!("numpy diff: {passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
