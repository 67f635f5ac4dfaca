//! Writing a recording: [`Recorder`].

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use dtype::Primitive;
use mcap::records::{MessageHeader, Metadata};

use crate::error::{Error, Result};
use crate::format::{
    CHECKSUM_KEY, ENCODING, ENTRIES_TOPIC, ENTRY_SCHEMA, EntryHeader, FRAME_SCHEMA, FrameHeader,
    IMAGE_SCHEMA, METADATA_COUNTS, METADATA_RUN, PROFILE, encode_message, meta,
};
use crate::image::{RAW_IMAGE_JSON_SCHEMA, image_encoding, raw_image};

/// What a recording is of (its [`METADATA_RUN`] record).
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// The pipeline's name.
    pub pipeline: String,
    /// The run's id.
    pub run: String,
}

/// A stream added to a [`Recorder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamId(usize);

/// What a recorder wrote of one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamTotals {
    /// The stream's name.
    pub stream: String,
    /// Frames written.
    pub frames: u64,
    /// Frames it could not keep (a lossy recorder fell behind).
    pub skipped: u64,
}

#[derive(Debug)]
struct StreamChannel {
    name: String,
    channel: u16,
    image: Option<u16>,
    totals: StreamTotals,
}

/// Writes a recording: streams' frames and entries as MCAP messages, each
/// flushed to the file as it is written (unchunked), so the file is
/// readable up to its last complete message at any moment.
pub struct Recorder<W: Write + Seek = BufWriter<File>> {
    path: PathBuf,
    writer: mcap::Writer<W>,
    frame_schema: u16,
    image_schema: Option<u16>,
    entries: Option<(u16, u32)>,
    streams: Vec<StreamChannel>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Recorder<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the header and the run's
    /// metadata.
    pub fn create(path: &Path, run: &RunInfo) -> Result<Self> {
        let file = File::create(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Recorder::new(BufWriter::with_capacity(1 << 20, file), path, run)
    }
}

impl<W: Write + Seek> Recorder<W> {
    /// A recorder writing to `w` (`path` names it in errors).
    pub fn new(w: W, path: &Path, run: &RunInfo) -> Result<Self> {
        let path = path.to_owned();
        let mcap_err = |p: &Path| {
            let p = p.to_owned();
            move |source| Error::Mcap { path: p, source }
        };
        let mut writer = mcap::WriteOptions::new()
            .profile(PROFILE)
            .library(format!("fastio-record {}", env!("CARGO_PKG_VERSION")))
            .compression(None)
            .use_chunks(false)
            .create(w)
            .map_err(mcap_err(&path))?;
        let frame_schema = writer
            .add_schema(FRAME_SCHEMA, ENCODING, FRAME_SCHEMA_TEXT.as_bytes())
            .map_err(mcap_err(&path))?;
        writer
            .write_metadata(&Metadata {
                name: METADATA_RUN.into(),
                metadata: BTreeMap::from([
                    ("pipeline".into(), run.pipeline.clone()),
                    ("run".into(), run.run.clone()),
                    ("started_ns".into(), now_ns().to_string()),
                ]),
            })
            .map_err(mcap_err(&path))?;
        writer.flush().map_err(mcap_err(&path))?;
        Ok(Recorder {
            path,
            writer,
            frame_schema,
            image_schema: None,
            entries: None,
            streams: Vec::new(),
        })
    }

    fn mcap(&self) -> impl FnOnce(mcap::McapError) -> Error + use<W> {
        let path = self.path.clone();
        move |source| Error::Mcap { path, source }
    }

    /// Adds stream `name` (frames of `element`, at most `max_shape`): its
    /// channel, and an image channel when its frames are images.
    pub fn add_stream(
        &mut self,
        name: &str,
        element: Primitive,
        max_shape: &[usize],
    ) -> Result<StreamId> {
        let metadata = BTreeMap::from([
            (meta::KIND.to_owned(), "stream".to_owned()),
            (meta::CHECKSUM.to_owned(), CHECKSUM_KEY.to_owned()),
            (meta::ELEMENT.to_owned(), element.name().to_owned()),
            (
                meta::MAX_SHAPE.to_owned(),
                serde_json::to_string(max_shape).unwrap_or_default(),
            ),
        ]);
        let channel = self
            .writer
            .add_channel(self.frame_schema, name, ENCODING, &metadata)
            .map_err(self.mcap())?;
        let image = match image_encoding(element, max_shape) {
            Some(_) => {
                let schema = match self.image_schema {
                    Some(s) => s,
                    None => {
                        let s = self
                            .writer
                            .add_schema(
                                IMAGE_SCHEMA,
                                "jsonschema",
                                RAW_IMAGE_JSON_SCHEMA.as_bytes(),
                            )
                            .map_err(self.mcap())?;
                        self.image_schema = Some(s);
                        s
                    }
                };
                let metadata = BTreeMap::from([
                    (meta::KIND.to_owned(), "image".to_owned()),
                    (meta::STREAM.to_owned(), name.to_owned()),
                ]);
                Some(
                    self.writer
                        .add_channel(schema, &format!("{name}/image"), "json", &metadata)
                        .map_err(self.mcap())?,
                )
            }
            None => None,
        };
        self.writer.flush().map_err(self.mcap())?;
        self.streams.push(StreamChannel {
            name: name.to_owned(),
            channel,
            image,
            totals: StreamTotals {
                stream: name.to_owned(),
                frames: 0,
                skipped: 0,
            },
        });
        Ok(StreamId(self.streams.len() - 1))
    }

    fn stream(&mut self, id: StreamId) -> Result<&mut StreamChannel> {
        let path = self.path.clone();
        self.streams.get_mut(id.0).ok_or_else(|| Error::Invalid {
            path,
            what: format!("no stream {}", id.0),
        })
    }

    /// Writes one frame of stream `id` (and its image), then flushes.
    pub fn write_frame(&mut self, id: StreamId, header: &FrameHeader, bytes: &[u8]) -> Result<()> {
        let (channel, image, name) = {
            let s = self.stream(id)?;
            (s.channel, s.image, s.name.clone())
        };
        let data = encode_message(&name, header, bytes);
        let log_time = now_ns();
        let sequence = header.frame as u32;
        self.writer
            .write_to_known_channel(
                &MessageHeader {
                    channel_id: channel,
                    sequence,
                    log_time,
                    publish_time: header.timestamp_ns,
                },
                &data,
            )
            .map_err(self.mcap())?;
        if let Some(image) = image
            && let Some(json) = raw_image(&name, header.timestamp_ns, &header.shape, bytes)
        {
            self.writer
                .write_to_known_channel(
                    &MessageHeader {
                        channel_id: image,
                        sequence,
                        log_time,
                        publish_time: header.timestamp_ns,
                    },
                    &json,
                )
                .map_err(self.mcap())?;
        }
        self.writer.flush().map_err(self.mcap())?;
        self.stream(id)?.totals.frames += 1;
        Ok(())
    }

    /// Counts `n` frames of stream `id` the recorder could not keep.
    pub fn skipped(&mut self, id: StreamId, n: u64) -> Result<()> {
        self.stream(id)?.totals.skipped += n;
        Ok(())
    }

    /// Writes one entry of a one-shot run, then flushes.
    pub fn write_entry(&mut self, header: &EntryHeader, bytes: &[u8]) -> Result<()> {
        let (channel, seq) = match self.entries {
            Some(c) => c,
            None => {
                let schema = self
                    .writer
                    .add_schema(ENTRY_SCHEMA, ENCODING, ENTRY_SCHEMA_TEXT.as_bytes())
                    .map_err(self.mcap())?;
                let metadata = BTreeMap::from([
                    (meta::KIND.to_owned(), "entries".to_owned()),
                    (meta::CHECKSUM.to_owned(), CHECKSUM_KEY.to_owned()),
                ]);
                let c = self
                    .writer
                    .add_channel(schema, ENTRIES_TOPIC, ENCODING, &metadata)
                    .map_err(self.mcap())?;
                (c, 0)
            }
        };
        let data = encode_message(ENTRIES_TOPIC, header, bytes);
        self.writer
            .write_to_known_channel(
                &MessageHeader {
                    channel_id: channel,
                    sequence: seq,
                    log_time: header.recorded_ns,
                    publish_time: header.recorded_ns,
                },
                &data,
            )
            .map_err(self.mcap())?;
        self.writer.flush().map_err(self.mcap())?;
        self.entries = Some((channel, seq.wrapping_add(1)));
        Ok(())
    }

    /// What was written of each stream so far.
    pub fn totals(&self) -> Vec<StreamTotals> {
        self.streams.iter().map(|s| s.totals.clone()).collect()
    }

    /// Writes the counts, the summary and the footer.
    pub fn finish(mut self) -> Result<Vec<StreamTotals>> {
        let totals = self.totals();
        let mut counts = BTreeMap::new();
        for t in &totals {
            counts.insert(format!("{}.frames", t.stream), t.frames.to_string());
            counts.insert(format!("{}.skipped", t.stream), t.skipped.to_string());
        }
        self.writer
            .write_metadata(&Metadata {
                name: METADATA_COUNTS.into(),
                metadata: counts,
            })
            .map_err(self.mcap())?;
        self.writer.finish().map_err(self.mcap())?;
        Ok(totals)
    }
}

/// The schema text of [`FRAME_SCHEMA`]: how to read a message.
const FRAME_SCHEMA_TEXT: &str = r#"{
  "description": "One frame of a fastio stream. Message: u32 little-endian header length H, H bytes of UTF-8 JSON (this header), then the frame's bytes in C order: product(shape) elements of the channel's metadata fastio.element (little-endian).",
  "header": {
    "type": "object",
    "properties": {
      "crc32": {"type": "string", "description": "first member: 8 lowercase hex digits, the CRC-32 (IEEE) of the topic's UTF-8 bytes followed by the whole message with these 8 digits written as 00000000"},
      "frame": {"type": "integer", "description": "its number in the stream"},
      "source_frame": {"type": "integer", "description": "the source frame it derives from"},
      "timestamp_ns": {"type": "integer", "description": "when the source frame was taken, ns since the Unix epoch"},
      "shape": {"type": "array", "items": {"type": "integer"}}
    },
    "required": ["crc32", "frame", "source_frame", "timestamp_ns", "shape"]
  }
}"#;

/// The schema text of [`ENTRY_SCHEMA`].
const ENTRY_SCHEMA_TEXT: &str = r#"{
  "description": "One entry a one-shot fastio job published. Message: u32 little-endian header length H, H bytes of UTF-8 JSON (this header), then the entry's bytes as its datashape type lays them out.",
  "header": {
    "type": "object",
    "properties": {
      "crc32": {"type": "string", "description": "first member: 8 lowercase hex digits, the CRC-32 (IEEE) of the topic's UTF-8 bytes followed by the whole message with these 8 digits written as 00000000"},
      "entry": {"type": "string", "description": "<operator>/<output>"},
      "operator": {"type": "string"},
      "element_type": {"type": "string", "description": "datashape text"},
      "shape": {"type": "array", "items": {"type": "integer"}},
      "recorded_ns": {"type": "integer"}
    },
    "required": ["crc32", "entry", "operator", "element_type", "shape", "recorded_ns"]
  }
}"#;
