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
    /// List a recording: its channels (streams, images, entries), message
    /// counts, element types and shapes, time span, and whether it was
    /// closed well or cut off (read up to its last complete message).
    #[arg(long, value_name = "FILE")]
    info: PathBuf,
    /// Print it as JSON.
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
    let info = Recording::open(&args.info)
        .and_then(|r| r.info())
        .map_err(fail)?;
    if args.json {
        println!("{}", info_json(&info));
    } else {
        print!("{}", info_text(&info));
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
            (Some(e), Some(m)) => format!("{} at most {m:?}", e.name()),
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
    }
    if !info.counts.is_empty() {
        let pairs: Vec<String> = info
            .counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("counts: {}\n", pairs.join(", ")));
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
        "channels": info.channels.iter().map(|c| json!({
            "id": c.id,
            "topic": c.topic,
            "kind": kind(c.kind),
            "schema": c.schema,
            "encoding": c.encoding,
            "element": c.element.map(|e| e.name()),
            "max_shape": c.max_shape,
            "messages": c.messages,
            "bytes": c.bytes,
            "first_ns": c.span_ns.map(|s| s.0),
            "last_ns": c.span_ns.map(|s| s.1),
        })).collect::<Vec<_>>(),
    })
    .to_string()
}

pub(crate) fn replay(args: ReplayArgs) -> Result<(), Failure> {
    let file = args.file.display().to_string();
    let rec = Recording::open(&args.file).map_err(fail)?;
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
    let outputs: Vec<(String, Option<dtype::Primitive>)> = op
        .outputs()
        .map(|o| {
            let element = match o.element_type().kind() {
                TypeKind::Primitive(p) => Some(*p),
                _ => None,
            };
            (o.name().to_owned(), element)
        })
        .collect();
    let (output, element) = match &args.output {
        Some(n) => outputs
            .iter()
            .find(|(name, _)| name == n || name.rsplit('/').next() == Some(n.as_str()))
            .cloned()
            .ok_or_else(|| fail(format!("replay: this operator has no output {n:?}")))?,
        None if outputs.len() == 1 => outputs[0].clone(),
        None => {
            return Err(fail(format!(
                "replay: this operator has {} outputs: name one with --output",
                outputs.len()
            )));
        }
    };
    if element != channel.element {
        return Err(fail(format!(
            "replay: {file}: stream {} holds {}, output {output} holds {}",
            channel.topic,
            channel.element.map_or("?", |e| e.name()),
            element.map_or("a non-primitive type", |e| e.name())
        )));
    }
    let mut frames = rec.frames(&channel.topic).map_err(fail)?;
    let mut n = 0u64;
    let mut first: Option<(Instant, u64)> = None;
    let mut steps = op.frames().map_err(|e| fail(format!("replay: {e}")))?;
    while let Some(step) = steps.next() {
        let step = step.map_err(|e| fail(format!("replay: {e}")))?;
        let next = match frames.next() {
            None if args.looped && n > 0 => {
                frames = rec.frames(&channel.topic).map_err(fail)?;
                first = None;
                frames.next()
            }
            other => other,
        };
        let Some(frame) = next else {
            // The recording is over: this step publishes nothing, and the
            // stream ends after the frames before (not a failure).
            drop(step);
            steps.end();
            break;
        };
        let frame = frame.map_err(|e| fail(format!("replay: {e}")))?;
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
        let shape: Vec<usize> = frame.header.shape.iter().map(|&d| d as usize).collect();
        let mut slot = step
            .output(&output)
            .map_err(|e| fail(format!("replay: {e}")))?;
        slot.set_shape(&shape)
            .map_err(|e| fail(format!("replay: frame {}: {e}", frame.header.frame)))?;
        let bytes = slot.bytes_mut().map_err(|e| fail(format!("replay: {e}")))?;
        if bytes.len() != frame.bytes.len() {
            return Err(fail(format!(
                "replay: frame {}: {} bytes recorded, the slot holds {}",
                frame.header.frame,
                frame.bytes.len(),
                bytes.len()
            )));
        }
        bytes.copy_from_slice(&frame.bytes);
        n += 1;
    }
    println!("replay: {n} frames of {} from {file}", channel.topic);
    Ok(())
}
