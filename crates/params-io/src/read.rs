//! Strict parsing: one parser, generic over where the bytes come from
//! (a buffer, a stream, a seekable file, a memory map).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use dtype::Primitive;
use dtype::dlpack::DLDataType;

use crate::error::{Error, Field, FormatError, FormatErrorKind};
use crate::format::{
    DEVICE_CPU, DtypeProblem, LIST_MAGIC, MAX_NDIM, MIN_RECORD_LEN, TENSOR_MAGIC,
    file_element_size, primitive_of,
};
use crate::input::{Input, ReaderInput, SliceInput};
use crate::profile::Profile;
use ndobject::MemoryBlock;

use crate::tensor::{ParamDict, Tensor};

/// What to do when a name appears twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Duplicates {
    /// Reject the file (the default).
    #[default]
    Error,
    /// Keep the last value, at the position of the first occurrence (TVM's map).
    LastWins,
}

/// How to read a parameter file, and the one way to read one (as
/// `memmap2::MmapOptions` is for maps): set the rules, then call a
/// terminal method for the source —
///
/// | source | method | data |
/// |---|---|---|
/// | a path, memory-mapped | [`map_path`](ReadOptions::map_path) | zero-copy views of the map |
/// | a path | [`read_path`](ReadOptions::read_path) | one block per tensor, each size checked against the file first |
/// | a stream (pipe, socket) | [`read`](ReadOptions::read) | memory grows only as bytes arrive |
/// | bytes in memory | [`read_bytes`](ReadOptions::read_bytes) | copied once, into one block |
/// | a read-only `ndobject` block | [`read_block`](ReadOptions::read_block) | zero-copy views of the block |
/// | a path or bytes, headers only | [`index_path`](ReadOptions::index_path), [`index_bytes`](ReadOptions::index_bytes) | none |
///
/// The default is the strictest: UTF-8 names, no duplicates, no trailing
/// bytes, TVM profile.
///
/// ```
/// use params_io::{ParamDict, ReadOptions};
/// let empty = ParamDict::new().to_bytes()?;
/// assert_eq!(empty.len(), 32);
/// assert!(ReadOptions::new().read_bytes(&empty)?.is_empty());
/// assert!(ReadOptions::new().read_bytes(&empty[..31]).is_err());
/// assert!(ReadOptions::tvm_compatible().read(&empty[..])?.is_empty());
/// # Ok::<(), params_io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Keep names that are not UTF-8 as raw bytes instead of failing.
    pub raw_names: bool,
    /// Duplicate names.
    pub duplicates: Duplicates,
    /// Ignore bytes after the last tensor (TVM does).
    pub allow_trailing: bool,
    /// Extra rules of the runtime that must load the file.
    pub profile: Profile,
}

impl ReadOptions {
    /// The strict default (the same as [`ReadOptions::strict`]).
    pub fn new() -> ReadOptions {
        ReadOptions::default()
    }

    /// The strict default.
    pub fn strict() -> ReadOptions {
        ReadOptions::default()
    }

    /// As lenient as TVM where TVM is merely lenient (raw names, last of
    /// duplicates wins, trailing bytes ignored); still bounds-checked.
    pub fn tvm_compatible() -> ReadOptions {
        ReadOptions {
            raw_names: true,
            duplicates: Duplicates::LastWins,
            allow_trailing: true,
            profile: Profile::Tvm,
        }
    }

    /// With `raw_names` set.
    pub fn raw_names(mut self, yes: bool) -> ReadOptions {
        self.raw_names = yes;
        self
    }

    /// With a duplicate policy.
    pub fn duplicates(mut self, d: Duplicates) -> ReadOptions {
        self.duplicates = d;
        self
    }

    /// With `allow_trailing` set.
    pub fn allow_trailing(mut self, yes: bool) -> ReadOptions {
        self.allow_trailing = yes;
        self
    }

    /// With a profile.
    pub fn profile(mut self, p: Profile) -> ReadOptions {
        self.profile = p;
        self
    }
}

/// The header of one tensor record, with its name and where it lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub name: Vec<u8>,
    pub name_offset: u64,
    pub record_offset: u64,
    pub data_offset: u64,
    pub dl: DLDataType,
    pub primitive: Primitive,
    pub shape: Vec<usize>,
    pub nbytes: u64,
}

fn err(offset: u64, field: Field, kind: FormatErrorKind) -> Error {
    Error::Format(FormatError::new(offset, field, kind))
}

fn read_array<I: Input, const N: usize>(inp: &mut I, field: Field) -> Result<[u8; N], Error> {
    let at = inp.offset();
    let mut b = [0u8; N];
    let got = inp.fill(&mut b)?;
    if got < N {
        return Err(err(
            at,
            field,
            FormatErrorKind::Truncated {
                needed: N as u64,
                available: got as u64,
            },
        ));
    }
    Ok(b)
}

fn read_u64<I: Input>(inp: &mut I, field: Field) -> Result<u64, Error> {
    read_array::<I, 8>(inp, field).map(u64::from_le_bytes)
}

fn read_i64<I: Input>(inp: &mut I, field: Field) -> Result<i64, Error> {
    read_array::<I, 8>(inp, field).map(i64::from_le_bytes)
}

fn read_i32<I: Input>(inp: &mut I, field: Field) -> Result<i32, Error> {
    read_array::<I, 4>(inp, field).map(i32::from_le_bytes)
}

/// Checks that `count` entries of at least `min_each` bytes can fit.
fn check_count<I: Input>(
    inp: &I,
    at: u64,
    field: Field,
    count: u64,
    min_each: u64,
) -> Result<(), Error> {
    if let Some(remaining) = inp.remaining()
        && count > remaining / min_each
    {
        return Err(err(
            at,
            field,
            FormatErrorKind::CountTooLarge {
                count,
                min_each,
                remaining,
            },
        ));
    }
    Ok(())
}

/// A capacity for `count` entries that no file field can inflate: what the
/// remaining bytes could hold, and a small bound for streams.
fn safe_capacity<I: Input>(inp: &I, count: u64, min_each: u64) -> usize {
    let bound = inp.remaining().map_or(1024, |r| r / min_each).min(1 << 20);
    usize::try_from(count.min(bound)).unwrap_or(0)
}

fn profile_err(offset: u64, field: Field, profile: Profile, rule: String) -> Error {
    err(offset, field, FormatErrorKind::Profile { profile, rule })
}

/// Parses a whole file: every header, checked, with its data section as
/// the input makes it.
pub(crate) fn parse<I: Input>(
    inp: &mut I,
    opts: &ReadOptions,
) -> Result<Vec<(Header, I::Data)>, Error> {
    let profile = opts.profile;
    if let Some(total) = inp.remaining()
        && let Err(rule) = profile.check_file_len(total)
    {
        return Err(profile_err(0, Field::File, profile, rule));
    }
    let magic = read_u64(inp, Field::ListMagic)?;
    if magic != LIST_MAGIC {
        return Err(err(
            0,
            Field::ListMagic,
            FormatErrorKind::BadListMagic { found: magic },
        ));
    }
    read_u64(inp, Field::ListReserved)?;

    let at = inp.offset();
    let names = read_u64(inp, Field::NameCount)?;
    check_count(inp, at, Field::NameCount, names, 8)?;
    let mut name_list: Vec<(Vec<u8>, u64)> = Vec::with_capacity(safe_capacity(inp, names, 8));
    for index in 0..names {
        let at = inp.offset();
        let len = read_u64(inp, Field::NameLength { index })?;
        let name_at = inp.offset();
        if let Some(remaining) = inp.remaining()
            && len > remaining
        {
            return Err(err(
                at,
                Field::NameLength { index },
                FormatErrorKind::NameTooLong {
                    length: len,
                    remaining,
                },
            ));
        }
        let name = inp.bytes(len)?.map_err(|available| {
            err(
                name_at,
                Field::Name { index },
                FormatErrorKind::Truncated {
                    needed: len,
                    available,
                },
            )
        })?;
        if !opts.raw_names
            && let Err(e) = std::str::from_utf8(&name)
        {
            return Err(err(
                name_at,
                Field::Name { index },
                FormatErrorKind::NonUtf8Name {
                    valid_up_to: e.valid_up_to(),
                },
            ));
        }
        if let Err(rule) = profile.check_name(&name) {
            return Err(profile_err(name_at, Field::Name { index }, profile, rule));
        }
        name_list.push((name, name_at));
    }

    let at = inp.offset();
    let tensors = read_u64(inp, Field::TensorCount)?;
    if tensors != names {
        return Err(err(
            at,
            Field::TensorCount,
            FormatErrorKind::CountMismatch { names, tensors },
        ));
    }
    check_count(inp, at, Field::TensorCount, tensors, MIN_RECORD_LEN)?;

    let mut out = Vec::with_capacity(name_list.len());
    for (tensor, (name, name_offset)) in (0u64..).zip(name_list) {
        let (header, data) = parse_record(inp, tensor, name, name_offset, profile)?;
        out.push((header, data));
    }

    let at = inp.offset();
    if let Err(rule) = profile.check_file_len(at) {
        return Err(profile_err(0, Field::File, profile, rule));
    }
    if !opts.allow_trailing {
        let count = inp.trailing()?;
        if count > 0 {
            return Err(err(
                at,
                Field::Trailing,
                FormatErrorKind::TrailingBytes { count },
            ));
        }
    }
    resolve_duplicates(out, opts.duplicates)
}

fn parse_record<I: Input>(
    inp: &mut I,
    tensor: u64,
    name: Vec<u8>,
    name_offset: u64,
    profile: Profile,
) -> Result<(Header, I::Data), Error> {
    let record_offset = inp.offset();
    let magic = read_u64(inp, Field::TensorMagic { tensor })?;
    if magic != TENSOR_MAGIC {
        return Err(err(
            record_offset,
            Field::TensorMagic { tensor },
            FormatErrorKind::BadTensorMagic { found: magic },
        ));
    }
    read_u64(inp, Field::TensorReserved { tensor })?;
    let dev_at = inp.offset();
    let device_type = read_i32(inp, Field::DeviceType { tensor })?;
    let device_id = read_i32(inp, Field::DeviceId { tensor })?;
    if device_type != DEVICE_CPU || device_id != 0 {
        let field = if device_type != DEVICE_CPU {
            Field::DeviceType { tensor }
        } else {
            Field::DeviceId { tensor }
        };
        let at = if device_type != DEVICE_CPU {
            dev_at
        } else {
            dev_at + 4
        };
        return Err(err(
            at,
            field,
            FormatErrorKind::Device {
                device_type,
                device_id,
            },
        ));
    }
    let ndim_at = inp.offset();
    let ndim = read_i32(inp, Field::Ndim { tensor })?;
    let ndim_ok = usize::try_from(ndim).ok().filter(|&n| n <= MAX_NDIM);
    let Some(ndim_u) = ndim_ok else {
        return Err(err(
            ndim_at,
            Field::Ndim { tensor },
            FormatErrorKind::Ndim { ndim },
        ));
    };
    let dtype_at = inp.offset();
    let [code, bits, l0, l1] = read_array::<I, 4>(inp, Field::Dtype { tensor })?;
    let dl = DLDataType::new(code, bits, u16::from_le_bytes([l0, l1]));
    let primitive = primitive_of(dl).map_err(|p| {
        let kind = match p {
            DtypeProblem::UnknownCode => FormatErrorKind::UnknownDtype {
                code,
                bits,
                lanes: dl.lanes,
            },
            DtypeProblem::Unsupported(reason) => FormatErrorKind::UnsupportedDtype {
                code,
                bits,
                lanes: dl.lanes,
                reason,
            },
        };
        err(dtype_at, Field::Dtype { tensor }, kind)
    })?;
    if let Err(rule) = profile.check_dtype(dl) {
        return Err(profile_err(
            dtype_at,
            Field::Dtype { tensor },
            profile,
            rule,
        ));
    }

    let mut shape = Vec::with_capacity(ndim_u);
    let mut elements: u64 = 1;
    let mut overflow_at = None;
    for dim in 0..ndim_u as u32 {
        let at = inp.offset();
        let value = read_i64(inp, Field::Shape { tensor, dim })?;
        let Ok(d) = u64::try_from(value) else {
            return Err(err(
                at,
                Field::Shape { tensor, dim },
                FormatErrorKind::NegativeDim { value },
            ));
        };
        match elements.checked_mul(d) {
            Some(e) => elements = e,
            None => overflow_at = overflow_at.or(Some((at, dim))),
        }
        shape.push(usize::try_from(d).unwrap_or(usize::MAX));
    }
    // A zero dimension makes the product 0 even if a prefix overflowed.
    if shape.contains(&0) {
        elements = 0;
    } else if let Some((at, dim)) = overflow_at {
        return Err(err(
            at,
            Field::Shape { tensor, dim },
            FormatErrorKind::SizeOverflow,
        ));
    }

    let size_at = inp.offset();
    let found = read_i64(inp, Field::ByteSize { tensor })?;
    let element_size = file_element_size(dl);
    let Some(expected) = elements
        .checked_mul(element_size)
        .filter(|&n| n <= isize::MAX as u64)
    else {
        return Err(err(
            size_at,
            Field::ByteSize { tensor },
            FormatErrorKind::SizeOverflow,
        ));
    };
    if u64::try_from(found) != Ok(expected) {
        return Err(err(
            size_at,
            Field::ByteSize { tensor },
            FormatErrorKind::ByteSizeMismatch {
                found,
                elements,
                element_size,
            },
        ));
    }
    if let Err(rule) = profile.check_elements(elements) {
        return Err(profile_err(
            size_at,
            Field::ByteSize { tensor },
            profile,
            rule,
        ));
    }

    let data_offset = inp.offset();
    let data = inp.data(expected)?.map_err(|available| {
        err(
            data_offset,
            Field::Data { tensor },
            FormatErrorKind::Truncated {
                needed: expected,
                available,
            },
        )
    })?;
    let header = Header {
        name,
        name_offset,
        record_offset,
        data_offset,
        dl,
        primitive,
        shape,
        nbytes: expected,
    };
    Ok((header, data))
}

fn resolve_duplicates<D>(
    entries: Vec<(Header, D)>,
    policy: Duplicates,
) -> Result<Vec<(Header, D)>, Error> {
    let mut first: HashMap<&[u8], usize> = HashMap::with_capacity(entries.len());
    let mut replace: Vec<(usize, usize)> = Vec::new();
    for (i, (h, _)) in entries.iter().enumerate() {
        if let Some(&j) = first.get(h.name.as_slice()) {
            match policy {
                Duplicates::Error => {
                    return Err(err(
                        h.name_offset,
                        Field::Name { index: i as u64 },
                        FormatErrorKind::DuplicateName {
                            name: String::from_utf8_lossy(&h.name).into_owned(),
                            first: j as u64,
                        },
                    ));
                }
                Duplicates::LastWins => replace.push((j, i)),
            }
        } else {
            first.insert(&h.name, i);
        }
    }
    drop(first);
    if replace.is_empty() {
        return Ok(entries);
    }
    // Move each later value into the slot of the first occurrence.
    let mut slots: Vec<Option<(Header, D)>> = entries.into_iter().map(Some).collect();
    for (j, i) in replace {
        if let Some(later) = slots[i].take() {
            slots[j] = Some(later);
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

fn tensor_from_vec(h: &Header, data: Vec<u8>) -> Result<Tensor, Error> {
    Ok(Tensor::new(h.primitive, &h.shape, data)?.with_dl_unchecked(h.dl))
}

fn dict_from_owned(entries: Vec<(Header, Vec<u8>)>) -> Result<ParamDict, Error> {
    let mut d = ParamDict::new();
    for (h, data) in entries {
        let t = tensor_from_vec(&h, data)?;
        d.push_unchecked(h.name, t);
    }
    Ok(d)
}

/// Builds views of `block` for parsed headers.
pub(crate) fn dict_from_block(
    block: &MemoryBlock,
    entries: Vec<(Header, usize)>,
) -> Result<ParamDict, Error> {
    let mut d = ParamDict::new();
    for (h, start) in entries {
        let t = Tensor::from_block(block.clone(), start, h.primitive, &h.shape)?
            .with_dl_unchecked(h.dl);
        d.push_unchecked(h.name, t);
    }
    Ok(d)
}

/// Parses the headers of an in-memory file (no data is touched).
pub(crate) fn parse_slice(buf: &[u8], opts: &ReadOptions) -> Result<Vec<(Header, usize)>, Error> {
    parse(&mut SliceInput::new(buf), opts)
}

impl ReadOptions {
    /// Reads a file held in memory: its bytes are copied once, into one
    /// block that the tensors share.
    pub fn read_bytes(&self, buf: &[u8]) -> Result<ParamDict, Error> {
        // Parse first, so that a bad file costs no copy.
        parse_slice(buf, self)?;
        self.read_block(MemoryBlock::from_owner(buf.to_vec()))
    }

    /// Reads a file held by a read-only `ndobject` memory block (for
    /// example `MemoryBlock::from_owner` of a `Vec<u8>` or a memory map)
    /// without copying: every tensor is a view that keeps the block alive.
    pub fn read_block(&self, block: MemoryBlock) -> Result<ParamDict, Error> {
        let bytes = block.bytes().ok_or(Error::WritableBlock)?;
        let entries = parse_slice(bytes, self)?;
        dict_from_block(&block, entries)
    }

    /// Reads from a stream of unknown length (a pipe, a socket). Memory
    /// grows only as bytes arrive, so lying size fields cost nothing.
    pub fn read<R: Read>(&self, r: R) -> Result<ParamDict, Error> {
        dict_from_owned(parse(&mut ReaderInput::new(r, None), self)?)
    }

    /// Reads a file into memory, one allocation per tensor, each checked
    /// against the file's length first.
    pub fn read_path(&self, path: impl AsRef<Path>) -> Result<ParamDict, Error> {
        let path = path.as_ref();
        let run = || -> Result<ParamDict, Error> {
            let file = File::open(path).map_err(|e| Error::os("open", e))?;
            let len = file.metadata().map_err(|e| Error::os("stat", e))?.len();
            let r = BufReader::with_capacity(256 * 1024, file);
            dict_from_owned(parse(&mut ReaderInput::new(r, Some(len)), self)?)
        };
        run().map_err(|e| e.at_path(path))
    }
}
