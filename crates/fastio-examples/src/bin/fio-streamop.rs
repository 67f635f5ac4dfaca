//! A scriptable streaming operator for driver tests:
//! `fio-streamop ROLE [INPUTS...] [OUTPUT]`, every frame checked word by
//! word.
//!
//! A frame is `uint32`: word 0 counts the stages it went through, word
//! `i > 0` is `value(source frame, i) + stages`. Its row count varies with
//! the source frame (up to the output's largest shape).
//!
//! * `source OUT` — publishes frames until the job's frame count or
//!   duration (`PAUSE_US` between frames). With `HOLD_AT=k` and
//!   `HOLD_UNTIL=FILE`, it stops after publishing frame `k - 1` until FILE
//!   exists (a test's way to keep a stream going until it has looked;
//!   bounded: it fails after 300 s).
//! * `stage IN... OUT` — checks every input frame, then writes the first
//!   one's content, one stage further, to OUT (`SLOW_US` per frame).
//! * `sink IN...` — checks every frame; prints the count; with
//!   `EXPECT_FRAMES`, exits 5 unless exactly that many arrived, in order;
//!   with `EXPECT_STAGES=a,b,...`, exits 6 unless every frame of input `k`
//!   went through the `k`-th count of stages (which producer it came from).
//!
//!   With `SLOW_FROM=a` and `SLOW_UNTIL=b`, a stage's or sink's `SLOW_US`
//!   applies to frames `a..b` only, and a sink prints the median age of
//!   the frames it received before, during and after that phase (now
//!   less the source frame's time, in µs), and the median time from one
//!   frame to the next during it (its cycle, µs):
//!   `sink: latency p50 us before X during Y after Z cycle C`.
//!
//! `FAIL_AT=k` makes the operator return an error at step `k` (its loop is
//! abandoned: its outputs fail). `ERRORS_ON_STDOUT` prints the error on
//! stdout. `DIE_AT=k` makes the operator SIGKILL itself at step `k` while it holds
//! its inputs and has half written its output; with `DIE_ONCE=FILE` only
//! the first time (the file marks it). `DIE_AFTER_PUBLISH=k` makes a stage
//! publish its output of step `k` and SIGKILL itself while it still holds
//! the input (its restart must not deliver that frame again). A wrong
//! word exits 4.

#![forbid(unsafe_code)]

use std::time::Duration;

use fastio::{Operator, Step};
use fastio_examples::Result;

/// Word `i` of source frame `seq` before any stage.
fn value(seq: u64, i: usize) -> u32 {
    (seq as u32)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(i as u32)
}

fn words(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

/// Checks a frame of source frame `seq`; its stage count.
fn check(seq: u64, bytes: &[u8]) -> u32 {
    let mut w = words(bytes);
    let stages = w.next().unwrap_or(0);
    for (i, got) in w.enumerate() {
        let want = value(seq, i + 1).wrapping_add(stages);
        if got != want {
            eprintln!("frame {seq} word {}: {got:#x}, expected {want:#x}", i + 1);
            std::process::exit(4);
        }
    }
    stages
}

/// Writes source frame `seq`, `stages` stages along, into `out`.
fn fill(seq: u64, stages: u32, out: &mut [u8]) {
    for (i, w) in out.chunks_exact_mut(4).enumerate() {
        let v = if i == 0 {
            stages
        } else {
            value(seq, i).wrapping_add(stages)
        };
        w.copy_from_slice(&v.to_le_bytes());
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// `DIE_AT`: dies at this step, holding its frames, output half written.
fn maybe_die(step: &Step, out: Option<&str>) -> Result {
    if env_u64("FAIL_AT") == Some(step.seq()) {
        return Err(format!("failing on purpose at frame {}", step.seq()).into());
    }
    if env_u64("DIE_AT") != Some(step.seq()) {
        return Ok(());
    }
    if !first_death()? {
        return Ok(());
    }
    if let Some(o) = out {
        let mut slot = step.output(o)?;
        let b = slot.bytes_mut()?;
        let half = b.len() / 2;
        b[..half].fill(0xEE);
    }
    eprintln!("dying at frame {}", step.seq());
    die()
}

/// Whether to die now: always, or with `DIE_ONCE=FILE` only the first
/// time (the file marks it).
fn first_death() -> Result<bool> {
    if let Ok(marker) = std::env::var("DIE_ONCE") {
        if std::path::Path::new(&marker).exists() {
            return Ok(false);
        }
        std::fs::write(&marker, b"died")?;
    }
    Ok(true)
}

/// `HOLD_AT=k`, `HOLD_UNTIL=FILE`: once frame `next - 1` is published and
/// `next` is `k`, waits until FILE exists (at most 300 s, then an error).
fn maybe_hold(next: u64) -> Result {
    if env_u64("HOLD_AT") != Some(next) {
        return Ok(());
    }
    let file = std::env::var("HOLD_UNTIL").map_err(|_| "HOLD_AT without HOLD_UNTIL")?;
    let t0 = std::time::Instant::now();
    while !std::path::Path::new(&file).exists() {
        if t0.elapsed() > Duration::from_secs(300) {
            return Err(format!("held at frame {next}: {file} never appeared").into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Whether frame `seq` is slowed: every frame, or with `SLOW_FROM` and
/// `SLOW_UNTIL` those of that phase.
fn slowed(seq: u64) -> bool {
    match (env_u64("SLOW_FROM"), env_u64("SLOW_UNTIL")) {
        (Some(a), Some(b)) => (a..b).contains(&seq),
        _ => true,
    }
}

/// The phase of frame `seq` (0 before the slow one, 1 in it, 2 after).
fn phase(seq: u64) -> usize {
    match (env_u64("SLOW_FROM"), env_u64("SLOW_UNTIL")) {
        (Some(a), _) if seq < a => 0,
        (_, Some(b)) if seq >= b => 2,
        _ => 1,
    }
}

/// The median of `v` (0 when empty).
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Nanoseconds since the Unix epoch.
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// SIGKILLs this process.
fn die() -> Result {
    let _ = std::process::Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    std::thread::sleep(Duration::from_secs(60));
    Err("SIGKILL did not arrive".into())
}

/// Errors are printed as their message (one line; on stdout with
/// `ERRORS_ON_STDOUT`, where the driver must not look for meaning either),
/// then exit 1.
fn main() {
    if let Err(e) = run() {
        if std::env::var_os("ERRORS_ON_STDOUT").is_some() {
            println!("error: {e}");
        } else {
            eprintln!("error: {e}");
        }
        std::process::exit(1);
    }
}

fn run() -> Result {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let role = args.first().cloned().unwrap_or_default();
    let pause = env_u64("PAUSE_US").map(Duration::from_micros);
    let slow = env_u64("SLOW_US").map(Duration::from_micros);
    let mut op = Operator::from_env()?;
    let mut count = 0u64;
    let mut last: Option<u64> = None;
    match role.as_str() {
        "source" => {
            let out = args.get(1).ok_or("source OUT")?.clone();
            for step in op.frames()? {
                let step = step?;
                maybe_die(&step, Some(&out))?;
                let mut slot = step.output(&out)?;
                let mut shape = slot.shape().to_vec();
                shape[0] = 1 + (step.seq() as usize % shape[0]);
                slot.set_shape(&shape)?;
                fill(step.seq(), 0, slot.bytes_mut()?);
                drop(slot);
                count += 1;
                let next = step.seq() + 1;
                drop(step);
                maybe_hold(next)?;
                if let Some(p) = pause {
                    std::thread::sleep(p);
                }
            }
            println!("source: {count} frames");
        }
        "stage" => {
            let (out, inputs) = args[1..].split_last().ok_or("stage IN... OUT")?;
            for step in op.frames()? {
                let step = step?;
                let seq = step.seq();
                let mut stages = 0;
                for i in inputs {
                    let f = step.input(i)?;
                    stages = check(f.source_seq(), f.bytes());
                }
                maybe_die(&step, Some(out))?;
                let first = step.input(&inputs[0])?;
                let mut slot = step.output(out)?;
                slot.set_shape(first.shape())?;
                fill(step.seq(), stages + 1, slot.bytes_mut()?);
                drop(slot);
                if env_u64("DIE_AFTER_PUBLISH") == Some(step.seq()) && first_death()? {
                    // Keep the input past the step: dropping the step
                    // publishes the output, the input stays held.
                    let _held = step.input_shared(&inputs[0])?.clone();
                    let seq = step.seq();
                    drop(step);
                    eprintln!("dying after publishing frame {seq}");
                    die()?;
                }
                count += 1;
                if let Some(d) = slow
                    && slowed(seq)
                {
                    std::thread::sleep(d);
                }
            }
            println!("stage: {count} frames");
        }
        "sink" => {
            let inputs = &args[1..];
            let expect_stages: Option<Vec<u32>> = std::env::var("EXPECT_STAGES")
                .ok()
                .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect());
            let mut ages: [Vec<u64>; 3] = Default::default();
            let mut cycles: Vec<u64> = Vec::new();
            let mut last_start: Option<u64> = None;
            for step in op.frames()? {
                let step = step?;
                let now = now_ns();
                ages[phase(step.seq())].push(now.saturating_sub(step.timestamp_ns()) / 1000);
                if phase(step.seq()) == 1
                    && let Some(t) = last_start
                {
                    cycles.push(now.saturating_sub(t) / 1000);
                }
                last_start = Some(now);
                for (k, i) in inputs.iter().enumerate() {
                    let f = step.input(i)?;
                    let stages = check(f.source_seq(), f.bytes());
                    if let Some(want) = expect_stages.as_ref().and_then(|e| e.get(k))
                        && *want != stages
                    {
                        eprintln!("input {i}: a frame of {stages} stages, expected {want}");
                        std::process::exit(6);
                    }
                }
                maybe_die(&step, None)?;
                if let Some(l) = last
                    && step.seq() <= l
                {
                    eprintln!("frame {} after {l}", step.seq());
                    std::process::exit(4);
                }
                last = Some(step.seq());
                count += 1;
                if let Some(d) = slow
                    && slowed(step.seq())
                {
                    std::thread::sleep(d);
                }
            }
            println!("sink: {count} frames");
            if env_u64("SLOW_FROM").is_some() {
                let [before, during, after] = &mut ages;
                println!(
                    "sink: latency p50 us before {} during {} after {} cycle {}",
                    median(before),
                    median(during),
                    median(after),
                    median(&mut cycles)
                );
            }
            if let Some(n) = env_u64("EXPECT_FRAMES")
                && (n != count || last != n.checked_sub(1))
            {
                eprintln!("expected {n} frames, got {count} (last {last:?})");
                std::process::exit(5);
            }
        }
        other => return Err(format!("unknown role {other:?}").into()),
    }
    Ok(())
}
