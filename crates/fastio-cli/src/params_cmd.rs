//! `fastio params inspect | export | pack | verify`: TVM/CVM parameter
//! files, through `params_io::files` and `ReadOptions::index_path`.
//!
//! Exit codes: 0 on success; 2 when a file breaks the format or a
//! profile (the message names the byte offset), a `.npy` input is
//! malformed or cannot be packed, or an argument is wrong; 1 for anything
//! else (a file that cannot be opened or written).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use params_io::{Error, Profile, ReadOptions, WriteOptions, files};

use crate::params_output;

use crate::Failure;

/// Export and pack show a progress bar on stderr when it is a terminal
/// and at least this many bytes are to be written.
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

#[derive(Subcommand)]
pub(crate) enum ParamsCommand {
    /// One row per tensor: name, dtype, shape, bytes, data offset (reads
    /// only the headers).
    Inspect {
        /// The params file.
        file: PathBuf,
        /// Print a JSON array of {name, dtype, shape, nbytes, offset} instead.
        #[arg(long)]
        json: bool,
    },
    /// Write every tensor as DIR/NAME.npy (NAME made file-safe) and
    /// DIR/index.json: [{"name": ..., "file": ...}] in file order.
    Export {
        /// The params file.
        file: PathBuf,
        /// Output directory (created if missing).
        dir: PathBuf,
    },
    /// Pack .npy files into a params file, in the order given (the reverse
    /// of export); the output is replaced atomically.
    Pack {
        /// The params file to write.
        out: PathBuf,
        /// Tensor name and .npy file; the name ends at the last `=`.
        #[arg(required = true, value_name = "NAME=FILE.npy")]
        inputs: Vec<String>,
    },
    /// Check a file strictly: exit 0, or print one error line with the byte
    /// offset and exit 2.
    Verify {
        /// The params file.
        file: PathBuf,
        /// Also check the loading rules of this runtime: tvm or cvm
        /// (int8/int32 only, no empty tensors, files under 2 GiB).
        #[arg(long, default_value = "tvm", value_name = "tvm|cvm")]
        profile: Profile,
    },
}

/// A library error as a one-line failure: exit 2 for bad input (a params
/// file, a `.npy` file, a tensor that cannot be written), 1 for the rest
/// (I/O).
fn failure(e: &Error) -> Failure {
    Failure {
        message: e.to_string().replace('\n', "\\n"),
        code: if bad_input(e) { 2 } else { 1 },
    }
}

fn bad_input(e: &Error) -> bool {
    match e {
        Error::Format(_) | Error::Npy(_) | Error::Unwritable { .. } => true,
        Error::Path { source, .. } => bad_input(source),
        _ => false,
    }
}

/// A progress bar for writing `total()` bytes, when stderr is a terminal
/// and the total is large; `total` is only computed in that case.
fn progress_bar(
    message: &'static str,
    total: impl FnOnce() -> Result<u64, Error>,
) -> Result<Option<ProgressBar>, Failure> {
    if !std::io::stderr().is_terminal() {
        return Ok(None);
    }
    let total = total().map_err(|e| failure(&e))?;
    if total < PROGRESS_MIN_BYTES {
        return Ok(None);
    }
    let style = ProgressStyle::with_template(
        "{msg} [{wide_bar}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    Ok(Some(
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(style)
            .with_message(message),
    ))
}

/// Runs `work` with a progress hook feeding `bar`, then clears the bar.
fn with_progress<T>(
    bar: Option<ProgressBar>,
    work: impl FnOnce(&mut dyn FnMut(u64)) -> Result<T, Error>,
) -> Result<T, Failure> {
    let result = work(&mut |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    result.map_err(|e| failure(&e))
}

fn inspect(file: &Path, json: bool) -> Result<(), Failure> {
    let index = ReadOptions::new()
        .index_path(file)
        .map_err(|e| failure(&e))?;
    if json {
        println!("{}", params_output::json(&index));
    } else {
        print!("{}", params_output::table(&index));
    }
    Ok(())
}

fn export(file: &Path, dir: &Path) -> Result<(), Failure> {
    let opts = ReadOptions::default();
    let bar = progress_bar("export", || opts.index_path(file).map(|i| i.data_bytes()))?;
    let files = with_progress(bar, |progress| {
        files::export_npy(file, dir, &opts, progress)
    })?;
    let bytes: u64 = files.iter().map(|f| f.nbytes).sum();
    println!(
        "exported {} tensor(s), {bytes} bytes of data, to {}",
        files.len(),
        dir.display()
    );
    Ok(())
}

fn pack(out: &Path, args: &[String]) -> Result<(), Failure> {
    let inputs = args
        .iter()
        .map(|a| parse_pack_arg(a))
        .collect::<Result<Vec<_>, String>>()
        .map_err(|message| Failure { message, code: 2 })?;
    let opts = WriteOptions::default();
    let bar = progress_bar("pack", || files::pack_len(&inputs, &opts))?;
    let written = with_progress(bar, |progress| {
        files::pack_npy(out, &inputs, &opts, progress)
    })?;
    println!(
        "packed {} tensor(s) into {} ({written} bytes)",
        inputs.len(),
        out.display()
    );
    Ok(())
}

fn verify(file: &Path, profile: Profile) -> Result<(), Failure> {
    let report = files::verify(file, profile).map_err(|e| failure(&e))?;
    println!(
        "{}: ok ({} tensor(s), {} bytes of data, {} bytes; loadable by {profile})",
        file.display(),
        report.tensors,
        report.data_bytes,
        report.file_len
    );
    Ok(())
}

pub(crate) fn run(cmd: ParamsCommand) -> Result<(), Failure> {
    match cmd {
        ParamsCommand::Inspect { file, json } => inspect(&file, json),
        ParamsCommand::Export { file, dir } => export(&file, &dir),
        ParamsCommand::Pack { out, inputs } => pack(&out, &inputs),
        ParamsCommand::Verify { file, profile } => verify(&file, profile),
    }
}

/// Splits a `NAME=FILE.npy` argument at its last `=`.
fn parse_pack_arg(arg: &str) -> Result<(String, PathBuf), String> {
    match arg.rsplit_once('=') {
        Some((name, file)) if !file.is_empty() => Ok((name.to_owned(), PathBuf::from(file))),
        _ => Err(format!("expected NAME=FILE.npy, got {arg:?}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pack_arguments_split_at_the_last_equals_sign() {
        assert_eq!(
            super::parse_pack_arg("a=b=c.npy").unwrap(),
            ("a=b".to_owned(), "c.npy".into())
        );
        assert!(super::parse_pack_arg("nofile").is_err());
        assert!(super::parse_pack_arg("x=").is_err());
    }
}
