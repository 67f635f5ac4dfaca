//! Sizes, alignments, offsets, flags and canonical text of every kind of type.

use dtype::{Endianness, MetadataKind, Primitive, StringEncoding, Type, TypeError, TypeKind};

fn t(text: &str) -> Type {
    dtype::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// (text, canonical, size, alignment, pod)
const CASES: &[(&str, &str, Option<usize>, usize, bool)] = &[
    ("bool", "bool", Some(1), 1, true),
    ("int8", "int8", Some(1), 1, true),
    ("int16", "int16", Some(2), 2, true),
    ("int32", "int32", Some(4), 4, true),
    ("int64", "int64", Some(8), 8, true),
    ("uint8", "uint8", Some(1), 1, true),
    ("uint16", "uint16", Some(2), 2, true),
    ("uint32", "uint32", Some(4), 4, true),
    ("uint64", "uint64", Some(8), 8, true),
    ("float16", "float16", Some(2), 2, true),
    ("bfloat16", "bfloat16", Some(2), 2, true),
    ("float32", "float32", Some(4), 4, true),
    ("float64", "float64", Some(8), 8, true),
    ("complex64", "complex[float32]", Some(8), 4, true),
    ("complex128", "complex[float64]", Some(16), 8, true),
    ("complex[float32]", "complex[float32]", Some(8), 4, true),
    ("complex[float64]", "complex[float64]", Some(16), 8, true),
    ("int", "int32", Some(4), 4, true),
    ("real", "float64", Some(8), 8, true),
    ("complex", "complex[float64]", Some(16), 8, true),
    ("intptr", "int64", Some(8), 8, true),
    ("uintptr", "uint64", Some(8), 8, true),
    ("3 * int32", "3 * int32", Some(12), 4, true),
    ("0 * float64", "0 * float64", Some(0), 8, true),
    ("2 * 3 * int16", "2 * 3 * int16", Some(12), 2, true),
    ("strided * int32", "strided * int32", None, 4, false),
    (
        "strided * strided * float64",
        "strided * strided * float64",
        None,
        8,
        false,
    ),
    ("var * int8", "var * int8", Some(16), 8, false),
    ("unaligned[int32]", "unaligned[int32]", Some(4), 1, true),
    (
        "unaligned[3 * float64]",
        "unaligned[3 * float64]",
        Some(24),
        1,
        true,
    ),
    ("unaligned[int8]", "int8", Some(1), 1, true),
    ("big_endian[int32]", "big_endian[int32]", Some(4), 4, true),
    ("little_endian[int32]", "int32", Some(4), 4, true),
    ("big_endian[uint8]", "uint8", Some(1), 1, true),
    (
        "big_endian[complex64]",
        "big_endian[complex[float32]]",
        Some(8),
        4,
        true,
    ),
    ("string", "string", Some(16), 8, false),
    ("string['utf8']", "string", Some(16), 8, false),
    ("string['ascii']", "string['A']", Some(16), 8, false),
    ("string['A']", "string['A']", Some(16), 8, false),
    ("string['utf16']", "string['U16']", Some(16), 8, false),
    ("string['U16']", "string['U16']", Some(16), 8, false),
    ("string['ucs2']", "string['ucs2']", Some(16), 8, false),
    ("string['utf32']", "string['U32']", Some(16), 8, false),
    ("string['U32']", "string['U32']", Some(16), 8, false),
    ("string['U8']", "string", Some(16), 8, false),
    ("string[16]", "string[16]", Some(16), 1, true),
    ("string[16, 'utf8']", "string[16]", Some(16), 1, true),
    ("string[10, 'ascii']", "string[10, 'A']", Some(10), 1, true),
    ("string[16, 'U16']", "string[16, 'U16']", Some(16), 2, true),
    ("string[6, 'ucs2']", "string[6, 'ucs2']", Some(6), 2, true),
    (
        "string[32, 'utf32']",
        "string[32, 'U32']",
        Some(32),
        4,
        true,
    ),
    ("string[0]", "string[0]", Some(0), 1, true),
    ("bytes", "bytes", Some(16), 8, false),
    (
        "{x: int32, y: float64}",
        "{x: int32, y: float64}",
        Some(16),
        8,
        true,
    ),
    (
        "{a: int8, b: int16, c: int8}",
        "{a: int8, b: int16, c: int8}",
        Some(6),
        2,
        true,
    ),
    ("{x: int32,}", "{x: int32}", Some(4), 4, true),
    (
        "{'a b': int8, \"c\": int8}",
        "{'a b': int8, c: int8}",
        Some(2),
        1,
        true,
    ),
    ("(int8, float64)", "(int8, float64)", Some(16), 8, true),
    ("(int8)", "(int8)", Some(1), 1, true),
    ("(int8, int8,)", "(int8, int8)", Some(2), 1, true),
    ("?int32", "?int32", Some(8), 4, true),
    ("?int8", "?int8", Some(2), 1, true),
    ("?float64", "?float64", Some(16), 8, true),
    ("?3 * int16", "?3 * int16", Some(8), 2, true),
    ("option[int32]", "?int32", Some(8), 4, true),
    ("2 * ?3 * int32", "2 * ?3 * int32", Some(32), 4, true),
    ("?string", "?string", Some(24), 8, false),
    ("?var * int32", "?var * int32", Some(24), 8, false),
    ("3 * string", "3 * string", Some(48), 8, false),
    (
        "{s: string, n: int8}",
        "{s: string, n: int8}",
        Some(24),
        8,
        false,
    ),
];

#[test]
fn sizes_alignments_and_canonical_text() {
    for &(text, canonical, size, align, pod) in CASES {
        let ty = t(text);
        assert_eq!(ty.to_string(), canonical, "canonical text of {text}");
        assert_eq!(ty.data_size(), size, "size of {text}");
        assert_eq!(ty.alignment(), align, "alignment of {text}");
        assert_eq!(ty.is_pod(), pod, "pod-ness of {text}");
        assert_eq!(ty.is_fixed_size(), size.is_some(), "fixed-size of {text}");
        assert_eq!(t(canonical), ty, "canonical text of {text} parses back");
        if let Some(size) = size {
            assert_eq!(
                size % align,
                0,
                "size of {text} is a multiple of its alignment"
            );
        }
    }
}

#[test]
fn record_offsets_follow_c_layout() {
    let ty = t("{a: int8, b: int64, c: int16, d: (int8, int32), e: 3 * int8}");
    assert_eq!(ty.field_offsets(), Some(&[0, 8, 16, 20, 28][..]));
    assert_eq!(ty.data_size(), Some(32));
    let nested: Vec<_> = ty
        .field_layout()
        .into_iter()
        .map(|f| (f.path, f.offset, f.ty.to_string()))
        .collect();
    assert_eq!(
        nested,
        [
            ("a".to_owned(), 0, "int8".to_owned()),
            ("b".to_owned(), 8, "int64".to_owned()),
            ("c".to_owned(), 16, "int16".to_owned()),
            ("d".to_owned(), 20, "(int8, int32)".to_owned()),
            ("d.0".to_owned(), 20, "int8".to_owned()),
            ("d.1".to_owned(), 24, "int32".to_owned()),
            ("e".to_owned(), 28, "3 * int8".to_owned()),
        ]
    );
    assert_eq!(t("int32").field_offsets(), None);
    assert_eq!(t("?float64").option_value_offset(), Some(8));
}

#[test]
fn metadata_layout_describes_each_dimension_and_blockref() {
    let ty = t("strided * 3 * var * {name: string, raw: bytes, x: ?var * int8}");
    let md: Vec<_> = ty
        .metadata_layout()
        .into_iter()
        .map(|e| (e.path, e.offset, e.kind))
        .collect();
    assert_eq!(
        md,
        [
            ("$".to_owned(), 0, MetadataKind::StridedDim),
            ("$[*][*]".to_owned(), 16, MetadataKind::VarDim),
            ("$[*][*][*].name".to_owned(), 40, MetadataKind::String),
            ("$[*][*][*].raw".to_owned(), 48, MetadataKind::Bytes),
            ("$[*][*][*].x?".to_owned(), 56, MetadataKind::VarDim),
        ]
    );
    assert_eq!(ty.metadata_size(), 80);
    assert!(t("3 * {x: int32}").metadata_layout().is_empty());
    assert_eq!(MetadataKind::StridedDim.fields(), ["stride", "size"]);
    assert_eq!(
        MetadataKind::VarDim.fields(),
        ["blockref", "stride", "offset"]
    );
    assert_eq!(MetadataKind::String.fields(), ["blockref"]);
}

#[test]
fn dimensions_and_elements() {
    let ty = t("strided * 3 * var * int16");
    assert_eq!(ty.ndim(), 3);
    assert_eq!(ty.element_type(), &t("int16"));
    assert_eq!(ty.dim_element().map(Type::ndim), Some(2));
    assert_eq!(
        t("unaligned[big_endian[int32]]").as_primitive(),
        Some(Primitive::Int32)
    );
}

#[test]
fn constructors_enforce_invariants() {
    let i32t = Type::primitive(Primitive::Int32);
    assert!(matches!(
        Type::record(vec![
            dtype::Field::new("x", i32t.clone()),
            dtype::Field::new("x", i32t.clone())
        ]),
        Err(TypeError::DuplicateField(n)) if n == "x"
    ));
    assert_eq!(Type::record(vec![]), Err(TypeError::Empty("record")));
    assert_eq!(Type::tuple(vec![]), Err(TypeError::Empty("tuple")));
    let strided = Type::strided_dim(i32t.clone());
    assert!(matches!(
        Type::fixed_dim(2, strided.clone()),
        Err(TypeError::NotFixedSize { .. })
    ));
    assert!(matches!(
        Type::option(strided.clone()),
        Err(TypeError::NotFixedSize { .. })
    ));
    assert!(matches!(
        Type::unaligned(strided),
        Err(TypeError::NotFixedSize { .. })
    ));
    let opt = Type::option(i32t.clone()).unwrap();
    assert_eq!(Type::option(opt), Err(TypeError::NestedOption));
    assert!(matches!(
        Type::fixed_string(3, StringEncoding::Utf16),
        Err(TypeError::FixedStringSize {
            size: 3,
            unit: 2,
            ..
        })
    ));
    assert!(matches!(
        Type::fixed_dim(usize::MAX / 2, Type::primitive(Primitive::Int64)),
        Err(TypeError::SizeOverflow(_))
    ));
    assert!(matches!(
        Type::byte_order(&Type::string(StringEncoding::Utf8), Endianness::Big),
        Err(TypeError::ByteOrderNotPrimitive(_))
    ));
    // One representation per type: native order is the plain primitive.
    assert_eq!(
        Type::with_byte_order(Primitive::Int32, Endianness::NATIVE),
        i32t
    );
    assert!(matches!(
        Type::with_byte_order(Primitive::Int32, Endianness::Big).kind(),
        TypeKind::NonNative {
            primitive: Primitive::Int32,
            order: Endianness::Big
        }
    ));
}

#[test]
fn equality_and_hashing_are_structural() {
    use std::collections::HashSet;
    let a = t("{x: int32, y: var * string}");
    let b = t("{ x : int , y : var * string['utf-8'] }  # same type");
    assert_eq!(a, b);
    let set: HashSet<Type> = [a.clone(), b].into_iter().collect();
    assert_eq!(set.len(), 1);
    assert_ne!(a, t("{y: var * string, x: int32}"));
    assert_ne!(t("string[16, 'U16']"), t("string[16]"));
}
