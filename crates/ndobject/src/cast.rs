//! Exact conversions between the primitive types, one function per
//! (source, destination) pair after monomorphisation, with numpy's
//! `casting='unsafe'` results wherever numpy defines them.
//!
//! The rules ([`Prim::cast`]):
//!
//! * integer → integer wraps (two's complement), as Rust's `as` and numpy;
//! * integer → float and float → narrower float round **once**, to nearest
//!   with ties to even. Rust's `as` does this for `f32`/`f64` targets;
//!   `float16` and `bfloat16` targets go through a round-to-odd `f32`
//!   (24 bits, more than twice their 11 and 8 plus two), which makes the
//!   final rounding exact. (`half`'s own `f64` conversions drop the low 32
//!   mantissa bits first, or round through `f32`, and so round twice.)
//! * float → integer truncates toward zero. NaN, infinities and values
//!   whose truncation is outside the target's range are platform-defined
//!   in numpy (x86 gives the "integer indefinite" `0x80…0` pattern, wrapped
//!   to the target's width); here they follow Rust's `as`: NaN gives 0, and
//!   out-of-range values saturate to the target's minimum or maximum.
//! * anything → `bool` is "not zero" (NaN is not zero; a complex value is
//!   true when either part is non-zero); `bool` → anything is 0 or 1;
//! * complex → real takes the real part; real → complex has imaginary 0.

use half::{bf16, f16};

/// `bool` as stored: one byte, any value (non-zero reads as true). Reading
/// a byte as Rust `bool` would be undefined for values other than 0 and 1.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct B8(pub(crate) u8);

/// `complex64`: two `f32`, real first.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(C)]
pub(crate) struct C32(pub(crate) f32, pub(crate) f32);

/// `complex128`: two `f64`, real first.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(C)]
pub(crate) struct C64(pub(crate) f64, pub(crate) f64);

/// `f32` nearest to `x` with ties broken toward an odd last bit ("round to
/// odd"): rounding this again to a format of at most 22 bits gives the
/// correctly rounded result of `x`.
pub(crate) fn f32_round_odd(x: f64) -> f32 {
    let f = x as f32;
    if x.is_nan() {
        return f;
    }
    let f = if f.is_infinite() && x.is_finite() {
        f32::MAX.copysign(f)
    } else {
        f
    };
    if f64::from(f) == x || f.to_bits() & 1 == 1 {
        return f;
    }
    if f64::from(f) < x {
        f.next_up()
    } else {
        f.next_down()
    }
}

/// `f64` nearest to `v` with ties toward an odd last bit (see
/// [`f32_round_odd`]); exact for `|v| < 2^53`.
pub(crate) fn f64_round_odd(v: i128) -> f64 {
    let f = v as f64;
    // |v| < 2^127, so `f` is finite and `f as i128` exact.
    if f as i128 == v || f.to_bits() & 1 == 1 {
        return f;
    }
    if (f as i128) < v {
        f.next_up()
    } else {
        f.next_down()
    }
}

/// `x` rounded once to `float16`.
pub(crate) fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_odd(x))
}

/// `x` rounded once to `bfloat16`.
pub(crate) fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_odd(x))
}

/// A primitive as the kernels see it: a plain value type, valid for every
/// bit pattern (so slices of it may be formed over any aligned bytes).
pub(crate) trait Prim: Copy + Default + Send + Sync + 'static {
    /// The value with its bytes reversed per swap unit (each part of a
    /// complex number on its own). Bit-exact, NaN payloads included.
    fn swap(self) -> Self;
    /// This value converted to `D` (see the module docs).
    fn cast<D: Prim>(self) -> D;
    /// From a `bool`.
    fn from_bool(v: bool) -> Self;
    /// From any signed integer (widened exactly).
    fn from_i64(v: i64) -> Self;
    /// From any unsigned integer (widened exactly).
    fn from_u64(v: u64) -> Self;
    /// From `f32` (also `float16` and `bfloat16`, widened exactly).
    fn from_f32(v: f32) -> Self;
    /// From `f64`.
    fn from_f64(v: f64) -> Self;
    /// From `complex64`.
    fn from_c32(v: C32) -> Self;
    /// From `complex128`.
    fn from_c64(v: C64) -> Self;
}

/// The destination methods of an integer type.
macro_rules! int_dest {
    ($t:ty) => {
        fn from_bool(v: bool) -> Self {
            <$t>::from(v)
        }
        fn from_i64(v: i64) -> Self {
            v as $t
        }
        fn from_u64(v: u64) -> Self {
            v as $t
        }
        fn from_f32(v: f32) -> Self {
            v as $t
        }
        fn from_f64(v: f64) -> Self {
            v as $t
        }
        fn from_c32(v: C32) -> Self {
            v.0 as $t
        }
        fn from_c64(v: C64) -> Self {
            v.0 as $t
        }
    };
}

macro_rules! int_prim {
    ($t:ty, $via:ident, $wide:ty) => {
        impl Prim for $t {
            #[inline(always)]
            fn swap(self) -> Self {
                self.swap_bytes()
            }
            #[inline(always)]
            fn cast<D: Prim>(self) -> D {
                D::$via(self as $wide)
            }
            int_dest!($t);
        }
    };
}

int_prim!(i8, from_i64, i64);
int_prim!(i16, from_i64, i64);
int_prim!(i32, from_i64, i64);
int_prim!(i64, from_i64, i64);
int_prim!(u8, from_u64, u64);
int_prim!(u16, from_u64, u64);
int_prim!(u32, from_u64, u64);
int_prim!(u64, from_u64, u64);

impl Prim for B8 {
    fn swap(self) -> Self {
        self
    }
    #[inline(always)]
    fn cast<D: Prim>(self) -> D {
        D::from_bool(self.0 != 0)
    }
    fn from_bool(v: bool) -> Self {
        B8(u8::from(v))
    }
    fn from_i64(v: i64) -> Self {
        B8(u8::from(v != 0))
    }
    fn from_u64(v: u64) -> Self {
        B8(u8::from(v != 0))
    }
    fn from_f32(v: f32) -> Self {
        B8(u8::from(v != 0.0))
    }
    fn from_f64(v: f64) -> Self {
        B8(u8::from(v != 0.0))
    }
    fn from_c32(v: C32) -> Self {
        B8(u8::from(v.0 != 0.0 || v.1 != 0.0))
    }
    fn from_c64(v: C64) -> Self {
        B8(u8::from(v.0 != 0.0 || v.1 != 0.0))
    }
}

impl Prim for f32 {
    #[inline(always)]
    fn swap(self) -> Self {
        f32::from_bits(self.to_bits().swap_bytes())
    }
    #[inline(always)]
    fn cast<D: Prim>(self) -> D {
        D::from_f32(self)
    }
    fn from_bool(v: bool) -> Self {
        f32::from(u8::from(v))
    }
    fn from_i64(v: i64) -> Self {
        v as f32
    }
    fn from_u64(v: u64) -> Self {
        v as f32
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_c32(v: C32) -> Self {
        v.0
    }
    fn from_c64(v: C64) -> Self {
        v.0 as f32
    }
}

impl Prim for f64 {
    #[inline(always)]
    fn swap(self) -> Self {
        f64::from_bits(self.to_bits().swap_bytes())
    }
    #[inline(always)]
    fn cast<D: Prim>(self) -> D {
        D::from_f64(self)
    }
    fn from_bool(v: bool) -> Self {
        f64::from(u8::from(v))
    }
    fn from_i64(v: i64) -> Self {
        v as f64
    }
    fn from_u64(v: u64) -> Self {
        v as f64
    }
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
    fn from_f64(v: f64) -> Self {
        v
    }
    fn from_c32(v: C32) -> Self {
        f64::from(v.0)
    }
    fn from_c64(v: C64) -> Self {
        v.0
    }
}

macro_rules! half_prim {
    ($t:ty, $from64:ident) => {
        impl Prim for $t {
            #[inline(always)]
            fn swap(self) -> Self {
                <$t>::from_bits(self.to_bits().swap_bytes())
            }
            #[inline(always)]
            fn cast<D: Prim>(self) -> D {
                D::from_f32(self.to_f32())
            }
            fn from_bool(v: bool) -> Self {
                if v { <$t>::ONE } else { <$t>::ZERO }
            }
            fn from_i64(v: i64) -> Self {
                $from64(f64_round_odd(i128::from(v)))
            }
            fn from_u64(v: u64) -> Self {
                $from64(f64_round_odd(i128::from(v)))
            }
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn from_f64(v: f64) -> Self {
                $from64(v)
            }
            fn from_c32(v: C32) -> Self {
                <$t>::from_f32(v.0)
            }
            fn from_c64(v: C64) -> Self {
                $from64(v.0)
            }
        }
    };
}

half_prim!(f16, f16_from_f64);
half_prim!(bf16, bf16_from_f64);

impl Prim for C32 {
    #[inline(always)]
    fn swap(self) -> Self {
        C32(self.0.swap(), self.1.swap())
    }
    #[inline(always)]
    fn cast<D: Prim>(self) -> D {
        D::from_c32(self)
    }
    fn from_bool(v: bool) -> Self {
        C32(f32::from_bool(v), 0.0)
    }
    fn from_i64(v: i64) -> Self {
        C32(v as f32, 0.0)
    }
    fn from_u64(v: u64) -> Self {
        C32(v as f32, 0.0)
    }
    fn from_f32(v: f32) -> Self {
        C32(v, 0.0)
    }
    fn from_f64(v: f64) -> Self {
        C32(v as f32, 0.0)
    }
    fn from_c32(v: C32) -> Self {
        v
    }
    fn from_c64(v: C64) -> Self {
        C32(v.0 as f32, v.1 as f32)
    }
}

impl Prim for C64 {
    #[inline(always)]
    fn swap(self) -> Self {
        C64(self.0.swap(), self.1.swap())
    }
    #[inline(always)]
    fn cast<D: Prim>(self) -> D {
        D::from_c64(self)
    }
    fn from_bool(v: bool) -> Self {
        C64(f64::from_bool(v), 0.0)
    }
    fn from_i64(v: i64) -> Self {
        C64(v as f64, 0.0)
    }
    fn from_u64(v: u64) -> Self {
        C64(v as f64, 0.0)
    }
    fn from_f32(v: f32) -> Self {
        C64(f64::from(v), 0.0)
    }
    fn from_f64(v: f64) -> Self {
        C64(v, 0.0)
    }
    fn from_c32(v: C32) -> Self {
        C64(f64::from(v.0), f64::from(v.1))
    }
    fn from_c64(v: C64) -> Self {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_integers_round_once_to_f32() {
        let v: i64 = (1 << 60) + (1 << 36) + 1;
        let got: f32 = v.cast();
        assert_eq!(got, 1.152_921_6e18);
        let c: C32 = v.cast();
        assert_eq!(c, C32(1.152_921_6e18, 0.0));
        let u: f32 = ((1u64 << 63) + (1 << 39) + 1).cast();
        assert_eq!(u, ((1u64 << 63) + (1 << 40)) as f32);
    }

    #[test]
    fn f64_rounds_once_to_f16_and_bf16() {
        let tie = 3.120_117_187_5f64; // halfway between two float16 values
        let below = f64::from_bits(tie.to_bits() - 1);
        let above = f64::from_bits(tie.to_bits() + 1);
        assert_eq!(below.cast::<f16>().to_f64(), 3.119_140_625);
        assert_eq!(above.cast::<f16>().to_f64(), 3.121_093_75);
        assert_eq!(tie.cast::<f16>().to_f64(), 3.121_093_75, "ties to even");
        // bfloat16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
        let tie = 1.0 + 2f64.powi(-8);
        let above = tie + 2f64.powi(-40);
        assert_eq!(above.cast::<bf16>().to_f64(), 1.0 + 2f64.powi(-7));
        assert_eq!(tie.cast::<bf16>().to_f64(), 1.0);
        assert!(f64::NAN.cast::<f16>().is_nan());
        assert_eq!(1e300.cast::<f16>(), f16::INFINITY);
        assert_eq!((-1e300).cast::<bf16>(), bf16::NEG_INFINITY);
        assert_eq!(1e-300.cast::<f16>(), f16::ZERO);
    }

    #[test]
    fn integers_round_once_to_f16() {
        // 2049 is halfway between the float16 values 2048 and 2050.
        assert_eq!(2049i64.cast::<f16>().to_f64(), 2048.0);
        assert_eq!(2051u64.cast::<f16>().to_f64(), 2052.0);
        assert_eq!(i64::MAX.cast::<f16>(), f16::INFINITY);
        // 2^60 + 2^52 + 1 is just above a bfloat16 tie (2^60 + 2^52).
        let v = (1i64 << 60) + (1 << 52) + 1;
        assert_eq!(v.cast::<bf16>().to_f64(), ((1i64 << 60) + (1 << 53)) as f64);
    }

    #[test]
    fn bool_and_complex_rules() {
        assert_eq!(C64(0.0, 1.0).cast::<B8>(), B8(1));
        assert_eq!(C32(0.0, -0.0).cast::<B8>(), B8(0));
        assert_eq!(f64::NAN.cast::<B8>(), B8(1));
        assert_eq!(B8(7).cast::<i32>(), 1);
        assert_eq!(C64(2.5, 9.0).cast::<i8>(), 2);
        assert_eq!(300i64.cast::<u8>(), 44);
        assert_eq!((-1i8).cast::<u64>(), u64::MAX);
        assert_eq!(f64::NAN.cast::<i32>(), 0);
        assert_eq!(1e20f64.cast::<i16>(), i16::MAX);
    }

    #[test]
    fn swaps_are_bit_exact() {
        let nan = f32::from_bits(0x7fa0_0001);
        assert_eq!(nan.swap().swap().to_bits(), 0x7fa0_0001);
        assert_eq!(
            C32(1.0, 2.0).swap().0.to_bits(),
            1f32.to_bits().swap_bytes()
        );
        assert_eq!(0x0102i16.swap(), 0x0201);
    }
}
