//! Arbitrary sequences of C API calls (`fastio.h`: contexts, allocations,
//! streams) with arbitrary arguments within the C contract: numbers and
//! strings of any value (strings with a NUL are cut there, as C sees
//! them), every pointer either null or one the API gave (and not yet
//! released). No call may panic (a panic would be `FASTIO_ERR_PANIC`,
//! reported as a crash here), hang, or touch memory it was not given;
//! statuses must be known codes. Runs under AddressSanitizer.
#![no_main]

use std::ffi::{CString, c_void};
use std::ptr::{null, null_mut};

use fastio_capi::*;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum TypeName {
    Known(u8),
    Text(String),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Create { size: u32, null_out: bool },
    SetType { a: u8, ty: TypeName, dims: Vec<u16>, null_dims: bool },
    Map { a: u8, write: bool, null_data: bool, null_size: bool },
    Unmap { a: u8, skew: u8, null_data: bool },
    Write { a: u8, at: u32, byte: u8 },
    Publish { a: u8, name: String },
    Get { name: String, null_out: bool },
    Size { a: u8, null_out: bool },
    Dims { a: u8, null_out: bool },
    ElementType { a: u8, cap: u8 },
    Handle { cap: u8 },
    Free { a: u8 },
    Release { a: u8 },
    StreamCreate { name: String, ty: TypeName, max: Vec<u8>, depth: u8, consumers: u8, overflow: i8 },
    StreamBegin { p: u8, shape: Vec<u8>, null_data: bool },
    StreamPublish { p: u8 },
    StreamEnd { p: u8, poison: bool },
    StreamAttach { name: String, index: u8 },
    StreamNext { c: u8 },
    FrameRead { f: u8 },
    FrameRelease { f: u8 },
}

const TYPES: [&str; 6] = ["uint8", "float32", "int64", "float16", "bool", "string"];

fn c(s: &str) -> CString {
    let cut = s.split('\0').next().unwrap_or("");
    CString::new(cut).unwrap_or_default()
}

fn type_name(t: &TypeName) -> CString {
    match t {
        TypeName::Known(k) => c(TYPES[*k as usize % TYPES.len()]),
        TypeName::Text(s) => c(s),
    }
}

fn pick<T>(v: &[T], i: u8) -> Option<&T> {
    (!v.is_empty()).then(|| &v[i as usize % v.len()])
}

fn known(code: i32) {
    assert!((0..=16).contains(&code), "unknown status {code}");
    assert_ne!(code, FASTIO_ERR_PANIC, "a call panicked");
}

/// An allocation handle and what it has mapped.
struct Handle {
    a: *mut fastio_allocation,
    mapped: Option<(*mut c_void, usize, bool)>,
}

fuzz_target!(|ops: Vec<Op>| {
    let mut ctx = null_mut();
    // SAFETY (every call below): each pointer is null or one the API gave
    // and that is still live; outputs point to locals.
    unsafe {
        if fastio_context_create(8 << 20, &mut ctx) != FASTIO_OK {
            return;
        }
        let mut allocs: Vec<Handle> = Vec::new();
        let mut producers: Vec<*mut fastio_stream_producer> = Vec::new();
        let mut slots: Vec<Option<(*mut c_void, usize)>> = Vec::new();
        let mut consumers: Vec<*mut fastio_stream_consumer> = Vec::new();
        let mut frames: Vec<*mut fastio_stream_frame> = Vec::new();
        for op in ops.iter().take(64) {
            match op {
                Op::Create { size, null_out } => {
                    let mut a = null_mut();
                    let out = if *null_out { null_mut() } else { &mut a };
                    known(fastio_context_create_allocation(ctx, u64::from(*size % (1 << 20)), out));
                    if !a.is_null() {
                        allocs.push(Handle { a, mapped: None });
                    }
                }
                Op::SetType { a, ty, dims, null_dims } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    let dims: Vec<usize> = dims.iter().take(8).map(|&d| usize::from(d)).collect();
                    let p = if *null_dims { null() } else { dims.as_ptr() };
                    known(fastio_allocation_set_type_and_dimensions(h.a, type_name(ty).as_ptr(), p, dims.len()));
                }
                Op::Map { a, write, null_data, null_size } => {
                    let Some(i) = (!allocs.is_empty()).then(|| *a as usize % allocs.len()) else { continue };
                    let h = &mut allocs[i];
                    let mut data: *mut c_void = null_mut();
                    let mut size = 0usize;
                    let sp = if *null_size { null_mut() } else { &mut size };
                    let code = if *write {
                        let dp = if *null_data { null_mut() } else { &mut data };
                        fastio_allocation_map_mut(h.a, dp, sp)
                    } else {
                        let mut cdata: *const c_void = null();
                        let dp = if *null_data { null_mut() } else { &mut cdata };
                        let code = fastio_allocation_map(h.a, dp, sp);
                        data = cdata.cast_mut();
                        code
                    };
                    known(code);
                    if code == FASTIO_OK {
                        assert!(!data.is_null());
                        h.mapped = Some((data, size, *write));
                    }
                }
                Op::Unmap { a, skew, null_data } => {
                    let Some(i) = (!allocs.is_empty()).then(|| *a as usize % allocs.len()) else { continue };
                    let h = &mut allocs[i];
                    let p = match h.mapped {
                        Some((p, _, _)) if !*null_data => p.cast::<u8>().wrapping_add(usize::from(*skew % 2)).cast(),
                        _ => null(),
                    };
                    let code = fastio_allocation_unmap(h.a, p);
                    known(code);
                    if code == FASTIO_OK {
                        h.mapped = None;
                    }
                }
                Op::Write { a, at, byte } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    if let Some((p, size, true)) = h.mapped
                        && size > 0
                    {
                        *p.cast::<u8>().add(*at as usize % size) = *byte;
                    }
                    if let Some((p, size, false)) = h.mapped
                        && size > 0
                    {
                        std::hint::black_box(*p.cast::<u8>().add(*at as usize % size));
                    }
                }
                Op::Publish { a, name } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    known(fastio_allocation_publish(h.a, c(name).as_ptr()));
                }
                Op::Get { name, null_out } => {
                    let mut a = null_mut();
                    let out = if *null_out { null_mut() } else { &mut a };
                    known(fastio_context_get(ctx, c(name).as_ptr(), out));
                    if !a.is_null() {
                        allocs.push(Handle { a, mapped: None });
                    }
                }
                Op::Size { a, null_out } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    let mut n = 0u64;
                    let out = if *null_out { null_mut() } else { &mut n };
                    known(fastio_allocation_size(h.a, out));
                }
                Op::Dims { a, null_out } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    let mut dims: *const usize = null();
                    let mut n = 0usize;
                    let out = if *null_out { null_mut() } else { &mut dims };
                    let code = fastio_allocation_dimensions(h.a, out, &mut n);
                    known(code);
                    if code == FASTIO_OK && n > 0 {
                        std::hint::black_box(*dims.add(n - 1));
                    }
                }
                Op::ElementType { a, cap } => {
                    let Some(h) = pick(&allocs, *a) else { continue };
                    let mut buf = vec![0 as std::ffi::c_char; usize::from(*cap % 64)];
                    let mut n = 0usize;
                    known(fastio_allocation_element_type(h.a, buf.as_mut_ptr(), buf.len(), &mut n));
                }
                Op::Handle { cap } => {
                    let mut buf = vec![0 as std::ffi::c_char; usize::from(*cap)];
                    let mut n = 0usize;
                    known(fastio_context_handle(ctx, buf.as_mut_ptr(), buf.len(), &mut n));
                }
                Op::Free { a } => {
                    if allocs.is_empty() {
                        continue;
                    }
                    let h = allocs.swap_remove(*a as usize % allocs.len());
                    known(fastio_allocation_free(h.a));
                }
                Op::Release { a } => {
                    if allocs.is_empty() {
                        continue;
                    }
                    let h = allocs.swap_remove(*a as usize % allocs.len());
                    fastio_allocation_release(h.a);
                }
                Op::StreamCreate { name, ty, max, depth, consumers: n, overflow } => {
                    let max: Vec<usize> = max.iter().take(4).map(|&d| usize::from(d)).collect();
                    let mut p = null_mut();
                    known(fastio_stream_create(
                        ctx,
                        c(name).as_ptr(),
                        type_name(ty).as_ptr(),
                        max.as_ptr(),
                        max.len(),
                        usize::from(*depth % 9),
                        usize::from(*n % 4),
                        i32::from(*overflow % 3),
                        &mut p,
                    ));
                    if !p.is_null() {
                        producers.push(p);
                        slots.push(None);
                    }
                }
                Op::StreamBegin { p, shape, null_data } => {
                    let Some(i) = (!producers.is_empty()).then(|| *p as usize % producers.len()) else { continue };
                    let shape: Vec<usize> = shape.iter().take(4).map(|&d| usize::from(d)).collect();
                    let mut data = null_mut();
                    let mut n = 0usize;
                    let dp = if *null_data { null_mut() } else { &mut data };
                    let code = fastio_stream_begin(producers[i], shape.as_ptr(), shape.len(), 0, dp, &mut n);
                    known(code);
                    if code == FASTIO_OK {
                        if n > 0 {
                            *data.cast::<u8>() = 0xA5;
                            *data.cast::<u8>().add(n - 1) = 0x5A;
                        }
                        slots[i] = Some((data, n));
                    }
                }
                Op::StreamPublish { p } => {
                    let Some(i) = (!producers.is_empty()).then(|| *p as usize % producers.len()) else { continue };
                    let mut seq = 0u64;
                    known(fastio_stream_publish(producers[i], &mut seq));
                    slots[i] = None;
                }
                Op::StreamEnd { p, poison } => {
                    let Some(&pr) = pick(&producers, *p) else { continue };
                    known(if *poison { fastio_stream_poison(pr) } else { fastio_stream_end(pr) });
                }
                Op::StreamAttach { name, index } => {
                    let mut cons = null_mut();
                    known(fastio_stream_consumer_attach(ctx, c(name).as_ptr(), usize::from(*index % 4), &mut cons));
                    if !cons.is_null() {
                        consumers.push(cons);
                    }
                }
                Op::StreamNext { c: k } => {
                    let Some(&cons) = pick(&consumers, *k) else { continue };
                    let mut f = null_mut();
                    let code = fastio_stream_next(cons, 0, &mut f);
                    known(code);
                    if !f.is_null() {
                        frames.push(f);
                    }
                }
                Op::FrameRead { f } => {
                    let Some(&fr) = pick(&frames, *f) else { continue };
                    let mut data: *const c_void = null();
                    let mut n = 0usize;
                    if fastio_stream_frame_bytes(fr, &mut data, &mut n) == FASTIO_OK && n > 0 {
                        std::hint::black_box(*data.cast::<u8>().add(n - 1));
                    }
                    let mut shape: *const usize = null();
                    let mut nd = 0usize;
                    known(fastio_stream_frame_shape(fr, &mut shape, &mut nd));
                    known(fastio_stream_frame_seq(fr, null_mut(), null_mut()));
                }
                Op::FrameRelease { f } => {
                    if frames.is_empty() {
                        continue;
                    }
                    fastio_stream_frame_release(frames.swap_remove(*f as usize % frames.len()));
                }
            }
        }
        for f in frames {
            fastio_stream_frame_release(f);
        }
        for c in consumers {
            fastio_stream_consumer_free(c);
        }
        for p in producers {
            fastio_stream_producer_free(p);
        }
        for h in allocs {
            fastio_allocation_release(h.a);
        }
        fastio_context_release(ctx);
    }
});
