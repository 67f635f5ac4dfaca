//! The stream methods of [`Context`](crate::Context): making, declaring,
//! attaching to, poisoning, removing and looking at streams. Every
//! `impl Context` for streams is here.

use super::*;

impl Context {
    /// Makes the stream `name` and returns its producer (this process).
    /// Consumers attach with [`Context::stream_consumer`]; until a
    /// consumer index is attached, the producer keeps its frames for it
    /// (under `block`), so a consumer that starts late still sees frame 0.
    pub fn create_stream(&self, name: &str, opts: &StreamOptions) -> Result<StreamProducer> {
        let token = u64::from(self.shared.token());
        let core = self.make_stream(name, opts, token)?;
        Ok(StreamProducer::new(core, 0))
    }

    /// Makes the stream `name` with no producer yet (a driver's side: the
    /// producer attaches later with [`Context::stream_producer`]). It
    /// lives while the name is published: [`Context::remove_stream`]
    /// ends it.
    pub fn declare_stream(&self, name: &str, opts: &StreamOptions) -> Result<()> {
        self.make_stream(name, opts, 0).map(drop)
    }

    pub(super) fn make_stream(
        &self,
        name: &str,
        opts: &StreamOptions,
        producer: u64,
    ) -> Result<StreamCore> {
        opts.check(name)?;
        let bytes = opts.reserved_bytes().unwrap_or(u64::MAX);
        let alloc = self.create(bytes)?;
        let region = RingRegion::new(alloc)?;
        let control_words =
            ring::control_words(opts.depth, opts.consumers, opts.overflow).unwrap_or(usize::MAX);
        let words = region.words(control_words)?;
        // Checked by `opts.check` above: a Clara element type (code 1 to 11).
        let element = dtype::clara::code(opts.element) as u64;
        let flags = if opts.producer_may_restart {
            FLAG_PRODUCER_RESTART
        } else {
            0
        } | if opts.consumer_may_restart {
            FLAG_CONSUMER_RESTART
        } else {
            0
        } | if opts.recorder_place && opts.consumers > 0 {
            FLAG_RECORDER_PLACE
        } else {
            0
        };
        for i in [h::DATA_EVENT, h::SPACE_EVENT] {
            words[i].store(0, Ordering::Relaxed);
        }
        let geometry = ring::Geometry {
            depth: opts.depth,
            slot_size: opts.slot_bytes().unwrap_or(0),
            consumers: opts.consumers,
            overflow: opts.overflow,
            flags,
            element,
            max_shape: &opts.max_shape,
        };
        Ring::init(words, &geometry, producer).map_err(Error::corrupt)?;
        if flags & FLAG_RECORDER_PLACE != 0 {
            // Nobody there yet: it holds nothing back.
            Ring::trusted(words, opts.depth as u64, opts.consumers, opts.overflow)
                .cw(opts.consumers - 1, c::OWNER)
                .store(DETACHED, Ordering::SeqCst);
        }
        region
            .allocation()
            .publish_in_table(&alloc_name(name), false)?;
        StreamCore::open(self, name, region)
    }

    pub(super) fn open_stream(&self, name: &str) -> Result<StreamCore> {
        let alloc = match self.get_any(&alloc_name(name)) {
            Ok(a) => a,
            Err(Error::UnknownName(_)) => return Err(Error::UnknownName(name.to_owned())),
            Err(e) => return Err(e),
        };
        StreamCore::open(self, name, RingRegion::new(alloc)?)
    }

    /// Attaches as the producer of stream `name`: of a declared stream, or
    /// in place of a producer that died (it goes on at the first frame the
    /// dead one did not publish). [`Error::StreamBusy`] while a live
    /// process is the producer.
    pub fn stream_producer(&self, name: &str) -> Result<StreamProducer> {
        let core = self.open_stream(name)?;
        let me = u64::from(self.shared.token());
        let word = core.word(h::PRODUCER);
        let old = word.load(Ordering::SeqCst);
        let free = old == 0 || !self.shared.token_alive(old as u32);
        if !free
            || word
                .compare_exchange(old, me, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: "producer".into(),
            });
        }
        if let Some(e) = core.end_error(core.word(h::END).load(Ordering::SeqCst)) {
            word.store(old, Ordering::SeqCst);
            return Err(e);
        }
        let head = core.ring().head();
        Ok(StreamProducer::new(core, head))
    }

    /// Attaches as consumer `index` of stream `name`. A fresh index reads
    /// from frame 0; the index of a consumer that died and was kept for a
    /// restart resumes at the frame it had not finished; one that was
    /// detached resumes at the next frame published (the frames between
    /// count as dropped).
    pub fn stream_consumer(&self, name: &str, index: usize) -> Result<StreamConsumer> {
        let core = self.open_stream(name)?;
        if index >= core.consumers {
            return Err(Error::StreamConfig {
                stream: name.to_owned(),
                reason: format!("consumer {index} of {}", core.consumers),
            });
        }
        let me = u64::from(self.shared.token());
        let ring = core.ring();
        let owner = ring.cw(index, c::OWNER);
        let old = owner.load(Ordering::SeqCst);
        let token = (old & 0xffff_ffff) as u32;
        if old != 0 && old & DETACHED == 0 && self.shared.token_alive(token) {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: format!("consumer {index}"),
            });
        }
        if owner
            .compare_exchange(old, me, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(Error::StreamBusy {
                stream: name.to_owned(),
                role: format!("consumer {index}"),
            });
        }
        ring.cw(index, c::HOLDING).store(0, Ordering::SeqCst);
        if old & DETACHED != 0 {
            // Frames published while detached were not kept for it.
            let next = ring.cw(index, c::NEXT).load(Ordering::SeqCst);
            let head = ring.head();
            if head > next {
                ring.cw(index, c::DROPPED)
                    .fetch_add(head - next, Ordering::Relaxed);
                ring.cw(index, c::NEXT).store(head, Ordering::SeqCst);
            }
        }
        let next = ring.cw(index, c::NEXT).load(Ordering::SeqCst);
        let held = Held::with_room(core.most_held());
        Ok(StreamConsumer {
            shared: Arc::new(ConsumerShared {
                core,
                index,
                token: me,
                held: Mutex::new(held),
                read: AtomicU64::new(next),
            }),
        })
    }

    /// Marks stream `name` failed from its next frame (a driver stopping a
    /// pipeline): every consumer's and the producer's waits end with
    /// [`Error::StreamPoisoned`].
    pub fn poison_stream(&self, name: &str) -> Result<()> {
        let core = self.open_stream(name)?;
        let head = core.ring().head();
        core.poison(head);
        Ok(())
    }

    /// Unpublishes stream `name`; its memory goes when the last handle
    /// does.
    pub fn remove_stream(&self, name: &str) -> Result<()> {
        self.get_any(&alloc_name(name))?.free()
    }

    /// What stream `name` looks like now, read without taking part in it.
    pub fn stream_status(&self, name: &str) -> Result<StreamStatus> {
        let core = self.open_stream(name)?;
        let ring = core.ring();
        let end = core.word(h::END).load(Ordering::SeqCst);
        let consumers = (0..core.consumers)
            .map(|i| {
                let owner = ring.cw(i, c::OWNER).load(Ordering::SeqCst);
                ConsumerStatus {
                    attached: owner != 0 && owner & DETACHED == 0,
                    alive: owner != 0
                        && owner & DETACHED == 0
                        && self.shared.token_alive(owner as u32),
                    next: ring.cw(i, c::NEXT).load(Ordering::SeqCst),
                    dropped: ring.cw(i, c::DROPPED).load(Ordering::SeqCst),
                }
            })
            .collect();
        let producer = core.word(h::PRODUCER).load(Ordering::SeqCst);
        Ok(StreamStatus {
            depth: core.depth as usize,
            slots: ring.slots(),
            slot_bytes: core.slot_size,
            head: ring.head(),
            ended: (end & ENDED != 0).then_some(end & END_MASK),
            poisoned_from: (end & POISONED != 0).then_some(end & END_MASK),
            producer_alive: producer != 0 && self.shared.token_alive(producer as u32),
            consumers,
        })
    }
}
