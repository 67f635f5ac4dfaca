//! The example pipelines of Clara's documentation (seeds 000 and 001, in
//! `tests/data`) parse, and resolve to the entries the documentation
//! describes: `<operator>/<output>` names, pre-allocated (static) shapes,
//! dynamic ones (-1), strings always dynamic, primitives one value.

use std::path::Path;

use fastio::plan::EntryKind;
use fastio_pipeline::{Definition, IoType, Severity};

fn load(name: &str) -> Definition {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    match Definition::read(&path, &[]) {
        Ok(def) => def,
        Err(diags) => panic!(
            "{name}:\n{}",
            diags
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// The examples have no `container.command`: one warning per operator.
fn assert_only_command_warnings(def: &Definition) {
    assert_eq!(def.warnings.len(), def.pipeline.operators.len());
    for (i, w) in def.warnings.iter().enumerate() {
        assert_eq!(w.severity, Severity::Warning);
        assert_eq!(w.path, format!("operators[{i}].container.command"), "{w}");
    }
}

fn dicom_payload() -> IoType {
    IoType::Stream {
        element: "dicom".to_owned(),
        path: "/input".to_owned(),
    }
}

#[test]
fn seed001_static_outputs_are_preallocated() {
    let def = load("seed001_static.yaml");
    assert_only_command_warnings(&def);
    let p = &def.pipeline;
    assert_eq!(p.name, "fastio-example-pipeline");
    assert_eq!(p.api_version, "0.5.0");
    let op = &p.operators[0];
    assert_eq!(op.name, "operator-static");
    assert_eq!(op.image.as_deref(), Some("my-docker-image"));
    assert_eq!(op.tag, "my-tag");
    assert_eq!(op.inputs.len(), 1);
    assert_eq!(op.inputs[0].from, None);
    assert_eq!(op.inputs[0].ty, dicom_payload());

    let e = &p.plan.entries;
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].name, "operator-static/dicom-data-in-shared-memory");
    assert_eq!(e[0].kind, EntryKind::Array);
    assert_eq!(e[0].element.name(), "float32");
    assert_eq!(e[0].shape, [Some(3), Some(224), Some(255), Some(127)]);
    assert!(e[0].is_static());
    assert!(e[0].dynamic_indices().is_empty());
    // "effectively an array with shape = [1] and element-type = float32"
    assert_eq!(e[1].name, "operator-static/my-second-fastio-output");
    assert_eq!(e[1].kind, EntryKind::Scalar);
    assert_eq!(e[1].element.name(), "float32");
    assert_eq!(e[1].shape, [Some(1)]);
    assert!(e[1].is_static());
    assert!(e.iter().all(|x| x.producer == 0 && x.consumers.is_empty()));
    assert_eq!(p.schedule, [vec![0]]);
}

#[test]
fn seed001_dynamic_outputs_are_not_preallocated() {
    let def = load("seed001_dynamic.yaml");
    assert_only_command_warnings(&def);
    let e = &def.pipeline.plan.entries;
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].name, "operator-dynamic/dicom-data-in-shared-memory");
    assert_eq!(e[0].kind, EntryKind::Array);
    assert_eq!(e[0].element.name(), "float32");
    assert_eq!(e[0].shape, [Some(3), None, None, None]);
    assert!(!e[0].is_static());
    assert_eq!(e[0].dynamic_indices(), [1, 2, 3]);
    // "effectively an array of shape = [-1] and element-type = uint8"
    assert_eq!(e[1].name, "operator-dynamic/my-second-fastio-output");
    assert_eq!(e[1].kind, EntryKind::String);
    assert_eq!(e[1].element.name(), "uint8");
    assert_eq!(e[1].shape, [None]);
    assert!(!e[1].is_static());
    assert_eq!(e[1].dynamic_indices(), [0]);
}

#[test]
fn seed001_pair_shares_one_entry_under_the_producers_name() {
    let def = load("seed001_pair.yaml");
    assert_only_command_warnings(&def);
    let p = &def.pipeline;
    let names: Vec<&str> = p.operators.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["operator-dynamic-out", "operator-dynamic-in"]);
    assert_eq!(p.operators[0].image.as_deref(), Some("my-docker-image-out"));
    assert_eq!(p.operators[1].image.as_deref(), Some("my-docker-image-in"));

    let e = &p.plan.entries;
    assert_eq!(e.len(), 1);
    // Both operators see the entry as operator-dynamic-out/dicom-data-in-shared-memory.
    assert_eq!(
        e[0].name,
        "operator-dynamic-out/dicom-data-in-shared-memory"
    );
    assert_eq!(e[0].key, e[0].name);
    assert_eq!(e[0].shape, [Some(3), None, None, None]);
    assert_eq!(e[0].producer, 0);
    assert_eq!(e[0].consumers, [1]);
    assert_eq!(
        p.plan.operators[0].outputs,
        [("dicom-data-in-shared-memory".to_owned(), 0)]
    );
    assert_eq!(
        p.plan.operators[1].inputs,
        [("dicom-data-in-shared-memory".to_owned(), 0)]
    );
    assert_eq!(p.operators[1].inputs[0].from, Some(0));
    assert_eq!(p.schedule, [vec![0], vec![1]]);
}

#[test]
fn seed000_entries_static_and_dynamic() {
    let def = load("seed000.yaml");
    assert_only_command_warnings(&def);
    let p = &def.pipeline;
    let e = &p.plan.entries;
    let names: Vec<&str> = e.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "producer/preallocated",
            "producer/dynamic",
            "producer/report",
            "producer/threshold"
        ]
    );
    // 7.13.1: no -1 or 0 in the shape: pre-allocated.
    assert!(e[0].is_static());
    assert_eq!(e[0].shape, [Some(3), Some(224), Some(224)]);
    // 7.13.2: shape = [3, -1, 224, -1]: only shape[1] and shape[3] change.
    assert!(!e[1].is_static());
    assert_eq!(e[1].shape, [Some(3), None, Some(224), None]);
    assert_eq!(e[1].dynamic_indices(), [1, 3]);
    // A string is always dynamic; a primitive is one value.
    assert_eq!(e[2].kind, EntryKind::String);
    assert!(!e[2].is_static());
    assert_eq!(e[3].kind, EntryKind::Scalar);
    assert!(e[3].is_static());
    for x in e {
        assert_eq!(x.producer, 0);
        assert_eq!(x.consumers, [1]);
    }
    // The consumer's stream output is on disk: not an entry.
    assert_eq!(
        p.operators[1].outputs[0].ty,
        IoType::Stream {
            element: "dicom".to_owned(),
            path: "/output".to_owned(),
        }
    );
    assert_eq!(p.plan.operators[1].inputs.len(), 4);
    assert!(p.plan.operators[1].outputs.is_empty());
    assert_eq!(p.schedule, [vec![0], vec![1]]);
}
