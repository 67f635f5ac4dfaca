//! The Fast I/O semantics across real operator processes: each test runs
//! this binary again as children (roles below), attached through
//! `FASTIO_CONTEXT`, and crash cases use real `SIGKILL`.

mod common;

use common::{ROLE, context, park, spawn, var, wait_for, wait_published};
use dtype::{Primitive, Type};
use fastio::{Context, Error};

const ENTRY: &str = "child_entry";

fn f32_type() -> Type {
    Type::primitive(Primitive::Float32)
}

/// Byte `i` of the test pattern.
fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// Child side of every test in this file; a no-op unless `ROLE` is set.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let ctx = Context::from_env().expect("attach");
    match role.as_str() {
        // Creates, fills, describes and publishes under two names.
        "producer" => {
            let mut a = ctx.create(4096 * 3).unwrap();
            assert!(matches!(ctx.get("vol"), Err(Error::UnknownName(_))));
            for (i, b) in a.map_mut().unwrap().iter_mut().enumerate() {
                *b = pattern(i);
            }
            a.publish("vol-bytes").unwrap();
            a.set_type_and_dimensions(f32_type(), &[3, 1024]).unwrap();
            a.publish("vol").unwrap();
            assert!(matches!(a.publish("vol"), Err(Error::NameExists(_))));
            // The local object stays valid after publishing.
            assert_eq!(a.map().unwrap()[5], pattern(5));
            a.release().unwrap();
        }
        // Reads a published allocation, checks it, and waits for `GO`.
        "reader" => {
            let a = ctx.get("shared").unwrap();
            let m = a.map().unwrap();
            assert!(m.iter().enumerate().all(|(i, &b)| b == pattern(i)));
            ctx.create(1).unwrap().publish(&var("READY")).unwrap();
            wait_for("go", || ctx.names().unwrap().iter().any(|n| n == "go"));
            // Still intact, even if it was freed meanwhile.
            assert!(m.iter().enumerate().all(|(i, &b)| b == pattern(i)));
        }
        // Holds references and mappings, then waits to be killed.
        "holder" => {
            let mut x = ctx.get("x").unwrap();
            let _also = ctx.get("x").unwrap();
            let y = ctx.create(8192).unwrap();
            let _ym = y.map().unwrap();
            let _xm = x.map_mut().unwrap();
            ctx.create(1).unwrap().publish("holding").unwrap();
            park();
        }
        // Publishes and frees names in a loop until killed.
        "churn" => {
            let id = std::process::id();
            for i in 0u64.. {
                let a = ctx.create(4096 * (1 + i % 3)).unwrap();
                a.publish(&format!("churn-{id}-{i}")).unwrap();
                if i == 0 {
                    ctx.create(1).unwrap().publish("churning").unwrap();
                }
                let b = ctx.get(&format!("churn-{id}-{i}")).unwrap();
                a.release().unwrap();
                if i % 2 == 0 {
                    b.free().unwrap();
                } else if i >= 3 {
                    // Odd names stay published for a while.
                    ctx.get(&format!("churn-{id}-{}", i - 2))
                        .unwrap()
                        .free()
                        .unwrap();
                }
            }
        }
        "mean" => {
            let a = ctx.get("vol").unwrap();
            let arr = a.map_as_ndobject().unwrap();
            drop(a);
            let v = arr.to_vec::<f32>().unwrap();
            let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
            assert_eq!(arr.shape(), &[2, 3, 4]);
            assert!((mean - 11.5).abs() < 1e-9, "mean {mean}");
        }
        // Publishes `late` after a pause.
        "publish_later" => {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let mut a = ctx.create(4096).unwrap();
            a.map_mut().unwrap()[0] = 42;
            a.publish("late").unwrap();
        }
        // Takes `frame` when it appears, checks it, and frees it (the
        // consumer's "done").
        "take_and_free" => {
            let m = ctx
                .map_wait("frame", std::time::Duration::from_secs(30))
                .unwrap();
            assert_eq!(m[0], 7);
            m.free().unwrap();
        }
        // Writes through the address of a read mapping: must die by SIGSEGV.
        "write_input" => {
            let a = ctx.get("x").unwrap();
            let via_array = var("VIA") == "array";
            let arr;
            let m;
            let addr = if via_array {
                arr = a.map_as_ndobject().unwrap();
                arr.data_address()
            } else {
                m = a.map().unwrap();
                m.as_ptr() as usize
            };
            // SAFETY: none; this is what a C or Python consumer could do
            // with the address. The page is PROT_READ, so the store faults
            // before anything is written, and the process dies.
            unsafe { std::ptr::write_volatile(addr as *mut u8, 0xEE) };
            std::process::exit(0); // not reached when the protection works
        }
        // Holds a write mapping, then forks a child (no exec) that inherits
        // every descriptor, and waits to be killed.
        "fork_writer" => {
            let mut x = ctx.get("x").unwrap();
            let _xm = x.map_mut().unwrap();
            // SAFETY: the forked child only calls async-signal-safe
            // functions (sleep, _exit).
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // SAFETY: async-signal-safe calls only.
                unsafe {
                    for _ in 0..120 {
                        libc::sleep(1);
                    }
                    libc::_exit(0);
                }
            }
            let mut note = ctx.create(8).unwrap();
            note.map_mut()
                .unwrap()
                .copy_from_slice(&u64::from(pid as u32).to_le_bytes());
            note.publish("forked").unwrap();
            park();
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn writing_through_a_read_mapping_faults() {
    use std::os::unix::process::ExitStatusExt;
    let ctx = context(1 << 20);
    let x = publish_pattern(&ctx, "x", 8192);
    for via in ["bytes", "array"] {
        let mut child = spawn(ENTRY, &ctx, "write_input", &[("VIA", via.into())]);
        let st = child.wait(std::time::Duration::from_secs(60));
        assert_eq!(st.signal(), Some(11), "{via}: the write must fault: {st:?}");
    }
    // Nothing changed, and the dead readers' mappings are reclaimed.
    let m = x.map().unwrap();
    assert!(m.iter().enumerate().all(|(i, &b)| b == pattern(i)));
    drop(m);
    assert!(x.try_clone().unwrap().map_mut().is_ok());
    ctx.check().unwrap();
}

#[test]
fn killed_writer_with_a_live_forked_child_is_reclaimed() {
    let ctx = context(1 << 20);
    let x = publish_pattern(&ctx, "x", 4096);
    let mut writer = spawn(ENTRY, &ctx, "fork_writer", &[]);
    wait_published(&ctx, "forked");
    let forked = {
        let note = ctx.get("forked").unwrap();
        let m = note.map().unwrap();
        u64::from_le_bytes(m[..8].try_into().unwrap()) as libc::pid_t
    };
    struct KillOnDrop(libc::pid_t);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // SAFETY: kill(2) on a PID we were told; at worst it names no
            // process any more.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let forked = KillOnDrop(forked);
    assert!(matches!(x.map(), Err(Error::MapConflict(_))));
    writer.kill9();
    assert!(
        std::path::Path::new(&format!("/proc/{}", forked.0)).exists(),
        "the forked child outlives its parent"
    );
    // The forked child still holds the writer's descriptors, but the
    // writer is dead: its write mapping is reclaimed and readers proceed.
    let m = x.map().expect("the dead writer's mapping was dropped");
    assert!(m.iter().enumerate().all(|(i, &b)| b == pattern(i)));
    drop(m);
    drop(forked);
    ctx.check().unwrap();
}

#[test]
fn published_data_and_metadata_outlive_the_producer() {
    let ctx = context(1 << 20);
    assert!(spawn(ENTRY, &ctx, "producer", &[]).success());
    let a = ctx.get("vol").unwrap();
    assert_eq!(a.element_type(), &f32_type());
    assert_eq!(a.dimensions(), &[3, 1024]);
    let b = ctx.get("vol-bytes").unwrap();
    assert_eq!(b.element_type().to_string(), "uint8");
    assert_eq!(b.dimensions(), &[4096 * 3]);
    let m = a.map().unwrap();
    assert!(m.iter().enumerate().all(|(i, &x)| x == pattern(i)));
    // Both names refer to the same memory.
    assert_eq!(b.map().unwrap()[100], m[100]);
    drop(m);
    // The producer's hold is gone; the publications keep the memory.
    assert_eq!(ctx.stats().unwrap().live_allocations, 1);
    a.free().unwrap();
    assert!(matches!(ctx.get("vol-bytes"), Err(Error::UnknownName(_))));
    assert!(matches!(b.map(), Err(Error::Freed)));
    drop(b);
    let s = ctx.stats().unwrap();
    assert_eq!((s.live_allocations, s.published_names), (0, 0));
    ctx.check().unwrap();
}

fn publish_pattern(ctx: &Context, name: &str, size: usize) -> fastio::Allocation {
    let mut a = ctx.create(size as u64).unwrap();
    for (i, b) in a.map_mut().unwrap().iter_mut().enumerate() {
        *b = pattern(i);
    }
    a.publish(name).unwrap();
    a
}

#[test]
fn two_consumers_map_one_allocation_and_writers_are_excluded() {
    let ctx = context(1 << 20);
    let mut a = publish_pattern(&ctx, "shared", 10_000);
    let mut r1 = spawn(ENTRY, &ctx, "reader", &[("READY", "r1".into())]);
    let mut r2 = spawn(ENTRY, &ctx, "reader", &[("READY", "r2".into())]);
    wait_published(&ctx, "r1");
    wait_published(&ctx, "r2");
    // Both read mappings exist: a write mapping fails fast, reads do not.
    assert!(matches!(a.map_mut(), Err(Error::MapConflict(_))));
    assert!(a.map().is_ok());
    ctx.create(1).unwrap().publish("go").unwrap();
    assert!(r1.success() && r2.success());
    // Both readers are gone: the writer may map again.
    assert!(a.map_mut().is_ok());
    ctx.check().unwrap();
}

#[test]
fn free_while_another_process_maps_it() {
    let ctx = context(1 << 20);
    let a = publish_pattern(&ctx, "shared", 50_000);
    let mut reader = spawn(ENTRY, &ctx, "reader", &[("READY", "mapped".into())]);
    wait_published(&ctx, "mapped");
    a.free().unwrap();
    assert!(matches!(ctx.get("shared"), Err(Error::UnknownName(_))));
    let s = ctx.stats().unwrap();
    assert_eq!(s.freed_allocations, 1, "still mapped by the reader");
    ctx.create(1).unwrap().publish("go").unwrap();
    assert!(reader.success(), "the reader's mapping stayed valid");
    let s = ctx.stats().unwrap();
    assert_eq!(s.freed_allocations, 0, "reclaimed when the reader went");
    ctx.check().unwrap();
}

#[test]
fn killed_holder_is_reclaimed_and_others_keep_working() {
    let ctx = context(1 << 20);
    let x = publish_pattern(&ctx, "x", 4096);
    let before = ctx.stats().unwrap();
    let mut holder = spawn(ENTRY, &ctx, "holder", &[]);
    wait_published(&ctx, "holding");
    assert!(matches!(x.map(), Err(Error::MapConflict(_))));
    holder.kill9();
    // Mapping conflicts trigger recovery of dead holders by themselves.
    let m = x.map().expect("the dead writer's mapping was dropped");
    drop(m);
    let report = ctx.recover().unwrap();
    assert_eq!(report.dead_holds, 0, "already recovered: {report:?}");
    let s = ctx.stats().unwrap();
    // x stays (published), the holder's unpublished y is reclaimed; the
    // "holding" marker stays published.
    assert_eq!(s.live_allocations, before.live_allocations + 1);
    assert!(ctx.names().unwrap().contains(&"x".to_string()));
    x.free().unwrap();
    ctx.check().unwrap();
}

#[test]
fn killed_during_churn_leaves_a_consistent_table() {
    let ctx = context(4 << 20);
    for round in 0..20u64 {
        let mut churn = spawn(ENTRY, &ctx, "churn", &[]);
        wait_published(&ctx, "churning");
        std::thread::sleep(std::time::Duration::from_millis(1 + 3 * (round % 7)));
        churn.kill9();
        // The next operation repairs whatever the kill interrupted.
        let recovered = ctx.recover().unwrap();
        ctx.check()
            .unwrap_or_else(|e| panic!("round {round}: {e} after {recovered:?}"));
        ctx.get("churning").unwrap().free().unwrap();
        // Still fully usable.
        let a = publish_pattern(&ctx, &format!("after-{round}"), 8192);
        assert_eq!(ctx.get(&format!("after-{round}")).unwrap().size(), 8192);
        a.free().unwrap();
    }
    // Only the names whose allocations were not freed remain; each resolves.
    for name in ctx.names().unwrap() {
        assert!(name.starts_with("churn-"), "{name}");
        ctx.get(&name).unwrap().free().unwrap();
    }
    let s = ctx.stats().unwrap();
    assert_eq!((s.live_allocations, s.published_names), (0, 0));
    ctx.check().unwrap();
}

#[test]
fn map_as_ndobject_in_another_process() {
    let ctx = context(1 << 20);
    let mut a = ctx.create(24 * 4).unwrap();
    a.set_type_and_dimensions(f32_type(), &[2, 3, 4]).unwrap();
    {
        let arr = a.map_as_ndobject_mut().unwrap();
        for i in 0..24usize {
            arr.set(&[i / 12, (i / 4) % 3, i % 4], i as f32).unwrap();
        }
        // Exclusive: no other mapping while the writable array lives.
        assert!(matches!(a.map(), Err(Error::MapConflict(_))));
    }
    a.publish("vol").unwrap();
    assert!(spawn(ENTRY, &ctx, "mean", &[]).success());
}

#[test]
fn waiting_for_a_name_wakes_on_its_publication() {
    use std::time::{Duration, Instant};
    let ctx = context(1 << 20);
    let t0 = Instant::now();
    assert!(matches!(
        ctx.wait_for("late", Duration::from_millis(50)),
        Err(Error::WaitTimeout(_))
    ));
    assert!(t0.elapsed() >= Duration::from_millis(50));
    let mut child = spawn(ENTRY, &ctx, "publish_later", &[]);
    let t0 = Instant::now();
    let m = ctx.map_wait("late", Duration::from_secs(30)).unwrap();
    let waited = t0.elapsed();
    assert_eq!(m[0], 42);
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    drop(m);
    assert!(child.success());
    // Already published: no wait at all.
    assert_eq!(ctx.wait_for("late", Duration::ZERO).unwrap().size(), 4096);
}

#[test]
fn a_spinning_wait_sees_a_publication_from_another_process_and_keeps_its_timeout() {
    use std::time::{Duration, Instant};
    let ctx = context(1 << 20);
    ctx.set_wait_spin(Duration::from_secs(60));
    assert_eq!(ctx.wait_spin(), Duration::from_secs(60));
    // The spin never outlasts the timeout.
    let t0 = Instant::now();
    assert!(matches!(
        ctx.wait_for("late", Duration::from_millis(30)),
        Err(Error::WaitTimeout(_))
    ));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(30) && waited < Duration::from_secs(10));
    let mut child = spawn(ENTRY, &ctx, "publish_later", &[]);
    let m = ctx.map_wait("late", Duration::from_secs(30)).unwrap();
    assert_eq!(m[0], 42);
    drop(m);
    assert!(child.success());
}

#[test]
fn a_producer_learns_that_the_consumer_freed_its_frame() {
    use std::time::Duration;
    let ctx = context(1 << 20);
    ctx.set_wait_spin(Duration::from_millis(1));
    let mut child = spawn(ENTRY, &ctx, "take_and_free", &[]);
    let mut a = ctx.create(4096).unwrap();
    a.map_mut().unwrap()[0] = 7; // private: not registered
    a.publish("frame").unwrap();
    assert!(ctx.is_published("frame").unwrap());
    a.release().unwrap();
    ctx.wait_unpublished("frame", Duration::from_secs(30))
        .unwrap();
    assert!(!ctx.is_published("frame").unwrap());
    assert!(child.success());
    // Freed by the consumer: gone for good, its block back in the cache.
    assert!(matches!(ctx.get("frame"), Err(Error::UnknownName(_))));
}

/// An observer (`fastio::observe`, what `fastio top` shows) reads a live
/// context without changing it: names, types, holders and the writer of
/// a holder process, then that holder dead but not yet reaped.
#[test]
fn an_observer_sees_holders_live_and_dead_and_changes_nothing() {
    let ctx = context(1 << 20);
    let mut x = publish_pattern(&ctx, "x", 4096);
    x.set_type_and_dimensions(f32_type(), &[1024]).unwrap();
    x.publish("x-f32").unwrap();
    let private = ctx.create(100).unwrap();
    let mut holder = spawn(ENTRY, &ctx, "holder", &[]);
    wait_published(&ctx, "holding");
    let before = ctx.stats().unwrap();
    let obs = fastio::observe::Observer::open(ctx.handle()).unwrap();
    let snap = obs.snapshot().unwrap();
    assert_eq!(
        ctx.stats().unwrap(),
        before,
        "observing changed the context"
    );
    assert_eq!(snap.context.stats.live_allocations, before.live_allocations);
    assert_eq!(snap.context.stats.used_bytes, before.used_bytes);
    assert_eq!(snap.context.stats.published_names, before.published_names);
    assert_eq!(snap.context.participants, (2, 0), "us and the holder");
    assert_eq!(snap.unsettled, 0);
    let xi = snap
        .allocations
        .iter()
        .find(|a| a.names.iter().any(|n| n.name == "x"))
        .expect("x is listed");
    let typed = xi.names.iter().find(|n| n.name == "x-f32").unwrap();
    assert_eq!(
        (typed.type_text.as_str(), typed.dims.as_slice()),
        ("float32", &[1024u64][..])
    );
    // The holder holds x twice and maps it for writing.
    let theirs: Vec<_> = xi
        .holders
        .iter()
        .filter(|h| h.pid != std::process::id())
        .collect();
    assert_eq!(theirs.len(), 1, "{xi:?}");
    assert!(theirs[0].alive && theirs[0].holds == 2, "{xi:?}");
    assert!(
        matches!(xi.writer, Some((slot, true)) if slot == theirs[0].slot),
        "{xi:?}"
    );
    // Our private allocation is anonymous, held by us alone.
    let p = snap
        .allocations
        .iter()
        .find(|a| a.names.is_empty() && a.size == 100)
        .expect("the private allocation is listed");
    assert_eq!(p.holders.len(), 1);
    assert_eq!(p.holders[0].pid, std::process::id());
    holder.kill9();
    let snap = obs.snapshot().unwrap();
    assert_eq!(
        snap.context.participants,
        (1, 1),
        "the holder is dead, not yet reaped"
    );
    let xi = snap
        .allocations
        .iter()
        .find(|a| a.names.iter().any(|n| n.name == "x"))
        .unwrap();
    assert!(xi.holders.iter().any(|h| !h.alive), "{xi:?}");
    assert!(matches!(xi.writer, Some((_, false))), "{xi:?}");
    // Recovery reclaims its holds and its mapping; the observer sees that
    // too (its registry slot stays until a new process takes it).
    ctx.recover().unwrap();
    let snap = obs.snapshot().unwrap();
    assert!(
        snap.allocations
            .iter()
            .all(|a| a.holders.iter().all(|h| h.alive))
    );
    assert!(snap.allocations.iter().all(|a| a.writer.is_none()));
    drop(private);
    x.free().unwrap();
}

#[test]
fn an_observer_refuses_what_is_not_a_context() {
    let seg = shm_core::Segment::anonymous(&shm_core::SegmentOptions::new(1 << 16)).unwrap();
    assert!(fastio::observe::Observer::from_segment(seg).is_err());
    assert!(fastio::observe::Observer::open("no-such-context-name").is_err());
    assert!(fastio::observe::Observer::open("/nonexistent/path").is_err());
}
