//! Local metadata of allocations: defaults, `set_type_and_dimensions`
//! checks, and publications keeping the copy they were given.

mod common;

use common::context;
use dtype::{Primitive, StringEncoding, Type};
use fastio::Error;

#[test]
fn defaults_and_size_checks() {
    let ctx = context(1 << 20);
    let mut a = ctx.create(24).unwrap();
    assert_eq!(a.size(), 24);
    assert_eq!(a.element_type(), &Type::primitive(Primitive::UInt8));
    assert_eq!(a.dimensions(), &[24]);

    let f32t = Type::primitive(Primitive::Float32);
    let err = a.set_type_and_dimensions(f32t.clone(), &[5]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SizeMismatch {
                element_size: 4,
                numel: 5,
                required: 20,
                size: 24
            }
        ),
        "{err}"
    );
    // Overflowing products are a mismatch, not a wrap-around.
    let err = a
        .set_type_and_dimensions(f32t.clone(), &[usize::MAX, 2])
        .unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { .. }), "{err}");
    // Types that cannot live in shared memory.
    let err = a
        .set_type_and_dimensions(Type::string(StringEncoding::Utf8), &[1])
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
    let err = a
        .set_type_and_dimensions(f32t.clone(), &[1; 33])
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
    // A failed call leaves the metadata as it was.
    assert_eq!(a.dimensions(), &[24]);

    a.set_type_and_dimensions(f32t.clone(), &[2, 3]).unwrap();
    assert_eq!(
        (a.element_type(), a.dimensions()),
        (&f32t, &[2usize, 3][..])
    );
    let record: Type = "{x: int32, y: float64}".parse().unwrap();
    let mut b = ctx.create(32).unwrap();
    b.set_type_and_dimensions(record.clone(), &[2]).unwrap();
    b.publish("records").unwrap();
    assert_eq!(ctx.get("records").unwrap().element_type(), &record);
}

#[test]
fn publications_keep_their_copy_of_the_metadata() {
    let ctx = context(1 << 20);
    let mut a = ctx.create(16).unwrap();
    a.set_type_and_dimensions(Type::primitive(Primitive::Int32), &[4])
        .unwrap();
    a.publish("as-int32").unwrap();
    a.set_type_and_dimensions(Type::primitive(Primitive::Int16), &[2, 4])
        .unwrap();
    a.publish("as-int16").unwrap();
    // Changing the local copy changes neither publication.
    a.set_type_and_dimensions(Type::primitive(Primitive::UInt8), &[16])
        .unwrap();
    let g32 = ctx.get("as-int32").unwrap();
    let g16 = ctx.get("as-int16").unwrap();
    assert_eq!(g32.dimensions(), &[4]);
    assert_eq!(g32.element_type().to_string(), "int32");
    assert_eq!(g16.dimensions(), &[2, 4]);
    // A got copy can be changed without touching the publication.
    let mut again = ctx.get("as-int32").unwrap();
    again
        .set_type_and_dimensions(Type::primitive(Primitive::Float32), &[4])
        .unwrap();
    assert_eq!(
        ctx.get("as-int32").unwrap().element_type().to_string(),
        "int32"
    );
    // Invalid names are refused.
    for bad in ["", "a\0b", &"n".repeat(256)] {
        assert!(
            matches!(a.publish(bad), Err(Error::InvalidName { .. })),
            "{bad:?}"
        );
    }
    // The same memory under every name: a write through one is seen by all.
    drop((g32, g16, again));
    a.map_mut().unwrap()[0] = 42;
    assert_eq!(ctx.get("as-int16").unwrap().map().unwrap()[0], 42);
    ctx.check().unwrap();
}

#[test]
fn arrays_keep_the_memory_after_everything_else_is_gone() {
    let ctx = context(1 << 20);
    let mut a = ctx.create(8).unwrap();
    a.set_type_and_dimensions(Type::primitive(Primitive::Float32), &[2])
        .unwrap();
    let arr = a.map_as_ndobject_mut().unwrap();
    arr.set(&[1], 2.5f32).unwrap();
    a.free().unwrap();
    // Freed and released, but the array's block holds a reference.
    assert_eq!(ctx.stats().unwrap().freed_allocations, 1);
    let view = arr.view(&[ndobject::Index::At(1)]).unwrap();
    drop(arr);
    assert_eq!(view.get::<f32>(&[]).unwrap(), 2.5);
    drop(view);
    let s = ctx.stats().unwrap();
    assert_eq!((s.live_allocations, s.freed_allocations), (0, 0));
}

#[test]
fn create_array_sizes_and_types_the_allocation() {
    let ctx = context(1 << 20);
    let f32t = Type::primitive(Primitive::Float32);
    let a = ctx.create_array(f32t.clone(), &[2, 3]).unwrap();
    assert_eq!((a.size(), a.dimensions()), (24, &[2usize, 3][..]));
    assert_eq!(a.element_type(), &f32t);
    assert!(ctx.create_array(f32t.clone(), &[usize::MAX, 2]).is_err());
    assert!(matches!(
        ctx.create_array(Type::string(StringEncoding::Utf8), &[1]),
        Err(Error::Unsupported(_))
    ));
    let empty = ctx.create_array(f32t, &[0, 5]).unwrap();
    assert_eq!(empty.size(), 0);
}

#[test]
fn publish_array_copies_any_layout_once_into_native_order() {
    use ndobject::{Array, AssignErrorMode, Index, MemoryBlock};
    let ctx = context(1 << 20);
    let values: Vec<i32> = (0..24).map(|v| v * 7 - 50).collect();
    let base = Array::from_vec(values.clone(), &[4, 6]).unwrap();
    // A transposed, reversed view.
    let view = base
        .transpose()
        .view(&[Index::slice(None, None, -1), Index::all()])
        .unwrap();
    // Big-endian data at a misaligned address.
    let be = view
        .cast(&"big_endian[int32]".parse().unwrap(), AssignErrorMode::None)
        .unwrap();
    let mut raw = vec![0u8; 1 + 4 * 24];
    raw[1..].copy_from_slice(&be.to_bytes().unwrap());
    let block = MemoryBlock::from_owner(raw);
    let odd = Array::from_block(&block, 1, "big_endian[int32]".parse().unwrap(), &[6, 4]).unwrap();
    assert!(odd.dtype().to_string().contains("unaligned"));
    let want = view.to_vec::<i32>().unwrap();
    for (name, src) in [("view", &view), ("odd", &odd)] {
        ctx.publish_array(name, src).unwrap().release().unwrap();
        let got = ctx.get(name).unwrap();
        assert_eq!(got.dimensions(), &[6, 4]);
        assert_eq!(got.element_type(), &Type::primitive(Primitive::Int32));
        let arr = got.map_as_ndobject().unwrap();
        assert_eq!(arr.to_vec::<i32>().unwrap(), want, "{name}");
    }
    assert!(matches!(
        ctx.publish_array("view", &view),
        Err(Error::NameExists(_))
    ));
}

#[test]
fn map_by_name_holds_a_reference_and_a_read_mapping_until_dropped() {
    let ctx = context(1 << 20);
    let mut a = ctx
        .create_array(Type::primitive(Primitive::UInt16), &[4])
        .unwrap();
    a.map_mut()
        .unwrap()
        .copy_from_slice(&[1, 0, 2, 0, 3, 0, 4, 0]);
    a.publish("x").unwrap();
    {
        let m = ctx.map("x").unwrap();
        assert_eq!(&m[..], &[1, 0, 2, 0, 3, 0, 4, 0]);
        assert_eq!(m.allocation().dimensions(), &[4]);
        assert_eq!(m.allocation().element_type().to_string(), "uint16");
        // A read mapping is registered: no writer now.
        assert!(matches!(a.map_mut(), Err(Error::MapConflict(_))));
        let again = ctx.map("x").unwrap();
        assert_eq!(again.len(), 8);
    }
    // Both gave back their mapping and their reference.
    assert!(a.map_mut().is_ok());
    a.free().unwrap();
    assert_eq!(ctx.stats().unwrap().live_allocations, 0);
    assert!(matches!(ctx.map("x"), Err(Error::UnknownName(_))));
    // A writer present: the mapping fails and no reference is left behind.
    let mut w = ctx.create(16).unwrap();
    w.publish("w").unwrap();
    let guard = w.map_mut().unwrap();
    assert!(matches!(ctx.map("w"), Err(Error::MapConflict(_))));
    drop(guard);
    w.free().unwrap();
    let s = ctx.stats().unwrap();
    assert_eq!((s.live_allocations, s.published_names), (0, 0));
    ctx.check().unwrap();
}
