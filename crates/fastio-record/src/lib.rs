//! Recordings of fastio streams and entries as MCAP files, and reading them
//! back for replay.
//!
//! [MCAP](https://mcap.dev) is the open, indexed container robotics and
//! video tooling reads (Foxglove's viewer, the `mcap` CLI, its libraries in
//! every language). A recording made here is an ordinary MCAP file with
//! profile `fastio`:
//!
//! * one channel per stream, topic the stream's name (`gray/luma`),
//!   schema [`FRAME_SCHEMA`], message encoding [`ENCODING`]; each message is
//!   one frame: a little-endian `u32` header length `H`, `H` bytes of JSON
//!   ([`FrameHeader`]: frame number, source frame number, source timestamp,
//!   shape, and first a checksum, `crc32`, over the topic, the header and
//!   the payload), then the frame's bytes in C order. The element type and the
//!   largest shape are in the channel's metadata (`fastio.element`,
//!   `fastio.max_shape`), so a reader in any language rebuilds the array
//!   from the message alone;
//! * a stream whose frames are images (`uint8` `[H, W]`, `[H, W, 3]` or
//!   `[H, W, 4]`) also has a channel `<stream>/image` in Foxglove's
//!   `foxglove.RawImage` JSON form (`mono8`, `rgb8`, `rgba8`), which
//!   viewers show as video without code;
//! * the entries of a one-shot run on channel [`ENTRIES_TOPIC`], schema
//!   [`ENTRY_SCHEMA`]: the same layout with an [`EntryHeader`] (entry,
//!   operator, datashape type, shape, when);
//! * metadata record [`METADATA_RUN`] (pipeline, run) and, when the
//!   recording ends well, [`METADATA_COUNTS`] (frames written and skipped
//!   per stream).
//!
//! Messages are written unchunked and flushed one by one, so a recorder
//! killed mid-run leaves a file that any MCAP reader reads up to its last
//! complete message (only the summary is missing). [`Recording`] reads a
//! file with every size checked against the file and the channel's
//! element type, every message against its checksum and MCAP's data and
//! summary CRCs where the file has them: a truncated, bit-flipped or
//! hostile file is an [`Error`] (or, in [`Info::problems`], a listed
//! problem), never a panic, a frame given out with bytes other than those
//! written, or an allocation beyond the file's length.
//! `docs/recording.md` has the layout for readers of other languages.

#![forbid(unsafe_code)]

mod error;
mod format;
mod image;
mod read;
mod session;
mod write;

pub use error::{Error, Result};
pub use format::{
    CHECKSUM_KEY, Checksum, ENCODING, ENTRIES_TOPIC, ENTRY_SCHEMA, EntryHeader, FRAME_SCHEMA,
    FrameHeader, IMAGE_SCHEMA, MAX_DIMS, MAX_HEADER_BYTES, METADATA_COUNTS, METADATA_RUN, PROFILE,
    check_message, decode_message, encode_header, encode_message,
};
pub use image::{ImageFormat, image_encoding, image_format};
pub use read::{ChannelInfo, ChannelKind, Info, RecordedEntry, RecordedFrame, Recording};
pub use session::{RecordingReport, Session};
pub use write::{Recorder, RunInfo, StreamId, StreamTotals};
