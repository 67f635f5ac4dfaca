//! The table state machine against a reference model, with simulated
//! crashes at every store.
//!
//! The tables are a sequential structure behind a robust mutex, so the
//! interleavings that matter are "a process died after store k of an
//! operation" (and "the recoverer died after store k of recovery"). The
//! exhaustive test runs a script of operations by three participants and,
//! at every step, crashes the acting participant at every one of its
//! stores, recovers, and requires (1) every table invariant and (2) that
//! the observable state — which allocations are live, which names resolve
//! to what, and what the surviving participants hold — equals the model
//! either before or after the operation: operations are atomic under
//! crashes. It then crashes the recovery itself at every store and
//! requires a second recovery to reach the same result.

use std::collections::{BTreeMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;

use crate::error::Error;
use crate::layout::{Layout, PAGE};
use crate::names::Meta;
use crate::ops::Begun;
use crate::table::{AllocId, Me, Table, crash};

const PARTICIPANTS: usize = 3;

struct World {
    words: Vec<AtomicU64>,
    layout: Layout,
    me: [Me; PARTICIPANTS],
    alive: HashSet<u32>,
}

/// `get_named`, giving back the metadata as published.
fn get_meta(t: &Table<'_>, name: &str, me: Me) -> crate::Result<(AllocId, u64, Meta)> {
    t.get_named(name, me, |_, _, text, dims| {
        Ok(Meta {
            type_text: text.to_owned(),
            dims: dims.into_iter().map(|d| d as u64).collect(),
        })
    })
}

fn meta() -> Meta {
    Meta {
        type_text: "uint8".into(),
        dims: vec![1],
    }
}

impl World {
    fn new() -> World {
        let layout = Layout::compute(0, 4, 3, PARTICIPANTS as u32, 24 * PAGE).unwrap();
        let w = World {
            words: (0..layout.words).map(|_| AtomicU64::new(0)).collect(),
            layout,
            me: std::array::from_fn(|s| Me {
                token: 0x100 | s as u32,
                slot: s as u32,
            }),
            alive: (0..PARTICIPANTS as u32).map(|s| 0x100 | s).collect(),
        };
        w.t().init(6 * PAGE);
        w
    }
    fn t(&self) -> Table<'_> {
        Table::new(&self.words, self.layout).unwrap()
    }
    fn snapshot(&self) -> Vec<u64> {
        self.words
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }
    fn restore(&self, s: &[u64]) {
        for (w, v) in self.words.iter().zip(s) {
            w.store(*v, Ordering::Relaxed);
        }
    }
    /// Participant `p` dies; its slot gets a new occupant (new token).
    fn kill(&mut self, p: usize) {
        self.alive.remove(&self.me[p].token);
        self.me[p].token += 0x100;
        self.alive.insert(self.me[p].token);
    }
    fn recover(&self) {
        let alive = &self.alive;
        self.t().recover(&mut |t| alive.contains(&t)).unwrap();
    }
    fn create(&self, p: usize, size: u64) -> Result<AllocId, Error> {
        let t = self.t();
        let me = self.me[p];
        match t.begin_create(size, me, &mut Vec::new())? {
            Begun::Warm(id) => Ok(id),
            Begun::Cold { id, .. } => t.finish_create(id, size, me, true).map(|_| id),
        }
    }
}

/// Script operations; handles are indices into `Model::handles`.
#[derive(Debug, Clone, Copy)]
enum Op {
    Create(usize, u64),
    Publish(usize, &'static str),
    Get(usize, &'static str),
    Release(usize),
    Free(usize),
    MapWrite(usize),
    UnmapWrite(usize),
    MapRead(usize),
    UnmapRead(usize),
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    /// Local references: `(participant, allocation)`, `None` once dropped.
    handles: Vec<Option<(usize, AllocId)>>,
    names: BTreeMap<String, AllocId>,
    doomed: HashSet<AllocId>,
    known: Vec<AllocId>,
}

impl Model {
    fn live(&self, id: AllocId) -> bool {
        self.handles.iter().flatten().any(|h| h.1 == id)
            || (!self.doomed.contains(&id) && self.names.values().any(|&v| v == id))
    }
    fn without(&self, p: usize) -> Model {
        let mut m = self.clone();
        for h in m.handles.iter_mut() {
            if matches!(h, Some((q, _)) if *q == p) {
                *h = None;
            }
        }
        m
    }
    fn held(&self, p: usize, id: AllocId) -> u32 {
        self.handles
            .iter()
            .flatten()
            .filter(|h| **h == (p, id))
            .count() as u32
    }
}

/// The operation's participant.
fn actor(op: Op, m: &Model) -> usize {
    match op {
        Op::Create(p, _) | Op::Publish(p, _) | Op::Get(p, _) => p,
        Op::Release(h)
        | Op::Free(h)
        | Op::MapWrite(h)
        | Op::UnmapWrite(h)
        | Op::MapRead(h)
        | Op::UnmapRead(h) => m.handles[h].unwrap().0,
    }
}

/// Applies `op` to the world and, if it succeeds, to the model.
fn apply(w: &World, m: &mut Model, op: Op, last: &mut Option<usize>) -> Result<(), Error> {
    let t = w.t();
    let h = |i: usize| m.handles[i].unwrap();
    match op {
        Op::Create(p, pages) => {
            let id = w.create(p, pages * PAGE - 1)?;
            m.handles.push(Some((p, id)));
            m.known.push(id);
            *last = Some(m.handles.len() - 1);
        }
        Op::Publish(p, name) => {
            let (_, id) = h(last.unwrap());
            t.publish(id, name, &meta())?;
            let _ = p;
            m.names.insert(name.into(), id);
        }
        Op::Get(p, name) => {
            let (id, _, got) = get_meta(&t, name, w.me[p])?;
            assert_eq!(got, meta());
            assert_eq!(m.names.get(name), Some(&id));
            m.handles.push(Some((p, id)));
            *last = Some(m.handles.len() - 1);
        }
        Op::Release(i) | Op::Free(i) => {
            let (p, id) = h(i);
            if matches!(op, Op::Free(_)) {
                t.free(id, w.me[p])?;
                m.doomed.insert(id);
                m.names.retain(|_, v| *v != id);
            } else {
                t.release(id, w.me[p])?;
            }
            m.handles[i] = None;
        }
        Op::MapWrite(i) => t.map_write(h(i).1, w.me[h(i).0])?,
        Op::UnmapWrite(i) => t.unmap_write(h(i).1, w.me[h(i).0])?,
        Op::MapRead(i) => t.map_read(h(i).1, w.me[h(i).0])?,
        Op::UnmapRead(i) => t.unmap_read(h(i).1, w.me[h(i).0])?,
    }
    Ok(())
}

/// The observable state of the tables, in the model's terms.
fn observed(w: &World, m: &Model) -> (Vec<bool>, BTreeMap<String, AllocId>, Vec<u32>) {
    let t = w.t();
    let live = m.known.iter().map(|&id| t.is_live(id)).collect();
    let names = t
        .all_names()
        .unwrap()
        .into_iter()
        .map(|p| (p.name, p.target))
        .collect();
    let holds = (0..PARTICIPANTS)
        .flat_map(|p| m.known.iter().map(move |&id| (p, id)))
        .map(|(p, id)| {
            let e = t.holds(id.idx, w.me[p].slot);
            if t.is_live(id) && e.token == w.me[p].token {
                e.holds
            } else {
                0
            }
        })
        .collect();
    (live, names, holds)
}

fn expected(m: &Model) -> (Vec<bool>, BTreeMap<String, AllocId>, Vec<u32>) {
    let live = m.known.iter().map(|&id| m.live(id)).collect();
    let holds = (0..PARTICIPANTS)
        .flat_map(|p| m.known.iter().map(move |&id| (p, id)))
        .map(|(p, id)| if m.live(id) { m.held(p, id) } else { 0 })
        .collect();
    (live, m.names.clone(), holds)
}

/// Runs `f` with a crash after `k` stores; true if it crashed.
fn crashes(k: usize, f: impl FnOnce()) -> bool {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<crash::Crash>() {
                default(info);
            }
        }));
    });
    crash::arm(Some(k));
    let r = catch_unwind(AssertUnwindSafe(f));
    crash::arm(None);
    match r {
        Ok(()) => false,
        Err(payload) if payload.is::<crash::Crash>() => true,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

fn script() -> Vec<Op> {
    use Op::*;
    // Handles: 0 = A's x, 1 = B's x (kept mapped to the end), 2 = C's x
    // (via "x2"), 3 = A's y, 4 = B's y, 5 = C's z, 6 = A's big.
    vec![
        Create(0, 2),
        MapWrite(0),
        UnmapWrite(0),
        Publish(0, "x"),
        Publish(0, "x2"),
        Get(1, "x"),
        MapRead(1),
        Get(2, "x2"),
        Release(0),
        Create(0, 1),
        Publish(0, "y"),
        Release(3),
        Free(2),
        Get(1, "y"),
        MapRead(4),
        UnmapRead(4),
        Create(2, 2),
        Create(0, 6),
        Free(6),
        Free(4),
        Free(5),
    ]
}

#[test]
fn script_runs_and_reclaims_everything() {
    let w = World::new();
    let mut m = Model::default();
    let mut last = None;
    for op in script() {
        apply(&w, &mut m, op, &mut last).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        w.t()
            .check()
            .unwrap_or_else(|e| panic!("after {op:?}: {e}"));
        assert_eq!(observed(&w, &m), expected(&m), "after {op:?}");
    }
    // Handle 1 (B's read-mapped x) is still held: x stays until it goes.
    assert!(w.t().is_live(m.known[0]));
    apply(&w, &mut m, Op::UnmapRead(1), &mut last).unwrap();
    apply(&w, &mut m, Op::Release(1), &mut last).unwrap();
    assert!(m.known.iter().all(|&id| !w.t().is_live(id)));
    // Reclaimed blocks are cached up to the limit (6 pages), the rest
    // given back.
    let cached = w.t().get(crate::layout::hdr::CACHED_BYTES);
    assert!(cached > 0 && cached <= 6 * PAGE, "{cached}");
    w.t().check().unwrap();
}

#[test]
fn semantic_errors() {
    let w = World::new();
    let t = w.t();
    let a = w.create(0, 10).unwrap();
    t.publish(a, "n", &meta()).unwrap();
    assert!(matches!(
        t.publish(a, "n", &meta()),
        Err(Error::NameExists(_))
    ));
    assert!(matches!(
        get_meta(&t, "m", w.me[1]),
        Err(Error::UnknownName(_))
    ));
    t.map_write(a, w.me[0]).unwrap();
    assert!(matches!(t.map_read(a, w.me[0]), Err(Error::MapConflict(_))));
    let (b, _, _) = get_meta(&t, "n", w.me[1]).unwrap();
    assert!(matches!(
        t.map_write(b, w.me[1]),
        Err(Error::MapConflict(_))
    ));
    t.unmap_write(a, w.me[0]).unwrap();
    t.map_read(b, w.me[1]).unwrap();
    assert!(matches!(
        t.map_write(a, w.me[0]),
        Err(Error::MapConflict(_))
    ));
    t.free(a, w.me[0]).unwrap();
    // Freed: no new gets, maps or publishes; the existing mapping stays.
    assert!(matches!(
        get_meta(&t, "n", w.me[2]),
        Err(Error::UnknownName(_))
    ));
    assert!(matches!(t.map_read(b, w.me[1]), Err(Error::Freed)));
    assert!(matches!(t.publish(b, "o", &meta()), Err(Error::Freed)));
    assert!(t.is_live(b));
    t.unmap_read(b, w.me[1]).unwrap();
    t.release(b, w.me[1]).unwrap();
    assert!(!t.is_live(b));
    // Capacity: 4 records, 3 names, 24 pages.
    assert!(matches!(
        w.create(0, 25 * PAGE),
        Err(Error::CapacityExceeded {
            resource: "bytes",
            ..
        })
    ));
    let ids: Vec<_> = (0..4).map(|_| w.create(0, 1).unwrap()).collect();
    assert!(matches!(
        w.create(0, 1),
        Err(Error::CapacityExceeded {
            resource: "allocations",
            ..
        })
    ));
    for (i, id) in ids.iter().take(3).enumerate() {
        t.publish(*id, &format!("k{i}"), &meta()).unwrap();
    }
    assert!(matches!(
        t.publish(ids[3], "k3", &meta()),
        Err(Error::CapacityExceeded {
            resource: "published names",
            ..
        })
    ));
    t.check().unwrap();
}

#[test]
fn every_crash_point_is_atomic_and_recoverable() {
    let mut w = World::new();
    let mut m = Model::default();
    let mut last = None;
    let mut crash_runs = 0;
    for (step, op) in script().into_iter().enumerate() {
        let before = w.snapshot();
        let pre = m.clone();
        let pre_last = last;
        let p = actor(op, &m);
        let start = crash::stores();
        apply(&w, &mut m, op, &mut last).unwrap();
        let stores = crash::stores() - start;
        let after = w.snapshot();
        let (post_dead, pre_dead) = (m.without(p), pre.without(p));
        // Under Miri (slow), a sample of the crash points.
        let step_k = if cfg!(miri) { 5 } else { 1 };
        for k in (0..stores).step_by(step_k) {
            w.restore(&before);
            let mut scratch = pre.clone();
            let mut l = pre_last;
            assert!(crashes(k, || {
                let _ = apply(&w, &mut scratch, op, &mut l);
            }));
            let saved = w.me;
            let alive = w.alive.clone();
            w.kill(p);
            let crashed = w.snapshot();
            w.recover();
            w.t()
                .check()
                .unwrap_or_else(|e| panic!("step {step} {op:?}, crash at {k}: {e}"));
            // The newer participant in slot p holds nothing.
            let mut pre_k = pre_dead.clone();
            let mut post_k = post_dead.clone();
            pre_k.known = post_dead.known.clone();
            post_k.known = post_dead.known.clone();
            let got = observed(&w, &post_k);
            assert!(
                got == expected(&pre_k) || got == expected(&post_k),
                "step {step} {op:?}, crash at store {k}: {got:?}\npre {:?}\npost {:?}",
                expected(&pre_k),
                expected(&post_k)
            );
            // The recovery itself may die at any store; a second one fixes it.
            let recovered = w.snapshot();
            let (stride, tries) = if cfg!(miri) { (97, 2) } else { (7, 30) };
            for k2 in (0..crash_runs % stride + 200).step_by(stride).take(tries) {
                w.restore(&crashed);
                if !crashes(k2, || w.recover()) {
                    break;
                }
                w.recover();
                w.t().check().unwrap();
                assert_eq!(observed(&w, &post_k), got);
                crash_runs += 1;
            }
            w.restore(&recovered);
            w.me = saved;
            w.alive = alive;
        }
        w.restore(&after);
    }
    let least = if cfg!(miri) { 10 } else { 50 };
    assert!(crash_runs > least, "{crash_runs} recovery crashes tried");
}

#[derive(Debug, Clone)]
enum RandomOp {
    Create(usize, u64),
    Publish(usize, u8),
    Get(usize, u8),
    Release(usize),
    Free(usize),
    Kill(usize),
}

fn random_op() -> impl Strategy<Value = RandomOp> {
    prop_oneof![
        (0..PARTICIPANTS, 1u64..9).prop_map(|(p, s)| RandomOp::Create(p, s)),
        (0..8usize, 0u8..4).prop_map(|(h, n)| RandomOp::Publish(h, n)),
        (0..PARTICIPANTS, 0u8..4).prop_map(|(p, n)| RandomOp::Get(p, n)),
        (0..8usize).prop_map(RandomOp::Release),
        (0..8usize).prop_map(RandomOp::Free),
        (0..PARTICIPANTS).prop_map(RandomOp::Kill),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 300 }, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random operations by participants that also die: the tables agree
    /// with the model after every step (recovering after each death).
    #[test]
    fn random_sequences_match_the_model(ops in proptest::collection::vec(random_op(), 1..40)) {
        let mut w = World::new();
        let mut m = Model::default();
        let names = ["a", "b", "c", "d"];
        for op in ops {
            let live: Vec<usize> = (0..m.handles.len()).filter(|&i| m.handles[i].is_some()).collect();
            let pick = |i: usize| live.get(i % live.len().max(1)).copied();
            let t = w.t();
            match op {
                RandomOp::Create(p, pages) => match w.create(p, pages * PAGE) {
                    Ok(id) => { m.handles.push(Some((p, id))); m.known.push(id); }
                    Err(Error::CapacityExceeded { .. }) => {}
                    Err(e) => panic!("create: {e}"),
                },
                RandomOp::Publish(h, n) => if let Some(i) = pick(h) {
                    let (_, id) = m.handles[i].unwrap();
                    let name = names[n as usize];
                    let r = t.publish(id, name, &meta());
                    match (&r, m.names.contains_key(name), m.doomed.contains(&id)) {
                        (Err(Error::Freed), _, true) => {}
                        (Err(Error::NameExists(_)), true, false) => {}
                        (Err(Error::CapacityExceeded { .. }), false, false) => prop_assert_eq!(m.names.len(), 3),
                        (Ok(()), false, false) => { m.names.insert(name.into(), id); }
                        other => prop_assert!(false, "publish {name}: {other:?}"),
                    }
                },
                RandomOp::Get(p, n) => {
                    let name = names[n as usize];
                    match (get_meta(&t, name, w.me[p]), m.names.get(name)) {
                        (Ok((id, _, _)), Some(&want)) => { prop_assert_eq!(id, want); m.handles.push(Some((p, id))); }
                        (Err(Error::UnknownName(_)), None) => {}
                        (r, want) => prop_assert!(false, "get {name}: {r:?} vs {want:?}"),
                    }
                }
                RandomOp::Release(h) | RandomOp::Free(h) => if let Some(i) = pick(h) {
                    let (p, id) = m.handles[i].unwrap();
                    if matches!(op, RandomOp::Free(_)) {
                        t.free(id, w.me[p]).unwrap();
                        m.doomed.insert(id);
                        m.names.retain(|_, v| *v != id);
                    } else {
                        t.release(id, w.me[p]).unwrap();
                    }
                    m.handles[i] = None;
                },
                RandomOp::Kill(p) => {
                    m = m.without(p);
                    w.kill(p);
                    w.recover();
                }
            }
            w.t().check().map_err(|e| TestCaseError::fail(format!("{op:?}: {e}")))?;
            prop_assert_eq!(observed(&w, &m), expected(&m), "after {:?}", op);
        }
    }
}
