//! The `fastio` command-line tool.
//!
//! Each subcommand is a thin front on one library layer:
//! `fastio dtype` on `dtype`, `fastio shm` on `shm-core`, `fastio params`
//! on `params-io`, `fastio pipeline` and `fastio run` on `fastio-pipeline`.

#![forbid(unsafe_code)]

mod dtype_cmd;
mod graph;
mod metrics;
mod params_cmd;
mod params_output;
mod pipeline_cmd;
mod shm_cmd;
mod top;

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
    Run(Box<pipeline_cmd::RunArgs>),
    /// Watch every live context of this user: memory, operators, streams,
    /// allocations (read-only; `q` quits).
    Top(top::TopArgs),
}

/// A failure to report: the text goes to stderr as is, then the process
/// exits with `code`.
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) code: u8,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dtype(cmd) => dtype_cmd::run(cmd),
        Command::Shm(cmd) => shm_cmd::run(cmd),
        Command::Params(cmd) => params_cmd::run(cmd),
        Command::Pipeline(cmd) => pipeline_cmd::run_pipeline_cmd(cmd),
        Command::Run(args) => pipeline_cmd::run(*args),
        Command::Top(args) => top::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("fastio: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
