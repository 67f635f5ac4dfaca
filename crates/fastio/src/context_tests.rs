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
    let at = seg.data_offset().get() + 64 + rel;
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
