//! Byte layout against TVM's bytes, and every strictness rule with its
//! field and offset; hostile input (truncation at every byte, bit flips,
//! huge size fields) through every reader.

mod common;

use common::{i32s, mixed, tvm_example};
use dtype::Primitive;
use params_io::format::LEGACY_BOOL;
use params_io::{
    Duplicates, Error, Field, FormatErrorKind, ParamDict, Profile, ReadOptions, Tensor,
};

fn kind(r: Result<ParamDict, Error>) -> (u64, Field, FormatErrorKind) {
    let e = r.expect_err("must be rejected");
    let f = e
        .format_error()
        .unwrap_or_else(|| panic!("not a format error: {e}"));
    (f.offset, f.field, f.kind.clone())
}

fn strict(b: &[u8]) -> (u64, Field, FormatErrorKind) {
    let a = kind(ReadOptions::new().read_bytes(b));
    // The streaming reader must agree on field, offset and kind.
    let s = kind(ReadOptions::new().read(b));
    // A reader that knows the length can reject a count or length before
    // reading on; a stream finds the same problem as a truncation later.
    let early = matches!(
        a.2,
        FormatErrorKind::CountTooLarge { .. } | FormatErrorKind::NameTooLong { .. }
    );
    if !early {
        assert_eq!((a.0, a.1), (s.0, s.1));
    } else {
        assert!(s.0 >= a.0);
    }
    a
}

#[test]
fn writes_exactly_what_tvm_writes() {
    let mut d = ParamDict::new();
    d.insert(
        "x",
        Tensor::new(Primitive::Int32, &[2, 3], i32s(&[0, 1, 2, 3, 4, 5])).unwrap(),
    );
    assert_eq!(d.to_bytes().unwrap(), tvm_example());
    assert_eq!(ReadOptions::new().read_bytes(&tvm_example()).unwrap(), d);
    assert_eq!(ParamDict::new().to_bytes().unwrap().len(), 32);
    let mut s = ParamDict::new();
    s.insert("x", Tensor::new(Primitive::Int32, &[], i32s(&[7])).unwrap());
    assert_eq!(s.to_bytes().unwrap().len(), 85);
}

#[test]
fn index_reports_offsets_and_types() {
    let idx = ReadOptions::default().index_bytes(&tvm_example()).unwrap();
    let e = &idx.entries[0];
    assert_eq!((e.offset, e.record_offset, e.nbytes), (97, 41, 24));
    assert_eq!((e.dl.code, e.dl.bits, e.dl.lanes), (0, 32, 1));
    assert_eq!(e.datashape(), "2 * 3 * int32");
    assert_eq!(idx.data_bytes(), 24);
}

#[test]
fn every_field_error_names_field_and_offset() {
    let good = tvm_example();
    let patch = |at: usize, bytes: &[u8]| {
        let mut b = good.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    assert!(matches!(
        strict(&patch(0, &[0])),
        (0, Field::ListMagic, FormatErrorKind::BadListMagic { .. })
    ));
    // Reserved words are ignored.
    assert!(ReadOptions::new().read_bytes(&patch(8, &[0xff; 8])).is_ok());
    assert!(
        ReadOptions::new()
            .read_bytes(&patch(49, &[0xff; 8]))
            .is_ok()
    );
    assert!(matches!(
        strict(&patch(16, &u64::MAX.to_le_bytes())),
        (16, Field::NameCount, FormatErrorKind::CountTooLarge { .. })
    ));
    assert!(matches!(
        strict(&patch(24, &u64::MAX.to_le_bytes())),
        (
            24,
            Field::NameLength { index: 0 },
            FormatErrorKind::NameTooLong { .. }
        )
    ));
    assert!(matches!(
        strict(&patch(32, &[0xff])),
        (
            32,
            Field::Name { index: 0 },
            FormatErrorKind::NonUtf8Name { valid_up_to: 0 }
        )
    ));
    assert!(matches!(
        strict(&patch(33, &2u64.to_le_bytes())),
        (
            33,
            Field::TensorCount,
            FormatErrorKind::CountMismatch {
                names: 1,
                tensors: 2
            }
        )
    ));
    assert!(matches!(
        strict(&patch(41, &[0])),
        (
            41,
            Field::TensorMagic { tensor: 0 },
            FormatErrorKind::BadTensorMagic { .. }
        )
    ));
    assert!(matches!(
        strict(&patch(57, &2i32.to_le_bytes())),
        (
            57,
            Field::DeviceType { tensor: 0 },
            FormatErrorKind::Device {
                device_type: 2,
                device_id: 0
            }
        )
    ));
    assert!(matches!(
        strict(&patch(61, &3i32.to_le_bytes())),
        (
            61,
            Field::DeviceId { tensor: 0 },
            FormatErrorKind::Device {
                device_type: 1,
                device_id: 3
            }
        )
    ));
    for bad in [-1i32, 33, i32::MIN, i32::MAX] {
        assert!(matches!(
            strict(&patch(65, &bad.to_le_bytes())),
            (65, Field::Ndim { tensor: 0 }, FormatErrorKind::Ndim { .. })
        ));
    }
    assert!(matches!(
        strict(&patch(69, &[99])),
        (
            69,
            Field::Dtype { tensor: 0 },
            FormatErrorKind::UnknownDtype { code: 99, .. }
        )
    ));
    assert!(matches!(
        strict(&patch(70, &[33])),
        (
            69,
            Field::Dtype { tensor: 0 },
            FormatErrorKind::UnsupportedDtype { .. }
        )
    ));
    assert!(matches!(
        strict(&patch(71, &4u16.to_le_bytes())),
        (
            69,
            Field::Dtype { tensor: 0 },
            FormatErrorKind::UnsupportedDtype { lanes: 4, .. }
        )
    ));
    assert!(matches!(
        strict(&patch(81, &(-3i64).to_le_bytes())),
        (
            81,
            Field::Shape { tensor: 0, dim: 1 },
            FormatErrorKind::NegativeDim { value: -3 }
        )
    ));
    assert!(matches!(
        strict(&patch(73, &(1i64 << 62).to_le_bytes())),
        (
            89,
            Field::ByteSize { tensor: 0 },
            FormatErrorKind::SizeOverflow
        )
    ));
    assert!(matches!(
        strict(&patch(89, &25i64.to_le_bytes())),
        (
            89,
            Field::ByteSize { tensor: 0 },
            FormatErrorKind::ByteSizeMismatch {
                found: 25,
                elements: 6,
                element_size: 4
            }
        )
    ));
    assert!(matches!(
        strict(&patch(89, &(-24i64).to_le_bytes())),
        (
            89,
            Field::ByteSize { tensor: 0 },
            FormatErrorKind::ByteSizeMismatch { found: -24, .. }
        )
    ));
}

#[test]
fn shape_product_overflow_is_caught() {
    // TVM accepts int8 (2^62+1, 4) with 4 data bytes; we do not.
    let mut b = tvm_example();
    b[69] = 0;
    b[70] = 8;
    b[73..81].copy_from_slice(&((1i64 << 62) + 1).to_le_bytes());
    b[81..89].copy_from_slice(&4i64.to_le_bytes());
    b[89..97].copy_from_slice(&4i64.to_le_bytes());
    assert!(matches!(
        strict(&b[..101]),
        (
            81,
            Field::Shape { tensor: 0, dim: 1 },
            FormatErrorKind::SizeOverflow
        )
    ));
}

#[test]
fn trailing_bytes_are_an_option() {
    let mut b = tvm_example();
    b.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        strict(&b),
        (
            121,
            Field::Trailing,
            FormatErrorKind::TrailingBytes { count: 3 }
        )
    ));
    let lenient = ReadOptions::default().allow_trailing(true);
    assert_eq!(lenient.read_bytes(&b).unwrap().len(), 1);
    assert_eq!(lenient.read(&b[..]).unwrap().len(), 1);
}

#[test]
fn non_utf8_names_are_kept_when_asked() {
    let mut d = ParamDict::new();
    d.insert(
        vec![0xffu8, b'a'],
        Tensor::new(Primitive::UInt8, &[1], vec![1]).unwrap(),
    );
    let b = d.to_bytes().unwrap();
    assert!(matches!(
        strict(&b),
        (
            32,
            Field::Name { index: 0 },
            FormatErrorKind::NonUtf8Name { .. }
        )
    ));
    let raw = ReadOptions::default()
        .raw_names(true)
        .read_bytes(&b)
        .unwrap();
    assert_eq!(raw.iter().next().unwrap().name_bytes(), &[0xff, b'a']);
    assert_eq!(raw.iter().next().unwrap().name_str(), None);
    assert_eq!(raw.to_bytes().unwrap(), b);
}

/// Two records under the same name, as CVM's C API can write.
fn duplicated() -> Vec<u8> {
    let one = |v: u8| Tensor::new(Primitive::UInt8, &[1], vec![v]).unwrap();
    let mut d = ParamDict::new();
    d.insert("a", one(1));
    d.insert("b", one(2));
    d.insert("c", one(3));
    let mut b = d.to_bytes().unwrap();
    // Rename "c" (third name, at 24 + 9 + 9 + 8) to "a".
    assert_eq!(b[50], b'c');
    b[50] = b'a';
    b
}

#[test]
fn duplicates_error_or_last_wins() {
    let b = duplicated();
    assert!(matches!(
        strict(&b),
        (
            50,
            Field::Name { index: 2 },
            FormatErrorKind::DuplicateName { first: 0, .. }
        )
    ));
    let d = ReadOptions::default()
        .duplicates(Duplicates::LastWins)
        .read_bytes(&b)
        .unwrap();
    assert_eq!(d.names().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(d.get("a").unwrap().data(), &[3]);
}

#[test]
fn legacy_bool_reads_as_bool_and_round_trips() {
    let t = Tensor::new(Primitive::Bool, &[3], vec![1, 0, 1]).unwrap();
    let mut d = ParamDict::new();
    d.insert("m", t.clone().with_dl_type(LEGACY_BOOL).unwrap());
    let b = d.to_bytes().unwrap();
    // (1, 1, 1) with one byte per element.
    assert_eq!(&b[69..73], &[1, 1, 1, 0]);
    let back = ReadOptions::new().read_bytes(&b).unwrap();
    assert_eq!(back.get("m").unwrap(), &t);
    assert_eq!(back.get("m").unwrap().dl_type(), LEGACY_BOOL);
    assert_eq!(back.to_bytes().unwrap(), b);
}

#[test]
fn cvm_profile() {
    let cvm = ReadOptions::default().profile(Profile::Cvm);
    let mut ok = ParamDict::new();
    ok.insert("w", Tensor::new(Primitive::Int8, &[2], vec![1, 2]).unwrap());
    ok.insert(
        "b",
        Tensor::new(Primitive::Int32, &[1], i32s(&[3])).unwrap(),
    );
    assert!(cvm.read_bytes(&ok.to_bytes().unwrap()).is_ok());

    let e = cvm.read_bytes(&tvm_example());
    assert!(e.is_ok(), "int32 is fine for CVM");
    let f = cvm.read_bytes(&mixed().to_bytes().unwrap()).unwrap_err();
    let f = f.format_error().unwrap();
    assert!(
        matches!(
            f.kind,
            FormatErrorKind::Profile {
                profile: Profile::Cvm,
                ..
            }
        ),
        "{f}"
    );
    let mut zero = ParamDict::new();
    zero.insert("z", Tensor::new(Primitive::Int8, &[0], vec![]).unwrap());
    let z = cvm.read_bytes(&zero.to_bytes().unwrap()).unwrap_err();
    assert!(matches!(
        z.format_error().unwrap().field,
        Field::ByteSize { tensor: 0 }
    ));
    let opts = params_io::WriteOptions::default().profile(Profile::Cvm);
    assert!(matches!(
        zero.write_to_with(Vec::new(), &opts, &mut |_| {}),
        Err(Error::Unwritable { .. })
    ));
}

#[test]
fn truncation_at_every_byte_is_an_error_in_every_reader() {
    let full = mixed().to_bytes().unwrap();
    for cut in 0..full.len() {
        let part = &full[..cut];
        let a = ReadOptions::new().read_bytes(part).unwrap_err();
        let b = ReadOptions::new().read(part).unwrap_err();
        let c = ReadOptions::default().index_bytes(part).unwrap_err();
        for e in [&a, &b, &c] {
            let f = e.format_error().unwrap_or_else(|| panic!("cut {cut}: {e}"));
            assert!(f.offset <= cut as u64, "cut {cut}: {f}");
        }
    }
}

#[test]
fn single_bit_flips_never_panic_and_are_mostly_caught() {
    let full = mixed().to_bytes().unwrap();
    let header_bytes = full.len();
    let mut accepted = 0;
    for byte in 0..header_bytes {
        for bit in 0..8 {
            let mut b = full.clone();
            b[byte] ^= 1 << bit;
            let r1 = ReadOptions::new().read_bytes(&b);
            let r2 = ReadOptions::new().read(&b[..]);
            assert_eq!(r1.is_ok(), r2.is_ok(), "byte {byte} bit {bit}");
            if let Ok(d) = r1 {
                accepted += 1;
                // A flip that is accepted changed a value, a reserved word or a name.
                assert_eq!(d.len(), mixed().len());
            }
        }
    }
    assert!(accepted < header_bytes * 8);
}

#[test]
fn huge_size_fields_on_a_short_stream_are_cheap() {
    // Name length 2^40 on a 40-byte stream: the reader must fail after
    // reading what is there, not try to allocate a terabyte.
    let mut b = tvm_example();
    b[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = ReadOptions::new().read(&b[..]).unwrap_err();
    assert!(matches!(
        e.format_error().unwrap().kind,
        FormatErrorKind::Truncated {
            needed: 1_099_511_627_776,
            ..
        }
    ));
    // A data size of 2^40 bytes declared by the shape.
    let mut b = tvm_example();
    b[69..73].copy_from_slice(&[1, 8, 1, 0]);
    b[73..81].copy_from_slice(&(1i64 << 20).to_le_bytes());
    b[81..89].copy_from_slice(&(1i64 << 20).to_le_bytes());
    b[89..97].copy_from_slice(&(1i64 << 40).to_le_bytes());
    let e = ReadOptions::new().read(&b[..]).unwrap_err();
    assert!(matches!(
        e.format_error().unwrap().kind,
        FormatErrorKind::Truncated { available: 24, .. }
    ));
    let e = ReadOptions::new().read_bytes(&b).unwrap_err();
    assert!(matches!(
        e.format_error().unwrap().field,
        Field::Data { tensor: 0 }
    ));
    // Name count 2^63.
    let mut b = tvm_example();
    b[16..24].copy_from_slice(&(1u64 << 63).to_le_bytes());
    assert!(ReadOptions::new().read(&b[..]).is_err());
}

#[test]
fn zero_dimension_beside_huge_ones_is_an_empty_tensor_everywhere() {
    // Found by fuzzing: shape (2^62, 2^62, 0) has zero elements; the index,
    // the buffer reader and the stream reader must all accept it.
    let mut d = ParamDict::new();
    d.insert("z", Tensor::new(Primitive::Int8, &[0], vec![]).unwrap());
    let mut b = d.to_bytes().unwrap();
    // ndim 1 -> 3: splice two more dimensions in front of the existing one.
    let ndim_at = 24 + 9 + 8 + 24;
    b[ndim_at..ndim_at + 4].copy_from_slice(&3i32.to_le_bytes());
    let shape_at = ndim_at + 8;
    let huge = (1i64 << 62).to_le_bytes();
    let tail = b.split_off(shape_at);
    b.extend_from_slice(&huge);
    b.extend_from_slice(&huge);
    b.extend_from_slice(&tail);
    let a = ReadOptions::new().read_bytes(&b).unwrap();
    let s = ReadOptions::new().read(&b[..]).unwrap();
    let i = ReadOptions::default().index_bytes(&b).unwrap();
    assert_eq!(a, s);
    assert_eq!(a.get("z").unwrap().shape(), &[1 << 62, 1 << 62, 0]);
    assert!(a.get("z").unwrap().is_empty());
    assert_eq!(i.entries[0].len(), 0);
    assert_eq!(a.to_bytes().unwrap(), b);
}
