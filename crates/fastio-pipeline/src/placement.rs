//! The `placement:` section (ours, not Clara's): which host runs which
//! operator, checked like every other rule.
//!
//! ```yaml
//! placement:
//!   default: scanner          # the host of every operator not listed (default `main`)
//!   hosts:
//!     gpu: [infer, render, stats]
//! ```
//!
//! Every host runs `fastio run FILE --host NAME` (see `fastio-net`); each
//! runs the operators placed on it in its own local context. An entry
//! whose producer and a consumer are on different hosts *crosses*: it is
//! sent once to each consuming host ([`Placement::crossings`]).

use std::collections::{BTreeMap, BTreeSet};

use fastio::plan::{EntryKind, Plan};
use serde_saphyr::Spanned;

use crate::load::Report;
use crate::model::PlacementDoc;
use crate::pipeline::OperatorDef;

/// The host of operators that `placement:` does not name.
pub const DEFAULT_HOST: &str = "main";

/// Longest host name.
pub const MAX_HOST_LEN: usize = 63;

/// Most hosts in one pipeline.
pub const MAX_HOSTS: usize = 64;

/// Whether `s` is a host name: 1 to [`MAX_HOST_LEN`] characters of
/// `a-z 0-9 _ -` (one chunk of a Zenoh key expression, and a name on
/// every platform).
pub fn valid_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_HOST_LEN
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Which host runs which operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Every host of the pipeline that runs at least one operator, sorted.
    pub hosts: Vec<String>,
    /// Index into [`Placement::hosts`] of each operator's host, in
    /// definition order.
    pub host_of: Vec<usize>,
}

/// An entry that crosses hosts: produced on one, consumed on others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crossing {
    /// Index of the entry in the plan.
    pub entry: usize,
    /// The producing host (index into [`Placement::hosts`]).
    pub from: usize,
    /// The consuming hosts other than the producer's, sorted.
    pub to: Vec<usize>,
    /// Bytes it moves to each host, when its shape is static.
    pub bytes: Option<u64>,
}

impl Placement {
    /// Everything on one host (a pipeline without `placement:`).
    pub fn single(operators: usize) -> Placement {
        Placement {
            hosts: vec![DEFAULT_HOST.to_owned()],
            host_of: vec![0; operators],
        }
    }

    /// The index of host `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h == name)
    }

    /// The name of operator `op`'s host.
    pub fn host_name(&self, op: usize) -> &str {
        &self.hosts[self.host_of[op]]
    }

    /// Whether the pipeline runs on more than one host.
    pub fn is_distributed(&self) -> bool {
        self.hosts.len() > 1
    }

    /// Every entry of `plan` consumed on another host than its producer's,
    /// in plan order.
    pub fn crossings(&self, plan: &Plan) -> Vec<Crossing> {
        plan.entries
            .iter()
            .enumerate()
            .filter_map(|(e, entry)| {
                let from = self.host_of[entry.producer];
                let to: BTreeSet<usize> = entry
                    .consumers
                    .iter()
                    .map(|&c| self.host_of[c])
                    .filter(|&h| h != from)
                    .collect();
                if to.is_empty() {
                    return None;
                }
                let bytes = (entry.is_static() && entry.kind != EntryKind::String).then(|| {
                    entry
                        .shape
                        .iter()
                        .map(|d| d.unwrap_or(0) as u64)
                        .product::<u64>()
                        .saturating_mul(entry.element.size() as u64)
                });
                Some(Crossing {
                    entry: e,
                    from,
                    to: to.into_iter().collect(),
                    bytes,
                })
            })
            .collect()
    }
}

/// Checks the section and resolves it (`None` after an error).
pub(crate) fn check(
    doc: &Spanned<PlacementDoc>,
    ops: &[OperatorDef],
    r: &mut Report,
) -> Option<Placement> {
    let errors_before = r.error_count();
    let d = &doc.value;
    let default = match &d.default {
        Some(name) => {
            if !valid_host_name(&name.value) {
                r.error(
                    name.referenced,
                    "placement.default",
                    format!(
                        "host name {:?} must be 1 to {MAX_HOST_LEN} characters of a-z 0-9 _ -",
                        name.value
                    ),
                );
            }
            name.value.clone()
        }
        None => DEFAULT_HOST.to_owned(),
    };
    let by_name: BTreeMap<String, usize> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.name.to_ascii_lowercase(), i))
        .collect();
    let mut placed: Vec<Option<String>> = vec![None; ops.len()];
    // In the order the definition writes them.
    let mut hosts: Vec<_> = d.hosts.iter().flatten().collect();
    hosts.sort_by_key(|(h, _)| (h.referenced.line(), h.referenced.column()));
    for (host_at, list) in hosts {
        let host = &host_at.value;
        let path = format!("placement.hosts.{host}");
        if !valid_host_name(host) {
            r.error(
                host_at.referenced,
                &path,
                format!("host name {host:?} must be 1 to {MAX_HOST_LEN} characters of a-z 0-9 _ -"),
            );
        }
        for (k, op) in list.value.iter().enumerate() {
            let path = format!("{path}[{k}]");
            match by_name.get(&op.value.to_ascii_lowercase()) {
                None => r.error(
                    op.referenced,
                    &path,
                    format!("no operator is named {:?}", op.value),
                ),
                Some(&i) => match &placed[i] {
                    Some(other) => r.error(
                        op.referenced,
                        &path,
                        format!(
                            "operator {:?} is already placed on host {other:?}",
                            ops[i].name
                        ),
                    ),
                    None => placed[i] = Some(host.to_owned()),
                },
            }
        }
    }
    let names: Vec<String> = placed
        .into_iter()
        .map(|h| h.unwrap_or_else(|| default.clone()))
        .collect();
    let hosts: Vec<String> = names
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if hosts.len() > MAX_HOSTS {
        r.error(
            doc.referenced,
            "placement",
            format!("{} hosts; at most {MAX_HOSTS}", hosts.len()),
        );
    }
    if r.error_count() > errors_before {
        return None;
    }
    let host_of = names
        .iter()
        .map(|n| hosts.iter().position(|h| h == n).unwrap_or(0))
        .collect();
    Some(Placement { hosts, host_of })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Definition;

    const OPS: &str = "\
operators:
- name: gen
  container: {command: [g]}
  output: [{name: v, type: array, element-type: float32, shape: [4]}]
- name: Infer
  container: {command: [i]}
  input: [{from: gen, name: v, type: array, element-type: float32, shape: [4]}]
  output: [{name: w, type: array, element-type: float32, shape: [-1]}]
- name: show
  container: {command: [s]}
  input:
  - {from: gen, name: v, type: array, element-type: float32, shape: [4]}
  - {from: Infer, name: w, type: array, element-type: float32, shape: [-1]}
";

    fn parse(placement: &str) -> Result<Definition, Vec<crate::Diagnostic>> {
        let yaml = format!("api-version: 0.5.0\nname: p\n{placement}{OPS}");
        Definition::parse("p.yaml", &yaml, &[])
    }

    #[test]
    fn operators_go_to_their_hosts_and_crossings_carry_their_bytes() {
        let def = parse("placement:\n  default: scanner\n  hosts:\n    gpu: [infer]\n").unwrap();
        let p = &def.pipeline.placement;
        assert_eq!(p.hosts, ["gpu", "scanner"]);
        assert_eq!(p.host_of, [1, 0, 1]);
        assert_eq!(p.host_name(1), "gpu");
        let c = p.crossings(&def.pipeline.plan);
        // gen/v goes to gpu (16 bytes); Infer/w comes back (dynamic);
        // gen/v to show stays on the scanner.
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].from, c[0].to.as_slice(), c[0].bytes),
            (1, &[0][..], Some(16))
        );
        assert_eq!(
            (c[1].from, c[1].to.as_slice(), c[1].bytes),
            (0, &[1][..], None)
        );
        // Without a section, one host, nothing crosses.
        let one = parse("").unwrap();
        assert!(!one.pipeline.placement.is_distributed());
        assert_eq!(one.pipeline.placement.hosts, [DEFAULT_HOST]);
        assert!(
            one.pipeline
                .placement
                .crossings(&one.pipeline.plan)
                .is_empty()
        );
    }

    #[test]
    fn bad_placements_are_errors_with_their_place() {
        let cases = [
            (
                "placement:\n  hosts:\n    gpu: [infer, nope]\n",
                "no operator is named \"nope\"",
                5,
            ),
            (
                "placement:\n  hosts:\n    gpu: [infer]\n    cpu: [show, INFER]\n",
                "is already placed on host \"gpu\"",
                6,
            ),
            (
                "placement:\n  hosts:\n    GPU: [infer]\n",
                "host name \"GPU\" must be",
                5,
            ),
            (
                "placement:\n  default: a b\n",
                "host name \"a b\" must be",
                4,
            ),
            ("placement:\n  hots: {}\n", "unknown field", 4),
        ];
        for (section, message, line) in cases {
            let errors = parse(section).unwrap_err();
            let e = errors
                .iter()
                .find(|d| d.message.contains(message))
                .unwrap_or_else(|| panic!("{section}: {errors:?}"));
            assert_eq!(e.line, line, "{section}: {e}");
        }
        // A bad host name is reported at the name (the key), not its list.
        let errors = parse("placement:\n  hosts:\n    GPU: [infer]\n").unwrap_err();
        let e = errors.iter().find(|d| d.message.contains("GPU")).unwrap();
        assert_eq!((e.line, e.column), (5, 5), "{e}");
        // A streaming pipeline is placed like a one-shot one.
        let yaml = format!(
            "api-version: 0.5.0\nname: p\nstreaming: {{frames: 3, max-shape: {{infer/w: [8]}}}}\nplacement:\n  hosts:\n    gpu: [infer]\n{OPS}"
        );
        let p = Definition::parse("p.yaml", &yaml, &[]).unwrap().pipeline;
        assert!(p.plan.streaming.is_some());
        assert_eq!(p.placement.hosts, ["gpu", "main"]);
        assert_eq!(p.placement.crossings(&p.plan).len(), 2);
    }
}
