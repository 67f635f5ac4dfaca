//! The plan of a pipeline as a graph: Graphviz DOT and JSON
//! (`fastio pipeline plan FILE --format dot|json`). Operators are nodes;
//! each shared-memory entry is an edge from its producer to each consumer,
//! labelled with its name, type, and bytes (static) or "dynamic"; inputs
//! from the payload and file outputs (`type: stream`) are folders. With a
//! run's report (`fastio run --report json`), edges carry what the run
//! measured: bytes published and when. A pipeline placed on several hosts
//! draws a box per host, and the edges that cross hosts bold.

use fastio::plan::{EntryKind, EntryPlan};
use fastio_pipeline::{Definition, IoType, Pipeline};
use serde_json::{Value, json};

/// `array<float32>[64, -1]`, `string`, or a scalar's element type.
pub(crate) fn entry_type(e: &EntryPlan) -> String {
    let dims: Vec<String> = e
        .shape
        .iter()
        .map(|d| d.map_or("-1".to_owned(), |n| n.to_string()))
        .collect();
    match e.kind {
        EntryKind::String => "string".to_owned(),
        EntryKind::Scalar => e.element.name().to_owned(),
        EntryKind::Array => format!("array<{}>[{}]", e.element.name(), dims.join(", ")),
    }
}

/// A static entry's bytes (None: dynamic).
pub(crate) fn entry_bytes(e: &EntryPlan) -> Option<u64> {
    e.is_static().then(|| {
        let n: u64 = e.shape.iter().map(|d| d.unwrap_or(0) as u64).product();
        n * e.element.size() as u64
    })
}

/// What a run measured of one entry (from `--report json`'s `edges`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Measured {
    /// Bytes published.
    pub(crate) bytes: Option<u64>,
    /// Seconds from the start of the run to the publication.
    pub(crate) published_at: Option<f64>,
    /// Frames through a stream, and its rate.
    pub(crate) frames: Option<u64>,
}

/// The measurements of a run report, by entry name.
pub(crate) fn measured_edges(report: &Value) -> Vec<(String, Measured)> {
    report
        .get("edges")
        .and_then(Value::as_array)
        .map(|edges| {
            edges
                .iter()
                .filter_map(|e| {
                    let name = e.get("entry")?.as_str()?.to_owned();
                    Some((
                        name,
                        Measured {
                            bytes: e.get("bytes").and_then(Value::as_u64),
                            published_at: e.get("published_after_seconds").and_then(Value::as_f64),
                            frames: e.get("frames").and_then(Value::as_u64),
                        },
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn quote(s: &str) -> String {
    format!(
        "\"{}\"",
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

fn human(b: u64) -> String {
    fastio::human_bytes(b)
}

fn edge_label(p: &Pipeline, i: usize, e: &EntryPlan, measured: Option<&Measured>) -> String {
    let mut lines = vec![e.name.clone(), entry_type(e)];
    match entry_bytes(e) {
        Some(b) => lines.push(format!("{} static", human(b))),
        None => lines.push("dynamic".to_owned()),
    }
    if let Some(st) = &p.plan.streaming
        && let Ok(o) = st.stream_options(&p.plan, i)
    {
        lines.push(format!(
            "stream: depth {}, {} reserved",
            st.depth,
            human(o.reserved_bytes().unwrap_or(0))
        ));
    }
    if let Some(m) = measured {
        let mut run = Vec::new();
        if let Some(b) = m.bytes {
            run.push(human(b));
        }
        if let Some(t) = m.published_at {
            run.push(format!("at {t:.3} s"));
        }
        if let Some(f) = m.frames {
            run.push(format!("{f} frames"));
        }
        if !run.is_empty() {
            lines.push(format!("run: {}", run.join(", ")));
        }
    }
    lines.join("\n")
}

/// The plan as Graphviz DOT.
pub(crate) fn plan_dot(def: &Definition, measured: &[(String, Measured)]) -> String {
    let p = &def.pipeline;
    let mut out = format!(
        "digraph {} {{\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n",
        quote(&p.name)
    );
    let pl = &p.placement;
    if pl.is_distributed() {
        // One box per host; edges that cross hosts are bold.
        for (h, host) in pl.hosts.iter().enumerate() {
            out.push_str(&format!(
                "  subgraph {} {{\n    label={};\n    style=\"rounded,dashed\";\n",
                quote(&format!("cluster_host_{host}")),
                quote(&format!("host {host}"))
            ));
            for (i, op) in p.operators.iter().enumerate() {
                if pl.host_of[i] == h {
                    out.push_str(&format!(
                        "    {} [label={}];\n",
                        quote(&format!("op:{}", op.name)),
                        quote(&op.name)
                    ));
                }
            }
            out.push_str("  }\n");
        }
    } else {
        for op in &p.operators {
            out.push_str(&format!(
                "  {} [label={}];\n",
                quote(&format!("op:{}", op.name)),
                quote(&op.name)
            ));
        }
    }
    let payload = p
        .operators
        .iter()
        .any(|o| o.inputs.iter().any(|i| i.from.is_none()));
    if payload {
        out.push_str("  \"payload\" [shape=folder, fillcolor=\"#f6f6f6\", label=\"payload\"];\n");
    }
    for (i, e) in p.plan.entries.iter().enumerate() {
        let m = measured
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&e.name))
            .map(|(_, m)| m);
        let label = edge_label(p, i, e, m);
        let from = quote(&format!("op:{}", p.operators[e.producer].name));
        if e.consumers.is_empty() {
            let sink = quote(&format!("unread:{}", e.name));
            out.push_str(&format!("  {sink} [shape=point, width=0.08];\n"));
            out.push_str(&format!(
                "  {from} -> {sink} [label={}, style=dashed];\n",
                quote(&label)
            ));
        }
        for &c in &e.consumers {
            let to = quote(&format!("op:{}", p.operators[c].name));
            let crosses = pl.host_of[c] != pl.host_of[e.producer];
            out.push_str(&format!(
                "  {from} -> {to} [label={}{}];\n",
                quote(&if crosses {
                    format!(
                        "{label}\ncrosses: {} -> {}",
                        pl.host_name(e.producer),
                        pl.host_name(c)
                    )
                } else {
                    label.clone()
                }),
                if crosses {
                    ", penwidth=2.5, color=\"#c0392b\""
                } else {
                    ""
                }
            ));
        }
    }
    for op in &p.operators {
        for input in op.inputs.iter().filter(|i| i.from.is_none()) {
            let what = match &input.ty {
                IoType::Stream { element, .. } => format!("files ({element})"),
                _ => "payload".to_owned(),
            };
            out.push_str(&format!(
                "  \"payload\" -> {} [label={}];\n",
                quote(&format!("op:{}", op.name)),
                quote(&what)
            ));
        }
        for output in &op.outputs {
            if let IoType::Stream { element, .. } = &output.ty {
                let node = quote(&format!("files:{}/{}", op.name, output.name));
                out.push_str(&format!(
                    "  {node} [shape=folder, fillcolor=\"#f6f6f6\", label={}];\n",
                    quote(&format!("{}/{} ({element})", op.name, output.name))
                ));
                out.push_str(&format!(
                    "  {} -> {node};\n",
                    quote(&format!("op:{}", op.name))
                ));
            }
        }
    }
    out.push_str("}\n");
    out
}

/// The plan as JSON: hosts, operators (with their host), entries (with
/// producer, consumers, type, bytes, the hosts they cross to), the
/// schedule or the streams.
pub(crate) fn plan_json(def: &Definition) -> Value {
    let p = &def.pipeline;
    let crossing: std::collections::BTreeMap<usize, Vec<usize>> = p
        .placement
        .crossings(&p.plan)
        .into_iter()
        .map(|c| (c.entry, c.to))
        .collect();
    let entries: Vec<Value> = p
        .plan
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let stream = p.plan.streaming.as_ref().and_then(|st| {
                let o = st.stream_options(&p.plan, i).ok()?;
                Some(json!({
                    "depth": st.depth,
                    "largest_shape": st.max_shapes.get(i),
                    "slot_bytes": o.slot_bytes(),
                    "reserved_bytes": o.reserved_bytes(),
                }))
            });
            json!({
                "name": e.name,
                "type": entry_type(e),
                "element": e.element.name(),
                "shape": e.shape,
                "static": e.is_static(),
                "bytes": entry_bytes(e),
                "producer": p.operators[e.producer].name,
                "consumers": e.consumers.iter().map(|&c| p.operators[c].name.clone()).collect::<Vec<_>>(),
                "stream": stream,
                "crosses_to": crossing.get(&i).map(|to| to.iter().map(|&h| p.placement.hosts[h].clone()).collect::<Vec<_>>()),
            })
        })
        .collect();
    json!({
        "pipeline": p.name,
        "api_version": p.api_version,
        "hosts": p.placement.hosts,
        "operators": p.operators.iter().enumerate().map(|(i, o)| json!({
            "name": o.name,
            "host": p.placement.host_name(i),
            "command": o.command,
            "inputs": o.inputs.iter().map(|i| match i.from {
                Some(f) => format!("{}/{}", p.operators[f].name, i.name.clone().unwrap_or_default()),
                None => "payload".to_owned(),
            }).collect::<Vec<_>>(),
            "outputs": o.outputs.iter().map(|x| x.name.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "entries": entries,
        "schedule": if p.plan.streaming.is_some() {
            Value::Null
        } else {
            json!(p.schedule.iter().map(|w| w.iter().map(|&i| p.operators[i].name.clone()).collect::<Vec<_>>()).collect::<Vec<_>>())
        },
        "streaming": p.plan.streaming.as_ref().map(|st| json!({
            "depth": st.depth,
            "overflow": if st.drop_oldest { "drop-oldest" } else { "block" },
            "frames": st.frames,
            "duration_seconds": st.duration_ms.map(|ms| ms as f64 / 1000.0),
        })),
    })
}
