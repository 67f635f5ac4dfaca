//! The [`Type`] tree, its constructors and its data layout.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::encoding::StringEncoding;
use crate::error::TypeError;
use crate::primitive::{Endianness, Primitive};

/// A record field: a name and its type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field's name (any text; unique within its record).
    pub name: String,
    /// The field's type.
    pub ty: Type,
}

impl Field {
    /// Makes a field.
    pub fn new(name: impl Into<String>, ty: Type) -> Field {
        Field {
            name: name.into(),
            ty,
        }
    }
}

/// The structure of a [`Type`]: what [`Type::kind`] returns.
///
/// Instances are only reachable through a validated [`Type`], so every
/// invariant stated here holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TypeKind {
    /// A primitive in native byte order, aligned.
    Primitive(Primitive),
    /// A primitive stored in a byte order other than the host's
    /// (`big_endian[int32]` on a little-endian host). Never a one-byte
    /// primitive, never the native order.
    NonNative {
        /// The value type.
        primitive: Primitive,
        /// The stored byte order.
        order: Endianness,
    },
    /// The same data as the inner type with alignment 1. The inner type has
    /// a fixed data size and an alignment above 1.
    Unaligned(Type),
    /// A variable-length string: the element holds a `(offset, length)` pair
    /// of `u64`, in bytes, into the memory block named by the metadata.
    String(StringEncoding),
    /// A fixed-size string of `size` **bytes** (datashape's convention),
    /// NUL-padded; `size` is a multiple of the encoding's code unit.
    FixedString {
        /// Size in bytes.
        size: usize,
        /// Encoding of the code units.
        encoding: StringEncoding,
    },
    /// Variable-length bytes, laid out like [`TypeKind::String`].
    Bytes,
    /// `N * T`: `size` elements stored contiguously inline; `T` has a fixed data size.
    FixedDim {
        /// Number of elements.
        size: usize,
        /// Element type.
        element: Type,
    },
    /// `strided * T`: the size and the byte stride live in the array's metadata.
    StridedDim(Type),
    /// `var * T`: a ragged dimension. The element holds a `(offset, size)`
    /// pair of `u64` into the memory block named by the metadata.
    VarDim(Type),
    /// A record `{name: T, ...}` in C layout; field names are unique and every
    /// field has a fixed data size.
    Record(Vec<Field>),
    /// A tuple `(T, ...)` in C layout; every item has a fixed data size.
    Tuple(Vec<Type>),
    /// `?T`: a presence byte followed (at `T`'s alignment) by a `T`.
    /// `T` is not itself an option and has a fixed data size.
    Option(Type),
}

/// One entry in the metadata an array of a type carries, at a position in
/// the type tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataEntry {
    /// Where in the type the entry belongs: `$` is the root, `[*]` a
    /// dimension's element, `.name` a record field, `.0` a tuple item, `?`
    /// an option's value.
    pub path: String,
    /// Byte offset of the entry in a metadata area of 8-byte words.
    pub offset: usize,
    /// What the entry describes.
    pub kind: MetadataKind,
}

/// What a [`MetadataEntry`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetadataKind {
    /// A `strided` dimension: byte stride and element count.
    StridedDim,
    /// A `var` dimension: the memory block that holds the elements, the
    /// byte stride between elements and a byte offset applied to each
    /// element's start.
    VarDim,
    /// A variable-length `string`: the memory block that holds the text.
    String,
    /// Variable-length `bytes`: the memory block that holds the bytes.
    Bytes,
}

impl MetadataKind {
    /// The entry's words, in order.
    pub const fn fields(self) -> &'static [&'static str] {
        match self {
            MetadataKind::StridedDim => &["stride", "size"],
            MetadataKind::VarDim => &["blockref", "stride", "offset"],
            MetadataKind::String | MetadataKind::Bytes => &["blockref"],
        }
    }

    /// Size of the entry in bytes (one 8-byte word per field).
    pub const fn size(self) -> usize {
        self.fields().len() * 8
    }

    /// A short name (`strided_dim`, `var_dim`, `string`, `bytes`).
    pub const fn name(self) -> &'static str {
        match self {
            MetadataKind::StridedDim => "strided_dim",
            MetadataKind::VarDim => "var_dim",
            MetadataKind::String => "string",
            MetadataKind::Bytes => "bytes",
        }
    }
}

/// A field of a record or tuple at a fixed byte offset from the start of
/// the outermost record, as reported by [`Type::field_layout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    /// Dotted path (`x`, `pos.1`, ...).
    pub path: String,
    /// Byte offset from the start of the outer value.
    pub offset: usize,
    /// The field's type.
    pub ty: Type,
}

struct Node {
    kind: TypeKind,
    size: Option<usize>,
    align: usize,
    /// Byte offsets of record fields / tuple items; empty otherwise.
    offsets: Box<[usize]>,
    blockref: bool,
}

/// A datashape type: immutable, cheap to clone (one reference count),
/// compared and hashed structurally.
///
/// ```
/// use dtype::Type;
/// let t: Type = "{x: int32, y: 3 * float64}".parse()?;
/// assert_eq!(t.data_size(), Some(32));
/// assert_eq!(t.alignment(), 8);
/// assert_eq!(t.field_offsets(), Some(&[0, 8][..]));
/// assert_eq!(t.to_string(), "{x: int32, y: 3 * float64}");
/// # Ok::<(), dtype::ParseError>(())
/// ```
#[derive(Clone)]
pub struct Type(Arc<Node>);

impl PartialEq for Type {
    fn eq(&self, other: &Type) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.kind == other.0.kind
    }
}

impl Eq for Type {}

impl Hash for Type {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.kind.hash(state);
    }
}

impl fmt::Debug for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Type({self})")
    }
}

const MAX_SIZE: usize = isize::MAX as usize;

fn round_up(value: usize, align: usize) -> Option<usize> {
    value.checked_next_multiple_of(align)
}

fn require_fixed(context: &'static str, ty: &Type) -> Result<usize, TypeError> {
    ty.data_size().ok_or_else(|| TypeError::NotFixedSize {
        context,
        element: ty.to_string(),
    })
}

/// Lays fields out in C order; returns (offsets, size, align).
fn c_layout(
    what: &'static str,
    types: &[&Type],
    text: impl Fn() -> String,
) -> Result<(Box<[usize]>, usize, usize), TypeError> {
    let mut offsets = Vec::with_capacity(types.len());
    let mut end = 0usize;
    let mut align = 1usize;
    for ty in types {
        let size = require_fixed(what, ty)?;
        let a = ty.alignment();
        align = align.max(a);
        let start = round_up(end, a).ok_or_else(|| TypeError::SizeOverflow(text()))?;
        offsets.push(start);
        end = start
            .checked_add(size)
            .ok_or_else(|| TypeError::SizeOverflow(text()))?;
    }
    let size = round_up(end, align)
        .filter(|s| *s <= MAX_SIZE)
        .ok_or_else(|| TypeError::SizeOverflow(text()))?;
    Ok((offsets.into_boxed_slice(), size, align))
}

impl Type {
    fn node(kind: TypeKind, size: Option<usize>, align: usize, blockref: bool) -> Type {
        Type(Arc::new(Node {
            kind,
            size,
            align,
            offsets: Box::new([]),
            blockref,
        }))
    }

    /// A primitive in native byte order.
    pub fn primitive(p: Primitive) -> Type {
        Type::node(TypeKind::Primitive(p), Some(p.size()), p.alignment(), false)
    }

    /// A primitive stored in byte order `order`. Gives the plain primitive
    /// when `order` is native or the primitive is one byte wide, so each
    /// type has one representation.
    pub fn with_byte_order(p: Primitive, order: Endianness) -> Type {
        if order == Endianness::NATIVE || p.swap_unit() == 1 {
            Type::primitive(p)
        } else {
            Type::node(
                TypeKind::NonNative {
                    primitive: p,
                    order,
                },
                Some(p.size()),
                p.alignment(),
                false,
            )
        }
    }

    /// Applies byte order `order` to a type that must be a primitive.
    pub fn byte_order(inner: &Type, order: Endianness) -> Result<Type, TypeError> {
        match inner.kind() {
            TypeKind::Primitive(p) => Ok(Type::with_byte_order(*p, order)),
            TypeKind::NonNative { primitive, .. } => Ok(Type::with_byte_order(*primitive, order)),
            _ => Err(TypeError::ByteOrderNotPrimitive(inner.to_string())),
        }
    }

    /// `unaligned[T]`: `T`'s data with alignment 1. `T` must have a fixed
    /// data size; a `T` that already has alignment 1 is returned as is.
    pub fn unaligned(inner: Type) -> Result<Type, TypeError> {
        let size = require_fixed("unaligned[...]", &inner)?;
        if inner.alignment() == 1 {
            return Ok(inner);
        }
        let blockref = inner.0.blockref;
        Ok(Type::node(
            TypeKind::Unaligned(inner),
            Some(size),
            1,
            blockref,
        ))
    }

    /// A variable-length string in `encoding`.
    pub fn string(encoding: StringEncoding) -> Type {
        Type::node(TypeKind::String(encoding), Some(16), 8, true)
    }

    /// A fixed-size string of `size` bytes.
    pub fn fixed_string(size: usize, encoding: StringEncoding) -> Result<Type, TypeError> {
        let unit = encoding.unit_size();
        if !size.is_multiple_of(unit) {
            return Err(TypeError::FixedStringSize {
                size,
                unit,
                encoding: encoding.canonical_name(),
            });
        }
        if size > MAX_SIZE {
            return Err(TypeError::SizeOverflow(format!("string[{size}]")));
        }
        Ok(Type::node(
            TypeKind::FixedString { size, encoding },
            Some(size),
            unit,
            false,
        ))
    }

    /// Variable-length bytes.
    pub fn bytes() -> Type {
        Type::node(TypeKind::Bytes, Some(16), 8, true)
    }

    /// `N * T`.
    pub fn fixed_dim(size: usize, element: Type) -> Result<Type, TypeError> {
        let elem_size = require_fixed("a fixed dimension", &element)?;
        let total = elem_size
            .checked_mul(size)
            .filter(|s| *s <= MAX_SIZE)
            .ok_or_else(|| TypeError::SizeOverflow(format!("{size} * {element}")))?;
        let (align, blockref) = (element.alignment(), element.0.blockref);
        Ok(Type::node(
            TypeKind::FixedDim { size, element },
            Some(total),
            align,
            blockref,
        ))
    }

    /// `strided * T`.
    pub fn strided_dim(element: Type) -> Type {
        let (align, blockref) = (element.alignment(), element.0.blockref);
        Type::node(TypeKind::StridedDim(element), None, align, blockref)
    }

    /// `var * T`.
    pub fn var_dim(element: Type) -> Type {
        Type::node(TypeKind::VarDim(element), Some(16), 8, true)
    }

    /// A record in C layout.
    pub fn record(fields: Vec<Field>) -> Result<Type, TypeError> {
        if fields.is_empty() {
            return Err(TypeError::Empty("record"));
        }
        let mut names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(TypeError::DuplicateField(w[0].to_owned()));
        }
        let types: Vec<&Type> = fields.iter().map(|f| &f.ty).collect();
        let blockref = types.iter().any(|t| t.0.blockref);
        let kind = TypeKind::Record(fields.clone());
        let (offsets, size, align) = c_layout("a record field", &types, || {
            Type::node(kind.clone(), None, 1, false).to_string()
        })?;
        Ok(Type(Arc::new(Node {
            kind,
            size: Some(size),
            align,
            offsets,
            blockref,
        })))
    }

    /// A tuple in C layout.
    pub fn tuple(items: Vec<Type>) -> Result<Type, TypeError> {
        if items.is_empty() {
            return Err(TypeError::Empty("tuple"));
        }
        let types: Vec<&Type> = items.iter().collect();
        let blockref = types.iter().any(|t| t.0.blockref);
        let kind = TypeKind::Tuple(items.clone());
        let (offsets, size, align) = c_layout("a tuple item", &types, || {
            Type::node(kind.clone(), None, 1, false).to_string()
        })?;
        Ok(Type(Arc::new(Node {
            kind,
            size: Some(size),
            align,
            offsets,
            blockref,
        })))
    }

    /// `?T`.
    pub fn option(inner: Type) -> Result<Type, TypeError> {
        if matches!(inner.kind(), TypeKind::Option(_)) {
            return Err(TypeError::NestedOption);
        }
        let size = require_fixed("an option", &inner)?;
        let align = inner.alignment();
        let total = align
            .checked_add(size)
            .and_then(|s| round_up(s, align))
            .filter(|s| *s <= MAX_SIZE)
            .ok_or_else(|| TypeError::SizeOverflow(format!("?{inner}")))?;
        let blockref = inner.0.blockref;
        Ok(Type::node(
            TypeKind::Option(inner),
            Some(total),
            align,
            blockref,
        ))
    }

    /// The type's structure.
    pub fn kind(&self) -> &TypeKind {
        &self.0.kind
    }

    /// Bytes one value occupies, or `None` when that depends on the array's
    /// metadata (a `strided` dimension).
    pub fn data_size(&self) -> Option<usize> {
        self.0.size
    }

    /// Required alignment of the data in bytes (a power of two).
    pub fn alignment(&self) -> usize {
        self.0.align
    }

    /// Whether the data size is fixed by the type alone.
    pub fn is_fixed_size(&self) -> bool {
        self.0.size.is_some()
    }

    /// Whether the data refers to other memory blocks (strings, bytes, `var`).
    pub fn has_blockref(&self) -> bool {
        self.0.blockref
    }

    /// Plain old data: a fixed size and no references to other memory, so a
    /// byte copy is a complete copy of a value.
    pub fn is_pod(&self) -> bool {
        self.is_fixed_size() && !self.0.blockref
    }

    /// Byte offsets of a record's fields or a tuple's items; `None` for
    /// other types.
    pub fn field_offsets(&self) -> Option<&[usize]> {
        match self.kind() {
            TypeKind::Record(_) | TypeKind::Tuple(_) => Some(&self.0.offsets),
            _ => None,
        }
    }

    /// Byte offset of an option's value (its presence byte is at 0).
    pub fn option_value_offset(&self) -> Option<usize> {
        match self.kind() {
            TypeKind::Option(inner) => Some(inner.alignment()),
            _ => None,
        }
    }

    /// Number of array dimensions at the top of the type (`3 * var * int32` has 2).
    pub fn ndim(&self) -> usize {
        let mut n = 0;
        let mut t = self;
        while let Some(e) = t.dim_element() {
            n += 1;
            t = e;
        }
        n
    }

    /// The element type when this is a dimension (`N *`, `strided *`, `var *`).
    pub fn dim_element(&self) -> Option<&Type> {
        match self.kind() {
            TypeKind::FixedDim { element, .. } | TypeKind::StridedDim(element) => Some(element),
            TypeKind::VarDim(element) => Some(element),
            _ => None,
        }
    }

    /// The type below all leading dimensions.
    pub fn element_type(&self) -> &Type {
        let mut t = self;
        while let Some(e) = t.dim_element() {
            t = e;
        }
        t
    }

    /// The primitive value type of a scalar, seen through byte order and
    /// alignment wrappers.
    pub fn as_primitive(&self) -> Option<Primitive> {
        match self.kind() {
            TypeKind::Primitive(p) | TypeKind::NonNative { primitive: p, .. } => Some(*p),
            TypeKind::Unaligned(inner) => inner.as_primitive(),
            _ => None,
        }
    }

    /// Every field of nested records and tuples that sits at a fixed offset
    /// from the start of this value (not looking through dimensions).
    pub fn field_layout(&self) -> Vec<FieldLayout> {
        let mut out = Vec::new();
        collect_fields(self, "", 0, &mut out);
        out
    }

    /// The metadata an array of this type carries, in order.
    ///
    /// ```
    /// use dtype::{MetadataKind, Type};
    /// let t: Type = "strided * var * string".parse()?;
    /// let md = t.metadata_layout();
    /// let kinds: Vec<_> = md.iter().map(|e| (e.path.as_str(), e.offset, e.kind)).collect();
    /// assert_eq!(kinds, [
    ///     ("$", 0, MetadataKind::StridedDim),
    ///     ("$[*]", 16, MetadataKind::VarDim),
    ///     ("$[*][*]", 40, MetadataKind::String),
    /// ]);
    /// # Ok::<(), dtype::ParseError>(())
    /// ```
    pub fn metadata_layout(&self) -> Vec<MetadataEntry> {
        let mut out = Vec::new();
        let mut offset = 0;
        collect_metadata(self, "$".to_owned(), &mut offset, &mut out);
        out
    }

    /// Total bytes of the metadata described by [`Type::metadata_layout`].
    pub fn metadata_size(&self) -> usize {
        self.metadata_layout().iter().map(|e| e.kind.size()).sum()
    }
}

fn collect_fields(ty: &Type, prefix: &str, base: usize, out: &mut Vec<FieldLayout>) {
    let offsets = match ty.field_offsets() {
        Some(o) => o,
        None => return,
    };
    let children: Vec<(String, &Type)> = match ty.kind() {
        TypeKind::Record(fields) => fields.iter().map(|f| (f.name.clone(), &f.ty)).collect(),
        TypeKind::Tuple(items) => items
            .iter()
            .enumerate()
            .map(|(i, t)| (i.to_string(), t))
            .collect(),
        _ => return,
    };
    for ((name, child), off) in children.into_iter().zip(offsets) {
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        out.push(FieldLayout {
            path: path.clone(),
            offset: base + off,
            ty: child.clone(),
        });
        collect_fields(child, &path, base + off, out);
    }
}

fn collect_metadata(ty: &Type, path: String, offset: &mut usize, out: &mut Vec<MetadataEntry>) {
    let mut push = |kind: MetadataKind, path: &str| {
        out.push(MetadataEntry {
            path: path.to_owned(),
            offset: *offset,
            kind,
        });
        *offset += kind.size();
    };
    match ty.kind() {
        TypeKind::Primitive(_) | TypeKind::NonNative { .. } | TypeKind::FixedString { .. } => {}
        TypeKind::String(_) => push(MetadataKind::String, &path),
        TypeKind::Bytes => push(MetadataKind::Bytes, &path),
        TypeKind::Unaligned(inner) => collect_metadata(inner, path, offset, out),
        TypeKind::Option(inner) => collect_metadata(inner, format!("{path}?"), offset, out),
        TypeKind::FixedDim { element, .. } => {
            collect_metadata(element, format!("{path}[*]"), offset, out)
        }
        TypeKind::StridedDim(element) => {
            push(MetadataKind::StridedDim, &path);
            collect_metadata(element, format!("{path}[*]"), offset, out)
        }
        TypeKind::VarDim(element) => {
            push(MetadataKind::VarDim, &path);
            collect_metadata(element, format!("{path}[*]"), offset, out)
        }
        TypeKind::Record(fields) => {
            for f in fields {
                collect_metadata(&f.ty, format!("{path}.{}", f.name), offset, out);
            }
        }
        TypeKind::Tuple(items) => {
            for (i, t) in items.iter().enumerate() {
                collect_metadata(t, format!("{path}.{i}"), offset, out);
            }
        }
    }
}

impl From<Primitive> for Type {
    fn from(p: Primitive) -> Type {
        Type::primitive(p)
    }
}
