//! One context shared by the threads of a process: every operation is
//! safe to call concurrently, and the tables stay consistent.

mod common;

use common::context;
use fastio::Error;

#[test]
fn threads_share_a_context() {
    let ctx = context(8 << 20);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let ctx = ctx.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let name = format!("t{t}-{i}");
                    let mut a = ctx.create(4096 * u64::from(1 + i % 4)).unwrap();
                    a.map_mut().unwrap()[0] = t as u8;
                    a.publish(&name).unwrap();
                    let b = ctx.get(&name).unwrap();
                    {
                        // Two read mappings from two local references.
                        let (ma, mb) = (a.map().unwrap(), b.map().unwrap());
                        assert_eq!((ma[0], mb[0]), (t as u8, t as u8));
                        let mut c = ctx.get(&name).unwrap();
                        assert!(matches!(c.map_mut(), Err(Error::MapConflict(_))));
                    }
                    a.release().unwrap();
                    b.free().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = ctx.stats().unwrap();
    assert_eq!((s.live_allocations, s.published_names), (0, 0));
    assert!(s.cached_blocks > 0, "reclaimed blocks are kept for reuse");
    ctx.check().unwrap();
}
