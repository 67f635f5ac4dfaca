//! Reading and writing one primitive element at any address, in any byte
//! order, and the Rust types that map to primitives.

use dtype::{Endianness, Primitive, Type, TypeKind};
use half::{bf16, f16};

/// A primitive value, widened losslessly for conversion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// `bool`.
    Bool(bool),
    /// Any signed integer.
    Int(i64),
    /// Any unsigned integer.
    UInt(u64),
    /// Any real float (float16, bfloat16 and float32 widen exactly).
    Float(f64),
    /// Any complex value (real, imaginary).
    Complex(f64, f64),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v:?}"),
            Scalar::Complex(re, im) => write!(f, "({re:?}{im:+?}j)"),
        }
    }
}

/// How a scalar type is stored: its primitive and whether its bytes are
/// swapped relative to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Storage {
    pub(crate) primitive: Primitive,
    pub(crate) swapped: bool,
}

impl Storage {
    /// The storage of a scalar type seen through `unaligned[...]` and byte order.
    pub(crate) fn of(ty: &Type) -> Option<Storage> {
        match ty.kind() {
            TypeKind::Primitive(p) => Some(Storage {
                primitive: *p,
                swapped: false,
            }),
            TypeKind::NonNative { primitive, order } => Some(Storage {
                primitive: *primitive,
                swapped: *order != Endianness::NATIVE,
            }),
            TypeKind::Unaligned(inner) => Storage::of(inner),
            _ => None,
        }
    }

    fn fix_order(self, bytes: &mut [u8]) {
        if self.swapped {
            let unit = self.primitive.swap_unit();
            for chunk in bytes.chunks_mut(unit) {
                chunk.reverse();
            }
        }
    }

    /// Decodes an element from its stored bytes.
    pub(crate) fn decode(self, raw: &[u8]) -> Scalar {
        let mut b = [0u8; 16];
        let n = self.primitive.size();
        b[..n].copy_from_slice(&raw[..n]);
        self.fix_order(&mut b[..n]);
        let a2 = [b[0], b[1]];
        let a4 = [b[0], b[1], b[2], b[3]];
        let a8 = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        let hi8 = [b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]];
        match self.primitive {
            Primitive::Bool => Scalar::Bool(b[0] != 0),
            Primitive::Int8 => Scalar::Int(i64::from(b[0] as i8)),
            Primitive::Int16 => Scalar::Int(i64::from(i16::from_ne_bytes(a2))),
            Primitive::Int32 => Scalar::Int(i64::from(i32::from_ne_bytes(a4))),
            Primitive::Int64 => Scalar::Int(i64::from_ne_bytes(a8)),
            Primitive::UInt8 => Scalar::UInt(u64::from(b[0])),
            Primitive::UInt16 => Scalar::UInt(u64::from(u16::from_ne_bytes(a2))),
            Primitive::UInt32 => Scalar::UInt(u64::from(u32::from_ne_bytes(a4))),
            Primitive::UInt64 => Scalar::UInt(u64::from_ne_bytes(a8)),
            Primitive::Float16 => Scalar::Float(f16::from_ne_bytes(a2).to_f64()),
            Primitive::BFloat16 => Scalar::Float(bf16::from_ne_bytes(a2).to_f64()),
            Primitive::Float32 => Scalar::Float(f64::from(f32::from_ne_bytes(a4))),
            Primitive::Float64 => Scalar::Float(f64::from_ne_bytes(a8)),
            Primitive::Complex64 => Scalar::Complex(
                f64::from(f32::from_ne_bytes(a4)),
                f64::from(f32::from_ne_bytes([b[4], b[5], b[6], b[7]])),
            ),
            Primitive::Complex128 => {
                Scalar::Complex(f64::from_ne_bytes(a8), f64::from_ne_bytes(hi8))
            }
        }
    }

    /// Encodes a value already converted to this primitive (see
    /// [`crate::assign::convert`]) into its stored bytes.
    pub(crate) fn encode(self, value: Scalar, out: &mut [u8]) {
        let n = self.primitive.size();
        let mut b = [0u8; 16];
        match (self.primitive, value) {
            (Primitive::Bool, Scalar::Bool(v)) => b[0] = u8::from(v),
            (Primitive::Int8, Scalar::Int(v)) => b[0] = v as i8 as u8,
            (Primitive::Int16, Scalar::Int(v)) => b[..2].copy_from_slice(&(v as i16).to_ne_bytes()),
            (Primitive::Int32, Scalar::Int(v)) => b[..4].copy_from_slice(&(v as i32).to_ne_bytes()),
            (Primitive::Int64, Scalar::Int(v)) => b[..8].copy_from_slice(&v.to_ne_bytes()),
            (Primitive::UInt8, Scalar::UInt(v)) => b[0] = v as u8,
            (Primitive::UInt16, Scalar::UInt(v)) => {
                b[..2].copy_from_slice(&(v as u16).to_ne_bytes())
            }
            (Primitive::UInt32, Scalar::UInt(v)) => {
                b[..4].copy_from_slice(&(v as u32).to_ne_bytes())
            }
            (Primitive::UInt64, Scalar::UInt(v)) => b[..8].copy_from_slice(&v.to_ne_bytes()),
            (Primitive::Float16, Scalar::Float(v)) => {
                b[..2].copy_from_slice(&f16::from_f64(v).to_ne_bytes())
            }
            (Primitive::BFloat16, Scalar::Float(v)) => {
                b[..2].copy_from_slice(&bf16::from_f64(v).to_ne_bytes())
            }
            (Primitive::Float32, Scalar::Float(v)) => {
                b[..4].copy_from_slice(&(v as f32).to_ne_bytes())
            }
            (Primitive::Float64, Scalar::Float(v)) => b[..8].copy_from_slice(&v.to_ne_bytes()),
            (Primitive::Complex64, Scalar::Complex(re, im)) => {
                b[..4].copy_from_slice(&(re as f32).to_ne_bytes());
                b[4..8].copy_from_slice(&(im as f32).to_ne_bytes());
            }
            (Primitive::Complex128, Scalar::Complex(re, im)) => {
                b[..8].copy_from_slice(&re.to_ne_bytes());
                b[8..16].copy_from_slice(&im.to_ne_bytes());
            }
            // `convert` always produces the variant that matches the
            // primitive; anything else encodes as zero bytes.
            _ => {}
        }
        self.fix_order(&mut b[..n]);
        out[..n].copy_from_slice(&b[..n]);
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the native, aligned representation of a primitive.
/// Implemented for `bool`, the integers, `f32`, `f64`, `half::f16` and
/// `half::bf16`.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The primitive this type represents.
    const PRIMITIVE: Primitive;
    /// Converts from the widened value (exact for values of this type).
    fn from_scalar(s: Scalar) -> Self;
    /// Widens to a [`Scalar`].
    fn to_scalar(self) -> Scalar;
}

macro_rules! element {
    ($t:ty, $p:ident, $variant:ident, $wide:ty) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const PRIMITIVE: Primitive = Primitive::$p;
            fn from_scalar(s: Scalar) -> $t {
                match s {
                    Scalar::$variant(v) => v as $t,
                    _ => <$t>::default(),
                }
            }
            fn to_scalar(self) -> Scalar {
                Scalar::$variant(self as $wide)
            }
        }
    };
}

element!(i8, Int8, Int, i64);
element!(i16, Int16, Int, i64);
element!(i32, Int32, Int, i64);
element!(i64, Int64, Int, i64);
element!(u8, UInt8, UInt, u64);
element!(u16, UInt16, UInt, u64);
element!(u32, UInt32, UInt, u64);
element!(u64, UInt64, UInt, u64);
element!(f32, Float32, Float, f64);
element!(f64, Float64, Float, f64);

impl sealed::Sealed for bool {}
impl Element for bool {
    const PRIMITIVE: Primitive = Primitive::Bool;
    fn from_scalar(s: Scalar) -> bool {
        matches!(s, Scalar::Bool(true))
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
}

impl sealed::Sealed for f16 {}
impl Element for f16 {
    const PRIMITIVE: Primitive = Primitive::Float16;
    fn from_scalar(s: Scalar) -> f16 {
        match s {
            Scalar::Float(v) => f16::from_f64(v),
            _ => f16::ZERO,
        }
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
}

impl sealed::Sealed for bf16 {}
impl Element for bf16 {
    const PRIMITIVE: Primitive = Primitive::BFloat16;
    fn from_scalar(s: Scalar) -> bf16 {
        match s {
            Scalar::Float(v) => bf16::from_f64(v),
            _ => bf16::ZERO,
        }
    }
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
}
