//! Whole-file operations: every tensor of a params file exported as
//! `.npy` files, `.npy` files packed into a params file, and a file checked
//! against a runtime's profile. (`fastio params export | pack | verify`
//! call these; presentation and argument parsing live in `fastio-cli`.)
//!
//! ```no_run
//! use std::path::PathBuf;
//! use params_io::{Profile, ReadOptions, WriteOptions, files};
//! // Every tensor to out/NAME.npy, with a progress hook (bytes written).
//! let exported = files::export_npy("model.params", "out", &ReadOptions::new(), &mut |_done| {})?;
//! // And back.
//! let inputs = vec![("w".to_owned(), PathBuf::from("out/w.npy"))];
//! files::pack_npy("new.params", &inputs, &WriteOptions::default(), &mut |_| {})?;
//! files::verify("new.params", Profile::Cvm)?;
//! # let _ = exported;
//! # Ok::<(), params_io::Error>(())
//! ```

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use dtype::Primitive;
use serde_json::{Value, json};

use crate::error::{Error, Field, FormatError, FormatErrorKind};
use crate::names::file_stem;
use crate::npy::{NpyFile, write_npy};
use crate::profile::Profile;
use crate::read::ReadOptions;
use crate::write::{
    Entry, TensorSource, WriteOptions, atomic_write, encoded_len, write_params_to_path,
};

/// Longest file-name stem before export falls back to a numbered name.
pub const MAX_STEM_LEN: usize = 200;

/// The file name (with `.npy`) export gives tensor number `index` named
/// `name`: [`file_stem`] of the name, or, when that is longer than
/// [`MAX_STEM_LEN`], `~INDEX-` and a prefix of it (`~` never occurs in a
/// stem, and indexes are unique, so names in one export never collide).
pub fn export_file_name(index: usize, name: &[u8]) -> String {
    let stem = file_stem(name);
    if stem.len() <= MAX_STEM_LEN {
        format!("{stem}.npy")
    } else {
        format!("~{index}-{}.npy", &stem[..120])
    }
}

/// One tensor written by [`export_npy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// The tensor's name (lossily decoded).
    pub name: String,
    /// The file name inside the directory.
    pub file: String,
    /// Bytes of tensor data.
    pub nbytes: u64,
}

/// Writes every tensor of a params file as a `.npy` file in `dir` (created
/// if missing) plus `dir/index.json`, a JSON array in file order of
/// `{"name": ..., "file": ...}`. The file is memory-mapped, so data goes
/// from the page cache to the output without an intermediate copy.
/// `progress` receives the cumulative tensor bytes written. `bfloat16`
/// tensors are written as `<u2` (see [`npy`](crate::npy)).
pub fn export_npy(
    params: impl AsRef<Path>,
    dir: impl AsRef<Path>,
    opts: &ReadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<Exported>, Error> {
    let dir = dir.as_ref();
    let dict = opts.map_path(params)?;
    fs::create_dir_all(dir).map_err(|e| Error::os("create directory", e).at_path(dir))?;
    let mut done = 0u64;
    let mut out = Vec::with_capacity(dict.len());
    for (i, p) in dict.iter().enumerate() {
        let file = export_file_name(i, p.name_bytes());
        let path = dir.join(&file);
        atomic_write(&path, false, |w| {
            write_npy(w, p.tensor()).map_err(|e| Error::os("write", e))
        })
        .map_err(|e| e.at_path(&path))?;
        done += p.tensor().nbytes() as u64;
        progress(done);
        out.push(Exported {
            name: p.name().into_owned(),
            file,
            nbytes: p.tensor().nbytes() as u64,
        });
    }
    let index = Value::Array(
        out.iter()
            .map(|e| json!({"name": e.name, "file": e.file}))
            .collect(),
    );
    let index_path = dir.join("index.json");
    atomic_write(&index_path, false, |w| {
        w.write_all(index.to_string().as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .map_err(|e| Error::os("write", e))
    })
    .map_err(|e| e.at_path(&index_path))?;
    Ok(out)
}

/// Opens the headers of `pack` inputs; a name given twice is an error.
fn open_pack_inputs(inputs: &[(String, PathBuf)]) -> Result<Vec<NpyFile>, Error> {
    let mut seen = HashSet::new();
    let mut files = Vec::with_capacity(inputs.len());
    for (name, path) in inputs {
        if !seen.insert(name.as_str()) {
            return Err(Error::Unwritable {
                name: name.clone(),
                reason: "name given twice".to_owned(),
            });
        }
        files.push(NpyFile::open(path)?);
    }
    Ok(files)
}

fn pack_entries<'a>(inputs: &'a [(String, PathBuf)], files: &'a [NpyFile]) -> Vec<Entry<'a>> {
    inputs
        .iter()
        .zip(files)
        .map(|((name, _), f)| (name.as_bytes(), f as &dyn TensorSource))
        .collect()
}

/// The size in bytes of the file [`pack_npy`] would write for `inputs`
/// (reads only the `.npy` headers; the total for a progress bar).
pub fn pack_len(inputs: &[(String, PathBuf)], opts: &WriteOptions) -> Result<u64, Error> {
    let files = open_pack_inputs(inputs)?;
    encoded_len(&pack_entries(inputs, &files), opts)
}

/// Packs `.npy` files into a params file at `out` (atomically), in the
/// order given, streaming each array from its file. Returns the bytes
/// written; `progress` receives the cumulative bytes of the output.
pub fn pack_npy(
    out: impl AsRef<Path>,
    inputs: &[(String, PathBuf)],
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, Error> {
    let files = open_pack_inputs(inputs)?;
    write_params_to_path(out, &pack_entries(inputs, &files), opts, progress)
}

/// What [`verify`] found in a valid file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Number of tensors.
    pub tensors: usize,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Bytes of the file.
    pub file_len: u64,
}

/// Checks a file strictly (default [`ReadOptions`] with `profile`): every
/// header rule, every size against the file, no trailing bytes, and every
/// `bool` element 0 or 1. The error's `Display` is the one line to print.
pub fn verify(path: impl AsRef<Path>, profile: Profile) -> Result<VerifyReport, Error> {
    let path = path.as_ref();
    let opts = ReadOptions::default().profile(profile);
    let dict = opts.map_path(path)?;
    let mut file_len = 32;
    for (i, p) in dict.iter().enumerate() {
        let (block, start) = p.tensor().block();
        file_len = block.len() as u64;
        if p.tensor().primitive() == Primitive::Bool
            && let Some(pos) = p.tensor().data().iter().position(|&b| b > 1)
        {
            let err = FormatError::new(
                (start + pos) as u64,
                Field::Data { tensor: i as u64 },
                FormatErrorKind::BadBool {
                    value: p.tensor().data()[pos],
                },
            );
            return Err(Error::from(err).at_path(path));
        }
    }
    Ok(VerifyReport {
        tensors: dict.len(),
        data_bytes: dict.data_bytes(),
        file_len,
    })
}
