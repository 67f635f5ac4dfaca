//! Generated pipelines: a random DAG of 1 to 8 operators whose outputs have
//! random types (arrays of any element type, written in long or short form,
//! with static and dynamic dimensions; strings; primitives; streams) and
//! whose inputs consume random earlier outputs with the same type. Rendered
//! as YAML, each must parse without error into the entries, consumers and
//! schedule that the generator knows.

use std::collections::BTreeMap;

use fastio::plan::EntryKind;
use fastio_pipeline::Definition;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// Clara's primitives: long name (also the canonical one), short name.
const PRIMS: [(&str, &str); 11] = [
    ("uint8", "u8"),
    ("uint16", "u16"),
    ("uint32", "u32"),
    ("uint64", "u64"),
    ("int8", "i8"),
    ("int16", "i16"),
    ("int32", "i32"),
    ("int64", "i64"),
    ("float16", "f16"),
    ("float32", "f32"),
    ("float64", "f64"),
];

fn spell(prim: usize, short: bool) -> &'static str {
    if short { PRIMS[prim].1 } else { PRIMS[prim].0 }
}

#[derive(Debug, Clone)]
enum Ty {
    Array {
        prim: usize,
        short: bool,
        shape: Vec<i64>,
    },
    Str,
    Scalar {
        prim: usize,
        short: bool,
    },
    Stream {
        element: &'static str,
    },
}

impl Ty {
    /// The YAML keys of this type. `flip` writes the element type in its
    /// other spelling (the same type); `path` is a stream's path.
    fn render(&self, flip: bool, path: &str) -> String {
        match self {
            Ty::Array { prim, short, shape } => {
                let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
                format!(
                    "type: array, element-type: {}, shape: [{}]",
                    spell(*prim, *short != flip),
                    dims.join(", ")
                )
            }
            Ty::Str => "type: string".to_owned(),
            Ty::Scalar { prim, short } => format!("type: {}", spell(*prim, *short != flip)),
            Ty::Stream { element } => {
                format!("type: stream, element-type: {element}, path: {path}")
            }
        }
    }

    /// Kind, element type and shape of its entry (`None`: a stream).
    fn entry(&self) -> Option<(EntryKind, &'static str, Vec<Option<usize>>)> {
        match self {
            Ty::Array { prim, shape, .. } => Some((
                EntryKind::Array,
                PRIMS[*prim].0,
                shape
                    .iter()
                    .map(|&d| if d > 0 { Some(d as usize) } else { None })
                    .collect(),
            )),
            Ty::Str => Some((EntryKind::String, "uint8", vec![None])),
            Ty::Scalar { prim, .. } => Some((EntryKind::Scalar, PRIMS[*prim].0, vec![Some(1)])),
            Ty::Stream { .. } => None,
        }
    }
}

fn dim() -> impl Strategy<Value = i64> {
    prop_oneof![Just(-1i64), Just(0i64), 1..6i64, 1..300i64]
}

fn ty() -> impl Strategy<Value = Ty> {
    prop_oneof![
        3 => (0..PRIMS.len(), any::<bool>(), vec(dim(), 1..5))
            .prop_map(|(prim, short, shape)| Ty::Array { prim, short, shape }),
        1 => Just(Ty::Str),
        2 => (0..PRIMS.len(), any::<bool>()).prop_map(|(prim, short)| Ty::Scalar { prim, short }),
        1 => proptest::sample::select(vec!["dicom", "nifti", "png"])
            .prop_map(|element| Ty::Stream { element }),
    ]
}

/// One operator as generated: its name's case, its outputs, and picks among
/// the outputs of the operators before it (each with whether to write the
/// element type in its other spelling).
#[derive(Debug, Clone)]
struct OpSpec {
    upper: bool,
    outputs: Vec<Ty>,
    picks: Vec<(Index, bool)>,
    payload: bool,
}

fn op() -> impl Strategy<Value = OpSpec> {
    (
        any::<bool>(),
        vec(ty(), 0..4),
        vec((any::<Index>(), any::<bool>()), 0..4),
        any::<bool>(),
    )
        .prop_map(|(upper, outputs, picks, payload)| OpSpec {
            upper,
            outputs,
            picks,
            payload,
        })
}

/// A generated pipeline: its YAML, operator names, and every edge
/// `(producer, output index, consumer)`.
struct Generated {
    yaml: String,
    names: Vec<String>,
    edges: Vec<(usize, usize, usize)>,
    inputs: Vec<usize>,
}

fn generate(ops: &[OpSpec]) -> Generated {
    let names: Vec<String> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            if o.upper {
                format!("Op{i}")
            } else {
                format!("op{i}")
            }
        })
        .collect();
    let mut yaml = String::from("api-version: 0.5.0\nname: generated\noperators:\n");
    let mut edges = Vec::new();
    let mut inputs = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        yaml.push_str(&format!(
            "- name: {}\n  container: {{image: local, command: [./op{i}]}}\n",
            names[i]
        ));
        // Every output of an earlier operator may be consumed.
        let earlier: Vec<(usize, usize)> = (0..i)
            .flat_map(|j| (0..ops[j].outputs.len()).map(move |k| (j, k)))
            .collect();
        let mut chosen: Vec<(usize, usize, bool)> = Vec::new();
        if !earlier.is_empty() {
            for (pick, flip) in &o.picks {
                let (j, k) = *pick.get(&earlier);
                if !chosen.iter().any(|&(a, b, _)| (a, b) == (j, k)) {
                    chosen.push((j, k, *flip));
                }
            }
        }
        let mut lines = Vec::new();
        if o.payload {
            lines.push("  - {type: stream, element-type: dicom, path: /input}".to_owned());
        }
        for (n, &(j, k, flip)) in chosen.iter().enumerate() {
            edges.push((j, k, i));
            lines.push(format!(
                "  - {{from: op{j}, name: out{k}, {}}}",
                ops[j].outputs[k].render(flip, &format!("/in/{i}/{n}"))
            ));
        }
        inputs.push(lines.len());
        if !lines.is_empty() {
            yaml.push_str("  input:\n");
            for l in lines {
                yaml.push_str(&l);
                yaml.push('\n');
            }
        }
        if !o.outputs.is_empty() {
            yaml.push_str("  output:\n");
            for (k, t) in o.outputs.iter().enumerate() {
                yaml.push_str(&format!(
                    "  - {{name: out{k}, {}}}\n",
                    t.render(false, &format!("/out/{i}/{k}"))
                ));
            }
        }
    }
    Generated {
        yaml,
        names,
        edges,
        inputs,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn generated_pipelines_resolve(ops in vec(op(), 1..=8)) {
        let g = generate(&ops);
        let def = match Definition::parse("generated.yaml", &g.yaml, &[]) {
            Ok(def) => def,
            Err(diags) => {
                let shown: Vec<String> = diags.iter().map(ToString::to_string).collect();
                return Err(TestCaseError::fail(format!(
                    "{}\n--- from:\n{}",
                    shown.join("\n"),
                    g.yaml
                )));
            }
        };
        let p = &def.pipeline;
        prop_assert!(def.warnings.is_empty(), "{:?}", def.warnings);

        // Operators, in order, with their names as written.
        let names: Vec<&str> = p.operators.iter().map(|o| o.name.as_str()).collect();
        prop_assert_eq!(&names, &g.names);
        let plan_names: Vec<&str> = p.plan.operators.iter().map(|o| o.name.as_str()).collect();
        prop_assert_eq!(&plan_names, &g.names);
        for (i, o) in p.operators.iter().enumerate() {
            prop_assert_eq!(o.outputs.len(), ops[i].outputs.len());
            prop_assert_eq!(o.inputs.len(), g.inputs[i]);
            prop_assert_eq!(&o.command, &vec![format!("./op{i}")]);
        }

        // Every shared-memory output is an entry, in definition order.
        let mut consumers: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
        for &(j, k, c) in &g.edges {
            consumers.entry((j, k)).or_default().push(c);
        }
        let mut next = 0;
        for (i, o) in ops.iter().enumerate() {
            for (k, t) in o.outputs.iter().enumerate() {
                let Some((kind, element, shape)) = t.entry() else {
                    continue;
                };
                prop_assert!(next < p.plan.entries.len(), "missing entry {}/out{}", g.names[i], k);
                let e = &p.plan.entries[next];
                let name = format!("{}/out{k}", g.names[i]);
                prop_assert_eq!(&e.key, &name.to_ascii_lowercase());
                prop_assert_eq!(&e.name, &name);
                prop_assert_eq!(e.kind, kind);
                prop_assert_eq!(e.element.name(), element);
                prop_assert_eq!(&e.shape, &shape);
                prop_assert_eq!(e.producer, i);
                let mut want = consumers.get(&(i, k)).cloned().unwrap_or_default();
                want.sort_unstable();
                want.dedup();
                prop_assert_eq!(&e.consumers, &want);
                prop_assert_eq!(
                    e.is_static(),
                    kind != EntryKind::String && shape.iter().all(Option::is_some)
                );
                let name = format!("out{}", k);
                prop_assert!(p.plan.operators[i].outputs.contains(&(name.clone(), next)));
                for &c in &want {
                    prop_assert!(p.plan.operators[c].inputs.contains(&(name.clone(), next)));
                }
                next += 1;
            }
        }
        prop_assert_eq!(p.plan.entries.len(), next);

        // The schedule runs every operator once, producers first.
        let mut wave_of = vec![usize::MAX; ops.len()];
        for (w, wave) in p.schedule.iter().enumerate() {
            prop_assert!(!wave.is_empty());
            for &i in wave {
                prop_assert_eq!(wave_of[i], usize::MAX, "operator {} scheduled twice", i);
                wave_of[i] = w;
            }
        }
        prop_assert!(wave_of.iter().all(|&w| w != usize::MAX), "{:?}", p.schedule);
        for &(j, _, c) in &g.edges {
            prop_assert!(
                wave_of[j] < wave_of[c],
                "{} (wave {}) feeds {} (wave {})",
                g.names[j], wave_of[j], g.names[c], wave_of[c]
            );
        }
        // And each input names its producer.
        for &(j, k, c) in &g.edges {
            let found = p.operators[c]
                .inputs
                .iter()
                .any(|inp| inp.from == Some(j) && inp.name.as_deref() == Some(format!("out{k}").as_str()));
            prop_assert!(found, "{} has no input from {}/out{}", g.names[c], g.names[j], k);
        }
    }
}
