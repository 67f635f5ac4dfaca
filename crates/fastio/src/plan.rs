//! The resolved plan of a pipeline job, as operators see it: every
//! operator with its inputs and outputs, and every entry
//! (`<operator>/<output>`) with its type, shape, producer and consumers.
//!
//! The driver (the `fastio-pipeline` crate) resolves a pipeline definition
//! into a [`Plan`] and writes it into the job's context once, in a compact
//! serde encoding (postcard), published as [`PLAN_NAME`]. Operators read it
//! back ([`crate::Operator::from_env`]): they need no YAML.

use dtype::Primitive;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::{Error, Result};

/// The name the plan is published under. Entry names always contain a `/`,
/// and operator and output names never contain a `.`, so it collides with
/// no entry.
pub const PLAN_NAME: &str = "fastio.plan";

/// Prefix of the marker the driver publishes for an entry whose producer
/// failed: `fastio.poisoned/<entry key>`, holding the operator's name.
pub const POISON_PREFIX: &str = "fastio.poisoned/";

/// Prefix of the environment variables that name stream directories.
pub const STREAM_ENV_PREFIX: &str = "FASTIO_STREAM_";

/// The environment variable the driver names the directory of stream
/// output `output` of `operator` in: `FASTIO_STREAM_<OPERATOR>_<OUTPUT>`,
/// upper case, every other character than a letter or digit as `_`.
pub fn stream_env(operator: &str, output: &str) -> String {
    let key = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{STREAM_ENV_PREFIX}{}_{}", key(operator), key(output))
}

/// Upper bound on an encoded plan (a limit for decoding untrusted bytes).
pub const MAX_PLAN_BYTES: usize = 16 << 20;

/// What an entry holds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// An array of `element` with a shape (some dimensions may be dynamic).
    Array,
    /// A string: a dynamic `uint8` array of its UTF-8 bytes.
    String,
    /// One primitive value (`shape` is `[1]`).
    Scalar,
}

/// One entry of the job: an output of an operator and the inputs fed by it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct EntryPlan {
    /// `<operator>/<output>` as declared (case kept, for display).
    pub name: String,
    /// The name folded to lower case: what the context publishes it as
    /// (names are case-insensitive).
    pub key: String,
    /// What it holds.
    pub kind: EntryKind,
    /// The element type (`uint8` for strings); in the encoding, its name,
    /// checked when the plan is decoded.
    #[serde(with = "element_name")]
    pub element: Primitive,
    /// The declared shape; `None` marks a dynamic dimension (`-1` or `0` in
    /// the definition).
    pub shape: Vec<Option<usize>>,
    /// Index of the producing operator in [`Plan::operators`].
    pub producer: usize,
    /// Indexes of the consuming operators.
    pub consumers: Vec<usize>,
}

impl EntryPlan {
    /// Whether every dimension is known (the driver pre-allocates it).
    pub fn is_static(&self) -> bool {
        self.kind != EntryKind::String && self.shape.iter().all(Option::is_some)
    }

    /// The declared shape as the docs write it: `[1024, 512]`, `?` for a
    /// dynamic dimension (`[?, 512]`).
    pub fn shape_text(&self) -> String {
        let dims: Vec<String> = self
            .shape
            .iter()
            .map(|d| d.map_or_else(|| "?".to_owned(), |d| d.to_string()))
            .collect();
        format!("[{}]", dims.join(", "))
    }

    /// Indexes of the dynamic dimensions.
    pub fn dynamic_indices(&self) -> Vec<usize> {
        self.shape
            .iter()
            .enumerate()
            .filter(|(_, d)| d.is_none())
            .map(|(i, _)| i)
            .collect()
    }
}

/// One operator: its inputs (local name, entry) and outputs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct OperatorPlan {
    /// The operator's name as declared.
    pub name: String,
    /// `(input name, entry index)` for every shared-memory input.
    pub inputs: Vec<(String, usize)>,
    /// `(output name, entry index)` for every shared-memory output.
    pub outputs: Vec<(String, usize)>,
}

/// The resolved plan of a job.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The pipeline's name.
    pub pipeline: String,
    /// Operators in definition order.
    pub operators: Vec<OperatorPlan>,
    /// Entries in definition order.
    pub entries: Vec<EntryPlan>,
    /// Set when the job streams: every entry is then a stream of frames
    /// (see [`crate::StreamProducer`]) named by its key, and operators loop
    /// over frames ([`crate::Operator::frames`]).
    pub streaming: Option<StreamingPlan>,
}

/// How a streaming job runs.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamingPlan {
    /// Frames in flight per edge.
    pub depth: u32,
    /// A full edge drops its oldest frame instead of blocking the
    /// producer.
    pub drop_oldest: bool,
    /// Sources stop after this many frames.
    pub frames: Option<u64>,
    /// Sources stop after this long (milliseconds).
    pub duration_ms: Option<u64>,
    /// The largest shape of each entry, by entry index (a static entry's
    /// shape; a dynamic one's declared maximum).
    pub max_shapes: Vec<Vec<usize>>,
    /// Restarts allowed per operator, by operator index (0: none).
    pub restarts: Vec<u32>,
}

impl StreamingPlan {
    /// The options of the stream that carries entry `e` of `plan`: its
    /// consumers, then the recorder's place
    /// ([`crate::StreamOptions::recorder_place`]).
    pub fn stream_options(&self, plan: &Plan, e: usize) -> Result<crate::StreamOptions> {
        let entry = plan
            .entries
            .get(e)
            .ok_or_else(|| Error::Plan(format!("no entry {e}")))?;
        let element = entry.element;
        let max = self
            .max_shapes
            .get(e)
            .ok_or_else(|| Error::Plan(format!("entry {}: no largest shape", entry.name)))?;
        let restarts = |i: usize| self.restarts.get(i).copied().unwrap_or(0) > 0;
        // One consumer more: the recorder's place (the last index,
        // detached until a recorder attaches there).
        Ok(crate::StreamOptions::new(element, max)
            .depth(self.depth as usize)
            .consumers(entry.consumers.len() + 1)
            .recorder_place(true)
            .overflow(if self.drop_oldest {
                crate::Overflow::DropOldest
            } else {
                crate::Overflow::Block
            })
            .producer_may_restart(restarts(entry.producer))
            .consumer_may_restart(entry.consumers.iter().any(|&c| restarts(c))))
    }
}

impl Plan {
    /// The postcard encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        postcard::to_allocvec(self).map_err(|e| Error::Plan(format!("cannot encode: {e}")))
    }

    /// Decodes and checks a plan: every index in range, names unique.
    pub fn decode(bytes: &[u8]) -> Result<Plan> {
        if bytes.len() > MAX_PLAN_BYTES {
            return Err(Error::Plan(format!("{} bytes is too large", bytes.len())));
        }
        let plan: Plan =
            postcard::from_bytes(bytes).map_err(|e| Error::Plan(format!("cannot decode: {e}")))?;
        plan.check()?;
        Ok(plan)
    }

    fn check(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Plan(what));
        for (i, e) in self.entries.iter().enumerate() {
            if e.producer >= self.operators.len()
                || e.consumers.iter().any(|&c| c >= self.operators.len())
            {
                return bad(format!("entry {i} names an operator out of range"));
            }
        }
        for op in &self.operators {
            if op
                .inputs
                .iter()
                .chain(&op.outputs)
                .any(|(_, e)| *e >= self.entries.len())
            {
                return bad(format!("operator {} names an entry out of range", op.name));
            }
        }
        if let Some(st) = &self.streaming
            && (st.max_shapes.len() != self.entries.len()
                || st.restarts.len() != self.operators.len()
                || st.depth == 0)
        {
            return bad("the streaming plan does not match the entries and operators".into());
        }
        let mut keys: Vec<&str> = self.entries.iter().map(|e| e.key.as_str()).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return bad("two entries share a name".into());
        }
        Ok(())
    }

    /// The operator named `name` (case-insensitive).
    pub fn operator(&self, name: &str) -> Option<usize> {
        self.operators
            .iter()
            .position(|o| o.name.eq_ignore_ascii_case(name))
    }

    /// Publishes the plan in `ctx` under [`PLAN_NAME`] (the driver's side).
    pub fn publish(&self, ctx: &Context) -> Result<()> {
        let bytes = self.encode()?;
        let mut a = ctx.create(bytes.len().max(1) as u64)?;
        a.map_mut()?[..bytes.len()].copy_from_slice(&bytes);
        a.set_type_and_dimensions(
            dtype::Type::primitive(dtype::Primitive::UInt8),
            &[bytes.len().max(1)],
        )?;
        a.publish(PLAN_NAME)?;
        a.release()
    }

    /// Reads the plan published in `ctx` (an operator's side).
    pub fn read(ctx: &Context) -> Result<Plan> {
        let m = ctx.map(PLAN_NAME).map_err(|e| match e {
            Error::UnknownName(_) => Error::Plan(format!(
                "the context holds no plan ({PLAN_NAME}): was it created by a pipeline driver?"
            )),
            e => e,
        })?;
        // A one-byte allocation holds an empty encoding padded to one byte;
        // postcard ignores trailing bytes.
        Plan::decode(&m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Plan {
        Plan {
            pipeline: "p".into(),
            operators: vec![
                OperatorPlan {
                    name: "Gen".into(),
                    inputs: vec![],
                    outputs: vec![("vol".into(), 0)],
                },
                OperatorPlan {
                    name: "use".into(),
                    inputs: vec![("v".into(), 0)],
                    outputs: vec![],
                },
            ],
            entries: vec![EntryPlan {
                name: "Gen/vol".into(),
                key: "gen/vol".into(),
                kind: EntryKind::Array,
                element: Primitive::Float32,
                shape: vec![Some(3), None],
                producer: 0,
                consumers: vec![1],
            }],
            streaming: Some(StreamingPlan {
                depth: 3,
                drop_oldest: true,
                frames: Some(10),
                duration_ms: None,
                max_shapes: vec![vec![3, 100]],
                restarts: vec![0, 2],
            }),
        }
    }

    #[test]
    fn a_streaming_plan_must_match_the_entries_and_gives_stream_options() {
        let p = sample();
        let st = p.streaming.clone().unwrap();
        let o = st.stream_options(&p, 0).unwrap();
        assert_eq!(o.slot_bytes(), Some(4096)); // 3 x 100 float32, a page
        assert!(st.stream_options(&p, 1).is_err());
        let mut bad = p.clone();
        bad.streaming.as_mut().unwrap().max_shapes.clear();
        assert!(matches!(
            Plan::decode(&bad.encode().unwrap()),
            Err(Error::Plan(_))
        ));
        let mut zero = p;
        zero.streaming.as_mut().unwrap().depth = 0;
        assert!(Plan::decode(&zero.encode().unwrap()).is_err());
    }

    #[test]
    fn an_unknown_element_name_in_the_encoding_is_a_plan_error() {
        let bytes = sample().encode().unwrap();
        let at = bytes
            .windows(7)
            .position(|w| w == b"float32")
            .expect("the element travels by name");
        let mut bad = bytes.clone();
        bad[at..at + 7].copy_from_slice(b"float99");
        // postcard keeps no custom message: a decode error, typed.
        assert!(matches!(Plan::decode(&bad), Err(Error::Plan(m)) if m.contains("cannot decode")));
        bad[at..at + 7].copy_from_slice(b"float64");
        assert_eq!(
            Plan::decode(&bad).unwrap().entries[0].element,
            Primitive::Float64
        );
    }

    #[test]
    fn plans_round_trip_and_bad_bytes_are_errors() {
        let p = sample();
        let bytes = p.encode().unwrap();
        assert_eq!(Plan::decode(&bytes).unwrap(), p);
        assert_eq!(p.operator("GEN"), Some(0));
        assert_eq!(p.entries[0].dynamic_indices(), [1]);
        assert!(!p.entries[0].is_static());
        for cut in 0..bytes.len() {
            let _ = Plan::decode(&bytes[..cut]); // an error or a plan, never a panic
        }
        let mut bad = p.clone();
        bad.entries[0].producer = 9;
        assert!(matches!(
            Plan::decode(&bad.encode().unwrap()),
            Err(Error::Plan(_))
        ));
        let mut twice = p;
        twice.entries.push(twice.entries[0].clone());
        assert!(Plan::decode(&twice.encode().unwrap()).is_err());
    }
}

/// An element type in the plan's encoding: its name (`float32`), so that
/// the encoding does not depend on `Primitive`'s order; decoding refuses a
/// name that is not a primitive's.
mod element_name {
    use dtype::Primitive;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(p: &Primitive, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Primitive, D::Error> {
        let name = <&str>::deserialize(d)?;
        Primitive::from_name(name)
            .ok_or_else(|| D::Error::custom(format!("unknown element type {name:?}")))
    }
}
