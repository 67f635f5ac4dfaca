//! Pipeline entries, Clara's vocabulary (seeds 000 and 001): the inputs
//! and outputs of one operator of a job, named `<operator>/<output>`.
//!
//! * **Outputs** are read-write. A static output (every dimension known)
//!   was allocated by the driver before the operator started; a dynamic one
//!   (some dimension `-1`/`0`, or a string) is allocated by the operator:
//!   [`Entry::update_shape`] sets the dynamic dimensions, then
//!   [`Entry::allocate`]. As in Clara, `update_shape` ignores non-dynamic
//!   dimensions (it returns which ones it ignored) and `allocate` on an
//!   allocated entry reallocates it, erasing the contents.
//! * **Inputs** are read-only, twice over: the API has no write path, and
//!   their bytes come from the context's `PROT_READ` view.
//! * An input whose producer never allocated it is
//!   [`Error::NotAllocated`] naming the producer; one whose producer failed
//!   (died while writing, or before finishing) is [`Error::Poisoned`]: never
//!   torn data, never a hang.
//! * An input's shape, element type and size are those its producer
//!   published, from the moment the producer allocated it (seed 001: for a
//!   well-defined entry, [`Entry::size_bytes`] equals the bytes a mapping
//!   gives). An entry whose shape and element type are well defined in the
//!   definition is pre-allocated by the driver, and says so on both sides
//!   ([`Entry::is_preallocated`]; seed 000, 7.13.1).

use std::sync::OnceLock;

use dtype::Type;
use ndobject::{Array, Element};

use crate::allocation::Allocation;
use crate::context::{CONTEXT_ENV, Context};
use crate::error::{Error, Result};
use crate::mapping::{MappedMut, MappedPublished};
use crate::plan::{EntryKind, EntryPlan, POISON_PREFIX, Plan};

/// Environment variable that names the operator a process runs as.
pub const OPERATOR_ENV: &str = "FASTIO_OPERATOR";

/// Access to an entry, as Clara's `IOAccess`: `ReadOnly` for an input,
/// `ReadWrite` for an output. The same type as a segment's mapping access
/// (one name, one thing: an input is mapped `PROT_READ`).
pub use shm_core::Access;

/// One input or output of the running operator.
#[derive(Debug)]
pub struct Entry {
    ctx: Context,
    plan: EntryPlan,
    producer: String,
    access: Access,
    /// Current shape; 0 in a dynamic dimension not set yet.
    shape: Vec<usize>,
    element: Type,
    /// This output's allocation, once allocated (the driver's for static
    /// outputs, ours after `allocate`).
    alloc: Option<Allocation>,
    preallocated: bool,
    /// An input's shape and element type as its producer published them,
    /// read once the producer has allocated it.
    published: OnceLock<(Vec<usize>, Type)>,
}

impl Entry {
    fn new(ctx: &Context, plan: &Plan, index: usize, access: Access) -> Result<Entry> {
        let e = plan.entries[index].clone();
        let element = Type::primitive(e.element);
        let shape = e.shape.iter().map(|d| d.unwrap_or(0)).collect();
        let mut entry = Entry {
            ctx: ctx.clone(),
            producer: plan.operators[e.producer].name.clone(),
            plan: e,
            access,
            shape,
            element,
            alloc: None,
            preallocated: false,
            published: OnceLock::new(),
        };
        // The driver allocates every well-defined entry before any operator
        // starts; an input of one is pre-allocated as much as its output.
        if entry.plan.is_static() {
            match ctx.get(&entry.plan.key) {
                Ok(a) => {
                    entry.preallocated = true;
                    match access {
                        Access::ReadWrite => {
                            // Seed 001: a well-defined entry's size is the
                            // bytes its mapping gives. The shape comes from
                            // the plan, the mapping from the allocation: a
                            // plan rewritten after the driver published it
                            // must not make them differ.
                            let size = entry.size_bytes() as u64;
                            if a.dimensions() != entry.shape.as_slice()
                                || a.element_type() != &entry.element
                                || a.size() != size
                            {
                                let err = Error::corrupt(format!(
                                    "entry {}: the plan says {:?} of {} ({size} bytes), its allocation holds {:?} of {} ({} bytes)",
                                    entry.plan.name,
                                    entry.shape,
                                    entry.element,
                                    a.dimensions(),
                                    a.element_type(),
                                    a.size()
                                ));
                                a.release()?;
                                return Err(err);
                            }
                            entry.alloc = Some(a);
                        }
                        Access::ReadOnly => {
                            let _ = entry
                                .published
                                .set((a.dimensions().to_vec(), a.element_type().clone()));
                            a.release()?;
                        }
                    }
                }
                Err(Error::UnknownName(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(entry)
    }

    /// `<operator>/<output>`, the same in the producer and every consumer.
    pub fn name(&self) -> &str {
        &self.plan.name
    }

    /// Read-only for inputs, read-write for outputs.
    pub fn access(&self) -> Access {
        self.access
    }

    /// What the entry holds.
    pub fn kind(&self) -> EntryKind {
        self.plan.kind
    }

    /// An input's published shape and element type, once its producer
    /// allocated it (read from the context the first time it is there).
    fn published(&self) -> Option<&(Vec<usize>, Type)> {
        if self.access != Access::ReadOnly {
            return None;
        }
        if let Some(p) = self.published.get() {
            return Some(p);
        }
        let a = self.ctx.get(&self.plan.key).ok()?;
        let seen = (a.dimensions().to_vec(), a.element_type().clone());
        let _ = a.release();
        Some(self.published.get_or_init(|| seen))
    }

    /// The element type: for an input, the one its producer published.
    pub fn element_type(&self) -> &Type {
        self.published().map_or(&self.element, |(_, t)| t)
    }

    /// The current shape: 0 in a dynamic dimension not set yet. An input
    /// reports the shape its producer allocated from the moment it did.
    pub fn shape(&self) -> &[usize] {
        self.published().map_or(&self.shape, |(s, _)| s)
    }

    /// Bytes the current shape needs (0 while it is not well-defined); for
    /// an allocated entry, the bytes a mapping of it gives.
    pub fn size_bytes(&self) -> usize {
        let elem = self.element_type().data_size().unwrap_or(1);
        ndobject::shape::byte_size(self.shape(), elem).unwrap_or(0)
    }

    /// The dimensions that may change (`-1` or `0` in the definition).
    pub fn dynamic_indices(&self) -> Vec<usize> {
        self.plan.dynamic_indices()
    }

    /// Whether some dimension is dynamic (or it is a string).
    pub fn is_dynamic(&self) -> bool {
        !self.plan.is_static()
    }

    /// Whether the driver allocated it before the operator started: true
    /// for every entry, input or output, whose shape and element type the
    /// definition fixes.
    pub fn is_preallocated(&self) -> bool {
        self.preallocated
    }

    /// Whether an allocation exists for it (for an input: whether its
    /// producer allocated it).
    pub fn is_allocated(&self) -> bool {
        match self.access {
            Access::ReadWrite => self.alloc.is_some(),
            Access::ReadOnly => self.published().is_some(),
        }
    }

    fn need_output(&self, what: &str) -> Result<()> {
        if self.access == Access::ReadOnly {
            return Err(Error::EntryAccess {
                entry: self.plan.name.clone(),
                reason: format!("{what} needs an output; inputs are read-only"),
            });
        }
        Ok(())
    }

    /// Sets dynamic dimensions `indices[k]` to `values[k]` (outputs only).
    /// As in Clara, indices of non-dynamic dimensions are ignored; they are
    /// returned. Does not allocate (see [`Entry::allocate`]).
    pub fn update_shape(&mut self, indices: &[usize], values: &[usize]) -> Result<Vec<usize>> {
        self.need_output("update_shape")?;
        if indices.len() != values.len() {
            return Err(Error::EntryAccess {
                entry: self.plan.name.clone(),
                reason: format!("{} indices for {} values", indices.len(), values.len()),
            });
        }
        let dynamic = self.plan.dynamic_indices();
        let mut ignored = Vec::new();
        for (&i, &v) in indices.iter().zip(values) {
            if dynamic.contains(&i) && i < self.shape.len() {
                self.shape[i] = v;
            } else {
                ignored.push(i);
            }
        }
        Ok(ignored)
    }

    /// Allocates the output for its current shape and publishes it (outputs
    /// only). An allocated entry is freed and allocated again, its contents
    /// erased (Clara's rule). Fails while a dimension is 0.
    pub fn allocate(&mut self) -> Result<()> {
        self.need_output("allocate")?;
        if self.shape.contains(&0) {
            return Err(Error::ShapeNotDefined {
                entry: self.plan.name.clone(),
                shape: self.shape.clone(),
            });
        }
        if let Some(old) = self.alloc.take() {
            old.free()?;
        }
        let mut a = self.ctx.create_array(self.element.clone(), &self.shape)?;
        // A reused block holds its last contents: erase.
        a.map_mut()?.fill(0);
        a.publish(&self.plan.key)?;
        self.alloc = Some(a);
        Ok(())
    }

    /// Re-reads an input's shape and element type from its producer's
    /// allocation (for a producer that allocated it again while this
    /// operator runs); an error when it has none.
    pub fn refresh(&mut self) -> Result<()> {
        if self.access == Access::ReadOnly {
            let a = self.input_allocation()?;
            self.published = OnceLock::from((a.dimensions().to_vec(), a.element_type().clone()));
            a.release()?;
        }
        Ok(())
    }

    fn input_allocation(&self) -> Result<Allocation> {
        match self.ctx.get(&self.plan.key) {
            Ok(a) => Ok(a),
            Err(Error::UnknownName(_)) => Err(self.missing()),
            Err(e) => Err(e),
        }
    }

    /// The error for an input with no allocation: poisoned when the driver
    /// marked its producer as failed, otherwise never allocated.
    fn missing(&self) -> Error {
        let marker = format!("{POISON_PREFIX}{}", self.plan.key);
        if let Ok(m) = self.ctx.map(&marker) {
            let operator = String::from_utf8_lossy(&m)
                .trim_end_matches('\0')
                .to_owned();
            return Error::Poisoned {
                entry: self.plan.name.clone(),
                operator,
            };
        }
        Error::NotAllocated {
            entry: self.plan.name.clone(),
            producer: self.producer.clone(),
        }
    }

    /// Read access to the bytes (inputs and outputs), from the `PROT_READ`
    /// view; holds its own reference and mapping.
    pub fn map(&self) -> Result<MappedPublished> {
        match self.ctx.map(&self.plan.key) {
            Ok(m) => Ok(m),
            Err(Error::UnknownName(_)) => Err(self.missing()),
            Err(e) => Err(e),
        }
    }

    /// Write access to an output's bytes, exclusive in every process.
    pub fn map_mut(&mut self) -> Result<MappedMut<'_>> {
        self.need_output("map_mut")?;
        match &mut self.alloc {
            Some(a) => a.map_mut(),
            None => Err(Error::ShapeNotDefined {
                entry: self.plan.name.clone(),
                shape: self.shape.clone(),
            }),
        }
    }

    /// A read-only `ndobject` array over the entry's memory.
    pub fn map_as_ndobject(&self) -> Result<Array> {
        match &self.alloc {
            Some(a) => a.map_as_ndobject(),
            None => self.input_allocation()?.map_as_ndobject(),
        }
    }

    /// A writable `ndobject` array over an output's memory.
    pub fn map_as_ndobject_mut(&self) -> Result<Array> {
        self.need_output("map_as_ndobject_mut")?;
        match &self.alloc {
            Some(a) => a.map_as_ndobject_mut(),
            None => Err(Error::ShapeNotDefined {
                entry: self.plan.name.clone(),
                shape: self.shape.clone(),
            }),
        }
    }

    /// Writes a `string` output: its UTF-8 bytes, allocated to fit.
    pub fn set_string(&mut self, text: &str) -> Result<()> {
        self.need_output("set_string")?;
        if self.plan.kind != EntryKind::String {
            return Err(Error::EntryAccess {
                entry: self.plan.name.clone(),
                reason: "not a string entry".into(),
            });
        }
        self.shape = vec![text.len().max(1)];
        self.allocate()?;
        let mut m = self.map_mut()?;
        m[..text.len()].copy_from_slice(text.as_bytes());
        Ok(())
    }

    /// Reads a `string` entry (trailing NUL padding removed).
    pub fn get_string(&self) -> Result<String> {
        let m = self.map()?;
        let bytes = &m[..];
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        String::from_utf8(bytes[..end].to_vec()).map_err(|_| Error::EntryAccess {
            entry: self.plan.name.clone(),
            reason: "the string is not UTF-8".into(),
        })
    }

    /// Writes a scalar output (`T` must be its element type).
    pub fn set_scalar<T: Element>(&mut self, value: T) -> Result<()> {
        let arr = self.map_as_ndobject_mut()?;
        arr.set(&vec![0; arr.ndim()], value)?;
        Ok(())
    }

    /// Reads a scalar entry (`T` must be its element type).
    pub fn get_scalar<T: Element>(&self) -> Result<T> {
        let arr = self.map_as_ndobject()?;
        Ok(arr.get(&vec![0; arr.ndim()])?)
    }
}

/// The operator this process runs as, with its entries.
#[derive(Debug)]
pub struct Operator {
    ctx: Context,
    name: String,
    inputs: Vec<(String, Entry)>,
    outputs: Vec<(String, Entry)>,
    plan: Plan,
    index: usize,
}

impl Operator {
    /// Attaches to the job's context ([`CONTEXT_ENV`]) as the operator named
    /// in [`OPERATOR_ENV`], reading the plan the driver published.
    pub fn from_env() -> Result<Operator> {
        let name = std::env::var(OPERATOR_ENV).map_err(|_| Error::NoContext(OPERATOR_ENV))?;
        if std::env::var_os(CONTEXT_ENV).is_none() {
            return Err(Error::NoContext(CONTEXT_ENV));
        }
        Operator::attach(Context::from_env()?, &name)
    }

    /// The operator `name` of the plan published in `ctx`.
    pub fn attach(ctx: Context, name: &str) -> Result<Operator> {
        let plan = Plan::read(&ctx)?;
        let index = plan
            .operator(name)
            .ok_or_else(|| Error::Plan(format!("no operator named {name:?} in the plan")))?;
        let op = &plan.operators[index];
        let entries = |list: &[(String, usize)], access| {
            list.iter()
                .map(|(n, e)| Ok((n.clone(), Entry::new(&ctx, &plan, *e, access)?)))
                .collect::<Result<Vec<_>>>()
        };
        Ok(Operator {
            inputs: entries(&op.inputs, Access::ReadOnly)?,
            outputs: entries(&op.outputs, Access::ReadWrite)?,
            name: op.name.clone(),
            ctx,
            plan,
            index,
        })
    }

    /// The operator's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The context, the inputs and the outputs (with their local names),
    /// for a caller that keeps the entries apart (a binding).
    #[allow(clippy::type_complexity)]
    pub fn into_parts(self) -> (Context, Vec<(String, Entry)>, Vec<(String, Entry)>) {
        (self.ctx, self.inputs, self.outputs)
    }

    /// The job's plan and this operator's index in it.
    pub fn plan(&self) -> (&Plan, usize) {
        (&self.plan, self.index)
    }

    /// The job's context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The shared-memory inputs, in definition order.
    pub fn inputs(&self) -> impl Iterator<Item = &Entry> {
        self.inputs.iter().map(|(_, e)| e)
    }

    /// The shared-memory outputs, in definition order.
    pub fn outputs(&self) -> impl Iterator<Item = &Entry> {
        self.outputs.iter().map(|(_, e)| e)
    }

    /// The input named `name` (its local name, or the entry name).
    pub fn input(&self, name: &str) -> Result<&Entry> {
        let i = lookup_entry(&self.inputs, name, |(n, e)| (n, &e.plan.name))?;
        Ok(&self.inputs[i].1)
    }

    /// The output named `name`.
    pub fn output(&mut self, name: &str) -> Result<&mut Entry> {
        let i = lookup_entry(&self.outputs, name, |(n, e)| (n, &e.plan.name))?;
        Ok(&mut self.outputs[i].1)
    }
}

/// The index of the one item of `list` that `name` names: its local name
/// or its entry name (`<operator>/<output>`), case-insensitively. Every
/// lookup of an operator's inputs or outputs by name goes through here, in
/// every binding and in both kinds of run: a name that matches two items
/// (two producers' outputs with the same local name) is
/// [`Error::AmbiguousEntry`] naming both, never the first one found; none
/// is [`Error::UnknownEntry`].
///
/// `names` gives an item's local name and entry name.
pub fn lookup_entry<T>(
    list: &[T],
    name: &str,
    names: impl Fn(&T) -> (&str, &str),
) -> Result<usize> {
    let mut found: Option<usize> = None;
    for (i, item) in list.iter().enumerate() {
        let (local, entry) = names(item);
        if local.eq_ignore_ascii_case(name) || entry.eq_ignore_ascii_case(name) {
            if let Some(first) = found {
                return Err(Error::AmbiguousEntry {
                    name: name.to_owned(),
                    first: names(&list[first]).1.to_owned(),
                    second: entry.to_owned(),
                });
            }
            found = Some(i);
        }
    }
    found.ok_or_else(|| Error::UnknownEntry(name.to_owned()))
}
