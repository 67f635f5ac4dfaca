//! A scriptable operator for driver tests: `fio-testop ACTION ARGS...`.
//!
//! * `fill OUT VALUE` — every float32 element of OUT is VALUE; a dynamic OUT
//!   takes its shape from `FILL_SHAPE` (`2,3`).
//! * `add IN OUT DELTA` — OUT = IN + DELTA (a dynamic OUT takes IN's shape).
//! * `sum OUT IN...` — scalar float64 OUT = the sum of every element of IN...
//! * `string OUT TEXT` — a string output.
//! * `read IN` — prints the sum of IN's elements; exit 3 with the error.
//! * `fail CODE` — a line on stderr, then exit CODE.
//! * `sleep SECS` — sleeps (for timeouts and interruption).
//! * `noop` — exits at once (a bare spawn); `attach` — attaches as its
//!   operator, maps its inputs, and exits.
//! * `die-writing OUT` — maps OUT for writing, writes half, then SIGKILLs
//!   itself.
//! * `pattern OUT SEED` — OUT (any kind; a dynamic one takes `FILL_SHAPE`,
//!   a string `PATTERN_TEXT`) filled with a pseudo-random byte pattern of
//!   SEED; prints `checksum OUT <hex> <shape>`.
//! * `checksum IN...` — prints `checksum IN <hex> <shape>` of each input
//!   (the same line as `pattern`'s for the same bytes and shape).
//!
//! With `START_DELAY_MS` set, any action waits that long first.

#![forbid(unsafe_code)]

use fastio::Operator;
use fastio_examples::Result;

fn shape_from_env() -> Vec<usize> {
    std::env::var("FILL_SHAPE")
        .unwrap_or_else(|_| "4".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// A 64-bit checksum of `bytes` (word at a time; not cryptographic).
fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Fills `out` with an xorshift pattern of `seed`.
fn pattern(out: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    let mut words = out.chunks_exact_mut(8);
    for w in &mut words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes());
    }
    for b in words.into_remainder() {
        *b = (x >> 3) as u8;
    }
}

fn sum_f32(bytes: &[u8]) -> f64 {
    bytes
        .chunks_exact(4)
        .map(|c| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
        .sum()
}

/// Errors are printed as their message (one line), then exit 1.
fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    if let Some(ms) = std::env::var("START_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    match arg(0).as_str() {
        "fail" => {
            eprintln!("failing on purpose");
            std::process::exit(arg(1).parse().unwrap_or(1));
        }
        "noop" => return Ok(()),
        "sleep" => {
            println!("sleeping pid={}", std::process::id());
            std::thread::sleep(std::time::Duration::from_secs_f64(arg(1).parse()?));
            return Ok(());
        }
        _ => {}
    }
    let mut op = Operator::from_env()?;
    match arg(0).as_str() {
        "fill" => {
            let value: f32 = arg(2).parse()?;
            let out = op.output(&arg(1))?;
            if out.is_dynamic() {
                let shape = shape_from_env();
                let idx: Vec<usize> = (0..shape.len()).collect();
                out.update_shape(&idx, &shape)?;
                out.allocate()?;
            }
            for c in out.map_mut()?.chunks_exact_mut(4) {
                c.copy_from_slice(&value.to_ne_bytes());
            }
            println!("filled {} with {value}", out.name());
        }
        "add" => {
            let delta: f32 = arg(3).parse()?;
            let (shape, data) = {
                let input = op.input(&arg(1))?;
                let m = input.map()?;
                (m.allocation().dimensions().to_vec(), m.to_vec())
            };
            let out = op.output(&arg(2))?;
            if out.is_dynamic() {
                let idx: Vec<usize> = (0..shape.len()).collect();
                out.update_shape(&idx, &shape)?;
                out.allocate()?;
            }
            let mut m = out.map_mut()?;
            for (o, i) in m.chunks_exact_mut(4).zip(data.chunks_exact(4)) {
                let v = f32::from_ne_bytes([i[0], i[1], i[2], i[3]]) + delta;
                o.copy_from_slice(&v.to_ne_bytes());
            }
            println!("added {delta}");
        }
        "sum" => {
            let mut total = 0.0;
            for name in &args[2..] {
                total += sum_f32(&op.input(name)?.map()?);
            }
            op.output(&arg(1))?.set_scalar(total)?;
            println!("sum {total}");
        }
        "attach" => {
            // Attach, look at every entry, map the inputs, and leave.
            for input in op.inputs() {
                std::hint::black_box(input.map()?.len());
            }
            std::hint::black_box(op.outputs().count());
        }
        "string" => {
            op.output(&arg(1))?.set_string(&arg(2))?;
        }
        "read" => match op.input(&arg(1)).and_then(|i| i.map()) {
            Ok(m) => println!("read sum {}", sum_f32(&m)),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(3);
            }
        },
        "die-writing" => {
            let out = op.output(&arg(1))?;
            let mut m = out.map_mut()?;
            let half = m.len() / 2;
            m[..half].fill(0xAB);
            println!("wrote half; dying");
            let _ = std::process::Command::new("kill")
                .args(["-9", &std::process::id().to_string()])
                .status();
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
        "pattern" => {
            let seed: u64 = arg(2).parse()?;
            let out = op.output(&arg(1))?;
            if out.kind() == fastio::plan::EntryKind::String {
                let text = std::env::var("PATTERN_TEXT").unwrap_or_else(|_| format!("text {seed}"));
                out.set_string(&text)?;
            } else {
                if out.is_dynamic() {
                    let shape = shape_from_env();
                    let idx: Vec<usize> = (0..shape.len()).collect();
                    out.update_shape(&idx, &shape)?;
                    out.allocate()?;
                }
                pattern(&mut out.map_mut()?, seed);
            }
            let m = out.map()?;
            println!(
                "checksum {} {:016x} {:?}",
                arg(1),
                checksum(&m),
                m.allocation().dimensions()
            );
        }
        "checksum" => {
            for name in &args[1..] {
                let m = op.input(name)?.map()?;
                println!(
                    "checksum {name} {:016x} {:?}",
                    checksum(&m),
                    m.allocation().dimensions()
                );
            }
        }
        other => return Err(format!("unknown action {other:?}").into()),
    }
    Ok(())
}
