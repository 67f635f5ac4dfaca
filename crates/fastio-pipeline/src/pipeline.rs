//! A pipeline as validation resolves it: its operators with their typed
//! inputs and outputs ([`OperatorDef`], [`InputDef`], [`OutputDef`],
//! [`IoType`]), the Fast I/O plan of its entries, the schedule and the
//! placement ([`Pipeline`]). `validate.rs` makes these; the drivers run
//! them.

use dtype::Primitive;
use std::collections::BTreeMap;

use fastio::plan::Plan;

/// The type of an input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoType {
    /// Shared memory: an array of `element` with `shape` (`None`: dynamic).
    Array {
        /// Element type.
        element: Primitive,
        /// Shape; `None` marks a dynamic dimension.
        shape: Vec<Option<usize>>,
    },
    /// Shared memory: a dynamic `uint8` array of UTF-8 bytes.
    String,
    /// Shared memory: one value.
    Scalar(Primitive),
    /// Disk: a directory of files of a free-form `element` type.
    Stream {
        /// Free-form element type (`dicom`, ...).
        element: String,
        /// The absolute path the definition names.
        path: String,
    },
}

impl IoType {
    /// Whether it lives in shared memory (an entry).
    pub fn is_shared(&self) -> bool {
        !matches!(self, IoType::Stream { .. })
    }

    /// Type, element type and shape as text, for messages and plans.
    pub fn describe(&self) -> String {
        match self {
            IoType::Array { element, shape } => {
                let dims: Vec<String> = shape
                    .iter()
                    .map(|d| d.map_or("-1".to_owned(), |n| n.to_string()))
                    .collect();
                format!("array<{}>[{}]", element.name(), dims.join(", "))
            }
            IoType::String => "string".to_owned(),
            IoType::Scalar(p) => p.name().to_owned(),
            IoType::Stream { element, .. } => format!("stream<{element}>"),
        }
    }

    /// Types match when everything but a stream's path is equal.
    pub(crate) fn matches(&self, other: &IoType) -> bool {
        match (self, other) {
            (IoType::Stream { element: a, .. }, IoType::Stream { element: b, .. }) => a == b,
            _ => self == other,
        }
    }
}

/// An input of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputDef {
    /// The producer's output name (`None`: the pipeline payload).
    pub name: Option<String>,
    /// The producing operator's index (`None`: the payload).
    pub from: Option<usize>,
    /// Its type.
    pub ty: IoType,
}

/// An output of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputDef {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: IoType,
}

/// An operator, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorDef {
    /// Its name.
    pub name: String,
    /// The container image (informational locally).
    pub image: Option<String>,
    /// The image tag ("latest" when absent).
    pub tag: String,
    /// The command line (empty: none given).
    pub command: Vec<String>,
    /// Environment variables.
    pub variables: BTreeMap<String, String>,
    /// Inputs in definition order.
    pub inputs: Vec<InputDef>,
    /// Outputs in definition order.
    pub outputs: Vec<OutputDef>,
}

/// A validated pipeline: its operators, the Fast I/O plan of its
/// shared-memory entries, and the order operators may run in.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// Its name.
    pub name: String,
    /// Its `api-version`.
    pub api_version: String,
    /// Operators in definition order.
    pub operators: Vec<OperatorDef>,
    /// The entries and each operator's share of them.
    pub plan: Plan,
    /// Waves of operator indexes: each runs once all earlier waves that
    /// feed it are done; operators in one wave are independent.
    pub schedule: Vec<Vec<usize>>,
    /// Which host runs which operator (one host, `main`, without a
    /// `placement:` section).
    pub placement: crate::placement::Placement,
    /// `streaming.record`: the MCAP file every stream is recorded to
    /// (relative to the definition's directory); [`crate::RunOptions::record`]
    /// overrides it.
    pub record: Option<std::path::PathBuf>,
}
