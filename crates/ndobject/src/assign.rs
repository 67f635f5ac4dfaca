//! Assignment with casting between primitive types, under DyND-style
//! error modes, from any layout to any layout.

use dtype::{Primitive, PrimitiveKind, Type};

use crate::array::Array;
use crate::cast;
use crate::element::{Scalar, Storage};
use crate::error::{Error, Result};
use crate::kernel;

/// What a cast checks. Each mode includes the checks of the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AssignErrorMode {
    /// No checks: numpy's `casting='unsafe'` results bit for bit where
    /// numpy defines them (integers wrap, one rounding to nearest-even
    /// into floats, complex → real keeps the real part). Float → integer
    /// of NaN, infinities and out-of-range values, which numpy leaves to
    /// the platform, follows Rust's `as`: NaN gives 0, others saturate.
    None,
    /// Values out of the target's range are errors (also a non-zero
    /// imaginary part dropped by complex → real).
    Overflow,
    /// Also: a fractional part lost in float → integer. The default.
    #[default]
    Fractional,
    /// Also: any loss of precision (float narrowing, large integers to float).
    Inexact,
}

fn fail(value: Scalar, to: Primitive, reason: &'static str) -> Error {
    Error::Assign {
        value: value.to_string(),
        target: to.name().to_owned(),
        reason,
    }
}

fn int_range(p: Primitive) -> (i128, i128) {
    let bits = p.size() as u32 * 8;
    match p.kind() {
        PrimitiveKind::SignedInt => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        _ => (0, (1i128 << bits) - 1),
    }
}

fn from_int(v: i128, to: Primitive, mode: AssignErrorMode, orig: Scalar) -> Result<Scalar> {
    Ok(match to.kind() {
        PrimitiveKind::Bool => {
            if mode != AssignErrorMode::None && !(0..=1).contains(&v) {
                return Err(fail(orig, to, "overflow: bool takes 0 or 1"));
            }
            Scalar::Bool(v != 0)
        }
        PrimitiveKind::SignedInt | PrimitiveKind::UnsignedInt => {
            let (lo, hi) = int_range(to);
            if mode != AssignErrorMode::None && (v < lo || v > hi) {
                return Err(fail(orig, to, "overflow"));
            }
            // Wrap like Rust's `as` between integer types.
            let bits = to.size() as u32 * 8;
            let low = (v as u128) & (u128::MAX >> (128 - bits));
            if to.kind() == PrimitiveKind::SignedInt {
                let shift = 128 - bits;
                Scalar::Int((((low << shift) as i128) >> shift) as i64)
            } else {
                Scalar::UInt(low as u64)
            }
        }
        PrimitiveKind::Float | PrimitiveKind::Complex => {
            let narrowed = int_to_float(v, to);
            if mode == AssignErrorMode::Inexact && (narrowed as i128 != v || !narrowed.is_finite())
            {
                return Err(fail(orig, to, "inexact"));
            }
            if to.kind() == PrimitiveKind::Float {
                Scalar::Float(narrowed)
            } else {
                Scalar::Complex(narrowed, 0.0)
            }
        }
    })
}

/// The integer `v` rounded once to the float type (or complex part) `to`.
fn int_to_float(v: i128, to: Primitive) -> f64 {
    match to {
        Primitive::Float16 => cast::f16_from_f64(cast::f64_round_odd(v)).to_f64(),
        Primitive::BFloat16 => cast::bf16_from_f64(cast::f64_round_odd(v)).to_f64(),
        Primitive::Float32 | Primitive::Complex64 => f64::from(v as f32),
        _ => v as f64,
    }
}

/// The value `f` takes when stored as the float type (or complex part) `to`.
fn narrow_float(f: f64, to: Primitive) -> f64 {
    match to {
        Primitive::Float16 => cast::f16_from_f64(f).to_f64(),
        Primitive::BFloat16 => cast::bf16_from_f64(f).to_f64(),
        Primitive::Float32 | Primitive::Complex64 => f64::from(f as f32),
        _ => f,
    }
}

fn from_float(f: f64, to: Primitive, mode: AssignErrorMode, orig: Scalar) -> Result<Scalar> {
    use AssignErrorMode as M;
    Ok(match to.kind() {
        PrimitiveKind::Bool => {
            if mode != M::None && f != 0.0 && f != 1.0 {
                return Err(fail(orig, to, "overflow: bool takes 0 or 1"));
            }
            Scalar::Bool(f != 0.0)
        }
        PrimitiveKind::SignedInt | PrimitiveKind::UnsignedInt => {
            if mode != M::None {
                let (lo, hi) = int_range(to);
                let t = f.trunc();
                if !f.is_finite() || t < lo as f64 || t > hi as f64 {
                    return Err(fail(orig, to, "overflow"));
                }
                if mode != M::Overflow && t != f {
                    return Err(fail(orig, to, "fractional part lost"));
                }
            }
            if to.kind() == PrimitiveKind::SignedInt {
                let v = match to {
                    Primitive::Int8 => i64::from(f as i8),
                    Primitive::Int16 => i64::from(f as i16),
                    Primitive::Int32 => i64::from(f as i32),
                    _ => f as i64,
                };
                Scalar::Int(v)
            } else {
                let v = match to {
                    Primitive::UInt8 => u64::from(f as u8),
                    Primitive::UInt16 => u64::from(f as u16),
                    Primitive::UInt32 => u64::from(f as u32),
                    _ => f as u64,
                };
                Scalar::UInt(v)
            }
        }
        PrimitiveKind::Float | PrimitiveKind::Complex => {
            let n = narrow_float(f, to);
            if mode != M::None && f.is_finite() && !n.is_finite() {
                return Err(fail(orig, to, "overflow"));
            }
            if mode == M::Inexact && n != f && !(f.is_nan() && n.is_nan()) {
                return Err(fail(orig, to, "inexact"));
            }
            if to.kind() == PrimitiveKind::Float {
                Scalar::Float(n)
            } else {
                Scalar::Complex(n, 0.0)
            }
        }
    })
}

/// Converts `value` to primitive `to` under `mode`.
///
/// ```
/// use dtype::Primitive;
/// use ndobject::{AssignErrorMode as M, Scalar, convert};
/// assert_eq!(convert(Scalar::Int(300), Primitive::UInt8, M::None)?, Scalar::UInt(44));
/// assert!(convert(Scalar::Int(300), Primitive::UInt8, M::Overflow).is_err());
/// assert_eq!(convert(Scalar::Float(2.5), Primitive::Int32, M::Overflow)?, Scalar::Int(2));
/// assert!(convert(Scalar::Float(2.5), Primitive::Int32, M::Fractional).is_err());
/// assert!(convert(Scalar::Float(0.1), Primitive::Float32, M::Inexact).is_err());
/// # Ok::<(), ndobject::Error>(())
/// ```
pub fn convert(value: Scalar, to: Primitive, mode: AssignErrorMode) -> Result<Scalar> {
    match value {
        Scalar::Bool(b) => from_int(i128::from(b), to, mode, value),
        Scalar::Int(v) => from_int(i128::from(v), to, mode, value),
        Scalar::UInt(v) => from_int(i128::from(v), to, mode, value),
        Scalar::Float(f) => from_float(f, to, mode, value),
        Scalar::Complex(re, im) => {
            if to.kind() == PrimitiveKind::Complex {
                let (r, i) = (narrow_float(re, to), narrow_float(im, to));
                if mode != AssignErrorMode::None
                    && ((re.is_finite() && !r.is_finite()) || (im.is_finite() && !i.is_finite()))
                {
                    return Err(fail(value, to, "overflow"));
                }
                if mode == AssignErrorMode::Inexact
                    && ((r != re && !re.is_nan()) || (i != im && !im.is_nan()))
                {
                    return Err(fail(value, to, "inexact"));
                }
                return Ok(Scalar::Complex(r, i));
            }
            if mode != AssignErrorMode::None && im != 0.0 {
                return Err(fail(value, to, "overflow: non-zero imaginary part"));
            }
            if to == Primitive::Bool {
                // True when either part is non-zero, as numpy and DyND.
                return Ok(Scalar::Bool(re != 0.0 || im != 0.0));
            }
            from_float(re, to, mode, value)
        }
    }
}

/// Broadcasts `src_shape` against `dst_shape` (numpy rules, trailing
/// dimensions aligned): the source strides to use for each destination dimension.
fn broadcast_strides(src: &Array, dst_shape: &[usize]) -> Result<Vec<isize>> {
    let err = || Error::Broadcast {
        from: src.shape().to_vec(),
        to: dst_shape.to_vec(),
    };
    if src.ndim() > dst_shape.len() {
        return Err(err());
    }
    let lead = dst_shape.len() - src.ndim();
    let mut out = vec![0isize; dst_shape.len()];
    for (d, (n, s)) in src.shape().iter().zip(src.strides()).enumerate() {
        if *n == dst_shape[lead + d] {
            out[lead + d] = *s;
        } else if *n != 1 {
            return Err(err());
        }
    }
    Ok(out)
}

impl Array {
    /// Assigns `src` to this array element by element, converting types
    /// under `mode`; `src` broadcasts (a 0-dimensional `src` fills the
    /// array). Source and destination may overlap.
    ///
    /// ```
    /// use ndobject::{Array, AssignErrorMode, Index};
    /// let a = Array::zeros("float64".parse().unwrap(), &[2, 3])?;
    /// a.assign(&Array::scalar(7i32), AssignErrorMode::Inexact)?;
    /// let b = Array::from_slice(&[1u8, 2, 3], &[3])?;
    /// a.index(1)?.assign(&b.view(&[Index::slice(None, None, -1)])?, AssignErrorMode::None)?;
    /// assert_eq!(a.to_vec::<f64>()?, [7.0, 7.0, 7.0, 3.0, 2.0, 1.0]);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn assign(&self, src: &Array, mode: AssignErrorMode) -> Result<()> {
        let src_strides = broadcast_strides(src, &self.shape)?;
        let string_like = |t: &Type| crate::strings::string_encoding(t).is_some();
        if string_like(&self.element) && string_like(&src.element) {
            return self.assign_strings(src, &src_strides);
        }
        if self.block.ptr_eq(&src.block) {
            // Source and destination may overlap: read the source first.
            return self.assign(&src.to_contiguous()?, mode);
        }
        kernel::assign(self, src, &src_strides, mode)
    }

    /// A new array of element type `to` holding this array's values,
    /// converted under `mode`.
    pub fn cast(&self, to: &Type, mode: AssignErrorMode) -> Result<Array> {
        if Storage::of(to).is_none() || Storage::of(&self.element).is_none() {
            let out = Array::zeros(to.clone(), &self.shape)?;
            out.assign(self, mode)?;
            return Ok(out);
        }
        // SAFETY: both element types are primitives (checked above), so
        // `out` is C-contiguous plain data filling its block, and the
        // kernel writes every element of it (its checks fail before any
        // write); on error `out` is dropped unread.
        let out = unsafe { Array::alloc_for_overwrite(to.clone(), &self.shape, Vec::new())? };
        kernel::assign(&out, self, &self.strides, mode)?;
        Ok(out)
    }
}
