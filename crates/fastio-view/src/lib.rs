//! A running fastio pipeline, live in [Foxglove](https://foxglove.dev):
//! a [`Viewer`] serves Foxglove's WebSocket protocol through Foxglove's own
//! SDK (the `foxglove` crate), so that Foxglove's app ("Open connection →
//! Foxglove WebSocket") shows the run while it goes on.
//!
//! Channels (topics as a recording names them, so a layout made on a
//! recording works live):
//!
//! * `<stream>/image`: every frame of an image stream (the rule of
//!   [`fastio_record::image_format`]: `uint8 [H, W]`, `[H, W, 3]`,
//!   `[H, W, 4]`, `uint16 [H, W]`, `float32 [H, W]`) as `foxglove.RawImage`
//!   (protobuf), its timestamp the frame's source timestamp;
//! * `<stream>/frame`: every stream's frames as JSON ([`FRAME_SCHEMA`]):
//!   frame and source frame numbers, timestamp (`timestamp_ns`, and as
//!   `{sec, nsec}`, exact where JSON readers hold numbers as doubles),
//!   shape, element type and min/max/mean of its elements;
//! * `operators/<operator>`: once a second, an operator's numbers as JSON
//!   ([`OPERATOR_SCHEMA`], from [`Viewer::operators`]);
//! * `log`: operators' and the driver's lines as `foxglove.Log`
//!   ([`Viewer::log`]);
//! * `run`: the run's end, the last message ([`Viewer::end`],
//!   [`RUN_SCHEMA`]).
//!
//! A viewer never slows the pipeline: it reads streams through observers
//! ([`fastio::StreamTap`]: never a consumer, never holding a slot), only
//! while a client is subscribed to one of the stream's channels, at most
//! [`ViewOptions::rate`] frames a second per stream; each client has a
//! queue of at most [`ViewOptions::backlog`] messages, whose oldest are
//! dropped when the client does not read them (the SDK's lossy queue).
//! Log lines beyond the rate are dropped and counted.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dtype::Primitive;
use fastio::{CopiedFrame, Error as FastioError, OperatorStats, StreamTap};
use fastio_record::image_format;
use foxglove::messages::{Log, RawImage, Timestamp, log::Level};
use foxglove::websocket::ServerListener;
use foxglove::{Channel, PartialMetadata, RawChannel, Schema, WebSocketServer};
use serde_json::{Value, json};

/// The default rate: frames per second per stream (and log lines per
/// second).
pub const DEFAULT_RATE: f64 = 30.0;

/// The default queue of each client, in messages.
pub const DEFAULT_BACKLOG: usize = 64;

/// JSON schema of `<stream>/frame` messages.
pub const FRAME_SCHEMA: &str = r#"{
  "title": "fastio.Frame",
  "type": "object",
  "properties": {
    "stream": {"type": "string"},
    "frame": {"type": "integer"},
    "source_frame": {"type": "integer"},
    "timestamp_ns": {"type": "integer"},
    "timestamp": {"type": "object", "title": "time", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
    "shape": {"type": "array", "items": {"type": "integer"}},
    "element": {"type": "string"},
    "min": {"type": ["number", "null"]},
    "max": {"type": ["number", "null"]},
    "mean": {"type": ["number", "null"]}
  }
}"#;

/// JSON schema of `operators/<operator>` messages.
pub const OPERATOR_SCHEMA: &str = r#"{
  "title": "fastio.Operator",
  "type": "object",
  "properties": {
    "operator": {"type": "string"},
    "state": {"type": "string"},
    "pid": {"type": ["integer", "null"]},
    "cpu_seconds": {"type": ["number", "null"]},
    "cpu_percent": {"type": ["number", "null"]},
    "rss_bytes": {"type": ["integer", "null"]},
    "restarts": {"type": ["integer", "null"]},
    "in": {"type": ["integer", "null"]},
    "out": {"type": ["integer", "null"]},
    "dropped": {"type": ["integer", "null"]},
    "step_ms_p50": {"type": ["number", "null"]},
    "step_ms_p99": {"type": ["number", "null"]},
    "latency_ms_p50": {"type": ["number", "null"]},
    "latency_ms_p99": {"type": ["number", "null"]},
    "frames": {"type": ["object", "null"]}
  }
}"#;

/// JSON schema of the `run` message.
pub const RUN_SCHEMA: &str = r#"{
  "title": "fastio.RunEnd",
  "type": "object",
  "properties": {
    "pipeline": {"type": "string"},
    "ended": {"type": "boolean"},
    "succeeded": {"type": ["boolean", "null"]},
    "text": {"type": "string"},
    "failure": {"type": ["object", "null"]}
  }
}"#;

/// What can go wrong starting a viewer.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The server could not listen on the address.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        error: String,
    },
    /// The rate is not a positive number of messages a second.
    #[error("rate {rate}: expected a number of messages a second in (0, 1000]")]
    Rate {
        /// The rate given.
        rate: f64,
    },
    /// A channel could not be made.
    #[error("channel {topic}: {error}")]
    Channel {
        /// Its topic.
        topic: String,
        /// Why.
        error: String,
    },
}

/// How a viewer serves.
#[derive(Debug, Clone)]
pub struct ViewOptions {
    /// Where to listen (`127.0.0.1:8765`; port 0 picks a free port).
    pub listen: SocketAddr,
    /// Most messages a second per channel: frames per stream, log lines.
    pub rate: f64,
    /// Most messages queued for one client; the oldest go first when a
    /// client does not read.
    pub backlog: usize,
    /// The server's name, shown by Foxglove (the pipeline's).
    pub name: String,
}

impl ViewOptions {
    /// Listening on `listen` at the default rate and backlog.
    pub fn new(listen: SocketAddr, name: &str) -> ViewOptions {
        ViewOptions {
            listen,
            rate: DEFAULT_RATE,
            backlog: DEFAULT_BACKLOG,
            name: name.to_owned(),
        }
    }
}

/// The level of a [`Viewer::log`] line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Information (an operator's stdout, the driver's lines).
    Info,
    /// A warning (an operator's stderr).
    Warning,
    /// An error (an operator failed, a stream failed).
    Error,
}

/// One operator's numbers, as `fastio top` shows them
/// ([`Viewer::operators`]).
#[derive(Debug, Clone, Default)]
pub struct OperatorNumbers {
    /// Its name.
    pub name: String,
    /// How far it is (`waiting`, `running`, `succeeded`, `exit 3`, ...).
    pub state: String,
    /// Its process, while it runs.
    pub pid: Option<u32>,
    /// CPU seconds so far.
    pub cpu_seconds: Option<f64>,
    /// Resident memory, bytes.
    pub rss_bytes: Option<u64>,
    /// Times it was started again (known to the driver only).
    pub restarts: Option<u32>,
    /// The statistics its frame loop publishes.
    pub stats: Option<OperatorStats>,
}

/// How the run ended ([`Viewer::end`]).
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// Whether it succeeded (`None`: not known to this viewer).
    pub succeeded: Option<bool>,
    /// One line: `succeeded`, or the failure as the CLI prints it.
    pub text: String,
    /// The typed failure, as `--report json` gives it.
    pub failure: Option<Value>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn timestamp(ns: u64) -> Timestamp {
    Timestamp::new(
        u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX),
        (ns % 1_000_000_000) as u32,
    )
}

/// Says one line per client event.
struct Clients {
    say: Arc<dyn Fn(String) + Send + Sync>,
    connected: AtomicU64,
    ever: AtomicU64,
}

impl ServerListener for Clients {
    fn on_client_connect(&self) {
        let n = self.ever.fetch_add(1, Ordering::Relaxed) + 1;
        let now = self.connected.fetch_add(1, Ordering::Relaxed) + 1;
        (self.say)(format!("viewer: client {n} connected ({now} connected)"));
    }

    fn on_client_disconnect(&self) {
        let now = self
            .connected
            .fetch_sub(1, Ordering::Relaxed)
            .saturating_sub(1);
        (self.say)(format!("viewer: a client left ({now} connected)"));
    }
}

/// A token bucket: at most `rate` a second, bursts of one second's worth.
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
    dropped: u64,
}

impl Bucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let gained = now.duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + gained).min(self.rate.max(1.0));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.dropped += 1;
            false
        }
    }
}

/// An operator's channel and its CPU seconds when last seen (for its
/// CPU percentage).
/// An operator's channel, its CPU seconds when last published, and its
/// last message (published again at the run's end, for a client that
/// subscribed after it went out).
struct OperatorChannel {
    channel: Arc<RawChannel>,
    cpu: Option<(f64, Instant)>,
    last: Option<String>,
}

struct Shared {
    ctx: Arc<foxglove::Context>,
    stop: AtomicBool,
    rate: f64,
    say: Arc<dyn Fn(String) + Send + Sync>,
    log: Channel<Log>,
    log_bucket: Mutex<Bucket>,
    /// Per operator: its channel, and its CPU seconds when last seen.
    operators: Mutex<BTreeMap<String, OperatorChannel>>,
    run: Arc<RawChannel>,
}

/// A JSON channel of `topic` with the JSON schema `schema` (named by its
/// title).
fn json_channel(
    ctx: &Arc<foxglove::Context>,
    topic: &str,
    schema: &'static str,
) -> Result<Arc<RawChannel>, ViewError> {
    let name = serde_json::from_str::<Value>(schema)
        .ok()
        .and_then(|v| v["title"].as_str().map(str::to_owned))
        .unwrap_or_default();
    ctx.channel_builder(topic)
        .message_encoding("json")
        .schema(Schema::new(name, "jsonschema", schema.as_bytes()))
        .build_raw()
        .map_err(|e| ViewError::Channel {
            topic: topic.to_owned(),
            error: e.to_string(),
        })
}

impl Shared {
    fn log(&self, level: LogLevel, name: &str, text: &str) {
        if !self.log.has_sinks() {
            return;
        }
        let dropped = {
            let mut b = lock(&self.log_bucket);
            if !b.take() {
                return;
            }
            std::mem::take(&mut b.dropped)
        };
        let t = now_ns();
        let mut message = text.to_owned();
        if dropped > 0 {
            message.push_str(&format!(
                " ({dropped} line(s) dropped before this one: more than the rate)"
            ));
        }
        self.log.log_with_time(
            &Log {
                timestamp: Some(timestamp(t)),
                level: match level {
                    LogLevel::Info => Level::Info,
                    LogLevel::Warning => Level::Warning,
                    LogLevel::Error => Level::Error,
                } as i32,
                message,
                name: name.to_owned(),
                file: String::new(),
                line: 0,
            },
            t,
        );
    }
}

/// A Foxglove WebSocket server showing one run.
pub struct Viewer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Option<foxglove::WebSocketServerHandle>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Viewer")
            .field("addr", &self.addr)
            .field("streams", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl Viewer {
    /// Listens on `opts.listen` and serves. `say` receives the viewer's
    /// own lines (one per client that connects or leaves, a stream that
    /// ends); the caller prints them.
    pub fn start(
        opts: &ViewOptions,
        say: Arc<dyn Fn(String) + Send + Sync>,
    ) -> Result<Viewer, ViewError> {
        if !(opts.rate > 0.0 && opts.rate <= 1000.0) {
            return Err(ViewError::Rate { rate: opts.rate });
        }
        // Bind here first: the SDK's own error for a taken port is less
        // plain, and a bad address is said before anything runs.
        drop(
            std::net::TcpListener::bind(opts.listen).map_err(|e| ViewError::Listen {
                addr: opts.listen,
                error: e.to_string(),
            })?,
        );
        let ctx = foxglove::Context::new();
        let listener = Arc::new(Clients {
            say: say.clone(),
            connected: AtomicU64::new(0),
            ever: AtomicU64::new(0),
        });
        let server = WebSocketServer::new()
            .name(opts.name.clone())
            .bind(opts.listen.ip().to_string(), opts.listen.port())
            .message_backlog_size(opts.backlog.max(1))
            .listener(listener)
            .context(&ctx)
            .start_blocking()
            .map_err(|e| ViewError::Listen {
                addr: opts.listen,
                error: e.to_string(),
            })?;
        let addr = SocketAddr::new(opts.listen.ip(), server.port());
        let log = ctx.channel_builder("log").build::<Log>();
        let run = json_channel(&ctx, "run", RUN_SCHEMA)?;
        let shared = Shared {
            ctx,
            stop: AtomicBool::new(false),
            rate: opts.rate,
            say,
            log,
            log_bucket: Mutex::new(Bucket {
                rate: opts.rate,
                tokens: opts.rate.max(1.0),
                at: Instant::now(),
                dropped: 0,
            }),
            operators: Mutex::new(BTreeMap::new()),
            run,
        };
        Ok(Viewer {
            shared: Arc::new(shared),
            addr,
            server: Some(server),
            threads: Vec::new(),
        })
    }

    /// Where it listens (with the port it got for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Shows stream `name` (frames of `element`, at most `max_shape`):
    /// its `<name>/frame` channel and, for images, `<name>/image`. `open`
    /// makes an observer of it ([`fastio::Context::stream_tap`]); it is
    /// called when a client subscribes, and the observer is dropped when
    /// the last one leaves. A thread serves it until the stream ends or
    /// fails, or [`Viewer::finish`].
    pub fn add_stream(
        &mut self,
        name: &str,
        element: Primitive,
        max_shape: &[usize],
        open: impl FnMut() -> fastio::Result<StreamTap> + Send + 'static,
    ) -> Result<(), ViewError> {
        let frame = json_channel(&self.shared.ctx, &format!("{name}/frame"), FRAME_SCHEMA)?;
        let image = image_format(element, max_shape).map(|_| {
            self.shared
                .ctx
                .channel_builder(format!("{name}/image"))
                .build::<RawImage>()
        });
        let shared = self.shared.clone();
        let name = name.to_owned();
        self.threads.push(std::thread::spawn(move || {
            serve_stream(&shared, &name, element, &frame, image.as_ref(), open);
        }));
        Ok(())
    }

    /// Publishes each operator's numbers on `operators/<name>` (call it
    /// about once a second).
    pub fn operators(&self, ops: &[OperatorNumbers]) {
        let mut channels = lock(&self.shared.operators);
        for op in ops {
            if !channels.contains_key(&op.name) {
                match json_channel(
                    &self.shared.ctx,
                    &format!("operators/{}", op.name),
                    OPERATOR_SCHEMA,
                ) {
                    Ok(channel) => {
                        channels.insert(
                            op.name.clone(),
                            OperatorChannel {
                                channel,
                                cpu: None,
                                last: None,
                            },
                        );
                    }
                    Err(e) => {
                        (self.shared.say)(format!("viewer: {e}"));
                        continue;
                    }
                }
            }
            let Some(oc) = channels.get_mut(&op.name) else {
                continue;
            };
            let now = Instant::now();
            let cpu_percent = match (op.cpu_seconds, oc.cpu) {
                (Some(c), Some((c0, t0))) if now > t0 => {
                    Some(((c - c0).max(0.0) / now.duration_since(t0).as_secs_f64()) * 100.0)
                }
                _ => None,
            };
            if let Some(c) = op.cpu_seconds {
                oc.cpu = Some((c, now));
            }
            let text = operator_json(op, cpu_percent).to_string();
            if oc.channel.has_sinks() {
                oc.channel
                    .log_with_meta(text.as_bytes(), PartialMetadata::with_log_time(now_ns()));
            }
            oc.last = Some(text);
        }
    }

    /// Publishes a line on `log` as `foxglove.Log` (`name`: the operator,
    /// or `fastio` for the driver's own lines), at most the rate a second.
    pub fn log(&self, level: LogLevel, name: &str, text: &str) {
        self.shared.log(level, name, text);
    }

    /// Publishes every operator's last numbers once more, then the run's
    /// end on `run` (and as a last `log` line).
    pub fn end(&self, pipeline: &str, end: &RunEnd) {
        // Every operator's last numbers once more, before the end: a
        // client that subscribed to a channel after its numbers went out
        // (an operator that finished early, a client slow to subscribe)
        // still ends with them.
        for oc in lock(&self.shared.operators).values() {
            if let (Some(text), true) = (&oc.last, oc.channel.has_sinks()) {
                oc.channel
                    .log_with_meta(text.as_bytes(), PartialMetadata::with_log_time(now_ns()));
            }
        }
        let v = json!({
            "pipeline": pipeline,
            "ended": true,
            "succeeded": end.succeeded,
            "text": end.text,
            "failure": end.failure,
        });
        let t = now_ns();
        self.shared
            .run
            .log_with_meta(v.to_string().as_bytes(), PartialMetadata::with_log_time(t));
        let level = if end.succeeded == Some(false) {
            LogLevel::Error
        } else {
            LogLevel::Info
        };
        // The end is never dropped for the rate.
        lock(&self.shared.log_bucket).tokens += 1.0;
        self.shared
            .log(level, "fastio", &format!("run ended: {}", end.text));
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.server.as_ref().map_or(0, |s| s.client_count())
    }

    /// Stops serving streams, gives clients up to `linger` to take what is
    /// queued for them (less when none is connected), then closes every
    /// connection (waiting at most a second more for them to close).
    pub fn finish(mut self, linger: Duration) {
        self.shared.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let until = Instant::now() + linger;
        while Instant::now() < until && self.clients() > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(server) = self.server.take() {
            let handle = server.stop();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                handle.wait_blocking();
                let _ = tx.send(());
            });
            let _ = rx.recv_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

/// The thread of one stream: while someone subscribes, take a frame at
/// most `rate` times a second and publish it.
fn serve_stream(
    shared: &Shared,
    name: &str,
    element: Primitive,
    frame_channel: &RawChannel,
    image_channel: Option<&Channel<RawImage>>,
    mut open: impl FnMut() -> fastio::Result<StreamTap>,
) {
    let interval = Duration::from_secs_f64(1.0 / shared.rate);
    let mut tap: Option<StreamTap> = None;
    let mut due = Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        let wanted = frame_channel.has_sinks() || image_channel.is_some_and(|c| c.has_sinks());
        if !wanted {
            // Nobody looks: the stream has no observer of ours.
            tap = None;
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let now = Instant::now();
        if now < due {
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
            continue;
        }
        if tap.is_none() {
            match open() {
                Ok(t) => tap = Some(t),
                Err(e) => {
                    (shared.say)(format!("viewer: stream {name}: {e}"));
                    return;
                }
            }
        }
        let Some(t) = tap.as_mut() else { continue };
        match t.next(Some(Duration::from_millis(100))) {
            Ok(Some(f)) => {
                due = Instant::now() + interval;
                publish_frame(name, element, &f, frame_channel, image_channel);
            }
            Err(FastioError::StreamTimeout { .. }) => {}
            Ok(None) => {
                shared.log(LogLevel::Info, "fastio", &format!("stream {name} ended"));
                return;
            }
            Err(FastioError::StreamPoisoned { .. }) => {
                shared.log(
                    LogLevel::Error,
                    "fastio",
                    &format!("stream {name} failed (poisoned)"),
                );
                return;
            }
            Err(e) => {
                (shared.say)(format!("viewer: stream {name}: {e}"));
                return;
            }
        }
    }
}

fn publish_frame(
    name: &str,
    element: Primitive,
    f: &CopiedFrame,
    frame_channel: &RawChannel,
    image_channel: Option<&Channel<RawImage>>,
) {
    let meta = PartialMetadata::with_log_time(f.timestamp_ns);
    if let Some(c) = image_channel.filter(|c| c.has_sinks())
        && let Some(format) = image_format(element, &f.shape)
    {
        let (h, w) = (f.shape[0], f.shape[1]);
        c.log_with_meta(
            &RawImage {
                timestamp: Some(timestamp(f.timestamp_ns)),
                frame_id: name.to_owned(),
                width: u32::try_from(w).unwrap_or(u32::MAX),
                height: u32::try_from(h).unwrap_or(u32::MAX),
                encoding: format.encoding.to_owned(),
                step: u32::try_from(w * format.bytes_per_pixel).unwrap_or(u32::MAX),
                data: f.bytes.clone().into(),
            },
            meta,
        );
    }
    if frame_channel.has_sinks() {
        let (min, max, mean) = summary(element, &f.bytes).unzip3();
        let v = json!({
            "stream": name,
            "frame": f.seq,
            "source_frame": f.source_seq,
            "timestamp_ns": f.timestamp_ns,
            "timestamp": {"sec": f.timestamp_ns / 1_000_000_000, "nsec": f.timestamp_ns % 1_000_000_000},
            "shape": f.shape,
            "element": element.name(),
            "min": min,
            "max": max,
            "mean": mean,
        });
        frame_channel.log_with_meta(v.to_string().as_bytes(), meta);
    }
}

trait Unzip3 {
    fn unzip3(self) -> (Option<f64>, Option<f64>, Option<f64>);
}

impl Unzip3 for Option<(f64, f64, f64)> {
    fn unzip3(self) -> (Option<f64>, Option<f64>, Option<f64>) {
        match self {
            Some((a, b, c)) => (Some(a), Some(b), Some(c)),
            None => (None, None, None),
        }
    }
}

/// `binary16` to `f64`.
fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// Min, max and mean of the elements of `bytes` (native byte order; NaN
/// left out); `None` for an empty frame, complex elements, or only NaN.
pub fn summary(element: Primitive, bytes: &[u8]) -> Option<(f64, f64, f64)> {
    let size = element.size();
    let value = |c: &[u8]| -> f64 {
        let a = |n: usize| -> [u8; 8] {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&c[..n]);
            b
        };
        let a2 = || [c[0], c[1]];
        let a4 = || [c[0], c[1], c[2], c[3]];
        match element {
            Primitive::Bool => f64::from(u8::from(c[0] != 0)),
            Primitive::Int8 => f64::from(c[0] as i8),
            Primitive::UInt8 => f64::from(c[0]),
            Primitive::Int16 => f64::from(i16::from_ne_bytes(a2())),
            Primitive::UInt16 => f64::from(u16::from_ne_bytes(a2())),
            Primitive::Int32 => f64::from(i32::from_ne_bytes(a4())),
            Primitive::UInt32 => f64::from(u32::from_ne_bytes(a4())),
            Primitive::Int64 => i64::from_ne_bytes(a(8)) as f64,
            Primitive::UInt64 => u64::from_ne_bytes(a(8)) as f64,
            Primitive::Float16 => f16_to_f64(u16::from_ne_bytes(a2())),
            Primitive::BFloat16 => {
                f64::from(f32::from_bits(u32::from(u16::from_ne_bytes(a2())) << 16))
            }
            Primitive::Float32 => f64::from(f32::from_ne_bytes(a4())),
            Primitive::Float64 => f64::from_ne_bytes(a(8)),
            _ => f64::NAN,
        }
    };
    if matches!(element, Primitive::Complex64 | Primitive::Complex128) || size == 0 {
        return None;
    }
    let (mut min, mut max, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0u64);
    for c in bytes.chunks_exact(size) {
        let v = value(c);
        if v.is_nan() {
            continue;
        }
        min = min.min(v);
        max = max.max(v);
        sum += v;
        n += 1;
    }
    (n > 0).then(|| (min, max, sum / n as f64))
}

/// The JSON of `operators/<name>`: the numbers `fastio top` shows, as
/// scalars a Plot panel draws (sums over inputs and outputs, the largest
/// latency over the inputs, as the run's summary gives them), and the
/// frame loop's statistics as `--report json` gives them (`frames`).
pub fn operator_json(op: &OperatorNumbers, cpu_percent: Option<f64>) -> Value {
    let st = op.stats.as_ref();
    let lat = st.map(|s| {
        s.latency_ns
            .iter()
            .fold([0u64, 0], |a, l| [a[0].max(l[0]), a[1].max(l[1])])
    });
    let ms = |ns: u64| ns as f64 / 1e6;
    json!({
        "operator": op.name,
        "state": op.state,
        "pid": op.pid,
        "cpu_seconds": op.cpu_seconds,
        "cpu_percent": cpu_percent,
        "rss_bytes": op.rss_bytes,
        "restarts": op.restarts,
        "in": st.map(|s| s.frames_in.iter().sum::<u64>()),
        "out": st.map(|s| s.frames_out.iter().sum::<u64>()),
        "dropped": st.map(|s| s.dropped.iter().sum::<u64>()),
        "step_ms_p50": st.map(|s| ms(s.step_ns[0])),
        "step_ms_p99": st.map(|s| ms(s.step_ns[1])),
        "latency_ms_p50": st.filter(|s| !s.latency_ns.is_empty()).and(lat).map(|l| ms(l[0])),
        "latency_ms_p99": st.filter(|s| !s.latency_ns.is_empty()).and(lat).map(|l| ms(l[1])),
        "frames": st.map(|f| json!({
            "steps": f.steps,
            "in": f.frames_in,
            "out": f.frames_out,
            "dropped": f.dropped,
            "step_ns_p50": f.step_ns[0],
            "step_ns_p99": f.step_ns[1],
            "latency_ns": f.latency_ns.iter().map(|l| json!({"p50": l[0], "p99": l[1]})).collect::<Vec<_>>(),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_of_every_kind_of_element() {
        let u8s = [3u8, 1, 2, 250];
        assert_eq!(summary(Primitive::UInt8, &u8s), Some((1.0, 250.0, 64.0)));
        let f32s: Vec<u8> = [1.5f32, f32::NAN, -2.5]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(summary(Primitive::Float32, &f32s), Some((-2.5, 1.5, -0.5)));
        let u16s: Vec<u8> = [1u16, 65535].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(
            summary(Primitive::UInt16, &u16s),
            Some((1.0, 65535.0, 32768.0))
        );
        let i64s: Vec<u8> = [-4i64, 4].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(summary(Primitive::Int64, &i64s), Some((-4.0, 4.0, 0.0)));
        // 1.0, -2.0 and 0.5 in binary16; 1.0 in bfloat16 (0x3f80).
        let f16s: Vec<u8> = [0x3c00u16, 0xc000, 0x3800]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        assert_eq!(
            summary(Primitive::Float16, &f16s),
            Some((-2.0, 1.0, -0.5 / 3.0))
        );
        assert_eq!(
            summary(Primitive::BFloat16, &0x3f80u16.to_ne_bytes()),
            Some((1.0, 1.0, 1.0))
        );
        assert_eq!(summary(Primitive::UInt8, &[]), None);
        assert_eq!(summary(Primitive::Complex64, &[0; 8]), None);
        let nan: Vec<u8> = f32::NAN.to_ne_bytes().to_vec();
        assert_eq!(summary(Primitive::Float32, &nan), None);
    }

    #[test]
    fn an_operator_as_json_has_top_numbers_and_the_report_frames() {
        let op = OperatorNumbers {
            name: "mid".into(),
            state: "running".into(),
            pid: Some(7),
            cpu_seconds: Some(1.5),
            rss_bytes: Some(4096),
            restarts: Some(1),
            stats: Some(OperatorStats {
                steps: 10,
                frames_in: vec![10, 9],
                frames_out: vec![10],
                dropped: vec![0, 1],
                skipped: vec![0, 0],
                step_ns: [1_000_000, 3_000_000],
                latency_ns: vec![[2_000_000, 5_000_000], [4_000_000, 4_500_000]],
                latency_buckets: vec![],
                latency_sum_ns: vec![],
            }),
        };
        let v = operator_json(&op, Some(12.5));
        assert_eq!(v["in"], 19);
        assert_eq!(v["out"], 10);
        assert_eq!(v["dropped"], 1);
        assert_eq!(v["step_ms_p99"], 3.0);
        assert_eq!(v["latency_ms_p50"], 4.0);
        assert_eq!(v["latency_ms_p99"], 5.0);
        assert_eq!(v["restarts"], 1);
        assert_eq!(v["cpu_percent"], 12.5);
        assert_eq!(v["frames"]["in"], json!([10, 9]));
        assert_eq!(v["frames"]["latency_ns"][1]["p99"], 4_500_000);
        let none = operator_json(&OperatorNumbers::default(), None);
        assert!(none["frames"].is_null() && none["latency_ms_p50"].is_null());
    }

    #[test]
    fn the_log_bucket_keeps_the_rate_and_counts_the_rest() {
        let mut b = Bucket {
            rate: 5.0,
            tokens: 5.0,
            at: Instant::now(),
            dropped: 0,
        };
        let taken = (0..100).filter(|_| b.take()).count();
        // Five at once, and at most one more in the microseconds this took.
        assert!((5..=6).contains(&taken), "{taken}");
        assert_eq!(b.dropped as usize, 100 - taken);
    }

    #[test]
    fn a_bad_rate_or_a_taken_port_is_an_error() {
        let say: Arc<dyn Fn(String) + Send + Sync> = Arc::new(|_| {});
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let mut o = ViewOptions::new(addr, "t");
        o.rate = 0.0;
        assert!(matches!(
            Viewer::start(&o, say.clone()),
            Err(ViewError::Rate { .. })
        ));
        let taken = std::net::TcpListener::bind(addr).unwrap();
        let o = ViewOptions::new(taken.local_addr().unwrap(), "t");
        let e = Viewer::start(&o, say).unwrap_err();
        assert!(matches!(e, ViewError::Listen { .. }), "{e}");
    }
}
