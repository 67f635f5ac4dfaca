//! The pipeline definition as written: Clara's YAML keys (api-version
//! 0.5.0 and later), each value with its position in the file.
//!
//! Unknown keys are errors (`deny_unknown_fields`), with the key's line and
//! column; so are duplicate keys. `services`, `models`, `requests` and
//! `pull-secrets` are accepted without looking inside: the local driver
//! ignores them (a warning).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

/// A scalar read as text exactly as written: `tag: 1.10` is the tag
/// "1.10", `command: [run, on, 010]` passes `on` and `010` (a string target
/// keeps a plain scalar's text; no number or boolean is made of it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Text(pub String);

/// The top level of a pipeline definition.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineDoc {
    /// `api-version`: 0.5.0 or later.
    pub api_version: Spanned<Text>,
    /// The pipeline's name.
    pub name: Spanned<String>,
    /// Free-form version.
    pub version: Option<Spanned<Text>>,
    /// Free-form description.
    pub description: Option<String>,
    /// Which orchestrator (informational locally).
    pub orchestrator: Option<Spanned<String>>,
    /// Parameters with their default values.
    pub parameters: Option<BTreeMap<String, Spanned<Text>>>,
    /// Image pull secrets (ignored locally).
    pub pull_secrets: Option<Spanned<IgnoredAny>>,
    /// The operators.
    pub operators: Vec<OperatorDoc>,
    /// Ours, not Clara's: run the pipeline as a stream of frames
    /// (`docs/pipelines.md`, *Streaming*).
    pub streaming: Option<Spanned<StreamingDoc>>,
    /// Ours, not Clara's: which host runs which operator
    /// (`docs/hosts.md`).
    pub placement: Option<Spanned<PlacementDoc>>,
}

/// The operators placed on one host, with their positions.
pub type HostList = Spanned<Vec<Spanned<String>>>;

/// `placement:`: the host of each operator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PlacementDoc {
    /// The host of every operator not listed (default `main`).
    pub default: Option<Spanned<String>>,
    /// Host name: the operators it runs.
    pub hosts: Option<std::collections::HashMap<Spanned<String>, HostList>>,
}

/// `streaming:`: the operators stay up and frames flow through them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StreamingDoc {
    /// Frames in flight per edge (default 4).
    pub depth: Option<Spanned<i64>>,
    /// `block` (default) or `drop-oldest`.
    pub overflow: Option<Spanned<String>>,
    /// Sources stop after this many frames.
    pub frames: Option<Spanned<i64>>,
    /// Sources stop after this many seconds.
    pub duration: Option<Spanned<f64>>,
    /// The largest shape of each dynamic output (`operator/output`).
    pub max_shape: Option<BTreeMap<String, Spanned<Vec<Spanned<i64>>>>>,
    /// Operators started again when they fail.
    pub restart: Option<BTreeMap<String, Spanned<RestartDoc>>>,
    /// Record every stream of the run, losslessly, to this MCAP file
    /// (relative to the definition's directory).
    pub record: Option<Spanned<String>>,
}

/// How an operator is restarted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RestartDoc {
    /// Only `on-failure`.
    pub policy: Spanned<String>,
    /// Restarts allowed (default 3).
    pub limit: Option<Spanned<i64>>,
}

/// One operator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OperatorDoc {
    /// Its name.
    pub name: Spanned<String>,
    /// Free-form description.
    pub description: Option<String>,
    /// What runs.
    pub container: Option<ContainerDoc>,
    /// Its inputs.
    pub input: Option<Vec<Spanned<InputDoc>>>,
    /// Its outputs.
    pub output: Option<Vec<Spanned<OutputDoc>>>,
    /// Services (ignored locally).
    pub services: Option<Spanned<IgnoredAny>>,
    /// Models (0.6.0+; ignored locally).
    pub models: Option<Spanned<IgnoredAny>>,
    /// Resource requests (ignored locally).
    pub requests: Option<Spanned<IgnoredAny>>,
}

/// An operator's container.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ContainerDoc {
    /// Image (informational locally).
    pub image: Option<Spanned<String>>,
    /// Tag (informational; "latest" when absent; may be a number).
    pub tag: Option<Spanned<Text>>,
    /// The command line that runs the operator.
    pub command: Option<Spanned<Vec<Spanned<Text>>>>,
    /// Environment variables.
    pub variables: Option<BTreeMap<String, Spanned<Text>>>,
}

/// An input.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct InputDoc {
    /// The producer's output name (with `from`).
    pub name: Option<Spanned<String>>,
    /// The producing operator; absent: the pipeline payload.
    pub from: Option<Spanned<String>>,
    /// Where a `stream` is found.
    pub path: Option<Spanned<String>>,
    /// The type.
    #[serde(rename = "type")]
    pub ty: Option<Spanned<String>>,
    /// The element type.
    pub element_type: Option<Spanned<String>>,
    /// The shape (-1 or 0: dynamic).
    pub shape: Option<Spanned<Vec<Spanned<i64>>>>,
}

/// An output.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OutputDoc {
    /// Its name (required).
    pub name: Option<Spanned<String>>,
    /// Where a `stream` is written.
    pub path: Option<Spanned<String>>,
    /// The type.
    #[serde(rename = "type")]
    pub ty: Option<Spanned<String>>,
    /// The element type.
    pub element_type: Option<Spanned<String>>,
    /// The shape (-1 or 0: dynamic).
    pub shape: Option<Spanned<Vec<Spanned<i64>>>>,
}

/// Only the `parameters` of a definition (read first, to fill the
/// `${{ name }}` placeholders of the rest).
#[derive(Debug, Deserialize)]
pub struct ParametersOnly {
    /// Parameters with their default values.
    pub parameters: Option<BTreeMap<String, Spanned<Text>>>,
}
