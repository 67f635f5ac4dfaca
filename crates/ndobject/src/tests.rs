//! Unit tests (also run under Miri by `cargo xtask miri`).

use dtype::{Primitive, StringEncoding, Type};

use crate::{
    AccessFlags, Array, AssignErrorMode as M, BlockKind, Error, Index, MemoryBlock, Scalar,
};

fn ty(s: &str) -> Type {
    s.parse().unwrap()
}

#[test]
fn indexing_matches_the_dynd_example() {
    let a = Array::from_slice(&[1i32, 2, 3], &[3]).unwrap();
    assert_eq!(a.block().kind(), BlockKind::Embedded);
    assert_eq!(a.block().refcount(), 1);
    let b = a.index(1).unwrap();
    assert_eq!(b.dtype(), ty("int32"));
    assert_eq!(a.block().refcount(), 2);
    assert_eq!(b.data_address(), a.data_address() + 4);
    assert!(b.block().ptr_eq(a.block()));
    drop(a);
    assert_eq!(b.block().refcount(), 1);
    assert_eq!(b.get::<i32>(&[]).unwrap(), 2);
    drop(b);
}

#[test]
fn views_of_views_and_negative_steps() {
    let data: Vec<i64> = (0..24).collect();
    let a = Array::from_slice(&data, &[2, 3, 4]).unwrap();
    assert_eq!(a.block().kind(), BlockKind::Pod);
    assert_eq!(a.strides(), [96, 32, 8]);
    let v = a
        .view(&[
            Index::at(-1),
            Index::slice(None, None, -2),
            Index::slice(Some(1), None, 2),
        ])
        .unwrap();
    assert_eq!(v.shape(), [2, 2]);
    assert_eq!(v.to_vec::<i64>().unwrap(), [21, 23, 13, 15]);
    let w = v.transpose();
    assert_eq!(w.to_vec::<i64>().unwrap(), [21, 13, 23, 15]);
    let x = w.index(1).unwrap();
    assert_eq!(x.to_vec::<i64>().unwrap(), [23, 15]);
    assert_eq!(a.block().refcount(), 4);
    drop((a, v, w));
    assert_eq!(x.block().refcount(), 1);
    assert_eq!(x.get::<i64>(&[0]).unwrap(), 23);
    let p = Array::from_slice(&data, &[2, 3, 4])
        .unwrap()
        .permute(&[2, 0, 1])
        .unwrap();
    assert_eq!(p.shape(), [4, 2, 3]);
    assert_eq!(p.get::<i64>(&[3, 1, 2]).unwrap(), 23);
    assert!(p.permute(&[0, 0, 1]).is_err());
    assert!(matches!(
        p.index(4),
        Err(Error::IndexOutOfRange {
            index: 4,
            dim: 0,
            size: 4
        })
    ));
}

#[test]
fn reshape_needs_a_contiguous_layout() {
    let a = Array::from_slice(&(0..12).collect::<Vec<u16>>(), &[3, 4]).unwrap();
    let r = a.reshape(&[2, 6]).unwrap();
    assert_eq!(r.get::<u16>(&[1, 0]).unwrap(), 6);
    assert!(matches!(a.reshape(&[5]), Err(Error::Reshape { .. })));
    assert!(matches!(
        a.transpose().reshape(&[12]),
        Err(Error::Reshape { .. })
    ));
    assert_eq!(
        a.transpose()
            .to_contiguous()
            .unwrap()
            .reshape(&[12])
            .unwrap()
            .get::<u16>(&[1])
            .unwrap(),
        4
    );
}

#[test]
fn access_flags_are_enforced_and_inherited() {
    let a = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(a.flags(), AccessFlags::READ_WRITE);
    let r = a.read_only();
    assert!(matches!(r.set(&[0], 5.0f32), Err(Error::NotWritable(_))));
    assert!(matches!(
        r.index(0).unwrap().set(&[], 5.0f32),
        Err(Error::NotWritable(_))
    ));
    a.set(&[0], 5.0f32).unwrap();
    assert_eq!(r.get::<f32>(&[0]).unwrap(), 5.0);
    // Not unique: cannot freeze.
    let a = a.into_immutable().unwrap_err();
    drop(r);
    let im = a.into_immutable().unwrap();
    assert_eq!(im.flags(), AccessFlags::READ_IMMUTABLE);
    assert_eq!(im.flags().to_string(), "5 (read_access immutable )");
    assert!(im.set(&[1], 1.0f32).is_err());
    assert_eq!(im.index(1).unwrap().flags(), AccessFlags::READ_IMMUTABLE);
    assert_eq!(im.as_slice::<f32>().unwrap(), [5.0, 2.0]);
    let copy = im.to_contiguous().unwrap();
    assert_eq!(copy.flags(), AccessFlags::READ_WRITE);
    copy.set(&[1], 9.0f32).unwrap();
    assert_eq!(im.get::<f32>(&[1]).unwrap(), 2.0);
    // Writable memory never yields a slice.
    assert!(matches!(copy.as_slice::<f32>(), Err(Error::NotWritable(_))));
}

#[test]
fn unaligned_and_byte_swapped_views_read_correctly() {
    // A `Vec<u8>` may start at any address (Miri varies it): pick an
    // offset whose address is not a multiple of 4.
    let mut bytes = vec![0u8; 11];
    let off = if (bytes.as_ptr() as usize + 1).is_multiple_of(4) {
        2
    } else {
        1
    };
    bytes[off..off + 4].copy_from_slice(&7i32.to_ne_bytes());
    bytes[off + 4..off + 8].copy_from_slice(&(-9i32).to_ne_bytes());
    let block = MemoryBlock::from_owner(bytes);
    let a = Array::from_block(&block, off, ty("int32"), &[2]).unwrap();
    assert_eq!(a.element_type(), &ty("unaligned[int32]"));
    assert_eq!(a.dtype().to_string(), "strided * unaligned[int32]");
    assert_eq!(a.flags(), AccessFlags::READ);
    assert_eq!(a.to_vec::<i32>().unwrap(), [7, -9]);
    assert!(a.as_slice::<i32>().is_err());
    let aligned = a.to_contiguous().unwrap();
    assert_eq!(aligned.element_type(), &ty("int32"));
    assert_eq!(aligned.to_vec::<i32>().unwrap(), [7, -9]);
    assert!(matches!(
        Array::from_block(&block, 4, ty("int32"), &[2]),
        Err(Error::OutOfBlock { .. })
    ));
    let be = MemoryBlock::from_owner(vec![0x12u8, 0x34, 0x56, 0x78]);
    let b = Array::from_block(&be, 0, ty("big_endian[uint32]"), &[]).unwrap();
    assert_eq!(b.get::<u32>(&[]).unwrap(), 0x1234_5678);
    let native = b.cast(&ty("uint32"), M::Inexact).unwrap();
    assert_eq!(native.to_bytes().unwrap(), 0x1234_5678u32.to_ne_bytes());
}

#[test]
#[cfg(target_endian = "little")]
fn contiguous_rows_of_the_other_byte_order_swap_every_element() {
    // Seven elements (not a multiple of a vector's width), aligned and one
    // byte off, into native order: each element's bytes reversed (the
    // big-endian bytes of a little-endian host's value).
    fn check<const Z: usize>(name: &str, native: [u8; Z], count: usize) {
        for offset in [0usize, 1] {
            let mut raw = vec![0u8; offset];
            let mut want = Vec::new();
            for i in 0..count {
                let mut e = native;
                e[0] = e[0].wrapping_add(i as u8);
                want.extend_from_slice(&e);
                raw.extend(e.iter().rev());
            }
            let block = MemoryBlock::from_owner(raw);
            let big = format!("big_endian[{name}]");
            let a = Array::from_block(&block, offset, ty(&big), &[count]).unwrap();
            let out = a.cast(&ty(name), M::None).unwrap();
            assert_eq!(out.to_bytes().unwrap(), want, "{name} at offset {offset}");
        }
    }
    check("uint16", 0x1234u16.to_ne_bytes(), 7);
    check("int32", (-5i32).to_ne_bytes(), 7);
    check("float32", 1.5f32.to_ne_bytes(), 7);
    check("float64", (-2.25f64).to_ne_bytes(), 7);
}

#[test]
fn casts_follow_as_semantics_and_error_modes() {
    let a = Array::from_slice(&[-1.5f64, 300.0, f64::NAN], &[3]).unwrap();
    let none = a.cast(&ty("uint8"), M::None).unwrap();
    assert_eq!(none.to_vec::<u8>().unwrap(), [0u8, 255, 0]);
    assert!(matches!(
        a.cast(&ty("uint8"), M::Overflow),
        Err(Error::Assign { .. })
    ));
    let ok = Array::from_slice(&[1.5f64, 2.0], &[2]).unwrap();
    assert_eq!(
        ok.cast(&ty("int8"), M::Overflow)
            .unwrap()
            .to_vec::<i8>()
            .unwrap(),
        [1, 2]
    );
    assert!(ok.cast(&ty("int8"), M::Fractional).is_err());
    let big = Array::from_slice(&[16_777_217i64], &[1]).unwrap();
    assert_eq!(
        big.cast(&ty("float32"), M::Fractional)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [16_777_216.0]
    );
    assert!(big.cast(&ty("float32"), M::Inexact).is_err());
    let c = Array::zeros(ty("complex64"), &[1]).unwrap();
    c.assign(&Array::scalar(2.0f64), M::Inexact).unwrap();
    assert_eq!(c.get_scalar(&[0]).unwrap(), Scalar::Complex(2.0, 0.0));
    let h = Array::from_slice(&[1.0f32, 65504.0, 1e6], &[3]).unwrap();
    assert_eq!(
        h.index(0)
            .unwrap()
            .cast(&ty("float16"), M::Inexact)
            .unwrap()
            .get::<half::f16>(&[])
            .unwrap()
            .to_f32(),
        1.0
    );
    assert!(h.cast(&ty("float16"), M::Overflow).is_err());
    assert_eq!(
        h.cast(&ty("bool"), M::None)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true, true, true]
    );
    assert!(h.cast(&ty("bool"), M::Overflow).is_err());
}

#[test]
fn assignment_broadcasts_and_handles_overlap() {
    let a = Array::from_slice(&[1i32, 2, 3, 4, 5], &[5]).unwrap();
    // Shift right by one within the same block.
    a.view(&[Index::slice(Some(1), None, 1)])
        .unwrap()
        .assign(&a.view(&[Index::slice(None, Some(4), 1)]).unwrap(), M::None)
        .unwrap();
    assert_eq!(a.to_vec::<i32>().unwrap(), [1, 1, 2, 3, 4]);
    let m = Array::zeros(ty("int16"), &[2, 3]).unwrap();
    m.assign(&Array::from_slice(&[7u8, 8, 9], &[3]).unwrap(), M::Inexact)
        .unwrap();
    assert_eq!(m.to_vec::<i16>().unwrap(), [7, 8, 9, 7, 8, 9]);
    assert!(matches!(
        m.assign(&Array::from_slice(&[1u8, 2], &[2]).unwrap(), M::None),
        Err(Error::Broadcast { .. })
    ));
    assert!(m.read_only().assign(&Array::scalar(1u8), M::None).is_err());
}

#[test]
fn strings_round_trip_and_transcode_with_errors() {
    let texts = ["This", "is", "unicode: é ☃"];
    let a = Array::from_strings(&texts, StringEncoding::Utf16).unwrap();
    assert_eq!(a.to_strings().unwrap(), texts);
    let pool = a.pool().unwrap();
    assert_eq!(pool.kind(), BlockKind::Pool);
    let utf32 = Array::zeros(Type::string(StringEncoding::Utf32), &[3]).unwrap();
    utf32.assign(&a, M::None).unwrap();
    assert_eq!(utf32.to_strings().unwrap(), texts);
    let ascii = Array::zeros(Type::string(StringEncoding::Ascii), &[3]).unwrap();
    assert!(matches!(ascii.assign(&a, M::None), Err(Error::Encoding(_))));
    let fixed = Array::zeros(ty("string[8, 'U16']"), &[2]).unwrap();
    fixed
        .assign(&a.view(&[Index::slice(None, Some(2), 1)]).unwrap(), M::None)
        .unwrap();
    assert_eq!(fixed.to_strings().unwrap(), ["This", "is"]);
    assert!(fixed.set_string(&[0], "too long!").is_err());
    let ucs2 = Array::zeros(Type::string(StringEncoding::Ucs2), &[1]).unwrap();
    assert!(ucs2.set_string(&[0], "😀").is_err());
    ucs2.set_string(&[0], "é").unwrap();
    assert_eq!(ucs2.get_string(&[0]).unwrap(), "é");
    assert!(a.read_only().set_string(&[0], "x").is_err());
}

#[test]
fn ragged_rows_live_in_a_finalized_pool() {
    let a = Array::from_ragged(&[vec![1u32, 2], vec![], vec![3, 4, 5]]).unwrap();
    assert_eq!(a.element_type(), &ty("var * uint32"));
    let row = a.index(2).unwrap().var_elements().unwrap();
    assert_eq!(row.to_vec::<u32>().unwrap(), [3, 4, 5]);
    assert!(row.block().is_frozen());
    assert_eq!(a.index(1).unwrap().var_elements().unwrap().len(), 0);
    assert_eq!(
        a.view(&[Index::at(2), Index::slice(None, None, -1)])
            .unwrap()
            .to_vec::<u32>()
            .unwrap(),
        [5, 4, 3]
    );
    drop(a);
    assert_eq!(row.get::<u32>(&[1]).unwrap(), 4);
}

#[test]
fn debug_repr_shows_structure() {
    let a = Array::from_slice(&[[1i32, 2, 3], [4, 5, 6]].concat(), &[2, 3]).unwrap();
    let text = a.debug_repr();
    for line in [
        " type: strided * strided * int32\n",
        "  flags: 3 (read_access write_access )\n",
        "   strided_dim metadata ($)\n    stride: 12\n    size: 2\n",
        "    strided_dim metadata ($[*])\n     stride: 4\n     size: 3\n",
        "(embedded in the block's own allocation)",
        "     type: embedded\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    let s = Array::from_strings(&["ab"], StringEncoding::Ascii).unwrap();
    let text = s.debug_repr();
    assert!(text.contains("string metadata ($[*])"), "{text}");
    assert!(text.contains("type: pool\n"), "{text}");
    assert!(text.contains("allocated: 2\n"), "{text}");
}

#[test]
fn constructors_validate_sizes() {
    assert!(matches!(
        Array::from_bytes(ty("int32"), &[3], vec![0; 11]),
        Err(Error::SizeMismatch {
            expected: 12,
            actual: 11,
            ..
        })
    ));
    assert!(Array::from_slice(&[1u8, 2, 3], &[2]).is_err());
    assert!(Array::zeros(ty("int8"), &[usize::MAX, 2]).is_err());
    let z = Array::zeros(ty("{x: int32, y: float64}"), &[0, 5]).unwrap();
    assert!(z.is_empty());
    let b = Array::from_bytes(Type::primitive(Primitive::UInt16), &[2], vec![1, 0, 2, 0]).unwrap();
    assert_eq!(
        b.to_vec::<u16>().unwrap(),
        [u16::from_le_bytes([1, 0]), u16::from_le_bytes([2, 0])]
    );
    assert!(b.get::<i16>(&[0]).is_err());
}

#[test]
fn threads_share_and_write_views() {
    let a = Array::zeros(ty("uint64"), &[64]).unwrap();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let v = a.view(&[Index::slice(Some(t as isize), None, 4)]).unwrap();
            s.spawn(move || {
                for i in 0..v.len() {
                    v.set(&[i], (t * 100 + i) as u64).unwrap();
                }
            });
        }
    });
    let all = a.to_vec::<u64>().unwrap();
    for (k, v) in all.iter().enumerate() {
        assert_eq!(*v, ((k % 4) * 100 + k / 4) as u64);
    }
}

#[test]
fn misaligned_fixed_strings_are_read_and_transcoded() {
    // Two `string[8, 'U32']` elements (2 characters each) at an odd
    // address inside a block.
    let mut bytes = vec![0u8; 1 + 16 + 7];
    let block_addr = bytes.as_ptr() as usize;
    let skip = if block_addr.is_multiple_of(2) { 1 } else { 2 };
    for (i, ch) in "hié".chars().chain(std::iter::once('z')).enumerate() {
        let at = skip + 4 * i;
        bytes[at..at + 4].copy_from_slice(&(ch as u32).to_ne_bytes());
    }
    let block = MemoryBlock::from_owner(bytes);
    let a = Array::from_block(&block, skip, ty("string[8, 'U32']"), &[2]).unwrap();
    assert_eq!(
        a.dtype().to_string(),
        "strided * unaligned[string[8, 'U32']]"
    );
    assert_eq!(a.to_strings().unwrap(), ["hi", "éz"]);
    let utf8 = a.cast(&ty("string[4, 'utf8']"), M::None).unwrap();
    assert_eq!(utf8.to_strings().unwrap(), ["hi", "éz"]);
    assert_eq!(utf8.to_bytes().unwrap(), b"hi\0\0\xc3\xa9z\0");
    let ascii = a.cast(&ty("string[4, 'ascii']"), M::None);
    assert!(matches!(ascii, Err(Error::Encoding(_))), "{ascii:?}");
}

#[test]
fn arrays_without_read_access_give_errors_not_data() {
    let a = Array::from_slice(&[1u8, 2, 3], &[3]).unwrap();
    let no_read = a.restricted(AccessFlags::WRITE);
    assert!(matches!(no_read.to_bytes(), Err(Error::NotWritable(_))));
    assert!(no_read.to_contiguous().is_err());
    assert!(no_read.cast(&ty("int32"), M::None).is_err());
}

#[test]
fn casts_round_once_and_complex_to_bool_sees_both_parts() {
    let big = (1i64 << 60) + (1 << 36) + 1;
    let a = Array::from_slice(&[big], &[1]).unwrap();
    assert_eq!(
        a.cast(&ty("float32"), M::None)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [1.152_921_6e18]
    );
    let tie = 3.120_117_187_5f64;
    let below = f64::from_bits(tie.to_bits() - 1);
    let h = Array::from_slice(&[below], &[1])
        .unwrap()
        .cast(&ty("float16"), M::None)
        .unwrap();
    assert_eq!(h.to_vec::<half::f16>().unwrap()[0].to_f64(), 3.119_140_625);
    let c = Array::zeros(ty("complex128"), &[2]).unwrap();
    c.index(1)
        .unwrap()
        .assign(&Array::scalar(1.0f64), M::None)
        .unwrap();
    let z = Array::zeros(ty("complex128"), &[1]).unwrap();
    // 0+1j: set the imaginary part through the raw bytes.
    let mut raw = vec![0u8; 16];
    raw[8..].copy_from_slice(&1f64.to_ne_bytes());
    let j = Array::from_bytes(ty("complex128"), &[1], raw).unwrap();
    assert_eq!(
        j.cast(&ty("bool"), M::None)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [true]
    );
    assert_eq!(
        z.cast(&ty("bool"), M::None)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false]
    );
    assert_eq!(
        c.cast(&ty("bool"), M::None)
            .unwrap()
            .to_vec::<bool>()
            .unwrap(),
        [false, true]
    );
}

#[test]
fn every_other_element_copies_at_every_length() {
    for len in 0..24usize {
        let values: Vec<u32> = (0..len as u32).map(|v| v * 3 + 1).collect();
        let a = Array::from_slice(&values, &[len]).unwrap();
        for start in [0isize, 1] {
            let v = a.view(&[Index::slice(Some(start), None, 2)]).unwrap();
            let want: Vec<u32> = values
                .iter()
                .skip(start as usize)
                .step_by(2)
                .copied()
                .collect();
            let copy = v.to_contiguous().unwrap();
            assert_eq!(
                copy.to_vec::<u32>().unwrap(),
                want,
                "len {len} start {start}"
            );
            let dst = Array::zeros(ty("uint32"), &[want.len()]).unwrap();
            dst.assign(&v, M::None).unwrap();
            assert_eq!(dst.to_vec::<u32>().unwrap(), want);
        }
    }
}
