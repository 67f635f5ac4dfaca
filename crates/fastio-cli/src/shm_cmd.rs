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
    /// Unlink this library's segments that no live process has open.
    Gc {
        /// Only segments named `<PREFIX>-...`.
        #[arg(long)]
        prefix: Option<String>,
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
        ShmCommand::Gc { prefix } => {
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
