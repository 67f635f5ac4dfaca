//! The `streaming:` section (ours, not Clara's): checked like every other
//! rule, each error with its line, column and YAML path, and resolved into
//! the plan's [`StreamingPlan`].
//!
//! | key | meaning |
//! |---|---|
//! | `depth` | frames in flight per edge, 1 to 4096 (default 4) |
//! | `overflow` | `block` (default: a full edge stops its producer) or `drop-oldest` |
//! | `frames` | sources stop after this many frames |
//! | `duration` | sources stop after this many seconds |
//! | `max-shape` | `operator/output: [..]`, the largest shape of every dynamic output and string (required for each, forbidden for static ones) |
//! | `restart` | `operator: {policy: on-failure, limit: N}` (limit 1 to 100, default 3) |

use std::collections::BTreeMap;

use fastio::plan::{EntryKind, Plan, StreamingPlan};
use serde_saphyr::Spanned;

use crate::load::Report;
use crate::model::{OperatorDoc, StreamingDoc};
use crate::pipeline::{IoType, OperatorDef};

/// Largest depth.
pub const MAX_DEPTH: i64 = 4096;
/// Default depth.
pub const DEFAULT_DEPTH: u32 = 4;
/// Most restarts of one operator.
pub const MAX_RESTARTS: i64 = 100;
/// Restarts when `limit` is absent.
pub const DEFAULT_RESTARTS: u32 = 3;

/// Checks the section and resolves it (`None` after an error).
pub(crate) fn check(
    doc: &Spanned<StreamingDoc>,
    ops: &[OperatorDef],
    docs: &[OperatorDoc],
    plan: &Plan,
    r: &mut Report,
) -> Option<StreamingPlan> {
    let at = doc.referenced;
    let d = &doc.value;
    let errors_before = r.error_count();
    let depth = match &d.depth {
        None => DEFAULT_DEPTH,
        Some(v) if (1..=MAX_DEPTH).contains(&v.value) => v.value as u32,
        Some(v) => {
            r.error(
                v.referenced,
                "streaming.depth",
                format!("depth {} (1 to {MAX_DEPTH})", v.value),
            );
            1
        }
    };
    let drop_oldest = match d.overflow.as_ref().map(|o| (o, o.value.as_str())) {
        None | Some((_, "block")) => false,
        Some((_, "drop-oldest")) => true,
        Some((o, other)) => {
            r.error(
                o.referenced,
                "streaming.overflow",
                format!("overflow {other:?} (block or drop-oldest)"),
            );
            false
        }
    };
    let frames = d.frames.as_ref().and_then(|f| {
        if f.value < 1 {
            r.error(
                f.referenced,
                "streaming.frames",
                format!("{} frames (at least 1)", f.value),
            );
        }
        u64::try_from(f.value).ok()
    });
    let duration_ms = d.duration.as_ref().and_then(|t| {
        if !(t.value > 0.0 && t.value <= 1e9) {
            r.error(
                t.referenced,
                "streaming.duration",
                format!("duration {} s (more than 0)", t.value),
            );
            return None;
        }
        Some((t.value * 1000.0).ceil() as u64)
    });
    // Disk streams are files of a whole job: they cannot flow per frame.
    // Each is reported at its own output or input.
    for (i, op) in ops.iter().enumerate() {
        let doc_op = docs.get(i);
        for out in op
            .outputs
            .iter()
            .filter(|o| matches!(o.ty, IoType::Stream { .. }))
        {
            let (k, node) = doc_op
                .and_then(|d| {
                    d.output.iter().flatten().enumerate().find(|(_, o)| {
                        o.value
                            .name
                            .as_ref()
                            .is_some_and(|n| n.value.eq_ignore_ascii_case(&out.name))
                    })
                })
                .map_or((0, at), |(k, o)| (k, o.referenced));
            r.error(
                node,
                &format!("operators[{i}].output[{k}]"),
                format!(
                    "operator {} has a `type: stream` (disk) output {}: a streaming pipeline passes frames in shared memory only",
                    op.name, out.name
                ),
            );
        }
        for (k, inp) in doc_op
            .and_then(|d| d.input.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
        {
            let disk = inp.value.from.is_some()
                && inp.value.ty.as_ref().is_some_and(|t| t.value == "stream");
            if disk {
                r.error(
                    inp.referenced,
                    &format!("operators[{i}].input[{k}]"),
                    format!(
                        "operator {} has a `type: stream` (disk) input: a streaming pipeline passes frames in shared memory only",
                        op.name
                    ),
                );
            }
        }
    }
    // Largest shapes: given for every dynamic entry, for no static one.
    let given: BTreeMap<String, &Spanned<Vec<Spanned<i64>>>> = d
        .max_shape
        .iter()
        .flatten()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    for (key, v) in &given {
        let path = format!("streaming.max-shape.{key}");
        let Some(e) = plan.entries.iter().find(|e| &e.key == key) else {
            r.error(
                v.referenced,
                &path,
                format!("no shared-memory output {key:?} (operator/output)"),
            );
            continue;
        };
        if e.is_static() {
            r.error(
                v.referenced,
                &path,
                format!(
                    "{} is static: its shape is its largest; remove it here",
                    e.name
                ),
            );
        }
    }
    let mut max_shapes = Vec::new();
    for e in &plan.entries {
        if e.is_static() {
            max_shapes.push(e.shape.iter().map(|d| d.unwrap_or(1)).collect());
            continue;
        }
        let Some(v) = given.get(&e.key) else {
            r.error(
                at,
                "streaming.max-shape",
                format!(
                    "{} is dynamic: give its largest shape as `{}: [...]`",
                    e.name, e.name
                ),
            );
            max_shapes.push(vec![1]);
            continue;
        };
        let path = format!("streaming.max-shape.{}", e.key);
        let dims: Vec<i64> = v.value.iter().map(|d| d.value).collect();
        if dims.len() != e.shape.len() {
            r.error(
                v.referenced,
                &path,
                format!(
                    "{} dimensions for {} of {} (its declared shape has {})",
                    dims.len(),
                    if e.kind == EntryKind::String {
                        "a string"
                    } else {
                        "an array"
                    },
                    e.name,
                    e.shape.len()
                ),
            );
            max_shapes.push(vec![1]);
            continue;
        }
        for (k, (d, decl)) in v.value.iter().zip(&e.shape).enumerate() {
            if d.value < 1 || d.value > u32::MAX as i64 {
                r.error(
                    d.referenced,
                    &format!("{path}[{k}]"),
                    format!("dimension {} (1 to 2^32 - 1)", d.value),
                );
            } else if let Some(fixed) = decl
                && *fixed as i64 != d.value
            {
                r.error(
                    d.referenced,
                    &format!("{path}[{k}]"),
                    format!(
                        "dimension {k} of {} is fixed at {fixed}, not {}",
                        e.name, d.value
                    ),
                );
            }
        }
        max_shapes.push(dims.iter().map(|&d| d.max(1) as usize).collect());
    }
    // Restarts.
    let mut restarts = vec![0u32; ops.len()];
    for (name, v) in d.restart.iter().flatten() {
        let path = format!("streaming.restart.{name}");
        let Some(i) = ops.iter().position(|o| o.name.eq_ignore_ascii_case(name)) else {
            r.error(v.referenced, &path, format!("no operator named {name:?}"));
            continue;
        };
        if v.value.policy.value != "on-failure" {
            r.error(
                v.value.policy.referenced,
                &format!("{path}.policy"),
                format!(
                    "restart policy {:?} (only on-failure)",
                    v.value.policy.value
                ),
            );
        }
        restarts[i] = match &v.value.limit {
            None => DEFAULT_RESTARTS,
            Some(l) if (1..=MAX_RESTARTS).contains(&l.value) => l.value as u32,
            Some(l) => {
                r.error(
                    l.referenced,
                    &format!("{path}.limit"),
                    format!("limit {} (1 to {MAX_RESTARTS})", l.value),
                );
                0
            }
        };
    }
    if r.error_count() > errors_before {
        return None;
    }
    let plan = StreamingPlan {
        depth,
        drop_oldest,
        frames,
        duration_ms,
        max_shapes,
        restarts,
    };
    Some(plan)
}
