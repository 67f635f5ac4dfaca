//! Byte-compatible, streaming writing: to any `Write`, and atomically to a
//! path (temporary file in the same directory, then rename).

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use dtype::Primitive;
use dtype::dlpack::DLDataType;

use crate::error::Error;
use crate::format::{
    DEVICE_CPU, DLPACK_BOOL, LEGACY_BOOL, LIST_MAGIC, MAX_NDIM, TENSOR_MAGIC, dl_type_of,
    file_element_size, primitive_of, record_header_len,
};
use crate::profile::Profile;
use crate::tensor::{ParamDict, Tensor};

/// Progress is reported at least this often while data is written.
const PROGRESS_STEP: u64 = 8 * 1024 * 1024;

/// Something that can be written as a tensor record: a type, a shape and
/// a way to stream the element bytes.
pub trait TensorSource {
    /// The element type.
    fn primitive(&self) -> Primitive;
    /// The type tag to record (by default the canonical one of the primitive).
    fn dl_type(&self) -> DLDataType {
        dl_type_of(self.primitive())
    }
    /// The shape (C order).
    fn shape(&self) -> &[usize];
    /// Writes exactly elements x element size bytes: C order, little-endian.
    fn write_data(&self, w: &mut dyn Write) -> io::Result<()>;
}

impl TensorSource for Tensor {
    fn primitive(&self) -> Primitive {
        Tensor::primitive(self)
    }
    fn dl_type(&self) -> DLDataType {
        Tensor::dl_type(self)
    }
    fn shape(&self) -> &[usize] {
        Tensor::shape(self)
    }
    fn write_data(&self, w: &mut dyn Write) -> io::Result<()> {
        w.write_all(self.data())
    }
}

/// Which tag a `bool` tensor is written with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BoolTag {
    /// The tensor's own tag (what it was read with; `(6, 8, 1)` for new tensors).
    #[default]
    Keep,
    /// `(6, 8, 1)`, as TVM >= 0.25 writes.
    Dlpack,
    /// `(1, 1, 1)` (uint1, one byte per element), for TVM older than 0.25.
    Legacy,
}

/// How to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Refuse tensors the profile's runtime could not load.
    pub profile: Profile,
    /// Tag of `bool` tensors.
    pub bool_tag: BoolTag,
    /// For path writes: `fsync` the file and its directory before and
    /// after the rename (default true).
    pub sync: bool,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            profile: Profile::Tvm,
            bool_tag: BoolTag::Keep,
            sync: true,
        }
    }
}

impl WriteOptions {
    /// With a profile.
    pub fn profile(mut self, p: Profile) -> WriteOptions {
        self.profile = p;
        self
    }
    /// With a bool tag.
    pub fn bool_tag(mut self, b: BoolTag) -> WriteOptions {
        self.bool_tag = b;
        self
    }
    /// With `sync` set.
    pub fn sync(mut self, yes: bool) -> WriteOptions {
        self.sync = yes;
        self
    }
}

/// A named source to write.
pub type Entry<'a> = (&'a [u8], &'a dyn TensorSource);

struct Planned {
    dl: DLDataType,
    nbytes: u64,
}

fn unwritable(name: &[u8], reason: impl Into<String>) -> Error {
    Error::Unwritable {
        name: String::from_utf8_lossy(name).into_owned(),
        reason: reason.into(),
    }
}

fn plan(entries: &[Entry<'_>], opts: &WriteOptions) -> Result<(Vec<Planned>, u64), Error> {
    let mut total: u64 = 8 + 8 + 8 + 8;
    let mut planned = Vec::with_capacity(entries.len());
    for &(name, src) in entries {
        let p = src.primitive();
        let mut dl = src.dl_type();
        if p == Primitive::Bool {
            dl = match opts.bool_tag {
                BoolTag::Keep => dl,
                BoolTag::Dlpack => DLPACK_BOOL,
                BoolTag::Legacy => LEGACY_BOOL,
            };
        }
        if primitive_of(dl) != Ok(p) {
            return Err(unwritable(
                name,
                format!(
                    "tag ({}, {}, {}) does not describe {p}",
                    dl.code, dl.bits, dl.lanes
                ),
            ));
        }
        let shape = src.shape();
        if shape.len() > MAX_NDIM {
            return Err(unwritable(
                name,
                format!("{} dimensions (at most {MAX_NDIM})", shape.len()),
            ));
        }
        if shape.iter().any(|&d| d as u64 > i64::MAX as u64) {
            return Err(unwritable(name, "a dimension exceeds i64::MAX"));
        }
        let elements = if shape.contains(&0) {
            0
        } else {
            shape
                .iter()
                .try_fold(1u64, |acc, &d| {
                    acc.checked_mul(d as u64).filter(|&n| n <= i64::MAX as u64)
                })
                .ok_or_else(|| unwritable(name, "shape product overflows"))?
        };
        let nbytes = elements
            .checked_mul(file_element_size(dl))
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| unwritable(name, "byte size overflows"))?;
        let profile = opts.profile;
        profile
            .check_name(name)
            .and_then(|()| profile.check_tensor(dl, elements))
            .map_err(|rule| unwritable(name, format!("not loadable by {profile}: {rule}")))?;
        total = total
            .checked_add(8 + name.len() as u64)
            .and_then(|t| t.checked_add(record_header_len(shape.len())))
            .and_then(|t| t.checked_add(nbytes))
            .ok_or_else(|| unwritable(name, "file size overflows"))?;
        planned.push(Planned { dl, nbytes });
    }
    if let Err(rule) = opts.profile.check_file_len(total) {
        return Err(Error::Unwritable {
            name: String::new(),
            reason: format!("not loadable by {}: {rule}", opts.profile),
        });
    }
    Ok((planned, total))
}

/// The size in bytes of the file `entries` would make.
pub fn encoded_len(entries: &[Entry<'_>], opts: &WriteOptions) -> Result<u64, Error> {
    plan(entries, opts).map(|(_, total)| total)
}

/// Counts bytes on their way to the sink, refuses more than announced and
/// reports progress.
struct Counting<'a, W: Write> {
    inner: &'a mut W,
    written: u64,
    limit: u64,
    reported: u64,
    progress: &'a mut dyn FnMut(u64),
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "tensor source wrote more bytes than its shape and type give",
            ));
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        if self.written - self.reported >= PROGRESS_STEP {
            self.reported = self.written;
            (self.progress)(self.written);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a parameter file to `w`, streaming each tensor's data; returns
/// the bytes written. Everything is validated before the first byte goes
/// out. `progress` receives the cumulative bytes written (at least every
/// 8 MiB and after each tensor).
pub fn write_params<W: Write>(
    mut w: W,
    entries: &[Entry<'_>],
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, Error> {
    let (planned, total) = plan(entries, opts)?;
    let io_err = |offset: u64| move |source: io::Error| Error::Io { offset, source };

    let mut head = Vec::with_capacity(32);
    head.extend_from_slice(&LIST_MAGIC.to_le_bytes());
    head.extend_from_slice(&0u64.to_le_bytes());
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for &(name, _) in entries {
        head.extend_from_slice(&(name.len() as u64).to_le_bytes());
        head.extend_from_slice(name);
    }
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    w.write_all(&head).map_err(io_err(0))?;
    let mut offset = head.len() as u64;

    for (&(name, src), p) in entries.iter().zip(&planned) {
        let shape = src.shape();
        let mut rec = Vec::with_capacity(record_header_len(shape.len()) as usize);
        rec.extend_from_slice(&TENSOR_MAGIC.to_le_bytes());
        rec.extend_from_slice(&0u64.to_le_bytes());
        rec.extend_from_slice(&DEVICE_CPU.to_le_bytes());
        rec.extend_from_slice(&0i32.to_le_bytes());
        rec.extend_from_slice(&(shape.len() as i32).to_le_bytes());
        rec.push(p.dl.code);
        rec.push(p.dl.bits);
        rec.extend_from_slice(&p.dl.lanes.to_le_bytes());
        for &d in shape {
            rec.extend_from_slice(&(d as i64).to_le_bytes());
        }
        rec.extend_from_slice(&(p.nbytes as i64).to_le_bytes());
        w.write_all(&rec).map_err(io_err(offset))?;
        offset += rec.len() as u64;

        let mut counting = Counting {
            inner: &mut w,
            written: offset,
            limit: offset + p.nbytes,
            reported: offset,
            progress: &mut *progress,
        };
        src.write_data(&mut counting)
            .map_err(io_err(counting.written))?;
        if counting.written != offset + p.nbytes {
            return Err(unwritable(
                name,
                format!(
                    "source wrote {} bytes, its shape and type give {}",
                    counting.written - offset,
                    p.nbytes
                ),
            ));
        }
        offset += p.nbytes;
        progress(offset);
    }
    w.flush().map_err(io_err(offset))?;
    debug_assert_eq!(offset, total);
    Ok(offset)
}

/// Removes the temporary file unless the write was committed.
struct TempFile {
    path: PathBuf,
    committed: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn create_temp(target: &Path) -> Result<(File, TempFile), Error> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let base = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "params".to_owned());
    let pid = std::process::id();
    let mut last = None;
    for attempt in 0..1000u32 {
        let path = dir.join(format!(".{base}.{pid}.{attempt}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => {
                return Ok((
                    f,
                    TempFile {
                        path,
                        committed: false,
                    },
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(Error::os(format!("create {}", path.display()), e)),
        }
    }
    Err(Error::os(
        "create temporary file",
        last.unwrap_or_else(|| io::Error::other("no free name")),
    ))
}

/// Writes `path` atomically with `write`: a temporary file in the same
/// directory, flushed (and synced if asked), then renamed over `path`.
pub(crate) fn atomic_write<T>(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T, Error>,
) -> Result<T, Error> {
    let (file, mut temp) = create_temp(path)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let out = write(&mut w)?;
    let file = w
        .into_inner()
        .map_err(|e| Error::os("flush", e.into_error()))?;
    if sync {
        file.sync_all().map_err(|e| Error::os("fsync", e))?;
    }
    drop(file);
    std::fs::rename(&temp.path, path).map_err(|e| Error::os("rename", e))?;
    temp.committed = true;
    if sync
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(out)
}

/// Writes a parameter file to `path` atomically (see [`write_params`]).
pub fn write_params_to_path(
    path: impl AsRef<Path>,
    entries: &[Entry<'_>],
    opts: &WriteOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, Error> {
    let path = path.as_ref();
    // Validate before creating anything.
    plan(entries, opts).map_err(|e| e.at_path(path))?;
    atomic_write(path, opts.sync, |w| {
        write_params(w, entries, opts, progress)
    })
    .map_err(|e| e.at_path(path))
}

impl ParamDict {
    fn entries(&self) -> Vec<Entry<'_>> {
        self.iter()
            .map(|p| (p.name_bytes(), p.tensor() as &dyn TensorSource))
            .collect()
    }

    /// The size of the file this dictionary makes.
    pub fn encoded_len(&self) -> Result<u64, Error> {
        encoded_len(&self.entries(), &WriteOptions::default())
    }

    /// Writes the dictionary to `w` in file order; returns the bytes written.
    pub fn write_to<W: Write>(&self, w: W) -> Result<u64, Error> {
        self.write_to_with(w, &WriteOptions::default(), &mut |_| {})
    }

    /// [`write_to`](ParamDict::write_to) with options and a progress hook.
    pub fn write_to_with<W: Write>(
        &self,
        w: W,
        opts: &WriteOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        write_params(w, &self.entries(), opts, progress)
    }

    /// The file as bytes.
    ///
    /// ```
    /// use dtype::Primitive;
    /// use params_io::{ParamDict, Tensor};
    /// let mut d = ParamDict::new();
    /// let data: Vec<u8> = (0..6i32).flat_map(i32::to_le_bytes).collect();
    /// d.insert("x", Tensor::new(Primitive::Int32, &[2, 3], data)?);
    /// // Exactly what `tvm.runtime.save_param_dict` writes.
    /// assert_eq!(d.to_bytes()?.len(), 121);
    /// # Ok::<(), params_io::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        let mut v = Vec::with_capacity(usize::try_from(self.encoded_len()?).unwrap_or(0));
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes the dictionary to `path` atomically.
    pub fn write_path(&self, path: impl AsRef<Path>) -> Result<u64, Error> {
        self.write_path_with(path, &WriteOptions::default(), &mut |_| {})
    }

    /// [`write_path`](ParamDict::write_path) with options and a progress hook.
    pub fn write_path_with(
        &self,
        path: impl AsRef<Path>,
        opts: &WriteOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, Error> {
        write_params_to_path(path, &self.entries(), opts, progress)
    }
}
