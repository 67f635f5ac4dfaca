//! `fastio record --info FILE` (what a recording holds) and `fastio replay
//! FILE` (a recorded stream as a pipeline's source).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use dtype::TypeKind;
use fastio_pipeline::RecordingReport;
use fastio_record::{ChannelKind, Info, Recording};
use serde_json::json;

use crate::Failure;

/// `fastio record`.
#[derive(Args)]
pub(crate) struct RecordArgs {
    /// Record a running streaming run to this MCAP file: every stream (or
    /// those given with --stream), as an observer that never holds a frame,
    /// so the pipeline never waits for it, running only on CPU time
    /// nothing else wants (SCHED_IDLE); frames it could not copy in time
    /// are counted as skipped (a stream too fast to follow is sampled
    /// about every 10 ms). Ends with the run, after --duration,
    /// or on Ctrl-C (the file is closed well); killed, it leaves a file
    /// readable up to its last complete message.
    #[arg(short, long, value_name = "FILE", required_unless_present = "info")]
    output: Option<PathBuf>,
    /// The run's context: its name in /dev/shm (`--named-context` runs)
    /// or a memfd as `/proc/PID/fd/N` (`fastio top` lists both). Default:
    /// the only streaming run of this user (of --pipeline, if given).
    #[arg(long, value_name = "CONTEXT")]
    context: Option<String>,
    /// The pipeline whose run to record.
    #[arg(long, value_name = "NAME")]
    pipeline: Option<String>,
    /// Record only this stream (`operator/output`; repeatable).
    #[arg(long = "stream", value_name = "STREAM")]
    streams: Vec<String>,
    /// Stop recording after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Wait up to this many seconds for the run to start (default: it must
    /// be running already).
    #[arg(long, value_name = "SECS")]
    wait: Option<f64>,
    /// Hold frames like a `block` consumer, so nothing is skipped (the
    /// pipeline then waits for the recorder when it falls behind): from the
    /// recorder's place every run keeps in each stream. Killing the
    /// recorder frees its place at once.
    #[arg(long)]
    lossless: bool,
    /// List a recording instead: its channels (streams, images, entries),
    /// message counts, element types and shapes, time span, and whether it
    /// was closed well or cut off (read up to its last complete message).
    #[arg(long, value_name = "FILE", conflicts_with = "output")]
    info: Option<PathBuf>,
    /// With --info: print it as JSON.
    #[arg(long)]
    json: bool,
}

/// How fast `fastio replay` publishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Pace {
    /// As the frames were taken (their source timestamps' differences).
    Recorded,
    /// As fast as the consumers take them.
    Fast,
}

/// `fastio replay`.
#[derive(Args)]
pub(crate) struct ReplayArgs {
    /// The recording (MCAP, from `fastio run --record` or
    /// `streaming.record`).
    file: PathBuf,
    /// The recorded stream to replay (default: the only one there is).
    #[arg(long, value_name = "STREAM")]
    stream: Option<String>,
    /// This operator's output to publish into (default: its only output).
    #[arg(long, value_name = "NAME")]
    output: Option<String>,
    /// `recorded` (the frames' own pace) or `fast` (as fast as the
    /// consumers take them).
    #[arg(long, value_enum, default_value_t = Pace::Recorded)]
    pace: Pace,
    /// After the last frame, start again from the first (until the run's
    /// frame count or duration stops the source).
    #[arg(long = "loop")]
    looped: bool,
}

fn fail(message: impl std::fmt::Display) -> Failure {
    Failure {
        message: message.to_string(),
        code: 1,
    }
}

/// One line for a run's summary: where the recording went and what it
/// holds.
pub(crate) fn recording_line(r: &RecordingReport) -> String {
    let mut parts: Vec<String> = r
        .streams
        .iter()
        .map(|s| {
            if s.skipped > 0 {
                format!("{} {} frames ({} skipped)", s.stream, s.frames, s.skipped)
            } else {
                format!("{} {} frames", s.stream, s.frames)
            }
        })
        .collect();
    if r.entries > 0 {
        parts.push(format!("{} entries", r.entries));
    }
    let mut line = format!("recorded: {}", r.path.display());
    if !parts.is_empty() {
        line.push_str(&format!(" ({})", parts.join(", ")));
    }
    if let Some(e) = &r.error {
        line.push_str(&format!("; the recording stopped early: {e}"));
    }
    line
}

pub(crate) fn record(args: RecordArgs) -> Result<(), Failure> {
    let Some(file) = &args.info else {
        return live::record(&args);
    };
    let info = Recording::open(file)
        .and_then(|r| r.info())
        .map_err(|e| fail(format!("record --info: {e}")))?;
    if args.json {
        println!("{}", info_json(&info));
    } else {
        print!("{}", info_text(&info));
    }
    if info.problem_count > 0 {
        // Listed above; the exit status says it too.
        return Err(fail(format!(
            "record --info: {}: damaged: {} problem(s), the first: {}",
            info.path.display(),
            info.problem_count,
            info.problems.first().map_or("", String::as_str)
        )));
    }
    Ok(())
}

fn kind(k: ChannelKind) -> &'static str {
    match k {
        ChannelKind::Stream => "stream",
        ChannelKind::Image => "image",
        ChannelKind::Entries => "entries",
        ChannelKind::Other => "other",
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn info_text(info: &Info) -> String {
    let mut out = format!(
        "{}: {} bytes, profile {:?}, {} messages in {} channels, {}\n",
        info.path.display(),
        info.bytes,
        info.profile,
        info.messages,
        info.channels.len(),
        match &info.cut {
            _ if info.problem_count > 0 => format!("damaged: {} problem(s)", info.problem_count),
            None if info.complete => "closed well".to_owned(),
            None => "no footer".to_owned(),
            Some(why) => format!("read up to its last complete message ({why})"),
        }
    );
    if !info.run.is_empty() {
        let pairs: Vec<String> = info.run.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!("run: {}\n", pairs.join(", ")));
    }
    let start = info
        .channels
        .iter()
        .filter_map(|c| c.span_ns.map(|s| s.0))
        .min()
        .unwrap_or(0);
    for c in &info.channels {
        let what = match (c.element, &c.max_shape) {
            (Some(e), Some(m)) => format!("{} at most {}", e.name(), shape_text(m)),
            _ => c.schema.clone(),
        };
        let span = c.span_ns.map_or_else(
            || "-".to_owned(),
            |(a, b)| {
                format!(
                    "{:.3}..{:.3} s",
                    seconds(a.saturating_sub(start)),
                    seconds(b.saturating_sub(start))
                )
            },
        );
        out.push_str(&format!(
            "  {:<24} {:<8} {:<28} {:>8} messages {:>12} bytes  {span}\n",
            c.topic,
            kind(c.kind),
            what,
            c.messages,
            c.bytes
        ));
        if c.bad_messages > 0 {
            out.push_str(&format!(
                "  {:<24} {} bad message(s)\n",
                c.topic, c.bad_messages
            ));
        }
    }
    if !info.counts.is_empty() {
        let pairs: Vec<String> = info
            .counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("counts: {}\n", pairs.join(", ")));
    }
    for p in &info.problems {
        out.push_str(&format!("problem: {p}\n"));
    }
    if info.problem_count > info.problems.len() as u64 {
        out.push_str(&format!(
            "problem: … and {} more\n",
            info.problem_count - info.problems.len() as u64
        ));
    }
    out
}

fn info_json(info: &Info) -> String {
    json!({
        "path": info.path,
        "bytes": info.bytes,
        "profile": info.profile,
        "messages": info.messages,
        "complete": info.complete,
        "cut": info.cut,
        "run": info.run,
        "counts": info.counts,
        "problems": info.problems,
        "problem_count": info.problem_count,
        "channels": info.channels.iter().map(|c| json!({
            "id": c.id,
            "topic": c.topic,
            "kind": kind(c.kind),
            "schema": c.schema,
            "encoding": c.encoding,
            "element": c.element.map(|e| e.name()),
            "max_shape": c.max_shape,
            "messages": c.messages,
            "bad_messages": c.bad_messages,
            "checksum": c.checksum,
            "bytes": c.bytes,
            "first_ns": c.span_ns.map(|s| s.0),
            "last_ns": c.span_ns.map(|s| s.1),
        })).collect::<Vec<_>>(),
    })
    .to_string()
}

/// A shape as the docs write it: `[1024, 512]`.
fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// One output of the replaying operator: its name, element type and
/// largest shape.
struct ReplayOutput {
    name: String,
    element: Option<dtype::Primitive>,
    max_shape: Vec<usize>,
}

/// The operator's outputs, each with its largest shape from the run's plan.
fn replay_outputs(op: &fastio::Operator) -> Vec<ReplayOutput> {
    let (plan, _) = op.plan();
    op.outputs()
        .map(|o| {
            let element = match o.element_type().kind() {
                TypeKind::Primitive(p) => Some(*p),
                _ => None,
            };
            let max_shape = plan
                .entries
                .iter()
                .position(|e| e.name == o.name())
                .and_then(|e| plan.streaming.as_ref()?.max_shapes.get(e).cloned())
                .unwrap_or_else(|| o.shape().to_vec());
            ReplayOutput {
                name: o.name().to_owned(),
                element,
                max_shape,
            }
        })
        .collect()
}

/// Fills `step`'s slot of `output` with `frame`, or says why it cannot
/// (the caller then abandons the step: nothing of it is published).
fn fill_slot(
    step: &fastio::Step,
    output: &str,
    frame: &fastio_record::RecordedFrame,
) -> Result<(), String> {
    let shape: Vec<usize> = frame.header.shape.iter().map(|&d| d as usize).collect();
    let mut slot = step.output(output).map_err(|e| format!("replay: {e}"))?;
    slot.set_shape(&shape)
        .map_err(|e| format!("replay: frame {}: {e}", frame.header.frame))?;
    let bytes = slot.bytes_mut().map_err(|e| format!("replay: {e}"))?;
    if bytes.len() != frame.bytes.len() {
        return Err(format!(
            "replay: frame {}: {} bytes recorded, the slot holds {}",
            frame.header.frame,
            frame.bytes.len(),
            bytes.len()
        ));
    }
    bytes.copy_from_slice(&frame.bytes);
    Ok(())
}

pub(crate) fn replay(args: ReplayArgs) -> Result<(), Failure> {
    let file = args.file.display().to_string();
    let rec = Recording::open(&args.file).map_err(|e| fail(format!("replay: {e}")))?;
    // The whole file is read and checked here (every message's checksum,
    // MCAP's CRCs, every frame's size) before a frame is published.
    let channel = rec
        .stream_channel(args.stream.as_deref())
        .map_err(|e| fail(format!("replay: {e}")))?;
    if std::env::var_os(fastio::OPERATOR_ENV).is_none() {
        return Err(fail(format!(
            "replay: runs as a pipeline operator's command (`command: [fastio, replay, {file}]`): \
             {} is not set",
            fastio::OPERATOR_ENV
        )));
    }
    let mut op = fastio::Operator::from_env().map_err(|e| fail(format!("replay: {e}")))?;
    let outputs = replay_outputs(&op);
    let out = match &args.output {
        Some(n) => outputs
            .iter()
            .find(|o| o.name == *n || o.name.rsplit('/').next() == Some(n.as_str()))
            .ok_or_else(|| fail(format!("replay: this operator has no output {n:?}")))?,
        None if outputs.len() == 1 => &outputs[0],
        None => {
            return Err(fail(format!(
                "replay: this operator has {} outputs: name one with --output",
                outputs.len()
            )));
        }
    };
    let recorded_max = channel.max_shape.clone().unwrap_or_default();
    let fits = recorded_max.len() == out.max_shape.len()
        && recorded_max.iter().zip(&out.max_shape).all(|(r, o)| r <= o);
    if out.element != channel.element || !fits {
        return Err(fail(format!(
            "replay: {file}: stream {} holds {} at most {}, output {} holds {} at most {}",
            channel.topic,
            channel.element.map_or("?", |e| e.name()),
            shape_text(&recorded_max),
            out.name,
            out.element.map_or("a non-primitive type", |e| e.name()),
            shape_text(&out.max_shape)
        )));
    }
    if !channel.checksum {
        eprintln!(
            "replay: {file}: written before recordings had checksums: its frames are checked \
             for size and shape only"
        );
    }
    let output = out.name.clone();
    let mut frames = rec
        .frames(&channel.topic)
        .map_err(|e| fail(format!("replay: {e}")))?;
    let mut n = 0u64;
    let mut first: Option<(Instant, u64)> = None;
    let mut steps = op.frames().map_err(|e| fail(format!("replay: {e}")))?;
    while let Some(step) = steps.next() {
        let step = step.map_err(|e| fail(format!("replay: {e}")))?;
        let next = match frames.next() {
            None if args.looped && n > 0 => {
                frames = rec
                    .frames(&channel.topic)
                    .map_err(|e| fail(format!("replay: {e}")))?;
                first = None;
                frames.next()
            }
            other => other,
        };
        let frame = match next {
            None => {
                // The recording is over: this step publishes nothing, and
                // the stream ends after the frames before (not a failure).
                step.abandon();
                steps.end();
                break;
            }
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                step.abandon();
                return Err(fail(format!("replay: {e}")));
            }
        };
        if args.pace == Pace::Recorded {
            let t = frame.header.timestamp_ns;
            match first {
                None => first = Some((Instant::now(), t)),
                Some((start, t0)) => {
                    let due = start + Duration::from_nanos(t.saturating_sub(t0));
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
            }
        }
        if let Err(e) = fill_slot(&step, &output, &frame) {
            // A frame that cannot be filled whole is never published.
            step.abandon();
            return Err(fail(e));
        }
        n += 1;
    }
    println!("replay: {n} frames of {} from {file}", channel.topic);
    Ok(())
}

/// `fastio record -o FILE`: a running run's streams through observers.
mod live {
    use std::fs::File;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use fastio::plan::Plan;
    use fastio::{Context, Error as FastioError};
    use fastio_record::{Recorder, RunInfo, Session};

    use super::{RecordArgs, fail};
    use crate::Failure;
    use crate::contexts::{RunSelector, find_run};

    /// The run to record: its context (attached) and plan, and what to
    /// call it.
    fn find(args: &RecordArgs) -> Result<(Context, Option<File>, Plan, String), Failure> {
        let found = find_run(
            &RunSelector {
                context: args.context.as_deref(),
                pipeline: args.pipeline.as_deref(),
                created_by: None,
            },
            "record",
        )?;
        Ok((found.ctx, found.file, found.plan, found.label))
    }

    /// Says which of the chosen streams among `rest` the recorder never
    /// watched: the run ended (its owner closed the context) first.
    fn run_ended_before(rest: &[fastio::plan::EntryPlan], chosen: &[&fastio::plan::EntryPlan]) {
        let never: Vec<&str> = rest
            .iter()
            .filter(|e| chosen.iter().any(|c| c.key == e.key))
            .map(|e| e.name.as_str())
            .collect();
        eprintln!(
            "fastio: record: the run ended before the recorder watched {}: recorded what came \
             before",
            never.join(", ")
        );
    }

    pub(super) fn record(args: &RecordArgs) -> Result<(), Failure> {
        let out = args.output.clone().unwrap_or_default();
        // A lossy recorder takes only CPU time the pipeline leaves: before
        // any thread starts (Linux keeps the policy per thread; threads
        // inherit their creator's).
        if !args.lossless
            && let Err(e) = shm_core::run_only_when_idle()
        {
            eprintln!("fastio: record: could not lower its priority (SCHED_IDLE): {e}");
        }
        let until = std::time::Instant::now()
            + Duration::from_secs_f64(args.wait.unwrap_or(0.0).clamp(0.0, 86_400.0));
        let (ctx, _file, plan, label) = loop {
            match find(args) {
                Ok(found) => break found,
                Err(e) if std::time::Instant::now() >= until => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let chosen: Vec<&fastio::plan::EntryPlan> = plan
            .entries
            .iter()
            .filter(|e| {
                args.streams.is_empty()
                    || args.streams.iter().any(|s| s.eq_ignore_ascii_case(&e.name))
            })
            .collect();
        if chosen.is_empty() {
            let known: Vec<&str> = plan.entries.iter().map(|e| e.name.as_str()).collect();
            return Err(fail(format!(
                "record: no stream of {} is named {} (its streams: {})",
                plan.pipeline,
                args.streams.join(", "),
                known.join(", ")
            )));
        }
        let recorder = Recorder::create(
            &out,
            &RunInfo {
                pipeline: plan.pipeline.clone(),
                run: label.clone(),
            },
        )
        .map_err(fail)?;
        let mut session = Session::new(out.clone(), recorder);
        let max_shapes = plan
            .streaming
            .as_ref()
            .map(|s| s.max_shapes.clone())
            .unwrap_or_default();
        for (e, entry) in plan.entries.iter().enumerate() {
            if !chosen.iter().any(|c| c.key == entry.key) {
                continue;
            }
            // A recorder that started late (`--wait`, or a lossy one that
            // the pipeline left no CPU time) may find the run over before
            // it opened every stream: it records what it opened, closes
            // the file well and says which it never watched.
            let ended = |err: &FastioError| matches!(err, FastioError::ContextClosed);
            let added = if args.lossless {
                // The recorder's place every driver keeps in each stream.
                let consumer = match ctx.stream_consumer(&entry.key, entry.consumers.len()) {
                    Err(err) if ended(&err) => {
                        run_ended_before(&plan.entries[e..], &chosen);
                        break;
                    }
                    other => other,
                };
                let consumer = consumer.map_err(|err| match err {
                    FastioError::StreamBusy { .. } => fail(format!(
                        "record: stream {}: its recorder's place is taken (the run records \
                             itself, or another lossless recorder runs); record without --lossless",
                        entry.name
                    )),
                    other => fail(format!("record: stream {}: {other}", entry.name)),
                })?;
                let max = max_shapes.get(e).cloned().unwrap_or_default();
                session.add_consumer(consumer, entry.element, &max)
            } else {
                let tap = match ctx.stream_tap(&entry.key) {
                    Err(err) if ended(&err) => {
                        run_ended_before(&plan.entries[e..], &chosen);
                        break;
                    }
                    other => other,
                };
                let tap =
                    tap.map_err(|err| fail(format!("record: stream {}: {err}", entry.name)))?;
                session.add_tap(tap)
            };
            added.map_err(fail)?;
        }
        let stop = session.stop_flag();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone())
                .map_err(|e| fail(format!("record: signal handler: {e}")))?;
        }
        if let Some(d) = args.duration {
            let stop = stop.clone();
            let d = Duration::from_secs_f64(d.max(0.0));
            std::thread::spawn(move || {
                std::thread::sleep(d);
                stop.store(true, Ordering::Release);
            });
        }
        eprintln!(
            "fastio: recording {} stream(s) of {} ({label}) to {}{}",
            chosen.len(),
            plan.pipeline,
            out.display(),
            if args.lossless { ", lossless" } else { "" }
        );
        session.wait();
        let report = session.finish();
        println!("{}", super::recording_line(&report));
        match report.error {
            Some(e) => Err(fail(format!("record: {e}"))),
            None => Ok(()),
        }
    }
}
