//! Streams: frames flowing from one producer to a fixed set of consumers
//! through a ring of slots in a context, zero-copy and without a lock.
//!
//! A stream is made once ([`Context::create_stream`], or
//! [`Context::declare_stream`] by a driver that starts the processes
//! later), with its depth (frames in flight), the element type and the
//! largest shape of a frame (so each slot is sized once), the number of
//! consumers and what a full ring does ([`Overflow`]). Then, in any
//! process of the context:
//!
//! * the **producer** ([`StreamProducer`]) takes the next slot
//!   ([`StreamProducer::next_slot`]), writes the frame into it and
//!   publishes it ([`SlotMut::publish`]); [`StreamProducer::end`] ends the
//!   stream;
//! * each **consumer** ([`StreamConsumer`], one per index) takes frames in
//!   order ([`StreamConsumer::next`], or iterates over
//!   [`StreamConsumer::frames`]); a [`Frame`] is a read-only view of the
//!   slot (`PROT_READ` pages) and gives the slot back when dropped.
//!
//! ```
//! use fastio::{Context, ContextOptions, StreamOptions};
//! use dtype::Primitive;
//! # use std::time::Duration;
//! let ctx = Context::new(&ContextOptions::new().anonymous(true)).unwrap();
//! let mut tx = ctx
//!     .create_stream("video", &StreamOptions::new(Primitive::UInt8, &[4, 4]).depth(2))
//!     .unwrap();
//! let mut rx = ctx.stream_consumer("video", 0).unwrap();
//! let mut slot = tx.next_slot(None).unwrap();
//! slot.bytes_mut().fill(7);
//! slot.publish().unwrap();
//! tx.end().unwrap();
//! let frame = rx.next(Some(Duration::from_secs(1))).unwrap().unwrap();
//! assert_eq!((frame.seq(), frame.shape(), frame.bytes()[15]), (0, &[4usize, 4][..], 7));
//! drop(frame);
//! assert!(rx.next(None).unwrap().is_none()); // the end, after the last frame
//! ```
//!
//! # What a stream guarantees
//!
//! * **Order and fan-out.** Every consumer sees every frame in order; under
//!   [`Overflow::DropOldest`] it may see a gap in [`Frame::seq`] (and
//!   [`StreamConsumer::dropped`] counts it), never a frame twice or out of
//!   order. A slot is written again only when every consumer is done with
//!   it (under `block`), or when no consumer holds it (under
//!   `drop-oldest`): a frame being read is never overwritten.
//! * **No torn frame.** A frame becomes visible only after its producer
//!   published it whole; a producer that dies while writing leaves the
//!   frame invisible.
//! * **Crashes.** A producer that dies makes every consumer's `next` fail
//!   with [`Error::StreamPoisoned`] naming the first frame that will not
//!   come — or, when the stream allows a restart
//!   ([`StreamOptions::producer_may_restart`]), wait for a new producer
//!   ([`Context::stream_producer`]), which continues at that frame. A
//!   consumer that dies stops holding the producer back (its place is
//!   detached), or, when [`StreamOptions::consumer_may_restart`], holds it
//!   back until a new consumer takes its place and resumes at the frame
//!   the dead one had not finished. No process waits forever: every wait
//!   has a timeout, and liveness is checked every
//!   [`shm_core::LIVENESS_TICK`].
//! * **Steady state.** Publishing, taking and releasing a frame take no
//!   lock and make no system call, except one `FUTEX_WAKE` when the other
//!   side sleeps; the slots are made once, so there is no allocation and
//!   no page fault per frame after the first round.
//!
//! The ring's protocol and its numbered invariants are in
//! [`shm_core::ring`]; this module adds the slots' bytes, waiting and
//! liveness.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dtype::{Primitive, Type};
use ndobject::{Array, MemoryBlock};
use shm_core::ring;
use shm_core::{LIVENESS_TICK, ShmEvent};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::mapping::RingRegion;

use ring::{DETACHED, END_MASK, ENDED, POISONED, Poll, ProducerSlots, Ring, Space, c, h, s};
pub use ring::{MAX_FRAME_DIMS, Overflow};

mod consumer;
mod context;
mod frame;
mod options;
mod producer;
mod releases;
mod ring_handle;
mod status;
mod tap;

pub use consumer::{Frames, StreamConsumer};
pub use frame::Frame;
pub use options::StreamOptions;
pub use producer::{SlotMut, StreamProducer};
pub use releases::StreamReleases;
pub use status::{ConsumerStatus, StreamStatus};
pub use tap::{CopiedFrame, StreamTap};

use consumer::{ConsumerShared, Held};
use ring_handle::StreamCore;

pub use crate::names::STREAM_PREFIX;

/// A slot's bytes are a whole number of pages (a frame's first touch costs
/// no neighbour's page).
const SLOT_ALIGN: u64 = 4096;

/// Slot `i` starts `i × SLOT_STAGGER` bytes past a page boundary (modulo a
/// page): the caches choose a set from the address bits within a page
/// too, so page-aligned slots put the same offset of every slot on the
/// same sets, and a producer writing one slot evicts what a consumer is
/// about to read of another (`../shared/research/large_frames.md`). A
/// cache line, so frames stay 64-byte aligned.
const SLOT_STAGGER: u64 = 64;

/// Flags word: a dead producer may be restarted.
const FLAG_PRODUCER_RESTART: u64 = 1;
/// Flags word: a dead consumer may be restarted.
const FLAG_CONSUMER_RESTART: u64 = 2;
/// Flags word: the last consumer index is a recorder's place
/// ([`StreamOptions::recorder_place`]): it starts detached, and a recorder
/// that dies there is detached even when consumers may restart.
const FLAG_RECORDER_PLACE: u64 = 4;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// When a call's wait began and when it must end: read from the clock
/// only once the call has to wait (on the spinning path a frame's whole
/// step costs about as much as two readings of the clock).
#[derive(Debug, Clone, Copy)]
struct WaitClock {
    /// When the first wait began (liveness probes only after a tick).
    started: Instant,
    /// When the call gives up.
    deadline: Option<Instant>,
}

impl WaitClock {
    /// The clock of a call with `timeout`, read now (on its first wait).
    fn start(timeout: Option<Duration>) -> WaitClock {
        let started = Instant::now();
        WaitClock {
            started,
            deadline: timeout.and_then(|t| started.checked_add(t)),
        }
    }
}

/// The allocation name of stream `name`.
fn alloc_name(name: &str) -> String {
    format!("{STREAM_PREFIX}{name}")
}
