//! `var` dimensions: ragged rows in a pool, dereferenced when leading and
//! sliced through their metadata otherwise (DyND's `var_dim` model).

use dtype::{Type, TypeKind};

use crate::array::Array;
use crate::block::MemoryBlock;
use crate::element::{Element, Storage};
use crate::error::{Error, Result};
use crate::flags::AccessFlags;
use crate::index::{Index, checked_position, resolve_slice, too_many_indices};
use crate::meta::{Meta, RowSlice, VarMeta};

/// One dimension of an element type below the array's strided dimensions,
/// while indices are applied to it.
enum Link {
    Var(VarMeta),
    /// A fixed dimension: size and the byte size of its element.
    Fixed {
        size: usize,
        stride: usize,
    },
    Strided {
        size: usize,
        stride: isize,
    },
    /// Removed by an integer index.
    Removed,
}

impl Array {
    /// The row of a 0-dimensional `var * T` array: a view of `T` into the
    /// (finalized, so immutable) pool that holds it, with the dimension's
    /// slices applied. A `T` with fixed dimensions gives more dimensions.
    ///
    /// ```
    /// use ndobject::Array;
    /// let rows = [Array::from_slice(&[1u8, 2, 3, 4], &[2, 2])?, Array::from_slice(&[5u8, 6], &[1, 2])?];
    /// let a = Array::from_ragged_arrays(&rows)?;
    /// assert_eq!(a.dtype().to_string(), "strided * var * 2 * uint8");
    /// let row = a.index(0)?.var_elements()?;
    /// assert_eq!((row.shape(), row.to_vec::<u8>()?), (&[2, 2][..], vec![1, 2, 3, 4]));
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn var_elements(&self) -> Result<Array> {
        let TypeKind::VarDim(inner) = self.element.kind() else {
            return Err(Error::TypeMismatch(format!(
                "{} is not a var dimension",
                self.element
            )));
        };
        if !self.shape.is_empty() {
            return Err(Error::InvalidIndex(
                "var_elements needs a 0-dimensional array".into(),
            ));
        }
        let Some(Meta::Var(var)) = self.meta.first() else {
            return Err(Error::Pool("missing for a var dimension"));
        };
        let (start, count) = self.read_pair(self.offset)?;
        let bad = || Error::OutOfBlock {
            offset: start as usize,
            len: count as usize,
            block_len: var.block.len(),
        };
        let start = usize::try_from(start).map_err(|_| bad())?;
        let count = usize::try_from(count).map_err(|_| bad())?;
        let (first, n, step) = var.resolve(count)?;
        let offset = isize::try_from(first)
            .ok()
            .and_then(|f| f.checked_mul(var.stride))
            .and_then(|f| f.checked_add(var.offset))
            .and_then(|f| start.checked_add_signed(f))
            .ok_or_else(bad)?;
        let stride = if n > 1 { var.stride * step } else { var.stride };
        Array::build(
            var.block.clone(),
            offset,
            inner.clone(),
            vec![n],
            vec![stride],
            // A finalized pool never changes.
            AccessFlags::READ_IMMUTABLE,
            self.meta[1..].to_vec(),
        )
    }

    /// Applies `indices` to the dimensions of the element type, below the
    /// (kept) strided dimensions: the view differs only in its element
    /// type and metadata. `total` is the number of indices of the whole
    /// request, for errors.
    pub(crate) fn nested_view(&self, indices: &[Index], total: usize) -> Result<Array> {
        let mut links = Vec::new();
        let mut ty = &self.element;
        let mut used = 0;
        loop {
            let (link, inner) = match (ty.kind(), self.meta.get(used)) {
                (TypeKind::VarDim(inner), Some(Meta::Var(v))) => (Link::Var(v.clone()), inner),
                (TypeKind::FixedDim { size, element }, _) => {
                    let stride = element.data_size().unwrap_or(0);
                    ty = element;
                    links.push(Link::Fixed {
                        size: *size,
                        stride,
                    });
                    continue;
                }
                (TypeKind::StridedDim(inner), Some(Meta::Strided { size, stride })) => (
                    Link::Strided {
                        size: *size,
                        stride: *stride,
                    },
                    inner,
                ),
                _ => break,
            };
            links.push(link);
            used += 1;
            ty = inner;
        }
        if indices.len() > links.len() {
            return Err(too_many_indices(total, self));
        }
        // The `var` dimension whose elements the current dimension lies in:
        // offsets within an element go to its metadata.
        let mut enclosing = None;
        for (k, index) in indices.iter().enumerate() {
            let dim = self.shape.len() + k;
            let (size, stride) = match (&mut links[k], *index) {
                (Link::Var(_), Index::At(_)) => {
                    return Err(Error::InvalidIndex(format!(
                        "an integer index into the var dimension {dim}, below a kept dimension, \
                         would not give a strided view; index the rows one at a time"
                    )));
                }
                (Link::Var(v), Index::Slice { start, stop, step }) => {
                    if step == 0 {
                        return Err(Error::InvalidIndex("slice step cannot be zero".into()));
                    }
                    v.slices.push(RowSlice { start, stop, step });
                    enclosing = Some(k);
                    continue;
                }
                (Link::Fixed { size, stride }, _) => (*size, *stride as isize),
                (Link::Strided { size, stride }, _) => (*size, *stride),
                // Each dimension takes one index, so none is removed yet.
                (Link::Removed, _) => return Err(too_many_indices(total, self)),
            };
            let (delta, link) = match *index {
                Index::At(i) => (
                    checked_position(i, dim, size)? as isize * stride,
                    Link::Removed,
                ),
                Index::Slice { start, stop, step } => {
                    let (first, count, step) = resolve_slice(start, stop, step, size)?;
                    let kept = if count > 1 { stride * step } else { stride };
                    (
                        first as isize * stride,
                        Link::Strided {
                            size: count,
                            stride: kept,
                        },
                    )
                }
            };
            links[k] = link;
            match enclosing.map(|e| &mut links[e]) {
                Some(Link::Var(v)) => v.offset += delta,
                _ => return Err(too_many_indices(total, self)),
            }
        }
        // Rebuild the element type bottom-up; a fixed dimension whose
        // element changed size becomes strided.
        let mut element = ty.clone();
        let mut strided = vec![false; links.len()];
        for (k, link) in links.iter().enumerate().rev() {
            element = match link {
                Link::Removed => element,
                Link::Var(_) => Type::var_dim(element),
                Link::Fixed { size, stride } if element.data_size() == Some(*stride) => {
                    Type::fixed_dim(*size, element)
                        .map_err(|e| Error::TypeMismatch(e.to_string()))?
                }
                Link::Fixed { .. } | Link::Strided { .. } => {
                    strided[k] = true;
                    Type::strided_dim(element)
                }
            };
        }
        let mut meta = Vec::with_capacity(self.meta.len());
        for (link, strided) in links.into_iter().zip(strided) {
            match link {
                Link::Var(v) => meta.push(Meta::Var(v)),
                Link::Fixed { size, stride } if strided => meta.push(Meta::Strided {
                    size,
                    stride: stride as isize,
                }),
                Link::Strided { size, stride } => meta.push(Meta::Strided { size, stride }),
                Link::Fixed { .. } | Link::Removed => {}
            }
        }
        meta.extend_from_slice(&self.meta[used..]);
        Array::checked(
            self.block.clone(),
            self.offset,
            element,
            self.shape.clone(),
            self.strides.clone(),
            self.flags,
            meta,
        )
    }

    /// A 1-dimensional array of ragged rows: element type `var * T`, the
    /// values held in a finalized pool.
    ///
    /// ```
    /// use ndobject::Array;
    /// let a = Array::from_ragged(&[vec![1i16, 2, 3], vec![], vec![4]])?;
    /// assert_eq!(a.dtype().to_string(), "strided * var * int16");
    /// assert_eq!(a.index(0)?.var_elements()?.to_vec::<i16>()?, [1, 2, 3]);
    /// assert_eq!(a.view(&[2.into(), 0.into()])?.get::<i16>(&[])?, 4);
    /// # Ok::<(), ndobject::Error>(())
    /// ```
    pub fn from_ragged<T: Element>(rows: &[Vec<T>]) -> Result<Array> {
        let inner = Type::primitive(T::PRIMITIVE);
        let st = Storage::of(&inner)
            .ok_or_else(|| Error::TypeMismatch(format!("{inner} is not primitive")))?;
        let size = T::PRIMITIVE.size();
        let bytes = rows.iter().map(|row| {
            let mut bytes = vec![0u8; row.len() * size];
            for (chunk, v) in bytes.chunks_exact_mut(size).zip(row) {
                st.encode(v.to_scalar(), chunk);
            }
            (bytes, row.len())
        });
        Array::ragged(inner, rows.len(), bytes)
    }

    /// A 1-dimensional array of ragged rows copied from arrays of at least
    /// one dimension: row `i` holds `rows[i]`'s elements. All rows have the
    /// same plain-data element type and the same trailing dimensions,
    /// which become fixed dimensions: rows of shapes `[k, 3]` of `int32`
    /// give `strided * var * 3 * int32`.
    pub fn from_ragged_arrays(rows: &[Array]) -> Result<Array> {
        let first = rows.first().ok_or_else(|| {
            Error::TypeMismatch("no rows to take the element type from; use Array::zeros".into())
        })?;
        let element = match first.element.kind() {
            TypeKind::Unaligned(inner) => inner.clone(),
            _ => first.element.clone(),
        };
        let trailing = first.shape.get(1..).unwrap_or_default();
        for row in rows {
            let row_element = match row.element.kind() {
                TypeKind::Unaligned(inner) => inner,
                _ => &row.element,
            };
            if !row_element.is_pod()
                || *row_element != element
                || row.shape.is_empty()
                || row.shape[1..] != *trailing
            {
                return Err(Error::TypeMismatch(format!(
                    "rows must be arrays of plain data of one type and trailing shape: {} of {element} \
                     with trailing shape {trailing:?}",
                    row.dtype()
                )));
            }
        }
        let inner = trailing.iter().rev().try_fold(element, |t, n| {
            Type::fixed_dim(*n, t).map_err(|e| Error::TypeMismatch(e.to_string()))
        })?;
        let bytes = rows
            .iter()
            .map(|row| Ok((row.to_bytes()?, row.shape[0])))
            .collect::<Result<Vec<_>>>()?;
        Array::ragged(inner, rows.len(), bytes.into_iter())
    }

    /// `rows` `(bytes, count)` of `inner` elements into a new pool, and the
    /// array of their `(offset, count)` pairs.
    fn ragged(
        inner: Type,
        n: usize,
        rows: impl Iterator<Item = (Vec<u8>, usize)>,
    ) -> Result<Array> {
        let pool = MemoryBlock::pool();
        let mut pairs = Vec::with_capacity(n * 16);
        for (bytes, count) in rows {
            let start = pool.pool_append(&bytes, inner.alignment())?;
            pairs.extend_from_slice(&start.to_ne_bytes());
            pairs.extend_from_slice(&(count as u64).to_ne_bytes());
        }
        pool.pool_finalize()?;
        let size = inner.data_size().unwrap_or(0);
        let var = VarMeta::new(pool, size)?;
        let a = Array::alloc(Type::var_dim(inner), &[n], vec![Meta::Var(var)])?;
        a.with_write(|base| {
            // SAFETY: the array is C-contiguous over `n` 16-byte elements,
            // exactly `pairs.len()` bytes; we hold the write guard.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    pairs.as_ptr(),
                    base.as_ptr().add(a.offset),
                    pairs.len(),
                )
            }
        })?;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use dtype::Type;

    use crate::{AccessFlags, Array, Error, Index};

    fn ty(s: &str) -> Type {
        s.parse().unwrap()
    }

    fn row(a: &Array) -> Vec<i32> {
        a.var_elements().unwrap().to_vec::<i32>().unwrap()
    }

    #[test]
    fn leading_var_dimensions_are_dereferenced() {
        // 3 * var * int32
        let a = Array::from_ragged(&[vec![1i32, 2, 3], vec![], vec![4, 5]]).unwrap();
        let r = a.index(2).unwrap();
        assert_eq!(r.dtype(), ty("var * int32"));
        assert_eq!(r.index(1).unwrap().get::<i32>(&[]).unwrap(), 5);
        assert_eq!(r.index(-2).unwrap().get::<i32>(&[]).unwrap(), 4);
        assert_eq!(
            a.index(0).unwrap().index(5).unwrap_err(),
            Error::IndexOutOfRange {
                index: 5,
                dim: 0,
                size: 3
            }
        );
        assert!(matches!(
            a.view(&[1.into(), 0.into()]),
            Err(Error::IndexOutOfRange { size: 0, .. })
        ));
        let rows = r.var_elements().unwrap();
        assert_eq!(rows.flags(), AccessFlags::READ_IMMUTABLE);
        assert!(rows.block().ptr_eq(a.metadata_blocks()[0]));
        assert!(matches!(
            a.view(&[0.into(), 0.into(), 0.into()]),
            Err(Error::InvalidIndex(_))
        ));
    }

    #[test]
    fn fixed_dimensions_below_and_above_var() {
        // var * 2 * int32, rows of 2 and 1 pairs.
        let rows = [
            Array::from_slice(&[1i32, 2, 3, 4], &[2, 2]).unwrap(),
            Array::from_slice(&[5i32, 6], &[1, 2]).unwrap(),
        ];
        let a = Array::from_ragged_arrays(&rows).unwrap();
        assert_eq!(a.dtype(), ty("strided * var * 2 * int32"));
        let r0 = a.index(0).unwrap();
        assert_eq!(r0.dtype(), ty("var * 2 * int32"));
        assert_eq!(
            r0.view(&[1.into(), 0.into()])
                .unwrap()
                .get::<i32>(&[])
                .unwrap(),
            3
        );
        // Second column of every pair, in every row: offset 4 in the metadata.
        let col = a.view(&[Index::all(), Index::all(), Index::at(1)]).unwrap();
        assert_eq!(col.dtype(), ty("strided * var * int32"));
        assert_eq!(row(&col.index(0).unwrap()), [2, 4]);
        assert_eq!(row(&col.index(1).unwrap()), [6]);
        assert!(
            col.debug_repr()
                .contains("     stride: 8\n     offset: 4\n"),
            "{}",
            col.debug_repr()
        );
        // A fixed dimension sliced below a var dimension becomes strided.
        let rev = a
            .view(&[Index::all(), Index::all(), Index::slice(None, None, -1)])
            .unwrap();
        assert_eq!(rev.dtype(), ty("strided * var * strided * int32"));
        let r = rev.index(0).unwrap().var_elements().unwrap();
        assert_eq!((r.shape(), r.strides()), (&[2, 2][..], &[8, -4][..]));
        assert_eq!(r.to_vec::<i32>().unwrap(), [2, 1, 4, 3]);
        // Zeros of a type with leading fixed dimensions.
        let z = Array::zeros(ty("3 * var * int32"), &[2]).unwrap();
        assert_eq!(z.shape(), [2, 3]);
        assert_eq!(z.dtype(), ty("strided * strided * var * int32"));
        assert_eq!(
            z.view(&[1.into(), 2.into()]).unwrap().dtype(),
            ty("var * int32")
        );
        assert_eq!(
            z.view(&[1.into(), 2.into()])
                .unwrap()
                .var_elements()
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn slices_of_inner_var_dimensions_apply_to_every_row() {
        let a = Array::from_ragged(&[vec![1i32, 2, 3, 4], vec![5], vec![6, 7]]).unwrap();
        let tail = a
            .view(&[Index::slice(None, None, -1), Index::slice(Some(1), None, 1)])
            .unwrap();
        assert_eq!(tail.dtype(), ty("strided * var * int32"));
        assert!(tail.block().ptr_eq(a.block()));
        assert!(
            tail.debug_repr().contains("row slices: [1::1]"),
            "{}",
            tail.debug_repr()
        );
        assert_eq!(row(&tail.index(0).unwrap()), [7]);
        assert_eq!(row(&tail.index(1).unwrap()), Vec::<i32>::new());
        assert_eq!(row(&tail.index(2).unwrap()), [2, 3, 4]);
        // Slices compose, and apply again once the row is reached.
        let twice = tail
            .view(&[Index::all(), Index::slice(None, None, -2)])
            .unwrap();
        assert_eq!(row(&twice.index(2).unwrap()), [4, 2]);
        assert_eq!(
            twice
                .view(&[2.into(), (-1).into()])
                .unwrap()
                .get::<i32>(&[])
                .unwrap(),
            2
        );
        assert!(matches!(
            twice.view(&[1.into(), 0.into()]),
            Err(Error::IndexOutOfRange { size: 0, .. })
        ));
        // An integer into a var dimension below a kept dimension is an error.
        assert!(matches!(
            a.view(&[Index::all(), Index::at(0)]),
            Err(Error::InvalidIndex(_))
        ));
        assert!(matches!(
            a.view(&[Index::all(), Index::slice(None, None, 0)]),
            Err(Error::InvalidIndex(_))
        ));
        // A contiguous copy keeps the row metadata.
        let copy = twice.to_contiguous().unwrap();
        assert_eq!(row(&copy.index(2).unwrap()), [4, 2]);
    }

    #[test]
    fn every_var_and_string_entry_has_its_own_block() {
        let a = Array::zeros(ty("{a: var * int8, b: string, c: var * var * int8}"), &[1]).unwrap();
        let blocks = a.metadata_blocks();
        assert_eq!(blocks.len(), 4);
        for (i, x) in blocks.iter().enumerate() {
            assert!(blocks[i + 1..].iter().all(|y| !x.ptr_eq(y)));
        }
        assert!(a.pool().unwrap().ptr_eq(blocks[0]));
        let nested = Array::zeros(ty("var * var * int16"), &[]).unwrap();
        assert_eq!(nested.metadata_blocks().len(), 2);
        let inner = nested.var_elements().unwrap();
        assert_eq!(inner.dtype(), ty("strided * var * int16"));
        assert_eq!(inner.metadata_blocks().len(), 1);
        assert!(inner.metadata_blocks()[0].ptr_eq(nested.metadata_blocks()[1]));
        assert!(
            Array::zeros(ty("var * int8"), &[2])
                .unwrap()
                .debug_repr()
                .contains("var_dim metadata ($[*])")
        );
    }
}
