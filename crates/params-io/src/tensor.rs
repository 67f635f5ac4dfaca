//! [`Tensor`], a typed dense byte buffer in an `ndobject` [`MemoryBlock`]
//! (one block per file or map, shared by its tensors, or one of its own),
//! and [`ParamDict`], the ordered collection of named tensors a parameter
//! file holds.

use std::borrow::Cow;
use std::fmt;

use dtype::dlpack::DLDataType;
use dtype::{Endianness, Primitive, Type};
use ndobject::MemoryBlock;

use crate::error::Error;
use crate::format::{dl_type_of, primitive_of};

/// A dense, C-order tensor of one primitive element type.
///
/// The bytes are in the file's order, little-endian (the native order on
/// the hosts this crate is tested on), and live in a read-only `ndobject`
/// [`MemoryBlock`]: the block of a whole memory-mapped or in-memory file,
/// shared by all its tensors, or a block of the tensor's own. One owner
/// abstraction for every source of bytes, so [`Tensor::to_array`] is O(1)
/// either way. A tensor is cheap to clone: clones share the block.
#[derive(Clone)]
pub struct Tensor {
    dl: DLDataType,
    primitive: Primitive,
    shape: Vec<usize>,
    block: MemoryBlock,
    offset: usize,
    len: usize,
}

/// Number of elements of a shape, or `None` on overflow:
/// `ndobject::shape::element_count`, the one rule of the workspace (a zero
/// dimension makes the count 0 however large the others are).
pub(crate) fn element_count(shape: &[usize]) -> Option<usize> {
    ndobject::shape::element_count(shape).ok()
}

fn expected_len(p: Primitive, shape: &[usize]) -> Option<usize> {
    ndobject::shape::byte_size(shape, p.size()).ok()
}

impl Tensor {
    /// A tensor owning `data`: `shape` elements of `primitive`, C order,
    /// little-endian. The length must be exactly elements x element size.
    ///
    /// ```
    /// use dtype::Primitive;
    /// use params_io::Tensor;
    /// let t = Tensor::new(Primitive::Int16, &[2], vec![1, 0, 2, 0])?;
    /// assert_eq!(t.len(), 2);
    /// assert!(Tensor::new(Primitive::Int16, &[2], vec![1, 0, 2]).is_err());
    /// # Ok::<(), params_io::Error>(())
    /// ```
    pub fn new(primitive: Primitive, shape: &[usize], data: Vec<u8>) -> Result<Tensor, Error> {
        let expected = expected_len(primitive, shape).ok_or(Error::DataLength {
            found: data.len(),
            expected: u64::MAX,
        })?;
        if data.len() != expected {
            return Err(Error::DataLength {
                found: data.len(),
                expected: expected as u64,
            });
        }
        let len = data.len();
        Ok(Tensor {
            dl: dl_type_of(primitive),
            primitive,
            shape: shape.to_vec(),
            block: MemoryBlock::from_owner(data),
            offset: 0,
            len,
        })
    }

    /// A zero-copy view of `block[offset..]` (e.g. the block of a mapped
    /// file); checks that the bytes are there and that the block is
    /// read-only (a tensor's bytes never change).
    pub fn from_block(
        block: MemoryBlock,
        offset: usize,
        primitive: Primitive,
        shape: &[usize],
    ) -> Result<Tensor, Error> {
        let available = block.len();
        let len = expected_len(primitive, shape).ok_or(Error::DataLength {
            found: available,
            expected: u64::MAX,
        })?;
        if offset.checked_add(len).is_none_or(|end| end > available) {
            return Err(Error::DataLength {
                found: available.saturating_sub(offset),
                expected: len as u64,
            });
        }
        if block.bytes().is_none() {
            return Err(Error::WritableBlock);
        }
        Ok(Tensor {
            dl: dl_type_of(primitive),
            primitive,
            shape: shape.to_vec(),
            block,
            offset,
            len,
        })
    }

    /// Sets the tag without checking it against the element type.
    pub(crate) fn with_dl_unchecked(mut self, dl: DLDataType) -> Tensor {
        self.dl = dl;
        self
    }

    /// The same tensor recorded with another type tag of the same element
    /// type, e.g. [`LEGACY_BOOL`](crate::format::LEGACY_BOOL) `(1, 1, 1)`
    /// for a `bool` tensor that TVM older than 0.25 must read.
    pub fn with_dl_type(self, dl: DLDataType) -> Result<Tensor, Error> {
        match primitive_of(dl) {
            Ok(p) if p == self.primitive => Ok(self.with_dl_unchecked(dl)),
            _ => Err(Error::Unwritable {
                name: String::new(),
                reason: format!(
                    "tag (code {}, bits {}, lanes {}) does not describe {}",
                    dl.code, dl.bits, dl.lanes, self.primitive
                ),
            }),
        }
    }

    /// The element type.
    pub fn primitive(&self) -> Primitive {
        self.primitive
    }

    /// The DLPack type tag (as read from the file, or the canonical one).
    pub fn dl_type(&self) -> DLDataType {
        self.dl
    }

    /// The element type as a `dtype::Type` in the data's byte order
    /// (little-endian, which prints as the bare primitive on such hosts).
    pub fn element_type(&self) -> Type {
        Type::with_byte_order(self.primitive, Endianness::Little)
    }

    /// The whole type as datashape, e.g. `2 * 3 * float32`.
    pub fn datashape(&self) -> String {
        datashape(&self.shape, self.primitive)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        element_count(&self.shape).unwrap_or(0)
    }

    /// Whether the tensor has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of data.
    pub fn nbytes(&self) -> usize {
        self.data().len()
    }

    /// The element bytes, C order, little-endian.
    pub fn data(&self) -> &[u8] {
        // `from_block` and `new` checked the range and that the block is
        // read-only, which it stays.
        self.block
            .bytes()
            .and_then(|b| b.get(self.offset..self.offset + self.len))
            .unwrap_or_default()
    }

    /// Whether the data sits at an address aligned for the element type.
    pub fn is_aligned(&self) -> bool {
        (self.data().as_ptr() as usize).is_multiple_of(self.primitive.alignment())
    }

    /// Whether the tensor is a window into a larger block (a file or a
    /// map), rather than a block of its own.
    pub fn is_view(&self) -> bool {
        self.offset != 0 || self.block.len() != self.len
    }

    /// The memory block holding the data, and the data's offset in it.
    pub fn block(&self) -> (&MemoryBlock, usize) {
        (&self.block, self.offset)
    }

    /// A copy of the data in a block of its own (no longer tied to the
    /// file or map).
    pub fn to_owned_copy(&self) -> Tensor {
        Tensor {
            dl: self.dl,
            primitive: self.primitive,
            shape: self.shape.clone(),
            block: MemoryBlock::from_owner(self.data().to_vec()),
            offset: 0,
            len: self.len,
        }
    }

    /// The data as a vector (a copy: the block may be shared).
    pub fn into_bytes(self) -> Vec<u8> {
        self.data().to_vec()
    }
}

/// Datashape text of a dense array: `2 * 3 * float32`, or `int8` for a scalar.
pub fn datashape(shape: &[usize], primitive: Primitive) -> String {
    let mut s = String::new();
    for d in shape {
        s.push_str(&format!("{d} * "));
    }
    s.push_str(primitive.name());
    s
}

/// Equal when element type, shape and bytes are equal (the tag of a
/// legacy bool does not matter).
impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.primitive == other.primitive
            && self.shape == other.shape
            && self.data() == other.data()
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("type", &self.datashape())
            .field("dl", &(self.dl.code, self.dl.bits, self.dl.lanes))
            .field("nbytes", &self.nbytes())
            .field("view", &self.is_view())
            .finish()
    }
}

/// A named tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    name: Vec<u8>,
    tensor: Tensor,
}

impl Param {
    /// The name's bytes.
    pub fn name_bytes(&self) -> &[u8] {
        &self.name
    }

    /// The name, if it is UTF-8 (always, unless raw names were read).
    pub fn name_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.name).ok()
    }

    /// The name, with invalid UTF-8 replaced by U+FFFD.
    pub fn name(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.name)
    }

    /// The tensor.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// Splits into name bytes and tensor.
    pub fn into_parts(self) -> (Vec<u8>, Tensor) {
        (self.name, self.tensor)
    }
}

/// An ordered collection of uniquely named tensors: what a parameter file
/// holds. Order is insertion (file) order, which writers keep.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamDict {
    params: Vec<Param>,
}

impl ParamDict {
    /// An empty dictionary.
    pub fn new() -> ParamDict {
        ParamDict::default()
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether there is no tensor.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The entries in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Param> {
        self.params.iter()
    }

    /// The entries as a slice.
    pub fn as_slice(&self) -> &[Param] {
        &self.params
    }

    /// The tensor of a name.
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&Tensor> {
        let name = name.as_ref();
        self.params
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.tensor)
    }

    /// Position of a name.
    pub fn position(&self, name: impl AsRef<[u8]>) -> Option<usize> {
        let name = name.as_ref();
        self.params.iter().position(|p| p.name == name)
    }

    /// Inserts a tensor. A new name goes to the end; an existing name keeps
    /// its position and gets the new tensor (the old one is returned), as
    /// TVM's map does.
    pub fn insert(&mut self, name: impl Into<Vec<u8>>, tensor: Tensor) -> Option<Tensor> {
        let name = name.into();
        match self.position(&name) {
            Some(i) => Some(std::mem::replace(&mut self.params[i].tensor, tensor)),
            None => {
                self.params.push(Param { name, tensor });
                None
            }
        }
    }

    /// Appends without looking for an existing entry (the caller knows the
    /// name is new).
    pub(crate) fn push_unchecked(&mut self, name: Vec<u8>, tensor: Tensor) {
        self.params.push(Param { name, tensor });
    }

    /// Removes a name, keeping the order of the others.
    pub fn remove(&mut self, name: impl AsRef<[u8]>) -> Option<Tensor> {
        let i = self.position(name)?;
        Some(self.params.remove(i).tensor)
    }

    /// The names in order (lossily decoded).
    pub fn names(&self) -> impl Iterator<Item = Cow<'_, str>> {
        self.params.iter().map(Param::name)
    }

    /// Total bytes of tensor data.
    pub fn data_bytes(&self) -> u64 {
        self.params.iter().map(|p| p.tensor.nbytes() as u64).sum()
    }
}

impl<'a> IntoIterator for &'a ParamDict {
    type Item = &'a Param;
    type IntoIter = std::slice::Iter<'a, Param>;
    fn into_iter(self) -> Self::IntoIter {
        self.params.iter()
    }
}

impl IntoIterator for ParamDict {
    type Item = Param;
    type IntoIter = std::vec::IntoIter<Param>;
    fn into_iter(self) -> Self::IntoIter {
        self.params.into_iter()
    }
}

impl<N: Into<Vec<u8>>> FromIterator<(N, Tensor)> for ParamDict {
    /// Collects pairs; a repeated name replaces the earlier value in place.
    fn from_iter<I: IntoIterator<Item = (N, Tensor)>>(iter: I) -> ParamDict {
        let mut d = ParamDict::new();
        for (n, t) in iter {
            d.insert(n, t);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[u8]) -> Tensor {
        Tensor::new(Primitive::UInt8, &[v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn tensor_checks_length_and_reports_shape() {
        let x = Tensor::new(Primitive::Float32, &[2, 3], vec![0; 24]).unwrap();
        assert_eq!(x.len(), 6);
        assert_eq!(x.nbytes(), 24);
        assert_eq!(x.datashape(), "2 * 3 * float32");
        assert_eq!(x.element_type().to_string(), "float32");
        assert!(matches!(
            Tensor::new(Primitive::Float32, &[2, 3], vec![0; 23]),
            Err(Error::DataLength {
                found: 23,
                expected: 24
            })
        ));
        assert!(Tensor::new(Primitive::Float32, &[usize::MAX, 2], vec![]).is_err());
        let z = Tensor::new(Primitive::Int8, &[usize::MAX, 0, usize::MAX], vec![]).unwrap();
        assert_eq!((z.len(), z.nbytes()), (0, 0));
        let s = Tensor::new(Primitive::Int8, &[], vec![7]).unwrap();
        assert_eq!(
            (s.ndim(), s.len(), s.datashape()),
            (0, 1, "int8".to_owned())
        );
    }

    #[test]
    fn block_views_are_bounds_checked_and_zero_copy() {
        let block = MemoryBlock::from_owner(vec![9u8; 10]);
        let base = block.bytes().unwrap().as_ptr();
        let v = Tensor::from_block(block.clone(), 2, Primitive::Int16, &[4]).unwrap();
        assert!(v.is_view());
        assert_eq!(v.data().as_ptr(), base.wrapping_add(2));
        assert!(Tensor::from_block(block.clone(), 3, Primitive::Int16, &[4]).is_err());
        assert!(Tensor::from_block(block, usize::MAX, Primitive::Int8, &[1]).is_err());
        let writable = MemoryBlock::zeroed(8).unwrap();
        assert!(matches!(
            Tensor::from_block(writable, 0, Primitive::Int8, &[8]),
            Err(Error::WritableBlock)
        ));
        let c = v.to_owned_copy();
        assert!(!c.is_view());
        assert_eq!(c, v);
        // Arrays of owned tensors are O(1) views too.
        let a = c.to_array().unwrap();
        assert_eq!(a.data_address(), c.data().as_ptr() as usize);
    }

    #[test]
    fn legacy_bool_tag_only_for_bool() {
        let b = Tensor::new(Primitive::Bool, &[1], vec![1]).unwrap();
        let legacy = b.clone().with_dl_type(crate::format::LEGACY_BOOL).unwrap();
        assert_eq!(legacy.dl_type(), crate::format::LEGACY_BOOL);
        assert_eq!(legacy, b);
        assert!(t(&[1]).with_dl_type(crate::format::LEGACY_BOOL).is_err());
    }

    #[test]
    fn dict_keeps_order_and_replaces_in_place() {
        let mut d = ParamDict::new();
        assert!(d.insert("b", t(&[1])).is_none());
        assert!(d.insert("a", t(&[2])).is_none());
        assert_eq!(d.insert("b", t(&[3])), Some(t(&[1])));
        assert_eq!(d.names().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(d.get("b"), Some(&t(&[3])));
        assert_eq!(d.remove("b"), Some(t(&[3])));
        assert_eq!(d.len(), 1);
        assert_eq!(d.data_bytes(), 1);
        assert!(d.get("zz").is_none());
    }
}
