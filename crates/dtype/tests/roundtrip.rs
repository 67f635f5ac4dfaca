//! Property tests: printing and parsing are inverse; mappings round-trip.

use dtype::dlpack::{from_dlpack, to_dlpack};
use dtype::numpy::{from_numpy, to_numpy};
use dtype::{Endianness, Field, Primitive, StringEncoding, Type};
use proptest::prelude::*;

fn primitive() -> impl Strategy<Value = Primitive> {
    proptest::sample::select(Primitive::ALL.to_vec())
}

fn encoding() -> impl Strategy<Value = StringEncoding> {
    proptest::sample::select(StringEncoding::ALL.to_vec())
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_][a-z0-9_]{0,6}",
        any::<String>().prop_map(|s| s.chars().take(6).collect()),
        Just("var".to_owned()),
        Just("int32".to_owned()),
    ]
}

fn scalar() -> impl Strategy<Value = Type> {
    prop_oneof![
        4 => primitive().prop_map(Type::primitive),
        1 => (primitive(), any::<bool>()).prop_map(|(p, big)| Type::with_byte_order(
            p,
            if big { Endianness::Big } else { Endianness::Little }
        )),
        1 => encoding().prop_map(Type::string),
        1 => (0usize..64, encoding())
            .prop_map(|(n, e)| Type::fixed_string(n * e.unit_size(), e).unwrap()),
        1 => Just(Type::bytes()),
    ]
}

/// Arbitrary valid types; constructors that reject a combination are skipped.
fn any_type() -> impl Strategy<Value = Type> {
    scalar().prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            (0usize..5, inner.clone())
                .prop_filter_map("fixed-size", |(n, t)| Type::fixed_dim(n, t).ok()),
            inner.clone().prop_map(Type::strided_dim),
            inner.clone().prop_map(Type::var_dim),
            inner
                .clone()
                .prop_filter_map("fixed-size", |t| Type::unaligned(t).ok()),
            inner
                .clone()
                .prop_filter_map("option", |t| Type::option(t).ok()),
            proptest::collection::vec(inner.clone(), 1..4)
                .prop_filter_map("fixed-size", |items| Type::tuple(items).ok()),
            proptest::collection::vec((field_name(), inner), 1..4).prop_filter_map(
                "valid record",
                |fields| Type::record(fields.into_iter().map(|(n, t)| Field::new(n, t)).collect())
                    .ok()
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_is_identity(ty in any_type()) {
        let text = ty.to_string();
        let back = dtype::parse(&text).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(&back, &ty, "text {}", text);
        prop_assert_eq!(back.to_string(), text);
        prop_assert_eq!(back.data_size(), ty.data_size());
        prop_assert_eq!(back.metadata_layout(), ty.metadata_layout());
    }

    #[test]
    fn layouts_are_consistent(ty in any_type()) {
        prop_assert!(ty.alignment().is_power_of_two());
        if let Some(size) = ty.data_size() {
            prop_assert_eq!(size % ty.alignment(), 0);
        }
        if let (Some(offsets), Some(size)) = (ty.field_offsets(), ty.data_size()) {
            for w in offsets.windows(2) {
                prop_assert!(w[0] <= w[1]);
            }
            prop_assert!(offsets.iter().all(|o| *o <= size));
        }
        let md = ty.metadata_layout();
        let mut expected = 0;
        for e in &md {
            prop_assert_eq!(e.offset, expected);
            expected += e.kind.size();
        }
        prop_assert_eq!(ty.metadata_size(), expected);
    }

    #[test]
    fn numpy_round_trip(ty in scalar()) {
        if let Ok(np) = to_numpy(&ty) {
            prop_assert_eq!(from_numpy(&np).unwrap(), ty);
        }
    }

    #[test]
    fn dlpack_round_trip(p in primitive()) {
        let ty = Type::primitive(p);
        prop_assert_eq!(from_dlpack(to_dlpack(&ty).unwrap()).unwrap(), ty);
    }

    #[test]
    fn parser_never_panics(text in "[ -~]{0,40}") {
        if let Ok(ty) = dtype::parse(&text) {
            prop_assert_eq!(dtype::parse(&ty.to_string()).unwrap(), ty);
        }
    }
}
