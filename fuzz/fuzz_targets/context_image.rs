//! Opens a Fast I/O context whose control tables hold arbitrary bytes
//! (either wholly replaced, or a populated context with words patched),
//! then drives every operation: each must return a value or an error,
//! never panic, hang or touch memory outside the segment.

#![no_main]

use std::sync::OnceLock;

use fastio::{Context, ContextOptions};
use libfuzzer_sys::fuzz_target;
use shm_core::{Access, Offset, Segment};

/// A populated context and a pristine copy of its control tables.
struct Fixture {
    ctx: Context,
    pristine: Vec<u8>,
    _keep: Vec<fastio::Allocation>,
}

fn fixture() -> &'static std::sync::Mutex<Fixture> {
    static F: OnceLock<std::sync::Mutex<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let opts = ContextOptions::new()
            .capacity(64 * 4096)
            .max_allocations(8)
            .max_names(4)
            .max_participants(4)
            .anonymous(true);
        let ctx = Context::new(&opts).unwrap();
        let mut keep = Vec::new();
        for (i, size) in [10u64, 5000, 20000].into_iter().enumerate() {
            let a = ctx.create(size).unwrap();
            a.publish(&format!("t{i}")).unwrap();
            keep.push(a);
        }
        keep.pop().unwrap().free().unwrap();
        let (off, len) = ctx.control_region();
        let mut pristine = vec![0u8; len as usize];
        // SAFETY: no mapping of the context is alive, and the fixture is
        // built on one thread.
        unsafe { ctx.segment().read_bytes(off, &mut pristine) }.unwrap();
        std::sync::Mutex::new(Fixture { ctx, pristine, _keep: keep })
    })
}

fn exercise(ctx: &Context) {
    let _ = ctx.recover();
    let _ = ctx.check();
    let _ = ctx.stats();
    if let Ok(names) = ctx.names() {
        for n in names.iter().take(8) {
            if let Ok(a) = ctx.get(n) {
                if let Ok(m) = a.map() {
                    std::hint::black_box(m.first().copied());
                }
                let _ = a.map_as_ndobject().map(|arr| arr.shape().len());
                let _ = a.publish("again");
                let _ = a.free();
            }
        }
    }
    if let Ok(mut a) = ctx.create(3000) {
        if let Ok(mut m) = a.map_mut() {
            if let Some(b) = m.first_mut() {
                *b = 1;
            }
        }
        let _ = a.publish("fresh");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let f = fixture().lock().unwrap_or_else(|p| p.into_inner());
    let (off, _) = f.ctx.control_region();
    let mut image = f.pristine.clone();
    if mode & 1 == 0 {
        // Replace a prefix of the tables with the input.
        let n = rest.len().min(image.len());
        image[..n].copy_from_slice(&rest[..n]);
    } else {
        // Patch words: (u16 word index, u64 value) records.
        for rec in rest.chunks_exact(10) {
            let word = u16::from_le_bytes([rec[0], rec[1]]) as usize % (image.len() / 8);
            image[8 * word..8 * word + 8].copy_from_slice(&rec[2..10]);
        }
    }
    let seg = f.ctx.segment();
    // SAFETY (this write and the restore below): no mapping of the context
    // is alive between inputs (`exercise` drops all of them), the control
    // words are only ever referenced as atomics, and the fixture's mutex
    // keeps other threads out.
    unsafe { seg.write_bytes(off, &image) }.unwrap();
    let fd = f.ctx.as_fd().try_clone_to_owned().unwrap();
    if let Ok(other) = Segment::from_fd(fd, Access::ReadWrite) {
        if let Ok(ctx) = Context::from_segment(other) {
            exercise(&ctx);
        }
    }
    // Restore for the next input.
    // SAFETY: as above.
    unsafe { seg.write_bytes(Offset(off.get()), &f.pristine) }.unwrap();
});
