//! Typed assignment kernels, as DyND's: one monomorphised row function per
//! (source, destination) primitive pair, selected once per call and run
//! over rows of the coalesced iteration space.
//!
//! * Same primitive and byte order: a byte copy (one `memcpy` per row when
//!   both rows are contiguous).
//! * Same primitive, other byte order: a bit-exact swap per element.
//! * Different primitives: a conversion loop over slices when both rows are
//!   contiguous, aligned and native (vectorisable), otherwise element by
//!   element with unaligned loads and stores and swaps as needed.
//!
//! No allocation grows with the array: rows are walked with an index per
//! dimension. Checked modes make one validating pass over the source
//! first ([`crate::convert`] per element), so a failed assignment leaves
//! the destination untouched.

use std::ptr::NonNull;

use dtype::{Primitive, PrimitiveKind};
use half::{bf16, f16};

use crate::array::Array;
use crate::assign::{AssignErrorMode, convert};
use crate::cast::{B8, C32, C64, Prim};
use crate::error::Result;
use crate::shape::coalesce;

/// Byte swaps to apply on the way in and out.
#[derive(Clone, Copy)]
struct Swap {
    src: bool,
    dst: bool,
}

/// Converts one row: `n` elements `ss` bytes apart from `src` into `n`
/// elements `ds` bytes apart from `dst`.
type RowFn = unsafe fn(*const u8, isize, *mut u8, isize, usize, Swap);

/// # Safety
///
/// Every element `src + i * ss` (`i < n`) must be readable and every
/// `dst + i * ds` writable for the element sizes, the two ranges must not
/// overlap, and no other thread may write either range meanwhile.
unsafe fn row_cast<S: Prim, D: Prim>(
    src: *const u8,
    ss: isize,
    dst: *mut u8,
    ds: isize,
    n: usize,
    swap: Swap,
) {
    let (zs, zd) = (size_of::<S>() as isize, size_of::<D>() as isize);
    if !swap.src
        && !swap.dst
        && ss == zs
        && ds == zd
        && (src as usize).is_multiple_of(align_of::<S>())
        && (dst as usize).is_multiple_of(align_of::<D>())
    {
        // SAFETY: both rows are contiguous and aligned for their element
        // types (checked), valid and disjoint (caller); `Prim` types are
        // valid for every bit pattern.
        let (from, to) = unsafe {
            (
                std::slice::from_raw_parts(src.cast::<S>(), n),
                std::slice::from_raw_parts_mut(dst.cast::<D>(), n),
            )
        };
        for (t, f) in to.iter_mut().zip(from) {
            *t = f.cast();
        }
        return;
    }
    for i in 0..n as isize {
        // SAFETY: element `i` of each row is in bounds (caller); unaligned
        // accesses are used because the rows may be `unaligned[T]`.
        unsafe {
            let mut v = src.offset(i * ss).cast::<S>().read_unaligned();
            if swap.src {
                v = v.swap();
            }
            let mut d: D = v.cast();
            if swap.dst {
                d = d.swap();
            }
            dst.offset(i * ds).cast::<D>().write_unaligned(d);
        }
    }
}

/// A row of one primitive into the same primitive: bytes are copied (and
/// swapped when the byte orders differ), bit for bit.
///
/// # Safety
///
/// As for [`row_cast`].
unsafe fn row_copy<T: Prim>(
    src: *const u8,
    ss: isize,
    dst: *mut u8,
    ds: isize,
    n: usize,
    swap: Swap,
) {
    let z = size_of::<T>() as isize;
    let swapped = swap.src != swap.dst;
    if !swapped && ss == z && ds == z {
        // SAFETY: contiguous, in bounds and disjoint (caller).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n * z as usize) };
        return;
    }
    if ss == z && ds == z {
        // Contiguous rows of the other byte order: the same swap with a
        // stride the compiler knows, so it can swap many elements an
        // instruction (1M `float32`, `ndobject/copy_f32/byteswapped`:
        // 114 µs, was 334 µs element by element; numpy 2.4: 86 µs).
        let (s, d) = (src.cast::<T>(), dst.cast::<T>());
        for i in 0..n {
            // SAFETY: as in `row_cast`; element `i` of each contiguous row
            // is in bounds (caller), read and written unaligned.
            unsafe { d.add(i).write_unaligned(s.add(i).read_unaligned().swap()) };
        }
        return;
    }
    for i in 0..n as isize {
        // SAFETY: as in `row_cast`.
        unsafe {
            let v = src.offset(i * ss).cast::<T>().read_unaligned();
            let v = if swapped { v.swap() } else { v };
            dst.offset(i * ds).cast::<T>().write_unaligned(v);
        }
    }
}

macro_rules! with_prim {
    ($p:expr, $mac:ident ! ($($arg:tt)*)) => {
        match $p {
            Primitive::Bool => $mac!($($arg)* B8),
            Primitive::Int8 => $mac!($($arg)* i8),
            Primitive::Int16 => $mac!($($arg)* i16),
            Primitive::Int32 => $mac!($($arg)* i32),
            Primitive::Int64 => $mac!($($arg)* i64),
            Primitive::UInt8 => $mac!($($arg)* u8),
            Primitive::UInt16 => $mac!($($arg)* u16),
            Primitive::UInt32 => $mac!($($arg)* u32),
            Primitive::UInt64 => $mac!($($arg)* u64),
            Primitive::Float16 => $mac!($($arg)* f16),
            Primitive::BFloat16 => $mac!($($arg)* bf16),
            Primitive::Float32 => $mac!($($arg)* f32),
            Primitive::Float64 => $mac!($($arg)* f64),
            Primitive::Complex64 => $mac!($($arg)* C32),
            Primitive::Complex128 => $mac!($($arg)* C64),
        }
    };
}

macro_rules! cast_fn {
    ($s:ty, $d:ty) => {
        row_cast::<$s, $d> as RowFn
    };
}
macro_rules! cast_from {
    ($d:expr, $s:ty) => {
        with_prim!($d, cast_fn!($s,))
    };
}
macro_rules! copy_fn {
    ($t:ty) => {
        row_copy::<$t> as RowFn
    };
}

/// The row function for `from` → `to`.
fn row_fn(from: Primitive, to: Primitive) -> RowFn {
    if from == to {
        return with_prim!(from, copy_fn!());
    }
    with_prim!(from, cast_from!(to,))
}

/// Significand bits a float type holds exactly (with the implicit bit).
fn float_bits(p: Primitive) -> u32 {
    match p {
        Primitive::Float16 => 11,
        Primitive::BFloat16 => 8,
        Primitive::Float32 | Primitive::Complex64 => 24,
        _ => 53,
    }
}

/// Whether every value of `from` converts to `to` exactly, so that no
/// mode can report an error and checking can be skipped.
fn lossless(from: Primitive, to: Primitive) -> bool {
    use PrimitiveKind as K;
    let bits = |p: Primitive| p.size() as u32 * 8;
    match (from.kind(), to.kind()) {
        _ if from == to => true,
        (K::Bool, _) => true,
        (K::SignedInt, K::SignedInt) | (K::UnsignedInt, K::UnsignedInt) => bits(to) >= bits(from),
        (K::UnsignedInt, K::SignedInt) => bits(to) > bits(from),
        (K::SignedInt, K::Float | K::Complex) => float_bits(to) >= bits(from) - 1,
        (K::UnsignedInt, K::Float | K::Complex) => float_bits(to) >= bits(from),
        (K::Float | K::Complex, K::Float | K::Complex) => {
            if from.kind() == K::Complex && to.kind() != K::Complex {
                return false;
            }
            let part = |p: Primitive| match p {
                Primitive::Complex64 => Primitive::Float32,
                Primitive::Complex128 => Primitive::Float64,
                p => p,
            };
            let (a, b) = (part(from), part(to));
            a == b
                || matches!(
                    (a, b),
                    (
                        Primitive::Float16 | Primitive::BFloat16,
                        Primitive::Float32 | Primitive::Float64
                    ) | (Primitive::Float32, Primitive::Float64)
                )
        }
        _ => false,
    }
}

/// Calls `row(dst_offset, src_offset)` for every row of `dims` (all but
/// the last dimension), from the given starting offsets.
fn for_each_row(
    dims: &[(usize, isize, isize)],
    dst0: isize,
    src0: isize,
    mut row: impl FnMut(isize, isize),
) {
    let outer = &dims[..dims.len().saturating_sub(1)];
    let mut idx = vec![0usize; outer.len()];
    let (mut d, mut s) = (dst0, src0);
    loop {
        row(d, s);
        // Step the odometer from the innermost outer dimension.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let (n, ds, ss) = outer[k];
            idx[k] += 1;
            d += ds;
            s += ss;
            if idx[k] < n {
                break;
            }
            idx[k] = 0;
            d -= n as isize * ds;
            s -= n as isize * ss;
        }
    }
}

/// Assigns `src` (seen with `src_strides`, broadcast to `dst`'s shape) to
/// `dst`, both of primitive element types, in different blocks.
pub(crate) fn assign(
    dst: &Array,
    src: &Array,
    src_strides: &[isize],
    mode: AssignErrorMode,
) -> Result<()> {
    let (dst_st, src_st) = (dst.storage()?, src.storage()?);
    let dims = coalesce(dst.shape(), dst.strides(), src_strides);
    if dst.is_empty() {
        return Ok(());
    }
    let (n, ds, ss) = dims.last().copied().unwrap_or((1, 0, 0));
    let (from, to) = (src_st.primitive, dst_st.primitive);
    let (dst_off, src_off) = (dst.byte_offset() as isize, src.byte_offset() as isize);
    if mode != AssignErrorMode::None && !lossless(from, to) {
        src.with_read(|base| {
            let mut result = Ok(());
            let size = from.size();
            for_each_row(&dims, dst_off, src_off, |_, s| {
                for i in 0..n as isize {
                    if result.is_err() {
                        return;
                    }
                    let mut buf = [0u8; 16];
                    // SAFETY: the element lies inside the source block
                    // (checked when the view was built; broadcasting only
                    // repeats elements); we hold its read guard.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            base.as_ptr().offset(s + i * ss),
                            buf.as_mut_ptr(),
                            size,
                        )
                    };
                    result = convert(src_st.decode(&buf), to, mode).map(drop);
                }
            });
            result
        })??;
    }
    let row = row_fn(from, to);
    let swap = Swap {
        src: src_st.swapped,
        dst: dst_st.swapped,
    };
    Array::with_read_write(src, dst, |sb: NonNull<u8>, db: NonNull<u8>| {
        for_each_row(&dims, dst_off, src_off, |d, s| {
            // SAFETY: every row of either array lies inside its block
            // (checked when the views were built); the blocks differ, so
            // the rows do not overlap; we hold the source's read guard and
            // the destination's write guard.
            unsafe {
                row(
                    sb.as_ptr().offset(s),
                    ss,
                    db.as_ptr().offset(d),
                    ds,
                    n,
                    swap,
                )
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_visited_in_c_order() {
        let mut seen = Vec::new();
        for_each_row(&[(2, 100, -1), (3, 10, 1), (4, 1, 1)], 0, 50, |d, s| {
            seen.push((d, s))
        });
        assert_eq!(
            seen,
            [(0, 50), (10, 51), (20, 52), (100, 49), (110, 50), (120, 51)]
        );
    }

    #[test]
    fn lossless_pairs() {
        use Primitive as P;
        assert!(lossless(P::Float32, P::Float64));
        assert!(lossless(P::Int16, P::Float32));
        assert!(!lossless(P::Int32, P::Float32));
        assert!(lossless(P::UInt8, P::Float16));
        assert!(!lossless(P::Int16, P::Float16));
        assert!(lossless(P::UInt32, P::Int64));
        assert!(!lossless(P::Int8, P::UInt64));
        assert!(lossless(P::Float32, P::Complex64));
        assert!(!lossless(P::Float64, P::Complex64));
        assert!(!lossless(P::Complex64, P::Float32));
        assert!(lossless(P::Bool, P::Float16));
    }
}
