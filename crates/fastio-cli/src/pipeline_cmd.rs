//! `fastio pipeline check | plan` and `fastio run`: Clara pipeline
//! definitions, through `fastio-pipeline`.
//!
//! Exit codes: `check` 0 (warnings printed) or 2 (every error printed);
//! `run` 0 when every operator succeeded, 1 when one failed (the message
//! names it and its last stderr lines), 2 for an invalid definition,
//! 130 when interrupted.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use fastio_pipeline::{
    Definition, Diagnostic, LocalDriver, Outcome, Progress, RunOptions, RunReport,
};
use serde_json::json;

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
    file: PathBuf,
    /// Set a declared parameter (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
}

#[derive(Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    def: DefArgs,
    /// The pipeline payload directory (inputs without `from`).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Where stream outputs are written (a directory per output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Most operators running at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Longest an operator may run, in seconds.
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// A named context under /dev/shm instead of an anonymous one (for
    /// operators started outside the driver).
    #[arg(long)]
    named_context: bool,
    /// Keep the context (a named one) in /dev/shm after the run, to
    /// inspect; `fastio shm gc` removes it.
    #[arg(long)]
    keep_context: bool,
    /// Context bytes beyond the static entries, for dynamic ones (MiB).
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    headroom: u64,
    /// Print the summary as JSON (`--report json`).
    #[arg(long, value_name = "json")]
    report: Option<String>,
    /// A streaming pipeline's sources stop after this many frames
    /// (instead of the definition's `streaming.frames`).
    #[arg(long, value_name = "N")]
    frames: Option<u64>,
    /// A streaming pipeline's sources stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Serve the run's numbers as OpenMetrics text at
    /// `http://ADDR/metrics` while it runs (`127.0.0.1:9184`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Run this host's part of a pipeline placed on several hosts
    /// (`placement:`); every host runs the same definition with its own
    /// `--host` (docs/hosts.md).
    #[arg(long, value_name = "NAME")]
    host: Option<String>,
    /// A Zenoh endpoint of another host to connect to
    /// (`tcp/10.0.0.2:7447`; repeatable).
    #[arg(long, value_name = "ENDPOINT", requires = "host")]
    connect: Vec<String>,
    /// A Zenoh endpoint to listen on (`tcp/0.0.0.0:7447`; repeatable).
    #[arg(long, value_name = "ENDPOINT", requires = "host")]
    listen: Vec<String>,
    /// Tells concurrent runs of one pipeline apart (the same on every
    /// host of a run).
    #[arg(long, value_name = "ID", default_value = "run", requires = "host")]
    run_id: String,
    /// Longest wait for every host to join, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0, requires = "host")]
    join_timeout: f64,
    /// A host silent this long is gone (Zenoh's lease), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 3.0, requires = "host")]
    lease: f64,
    /// A Zenoh configuration file (json5) to start from, for a router or
    /// client mode (endpoints are `tcp/` only: this build has no TLS); the
    /// options above are set on top of it.
    #[arg(long, value_name = "FILE", requires = "host")]
    zenoh_config: Option<PathBuf>,
}

/// The link of `--host NAME` to the other hosts of the run.
fn host_link(
    args: &RunArgs,
    host: &str,
    pipeline: &fastio_pipeline::Pipeline,
) -> Result<fastio_net::ZenohLink, Failure> {
    let secs = |flag: &str, v: f64| {
        if v > 0.0 && v.is_finite() && v < 1e9 {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(Failure {
                message: format!("{flag} {v}: expected a positive number of seconds"),
                code: 2,
            })
        }
    };
    let mut o = fastio_net::NetOptions::new(host);
    o.run_id = args.run_id.clone();
    o.connect = args.connect.clone();
    o.listen = args.listen.clone();
    o.join_timeout = secs("--join-timeout", args.join_timeout)?;
    o.lease = secs("--lease", args.lease)?;
    o.config_file = args.zenoh_config.clone();
    fastio_net::ZenohLink::new(pipeline, o).map_err(|message| Failure {
        message: format!("{}: {message}", args.def.file.display()),
        code: 2,
    })
}

fn params(raw: &[String]) -> Result<Vec<(String, String)>, Failure> {
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

fn definition(args: &DefArgs) -> Result<Definition, Failure> {
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

fn print_warnings(w: &[Diagnostic]) {
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

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Succeeded => "ok".into(),
        Outcome::Failed(c) => format!("exit {c}"),
        Outcome::Signaled(s) => format!("signal {s}"),
        Outcome::TimedOut => "timed out".into(),
        Outcome::Stopped => "stopped".into(),
        Outcome::NotRun => "not run".into(),
        Outcome::SpawnFailed(e) => format!("not started: {e}"),
        Outcome::Elsewhere(h) => format!("on host {h}"),
    }
}

fn summary(report: &RunReport) -> String {
    let mut out =
        String::from("operator             status        wall       cpu   peak RSS      shared\n");
    for r in &report.operators {
        if let Outcome::Elsewhere(_) = &r.outcome {
            // Measured by that host's driver, not here.
            out.push_str(&format!("{:<20} {}\n", r.name, outcome_text(&r.outcome)));
            continue;
        }
        out.push_str(&format!(
            "{:<20} {:<10} {:>8.3}s {:>8.3}s {:>7} MiB {:>7} MiB\n",
            r.name,
            outcome_text(&r.outcome),
            r.wall.as_secs_f64(),
            r.cpu.as_secs_f64(),
            r.peak_rss_kib / 1024,
            r.bytes_shared >> 20
        ));
    }
    if report.operators.iter().any(|r| r.frames.is_some()) {
        out.push_str(
            "operator             steps   in      out     dropped  step p50   p99       latency p50   p99     restarts\n",
        );
        for r in &report.operators {
            let Some(f) = &r.frames else { continue };
            let lat = f
                .latency_ns
                .iter()
                .fold([0u64, 0], |a, l| [a[0].max(l[0]), a[1].max(l[1])]);
            out.push_str(&format!(
                "{:<20} {:<7} {:<7} {:<7} {:<8} {:>7.3}ms {:>7.3}ms {:>9.3}ms {:>7.3}ms {}\n",
                r.name,
                f.steps,
                f.frames_in.iter().sum::<u64>(),
                f.frames_out.iter().sum::<u64>(),
                f.dropped.iter().sum::<u64>(),
                f.step_ns[0] as f64 / 1e6,
                f.step_ns[1] as f64 / 1e6,
                lat[0] as f64 / 1e6,
                lat[1] as f64 / 1e6,
                r.restarts,
            ));
        }
    }
    out.push_str(&format!("total wall {:.3}s\n", report.wall.as_secs_f64()));
    out
}

/// A failure in the report: its typed fields (`kind`, `operator`,
/// `host`, ...) as the link carries them, and `text`, the line the CLI
/// prints (both from `fastio_pipeline::Failure`).
fn failure_json(f: &fastio_pipeline::Failure) -> serde_json::Value {
    let mut v = serde_json::to_value(f).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.insert("text".into(), json!(f.to_string()));
    }
    v
}

fn report_json(report: &RunReport) -> String {
    json!({
        "succeeded": report.succeeded(),
        "wall_seconds": report.wall.as_secs_f64(),
        "failure": report.failure.as_ref().map(failure_json),
        "output_dir": report.output_dir,
        "kept_context": report.kept_context,
        "results": report.results.iter().map(|(k, v)| json!({"entry": k, "text": v})).collect::<Vec<_>>(),
        "operators": report.operators.iter().map(|r| json!({
            "name": r.name,
            "outcome": outcome_text(&r.outcome),
            "wall_seconds": r.wall.as_secs_f64(),
            "cpu_seconds": r.cpu.as_secs_f64(),
            "peak_rss_kib": r.peak_rss_kib,
            "bytes_shared": r.bytes_shared,
            "restarts": r.restarts,
            "failure": r.failure.as_ref().map(failure_json),
            "frames": r.frames.as_ref().map(|f| json!({
                "steps": f.steps,
                "in": f.frames_in,
                "out": f.frames_out,
                "dropped": f.dropped,
                "step_ns_p50": f.step_ns[0],
                "step_ns_p99": f.step_ns[1],
                "latency_ns": f.latency_ns.iter().map(|l| json!({"p50": l[0], "p99": l[1]})).collect::<Vec<_>>(),
            })),
        })).collect::<Vec<_>>(),
        "edges": report.edges.iter().map(|e| json!({
            "entry": e.entry,
            "bytes": e.bytes,
            "published_after_seconds": e.published_after.map(|d| d.as_secs_f64()),
            "frames": e.frames,
            "dropped": e.dropped,
        })).collect::<Vec<_>>(),
    })
    .to_string()
}

pub(crate) fn run(args: RunArgs) -> Result<(), Failure> {
    let json = match args.report.as_deref() {
        None => false,
        Some("json") => true,
        Some(other) => {
            return Err(Failure {
                message: format!("--report {other:?}: only `json` is supported"),
                code: 2,
            });
        }
    };
    let mut def = definition(&args.def)?;
    print_warnings(&def.warnings);
    if args.frames.is_some() || args.duration.is_some() {
        let Some(st) = def.pipeline.plan.streaming.as_mut() else {
            return Err(Failure {
                message: format!(
                    "{}: --frames and --duration need a `streaming:` section",
                    args.def.file.display()
                ),
                code: 2,
            });
        };
        if let Some(n) = args.frames {
            if n == 0 {
                return Err(Failure {
                    message: "--frames 0: expected at least one frame".into(),
                    code: 2,
                });
            }
            st.frames = Some(n);
        }
        if let Some(t) = args.duration {
            if !(t > 0.0 && t.is_finite()) {
                return Err(Failure {
                    message: format!("--duration {t}: expected a positive number of seconds"),
                    code: 2,
                });
            }
            st.duration_ms = Some((t * 1000.0).ceil() as u64);
        }
    }
    let base_dir = args
        .def
        .file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut opts = RunOptions {
        input: args.input.clone(),
        output: args.output.clone(),
        named_context: args.named_context,
        keep_context: args.keep_context,
        headroom: args.headroom << 20,
        base_dir,
        ..RunOptions::default()
    };
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    if let Some(t) = args.timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(Failure {
                message: format!("--timeout {t}: expected a positive number of seconds"),
                code: 2,
            });
        }
        opts.timeout = Some(Duration::from_secs_f64(t));
    }
    let total = def.pipeline.operators.len() as u64;
    let bar = (std::io::stderr().is_terminal() && !json).then(|| {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} operators {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let metrics = match &args.metrics {
        Some(addr) => Some(crate::metrics::MetricsServer::start(addr, &def.pipeline)?),
        None => None,
    };
    let mut link = match &args.host {
        Some(host) => Some(host_link(&args, host, &def.pipeline)?),
        None => {
            if def.pipeline.placement.is_distributed() {
                eprintln!(
                    "note: the definition places operators on hosts {}; without --host every operator runs here",
                    def.pipeline.placement.hosts.join(", ")
                );
            }
            None
        }
    };
    let driver = LocalDriver::new(def.pipeline, opts);
    let on_progress = |p| match p {
        Progress::Snapshot(s) => {
            if let Some(m) = &metrics {
                m.update(*s);
            }
        }
        Progress::Started(op) => {
            if let Some(b) = &bar {
                b.set_message(op);
            }
        }
        Progress::Line {
            operator,
            stderr,
            text,
        } => {
            let line = format!("[{operator}] {text}");
            match &bar {
                Some(b) => b.println(line),
                // With `--report json`, stdout is the report alone.
                None if stderr || json => eprintln!("{line}"),
                None => println!("{line}"),
            }
        }
        Progress::Finished(_, _) => {
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
        Progress::Streams(rates) => {
            let line = rates
                .iter()
                .map(|r| match r.latency_ns {
                    Some([p50, p99]) => format!(
                        "{} {:.0} fps, {:.2}/{:.2} ms p50/p99 ({} frames)",
                        r.entry,
                        r.fps,
                        p50 as f64 / 1e6,
                        p99 as f64 / 1e6,
                        r.frames
                    ),
                    None => format!("{} {:.0} fps ({} frames)", r.entry, r.fps, r.frames),
                })
                .collect::<Vec<_>>()
                .join(" | ");
            match &bar {
                Some(b) => b.set_message(line),
                None if !json => eprintln!("streams: {line}"),
                None => {}
            }
        }
    };
    let report = match link.as_mut() {
        Some(l) => driver.run_on_host(l, on_progress),
        None => driver.run(on_progress),
    }
    .map_err(|e| Failure {
        message: format!("{}: {e}", args.def.file.display()),
        code: 1,
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if json {
        println!("{}", report_json(&report));
    } else {
        print!("{}", summary(&report));
        for (entry, text) in &report.results {
            println!("{entry}: {text}");
        }
        println!("output: {}", report.output_dir.display());
        if let Some(h) = &report.kept_context {
            println!("context kept: {h}");
        }
    }
    match &report.failure {
        None => Ok(()),
        Some(f) => {
            // The operator's last stderr lines, when it ran here: shown,
            // never read for meaning.
            let tail = f
                .operator()
                .and_then(|op| report.operators.iter().find(|r| r.name == op))
                .map(|r| r.stderr_tail.join("\n  "))
                .unwrap_or_default();
            Err(Failure {
                message: if tail.is_empty() {
                    f.to_string()
                } else {
                    format!("{f}; its last stderr lines:\n  {tail}")
                },
                code: if report.interrupted { 130 } else { 1 },
            })
        }
    }
}
