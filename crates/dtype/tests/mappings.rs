//! numpy, DLPack and Clara mappings, both ways.

use dtype::dlpack::{DLDataType, from_dlpack, to_dlpack};
use dtype::numpy::{from_numpy, to_numpy};
use dtype::{MappingError, Primitive, Type, clara};

fn t(text: &str) -> Type {
    dtype::parse(text).unwrap()
}

#[test]
fn numpy_strings() {
    let cases = [
        ("<i4", "int32"),
        ("|b1", "bool"),
        ("<f2", "float16"),
        ("<c16", "complex128"),
        ("<c8", "complex64"),
        (">f8", "big_endian[float64]"),
        (">i2", "big_endian[int16]"),
        ("|S16", "string[16, 'A']"),
        ("<U8", "string[32, 'U32']"),
        ("|i1", "int8"),
        ("|u1", "uint8"),
        ("<u8", "uint64"),
        ("<i8", "int64"),
        ("<f4", "float32"),
    ];
    for (np, ds) in cases {
        assert_eq!(from_numpy(np).unwrap(), t(ds), "{np}");
        assert_eq!(to_numpy(&t(ds)).unwrap(), np, "{ds}");
    }
    // Accepted spellings that are not canonical.
    assert_eq!(from_numpy("i4").unwrap(), t("int32"));
    assert_eq!(from_numpy("=f8").unwrap(), t("float64"));
    assert_eq!(from_numpy("<i1").unwrap(), t("int8"));
    assert_eq!(from_numpy(">b1").unwrap(), t("bool"));
    assert_eq!(to_numpy(&t("unaligned[int32]")).unwrap(), "<i4");
    for bad in [
        "", "<", "<i3", "<x4", "|i4", "<f", "<i4x", ">U8", "<c4", "<f16",
    ] {
        assert!(
            matches!(from_numpy(bad), Err(MappingError::Invalid { .. })),
            "{bad:?} should be rejected"
        );
    }
    for none in [
        "bfloat16",
        "string",
        "3 * int32",
        "{x: int8}",
        "string[4, 'U16']",
        "?int8",
    ] {
        assert!(
            matches!(
                to_numpy(&t(none)),
                Err(MappingError::NoEquivalent {
                    target: "numpy",
                    ..
                })
            ),
            "{none}"
        );
    }
}

#[test]
fn dlpack_types_as_tvm_writes_them() {
    let cases = [
        ("bool", (6, 8, 1)),
        ("int8", (0, 8, 1)),
        ("int16", (0, 16, 1)),
        ("int32", (0, 32, 1)),
        ("int64", (0, 64, 1)),
        ("uint8", (1, 8, 1)),
        ("uint16", (1, 16, 1)),
        ("uint32", (1, 32, 1)),
        ("uint64", (1, 64, 1)),
        ("float16", (2, 16, 1)),
        ("float32", (2, 32, 1)),
        ("float64", (2, 64, 1)),
        ("bfloat16", (4, 16, 1)),
        ("complex64", (5, 64, 1)),
        ("complex128", (5, 128, 1)),
    ];
    assert_eq!(cases.len(), Primitive::ALL.len());
    for (ds, (code, bits, lanes)) in cases {
        let dl = DLDataType::new(code, bits, lanes);
        assert_eq!(to_dlpack(&t(ds)).unwrap(), dl, "{ds}");
        assert_eq!(from_dlpack(dl).unwrap(), t(ds), "{ds}");
    }
    assert_eq!(from_dlpack(DLDataType::new(1, 1, 1)).unwrap(), t("bool"));
    for bad in [
        (0, 7, 1),
        (2, 32, 4),
        (3, 64, 1),
        (7, 8, 1),
        (99, 8, 1),
        (6, 1, 1),
        (2, 8, 1),
    ] {
        let dl = DLDataType::new(bad.0, bad.1, bad.2);
        assert!(from_dlpack(dl).is_err(), "{bad:?}");
    }
    for none in ["big_endian[int32]", "string", "3 * float32"] {
        assert!(to_dlpack(&t(none)).is_err(), "{none}");
    }
}

#[test]
fn clara_element_types() {
    for name in [
        "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
        "float32", "float64", "string",
    ] {
        let ty = clara::from_clara(name).unwrap();
        assert_eq!(ty.to_string(), name);
        assert_eq!(clara::to_clara(&ty).unwrap(), name);
    }
    for bad in ["bool", "int", "real", "complex64", "bfloat16", "dicom", ""] {
        assert!(clara::from_clara(bad).is_err(), "{bad}");
    }
    assert!(clara::to_clara(&t("string['A']")).is_err());
}
