//! The layout of a fastio recording's messages and channels.

use serde::{Deserialize, Serialize};

/// The MCAP profile of a fastio recording.
pub const PROFILE: &str = "fastio";
/// The message encoding (and schema encoding) of frames and entries:
/// `u32` LE header length, JSON header, payload.
pub const ENCODING: &str = "fastio.v1";
/// The schema of a stream's channel.
pub const FRAME_SCHEMA: &str = "fastio.Frame";
/// The schema of the entries channel.
pub const ENTRY_SCHEMA: &str = "fastio.Entry";
/// The schema of image channels (Foxglove's, JSON encoded).
pub const IMAGE_SCHEMA: &str = "foxglove.RawImage";
/// The topic of a one-shot run's entries.
pub const ENTRIES_TOPIC: &str = "fastio/entries";
/// Metadata record: the pipeline and the run.
pub const METADATA_RUN: &str = "fastio.run";
/// Metadata record written when a recording ends well: frames written and
/// skipped per stream.
pub const METADATA_COUNTS: &str = "fastio.counts";
/// The largest JSON header a reader accepts.
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// The most dimensions a recorded array may have.
pub const MAX_DIMS: usize = 32;

/// Channel metadata keys.
pub(crate) mod meta {
    /// `stream`, `image` or `entries`.
    pub const KIND: &str = "fastio.kind";
    /// `crc32` on a channel whose every message carries its checksum
    /// ([`super::CHECKSUM_KEY`]); absent in files from before checksums.
    pub const CHECKSUM: &str = "fastio.checksum";
    /// The stream an image channel shows.
    pub const STREAM: &str = "fastio.stream";
    /// The element type of a stream (a primitive name: `float32`).
    pub const ELEMENT: &str = "fastio.element";
    /// The largest shape of a stream's frames (JSON list).
    pub const MAX_SHAPE: &str = "fastio.max_shape";
}

/// The header of a frame message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameHeader {
    /// Its number in the stream.
    pub frame: u64,
    /// The number of the source frame it derives from.
    pub source_frame: u64,
    /// When the source frame was taken (ns since the Unix epoch).
    pub timestamp_ns: u64,
    /// Its shape (the bytes are `product(shape) × element size`).
    pub shape: Vec<u64>,
}

/// The header of an entry message (a one-shot run's output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryHeader {
    /// The entry (`<operator>/<output>`).
    pub entry: String,
    /// The operator that published it.
    pub operator: String,
    /// Its element type, datashape text (`float32`, `string`, …).
    pub element_type: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// When it was recorded (ns since the Unix epoch).
    pub recorded_ns: u64,
}

/// The bytes a message starts with: the header's length (`u32` LE) and
/// the header as JSON; the payload follows. No checksum: a message written
/// this way is one of a file from before checksums ([`encode_message`]
/// writes today's).
pub fn encode_header<H: Serialize>(header: &H) -> Vec<u8> {
    let json = serde_json::to_vec(header).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

/// The name of the header member that holds a message's checksum.
pub const CHECKSUM_KEY: &str = "crc32";
/// A message's header starts with these bytes when it carries a checksum:
/// the checksum is the first member, 8 lowercase hex digits.
const SEALED_PREFIX: &[u8] = b"{\"crc32\":\"";
/// Where the checksum's 8 hex digits stand in a message.
const CHECKSUM_AT: std::ops::Range<usize> = 4 + SEALED_PREFIX.len()..4 + SEALED_PREFIX.len() + 8;

/// A whole message of channel `topic`, sealed with its checksum: the
/// header's length (`u32` LE), the header as JSON with the member
/// `"crc32": "xxxxxxxx"` first, then `payload`. The checksum is the CRC-32
/// (IEEE, as zlib's and MCAP's) of the topic's UTF-8 bytes followed by the
/// whole message with the checksum's 8 digits written as `00000000`: it
/// covers the header's every field, the payload, and which channel the
/// message belongs to.
pub fn encode_message<H: Serialize>(topic: &str, header: &H, payload: &[u8]) -> Vec<u8> {
    let mut json = SEALED_PREFIX.to_vec();
    json.extend_from_slice(b"00000000\"");
    let rest = serde_json::to_vec(header).unwrap_or_default();
    match rest.as_slice() {
        // `{...}`: its members follow ours.
        [b'{', b'}'] => json.push(b'}'),
        [b'{', members @ ..] => {
            json.push(b',');
            json.extend_from_slice(members);
        }
        _ => json.push(b'}'),
    }
    let mut out = Vec::with_capacity(4 + json.len() + payload.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(payload);
    let crc = checksum(topic, &out);
    out[CHECKSUM_AT].copy_from_slice(format!("{crc:08x}").as_bytes());
    out
}

/// The CRC-32 of `topic` and `message` with its checksum digits read as
/// `00000000` (`message` is at least [`CHECKSUM_AT`] long).
fn checksum(topic: &str, message: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(topic.as_bytes());
    h.update(&message[..CHECKSUM_AT.start]);
    h.update(b"00000000");
    h.update(&message[CHECKSUM_AT.end..]);
    h.finalize()
}

/// Whether a message carried a checksum ([`check_message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// It carried one and it matches.
    Verified,
    /// It carried none: a message of a file written before checksums.
    Absent,
}

/// Checks the checksum of a message of channel `topic`: `Verified`, or
/// `Absent` when its header has no [`CHECKSUM_KEY`] member (a file from
/// before checksums), or what does not match.
pub fn check_message(topic: &str, data: &[u8]) -> Result<Checksum, String> {
    let header = data.get(4..).unwrap_or_default();
    let declared = find_member(header, CHECKSUM_KEY.as_bytes());
    if !header.starts_with(SEALED_PREFIX) {
        return if declared {
            Err("its checksum is not the header's first member".into())
        } else {
            Ok(Checksum::Absent)
        };
    }
    let Some(stored) = data.get(CHECKSUM_AT) else {
        return Err("a message too short for its checksum".into());
    };
    let stored_ok = stored
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    if !stored_ok || data.get(CHECKSUM_AT.end) != Some(&b'"') {
        return Err(format!(
            "checksum {:?} is not 8 lowercase hex digits",
            String::from_utf8_lossy(stored)
        ));
    }
    let computed = checksum(topic, data);
    let stored = std::str::from_utf8(stored).unwrap_or_default();
    if stored != format!("{computed:08x}") {
        return Err(format!(
            "checksum mismatch (stored {stored}, computed {computed:08x}): its bytes changed after it was written"
        ));
    }
    Ok(Checksum::Verified)
}

/// Whether the bytes hold `"key"` (a header member of that name, or that
/// text in a string).
fn find_member(haystack: &[u8], key: &[u8]) -> bool {
    let mut quoted = Vec::with_capacity(key.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(key);
    quoted.push(b'"');
    haystack
        .windows(quoted.len())
        .any(|w| w == quoted.as_slice())
}

/// Splits a message into its header and payload, checking the header's
/// length against the message and [`MAX_HEADER_BYTES`]. The checksum
/// member, if there is one, is passed over here: [`check_message`] checks
/// it.
pub fn decode_message<'a, H: for<'de> Deserialize<'de>>(
    data: &'a [u8],
) -> Result<(H, &'a [u8]), String> {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        return Err(format!("a message of {} bytes has no header", data.len()));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if len > MAX_HEADER_BYTES || len > rest.len() {
        return Err(format!(
            "header of {len} bytes in a message of {} bytes",
            data.len()
        ));
    }
    let (json, payload) = rest.split_at(len);
    let mut members: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(json).map_err(|e| format!("header: {e}"))?;
    members.remove(CHECKSUM_KEY);
    let header = serde_json::from_value(serde_json::Value::Object(members))
        .map_err(|e| format!("header: {e}"))?;
    Ok((header, payload))
}

/// Bytes of an array of `shape` with elements of `size` bytes, or why not
/// (too many dimensions, an overflow).
pub(crate) fn array_bytes(shape: &[u64], size: usize) -> Result<usize, String> {
    if shape.len() > MAX_DIMS {
        return Err(format!("{} dimensions (at most {MAX_DIMS})", shape.len()));
    }
    shape
        .iter()
        .try_fold(size as u64, |n, &d| n.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("shape {shape:?} overflows"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_bad_lengths_are_errors() {
        let h = FrameHeader {
            frame: 7,
            source_frame: 5,
            timestamp_ns: 11,
            shape: vec![2, 3],
        };
        let mut msg = encode_header(&h);
        msg.extend_from_slice(&[1, 2, 3]);
        let (back, payload) = decode_message::<FrameHeader>(&msg).unwrap();
        assert_eq!((back, payload), (h, &[1u8, 2, 3][..]));
        assert!(decode_message::<FrameHeader>(&msg[..2]).is_err());
        let mut long = msg.clone();
        long[..4].copy_from_slice(&(u32::MAX).to_le_bytes());
        assert!(
            decode_message::<FrameHeader>(&long)
                .unwrap_err()
                .contains("header of")
        );
        let mut other = encode_header(&serde_json::json!({"frame": 1, "extra": 2}));
        other.push(0);
        assert!(decode_message::<FrameHeader>(&other).is_err());
        assert_eq!(array_bytes(&[2, 3], 4), Ok(24));
        assert!(array_bytes(&[u64::MAX, 2], 4).is_err());
        assert!(array_bytes(&[1; 33], 1).is_err());
    }
}
