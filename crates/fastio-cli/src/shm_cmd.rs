//! `fastio shm ls | gc`: this library's shared-memory segments.

use clap::Subcommand;
use serde_json::json;
use shm_core::SegmentInfo;

use crate::Failure;

#[derive(Subcommand)]
pub(crate) enum ShmCommand {
    /// List this library's segments in /dev/shm: name, size, creator, alive or not.
    Ls {
        /// Only segments named `<PREFIX>-...`.
        #[arg(long)]
        prefix: Option<String>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Unlink this library's segments that no live process has open: every
    /// dead one, or only those named, or only one run's.
    Gc {
        /// Only segments named `<PREFIX>-...`.
        #[arg(long)]
        prefix: Option<String>,
        /// Only the dead segments that this process created: the contexts
        /// of the `fastio run` whose process id it was (the `creator` `shm
        /// ls` shows).
        #[arg(long, value_name = "PID", conflicts_with = "names")]
        run: Option<u32>,
        /// Only these segments (names as `shm ls` prints them); a named
        /// segment still open in a live process is an error.
        #[arg(value_name = "NAME")]
        names: Vec<String>,
    },
}

fn failure(context: &str, e: shm_core::Error) -> Failure {
    Failure {
        message: format!("{context}: {e}"),
        code: 1,
    }
}

fn row(s: &SegmentInfo) -> String {
    let creator = s.creator_pid.map_or("?".to_owned(), |p| format!("pid {p}"));
    let state = if s.alive { "alive" } else { "dead" };
    let valid = if s.valid { "" } else { " (invalid header)" };
    format!(
        "{:<44} {:>12} {:>12} uid {:<6} {}{}",
        s.name, s.size, creator, s.uid, state, valid
    )
}

pub(crate) fn run(cmd: ShmCommand) -> Result<(), Failure> {
    match cmd {
        ShmCommand::Ls { prefix, json } => {
            let segments = shm_core::list_segments(prefix.as_deref())
                .map_err(|e| failure("listing /dev/shm", e))?;
            if json {
                let rows: Vec<_> = segments
                    .iter()
                    .map(|s| {
                        json!({"name": s.name, "size": s.size, "creator_pid": s.creator_pid, "uid": s.uid,
                               "alive": s.alive, "valid": s.valid, "live_participants": s.live_participants})
                    })
                    .collect();
                println!("{}", serde_json::Value::Array(rows));
            } else {
                println!(
                    "{:<44} {:>12} {:>12} {:<10} state",
                    "name", "bytes", "creator", "owner"
                );
                for s in &segments {
                    println!("{}", row(s));
                }
            }
            Ok(())
        }
        ShmCommand::Gc {
            run: None, names, ..
        } if !names.is_empty() => {
            let mut removed = Vec::new();
            for name in &names {
                match shm_core::gc_one(name) {
                    Ok(Some(info)) => removed.push(info),
                    Ok(None) => {
                        return Err(Failure {
                            message: format!(
                                "collecting {name}: no segment of this library named so (see `fastio shm ls`)"
                            ),
                            code: 1,
                        });
                    }
                    Err(e) => return Err(failure(&format!("collecting {name}"), e)),
                }
            }
            for s in &removed {
                println!("removed {}", row(s));
            }
            println!("{} segment(s) removed", removed.len());
            Ok(())
        }
        ShmCommand::Gc {
            prefix,
            run: Some(pid),
            ..
        } => {
            let segments = shm_core::list_segments(prefix.as_deref())
                .map_err(|e| failure("listing /dev/shm", e))?;
            let mut removed = Vec::new();
            for s in segments.iter().filter(|s| s.creator_pid == Some(pid)) {
                if s.alive {
                    continue;
                }
                match shm_core::gc_one(&s.name) {
                    Ok(Some(info)) => removed.push(info),
                    Ok(None) | Err(shm_core::Error::InUse(_)) => {}
                    Err(e) => return Err(failure(&format!("collecting {}", s.name), e)),
                }
            }
            for s in &removed {
                println!("removed {}", row(s));
            }
            println!("{} segment(s) removed", removed.len());
            Ok(())
        }
        ShmCommand::Gc { prefix, .. } => {
            let removed =
                shm_core::gc(prefix.as_deref()).map_err(|e| failure("collecting /dev/shm", e))?;
            for s in &removed {
                println!("removed {}", row(s));
            }
            println!("{} segment(s) removed", removed.len());
            Ok(())
        }
    }
}
