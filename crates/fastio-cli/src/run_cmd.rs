//! `fastio run`: a pipeline run on this host (or this host's part of a
//! run across hosts, `--host`), its live view, its summary or `--report
//! json`, and its root cause as the one error line.
//!
//! Exit codes: 0 when every operator succeeded, 1 when the run failed (the
//! line is the root cause's text, with the operator's last stderr lines
//! when it ran here), 2 for an invalid definition, 130 when interrupted.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use fastio_pipeline::{LocalDriver, Outcome, Progress, RunOptions, RunReport};
use serde_json::json;

use crate::Failure;
use crate::pipeline_cmd::{DefArgs, definition, print_warnings};

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
    /// When the run stops (an operator failed, --timeout, SIGINT), the
    /// seconds between the SIGTERM to the operators still running and the
    /// SIGKILL (default 3).
    #[arg(long, value_name = "SECS")]
    grace: Option<f64>,
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
    /// Record the run to this MCAP file: every stream, losslessly (the
    /// recorder is one more consumer of each), or every entry a one-shot
    /// job published (`fastio record --info FILE` lists it; docs/recording.md)
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Feed a one-shot run from a recording of its entries (`--record`):
    /// its sources (operators without inputs) whose outputs are all in
    /// FILE are not run, their entries are published from the file, and
    /// the rest of the pipeline runs on them.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Serve the run's numbers as OpenMetrics text at
    /// `http://ADDR/metrics` while it runs (`127.0.0.1:9184`).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Show the run live in Foxglove: serve Foxglove's WebSocket protocol
    /// at `ws://ADDR` (`127.0.0.1:8765`; Foxglove: Open connection →
    /// Foxglove WebSocket): image streams as images, every stream's
    /// frames as numbers, the operators' numbers, logs and the run's end
    /// (docs/observing.md). It never slows the pipeline.
    #[arg(long, value_name = "ADDR")]
    view: Option<String>,
    /// With --view: most messages a second per channel (frames per
    /// stream, log lines).
    #[arg(long, value_name = "N", default_value_t = fastio_view::DEFAULT_RATE, requires = "view")]
    view_rate: f64,
    /// With --view: most messages queued for one client (`fastio view
    /// --backlog`).
    #[arg(long, value_name = "N", default_value_t = fastio_view::DEFAULT_BACKLOG, requires = "view",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    view_backlog: usize,
    /// Keep every core's wake-up latency at most US microseconds while
    /// the run lasts (Linux PM QoS, `/dev/cpu_dma_latency`; root). On a
    /// machine whose idle cores halt, a thread woken from another core
    /// runs tens of microseconds sooner; idle cores then spend power (at
    /// 0 they poll). docs/hosts.md, *Wake-ups*.
    #[arg(long, value_name = "US")]
    cpu_latency_us: Option<u32>,
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
    /// client mode, or mutual TLS by its own keys; the options above are
    /// set on top of it.
    #[arg(long, value_name = "FILE", requires = "host")]
    zenoh_config: Option<PathBuf>,
    /// Mutual TLS between hosts: the CA (PEM) that signed every host's
    /// certificate, the same on every host. With --tls-cert and
    /// --tls-key; endpoints are then `quic/ADDR:PORT` (docs/hosts.md).
    #[arg(long, value_name = "FILE", requires_all = ["host", "tls_cert", "tls_key"])]
    tls_ca: Option<PathBuf>,
    /// This host's certificate (PEM), its common name the --host name.
    #[arg(long, value_name = "FILE", requires_all = ["host", "tls_ca", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// This host's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["host", "tls_ca", "tls_cert"])]
    tls_key: Option<PathBuf>,
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
    if let (Some(ca), Some(cert), Some(key)) = (&args.tls_ca, &args.tls_cert, &args.tls_key) {
        o.tls = Some(fastio_net::TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    let refused = |message: fastio_net::NetError| Failure {
        message: format!("{}: {message}", args.def.file.display()),
        code: 2,
    };
    // Which link a run uses, said before it starts.
    let transport = o.transport().map_err(refused)?;
    // The whole configuration, checked before anything is said or opened.
    o.zenoh_config().map_err(refused)?;
    // This host's certificate and key (over mutual TLS), before joining.
    o.check_tls().map_err(refused)?;
    eprintln!(
        "fastio: host {host} joins run {} over {transport}",
        o.run_id
    );
    fastio_net::ZenohLink::new(pipeline, o).map_err(refused)
}

pub(crate) fn outcome_text(o: &Outcome) -> String {
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

/// A failure in the report (docs/pipelines.md, "The report as JSON"; its
/// schema is docs/schemas/run-report.schema.json): its typed fields
/// (`kind`, `host`, `code`, ...) as the link carries them, and on every
/// kind `operator` (the operator it names, or null), `what` (the line the
/// CLI prints for it, after `fastio: `; the report's first interface) and
/// `text` (the same line).
pub(crate) fn failure_json(f: &fastio_pipeline::Failure) -> serde_json::Value {
    let line = f.to_string();
    let mut v = serde_json::to_value(f).unwrap_or_else(|_| json!({}));
    if let Some(o) = v.as_object_mut() {
        o.entry("operator").or_insert_with(|| json!(f.operator()));
        o.insert("what".into(), json!(line));
        o.insert("text".into(), json!(line));
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
        "recording": report.recording.as_ref().map(|r| json!({
            "path": r.path,
            "streams": r.streams.iter().map(|s| json!({
                "stream": s.stream, "frames": s.frames, "skipped": s.skipped,
            })).collect::<Vec<_>>(),
            "entries": r.entries,
            "error": r.error,
        })),
    })
    .to_string()
}

pub(crate) fn run(args: RunArgs) -> Result<(), Failure> {
    // Zenoh's threads sized for this machine: the command runs again at
    // once with ZENOH_RUNTIME, unless it is set (fastio_net docs).
    if args.host.is_some()
        && let Some(error) = fastio_net::exec_with_zenoh_runtime()
    {
        eprintln!("note: Zenoh keeps its default threads: cannot run fastio again ({error})");
    }
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
        record: args.record.clone(),
        replay: args.replay.clone(),
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
    if let Some(g) = args.grace {
        if !(g >= 0.0 && g.is_finite() && g < 1e9) {
            return Err(Failure {
                message: format!("--grace {g}: expected a number of seconds"),
                code: 2,
            });
        }
        opts.grace = Duration::from_secs_f64(g);
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
    // Held until the run's report is out (dropped at the end of `run`).
    let _cpu_latency = args
        .cpu_latency_us
        .map(crate::cpu_latency::CpuLatency::hold)
        .transpose()?;
    let metrics = match &args.metrics {
        Some(addr) => Some(crate::metrics::MetricsServer::start(addr, &def.pipeline)?),
        None => None,
    };
    let view = match &args.view {
        Some(addr) => Some(crate::view_cmd::RunView::start(
            addr,
            args.view_rate,
            args.view_backlog,
            &def.pipeline.plan.pipeline,
        )?),
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
    let print_progress = |p| match p {
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
            if let Some(v) = &view {
                v.driver_line(&format!("streams: {line}"));
            }
            match &bar {
                Some(b) => b.set_message(line),
                None if !json => eprintln!("streams: {line}"),
                None => {}
            }
        }
    };
    let on_progress = |p: Progress| {
        if let Some(v) = &view {
            v.progress(&p);
        }
        print_progress(p);
    };
    let report = match link.as_mut() {
        Some(l) => driver.run_on_host(l, on_progress),
        None => driver.run(on_progress),
    }
    .map_err(|e| Failure {
        message: format!("{}: {e}", args.def.file.display()),
        code: 1,
    });
    if let Some(v) = view {
        v.end(report.as_ref().map_err(|f| f.message.clone()));
    }
    let report = report?;
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
        if let Some(r) = &report.recording {
            println!("{}", crate::record_cmd::recording_line(r));
        }
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

#[cfg(test)]
mod tests {
    use fastio_pipeline::{Failure as RunFailure, Lost};
    use serde_json::Value;

    use super::failure_json;

    /// A validator of one failure object: the shipped schema's
    /// `$defs/failure`.
    fn failure_validator() -> jsonschema::Validator {
        let text = include_str!("../../../docs/schemas/run-report.schema.json");
        let mut schema: Value = serde_json::from_str(text).unwrap();
        schema["$ref"] = "#/$defs/failure".into();
        let o = schema.as_object_mut().unwrap();
        for k in ["type", "properties", "required", "additionalProperties"] {
            o.remove(k);
        }
        jsonschema::validator_for(&schema).unwrap()
    }

    /// Every kind of failure, even those a one-host test cannot make (a
    /// host gone, a transfer, the link), matches the schema as the report
    /// writes it, with `operator`, `what` and `text`.
    #[test]
    fn every_failure_kind_matches_the_schema() {
        let host = || Some("b".to_owned());
        let all = [
            RunFailure::Exited {
                operator: "src".into(),
                host: None,
                code: 1,
                frame: Some(300),
            },
            RunFailure::Signaled {
                operator: "mid".into(),
                host: host(),
                signal: 9,
                frame: None,
            },
            RunFailure::TimedOut {
                operator: "slow".into(),
                host: None,
            },
            RunFailure::SpawnFailed {
                operator: "x".into(),
                host: None,
                error: "no such file".into(),
            },
            RunFailure::Poisoned {
                operator: "sink".into(),
                host: host(),
                entry: "mid/w".into(),
                frame: 17,
            },
            RunFailure::HostGone {
                host: "b".into(),
                lost: Lost::Running {
                    operator: "mid".into(),
                },
            },
            RunFailure::HostGone {
                host: "b".into(),
                lost: Lost::Entry {
                    operator: "src".into(),
                    entry: "src/v".into(),
                },
            },
            RunFailure::HostGone {
                host: "b".into(),
                lost: Lost::Unfinished {
                    operator: "mid".into(),
                },
            },
            RunFailure::HostGone {
                host: "b".into(),
                lost: Lost::Nothing,
            },
            RunFailure::Transfer {
                entry: "src/v".into(),
                from: "a".into(),
                to: vec!["b".into(), "c".into()],
                error: "a piece with a bad header".into(),
            },
            RunFailure::HostFailed {
                host: "b".into(),
                error: "context: no room".into(),
            },
            RunFailure::LinkClosed,
            RunFailure::Driver {
                error: "boom".into(),
            },
            RunFailure::Interrupted,
        ];
        let v = failure_validator();
        for f in all {
            let j = failure_json(&f);
            let errors: Vec<String> = v.iter_errors(&j).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{j}: {errors:#?}");
            assert_eq!(j["what"], f.to_string());
            assert_eq!(j["text"], j["what"]);
            assert_eq!(j["operator"].as_str(), f.operator(), "{j}");
            let mut without_what = j.clone();
            without_what.as_object_mut().unwrap().remove("what");
            assert!(!v.is_valid(&without_what), "{without_what}");
        }
    }
}
