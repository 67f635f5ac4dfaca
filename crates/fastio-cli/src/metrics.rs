//! `fastio run --metrics ADDR`: the run's numbers as OpenMetrics text
//! (`prometheus-client`) over HTTP, `GET /metrics`, from the driver's
//! snapshot of every second (the state that already lives in the driver
//! and the context). One thread serves, one request at a time; it stops
//! with the run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastio_pipeline::snapshot::{OperatorState, RunSnapshot};
use fastio_pipeline::{Outcome, Pipeline};
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::Failure;

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// The server and the latest snapshot it serves.
pub(crate) struct MetricsServer {
    latest: Arc<Mutex<Option<RunSnapshot>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Which input of which operator first consumes each entry (the operator
/// whose statistics give the entry's latency).
fn first_consumers(p: &Pipeline) -> Vec<Option<(usize, usize)>> {
    p.plan
        .entries
        .iter()
        .enumerate()
        .map(|(e, entry)| {
            let op = *entry.consumers.first()?;
            let k = p.plan.operators[op]
                .inputs
                .iter()
                .position(|(_, x)| *x == e)?;
            Some((op, k))
        })
        .collect()
}

impl MetricsServer {
    /// Binds `addr` (`127.0.0.1:9100`) and serves until dropped.
    pub(crate) fn start(addr: &str, pipeline: &Pipeline) -> Result<MetricsServer, Failure> {
        let listener = TcpListener::bind(addr).map_err(|e| Failure {
            message: format!("--metrics {addr}: {e}"),
            code: 2,
        })?;
        listener.set_nonblocking(true).map_err(|e| Failure {
            message: format!("--metrics {addr}: {e}"),
            code: 1,
        })?;
        let latest: Arc<Mutex<Option<RunSnapshot>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (latest.clone(), stop.clone());
        let consumers = first_consumers(pipeline);
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let body = {
                            let snap = l.lock().unwrap_or_else(|p| p.into_inner());
                            encode(snap.as_ref(), &consumers)
                        };
                        let _ = answer(stream, &body);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(MetricsServer {
            latest,
            stop,
            thread: Some(thread),
        })
    }

    /// Serves `snapshot` from now on. CPU time is a counter: each
    /// operator's never goes below what was served before (a process
    /// being reaped has no `/proc` entry for a moment).
    pub(crate) fn update(&self, mut snapshot: RunSnapshot) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(prev) = latest.as_ref() {
            for (o, p) in snapshot.operators.iter_mut().zip(&prev.operators) {
                o.cpu = o.cpu.max(p.cpu);
            }
        }
        *latest = Some(snapshot);
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one HTTP request: the metrics for `GET /metrics`, 404 else.
fn answer(mut stream: TcpStream, body: &str) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut request = [0u8; 2048];
    let n = stream.read(&mut request)?;
    let first = String::from_utf8_lossy(&request[..n]);
    let path = first.split_whitespace().nth(1).unwrap_or("");
    let (status, kind, text) =
        if first.starts_with("GET ") && path.split('?').next() == Some("/metrics") {
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                body,
            )
        } else {
            (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "GET /metrics\n",
            )
        };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
}

/// A histogram family whose buckets were counted elsewhere (by the
/// operators' frame loops).
#[derive(Debug)]
struct CountedHistograms(Vec<Counted>);

/// One histogram: its labels, sum, count and (upper bound, count) buckets.
type Counted = (Labels, f64, u64, Vec<(f64, u64)>);

impl EncodeMetric for CountedHistograms {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        for (labels, sum, count, buckets) in &self.0 {
            let mut e = encoder.encode_family(labels)?;
            e.encode_histogram::<Labels>(*sum, *count, buckets, None)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn state_name(s: &OperatorState) -> &'static str {
    match s {
        OperatorState::Waiting => "waiting",
        OperatorState::Running => "running",
        OperatorState::Finished(Outcome::Succeeded) => "succeeded",
        OperatorState::Finished(Outcome::Failed(_) | Outcome::Signaled(_)) => "failed",
        OperatorState::Finished(Outcome::TimedOut) => "timed_out",
        OperatorState::Finished(Outcome::Stopped) => "stopped",
        OperatorState::Finished(Outcome::NotRun) => "not_run",
        OperatorState::Finished(Outcome::SpawnFailed(_)) => "not_started",
        OperatorState::Finished(Outcome::Elsewhere(_)) => "elsewhere",
    }
}

/// The states `fastio_operator_state` has a series for.
const STATES: [&str; 9] = [
    "waiting",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "stopped",
    "not_run",
    "not_started",
    "elsewhere",
];

/// The OpenMetrics text of `snap` (an empty exposition before the first).
pub(crate) fn encode(snap: Option<&RunSnapshot>, consumers: &[Option<(usize, usize)>]) -> String {
    let mut reg = Registry::with_prefix("fastio");
    if let Some(s) = snap {
        let gauge = |reg: &mut Registry, name: &str, help: &str, v: f64| {
            let g = FloatGauge::default();
            g.set(v);
            reg.register(name, help, g);
        };
        gauge(
            &mut reg,
            "run_seconds",
            "Time since the run started",
            s.elapsed.as_secs_f64(),
        );
        if let Some(c) = &s.context {
            gauge(
                &mut reg,
                "context_used_bytes",
                "Bytes in live allocations",
                c.used_bytes as f64,
            );
            gauge(
                &mut reg,
                "context_cached_bytes",
                "Bytes in blocks kept for reuse",
                c.cached_bytes as f64,
            );
            gauge(
                &mut reg,
                "context_capacity_bytes",
                "Bytes available to allocations",
                c.capacity as f64,
            );
            gauge(
                &mut reg,
                "context_allocations",
                "Live allocations",
                c.live_allocations as f64,
            );
            gauge(
                &mut reg,
                "context_published_names",
                "Names published",
                c.published_names as f64,
            );
        }
        let holders = Family::<Labels, FloatGauge>::default();
        holders
            .get_or_create(&labels(&[("state", "alive")]))
            .set(s.participants.0 as f64);
        holders
            .get_or_create(&labels(&[("state", "dead")]))
            .set(s.participants.1 as f64);
        reg.register(
            "context_participants",
            "Processes attached to the context (dead: not yet reaped)",
            holders,
        );
        let state = Family::<Labels, FloatGauge>::default();
        let cpu = Family::<Labels, FloatCounter>::default();
        let rss = Family::<Labels, FloatGauge>::default();
        let restarts = Family::<Labels, FloatCounter>::default();
        let failed = Family::<Labels, FloatGauge>::default();
        for o in &s.operators {
            // The failure as everywhere else: its kind, whether it is a
            // consequence, and its one text.
            if let Some(f) = &o.failure {
                let kind = serde_json::to_value(f)
                    .ok()
                    .and_then(|v| v["kind"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                let text = f.to_string();
                let consequence = if f.is_secondary() { "true" } else { "false" };
                failed
                    .get_or_create(&labels(&[
                        ("operator", &o.name),
                        ("kind", &kind),
                        ("consequence", consequence),
                        ("text", &text),
                    ]))
                    .set(1.0);
            }
            let now = state_name(&o.state);
            for st in STATES {
                state
                    .get_or_create(&labels(&[("operator", &o.name), ("state", st)]))
                    .set(if st == now { 1.0 } else { 0.0 });
            }
            let op = labels(&[("operator", &o.name)]);
            cpu.get_or_create(&op).inc_by(o.cpu.as_secs_f64());
            rss.get_or_create(&op).set(o.rss_bytes as f64);
            restarts.get_or_create(&op).inc_by(f64::from(o.restarts));
        }
        reg.register(
            "operator_state",
            "1 for the state each operator is in",
            state,
        );
        reg.register("operator_cpu_seconds", "CPU time of each operator", cpu);
        reg.register(
            "operator_resident_bytes",
            "Resident memory of each operator (peak once it ended)",
            rss,
        );
        reg.register(
            "operator_restarts",
            "Times each operator was started again",
            restarts,
        );
        reg.register(
            "operator_failed",
            "1 for an operator whose last process failed: the failure's kind, whether it is a consequence of another, and its text",
            failed,
        );
        let bytes = Family::<Labels, FloatGauge>::default();
        let frames = Family::<Labels, FloatCounter>::default();
        let dropped = Family::<Labels, FloatCounter>::default();
        let mut latency = Vec::new();
        for (e, edge) in s.edges.iter().enumerate() {
            let l = labels(&[("entry", &edge.entry)]);
            if let Some(b) = edge.bytes {
                bytes.get_or_create(&l).set(b as f64);
            }
            if let Some(f) = edge.frames {
                frames.get_or_create(&l).inc_by(f as f64);
            }
            if let Some(d) = edge.dropped {
                dropped.get_or_create(&l).inc_by(d as f64);
            }
            let stats = consumers
                .get(e)
                .copied()
                .flatten()
                .and_then(|(op, k)| Some((s.operators.get(op)?.stats.as_ref()?, k)));
            if let Some((st, k)) = stats
                && let (Some(counts), Some(&sum)) =
                    (st.latency_buckets.get(k), st.latency_sum_ns.get(k))
            {
                let mut buckets: Vec<(f64, u64)> = fastio::LATENCY_BUCKETS_NS
                    .iter()
                    .map(|&b| b as f64 / 1e9)
                    .chain(std::iter::once(f64::INFINITY))
                    .zip(counts.iter().copied())
                    .collect();
                buckets.truncate(fastio::LATENCY_BUCKETS_NS.len() + 1);
                let count = counts.iter().fold(0u64, |a, &c| a.saturating_add(c));
                latency.push((l.clone(), sum as f64 / 1e9, count, buckets));
            }
        }
        reg.register("edge_bytes", "Bytes each entry's producer published", bytes);
        reg.register(
            "edge_frames",
            "Frames published through each stream",
            frames,
        );
        reg.register(
            "edge_dropped_frames",
            "Frames each stream's consumers lost to drop-oldest",
            dropped,
        );
        reg.register(
            "edge_latency_seconds",
            "Age of each stream's frames when its first consumer took them",
            CountedHistograms(latency),
        );
    }
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}
