//! Pipeline entries from an operator's side, with a plan published by
//! hand (as the driver does): access rules, dynamic shapes, Clara's
//! `update_shape` and `allocate` rules, strings and scalars, and inputs
//! that were never allocated or are poisoned.

mod common;

use common::context;
use fastio::plan::{EntryKind, EntryPlan, OperatorPlan, POISON_PREFIX, Plan};
use fastio::{Access, Context, Error, Operator};

fn entry(name: &str, kind: EntryKind, element: &str, shape: Vec<Option<usize>>) -> EntryPlan {
    EntryPlan {
        name: name.to_owned(),
        key: name.to_ascii_lowercase(),
        kind,
        element: dtype::Primitive::from_name(element).unwrap(),
        shape,
        producer: 0,
        consumers: vec![1],
    }
}

/// `Prod` makes a static `Prod/Vol` [2, 3], a dynamic `Prod/Dyn` [-1, 4], a
/// string and a scalar; `cons` reads them all.
fn plan() -> Plan {
    let entries = vec![
        entry(
            "Prod/Vol",
            EntryKind::Array,
            "float32",
            vec![Some(2), Some(3)],
        ),
        entry("Prod/Dyn", EntryKind::Array, "int16", vec![None, Some(4)]),
        entry("Prod/Note", EntryKind::String, "uint8", vec![None]),
        entry("Prod/Count", EntryKind::Scalar, "int64", vec![Some(1)]),
    ];
    let names = ["Vol", "Dyn", "Note", "Count"];
    Plan {
        pipeline: "entries".into(),
        operators: vec![
            OperatorPlan {
                name: "Prod".into(),
                inputs: vec![],
                outputs: names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.to_string(), i))
                    .collect(),
            },
            OperatorPlan {
                name: "cons".into(),
                inputs: names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.to_string(), i))
                    .collect(),
                outputs: vec![],
            },
        ],
        entries,
        streaming: None,
    }
}

/// What the driver does before operators start.
fn prepared() -> Context {
    let ctx = context(1 << 20);
    plan().publish(&ctx).unwrap();
    let mut vol = ctx
        .create_array(dtype::Type::primitive(dtype::Primitive::Float32), &[2, 3])
        .unwrap();
    vol.map_mut().unwrap().fill(0);
    vol.publish("prod/vol").unwrap();
    vol.release().unwrap();
    let count = ctx
        .create_array(dtype::Type::primitive(dtype::Primitive::Int64), &[1])
        .unwrap();
    count.publish("prod/count").unwrap();
    ctx
}

#[test]
fn outputs_follow_clara_rules() {
    let ctx = prepared();
    let mut prod = Operator::attach(ctx.clone(), "PROD").unwrap();
    assert_eq!(prod.name(), "Prod");
    let vol = prod.output("vol").unwrap();
    assert_eq!(vol.name(), "Prod/Vol");
    assert_eq!(vol.access(), Access::ReadWrite);
    assert!(vol.is_preallocated() && vol.is_allocated() && !vol.is_dynamic());
    assert_eq!((vol.shape(), vol.size_bytes()), (&[2usize, 3][..], 24));
    // update_shape ignores static dimensions and says so.
    assert_eq!(vol.update_shape(&[0, 1], &[5, 5]).unwrap(), [0, 1]);
    assert_eq!(vol.shape(), &[2, 3]);
    vol.map_mut().unwrap().fill(7);
    // allocate on a static entry reallocates and erases.
    vol.allocate().unwrap();
    assert!(vol.map().unwrap().iter().all(|&b| b == 0));

    let dynamic = prod.output("Prod/Dyn").unwrap();
    assert!(dynamic.is_dynamic() && !dynamic.is_allocated() && !dynamic.is_preallocated());
    assert_eq!(dynamic.dynamic_indices(), [0]);
    assert!(matches!(
        dynamic.allocate(),
        Err(Error::ShapeNotDefined { .. })
    ));
    assert_eq!(dynamic.update_shape(&[0, 1], &[3, 9]).unwrap(), [1]);
    assert_eq!(dynamic.shape(), &[3, 4]);
    dynamic.allocate().unwrap();
    dynamic
        .map_as_ndobject_mut()
        .unwrap()
        .set(&[2, 3], -5i16)
        .unwrap();

    prod.output("note").unwrap().set_string("héllo").unwrap();
    prod.output("count").unwrap().set_scalar(42i64).unwrap();
    assert!(matches!(prod.output("nope"), Err(Error::UnknownEntry(_))));
    drop(prod);

    let cons = Operator::attach(ctx, "cons").unwrap();
    // Issue 22: every input's shape, element type, size and allocation are
    // those its producer published, before any map, and the size is the
    // bytes a mapping gives; inputs of pre-allocated outputs say so.
    let expect: [(&str, &[usize], &str, usize, bool); 4] = [
        ("vol", &[2, 3], "float32", 24, true),
        ("dyn", &[3, 4], "int16", 24, false),
        ("note", &[6], "uint8", 6, false),
        ("count", &[1], "int64", 8, true),
    ];
    for (name, shape, element, bytes, pre) in expect {
        let e = cons.input(name).unwrap();
        assert_eq!(e.shape(), shape, "{name}");
        assert_eq!(e.element_type().to_string(), element, "{name}");
        assert_eq!(e.size_bytes(), bytes, "{name}");
        assert!(e.is_allocated(), "{name}");
        assert_eq!(e.is_preallocated(), pre, "{name}");
        assert_eq!(e.map().unwrap().len(), bytes, "{name}");
    }
    let dyn_in = cons.input("dyn").unwrap();
    assert_eq!(dyn_in.access(), Access::ReadOnly);
    let arr = dyn_in.map_as_ndobject().unwrap();
    assert_eq!(arr.shape(), &[3, 4]);
    assert_eq!(arr.get::<i16>(&[2, 3]).unwrap(), -5);
    assert_eq!(cons.input("note").unwrap().get_string().unwrap(), "héllo");
    assert_eq!(
        cons.input("count").unwrap().get_scalar::<i64>().unwrap(),
        42
    );
    assert_eq!(cons.input("vol").unwrap().map().unwrap().len(), 24);
}

#[test]
fn inputs_are_read_only_and_missing_ones_name_their_producer() {
    let ctx = prepared();
    let mut cons = Operator::attach(ctx.clone(), "cons").unwrap();
    let dyn_name = "Prod/Dyn";
    match cons.input("dyn").unwrap().map() {
        Err(Error::NotAllocated { entry, producer }) => {
            assert_eq!((entry.as_str(), producer.as_str()), (dyn_name, "Prod"));
        }
        other => panic!("{other:?}"),
    }
    assert!(cons.output("dyn").is_err(), "inputs are not outputs");
    let input = cons.inputs().find(|e| e.name() == dyn_name).unwrap();
    assert!(input.map_as_ndobject_mut().is_err());
    // The driver poisons the entries of a producer that failed.
    let mut marker = ctx.create(4).unwrap();
    marker.map_mut().unwrap().copy_from_slice(b"Prod");
    marker.publish(&format!("{POISON_PREFIX}prod/dyn")).unwrap();
    match cons.input("dyn").unwrap().map() {
        Err(Error::Poisoned { entry, operator }) => {
            assert_eq!((entry.as_str(), operator.as_str()), (dyn_name, "Prod"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn attaching_without_a_plan_or_as_an_unknown_operator_is_an_error() {
    let ctx = context(1 << 20);
    assert!(matches!(
        Operator::attach(ctx.clone(), "x"),
        Err(Error::Plan(_))
    ));
    plan().publish(&ctx).unwrap();
    assert!(matches!(
        Operator::attach(ctx, "ghost"),
        Err(Error::Plan(_))
    ));
}

/// Two producers' outputs share the local name `out`; the consumer reads
/// both. Asking for `out` is an error naming both entries (never the first
/// one found); the entry names pick each.
#[test]
fn a_name_that_matches_two_inputs_is_an_error_naming_both() {
    let ctx = context(1 << 20);
    let mut a = entry("m1/out", EntryKind::Array, "uint8", vec![Some(4)]);
    let mut b = entry("m2/out", EntryKind::Array, "uint8", vec![Some(8)]);
    a.producer = 0;
    b.producer = 1;
    a.consumers = vec![2];
    b.consumers = vec![2];
    let plan = Plan {
        pipeline: "two-outs".into(),
        operators: vec![
            OperatorPlan {
                name: "m1".into(),
                inputs: vec![],
                outputs: vec![("out".into(), 0)],
            },
            OperatorPlan {
                name: "m2".into(),
                inputs: vec![],
                outputs: vec![("out".into(), 1)],
            },
            OperatorPlan {
                name: "sink".into(),
                inputs: vec![("out".into(), 0), ("out".into(), 1)],
                outputs: vec![],
            },
        ],
        entries: vec![a, b],
        streaming: None,
    };
    plan.publish(&ctx).unwrap();
    let sink = Operator::attach(ctx, "sink").unwrap();
    match sink.input("OUT") {
        Err(Error::AmbiguousEntry {
            name,
            first,
            second,
        }) => assert_eq!(
            (name.as_str(), first.as_str(), second.as_str()),
            ("OUT", "m1/out", "m2/out")
        ),
        other => panic!("{other:?}"),
    }
    let msg = sink.input("out").unwrap_err().to_string();
    assert!(msg.contains("m1/out") && msg.contains("m2/out"), "{msg}");
    assert_eq!(sink.input("m2/out").unwrap().name(), "m2/out");
    assert_eq!(sink.input("M1/OUT").unwrap().name(), "m1/out");
    assert!(matches!(sink.input("nope"), Err(Error::UnknownEntry(_))));
}

/// Issue 28 (seed 001): an output's shape comes from the plan, its mapping
/// from the allocation. When they disagree (a plan rewritten after the
/// driver allocated: 8 MiB claimed, 1 MiB there) the entry is refused
/// instead of reporting a size the mapping does not have.
#[test]
fn an_output_whose_plan_disagrees_with_its_allocation_is_refused() {
    let ctx = context(16 << 20);
    plan().publish(&ctx).unwrap();
    // The plan says [2, 3] float32 (24 bytes); the allocation is [1, 3].
    let small = ctx
        .create_array(dtype::Type::primitive(dtype::Primitive::Float32), &[1, 3])
        .unwrap();
    small.publish("prod/vol").unwrap();
    small.release().unwrap();
    match Operator::attach(ctx.clone(), "Prod") {
        Err(Error::Corrupt(why)) => assert!(
            why.contains("Prod/Vol") && why.contains("24 bytes") && why.contains("12 bytes"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    // The consumer reads the producer's published shape: its size is the
    // mapping's.
    let cons = Operator::attach(ctx, "cons").unwrap();
    let vol = cons.input("vol").unwrap();
    assert_eq!(vol.size_bytes(), vol.map().unwrap().len());
    assert_eq!(vol.size_bytes(), 12);
}
