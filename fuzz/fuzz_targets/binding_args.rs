//! The type and shape arguments the Python (and C) bindings take, through
//! the Rust parsers they use: an element type as text (datashape, numpy's
//! dtype string such as `<f4`, a primitive or Clara name) and a shape, as
//! `FastIOAllocation.set_type_and_dimensions`, `Entry.update_shape` and
//! `FastIOContext.create_stream` receive them. Parsing may fail, never
//! panic; a numpy string that parses prints back to one that parses to
//! the same type; allocating an array of any type and shape in a small
//! context is an error or an array of exactly that size, never a panic or
//! a huge allocation.
#![no_main]
#![forbid(unsafe_code)]

use fastio::{Context, ContextOptions, StreamOptions};
use libfuzzer_sys::fuzz_target;

thread_local! {
    static CTX: Option<Context> =
        Context::new(&ContextOptions::new().capacity(1 << 20).anonymous(true)).ok();
}

fuzz_target!(|input: (String, Vec<u32>, u8)| {
    let (text, dims, depth) = input;
    let shape: Vec<usize> = dims.iter().take(8).map(|&d| d as usize).collect();
    if let Ok(t) = dtype::numpy::from_numpy(&text)
        && let Ok(back) = dtype::numpy::to_numpy(&t)
    {
        let again = dtype::numpy::from_numpy(&back).expect("numpy text we print parses");
        assert_eq!(again, t, "{text:?} -> {back:?}");
    }
    let parsed = text.parse::<dtype::Type>();
    let primitive = dtype::Primitive::from_name(&text);
    if let Some(p) = dtype::clara::primitive(&text) {
        assert_eq!(dtype::clara::element_of(p).map(|e| e.primitive), Some(p));
    }
    if let Some(p) = primitive {
        let o = StreamOptions::new(p, &shape).depth(usize::from(depth));
        let _ = (o.slot_bytes(), o.reserved_bytes());
    }
    if let Ok(t) = parsed {
        CTX.with(|ctx| {
            let Some(ctx) = ctx else { return };
            if let Ok(a) = ctx.create_array(t, &shape) {
                assert!(a.size() <= 1 << 20);
                let _ = a.free();
            }
        });
    }
});
