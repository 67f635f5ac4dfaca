//! Scenarios for the shared-memory tests (exhaustion, run inside a mount
//! namespace with a small tmpfs on `/dev/shm`; other users): `fio-shmfill
//! SCENARIO ARGS...` prints `ok` or the error (one line) and exits 0, 3
//! when the error is shared memory running out (`Error::is_no_space`), 4
//! when it is the context's own capacity, 1 otherwise.
//!
//! * `context CAPACITY` — creates a context of CAPACITY bytes;
//! * `alloc CAPACITY BYTES` — creates a context, then an allocation of
//!   BYTES, writes its every page, publishes it, and frees it;
//! * `array CAPACITY ROWS COLS` — the same through `create_array`
//!   (float32).
//! * `cached CAPACITY FIRST SECOND` — creates a context, an allocation of
//!   FIRST bytes (every page written) and frees it (the context keeps the
//!   block cached), then the same with SECOND bytes;
//! * `hold named|anonymous` — creates a context (named with the prefix
//!   `PREFIX` when set), publishes `secret` (8
//!   bytes, 0x5A), prints `handle HANDLE pid PID`, and keeps it until its
//!   standard input closes;
//! * `hold shared GID` — the same with a named context shared with group
//!   GID;
//! * `attach HANDLE` — attaches and reads `secret` (prints its bytes);
//! * `attach-shared NAME GID` — the same through `Context::attach_shared`.

#![forbid(unsafe_code)]

use fastio::{Context, ContextOptions, Error};

fn num(args: &[String], i: usize) -> Result<u64, String> {
    let a = args.get(i).ok_or(format!("argument {i} missing"))?;
    a.parse().map_err(|e| format!("{a:?}: {e}"))
}

fn context(capacity: u64) -> Result<Context, Error> {
    Context::new(&ContextOptions::new().capacity(capacity).anonymous(false))
}

/// `hold`: a context with a published `secret`, kept until stdin closes.
fn hold(named: bool, group: Option<u32>) -> Result<(), Error> {
    let mut opts = ContextOptions::new().capacity(1 << 20).anonymous(!named);
    if let Ok(prefix) = std::env::var("PREFIX") {
        opts = opts.prefix(prefix);
    }
    if let Some(gid) = group {
        opts = opts.share_with_group(gid);
    }
    let ctx = Context::new(&opts)?;
    let mut a = ctx.create(8)?;
    a.map_mut()?.fill(0x5A);
    a.publish("secret")?;
    let handle = ctx.handle_for_children()?;
    println!("handle {handle} pid {}", std::process::id());
    let mut sink = String::new();
    let _ = std::io::stdin().read_line(&mut sink);
    drop(a);
    Ok(())
}

fn run(args: &[String]) -> Result<Result<(), Error>, String> {
    if args.first().map(String::as_str) == Some("hold") {
        return Ok(match args.get(1).map(String::as_str) {
            Some("shared") => hold(true, Some(num(args, 2)? as u32)),
            kind => hold(kind == Some("named"), None),
        });
    }
    let (a1, a2, a3) = (
        num(args, 1).unwrap_or(0),
        num(args, 2).unwrap_or(0),
        num(args, 3).unwrap_or(0),
    );
    Ok(match args.first().map(String::as_str) {
        Some("context") => context(a1).map(drop),
        Some("alloc") => (|| {
            let ctx = context(a1)?;
            let mut a = ctx.create(a2)?;
            a.map_mut()?.iter_mut().step_by(4096).for_each(|b| *b = 1);
            a.publish("filled")?;
            a.free()
        })(),
        Some("cached") => (|| {
            let ctx = context(a1)?;
            for bytes in [a2, a3] {
                let mut a = ctx.create(bytes)?;
                a.map_mut()?.iter_mut().step_by(4096).for_each(|b| *b = 1);
                a.free()?;
            }
            Ok(())
        })(),
        Some("array") => (|| {
            let ctx = context(a1)?;
            let shape = [a2 as usize, a3 as usize];
            let mut a =
                ctx.create_array(dtype::Type::primitive(dtype::Primitive::Float32), &shape)?;
            a.map_mut()?.fill(0);
            a.free()
        })(),
        Some(how @ ("attach" | "attach-shared")) => (|| {
            let handle = args.get(1).cloned().unwrap_or_default();
            let ctx = if how == "attach" {
                Context::attach(&handle)?
            } else {
                Context::attach_shared(&handle, a2 as u32)?
            };
            let m = ctx.get("secret")?.map()?.to_vec();
            println!("read {m:?}");
            Ok(())
        })(),
        other => return Err(format!("unknown scenario {other:?}")),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(Ok(())) => println!("ok"),
        Ok(Err(e)) => {
            println!("error: {e}");
            let code = if e.is_no_space() {
                3
            } else if matches!(e, Error::CapacityExceeded { .. }) {
                4
            } else {
                1
            };
            std::process::exit(code);
        }
        Err(usage) => {
            eprintln!("usage: {usage}");
            std::process::exit(2);
        }
    }
}
