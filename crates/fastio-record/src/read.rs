//! Reading a recording: [`Recording`]. The file is read front to back
//! (MCAP's linear reader over our own reads), so a file without its
//! summary, cut off by a recorder that was killed, reads up to its last
//! complete message. Every record is at most the file's length (the
//! reader's record limit), and every message is checked against its
//! channel before it is given out.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use dtype::Primitive;
use mcap::McapError;
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};

use crate::error::{Error, Result};
use crate::format::{
    CHECKSUM_KEY, Checksum, ENCODING, ENTRY_SCHEMA, EntryHeader, FRAME_SCHEMA, FrameHeader,
    METADATA_COUNTS, METADATA_RUN, array_bytes, check_message, decode_message, meta,
};

/// A recording on disk (or in memory, [`Recording::from_bytes`]).
#[derive(Debug, Clone)]
pub struct Recording {
    path: PathBuf,
    len: u64,
    bytes: Option<std::sync::Arc<[u8]>>,
}

/// What a channel carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// A stream's frames ([`FRAME_SCHEMA`]).
    Stream,
    /// A stream's frames as images (`foxglove.RawImage`).
    Image,
    /// A one-shot run's entries ([`ENTRY_SCHEMA`]).
    Entries,
    /// A channel another tool wrote.
    Other,
}

/// One channel of a recording and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelInfo {
    /// The MCAP channel id.
    pub id: u16,
    /// Its topic (the stream's name for a stream).
    pub topic: String,
    /// What it carries.
    pub kind: ChannelKind,
    /// Its schema's name ("" without one).
    pub schema: String,
    /// Its message encoding.
    pub encoding: String,
    /// The element type of a stream's frames.
    pub element: Option<Primitive>,
    /// The largest shape of a stream's frames.
    pub max_shape: Option<Vec<usize>>,
    /// Its channel says every message carries a checksum (files written
    /// before checksums do not).
    pub checksum: bool,
    /// Messages read.
    pub messages: u64,
    /// Messages whose checksum, header or size does not hold (counted in
    /// `messages` too).
    pub bad_messages: u64,
    /// Bytes of those messages.
    pub bytes: u64,
    /// The first and last message's log time (ns since the Unix epoch).
    pub span_ns: Option<(u64, u64)>,
}

/// What a recording holds, read front to back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// The file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub bytes: u64,
    /// The MCAP profile in its header.
    pub profile: String,
    /// Every channel, by id.
    pub channels: Vec<ChannelInfo>,
    /// Messages read.
    pub messages: u64,
    /// The file was closed well (its footer was read).
    pub complete: bool,
    /// Why reading stopped early: a recorder that was killed (the
    /// messages counted are the complete ones before).
    pub cut: Option<String>,
    /// The run's metadata ([`METADATA_RUN`]).
    pub run: BTreeMap<String, String>,
    /// The counts written at the end ([`METADATA_COUNTS`]).
    pub counts: BTreeMap<String, String>,
    /// What does not hold in the file, at most [`Info::MAX_PROBLEMS`] of
    /// them (a message whose checksum does not match, a frame whose size
    /// does not add up, MCAP's own data or summary CRC): a file with any
    /// is not replayed.
    pub problems: Vec<String>,
    /// Problems found in all (`problems` keeps the first few).
    pub problem_count: u64,
}

impl Info {
    /// The most problems [`Info::problems`] keeps.
    pub const MAX_PROBLEMS: usize = 10;

    fn problem(&mut self, what: String) {
        self.problem_count += 1;
        if self.problems.len() < Self::MAX_PROBLEMS {
            self.problems.push(what);
        }
    }
}

/// One recorded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedFrame {
    /// Its header.
    pub header: FrameHeader,
    /// When it was recorded (ns since the Unix epoch).
    pub log_time: u64,
    /// Its bytes (`product(shape) × element size`, checked).
    pub bytes: Vec<u8>,
}

/// One recorded entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEntry {
    /// Its header.
    pub header: EntryHeader,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A channel record.
struct ChannelRec {
    id: u16,
    schema_id: u16,
    topic: String,
    message_encoding: String,
    metadata: BTreeMap<String, String>,
}

/// A message record's header.
struct MessageHeader {
    channel_id: u16,
    sequence: u32,
    log_time: u64,
    publish_time: u64,
}

/// A metadata record.
struct MetadataRec {
    name: String,
    metadata: BTreeMap<String, String>,
}

/// A record, owned.
enum Rec {
    Header(String),
    Schema {
        id: u16,
        name: String,
        encoding: String,
    },
    Channel(ChannelRec),
    Message {
        header: MessageHeader,
        data: Vec<u8>,
    },
    Metadata(MetadataRec),
    Footer,
    Other,
}

/// MCAP opcodes (the spec's record types) we read.
mod op {
    pub const HEADER: u8 = 0x01;
    pub const FOOTER: u8 = 0x02;
    pub const SCHEMA: u8 = 0x03;
    pub const CHANNEL: u8 = 0x04;
    pub const MESSAGE: u8 = 0x05;
    pub const METADATA: u8 = 0x0C;
}

/// Reads a record's fields, little-endian, each length checked against
/// what is left.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!(
                "{what}: {n} bytes claimed, {} left in the record",
                self.0.len()
            ));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    fn u16(&mut self, what: &str) -> Result<u16, String> {
        self.array(what).map(u16::from_le_bytes)
    }
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        self.array(what).map(u32::from_le_bytes)
    }
    fn u64(&mut self, what: &str) -> Result<u64, String> {
        self.array(what).map(u64::from_le_bytes)
    }
    fn string(&mut self, what: &str) -> Result<String, String> {
        let n = self.u32(what)? as usize;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what}: not UTF-8"))
    }
    fn map(&mut self, what: &str) -> Result<BTreeMap<String, String>, String> {
        let n = self.u32(what)? as usize;
        let mut inner = Fields(self.take(n, what)?);
        let mut out = BTreeMap::new();
        while !inner.0.is_empty() {
            let k = inner.string(what)?;
            let v = inner.string(what)?;
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// The records a recording's reader needs; others are passed over.
fn parse(opcode: u8, data: &[u8]) -> Result<Rec, String> {
    let mut f = Fields(data);
    Ok(match opcode {
        op::HEADER => Rec::Header(f.string("profile")?),
        op::FOOTER => Rec::Footer,
        op::SCHEMA => Rec::Schema {
            id: f.u16("schema id")?,
            name: f.string("schema name")?,
            encoding: f.string("schema encoding")?,
        },
        op::CHANNEL => Rec::Channel(ChannelRec {
            id: f.u16("channel id")?,
            schema_id: f.u16("schema id")?,
            topic: f.string("topic")?,
            message_encoding: f.string("message encoding")?,
            metadata: f.map("channel metadata")?,
        }),
        op::MESSAGE => {
            let channel_id = f.u16("channel id")?;
            let sequence = f.u32("sequence")?;
            let log_time = f.u64("log time")?;
            let publish_time = f.u64("publish time")?;
            Rec::Message {
                header: MessageHeader {
                    channel_id,
                    sequence,
                    log_time,
                    publish_time,
                },
                data: f.0.to_vec(),
            }
        }
        op::METADATA => Rec::Metadata(MetadataRec {
            name: f.string("metadata name")?,
            metadata: f.map("metadata")?,
        }),
        _ => Rec::Other,
    })
}

/// The records of a file, front to back.
struct Records {
    path: PathBuf,
    file: Box<dyn Read>,
    reader: LinearReader,
    /// Complete messages given out.
    messages: u64,
    /// Bytes handed to the reader.
    offset: u64,
    done: bool,
}

impl Records {
    /// The next record; `Err(Truncated)` when the file ends inside one;
    /// `None` after the end magic.
    fn next(&mut self) -> Option<Result<Rec>> {
        if self.done {
            return None;
        }
        loop {
            let event = match self.reader.next_event() {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(self.stopped(e)));
                }
            };
            match event {
                LinearReadEvent::ReadRequest(n) => {
                    let buf = self.reader.insert(n);
                    let got = match self.file.read(buf) {
                        Ok(k) => k,
                        Err(source) => {
                            self.done = true;
                            return Some(Err(Error::Io {
                                path: self.path.clone(),
                                source,
                            }));
                        }
                    };
                    self.offset += got as u64;
                    self.reader.notify_read(got);
                }
                LinearReadEvent::Record { opcode, data } => {
                    // Our own parse of the few records we read: every
                    // length is checked against the record before anything
                    // is allocated (the library's parser trusts string and
                    // map lengths: a hostile one asks for gigabytes).
                    let rec = match parse(opcode, data) {
                        Ok(r) => r,
                        Err(e) => {
                            self.done = true;
                            let what = format!(
                                "after {} messages: record {opcode:#04x}: {e}",
                                self.messages
                            );
                            return Some(Err(Error::Invalid {
                                path: self.path.clone(),
                                what,
                            }));
                        }
                    };
                    if matches!(rec, Rec::Message { .. }) {
                        self.messages += 1;
                    }
                    return Some(Ok(rec));
                }
            }
        }
    }

    fn stopped(&self, e: McapError) -> Error {
        match e {
            McapError::UnexpectedEof | McapError::UnexpectedEoc => Error::Truncated {
                path: self.path.clone(),
                messages: self.messages,
                offset: self.offset,
                reason: e.to_string(),
            },
            // The limit is the file's length: the record runs past its end.
            McapError::RecordTooLarge { opcode, len } => Error::Truncated {
                path: self.path.clone(),
                messages: self.messages,
                offset: self.offset,
                reason: format!(
                    "a record (opcode {opcode:#04x}) of {len} bytes runs past the end of the file"
                ),
            },
            McapError::BadMagic => Error::Invalid {
                path: self.path.clone(),
                what: "not an MCAP recording: it does not start (or end) with MCAP's magic bytes"
                    .into(),
            },
            McapError::BadDataCrc { saved, calculated } => Error::Crc {
                path: self.path.clone(),
                section: "data section",
                stored: saved,
                computed: calculated,
            },
            McapError::BadSummaryCrc { saved, calculated } => Error::Crc {
                path: self.path.clone(),
                section: "summary",
                stored: saved,
                computed: calculated,
            },
            other => Error::Invalid {
                path: self.path.clone(),
                what: format!("after {} messages: {other}", self.messages),
            },
        }
    }
}

/// The channels seen so far, and their schemas' names and encodings.
#[derive(Default)]
struct Channels {
    schemas: BTreeMap<u16, (String, String)>,
    channels: BTreeMap<u16, ChannelInfo>,
}

impl Channels {
    /// Counts a message (the `at`-th of the file) on its channel and
    /// checks it: a message of a channel never declared, a fastio message
    /// whose checksum or record fields do not hold ([`check_message_of`]), a
    /// frame whose size does not add up, an image message that is not JSON.
    /// The error names the channel, the message's number in it and in the
    /// file (both counted from 1).
    fn check(&mut self, rec: &MessageHeader, data: &[u8], at: u64) -> Result<(), String> {
        let Some(c) = self.channels.get_mut(&rec.channel_id) else {
            return Err(format!(
                "message {at} of the file: its channel id {} was never declared",
                rec.channel_id
            ));
        };
        c.messages += 1;
        let checked = match c.kind {
            ChannelKind::Stream => {
                check_message_of(c, rec, data).and_then(|()| check_frame(c, data).map(|_| ()))
            }
            ChannelKind::Entries => check_message_of(c, rec, data),
            // Foxglove's JSON: a fastio message moved here starts with its
            // header's length, never with `{"`.
            ChannelKind::Image if !data.starts_with(b"{\"") => {
                Err("an image message that is not JSON".into())
            }
            ChannelKind::Image | ChannelKind::Other => Ok(()),
        };
        checked.map_err(|what| {
            c.bad_messages += 1;
            format!(
                "{}, message {} of the channel ({at} of the file): {what}",
                c.topic, c.messages
            )
        })
    }

    /// Takes note of a schema or channel record; a channel whose fastio
    /// metadata does not parse is an error.
    fn note(&mut self, rec: &Rec, path: &Path) -> Result<()> {
        match rec {
            Rec::Schema { id, name, encoding } => {
                self.schemas.insert(*id, (name.clone(), encoding.clone()));
            }
            Rec::Channel(c) => {
                let (schema, schema_encoding) =
                    self.schemas.get(&c.schema_id).cloned().unwrap_or_default();
                let kind = match (schema.as_str(), c.message_encoding.as_str()) {
                    (FRAME_SCHEMA, ENCODING) if schema_encoding == ENCODING => ChannelKind::Stream,
                    (ENTRY_SCHEMA, ENCODING) if schema_encoding == ENCODING => ChannelKind::Entries,
                    _ if c.metadata.get(meta::KIND).map(String::as_str) == Some("image") => {
                        ChannelKind::Image
                    }
                    _ => ChannelKind::Other,
                };
                let invalid = |what: String| Error::Invalid {
                    path: path.to_owned(),
                    what: format!("channel {:?}: {what}", c.topic),
                };
                let (element, max_shape) = if kind == ChannelKind::Stream {
                    let e = c.metadata.get(meta::ELEMENT).map(String::as_str);
                    let element = e.and_then(Primitive::from_name).ok_or_else(|| {
                        invalid(format!("element type {e:?} is not a primitive type"))
                    })?;
                    let text = c.metadata.get(meta::MAX_SHAPE).cloned().unwrap_or_default();
                    let max: Vec<usize> = serde_json::from_str(&text)
                        .map_err(|e| invalid(format!("largest shape {text:?}: {e}")))?;
                    let dims: Vec<u64> = max.iter().map(|&d| d as u64).collect();
                    array_bytes(&dims, element.size())
                        .map_err(|e| invalid(format!("largest shape: {e}")))?;
                    (Some(element), Some(max))
                } else {
                    (None, None)
                };
                let checksum =
                    c.metadata.get(meta::CHECKSUM).map(String::as_str) == Some(CHECKSUM_KEY);
                // The summary repeats the channels: the first one counts.
                if self.channels.contains_key(&c.id) {
                    return Ok(());
                }
                self.channels.insert(
                    c.id,
                    ChannelInfo {
                        id: c.id,
                        topic: c.topic.clone(),
                        kind,
                        schema,
                        encoding: c.message_encoding.clone(),
                        element,
                        max_shape,
                        checksum,
                        messages: 0,
                        bad_messages: 0,
                        bytes: 0,
                        span_ns: None,
                    },
                );
            }
            _ => {}
        }
        Ok(())
    }
}

impl Recording {
    /// The recording at `path` (read when asked).
    pub fn open(path: &Path) -> Result<Recording> {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        if !meta.is_file() {
            return Err(Error::Invalid {
                path: path.to_owned(),
                what: "not a file".into(),
            });
        }
        Ok(Recording {
            path: path.to_owned(),
            len: meta.len(),
            bytes: None,
        })
    }

    /// A recording held in memory (`<memory>` in errors): for tests and
    /// fuzzing.
    pub fn from_bytes(bytes: Vec<u8>) -> Recording {
        Recording {
            path: PathBuf::from("<memory>"),
            len: bytes.len() as u64,
            bytes: Some(bytes.into()),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file ends with MCAP's magic (a writer closed it).
    fn ends_with_magic(&self) -> bool {
        const MAGIC: &[u8] = b"\x89MCAP0\r\n";
        if self.len < 2 * MAGIC.len() as u64 {
            return false;
        }
        let mut tail = [0u8; 8];
        match &self.bytes {
            Some(b) => tail.copy_from_slice(&b[b.len() - 8..]),
            None => {
                use std::io::{Seek, SeekFrom};
                let read = File::open(&self.path).and_then(|mut f| {
                    f.seek(SeekFrom::End(-8))?;
                    f.read_exact(&mut tail)
                });
                if read.is_err() {
                    return false;
                }
            }
        }
        tail == MAGIC
    }

    fn records(&self) -> Result<Records> {
        let file: Box<dyn Read> = match &self.bytes {
            Some(b) => Box::new(std::io::Cursor::new(b.clone())),
            None => Box::new(File::open(&self.path).map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?),
        };
        // No record is longer than the file: a length field beyond it is
        // refused before anything is allocated for it.
        let limit = usize::try_from(self.len).unwrap_or(usize::MAX).max(64);
        let reader = LinearReader::new_with_options(
            LinearReaderOptions::default()
                .with_record_length_limit(limit)
                .with_validate_data_section_crc(true)
                .with_validate_summary_section_crc(true),
        );
        Ok(Records {
            path: self.path.clone(),
            file,
            reader,
            messages: 0,
            offset: 0,
            done: false,
        })
    }

    /// Reads the whole file: channels, counts, time span, metadata. A file
    /// cut off by a killed recorder is not an error here: [`Info::cut`]
    /// says where it stops.
    pub fn info(&self) -> Result<Info> {
        let mut records = self.records()?;
        let mut channels = Channels::default();
        let mut info = Info {
            path: self.path.clone(),
            bytes: self.len,
            profile: String::new(),
            channels: Vec::new(),
            messages: 0,
            complete: false,
            cut: None,
            run: BTreeMap::new(),
            counts: BTreeMap::new(),
            problems: Vec::new(),
            problem_count: 0,
        };
        let mut header_seen = false;
        while let Some(rec) = records.next() {
            let rec = match rec {
                // Not even a header record after the magic: no recording
                // (an empty file, or garbage), not a cut one.
                Err(Error::Truncated { reason, .. }) if !header_seen => {
                    return Err(Error::Invalid {
                        path: self.path.clone(),
                        what: format!("not an MCAP recording: no header record ({reason})"),
                    });
                }
                Ok(r) => r,
                // A file that ends with MCAP's closing magic was closed
                // well: a record that runs past its end is a damaged
                // length field, not a recorder killed mid-record.
                Err(e @ Error::Truncated { .. }) if self.ends_with_magic() => {
                    info.problem(format!(
                        "after {} messages: a record's length does not hold in a file that \
                         was closed well ({})",
                        info.messages,
                        match &e {
                            Error::Truncated { reason, .. } => reason.as_str(),
                            _ => "",
                        }
                    ));
                    break;
                }
                Err(e @ Error::Truncated { .. }) => {
                    info.cut = Some(e.to_string());
                    break;
                }
                // MCAP's own CRCs, checked at the end of each section: the
                // messages before were each checked on their own.
                Err(Error::Crc {
                    section,
                    stored,
                    computed,
                    ..
                }) if header_seen => {
                    info.problem(crate::error::crc_text(section, stored, computed));
                    break;
                }
                Err(e) => return Err(e),
            };
            if !header_seen && !matches!(rec, Rec::Header(_)) {
                return Err(Error::Invalid {
                    path: self.path.clone(),
                    what: "not an MCAP recording: the first record is not a header".into(),
                });
            }
            channels.note(&rec, &self.path)?;
            match rec {
                Rec::Header(profile) => {
                    header_seen = true;
                    info.profile = profile;
                }
                Rec::Message { header, data } => {
                    info.messages += 1;
                    if let Err(what) = channels.check(&header, &data, records.messages) {
                        info.problem(what);
                    }
                    if let Some(c) = channels.channels.get_mut(&header.channel_id) {
                        c.bytes += data.len() as u64;
                        let t = header.log_time;
                        c.span_ns = Some(c.span_ns.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                    }
                }
                Rec::Metadata(m) if m.name == METADATA_RUN => info.run = m.metadata,
                Rec::Metadata(m) if m.name == METADATA_COUNTS => info.counts = m.metadata,
                Rec::Footer => info.complete = true,
                _ => {}
            }
        }
        info.channels = channels.channels.into_values().collect();
        Ok(info)
    }

    /// [`Recording::info`], an error when anything in the file does not
    /// hold ([`Info::problems`]): what replay reads before it publishes a
    /// frame, so that nothing of a damaged file is published. A file cut
    /// off by a killed recorder is not damaged: its messages before the cut
    /// each checked.
    pub fn verified_info(&self) -> Result<Info> {
        let info = self.info()?;
        if let Some(first) = info.problems.first() {
            let more = match info.problem_count {
                1 => String::new(),
                n => format!(" ({n} problems in all; `fastio record --info` lists them)"),
            };
            return Err(Error::Invalid {
                path: self.path.clone(),
                what: format!("{first}{more}"),
            });
        }
        Ok(info)
    }

    /// The frames of stream `topic`, in file order, each checked against
    /// the channel (element type, largest shape, byte count).
    pub fn frames(
        &self,
        topic: &str,
    ) -> Result<impl Iterator<Item = Result<RecordedFrame>> + use<>> {
        let mut records = self.records()?;
        let mut channels = Channels::default();
        let path = self.path.clone();
        let topic = topic.to_owned();
        let mut id: Option<u16> = None;
        let mut failed = false;
        Ok(std::iter::from_fn(move || {
            if failed {
                return None;
            }
            loop {
                let rec = match records.next()? {
                    Ok(r) => r,
                    Err(e) => {
                        failed = true;
                        return Some(Err(e));
                    }
                };
                if let Err(e) = channels.note(&rec, &path) {
                    failed = true;
                    return Some(Err(e));
                }
                match rec {
                    Rec::Channel(c) if c.topic == topic => {
                        if channels.channels.get(&c.id).map(|c| c.kind) != Some(ChannelKind::Stream)
                        {
                            failed = true;
                            return Some(Err(Error::Invalid {
                                path: path.clone(),
                                what: format!("channel {topic:?} is not a fastio stream"),
                            }));
                        }
                        id = Some(c.id);
                    }
                    // Every message is checked, not only the stream's: one
                    // that a flip moved to another channel is missed there.
                    Rec::Message { header, data } => {
                        if let Err(what) = channels.check(&header, &data, records.messages) {
                            failed = true;
                            return Some(Err(Error::Invalid {
                                path: path.clone(),
                                what,
                            }));
                        }
                        if Some(header.channel_id) != id {
                            continue;
                        }
                        let c = &channels.channels[&header.channel_id];
                        let (h, at) = match check_frame(c, &data) {
                            Ok(found) => found,
                            Err(what) => {
                                failed = true;
                                return Some(Err(Error::Invalid {
                                    path: path.clone(),
                                    what,
                                }));
                            }
                        };
                        return Some(Ok(RecordedFrame {
                            header: h,
                            log_time: header.log_time,
                            bytes: data[at..].to_vec(),
                        }));
                    }
                    _ => {}
                }
            }
        }))
    }

    /// The entries of a one-shot run, in file order.
    pub fn entries(&self) -> Result<Vec<RecordedEntry>> {
        let mut records = self.records()?;
        let mut channels = Channels::default();
        let mut out = Vec::new();
        while let Some(rec) = records.next() {
            let rec = rec?;
            channels.note(&rec, &self.path)?;
            let Rec::Message { header, data } = rec else {
                continue;
            };
            channels
                .check(&header, &data, records.messages)
                .map_err(|what| Error::Invalid {
                    path: self.path.clone(),
                    what,
                })?;
            if channels.channels.get(&header.channel_id).map(|c| c.kind)
                == Some(ChannelKind::Entries)
            {
                let (h, payload) =
                    decode_message::<EntryHeader>(&data).map_err(|what| Error::Invalid {
                        path: self.path.clone(),
                        what: format!("entry message ({} of the file): {what}", records.messages),
                    })?;
                out.push(RecordedEntry {
                    header: h,
                    bytes: payload.to_vec(),
                });
            }
        }
        Ok(out)
    }

    /// The stream channel to replay: `topic`, or the only stream there is.
    pub fn stream_channel(&self, topic: Option<&str>) -> Result<ChannelInfo> {
        let info = self.verified_info()?;
        let streams: Vec<&ChannelInfo> = info
            .channels
            .iter()
            .filter(|c| c.kind == ChannelKind::Stream)
            .collect();
        let known = || {
            streams
                .iter()
                .map(|c| c.topic.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match topic {
            Some(t) => streams
                .iter()
                .find(|c| c.topic == t)
                .map(|c| (*c).clone())
                .ok_or_else(|| Error::NoChannel {
                    path: self.path.clone(),
                    name: t.to_owned(),
                    known: known(),
                }),
            None if streams.len() == 1 => Ok(streams[0].clone()),
            None => Err(Error::Invalid {
                path: self.path.clone(),
                what: format!(
                    "{} streams ({}): name the one to replay",
                    streams.len(),
                    known()
                ),
            }),
        }
    }
}

/// Checks a message of a fastio channel (stream or entries) against its
/// checksum, and the record's own fields the writer sets from the header
/// (a frame's `sequence` is its number, truncated; `publish_time` its
/// timestamp; an entry's `publish_time` its `recorded_ns`). A message of
/// another tool's channel is not checked here.
fn check_message_of(c: &ChannelInfo, rec: &MessageHeader, data: &[u8]) -> Result<(), String> {
    if !matches!(c.kind, ChannelKind::Stream | ChannelKind::Entries) {
        return Ok(());
    }
    match check_message(&c.topic, data)? {
        Checksum::Verified => {}
        Checksum::Absent if c.checksum => {
            return Err("no checksum, where its channel says every message has one".into());
        }
        // A file from before checksums: read as it was then.
        Checksum::Absent => return Ok(()),
    }
    if c.kind == ChannelKind::Stream {
        let (h, _) = decode_message::<FrameHeader>(data)?;
        if rec.sequence != h.frame as u32 || rec.publish_time != h.timestamp_ns {
            return Err(format!(
                "its record says sequence {} and publish time {}, its header frame {} and \
                 timestamp {}",
                rec.sequence, rec.publish_time, h.frame, h.timestamp_ns
            ));
        }
    } else {
        let (h, _) = decode_message::<EntryHeader>(data)?;
        if rec.publish_time != h.recorded_ns {
            return Err(format!(
                "its record says publish time {}, its header recorded_ns {}",
                rec.publish_time, h.recorded_ns
            ));
        }
    }
    Ok(())
}

/// A frame message of channel `c`: its header and where its bytes start,
/// or what is wrong with it.
fn check_frame(c: &ChannelInfo, data: &[u8]) -> Result<(FrameHeader, usize), String> {
    let (h, payload) = decode_message::<FrameHeader>(data)?;
    let (Some(element), Some(max)) = (c.element, c.max_shape.as_ref()) else {
        return Err("not a stream channel".into());
    };
    if h.shape.len() != max.len() || h.shape.iter().zip(max).any(|(&d, &m)| d > m as u64) {
        return Err(format!(
            "shape {:?} beyond the stream's largest {max:?}",
            h.shape
        ));
    }
    let want = array_bytes(&h.shape, element.size())?;
    if payload.len() != want {
        return Err(format!(
            "{} bytes for shape {:?} of {} ({want} expected)",
            payload.len(),
            h.shape,
            element.name()
        ));
    }
    Ok((h, data.len() - payload.len()))
}
