//! `fastio pipeline check | plan`: Clara pipeline definitions, through
//! `fastio-pipeline` (`fastio run` is `run_cmd.rs`).
//!
//! Exit codes: `check` 0 (warnings printed) or 2 (every error printed).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use fastio_pipeline::{Definition, Diagnostic};

use crate::Failure;

#[derive(Subcommand)]
pub(crate) enum PipelineCommand {
    /// Check a definition: print warnings and exit 0, or print every error
    /// (file:line:column: path: message) and exit 2.
    Check(DefArgs),
    /// Print the resolved entries (`<operator>/<output>`, type, shape,
    /// static or dynamic, bytes, producer -> consumers) and the schedule;
    /// or the graph as Graphviz DOT or JSON.
    Plan(PlanArgs),
}

#[derive(Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    def: DefArgs,
    /// `text` (default), `dot` (Graphviz: `| dot -Tsvg > plan.svg`) or
    /// `json`.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    format: String,
    /// A run's report (`fastio run --report json > run.json`): the graph's
    /// edges carry what the run measured (bytes, when, frames).
    #[arg(long, value_name = "REPORT")]
    run: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct DefArgs {
    /// The pipeline definition (YAML).
    pub(crate) file: PathBuf,
    /// Set a declared parameter (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub(crate) params: Vec<String>,
}

pub(crate) fn params(raw: &[String]) -> Result<Vec<(String, String)>, Failure> {
    raw.iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| Failure {
                    message: format!("--param {p:?}: expected NAME=VALUE"),
                    code: 2,
                })
        })
        .collect()
}

pub(crate) fn definition(args: &DefArgs) -> Result<Definition, Failure> {
    let params = params(&args.params)?;
    Definition::read(&args.file, &params).map_err(|diags| {
        let errors = diags
            .iter()
            .filter(|d| d.severity == fastio_pipeline::Severity::Error)
            .count();
        for d in &diags {
            eprintln!("{d}");
        }
        Failure {
            message: format!(
                "{}: {errors} error{}",
                args.file.display(),
                if errors == 1 { "" } else { "s" }
            ),
            code: 2,
        }
    })
}

pub(crate) fn print_warnings(w: &[Diagnostic]) {
    for d in w {
        eprintln!("{d}");
    }
}

pub(crate) fn run_pipeline_cmd(cmd: PipelineCommand) -> Result<(), Failure> {
    match cmd {
        PipelineCommand::Check(args) => {
            let def = definition(&args)?;
            print_warnings(&def.warnings);
            println!(
                "{}: ok ({} operators, {} shared-memory entries)",
                args.file.display(),
                def.pipeline.operators.len(),
                def.pipeline.plan.entries.len()
            );
            Ok(())
        }
        PipelineCommand::Plan(args) => {
            let def = definition(&args.def)?;
            print_warnings(&def.warnings);
            let measured = match &args.run {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| Failure {
                        message: format!("{}: {e}", path.display()),
                        code: 1,
                    })?;
                    let report: serde_json::Value =
                        serde_json::from_str(&text).map_err(|e| Failure {
                            message: format!("{}: not a run report: {e}", path.display()),
                            code: 1,
                        })?;
                    crate::graph::measured_edges(&report)
                }
                None => Vec::new(),
            };
            match args.format.as_str() {
                "text" => print!("{}", plan_text(&def)),
                "dot" => print!("{}", crate::graph::plan_dot(&def, &measured)),
                "json" => println!("{:#}", crate::graph::plan_json(&def)),
                other => {
                    return Err(Failure {
                        message: format!("--format {other:?}: expected text, dot or json"),
                        code: 2,
                    });
                }
            }
            Ok(())
        }
    }
}

/// The `plan` output: one row per entry, then the schedule.
pub(crate) fn plan_text(def: &Definition) -> String {
    let p = &def.pipeline;
    let mut rows = vec![[
        "entry".to_owned(),
        "type".to_owned(),
        "allocation".to_owned(),
        "bytes".to_owned(),
        "producer -> consumers".to_owned(),
    ]];
    for e in &p.plan.entries {
        let ty = crate::graph::entry_type(e);
        let bytes = crate::graph::entry_bytes(e).map_or("-".to_owned(), |b| b.to_string());
        let consumers: Vec<&str> = e
            .consumers
            .iter()
            .map(|&c| p.operators[c].name.as_str())
            .collect();
        rows.push([
            e.name.clone(),
            ty,
            if e.is_static() { "static" } else { "dynamic" }.to_owned(),
            bytes,
            format!(
                "{} -> {}",
                p.operators[e.producer].name,
                if consumers.is_empty() {
                    "(none)".to_owned()
                } else {
                    consumers.join(", ")
                }
            ),
        ]);
    }
    let mut widths = [0usize; 5];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = format!("pipeline {} (api-version {})\n", p.name, p.api_version);
    for r in &rows {
        let mut line = String::new();
        for (c, w) in r.iter().zip(widths) {
            line.push_str(&format!("{c:<w$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if p.placement.is_distributed() {
        out.push_str(&hosts_text(p));
    }
    if let Some(st) = &p.plan.streaming {
        out.push_str(&streaming_text(p, st));
        return out;
    }
    out.push_str("schedule:\n");
    for (k, wave) in p.schedule.iter().enumerate() {
        let names: Vec<&str> = wave.iter().map(|&i| p.operators[i].name.as_str()).collect();
        out.push_str(&format!("  {}: {}\n", k + 1, names.join(", ")));
    }
    out
}

/// The hosts of a placed pipeline, their operators, and the entries that
/// cross from one host to another with the bytes each moves.
fn hosts_text(p: &fastio_pipeline::Pipeline) -> String {
    let pl = &p.placement;
    let mut out = String::from("hosts:\n");
    for (h, name) in pl.hosts.iter().enumerate() {
        let ops: Vec<&str> = (0..p.operators.len())
            .filter(|&i| pl.host_of[i] == h)
            .map(|i| p.operators[i].name.as_str())
            .collect();
        out.push_str(&format!("  {name}: {}\n", ops.join(", ")));
    }
    let crossings = pl.crossings(&p.plan);
    if crossings.is_empty() {
        out.push_str("no entry crosses hosts\n");
        return out;
    }
    let streaming = p.plan.streaming.as_ref();
    out.push_str(if streaming.is_some() {
        "crossing hosts (each frame sent once to each consuming host, at most depth frames in flight):\n"
    } else {
        "crossing hosts (each sent once to each consuming host):\n"
    });
    for c in crossings {
        let to: Vec<&str> = c.to.iter().map(|&h| pl.hosts[h].as_str()).collect();
        let bytes = match streaming {
            // A frame is at most its stream's largest shape.
            Some(st) => {
                let e = &p.plan.entries[c.entry];
                let most = st.max_shapes.get(c.entry).map(|s| {
                    s.iter()
                        .fold(e.element.size() as u64, |a, &d| a.saturating_mul(d as u64))
                });
                most.map_or("frames of any size".to_owned(), |b| {
                    format!("at most {b} bytes ({}) a frame", fastio::human_bytes(b))
                })
            }
            None => c.bytes.map_or("dynamic".to_owned(), |b| {
                format!("{b} bytes ({})", fastio::human_bytes(b))
            }),
        };
        out.push_str(&format!(
            "  {}  {} -> {}  {bytes}\n",
            p.plan.entries[c.entry].name,
            pl.hosts[c.from],
            to.join(", ")
        ));
    }
    out
}

/// The streams of a streaming plan: each edge's depth, slot size and the
/// memory it reserves.
fn streaming_text(p: &fastio_pipeline::Pipeline, st: &fastio::plan::StreamingPlan) -> String {
    let mut out = format!(
        "streaming: depth {}, {}{}{}\n",
        st.depth,
        if st.drop_oldest {
            "drop-oldest"
        } else {
            "block"
        },
        st.frames.map_or(String::new(), |n| format!(", {n} frames")),
        st.duration_ms
            .map_or(String::new(), |ms| format!(", {:.3} s", ms as f64 / 1000.0)),
    );
    out.push_str("stream  largest shape  slots  slot bytes  reserved bytes\n");
    let mut total = 0u64;
    for (e, entry) in p.plan.entries.iter().enumerate() {
        let Ok(o) = st.stream_options(&p.plan, e) else {
            continue;
        };
        let reserved = o.reserved_bytes().unwrap_or(0);
        total += reserved;
        let slots = if st.drop_oldest {
            st.depth as usize + entry.consumers.len() + 1
        } else {
            st.depth as usize
        };
        out.push_str(&format!(
            "{}  {:?}  {}  {}  {}\n",
            entry.name,
            st.max_shapes[e],
            slots,
            o.slot_bytes().unwrap_or(0),
            reserved
        ));
    }
    out.push_str(&format!("reserved in all: {total} bytes\n"));
    let restarts: Vec<String> = st
        .restarts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| format!("{} (up to {n})", p.operators[i].name))
        .collect();
    if !restarts.is_empty() {
        out.push_str(&format!("restarted on failure: {}\n", restarts.join(", ")));
    }
    out.push_str("every operator runs from the start; frames flow along the edges\n");
    out
}
