//! The `fastio` command-line tool.
//!
//! Each subcommand is a thin front on one library layer:
//! `fastio dtype` on `dtype`, `fastio shm` on `shm-core`, `fastio params`
//! on `params-io`, `fastio pipeline` and `fastio run` on `fastio-pipeline`.

#![forbid(unsafe_code)]

mod contexts;
mod cpu_latency;
mod dtype_cmd;
mod graph;
mod metrics;
mod params_cmd;
mod params_output;
mod pipeline_cmd;
mod record_cmd;
mod run_cmd;
mod shm_cmd;
mod top;
mod view_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Zero-copy typed N-dimensional data between processes.
#[derive(Parser)]
#[command(name = "fastio", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Datashape types: parse, print canonically, show the layout.
    #[command(subcommand)]
    Dtype(dtype_cmd::DtypeCommand),
    /// Shared-memory segments: list them, collect the dead ones.
    #[command(subcommand)]
    Shm(shm_cmd::ShmCommand),
    /// TVM/CVM parameter files: inspect, export to .npy, pack, verify.
    #[command(subcommand)]
    Params(params_cmd::ParamsCommand),
    /// Clara pipeline definitions: check, plan.
    #[command(subcommand)]
    Pipeline(pipeline_cmd::PipelineCommand),
    /// Run a pipeline: its operators as processes sharing one Fast I/O
    /// context.
    Run(Box<run_cmd::RunArgs>),
    /// Watch every live context of this user: memory, operators, streams,
    /// allocations (read-only; `q` quits).
    Top(top::TopArgs),
    /// Recordings (MCAP): `fastio record --info FILE` lists a recording's
    /// channels, counts, types and time span.
    Record(record_cmd::RecordArgs),
    /// Replay a recorded stream as a pipeline's source: run as an
    /// operator's command (`command: [fastio, replay, FILE.mcap]`), it
    /// publishes the recorded frames into its output at the recorded pace,
    /// as fast as the consumers take them, or looped.
    Replay(record_cmd::ReplayArgs),
    /// Show a running streaming run live in Foxglove: serve Foxglove's
    /// WebSocket protocol (image streams as images, every stream's frames
    /// as numbers, the operators' numbers, the run's end) as an observer
    /// that never slows the run; Ctrl-C stops the viewer, not the run.
    View(view_cmd::ViewArgs),
}

/// A failure to report: the text goes to stderr as is, then the process
/// exits with `code`.
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) code: u8,
}

/// Exit status of a command whose standard output was closed: what a shell
/// reports for a process ended by `SIGPIPE` (128 + 13).
const CLOSED_STDOUT: i32 = 141;

/// A closed standard output (`fastio ... | head`) ends the command quietly,
/// as it ends other Unix tools, instead of a panic with a backtrace. Rust
/// ignores `SIGPIPE`, so a write to a closed pipe fails with `EPIPE` and
/// `println!` panics with that error: this hook recognises exactly that
/// panic and exits with [`CLOSED_STDOUT`]; every other panic is reported
/// as before.
fn quiet_when_stdout_closes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let broken_pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        if message.starts_with("failed printing to stdout")
            && (message.contains("os error 32") || message.contains(&broken_pipe.to_string()))
        {
            std::process::exit(CLOSED_STDOUT);
        }
        report(info);
    }));
}

fn main() -> ExitCode {
    quiet_when_stdout_closes();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dtype(cmd) => dtype_cmd::run(cmd),
        Command::Shm(cmd) => shm_cmd::run(cmd),
        Command::Params(cmd) => params_cmd::run(cmd),
        Command::Pipeline(cmd) => pipeline_cmd::run_pipeline_cmd(cmd),
        Command::Run(args) => run_cmd::run(*args),
        Command::Top(args) => top::run(args),
        Command::Record(args) => record_cmd::record(args),
        Command::Replay(args) => record_cmd::replay(args),
        Command::View(args) => view_cmd::view(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("fastio: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
