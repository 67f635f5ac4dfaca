//! Frames that are images, in the form MCAP viewers show as video:
//! Foxglove's `foxglove.RawImage`, JSON encoded (its `data` in base64).

use dtype::Primitive;

/// The JSON schema of `foxglove.RawImage` (the fields Foxglove's viewer
/// reads).
pub(crate) const RAW_IMAGE_JSON_SCHEMA: &str = r#"{
  "title": "foxglove.RawImage",
  "description": "A raw image",
  "type": "object",
  "properties": {
    "timestamp": {"type": "object", "title": "time", "properties": {"sec": {"type": "integer", "minimum": 0}, "nsec": {"type": "integer", "minimum": 0, "maximum": 999999999}}},
    "frame_id": {"type": "string"},
    "width": {"type": "integer", "minimum": 0},
    "height": {"type": "integer", "minimum": 0},
    "encoding": {"type": "string"},
    "step": {"type": "integer", "minimum": 0},
    "data": {"type": "string", "contentEncoding": "base64"}
  }
}"#;

/// How frames of one element type and shape are an image in Foxglove's
/// `foxglove.RawImage` ([`image_format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageFormat {
    /// The RawImage `encoding`: `mono8`, `rgb8`, `rgba8`, `mono16` or
    /// `32FC1`.
    pub encoding: &'static str,
    /// Bytes per pixel (a row's `step` is the width times this; frames are
    /// C-ordered, so rows have no padding).
    pub bytes_per_pixel: usize,
}

/// The image rule: frames of `element` with `shape` (a frame's own shape,
/// or a stream's largest) are images when they are `uint8 [H, W]`
/// (`mono8`), `uint8 [H, W, 3]` (`rgb8`), `uint8 [H, W, 4]` (`rgba8`),
/// `uint16 [H, W]` (`mono16`, in the machine's byte order: little-endian
/// on the hosts fastio runs on, which is what viewers read) or `float32
/// [H, W]` (`32FC1`); nothing else is.
pub fn image_format(element: Primitive, shape: &[usize]) -> Option<ImageFormat> {
    let f = |encoding, bytes_per_pixel| {
        Some(ImageFormat {
            encoding,
            bytes_per_pixel,
        })
    };
    match (element, shape) {
        (Primitive::UInt8, [_, _]) => f("mono8", 1),
        (Primitive::UInt8, [_, _, 3]) => f("rgb8", 3),
        (Primitive::UInt8, [_, _, 4]) => f("rgba8", 4),
        (Primitive::UInt16, [_, _]) => f("mono16", 2),
        (Primitive::Float32, [_, _]) => f("32FC1", 4),
        _ => None,
    }
}

/// The RawImage encoding a recording writes for frames of `element` with
/// the largest shape `max_shape`: the `uint8` forms of [`image_format`]
/// (`mono8` for `uint8 [H, W]`, `rgb8` for `[H, W, 3]`, `rgba8` for
/// `[H, W, 4]`); none for anything else. (The live viewer, `fastio-view`,
/// shows every form of [`image_format`].)
pub fn image_encoding(element: Primitive, max_shape: &[usize]) -> Option<&'static str> {
    image_format(element, max_shape)
        .filter(|_| element == Primitive::UInt8)
        .map(|f| f.encoding)
}

/// A frame of `shape` as a RawImage JSON message (`None` when its shape is
/// not an image's).
pub(crate) fn raw_image(
    stream: &str,
    timestamp_ns: u64,
    shape: &[u64],
    bytes: &[u8],
) -> Option<Vec<u8>> {
    let (h, w, c, encoding) = match *shape {
        [h, w] => (h, w, 1, "mono8"),
        [h, w, 3] => (h, w, 3, "rgb8"),
        [h, w, 4] => (h, w, 4, "rgba8"),
        _ => return None,
    };
    let message = serde_json::json!({
        "timestamp": {"sec": timestamp_ns / 1_000_000_000, "nsec": timestamp_ns % 1_000_000_000},
        "frame_id": stream,
        "width": w,
        "height": h,
        "encoding": encoding,
        "step": w * c,
        "data": base64(bytes),
    });
    serde_json::to_vec(&message).ok()
}

/// Standard base64 with padding (RFC 4648).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (k, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc_4648() {
        for (raw, text) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(raw), text);
        }
    }

    #[test]
    fn only_uint8_images_are_images() {
        assert_eq!(image_encoding(Primitive::UInt8, &[4, 5]), Some("mono8"));
        assert_eq!(image_encoding(Primitive::UInt8, &[4, 5, 3]), Some("rgb8"));
        assert_eq!(image_encoding(Primitive::UInt8, &[4, 5, 4]), Some("rgba8"));
        assert_eq!(image_encoding(Primitive::UInt8, &[4, 5, 2]), None);
        assert_eq!(image_encoding(Primitive::Float32, &[4, 5]), None);
        assert_eq!(image_encoding(Primitive::UInt16, &[4, 5]), None);
        let m = raw_image("cam", 1_500_000_000, &[1, 2, 3], &[1, 2, 3, 4, 5, 6]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(v["encoding"], "rgb8");
        assert_eq!(
            (v["width"].as_u64(), v["step"].as_u64()),
            (Some(2), Some(6))
        );
        assert_eq!(v["timestamp"]["nsec"], 500_000_000);
        assert_eq!(v["data"], base64(&[1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn the_image_rule_takes_five_forms() {
        let e = |p, s: &[usize]| image_format(p, s).map(|f| (f.encoding, f.bytes_per_pixel));
        assert_eq!(e(Primitive::UInt8, &[4, 5]), Some(("mono8", 1)));
        assert_eq!(e(Primitive::UInt8, &[4, 5, 3]), Some(("rgb8", 3)));
        assert_eq!(e(Primitive::UInt8, &[4, 5, 4]), Some(("rgba8", 4)));
        assert_eq!(e(Primitive::UInt16, &[4, 5]), Some(("mono16", 2)));
        assert_eq!(e(Primitive::Float32, &[4, 5]), Some(("32FC1", 4)));
        for (p, s) in [
            (Primitive::UInt8, &[4usize, 5, 2][..]),
            (Primitive::UInt8, &[4][..]),
            (Primitive::UInt16, &[4, 5, 3][..]),
            (Primitive::Float32, &[4, 5, 3][..]),
            (Primitive::Float64, &[4, 5][..]),
            (Primitive::Int8, &[4, 5][..]),
            (Primitive::UInt32, &[4, 5][..]),
        ] {
            assert_eq!(image_format(p, s), None, "{p:?} {s:?}");
        }
    }
}
