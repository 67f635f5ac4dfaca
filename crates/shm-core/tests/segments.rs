//! Segment creation, opening, validation, growth, read-only mappings and
//! the participant registry.
#![cfg(not(loom))] // real processes and syscalls; loom models live in src/loom_models.rs

mod common;

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use shm_core::{Access, Error, HeaderError, Offset, Segment, SegmentOptions, ShmMutex};

const ENTRY: &str = "child_entry";

fn opts() -> SegmentOptions {
    SegmentOptions::new(8192).prefix(prefix())
}

#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    match role.as_str() {
        "ro_write" => {
            let seg = Segment::open_read_only(&var("SEG")).unwrap();
            let mut b = [0u8; 1];
            read_bytes(&seg, seg.data_offset(), &mut b).unwrap();
            if b[0] != 0xAB {
                std::process::exit(3);
            }
            let ptr = seg.ptr(seg.data_offset(), 1).unwrap();
            // SAFETY: the pointer is in bounds of a live mapping; the mapping
            // is PROT_READ, so this write faults and kills the process with
            // SIGSEGV — which is what this child exists to demonstrate.
            unsafe { ptr.as_ptr().write_volatile(1) };
            std::process::exit(4);
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn create_open_name_mode_and_unlink_on_drop() {
    let seg = Segment::create(&opts()).unwrap();
    let name = seg.name().unwrap().to_owned();
    let (pre, rand) = name.rsplit_once('-').unwrap();
    assert_eq!(pre, prefix());
    assert!(
        rand.len() >= 24 && rand.bytes().all(|b| b.is_ascii_hexdigit()),
        "{rand}"
    );
    let meta = std::fs::metadata(format!("/dev/shm/{name}")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o777, 0o600);
    assert_eq!(seg.data_len(), 8192);
    assert_eq!(seg.info().creator_pid, std::process::id());
    let other = Segment::open(&format!("/{name}")).unwrap();
    assert_eq!(other.info(), seg.info());
    seg.at::<AtomicU64>(seg.data_offset())
        .unwrap()
        .store(7, Ordering::SeqCst);
    assert_eq!(
        other
            .at::<AtomicU64>(other.data_offset())
            .unwrap()
            .load(Ordering::SeqCst),
        7
    );
    drop(other);
    assert!(
        std::path::Path::new(&format!("/dev/shm/{name}")).exists(),
        "opener never unlinks"
    );
    drop(seg);
    assert!(
        !std::path::Path::new(&format!("/dev/shm/{name}")).exists(),
        "creator unlinks"
    );
    assert!(matches!(Segment::open(&name), Err(Error::NotFound)));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn bad_names_and_sizes_are_errors() {
    assert!(matches!(
        Segment::create(&SegmentOptions::new(1).prefix("a/b")),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        Segment::create(&SegmentOptions::new(1).prefix("")),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        Segment::open("../etc/passwd"),
        Err(Error::InvalidName(_))
    ));
    assert!(matches!(
        Segment::create(&opts().max_participants(0)),
        Err(Error::InvalidSize(_))
    ));
    assert!(matches!(
        Segment::create(&SegmentOptions::new(u64::MAX).prefix(prefix())),
        Err(Error::InvalidSize(_))
    ));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn offsets_are_bounds_checked() {
    let seg = Segment::create(&opts()).unwrap();
    let d = seg.data_offset().get();
    assert!(seg.at::<ShmMutex>(Offset(d)).is_ok());
    assert!(
        matches!(
            seg.at::<ShmMutex>(Offset(0)),
            Err(Error::OutOfBounds { .. })
        ),
        "header is off limits"
    );
    assert!(
        matches!(
            seg.at::<ShmMutex>(Offset(d + 2)),
            Err(Error::OutOfBounds { .. })
        ),
        "misaligned"
    );
    assert!(matches!(
        seg.at::<ShmMutex>(Offset(d + 8192 - 4)),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(seg.ptr(Offset(d + 8192), 1).is_err());
    assert!(write_bytes(&seg, Offset(u64::MAX - 1), &[1, 2, 3]).is_err());
    let mut b = [0u8; 4];
    write_bytes(&seg, Offset(d + 8188), &[1, 2, 3, 4]).unwrap();
    read_bytes(&seg, Offset(d + 8188), &mut b).unwrap();
    assert_eq!(b, [1, 2, 3, 4]);
}

#[test]
fn words_commit_and_discard_ranges() {
    let seg = Segment::create(&opts().allocate(false)).unwrap();
    let d = seg.data_offset().get();
    let words = seg.words(Offset(d), 1024).unwrap();
    words[0].store(5, Ordering::Relaxed);
    words[1023].store(7, Ordering::Relaxed);
    assert_eq!(
        seg.words(Offset(d), 1024).unwrap()[1023].load(Ordering::Relaxed),
        7
    );
    assert!(seg.words(Offset(d + 4), 1).is_err(), "misaligned");
    assert!(seg.words(Offset(d), 1025).is_err(), "past the end");
    assert!(seg.words(Offset(d), usize::MAX).is_err(), "overflow");
    // Committing and discarding pages: discarded memory reads as zeros.
    seg.commit_range(Offset(d + 4096), 4096).unwrap();
    write_bytes(&seg, Offset(d + 4096), &[9; 16]).unwrap();
    discard_range(&seg, Offset(d + 4096), 4096).unwrap();
    let mut back = [1u8; 16];
    read_bytes(&seg, Offset(d + 4096), &mut back).unwrap();
    assert_eq!(back, [0; 16]);
    assert_eq!(words[0].load(Ordering::Relaxed), 5, "other pages untouched");
    assert_eq!(
        words[1023].load(Ordering::Relaxed),
        0,
        "in the discarded page"
    );
    assert!(seg.commit_range(Offset(d + 4096), 8192).is_err());
    assert!(
        discard_range(&seg, Offset(0), 4096).is_err(),
        "header is off limits"
    );
    let ro = Segment::open_read_only(seg.name().unwrap()).unwrap();
    assert!(matches!(ro.words(Offset(d), 1), Err(Error::ReadOnly)));
    assert!(matches!(
        discard_range(&ro, Offset(d), 4096),
        Err(Error::ReadOnly)
    ));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn populate_faults_a_range_in_without_changing_it() {
    let seg = Segment::create(&opts().allocate(false)).unwrap();
    let d = seg.data_offset().get();
    seg.commit_range(Offset(d), 8192).unwrap();
    write_bytes(&seg, Offset(d + 100), &[7; 4]).unwrap();
    seg.populate_range(Offset(d), 8192).unwrap();
    let mut b = [0u8; 4];
    read_bytes(&seg, Offset(d + 100), &mut b).unwrap();
    assert_eq!(b, [7; 4]);
    assert!(
        seg.populate_range(Offset(d), 1 << 20).is_err(),
        "past the end"
    );
    let ro = Segment::open_read_only(seg.name().unwrap()).unwrap();
    assert!(matches!(
        ro.populate_range(Offset(d), 4096),
        Err(Error::ReadOnly)
    ));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn lent_out_range_refuses_typed_references_in_every_handle() {
    let seg = Segment::create(&opts()).unwrap();
    let d = seg.data_offset().get();
    assert_eq!(seg.lent_from(), None);
    seg.lend_from(Offset(d + 4096)).unwrap();
    // A later, higher offset does not shrink the lent-out range.
    seg.lend_from(Offset(d + 6000)).unwrap();
    assert_eq!(seg.lent_from(), Some(Offset(d + 4096)));
    // Another handle of the same object sees it too.
    let other = Segment::open(seg.name().unwrap()).unwrap();
    for s in [&seg, &other] {
        assert!(s.words(Offset(d), 512).is_ok(), "below the range");
        assert!(matches!(
            s.words(Offset(d), 513),
            Err(Error::LentOut { .. })
        ));
        assert!(matches!(
            s.at::<AtomicU64>(Offset(d + 4096)),
            Err(Error::LentOut { .. })
        ));
        assert!(
            s.ptr(Offset(d + 4096), 16).is_ok(),
            "raw pointers still reach it"
        );
    }
    // A lower offset grows the range.
    other.lend_from(Offset(d + 8)).unwrap();
    assert!(seg.at::<AtomicU64>(Offset(d + 8)).is_err());
    assert!(seg.at::<AtomicU64>(Offset(d)).is_ok());
    let ro = Segment::open_read_only(seg.name().unwrap()).unwrap();
    assert!(matches!(ro.lend_from(Offset(d)), Err(Error::ReadOnly)));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn grow_is_seen_after_refresh() {
    let seg = Segment::create(&opts().max_data_len(1 << 20)).unwrap();
    let other = Segment::open(seg.name().unwrap()).unwrap();
    let far = Offset(seg.data_offset().get() + 100_000);
    assert!(write_bytes(&seg, far, &[9]).is_err());
    seg.grow(200_000).unwrap();
    assert_eq!(seg.data_len(), 200_000);
    write_bytes(&seg, far, &[9]).unwrap();
    assert!(
        read_bytes(&other, far, &mut [0]).is_err(),
        "not yet refreshed"
    );
    other.refresh().unwrap();
    let mut b = [0u8];
    read_bytes(&other, far, &mut b).unwrap();
    assert_eq!(b[0], 9);
    assert!(matches!(seg.grow(2 << 20), Err(Error::InvalidSize(_))));
    seg.grow(10).unwrap(); // never shrinks
    assert_eq!(seg.data_len(), 200_000);
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn corrupted_or_foreign_objects_are_rejected() {
    let seg = Segment::create(&opts()).unwrap();
    let name = seg.name().unwrap().to_owned();
    let path = format!("/dev/shm/{name}");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let flip = |at: u64| {
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    };
    flip(0);
    assert!(matches!(
        Segment::open(&name),
        Err(Error::Header(HeaderError::BadMagic))
    ));
    flip(0);
    flip(20);
    assert!(matches!(
        Segment::open(&name),
        Err(Error::Header(HeaderError::BadChecksum))
    ));
    flip(20);
    flip(110); // reserved byte
    assert!(matches!(
        Segment::open(&name),
        Err(Error::Header(HeaderError::BadField { .. }))
    ));
    flip(110);
    assert!(Segment::open(&name).is_ok());
    f.set_len(4096 + 100).unwrap(); // truncated below total_len
    assert!(matches!(
        Segment::open(&name),
        Err(Error::Header(HeaderError::BadField {
            field: "total_len",
            ..
        }))
    ));
    f.set_len(50).unwrap();
    assert!(matches!(
        Segment::open(&name),
        Err(Error::Header(HeaderError::TooSmall { .. }))
    ));
    drop(seg);

    // Foreign content and unsafe permissions under our prefix.
    let foreign = format!("{}-foreign", prefix());
    let fpath = format!("/dev/shm/{foreign}");
    let ff = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fpath)
        .unwrap();
    ff.write_all_at(&[0u8; 8192], 0).unwrap();
    assert!(matches!(
        Segment::open(&foreign),
        Err(Error::Header(HeaderError::BadMagic))
    ));
    std::fs::set_permissions(&fpath, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    assert!(matches!(Segment::open(&foreign), Err(Error::Permission(_))));
    std::fs::remove_file(&fpath).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn images_round_trip_and_garbage_is_an_error() {
    let seg = Segment::create(&opts()).unwrap();
    write_bytes(&seg, seg.data_offset(), b"hello").unwrap();
    let mut image = vec![0u8; seg.len() as usize];
    let f = std::fs::File::open(format!("/dev/shm/{}", seg.name().unwrap())).unwrap();
    f.read_exact_at(&mut image, 0).unwrap();
    let copy = Segment::from_image(&image, Access::ReadWrite).unwrap();
    let mut b = [0u8; 5];
    read_bytes(&copy, copy.data_offset(), &mut b).unwrap();
    assert_eq!(&b, b"hello");
    assert!(matches!(
        Segment::from_image(&image[..4096], Access::ReadOnly),
        Err(Error::Header(_))
    ));
    assert!(matches!(
        Segment::from_image(&[], Access::ReadOnly),
        Err(Error::Header(HeaderError::TooSmall { .. }))
    ));
    let mut bad = image.clone();
    bad[8] = 99; // layout version
    assert!(matches!(
        Segment::from_image(&bad, Access::ReadOnly),
        Err(Error::Header(_))
    ));
    // Pseudo-random garbage never opens.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for len in [1usize, 64, 127, 128, 129, 4096, 10_000] {
        let junk: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(Segment::from_image(&junk, Access::ReadWrite).is_err());
    }
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn read_only_mapping_faults_on_write_in_child() {
    let seg = Segment::create(&opts()).unwrap();
    write_bytes(&seg, seg.data_offset(), &[0xAB]).unwrap();
    let ro = Segment::open_read_only(seg.name().unwrap()).unwrap();
    assert_eq!(ro.access(), Access::ReadOnly);
    assert!(matches!(
        ro.at::<ShmMutex>(ro.data_offset()),
        Err(Error::ReadOnly)
    ));
    assert!(matches!(
        write_bytes(&ro, ro.data_offset(), &[1]),
        Err(Error::ReadOnly)
    ));
    assert!(matches!(ro.join(), Err(Error::ReadOnly)));
    let view = seg.map_read_only().unwrap();
    let p = view.ptr(seg.data_offset(), 1).unwrap();
    // SAFETY: in bounds of the live read-only mapping; no reference to the
    // byte exists and no thread writes it.
    assert_eq!(unsafe { p.as_ptr().read() }, 0xAB);

    let mut k = KillOnDrop(spawn(
        ENTRY,
        "ro_write",
        &[("SEG", seg.name().unwrap().to_owned())],
    ));
    let st = wait_bounded(&mut k.0, Duration::from_secs(60));
    assert_eq!(
        st.signal(),
        Some(libc_sigsegv()),
        "write through PROT_READ must fault: {st:?}"
    );
    let mut b = [0u8];
    read_bytes(&seg, seg.data_offset(), &mut b).unwrap();
    assert_eq!(b[0], 0xAB, "data untouched");
}

fn libc_sigsegv() -> i32 {
    11
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn registry_slots_generations_and_full() {
    let seg = Segment::create(&opts().max_participants(2)).unwrap();
    let a = seg.join().unwrap();
    let b = seg.join().unwrap();
    assert_ne!(a.slot(), b.slot());
    assert!(matches!(seg.join(), Err(Error::RegistryFull)));
    assert!(a.is_alive(b.token()));
    let old = b.token();
    drop(b);
    assert!(!a.is_alive(old), "dropped participant is dead");
    let c = seg.join().unwrap();
    assert_ne!(c.token(), old, "reused slot has a new generation");
    assert!(!a.is_alive(old), "old token stays dead after reuse");
    assert!(a.is_alive(c.token()));
    let infos = seg.participants();
    assert_eq!(infos.len(), 2);
    assert!(infos.iter().all(|i| i.alive && i.pid == std::process::id()));
    // A lock from another segment is refused.
    let other = Segment::create(&opts()).unwrap();
    let m: &ShmMutex = other.at(other.data_offset()).unwrap();
    assert!(matches!(
        m.try_lock(&a),
        Err(shm_core::LockError::ForeignLock)
    ));
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn anonymous_segment_shared_by_fd() {
    let seg = Segment::anonymous(&SegmentOptions::new(4096)).unwrap();
    assert!(seg.name().is_none());
    let dup = seg.as_fd().try_clone_to_owned().unwrap();
    // A second handle over the same object (as another process would get
    // through fd passing).
    let other = Segment::from_fd(dup, Access::ReadWrite).unwrap();
    let a = seg.join().unwrap();
    let b = other.join().unwrap();
    let m1: &ShmMutex = seg.at(seg.data_offset()).unwrap();
    let m2: &ShmMutex = other.at(other.data_offset()).unwrap();
    let g = m1.lock(&a).unwrap();
    assert!(matches!(
        m2.try_lock(&b),
        Err(shm_core::LockError::WouldBlock)
    ));
    drop(g);
    drop(m2.try_lock(&b).unwrap());
    // Shrinking is sealed.
    let f = std::fs::File::from(seg.as_fd().try_clone_to_owned().unwrap());
    assert!(f.set_len(10).is_err());
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn event_wakes_across_handles() {
    let seg = Segment::create(&opts()).unwrap();
    let ev: &shm_core::ShmEvent = seg.at(seg.data_offset()).unwrap();
    let seen = ev.current();
    assert_eq!(ev.wait_while(seen, Duration::from_millis(20)), None);
    std::thread::scope(|s| {
        let h = s.spawn(|| ev.wait_while(seen, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        ev.notify();
        assert_eq!(h.join().unwrap(), Some(seen.wrapping_add(1)));
    });
}

#[test]
#[cfg_attr(miri, ignore = "needs real syscalls")]
fn event_spin_sees_a_notification_without_sleeping_and_gives_up_on_budget() {
    let seg = Segment::create(&opts()).unwrap();
    let ev: &shm_core::ShmEvent = seg.at(seg.data_offset()).unwrap();
    let seen = ev.current();
    assert_eq!(ev.spin_while(seen, Duration::ZERO), None);
    let t0 = std::time::Instant::now();
    assert_eq!(ev.spin_while(seen, Duration::from_millis(5)), None);
    assert!(t0.elapsed() >= Duration::from_millis(5));
    std::thread::scope(|s| {
        let h = s.spawn(|| ev.spin_while(seen, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(5));
        ev.notify();
        assert_eq!(h.join().unwrap(), Some(seen.wrapping_add(1)));
    });
    // A changed sequence returns at once, whatever the budget.
    assert_eq!(
        ev.spin_while(seen, Duration::from_secs(30)),
        Some(seen.wrapping_add(1))
    );
}
