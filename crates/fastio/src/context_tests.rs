//! Corrupted control words, written through the segment this crate keeps
//! private (no public API reaches it).

use shm_core::Offset;

use crate::{Context, ContextOptions, Error};

fn context(capacity: u64) -> Context {
    let prefix = format!("fastiotest-unit-{}", std::process::id());
    Context::new(&ContextOptions::new().capacity(capacity).prefix(prefix)).unwrap()
}

/// Overwrites `bytes.len()` bytes at `rel` bytes into the control words.
fn scribble(ctx: &Context, rel: u64, bytes: &[u8]) {
    let seg = ctx.segment();
    let at = seg.data_offset().get() + crate::layout::CONTROL_AFTER_MUTEX + rel;
    // SAFETY: no mapping of this context is alive while we write (the
    // scribbled words are control words, never lent out as references
    // other than atomics), and no other thread uses the context.
    unsafe { seg.write_bytes(Offset(at), bytes) }.unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn corrupted_control_data_gives_errors() {
    // Bad magic: attaching fails.
    let ctx = context(1 << 20);
    scribble(&ctx, 0, b"NOTMAGIC");
    assert!(matches!(
        Context::attach(ctx.handle()),
        Err(Error::Corrupt(_))
    ));

    // A block outside the heap in record 0 (header 16 words + 256 class
    // heads; record word 2 is the block length).
    let ctx = context(1 << 20);
    let a = ctx.create(4096).unwrap();
    a.publish("a").unwrap();
    let rec0 = 8 * (16 + 256);
    scribble(&ctx, rec0 + 8, &(1u64 << 40).to_le_bytes());
    assert!(matches!(a.map(), Err(Error::Corrupt(_))));
    assert!(matches!(ctx.check(), Err(Error::Corrupt(_))));
    // A garbage record state.
    scribble(&ctx, rec0, &u64::MAX.to_le_bytes());
    assert!(matches!(ctx.stats(), Err(Error::Corrupt(_))));
}

#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn a_private_write_mapping_skips_the_tables_until_others_can_reach_it() {
    let ctx = context(1 << 20);
    let mut a = ctx.create(64).unwrap();
    assert!(a.private_off().is_some());
    a.map_mut().unwrap()[0] = 1; // private: no registration
    a.map_mut().unwrap()[1] = 2; // nothing was left registered
    a.publish("p").unwrap();
    assert!(a.private_off().is_none());
    let reader = ctx.map("p").unwrap();
    assert_eq!(&reader[..2], &[1, 2]);
    // Published and mapped by a reader: a writer is refused again.
    assert!(matches!(a.map_mut(), Err(Error::MapConflict(_))));
    drop(reader);
    a.map_mut().unwrap()[0] = 3;

    // A clone ends the privacy: the clone's reader excludes the writer.
    let mut b = ctx.create(64).unwrap();
    let c = b.try_clone().unwrap();
    let r = c.map().unwrap();
    assert!(matches!(b.map_mut(), Err(Error::MapConflict(_))));
    drop(r);
    // So does an array over it.
    let mut d = ctx.create(64).unwrap();
    let arr = d.map_as_ndobject().unwrap();
    assert!(matches!(d.map_mut(), Err(Error::MapConflict(_))));
    drop(arr);
    d.map_mut().unwrap()[0] = 9;
}

/// A block of at least a huge page starts on a huge-page boundary of the
/// file when there is room (so the system may back it with huge pages),
/// and anywhere it fits when there is not; small blocks are packed as
/// before.
#[test]
#[cfg_attr(miri, ignore = "needs real shared memory")]
fn large_blocks_go_on_huge_page_boundaries_when_there_is_room() {
    use std::sync::atomic::Ordering;
    const M: u64 = 1 << 20;
    let ctx = context(9 * M);
    let file_off = |a: &crate::Allocation| {
        ctx.shared.layout.heap_offset + a.private_off.load(Ordering::Relaxed)
    };
    let small = ctx.create(4096).unwrap();
    let big = ctx.create(4 * M).unwrap();
    assert_eq!(file_off(&big) % shm_core::HUGE_PAGE, 0);
    let small2 = ctx.create(4096).unwrap();
    // The page after the first small block: the gap before the boundary.
    assert_eq!(file_off(&small2), file_off(&small) + 4096);
    // 4 MiB more fits only off the boundary: placed anyway.
    let heap_end = ctx.shared.layout.heap_offset + ctx.shared.layout.heap_len;
    let big2 = ctx.create(4 * M).unwrap();
    assert!(file_off(&big2) + 4 * M <= heap_end);
    assert!(file_off(&big2) >= file_off(&big) + 4 * M || file_off(&big2) + 4 * M <= file_off(&big));
}
