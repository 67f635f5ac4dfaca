//! `fastio-pipeline`: Clara pipeline definitions (api-version 0.5.0 and
//! later) and a local driver that runs them.
//!
//! * [`Definition::parse`] reads the YAML (with budgets: size, depth,
//!   aliases), fills `${{ name }}` parameters, checks every rule, and
//!   resolves a [`Pipeline`]: its operators, the Fast I/O entries
//!   (`<operator>/<output>`) with types, shapes, producer and consumers,
//!   and the waves in which operators may run. Every problem is a
//!   [`Diagnostic`] with file, line, column and YAML path.
//! * [`LocalDriver`] runs it on this machine: one anonymous Fast I/O
//!   context, static outputs pre-allocated, operators as child processes
//!   in dependency order (parallel where the graph allows), their output
//!   streamed, and on any failure every operator stopped.
//!
//! ```
//! use fastio_pipeline::Definition;
//! let yaml = "\
//! api-version: 0.5.0
//! name: demo
//! operators:
//! - name: producer
//!   container: {image: local, command: [./produce]}
//!   output:
//!   - {name: volume, type: array, element-type: f32, shape: [3, -1]}
//! - name: consumer
//!   container: {image: local, command: [./consume]}
//!   input:
//!   - {from: producer, name: volume, type: array, element-type: float32, shape: [3, -1]}
//! ";
//! let def = Definition::parse("demo.yaml", yaml, &[]).unwrap();
//! let entry = &def.pipeline.plan.entries[0];
//! assert_eq!(entry.name, "producer/volume");
//! assert_eq!(entry.element, dtype::Primitive::Float32);
//! assert_eq!(def.pipeline.schedule, [vec![0], vec![1]]);
//!
//! let bad = yaml.replace("shape: [3, -1]}\n- name: consumer", "shape: [3, -2]}\n- name: consumer");
//! let errors = Definition::parse("demo.yaml", &bad, &[]).unwrap_err();
//! assert_eq!(errors[0].line, 7);
//! assert!(errors[0].to_string().contains("operators[0].output[0].shape[1]"));
//! ```

#![deny(unsafe_code)]

mod driver;
mod failure;
pub mod hosts;
mod load;
pub mod model;
mod pipeline;
pub mod placement;
mod process;
mod record;
mod report;
mod run;
mod schedule;
pub mod snapshot;
mod streaming;
mod supervise;
#[allow(unsafe_code)]
mod sys;
mod validate;

pub use driver::{DriverError, LocalDriver, OUTPUT_ENV, PAYLOAD_ENV, RunOptions};
pub use failure::{Failure, Lost, RootCause};
pub use fastio::plan::{STREAM_ENV_PREFIX, stream_env};
pub use fastio_record::RecordingReport;
pub use hosts::{Ended, HostLink, LinkEvent};
pub use load::{Diagnostic, MAX_DEFINITION_BYTES, Severity};
pub use pipeline::{InputDef, IoType, OperatorDef, OutputDef, Pipeline};
pub use placement::{Crossing, DEFAULT_HOST, Placement};
pub use report::{
    EdgeReport, OperatorReport, Outcome, Progress, RunReport, SNAPSHOT_EVERY, StreamRate,
};
pub use validate::MAX_NAME_LEN;

/// A checked pipeline definition and the warnings about it.
#[derive(Debug, Clone)]
pub struct Definition {
    /// The resolved pipeline.
    pub pipeline: Pipeline,
    /// Warnings (nothing here stops the pipeline from running).
    pub warnings: Vec<Diagnostic>,
    /// The value of every declared parameter (defaults, then `--param`).
    pub parameters: std::collections::BTreeMap<String, String>,
}

impl Definition {
    /// Parses and checks `text` (named `file` in diagnostics), with
    /// `params` (`name=value` pairs, as `--param`) overriding the declared
    /// parameter defaults. Gives every error found (warnings included,
    /// sorted by position), or the pipeline and its warnings.
    pub fn parse(
        file: &str,
        text: &str,
        params: &[(String, String)],
    ) -> Result<Definition, Vec<Diagnostic>> {
        let mut report = load::Report::new(file);
        let loaded = load::load(text, params, &mut report);
        let parameters = loaded
            .as_ref()
            .map(|l| l.parameters.clone())
            .unwrap_or_default();
        let pipeline = loaded.and_then(|l| validate::validate(&l.doc, &mut report));
        let mut items = report.items;
        items.sort_by_key(|d| (d.line, d.column));
        match pipeline {
            Some(pipeline) if !items.iter().any(|d| d.severity == Severity::Error) => {
                Ok(Definition {
                    pipeline,
                    warnings: items,
                    parameters,
                })
            }
            _ => Err(items),
        }
    }

    /// [`Definition::parse`] of a file.
    pub fn read(
        path: &std::path::Path,
        params: &[(String, String)],
    ) -> Result<Definition, Vec<Diagnostic>> {
        let file = path.display().to_string();
        let whole = |message: String| {
            vec![Diagnostic {
                severity: Severity::Error,
                file: file.clone(),
                line: 0,
                column: 0,
                path: String::new(),
                message,
            }]
        };
        let meta = std::fs::metadata(path).map_err(|e| whole(format!("cannot read: {e}")))?;
        if meta.len() > MAX_DEFINITION_BYTES as u64 {
            return Err(whole(format!(
                "the definition has {} bytes; at most {MAX_DEFINITION_BYTES} are read",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| whole(format!("cannot read: {e}")))?;
        Definition::parse(&file, &text, params)
    }
}
