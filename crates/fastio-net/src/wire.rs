//! What crosses the network: the header of every piece of an entry, and
//! the status lines hosts tell each other. Both are documented in
//! `docs/hosts.md` so that a program without fastio (a plain Zenoh
//! subscriber in Python, say) can read an edge.
//!
//! An entry is sent as pieces of [`PIECE_BYTES`] (the last has the rest;
//! a piece and its header fit in one Zenoh batch), on one key per pair of
//! hosts, `<run>/entry/<from>/<to>`: the header names the entry (one key
//! for every entry a host sends another keeps Zenoh's work per message the
//! same in a run of thousands of entries). An entry of at most
//! [`EAGER_BYTES`] goes at once: its first piece (offset 0) starts the
//! sending, and the reader allocates the entry when it arrives. A larger
//! one is first announced by a piece with offset 0 and no bytes; each
//! consuming host then makes room for it and says [`Status::Ready`], and
//! the pieces follow, in order, only when every reader has (making room
//! for gigabytes takes seconds; no reader blocks Zenoh's receiving thread
//! that long). Each piece is one Zenoh sample: its payload is the bytes,
//! its attachment the [`ChunkHeader`] (little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `FIOX` |
//! | 4 | 1 | version, 2 |
//! | 5 | 1 | kind: 0 array, 1 string, 2 scalar |
//! | 6 | 1 | number of dimensions `n` (at most [`MAX_DIMS`]) |
//! | 7 | 1 | length `k` of the entry's key (1 to 255) |
//! | 8 | 16 | element type name (`float32`, ...), ASCII, padded with NUL |
//! | 24 | 8 | total bytes of the entry |
//! | 32 | 8 | offset of this piece's bytes in the entry |
//! | 40 | 8 | transfer id (one per sending of an entry) |
//! | 48 | 8 × n | the shape |
//! | 48 + 8n | k | the entry's key, `<operator>/<output>` (lower case, printable ASCII) |
//!
//! Every field is checked on decoding ([`ChunkHeader::decode`]): the bytes
//! come from another machine.

use dtype::Primitive;
use fastio::plan::EntryKind;

/// The first bytes of every header.
pub const MAGIC: [u8; 4] = *b"FIOX";
/// The version of stream message headers and credit messages this crate
/// writes and reads (2: frames larger than a message cross in parts; 3:
/// credit grants a limit, what the consuming host's consumers released
/// plus the crossing's window, [`encode_credit`]; 4: a producing host
/// waiting for credit says how many frames it sent, [`StreamMsg::Sent`]).
/// A peer of another version is refused with one line, never misread.
pub const VERSION: u8 = 4;
/// The version of entry piece headers ([`ChunkHeader`]) this crate writes
/// and reads (2: the entry's key in the header).
pub const CHUNK_VERSION: u8 = 2;
/// Longest entry key a piece's header carries.
pub const MAX_KEY_BYTES: usize = 255;
/// Bytes of the header before the shape.
pub const FIXED_BYTES: usize = 48;
/// Most dimensions an entry may have.
pub const MAX_DIMS: usize = 32;
/// Zenoh's low-latency transport (which every host uses, `options.rs`)
/// sends each message as it is, without cutting it into fragments, and a
/// reader closes the link on a message longer than the link's *batch
/// size*. Zenoh sets that from each end's link when it opens: for TCP
/// the largest multiple of half the TCP segment below 64 KiB less the IP
/// header (65,160 bytes on an Ethernet link of 1,500 bytes, 62,636 at
/// 9,000; the two ends of this machine's loopback said 49,152 and 65,480),
/// never less than this; for QUIC 65,535. Each host says the smallest
/// batch of its links (`Status::Batch`), and what a host sends another
/// fits the smaller of the two ([`message_bytes`]).
pub const SMALLEST_TCP_BATCH: usize = 32_738;
/// The largest batch Zenoh uses.
pub const LARGEST_BATCH: usize = 65_535;
/// Bytes of a batch left for Zenoh's framing and the key expression (at
/// most 909 bytes: the names in a key are bounded; a test in `keys.rs`
/// checks it).
pub const KEY_ROOM: usize = 1024;
/// Most bytes of payload and attachment in one message on every link:
/// what [`message_bytes`] gives before a host has said its batch.
pub const MESSAGE_BYTES: usize = SMALLEST_TCP_BATCH - KEY_ROOM;
/// Bytes of the largest header of an entry's piece ([`FIXED_BYTES`],
/// [`MAX_KEY_BYTES`], [`MAX_DIMS`] dimensions).
pub const MAX_CHUNK_HEADER_BYTES: usize = FIXED_BYTES + MAX_KEY_BYTES + 8 * MAX_DIMS;

/// Most bytes of payload and attachment in one message between two hosts
/// whose links' smallest batches are `a` and `b` (each taken between
/// [`SMALLEST_TCP_BATCH`] and [`LARGEST_BATCH`]: a batch said outside that
/// is no batch of Zenoh's).
pub fn message_bytes(a: usize, b: usize) -> usize {
    let batch = |x: usize| x.clamp(SMALLEST_TCP_BATCH, LARGEST_BATCH);
    batch(a).min(batch(b)) - KEY_ROOM
}

/// Bytes of every piece of an entry but its last, in messages of at most
/// `message` bytes ([`message_bytes`]): the most whole KiB that fit with
/// the largest header, so that Zenoh never cuts a piece into fragments nor
/// puts one together again in a buffer of its own (the receiving host's
/// memory stays the entry's). A reader takes pieces of
/// [`MIN_PIECE_BYTES`] to [`MAX_PIECE_BYTES`].
pub fn piece_bytes(message: usize) -> usize {
    (message.saturating_sub(MAX_CHUNK_HEADER_BYTES) / 1024 * 1024)
        .clamp(MIN_PIECE_BYTES, MAX_PIECE_BYTES)
}

/// Checks that `len` bytes at byte `offset` of an entry of `total` bytes
/// can be a piece: some bytes (none only for an empty entry), within
/// the entry, at most [`MAX_PIECE_BYTES`], and at least
/// [`MIN_PIECE_BYTES`] unless it is the last. What is wrong, otherwise.
pub fn check_piece(offset: u64, len: u64, total: u64) -> Result<(), String> {
    let last = offset.checked_add(len) == Some(total);
    let fits = offset.checked_add(len).is_some_and(|end| end <= total);
    let ok = fits
        && len <= MAX_PIECE_BYTES as u64
        && (len > 0 || total == 0)
        && (last || len >= MIN_PIECE_BYTES as u64);
    if ok {
        return Ok(());
    }
    let rest = total.saturating_sub(offset);
    let due = if rest <= MIN_PIECE_BYTES as u64 {
        format!("{rest}")
    } else {
        format!("{MIN_PIECE_BYTES} to {}", rest.min(MAX_PIECE_BYTES as u64))
    };
    Err(format!(
        "a piece of {len} bytes at byte {offset}; {due} were due"
    ))
}

/// The smallest piece of an entry but its last ([`piece_bytes`] on the
/// smallest batch).
pub const MIN_PIECE_BYTES: usize = (MESSAGE_BYTES - MAX_CHUNK_HEADER_BYTES) / 1024 * 1024;
/// The largest piece of an entry ([`piece_bytes`] on the largest batch).
pub const MAX_PIECE_BYTES: usize =
    (LARGEST_BATCH - KEY_ROOM - MAX_CHUNK_HEADER_BYTES) / 1024 * 1024;
/// The pieces of an entry that fits in the smallest messages.
pub const PIECE_BYTES: usize = MIN_PIECE_BYTES;
const _: () =
    assert!(MIN_PIECE_BYTES > 0 && MIN_PIECE_BYTES + MAX_CHUNK_HEADER_BYTES <= MESSAGE_BYTES);
/// Largest entry sent without waiting for its readers to make room: its
/// pieces follow its first at once, and the reader allocates it when the
/// first arrives.
pub const EAGER_BYTES: usize = 1 << 20;

/// Why a header or status line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer or more bytes than the header says.
    #[error("header of {got} bytes; {want} expected")]
    Length {
        /// Bytes received.
        got: usize,
        /// Bytes the header needs.
        want: usize,
    },
    /// Not a fastio header.
    #[error("not a fastio entry header (magic {0:02x?})")]
    Magic([u8; 4]),
    /// A version this build does not read.
    #[error("header version {got}; this build reads version {reads}")]
    Version {
        /// The version the header says.
        got: u8,
        /// The version this build reads there.
        reads: u8,
    },
    /// A field out of its range.
    #[error("{0}")]
    Field(String),
}

/// The header of one piece of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    /// The entry's key (`<operator>/<output>`, lower case): 1 to
    /// [`MAX_KEY_BYTES`] printable ASCII bytes.
    pub entry: String,
    /// What the entry holds.
    pub kind: EntryKind,
    /// Its element type.
    pub element: Primitive,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its bytes in all (the shape's elements times the element's size).
    pub total: u64,
    /// Where this piece's bytes go.
    pub offset: u64,
    /// Which sending of the entry the piece belongs to.
    pub transfer: u64,
}

fn kind_code(k: EntryKind) -> u8 {
    match k {
        EntryKind::Array => 0,
        EntryKind::String => 1,
        EntryKind::Scalar => 2,
    }
}

/// Bytes of `shape` elements of `element`, or `None` on overflow.
pub fn entry_bytes(element: Primitive, shape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .try_fold(element.size() as u64, |acc, &d| acc.checked_mul(d))
}

/// What every header of ours begins with (chunks and stream messages):
/// 4 bytes of magic, the version, a code (the entry kind or the stream
/// message's kind), the number of dimensions, a reserved zero byte, the
/// element type's name (16 bytes, NUL-padded), three words up to byte 48,
/// then one word per dimension. Read and checked once, here.
struct Header<'a> {
    b: &'a [u8],
    code: u8,
    element: Primitive,
    shape: Vec<u64>,
    /// The name after the shape (entry pieces), or empty.
    name: &'a str,
}

impl<'a> Header<'a> {
    /// Checks length, magic, version, dimensions, byte 7 and the element
    /// name of a header of `fixed` bytes before its shape. `named`: byte 7
    /// is the length of a name after the shape (1 to 255 printable ASCII
    /// bytes); otherwise it is 0 and nothing follows the shape.
    fn read(
        b: &'a [u8],
        magic: [u8; 4],
        version: u8,
        fixed: usize,
        named: bool,
    ) -> Result<Header<'a>, WireError> {
        if b.len() < fixed {
            return Err(WireError::Length {
                got: b.len(),
                want: fixed,
            });
        }
        let got = [b[0], b[1], b[2], b[3]];
        if got != magic {
            return Err(WireError::Magic(got));
        }
        if b[4] != version {
            return Err(WireError::Version {
                got: b[4],
                reads: version,
            });
        }
        let ndim = usize::from(b[6]);
        if ndim > MAX_DIMS {
            return Err(WireError::Field(format!(
                "{ndim} dimensions; at most {MAX_DIMS}"
            )));
        }
        let name_len = usize::from(b[7]);
        if !named && name_len != 0 {
            return Err(WireError::Field(format!("reserved byte {}", b[7])));
        }
        if named && name_len == 0 {
            return Err(WireError::Field("an entry key of 0 bytes".into()));
        }
        let at = fixed + 8 * ndim;
        let want = at + name_len;
        if b.len() != want {
            return Err(WireError::Length { got: b.len(), want });
        }
        let name_bytes = &b[at..];
        if !name_bytes.iter().all(u8::is_ascii_graphic) {
            return Err(WireError::Field(
                "the entry key is not printable ASCII".into(),
            ));
        }
        let name = std::str::from_utf8(name_bytes)
            .map_err(|_| WireError::Field("the entry key is not ASCII".into()))?;
        let element = read_name(&b[8..24])?;
        let mut h = Header {
            b,
            code: b[5],
            element,
            shape: Vec::new(),
            name,
        };
        h.shape = (0..ndim).map(|i| h.word(fixed + 8 * i)).collect();
        Ok(h)
    }

    /// The little-endian word at byte `at` (within the checked length).
    fn word(&self, at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.b[at..at + 8]);
        u64::from_le_bytes(w)
    }
}

impl ChunkHeader {
    /// The header's bytes; `None` when the entry's key is empty or longer
    /// than [`MAX_KEY_BYTES`] (no header can carry it).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let key = self.entry.as_bytes();
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return None;
        }
        let mut b = Vec::with_capacity(FIXED_BYTES + 8 * self.shape.len() + key.len());
        b.extend_from_slice(&MAGIC);
        b.push(CHUNK_VERSION);
        b.push(kind_code(self.kind));
        b.push(self.shape.len() as u8);
        b.push(key.len() as u8);
        put_name(&mut b, self.element);
        b.extend_from_slice(&self.total.to_le_bytes());
        b.extend_from_slice(&self.offset.to_le_bytes());
        b.extend_from_slice(&self.transfer.to_le_bytes());
        for d in &self.shape {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(key);
        Some(b)
    }

    /// Reads and checks a header: magic, version, kind, element name,
    /// dimensions, the entry key, and that `total` is what the shape needs
    /// and `offset` lies within it.
    pub fn decode(b: &[u8]) -> Result<ChunkHeader, WireError> {
        let mut h = Header::read(b, MAGIC, CHUNK_VERSION, FIXED_BYTES, true)?;
        let kind = match h.code {
            0 => EntryKind::Array,
            1 => EntryKind::String,
            2 => EntryKind::Scalar,
            k => return Err(WireError::Field(format!("entry kind {k}"))),
        };
        let (total, offset, transfer) = (h.word(24), h.word(32), h.word(40));
        let (element, shape) = (h.element, std::mem::take(&mut h.shape));
        let need = entry_bytes(element, &shape)
            .ok_or_else(|| WireError::Field(format!("shape {shape:?} overflows")))?;
        if total != need {
            return Err(WireError::Field(format!(
                "total {total} bytes, but {shape:?} of {element} is {need}"
            )));
        }
        if offset > total {
            return Err(WireError::Field(format!(
                "offset {offset} past the entry's {total} bytes"
            )));
        }
        Ok(ChunkHeader {
            entry: h.name.to_owned(),
            kind,
            element,
            shape,
            total,
            offset,
            transfer,
        })
    }
}

/// The first bytes of every stream message's header.
pub const STREAM_MAGIC: [u8; 4] = *b"FIOF";
/// Bytes of a stream message's header before the shape.
pub const STREAM_FIXED_BYTES: usize = 48;

/// One message of a stream that crosses hosts, on
/// `<run>/stream/<operator>/<output>/<host>` (one key per consuming host).
/// The attachment is this header (little-endian); a frame's payload is its
/// bytes (`shape` elements of `element`), an end's, poison's or sent's is
/// empty. A message may carry several frames (those waiting when the first
/// was sent): its attachment is their headers one after another, its
/// payload their bytes in the same order ([`StreamMsg::decode_all`]). A
/// frame whose header and bytes do not fit in one message
/// ([`MESSAGE_BYTES`]) crosses in parts: a message of its header alone with
/// its first bytes, then messages of one part header each
/// ([`StreamMsg::Part`]: the frame's number and the offset of the bytes it
/// carries), in order, until its bytes are complete; nothing else of the
/// stream comes in between.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `FIOF` |
/// | 4 | 1 | version, 4 |
/// | 5 | 1 | what: 0 frame, 1 end, 2 poisoned, 3 part of a frame, 4 sent |
/// | 6 | 1 | number of dimensions `n` (0 but for a frame) |
/// | 7 | 1 | 0 |
/// | 8 | 16 | element type name, ASCII, padded with NUL |
/// | 24 | 8 | frame, part: the frame's number in the producer's stream; end, sent: frames in all; poisoned: the first frame that will not come |
/// | 32 | 8 | frame: the number of the source frame it derives from; part: the offset of its bytes in the frame; else 0 |
/// | 40 | 8 | frame: when that source frame was taken (ns since the Unix epoch); else 0 |
/// | 48 | 8 × n | frame: its shape |
///
/// The consuming host answers on `<run>/credit/<operator>/<output>/<host>`
/// with a limit ([`encode_credit`]): a producing host sends frame `n` only
/// when `n` is below the newest limit. Under `block` the limit is what the
/// consuming host's consumers have released plus the crossing's window
/// (between the stream's depth and four times it, at the depth while the
/// consumer is what holds the stream back); under `drop-oldest`, frames
/// placed plus the depth. Back-pressure crosses the link, bounded by what
/// the pipeline asked for, and no reader ever blocks Zenoh's receiving
/// thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamMsg {
    /// A frame.
    Frame {
        /// Its element type.
        element: Primitive,
        /// Its number in the producer's stream.
        seq: u64,
        /// The source frame it derives from.
        source_seq: u64,
        /// When the source frame was taken (ns since the Unix epoch).
        timestamp_ns: u64,
        /// Its shape.
        shape: Vec<u64>,
    },
    /// The producer ended the stream after `frames` frames.
    End {
        /// The stream's element type.
        element: Primitive,
        /// Frames published in all.
        frames: u64,
    },
    /// The stream failed: no frame from `from` on will come.
    Poisoned {
        /// The stream's element type.
        element: Primitive,
        /// The first frame that will not come.
        from: u64,
    },
    /// More bytes of frame `seq`, whose header came before with its first
    /// bytes: the message's payload is the frame's bytes from `offset`.
    Part {
        /// The stream's element type.
        element: Primitive,
        /// The frame's number in the producer's stream.
        seq: u64,
        /// Where the part's bytes go in the frame.
        offset: u64,
    },
    /// The producing host sent `frames` frames in all and waits for
    /// credit to send more: said while it waits, so that frames lost with
    /// a link that went down and came back are found (the consuming host
    /// has fewer), never waited for on both sides.
    Sent {
        /// The stream's element type.
        element: Primitive,
        /// Frames sent in all.
        frames: u64,
    },
}

fn put_name(b: &mut Vec<u8>, element: Primitive) {
    let mut name = [0u8; 16];
    let n = element.name().as_bytes();
    name[..n.len()].copy_from_slice(n);
    b.extend_from_slice(&name);
}

/// Reads a NUL-padded element type name (16 bytes).
fn read_name(name_bytes: &[u8]) -> Result<Primitive, WireError> {
    let end = name_bytes.iter().position(|&c| c == 0).unwrap_or(16);
    if name_bytes[end..].iter().any(|&c| c != 0) {
        return Err(WireError::Field("element name is not NUL-padded".into()));
    }
    let name = std::str::from_utf8(&name_bytes[..end])
        .map_err(|_| WireError::Field("element name is not ASCII".into()))?;
    Primitive::from_name(name)
        .filter(|p| p.name() == name)
        .ok_or_else(|| WireError::Field(format!("unknown element type {name:?}")))
}

impl StreamMsg {
    /// The length of the header's bytes ([`StreamMsg::encode`]).
    pub fn encoded_len(&self) -> usize {
        match self {
            StreamMsg::Frame { shape, .. } => STREAM_FIXED_BYTES + 8 * shape.len(),
            _ => STREAM_FIXED_BYTES,
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let (what, element, a, src, ts, shape): (u8, Primitive, u64, u64, u64, &[u64]) = match self
        {
            StreamMsg::Frame {
                element,
                seq,
                source_seq,
                timestamp_ns,
                shape,
            } => (0, *element, *seq, *source_seq, *timestamp_ns, shape),
            StreamMsg::End { element, frames } => (1, *element, *frames, 0, 0, &[]),
            StreamMsg::Poisoned { element, from } => (2, *element, *from, 0, 0, &[]),
            StreamMsg::Part {
                element,
                seq,
                offset,
            } => (3, *element, *seq, *offset, 0, &[]),
            StreamMsg::Sent { element, frames } => (4, *element, *frames, 0, 0, &[]),
        };
        let mut b = Vec::with_capacity(STREAM_FIXED_BYTES + 8 * shape.len());
        b.extend_from_slice(&STREAM_MAGIC);
        b.push(VERSION);
        b.push(what);
        b.push(shape.len() as u8);
        b.push(0);
        put_name(&mut b, element);
        for w in [a, src, ts].iter().chain(shape) {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b
    }

    /// Reads and checks a header: magic, version, what, element name,
    /// dimensions (a frame's bytes must not overflow; an end, a poison, a
    /// part or a sent has none, and no source: a part's offset aside,
    /// zero).
    pub fn decode(b: &[u8]) -> Result<StreamMsg, WireError> {
        let h = Header::read(b, STREAM_MAGIC, VERSION, STREAM_FIXED_BYTES, false)?;
        let (a, src, ts) = (h.word(24), h.word(32), h.word(40));
        let (code, element, shape) = (h.code, h.element, h.shape);
        let ndim = shape.len();
        if code != 0 && (ndim != 0 || (src != 0 && code != 3) || ts != 0) {
            return Err(WireError::Field(
                "an end, a poison, a part or a sent has no shape and no source".into(),
            ));
        }
        match code {
            0 => {
                entry_bytes(element, &shape)
                    .ok_or_else(|| WireError::Field(format!("shape {shape:?} overflows")))?;
                Ok(StreamMsg::Frame {
                    element,
                    seq: a,
                    source_seq: src,
                    timestamp_ns: ts,
                    shape,
                })
            }
            1 => Ok(StreamMsg::End { element, frames: a }),
            2 => Ok(StreamMsg::Poisoned { element, from: a }),
            3 => Ok(StreamMsg::Part {
                element,
                seq: a,
                offset: src,
            }),
            4 => Ok(StreamMsg::Sent { element, frames: a }),
            w => Err(WireError::Field(format!("stream message kind {w}"))),
        }
    }
}

impl StreamMsg {
    /// The attachment of a message of several frames: their headers one
    /// after another (the payload is their bytes, in the same order).
    pub fn encode_all(msgs: &[StreamMsg]) -> Vec<u8> {
        msgs.iter().flat_map(StreamMsg::encode).collect()
    }

    /// Reads the attachment of a stream message: one header, or the
    /// headers of several frames one after another (an end, a poison, a
    /// part or a sent comes alone). Every header is checked as by
    /// [`StreamMsg::decode`].
    pub fn decode_all(b: &[u8]) -> Result<Vec<StreamMsg>, WireError> {
        let mut msgs = Vec::new();
        let mut at = 0usize;
        while at < b.len() || msgs.is_empty() {
            let rest = &b[at..];
            if rest.len() < STREAM_FIXED_BYTES {
                return Err(WireError::Length {
                    got: rest.len(),
                    want: STREAM_FIXED_BYTES,
                });
            }
            // Byte 6 is the number of dimensions: the header's length.
            let len = STREAM_FIXED_BYTES + 8 * usize::from(rest[6]);
            let msg = StreamMsg::decode(&rest[..len.min(rest.len())])?;
            if !matches!(msg, StreamMsg::Frame { .. }) && (at > 0 || len != rest.len()) {
                return Err(WireError::Field(
                    "an end, a poison, a part or a sent comes alone, not among frames".into(),
                ));
            }
            msgs.push(msg);
            at += len;
        }
        Ok(msgs)
    }
}

/// The first bytes of a credit message.
pub const CREDIT_MAGIC: [u8; 4] = *b"FIOC";
/// Bytes of a credit message.
pub const CREDIT_BYTES: usize = 16;

/// A credit message (16 bytes): magic `FIOC`, the version ([`VERSION`]),
/// 3 bytes of 0, then the limit, `u64` little-endian: the producing host
/// may have sent the frames numbered below it (the consuming host's
/// consumers released every frame below `limit - window`).
pub fn encode_credit(limit: u64) -> [u8; CREDIT_BYTES] {
    let mut b = [0u8; CREDIT_BYTES];
    b[..4].copy_from_slice(&CREDIT_MAGIC);
    b[4] = VERSION;
    b[8..].copy_from_slice(&limit.to_le_bytes());
    b
}

/// Reads a credit message ([`encode_credit`]): its limit.
pub fn decode_credit(b: &[u8]) -> Result<u64, WireError> {
    let w: [u8; CREDIT_BYTES] = b.try_into().map_err(|_| WireError::Length {
        got: b.len(),
        want: CREDIT_BYTES,
    })?;
    let magic = [w[0], w[1], w[2], w[3]];
    if magic != CREDIT_MAGIC {
        return Err(WireError::Magic(magic));
    }
    if w[4] != VERSION {
        return Err(WireError::Version {
            got: w[4],
            reads: VERSION,
        });
    }
    if w[5..8] != [0, 0, 0] {
        return Err(WireError::Field(
            "bytes 5 to 7 of a credit message are 0".into(),
        ));
    }
    let mut limit = [0u8; 8];
    limit.copy_from_slice(&w[8..]);
    Ok(u64::from_le_bytes(limit))
}

/// What a host tells the others, one line per Zenoh sample on
/// `<run>/status/<host>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// An operator of this host started.
    Started(String),
    /// An operator of this host succeeded; its outputs other hosts use are
    /// being sent.
    Succeeded(String),
    /// An operator of this host failed.
    Failed {
        /// The operator.
        op: String,
        /// What happened: the typed failure as one line of JSON
        /// (`fastio_pipeline::Failure`), read by the link.
        why: String,
    },
    /// This host has room for an announced entry (its key) and waits for
    /// its bytes.
    Ready(String),
    /// This host's part is over: `None` when everything it ran succeeded,
    /// else its root cause (the typed failure as one line of JSON).
    Done(Option<String>),
    /// This host has every other host's [`Status::Done`] (or found it
    /// gone): it closes its session once every other host has said the
    /// same, so a host's `done` is never lost with its closing link.
    AllDone,
    /// The smallest batch of this host's Zenoh links, said once every
    /// host has joined: what it sends another host, and what another
    /// sends it, fits both ([`message_bytes`]).
    Batch(u32),
}

/// Longest status line read.
pub const MAX_STATUS_BYTES: usize = 4096;

impl Status {
    /// The line.
    pub fn encode(&self) -> String {
        let one_line = |s: &str| s.replace(['\n', '\r', '\t'], " ");
        match self {
            Status::Started(op) => format!("started {op}"),
            Status::Succeeded(op) => format!("succeeded {op}"),
            Status::Failed { op, why } => format!("failed {op} {}", one_line(why)),
            Status::Ready(key) => format!("ready {key}"),
            Status::Done(None) => "done".into(),
            Status::Done(Some(why)) => format!("done-failed {}", one_line(why)),
            Status::AllDone => "all-done".into(),
            Status::Batch(bytes) => format!("batch {bytes}"),
        }
    }

    /// The line, when a reader takes it (at most [`MAX_STATUS_BYTES`]):
    /// a longer one is never sent (it would be refused, and it must not
    /// outgrow a message, [`MESSAGE_BYTES`]).
    pub fn line(&self) -> Option<String> {
        Some(self.encode()).filter(|l| l.len() <= MAX_STATUS_BYTES)
    }

    /// Reads a line.
    pub fn decode(b: &[u8]) -> Result<Status, WireError> {
        if b.len() > MAX_STATUS_BYTES {
            return Err(WireError::Length {
                got: b.len(),
                want: MAX_STATUS_BYTES,
            });
        }
        let text = std::str::from_utf8(b)
            .map_err(|_| WireError::Field("status line is not UTF-8".into()))?;
        if text.contains(['\n', '\r']) {
            return Err(WireError::Field("a status is one line".into()));
        }
        let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
        if rest.contains('\t') {
            return Err(WireError::Field(format!("a tab in {text:?}")));
        }
        let word = |what: &str| {
            if rest.is_empty() || rest.contains(' ') {
                Err(WireError::Field(format!("{what} needs one name: {text:?}")))
            } else {
                Ok(rest.to_owned())
            }
        };
        Ok(match verb {
            "started" => Status::Started(word("started")?),
            "succeeded" => Status::Succeeded(word("succeeded")?),
            "ready" => Status::Ready(word("ready")?),
            "failed" => {
                let (op, why) = rest.split_once(' ').unwrap_or((rest, ""));
                if op.is_empty() {
                    return Err(WireError::Field("failed needs an operator".into()));
                }
                Status::Failed {
                    op: op.to_owned(),
                    why: why.to_owned(),
                }
            }
            "done" if rest.is_empty() => Status::Done(None),
            "done-failed" if !rest.is_empty() => Status::Done(Some(rest.to_owned())),
            "all-done" if rest.is_empty() => Status::AllDone,
            "batch" => Status::Batch(
                rest.parse()
                    .map_err(|_| WireError::Field(format!("batch needs a size: {text:?}")))?,
            ),
            _ => return Err(WireError::Field(format!("unknown status {text:?}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_bad_fields_are_refused() {
        let h = ChunkHeader {
            entry: "crop/cropped".into(),
            kind: EntryKind::Array,
            element: Primitive::Float32,
            shape: vec![3, 4, 5],
            total: 240,
            offset: 128,
            transfer: 77,
        };
        let b = h.encode().unwrap();
        assert_eq!(b.len(), FIXED_BYTES + 24 + 12);
        assert_eq!(b[7], 12);
        assert_eq!(ChunkHeader::decode(&b).unwrap(), h);
        // The key: its length, its bytes, no more and no less.
        let mut bad = b.clone();
        bad[7] = 0;
        assert!(ChunkHeader::decode(&bad).is_err(), "no key");
        let mut bad = b.clone();
        bad[7] = 13;
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(WireError::Length { .. })
        ));
        let mut bad = b.clone();
        *bad.last_mut().unwrap() = b' ';
        assert!(ChunkHeader::decode(&bad).is_err(), "a space in the key");
        let mut bad = b.clone();
        bad[4] = 1;
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(WireError::Version { got: 1, reads: 2 })
        ));
        let long = ChunkHeader {
            entry: "x".repeat(MAX_KEY_BYTES + 1),
            ..h.clone()
        };
        assert_eq!(long.encode(), None);
        let empty = ChunkHeader {
            entry: String::new(),
            ..h.clone()
        };
        assert_eq!(empty.encode(), None);
        let mut bad = b.clone();
        bad[24] = 1; // total no longer the shape's
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(WireError::Field(_))
        ));
        let mut bad = b.clone();
        bad[32..40].copy_from_slice(&241u64.to_le_bytes());
        assert!(ChunkHeader::decode(&bad).is_err());
        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(matches!(
            ChunkHeader::decode(&bad),
            Err(WireError::Magic(_))
        ));
        assert!(matches!(
            ChunkHeader::decode(&b[..50]),
            Err(WireError::Length { .. })
        ));
        let mut bad = b.clone();
        bad[8..12].copy_from_slice(b"real");
        assert!(ChunkHeader::decode(&bad).is_err(), "aliases are not names");
        // A shape whose bytes overflow.
        let huge = ChunkHeader {
            shape: vec![u64::MAX / 2, 3],
            ..h
        };
        assert!(ChunkHeader::decode(&huge.encode().unwrap()).is_err());
    }

    #[test]
    fn messages_fit_the_smaller_batch_of_two_hosts_and_pieces_fit_messages() {
        // The smaller of the two, less room for the key; a batch said
        // outside Zenoh's range is taken to its edge.
        assert_eq!(message_bytes(65_160, 65_160), 65_160 - KEY_ROOM);
        assert_eq!(message_bytes(65_480, 49_152), 49_152 - KEY_ROOM);
        assert_eq!(message_bytes(1, 65_535), MESSAGE_BYTES);
        assert_eq!(
            message_bytes(usize::MAX, usize::MAX),
            LARGEST_BATCH - KEY_ROOM
        );
        for batch in [
            SMALLEST_TCP_BATCH,
            40_000,
            49_152,
            62_636,
            65_160,
            LARGEST_BATCH,
        ] {
            let m = message_bytes(batch, LARGEST_BATCH);
            let p = piece_bytes(m);
            assert!(p + MAX_CHUNK_HEADER_BYTES <= m, "{batch}: {p}");
            assert!(p > m - MAX_CHUNK_HEADER_BYTES - 1024, "{batch}: {p}");
            assert_eq!(p % 1024, 0);
            assert!((MIN_PIECE_BYTES..=MAX_PIECE_BYTES).contains(&p));
        }
        assert_eq!(piece_bytes(message_bytes(65_160, 65_160)), 62 * 1024);
        assert_eq!(piece_bytes(0), MIN_PIECE_BYTES);
        assert_eq!(Status::decode(b"batch 65160"), Ok(Status::Batch(65_160)));
        assert_eq!(Status::Batch(49_152).encode(), "batch 49152");
        assert!(Status::decode(b"batch").is_err());
        assert!(Status::decode(b"batch -1").is_err());
        assert!(Status::decode(b"batch 99999999999").is_err());
        let long = Status::Failed {
            op: "x".into(),
            why: "y".repeat(MAX_STATUS_BYTES),
        };
        assert_eq!(long.line(), None, "a line no reader takes is not sent");
        assert_eq!(Status::Done(None).line().as_deref(), Some("done"));
    }

    #[test]
    fn a_piece_is_some_bytes_within_the_entry_and_full_but_for_the_last() {
        let (min, max) = (MIN_PIECE_BYTES as u64, MAX_PIECE_BYTES as u64);
        let total = 10 * max;
        assert_eq!(check_piece(0, min, total), Ok(()));
        assert_eq!(check_piece(0, max, total), Ok(()));
        assert_eq!(check_piece(total - 5, 5, total), Ok(()), "the last");
        assert_eq!(check_piece(0, 0, 0), Ok(()), "an empty entry");
        assert_eq!(check_piece(0, 100, 100), Ok(()), "a small entry whole");
        assert!(check_piece(0, min - 1, total).is_err(), "short, not last");
        assert!(check_piece(0, max + 1, total).is_err(), "too long");
        assert!(check_piece(total - 5, 6, total).is_err(), "past the end");
        assert!(check_piece(u64::MAX, 2, total).is_err(), "overflow");
        assert!(check_piece(0, 0, total).is_err(), "no bytes");
        assert_eq!(
            check_piece(0, 100, 4096),
            Err("a piece of 100 bytes at byte 0; 4096 were due".into())
        );
    }

    #[test]
    fn stream_messages_round_trip_and_bad_fields_are_refused() {
        let frame = StreamMsg::Frame {
            element: Primitive::UInt32,
            seq: 7,
            source_seq: 5,
            timestamp_ns: 1_700_000_000_000_000_000,
            shape: vec![8, 64],
        };
        let msgs = [
            frame.clone(),
            StreamMsg::End {
                element: Primitive::Float32,
                frames: 100,
            },
            StreamMsg::Poisoned {
                element: Primitive::Int8,
                from: 3,
            },
            StreamMsg::Part {
                element: Primitive::UInt32,
                seq: 7,
                offset: 63_432,
            },
            StreamMsg::Sent {
                element: Primitive::UInt32,
                frames: 1_441,
            },
        ];
        for m in &msgs {
            assert_eq!(&StreamMsg::decode(&m.encode()).unwrap(), m);
            assert_eq!(m.encode().len(), m.encoded_len());
        }
        let b = frame.encode();
        assert_eq!(b.len(), STREAM_FIXED_BYTES + 16);
        let mut bad = b.clone();
        bad[5] = 5;
        assert!(StreamMsg::decode(&bad).is_err(), "unknown kind");
        let mut bad = b.clone();
        bad[5] = 4;
        assert!(StreamMsg::decode(&bad).is_err(), "a sent with a shape");
        // A sent comes alone, and a version-3 peer's message is refused.
        assert!(
            StreamMsg::decode_all(&StreamMsg::encode_all(&[frame.clone(), msgs[4].clone()]))
                .is_err()
        );
        let mut old = msgs[4].encode();
        old[4] = 3;
        assert!(matches!(
            StreamMsg::decode(&old),
            Err(WireError::Version { got: 3, reads: 4 })
        ));
        let mut bad = b.clone();
        bad[5] = 3;
        assert!(StreamMsg::decode(&bad).is_err(), "a part with a shape");
        let mut bad = msgs[3].encode();
        bad[40] = 1;
        assert!(StreamMsg::decode(&bad).is_err(), "a part with a time");
        let mut old = b.clone();
        old[4] = 1;
        assert!(
            StreamMsg::decode(&old).is_err(),
            "version 1 (no parts) is not read"
        );
        // A part comes alone, as an end does.
        assert!(
            StreamMsg::decode_all(&StreamMsg::encode_all(&[frame.clone(), msgs[3].clone()]))
                .is_err()
        );
        assert_eq!(
            StreamMsg::decode_all(&msgs[3].encode()).unwrap(),
            vec![msgs[3].clone()]
        );
        let mut bad = b.clone();
        bad[5] = 1;
        assert!(StreamMsg::decode(&bad).is_err(), "an end with a shape");
        let mut bad = b.clone();
        bad[..4].copy_from_slice(&MAGIC); // an entry piece's header
        assert!(matches!(StreamMsg::decode(&bad), Err(WireError::Magic(_))));
        let mut bad = b.clone();
        bad[7] = 1;
        assert!(
            StreamMsg::decode(&bad).is_err(),
            "byte 7 is 0 in a stream header"
        );
        assert!(StreamMsg::decode(&b[..50]).is_err());
        let huge = StreamMsg::Frame {
            element: Primitive::Float64,
            seq: 0,
            source_seq: 0,
            timestamp_ns: 0,
            shape: vec![u64::MAX / 2, 3],
        };
        assert!(StreamMsg::decode(&huge.encode()).is_err());
        assert_eq!(decode_credit(&encode_credit(42)), Ok(42));
        // Several frames in one message: their headers one after another.
        let second = StreamMsg::Frame {
            element: Primitive::UInt32,
            seq: 8,
            source_seq: 6,
            timestamp_ns: 1,
            shape: vec![3],
        };
        let both = StreamMsg::encode_all(&[frame.clone(), second.clone()]);
        assert_eq!(both.len(), 2 * STREAM_FIXED_BYTES + 16 + 8);
        assert_eq!(
            StreamMsg::decode_all(&both).unwrap(),
            vec![frame.clone(), second]
        );
        assert_eq!(StreamMsg::decode_all(&b).unwrap(), vec![frame.clone()]);
        assert!(StreamMsg::decode_all(&both[..both.len() - 1]).is_err());
        assert!(StreamMsg::decode_all(&[]).is_err());
        let end = StreamMsg::End {
            element: Primitive::UInt32,
            frames: 9,
        };
        assert!(
            StreamMsg::decode_all(&StreamMsg::encode_all(&[frame.clone(), end.clone()])).is_err(),
            "an end among frames"
        );
        assert_eq!(StreamMsg::decode_all(&end.encode()).unwrap(), vec![end]);
        assert!(decode_credit(&[1, 2, 3]).is_err());
        // A version-2 peer's credit (8 bytes: frames placed) is refused,
        // as is a credit of another version or with a stray byte.
        assert!(matches!(
            decode_credit(&42u64.to_le_bytes()),
            Err(WireError::Length { got: 8, want: 16 })
        ));
        let mut old = encode_credit(42);
        old[4] = 2;
        assert!(matches!(
            decode_credit(&old),
            Err(WireError::Version { got: 2, reads: 4 })
        ));
        let mut stray = encode_credit(42);
        stray[6] = 1;
        assert!(decode_credit(&stray).is_err());
        let mut other = encode_credit(42);
        other[..4].copy_from_slice(&STREAM_MAGIC);
        assert!(matches!(decode_credit(&other), Err(WireError::Magic(_))));
    }

    #[test]
    fn status_lines_round_trip() {
        for s in [
            Status::Started("infer".into()),
            Status::Succeeded("crop".into()),
            Status::Failed {
                op: "infer".into(),
                why: "exited with status 3".into(),
            },
            Status::Ready("crop/cropped".into()),
            Status::Done(None),
            Status::Done(Some("{\"kind\":\"host-gone\",\"host\":\"gpu\"}".into())),
            Status::AllDone,
        ] {
            assert_eq!(Status::decode(s.encode().as_bytes()).unwrap(), s);
        }
        assert!(Status::decode(b"started").is_err());
        assert!(Status::decode(b"launched x").is_err());
        assert!(Status::decode(b"all-done x").is_err());
        assert!(Status::decode(&[0xff, 0xfe]).is_err());
        assert!(Status::decode(b"failed op why\twith a tab").is_err());
        assert!(Status::decode(b"started a\nb").is_err());
    }
}
