//! Checking a parsed definition against Clara's rules and resolving it
//! into a [`Pipeline`]: every error is collected (not only the first), each
//! with its line, column and YAML path.

use std::collections::BTreeMap;

use dtype::Primitive;
use dtype::clara::primitive;
use fastio::plan::{EntryKind, EntryPlan, OperatorPlan, Plan};
use serde_saphyr::{Location, Spanned};

use crate::load::Report;
use crate::model::{InputDoc, OutputDoc, PipelineDoc};
use crate::pipeline::{InputDef, IoType, OperatorDef, OutputDef, Pipeline};

/// Longest name.
pub const MAX_NAME_LEN: usize = 255;

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_name(r: &mut Report, name: &Spanned<String>, path: &str, what: &str) {
    if !valid_name(&name.value) {
        r.error(
            name.referenced,
            path,
            format!(
                "{what} {:?} must be 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 _ -",
                name.value
            ),
        );
    }
}

/// The fields of an input or output, as one view.
struct Io<'a> {
    ty: &'a Option<Spanned<String>>,
    element: &'a Option<Spanned<String>>,
    shape: &'a Option<Spanned<Vec<Spanned<i64>>>>,
    path_key: &'a Option<Spanned<String>>,
}

fn io_type(r: &mut Report, io: Io<'_>, at: Location, path: &str) -> Option<IoType> {
    let Some(ty) = io.ty else {
        r.error(at, path, "`type` is missing");
        return None;
    };
    let tpath = format!("{path}.type");
    let not_for = |r: &mut Report, key: &str, at: Location| {
        r.error(
            at,
            &format!("{path}.{key}"),
            format!("`{key}` does not belong to type {}", ty.value),
        );
    };
    match ty.value.as_str() {
        "array" => {
            if let Some(p) = io.path_key {
                not_for(r, "path", p.referenced);
            }
            let element = match io.element {
                None => {
                    r.error(ty.referenced, path, "an array needs `element-type`");
                    None
                }
                Some(e) => {
                    let p = primitive(&e.value);
                    if p.is_none() {
                        r.error(
                            e.referenced,
                            &format!("{path}.element-type"),
                            format!("unknown element type {:?}", e.value),
                        );
                    }
                    p
                }
            };
            let shape = match io.shape {
                None => {
                    r.error(ty.referenced, path, "an array needs `shape`");
                    None
                }
                Some(s) if s.value.is_empty() => {
                    r.error(s.referenced, &format!("{path}.shape"), "the shape is empty");
                    None
                }
                Some(s) => {
                    let mut dims = Vec::new();
                    let mut ok = true;
                    for (k, d) in s.value.iter().enumerate() {
                        match d.value {
                            -1 | 0 => dims.push(None),
                            n if n > 0 => dims.push(Some(n as usize)),
                            n => {
                                ok = false;
                                r.error(
                                    d.referenced,
                                    &format!("{path}.shape[{k}]"),
                                    format!("{n} is not -1, 0 or a positive size"),
                                );
                            }
                        }
                    }
                    ok.then_some(dims)
                }
            };
            Some(IoType::Array {
                element: element?,
                shape: shape?,
            })
        }
        "string" => {
            for (key, v) in [("element-type", io.element), ("path", io.path_key)] {
                if let Some(v) = v {
                    not_for(r, key, v.referenced);
                }
            }
            if let Some(s) = io.shape {
                not_for(r, "shape", s.referenced);
            }
            Some(IoType::String)
        }
        "stream" => {
            if let Some(s) = io.shape {
                not_for(r, "shape", s.referenced);
            }
            let element = match io.element {
                Some(e) => e.value.clone(),
                None => {
                    r.error(ty.referenced, path, "a stream needs `element-type`");
                    String::new()
                }
            };
            match io.path_key {
                Some(p) if p.value.starts_with('/') => Some(IoType::Stream {
                    element,
                    path: p.value.clone(),
                }),
                Some(p) => {
                    r.error(
                        p.referenced,
                        &format!("{path}.path"),
                        format!("a stream's path must be absolute, not {:?}", p.value),
                    );
                    None
                }
                None => {
                    r.error(ty.referenced, path, "a stream needs `path`");
                    None
                }
            }
        }
        other => match primitive(other) {
            Some(p) => {
                if let Some(e) = io.element {
                    not_for(r, "element-type", e.referenced);
                }
                if let Some(s) = io.shape {
                    not_for(r, "shape", s.referenced);
                }
                if let Some(v) = io.path_key {
                    not_for(r, "path", v.referenced);
                }
                Some(IoType::Scalar(p))
            }
            None => {
                r.error(
                    ty.referenced,
                    &tpath,
                    format!(
                        "unknown type {other:?} (array, string, stream, or a primitive such as float32 or f32)"
                    ),
                );
                None
            }
        },
    }
}

fn version_at_least_0_5(text: &str) -> bool {
    let parts: Vec<u64> = text
        .split('.')
        .map(|p| p.parse().unwrap_or(u64::MAX))
        .collect();
    if parts.is_empty() || parts.len() > 3 || parts.contains(&u64::MAX) {
        return false;
    }
    let get = |i: usize| parts.get(i).copied().unwrap_or(0);
    (get(0), get(1), get(2)) >= (0, 5, 0)
}

/// Checks `doc` and resolves it, collecting every error and warning.
pub(crate) fn validate(doc: &PipelineDoc, r: &mut Report) -> Option<Pipeline> {
    let v = &doc.api_version;
    if !version_at_least_0_5(&v.value.0) {
        r.error(
            v.referenced,
            "api-version",
            format!(
                "api-version {:?}: typed pipelines need 0.5.0 or later",
                v.value.0
            ),
        );
    }
    if let Some(p) = &doc.pull_secrets {
        r.warn(p.referenced, "pull-secrets", "ignored by the local driver");
    }
    if doc.operators.is_empty() {
        r.error(
            doc.name.referenced,
            "operators",
            "the pipeline has no operator",
        );
    }
    // Operator names, unique case-insensitively.
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    for (i, op) in doc.operators.iter().enumerate() {
        let path = format!("operators[{i}].name");
        check_name(r, &op.name, &path, "operator name");
        let key = op.name.value.to_ascii_lowercase();
        if let Some(&j) = by_name.get(&key) {
            r.error(
                op.name.referenced,
                &path,
                format!(
                    "operator {:?} is already defined (operators[{j}]; names are case-insensitive)",
                    op.name.value
                ),
            );
        } else {
            by_name.insert(key, i);
        }
    }
    // Outputs first (inputs refer to them).
    let mut outputs: Vec<Vec<Option<OutputDef>>> = Vec::new();
    for (i, op) in doc.operators.iter().enumerate() {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut list = Vec::new();
        for (k, out) in op.output.iter().flatten().enumerate() {
            // Diagnostics about an output point at it, not its operator.
            list.push(output_def(r, &out.value, i, k, out.referenced, &mut seen));
        }
        outputs.push(list);
        for (key, v) in [
            ("services", &op.services),
            ("models", &op.models),
            ("requests", &op.requests),
        ] {
            if let Some(v) = v {
                r.warn(
                    v.referenced,
                    &format!("operators[{i}].{key}"),
                    "ignored by the local driver",
                );
            }
        }
    }
    let mut operators = Vec::new();
    for (i, op) in doc.operators.iter().enumerate() {
        let mut inputs: Vec<InputDef> = Vec::new();
        // Where each producer's output was first declared as an input.
        let mut declared: BTreeMap<(usize, String), usize> = BTreeMap::new();
        for (k, inp) in op.input.iter().flatten().enumerate() {
            let Some(d) = input_def(r, &inp.value, i, k, inp.referenced, &by_name, &outputs) else {
                continue;
            };
            if let (Some(from), Some(name)) = (d.from, &d.name) {
                let key = (from, name.to_ascii_lowercase());
                if let Some(&j) = declared.get(&key) {
                    let at = inp
                        .value
                        .name
                        .as_ref()
                        .map_or(inp.referenced, |n| n.referenced);
                    r.error(
                        at,
                        &format!("operators[{i}].input[{k}]"),
                        format!(
                            "input {}/{} is already declared in this operator (input[{j}])",
                            doc.operators[from].name.value, name
                        ),
                    );
                    continue;
                }
                declared.insert(key, k);
            }
            inputs.push(d);
        }
        let c = op.container.as_ref();
        let command: Vec<String> = c
            .and_then(|c| c.command.as_ref())
            .map(|cmd| cmd.value.iter().map(|t| t.value.0.clone()).collect())
            .unwrap_or_default();
        if command.is_empty() {
            r.warn(
                op.name.referenced,
                &format!("operators[{i}].container.command"),
                "no command: `fastio run` cannot start this operator",
            );
        }
        let mut variables = BTreeMap::new();
        for (k, v) in c.and_then(|c| c.variables.as_ref()).into_iter().flatten() {
            variables.insert(k.clone(), v.value.0.clone());
        }
        operators.push(OperatorDef {
            name: op.name.value.clone(),
            image: c.and_then(|c| c.image.as_ref()).map(|s| s.value.clone()),
            tag: c
                .and_then(|c| c.tag.as_ref())
                .map_or("latest".to_owned(), |t| t.value.0.clone()),
            command,
            variables,
            inputs,
            outputs: outputs[i].iter().flatten().cloned().collect(),
        });
    }
    let schedule = schedule(doc, &operators, r);
    if r.has_errors() {
        return None;
    }
    let mut plan = plan(&doc.name.value, &operators);
    if let Some(sd) = &doc.streaming {
        plan.streaming = crate::streaming::check(sd, &operators, &doc.operators, &plan, r);
        if r.has_errors() {
            return None;
        }
    }
    let placement = match &doc.placement {
        None => crate::placement::Placement::single(operators.len()),
        Some(pd) => crate::placement::check(pd, &operators, r)?,
    };
    Some(Pipeline {
        name: doc.name.value.clone(),
        api_version: doc.api_version.value.0.clone(),
        operators,
        plan,
        schedule,
        placement,
        record: doc
            .streaming
            .as_ref()
            .and_then(|s| s.value.record.as_ref())
            .map(|r| std::path::PathBuf::from(&r.value)),
    })
}

fn output_def(
    r: &mut Report,
    out: &OutputDoc,
    op: usize,
    k: usize,
    node_at: Location,
    seen: &mut BTreeMap<String, usize>,
) -> Option<OutputDef> {
    let path = format!("operators[{op}].output[{k}]");
    let at = out.ty.as_ref().map_or(node_at, |t| t.referenced);
    let ty = io_type(
        r,
        Io {
            ty: &out.ty,
            element: &out.element_type,
            shape: &out.shape,
            path_key: &out.path,
        },
        at,
        &path,
    );
    let Some(name) = &out.name else {
        r.error(at, &path, "an output needs a `name` (api-version 0.5.0+)");
        return None;
    };
    check_name(r, name, &format!("{path}.name"), "output name");
    let key = name.value.to_ascii_lowercase();
    if let Some(&j) = seen.get(&key) {
        r.error(
            name.referenced,
            &format!("{path}.name"),
            format!(
                "output {:?} is already defined in this operator (output[{j}])",
                name.value
            ),
        );
        return None;
    }
    seen.insert(key, k);
    Some(OutputDef {
        name: name.value.clone(),
        ty: ty?,
    })
}

fn input_def(
    r: &mut Report,
    inp: &InputDoc,
    op: usize,
    k: usize,
    node_at: Location,
    by_name: &BTreeMap<String, usize>,
    outputs: &[Vec<Option<OutputDef>>],
) -> Option<InputDef> {
    let path = format!("operators[{op}].input[{k}]");
    let at = inp.ty.as_ref().map_or(node_at, |t| t.referenced);
    let ty = io_type(
        r,
        Io {
            ty: &inp.ty,
            element: &inp.element_type,
            shape: &inp.shape,
            path_key: &inp.path,
        },
        at,
        &path,
    );
    if let Some(n) = &inp.name {
        check_name(r, n, &format!("{path}.name"), "input name");
    }
    let Some(from) = &inp.from else {
        // The pipeline payload.
        return Some(InputDef {
            name: inp.name.as_ref().map(|n| n.value.clone()),
            from: None,
            ty: ty?,
        });
    };
    let fpath = format!("{path}.from");
    let Some(&producer) = by_name.get(&from.value.to_ascii_lowercase()) else {
        r.error(
            from.referenced,
            &fpath,
            format!("`from` names no operator: {:?}", from.value),
        );
        return None;
    };
    if producer == op {
        r.error(from.referenced, &fpath, "an operator cannot feed itself");
        return None;
    }
    let Some(name) = &inp.name else {
        r.error(
            from.referenced,
            &path,
            "an input with `from` needs the `name` of the producer's output",
        );
        return None;
    };
    let Some(out) = outputs[producer]
        .iter()
        .flatten()
        .find(|o| o.name.eq_ignore_ascii_case(&name.value))
    else {
        r.error(
            name.referenced,
            &format!("{path}.name"),
            format!("operator {:?} has no output {:?}", from.value, name.value),
        );
        return None;
    };
    let ty = ty?;
    if !ty.matches(&out.ty) {
        r.error(
            at,
            &path,
            format!(
                "type {} does not match output {}/{} of type {} (types must match exactly)",
                ty.describe(),
                from.value,
                out.name,
                out.ty.describe()
            ),
        );
        return None;
    }
    Some(InputDef {
        name: Some(out.name.clone()),
        from: Some(producer),
        ty,
    })
}

/// Kahn's algorithm over the `from` edges: waves of operators, or a cycle
/// error naming the operators on it.
fn schedule(doc: &PipelineDoc, ops: &[OperatorDef], r: &mut Report) -> Vec<Vec<usize>> {
    let n = ops.len();
    let mut indegree = vec![0usize; n];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, op) in ops.iter().enumerate() {
        let mut deps: Vec<usize> = op.inputs.iter().filter_map(|inp| inp.from).collect();
        deps.sort_unstable();
        deps.dedup();
        for d in deps {
            indegree[i] += 1;
            users[d].push(i);
        }
    }
    let mut waves = Vec::new();
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = 0;
    while !ready.is_empty() {
        let mut next = Vec::new();
        for &i in &ready {
            done += 1;
            for &u in &users[i] {
                indegree[u] -= 1;
                if indegree[u] == 0 {
                    next.push(u);
                }
            }
        }
        next.sort_unstable();
        waves.push(std::mem::replace(&mut ready, next));
    }
    if done < n {
        // What is left waits on a cycle; of that, drop what only sits
        // downstream of one (nothing left depends on it), so that the
        // message names the operators on the cycle.
        let mut left: Vec<bool> = (0..n).map(|i| indegree[i] > 0).collect();
        loop {
            let sink = (0..n).find(|&i| left[i] && !users[i].iter().any(|&u| left[u]));
            match sink {
                Some(i) => left[i] = false,
                None => break,
            }
        }
        let on_cycle: Vec<&str> = (0..n)
            .filter(|&i| left[i])
            .map(|i| ops[i].name.as_str())
            .collect();
        let first = (0..n).find(|&i| left[i]).unwrap_or(0);
        r.error(
            doc.operators[first].name.referenced,
            &format!("operators[{first}]"),
            format!("the operators form a cycle: {}", on_cycle.join(", ")),
        );
    }
    waves
}

/// The Fast I/O plan: one entry per shared-memory output.
fn plan(pipeline: &str, ops: &[OperatorDef]) -> Plan {
    let mut entries: Vec<EntryPlan> = Vec::new();
    let mut index: BTreeMap<(usize, String), usize> = BTreeMap::new();
    let mut operators: Vec<OperatorPlan> = ops
        .iter()
        .map(|o| OperatorPlan {
            name: o.name.clone(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        })
        .collect();
    for (i, op) in ops.iter().enumerate() {
        for out in op.outputs.iter().filter(|o| o.ty.is_shared()) {
            let (kind, element, shape) = match &out.ty {
                IoType::Array { element, shape } => (EntryKind::Array, *element, shape.clone()),
                IoType::String => (EntryKind::String, Primitive::UInt8, vec![None]),
                IoType::Scalar(p) => (EntryKind::Scalar, *p, vec![Some(1)]),
                IoType::Stream { .. } => continue,
            };
            let name = format!("{}/{}", op.name, out.name);
            index.insert((i, out.name.to_ascii_lowercase()), entries.len());
            operators[i].outputs.push((out.name.clone(), entries.len()));
            entries.push(EntryPlan {
                key: name.to_ascii_lowercase(),
                name,
                kind,
                element,
                shape,
                producer: i,
                consumers: Vec::new(),
            });
        }
    }
    for (i, op) in ops.iter().enumerate() {
        for inp in op.inputs.iter().filter(|x| x.ty.is_shared()) {
            let (Some(from), Some(name)) = (inp.from, &inp.name) else {
                continue;
            };
            if let Some(&e) = index.get(&(from, name.to_ascii_lowercase())) {
                operators[i].inputs.push((name.clone(), e));
                if !entries[e].consumers.contains(&i) {
                    entries[e].consumers.push(i);
                }
            }
        }
    }
    Plan {
        pipeline: pipeline.to_owned(),
        operators,
        entries,
        streaming: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_error_names_only_the_operators_on_it() {
        let yaml = "\
api-version: 0.5.0
name: c
operators:
- name: a
  input: [{from: b, name: o, type: u8}]
  output: [{name: o, type: u8}]
- name: b
  input: [{from: a, name: o, type: u8}]
  output: [{name: o, type: u8}]
- name: c
  input: [{from: a, name: o, type: u8}]
";
        let errors = crate::Definition::parse("c.yaml", yaml, &[]).unwrap_err();
        let e = errors.iter().find(|d| d.message.contains("cycle")).unwrap();
        assert!(e.message.ends_with("cycle: a, b"), "{}", e.message);
        assert_eq!(e.line, 4);
    }

    #[test]
    fn versions_and_names() {
        assert!(version_at_least_0_5("0.5.0"));
        assert!(version_at_least_0_5("0.6"));
        assert!(version_at_least_0_5("1.0.0"));
        assert!(!version_at_least_0_5("0.4.0"));
        assert!(!version_at_least_0_5("zero"));
        assert!(valid_name("op-1_A"));
        assert!(!valid_name("op 1"));
        assert!(!valid_name(""));
        assert!(!valid_name(&"a".repeat(256)));
    }
}
