//! Trusted hosts: mutual TLS between the hosts of a run, and each host's
//! name bound to its certificate.
//!
//! Over mutual TLS every host presents a certificate signed by the run's
//! CA and checks the other's against it (TLS 1.3 in Zenoh's `quic/`
//! transport with `enable_mtls`; not its `tls/` one, which reads and
//! writes one TLS session from two threads at once, eclipse-zenoh/zenoh
//! #2557, and drops connections under traffic both ways); a connection without one, with one from another CA or
//! with an expired one never becomes a link. A certificate's common name
//! is the host it speaks for: every host loads Zenoh access control made
//! from the placement ([`access_control`]), so a peer whose certificate
//! names `gpu` may declare and publish only what host `gpu` does (its
//! liveliness tokens, its status, the entries and frames of the operators
//! placed on it, the credit of the streams it reads) and receives
//! nothing unless its name is a host of the run. Denied messages are
//! dropped by Zenoh on arrival; a host that never joins is reported with
//! what was refused meanwhile ([`Refusals`]).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use fastio_pipeline::Pipeline;

use crate::error::NetError;

/// The files of mutual TLS: the same CA on every host, and this host's
/// certificate (common name = the host's name) and private key, all PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed every host's certificate.
    pub ca: PathBuf,
    /// This host's certificate (its common name is the host's name).
    pub cert: PathBuf,
    /// This host's private key.
    pub key: PathBuf,
}

/// What one certificate says, as far as a run cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSummary {
    /// The subject's common name.
    pub common_name: Option<String>,
    /// The DNS names of its subject alternative names.
    pub dns_names: Vec<String>,
    /// Valid from (seconds since the epoch).
    pub not_before: i64,
    /// Valid until (seconds since the epoch).
    pub not_after: i64,
}

/// Reads the first certificate of a PEM file.
pub fn read_certificate(path: &Path) -> Result<CertificateSummary, NetError> {
    let bad = |why: String| NetError::Tls {
        what: path.display().to_string(),
        why,
    };
    // A certificate is a few KiB; a bigger file is not one.
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if meta.len() > 1 << 20 {
        return Err(bad(format!("{} bytes: not a PEM certificate", meta.len())));
    }
    let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&text)
        .map_err(|e| bad(format!("not a PEM certificate ({e})")))?;
    if pem.label != "CERTIFICATE" {
        return Err(bad(format!("a PEM {:?}, not a CERTIFICATE", pem.label)));
    }
    let cert = pem
        .parse_x509()
        .map_err(|e| bad(format!("not an X.509 certificate ({e})")))?;
    let common_name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned);
    let mut dns_names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = name {
                dns_names.push((*d).to_owned());
            }
        }
    }
    Ok(CertificateSummary {
        common_name,
        dns_names,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

impl TlsFiles {
    /// Checks this host's files before any connection, so that a mistake
    /// of ours is told here rather than as a refusal on the other hosts:
    /// the files read, the CA and the certificate are certificates, the
    /// certificate names `host` and is valid now.
    pub fn check(&self, host: &str) -> Result<CertificateSummary, NetError> {
        read_certificate(&self.ca)?;
        std::fs::metadata(&self.key).map_err(|e| NetError::Tls {
            what: self.key.display().to_string(),
            why: e.to_string(),
        })?;
        let cert = read_certificate(&self.cert)?;
        let bad = |why: String| NetError::Tls {
            what: self.cert.display().to_string(),
            why,
        };
        if cert.common_name.as_deref() != Some(host) {
            return Err(bad(format!(
                "its common name is {}, not this host's name {host:?}: every host's certificate names the host it speaks for (docs/hosts.md)",
                cert.common_name
                    .as_deref()
                    .map_or("absent".to_owned(), |c| format!("{c:?}"))
            )));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if now > cert.not_after {
            return Err(bad(format!(
                "expired {} s ago: no host would accept it",
                now - cert.not_after
            )));
        }
        if now < cert.not_before {
            return Err(bad(format!(
                "valid only in {} s: no host would accept it yet",
                cert.not_before - now
            )));
        }
        Ok(cert)
    }
}

/// The Zenoh access control (json5) that binds each host of `pipeline` to
/// its certificate in the run under `prefix`: messages from a peer are
/// accepted only on the keys its certificate's host owns (below), the
/// declarations of subscribers and queries only within the run, and
/// nothing is sent to a peer whose certificate names no host of the run.
///
/// What host `h` owns: `<run>/host/h`, `<run>/op/h/**` (liveliness),
/// `<run>/status/h`, `<run>/entry/h/*` (the entries `h` sends each
/// host), `<run>/stream/<key>/**` of every stream produced on `h`, and
/// `<run>/credit/<key>/h` of every stream read on `h`.
pub fn access_control(pipeline: &Pipeline, prefix: &str) -> String {
    let p = pipeline;
    let hosts = &p.placement.hosts;
    let mut rules = String::new();
    let mut subjects = String::new();
    let mut policies = String::new();
    let list = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (i, h) in hosts.iter().enumerate() {
        let mut owned = vec![
            format!("{prefix}/host/{h}"),
            format!("{prefix}/op/{h}/**"),
            format!("{prefix}/status/{h}"),
            format!("{prefix}/entry/{h}/*"),
        ];
        for c in p.placement.crossings(&p.plan) {
            let key = &p.plan.entries[c.entry].key;
            if c.from == i {
                owned.push(format!("{prefix}/stream/{key}/**"));
            }
            if c.to.contains(&i) {
                owned.push(format!("{prefix}/credit/{key}/{h}"));
            }
        }
        let _ = write!(
            rules,
            r#"{{"id":"owned-{i}","permission":"allow","flows":["ingress"],"messages":["put","delete","liveliness_token"],"key_exprs":[{}]}},"#,
            list(&owned)
        );
        let _ = write!(
            subjects,
            r#"{{"id":"host-{i}","cert_common_names":[{h:?}],"link_protocols":["tls","quic"]}},"#
        );
        let _ = write!(
            policies,
            r#"{{"id":"policy-{i}","rules":["owned-{i}","asks","sends"],"subjects":["host-{i}"]}},"#
        );
    }
    let _ = write!(
        rules,
        r#"{{"id":"asks","permission":"allow","flows":["ingress"],"messages":["declare_subscriber","declare_liveliness_subscriber","liveliness_query","query","declare_queryable"],"key_exprs":["{prefix}/**"]}},"#
    );
    let _ = write!(
        rules,
        r#"{{"id":"sends","permission":"allow","flows":["egress"],"messages":["put","delete","declare_subscriber","query","reply","declare_queryable","liveliness_token","liveliness_query","declare_liveliness_subscriber"],"key_exprs":["{prefix}/**"]}}"#
    );
    format!(
        r#"{{"enabled":true,"default_permission":"deny","rules":[{rules}],"subjects":[{}],"policies":[{}]}}"#,
        subjects.trim_end_matches(','),
        policies.trim_end_matches(',')
    )
}

/// What TLS refused while this process ran, newest last (at most 32),
/// gathered from Zenoh's own reports ([`watch_refusals`]) and from the
/// peers a link saw whose certificates name no host it could accept.
#[derive(Debug, Default)]
pub struct Refusals {
    seen: Mutex<VecDeque<String>>,
}

impl Refusals {
    const MOST: usize = 32;

    /// Notes one refusal (a repeat of one already noted is not noted
    /// again).
    pub fn note(&self, what: String) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&what) {
            return;
        }
        if seen.len() == Self::MOST {
            seen.pop_front();
        }
        seen.push_back(what);
    }

    /// The refusals noted so far.
    pub fn all(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter().cloned().collect()
    }
}

/// The refusals of this process.
pub fn refusals() -> &'static Refusals {
    static R: OnceLock<Refusals> = OnceLock::new();
    R.get_or_init(Refusals::default)
}

/// Installs the process's `tracing` subscriber once: Zenoh's log to
/// stderr as `RUST_LOG` asks (as Zenoh's own would), and every warning of
/// Zenoh's TLS links (a handshake refused: no certificate, an unknown CA,
/// an expired certificate) noted in [`refusals`]. Does nothing when the
/// process already has a subscriber (then refusals are not gathered).
///
/// Without `RUST_LOG`, every other event and span stays disabled at its
/// call site (interest never) and levels above `WARN` are not even looked
/// at, about as cheap as no subscriber at all: a layer that is not there
/// must not be given (an absent `Option` layer says it wants everything,
/// and then each of Zenoh's trace spans was made and dropped for every
/// message, several µs of a 4 KiB round trip between hosts).
pub fn watch_refusals() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let log = std::env::var("RUST_LOG").is_ok();
        let _ = tracing::subscriber::set_global_default(subscriber(log));
    });
}

/// The subscriber [`watch_refusals`] installs: the refusals' layer, and
/// the log to stderr when `log`.
fn subscriber(log: bool) -> Box<dyn tracing::Subscriber + Send + Sync> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let registry = tracing_subscriber::registry();
    if log {
        let log = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::EnvFilter::from_default_env());
        Box::new(registry.with(log).with(refusal_layer()))
    } else {
        Box::new(registry.with(refusal_layer()))
    }
}

/// [`RefusalLayer`] for the TLS warnings only: every other call site is
/// disabled where it is (`FilterFn` caches its answer as the call site's
/// interest), and nothing above `WARN` is asked.
fn refusal_layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    RefusalLayer.with_filter(
        tracing_subscriber::filter::filter_fn(is_tls_warning)
            .with_max_level_hint(tracing::level_filters::LevelFilter::WARN),
    )
}

/// Notes the warnings of Zenoh's TLS links in [`refusals`].
struct RefusalLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RefusalLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if !is_tls_warning(event.metadata()) {
            return;
        }
        let mut text = MessageText(String::new());
        event.record(&mut text);
        if let Some(why) = refusal_reason(&text.0) {
            refusals().note(format!("a TLS connection refused: {why}"));
        }
    }
}

/// The warnings of Zenoh's QUIC listener (a refused handshake); not its
/// other notes (such as skipping the server's name, which we ask for).
fn is_tls_warning(meta: &tracing::Metadata<'_>) -> bool {
    meta.target() == "zenoh_link_commons::quic::unicast" && *meta.level() <= tracing::Level::WARN
}

/// The reason in a refused QUIC handshake's report (`... reason:
/// b"invalid peer certificate: UnknownIssuer" ...`), else the report
/// without Zenoh's hint about open files.
fn refusal_reason(report: &str) -> Option<String> {
    let quoted = ["reason: b\"", "reason: \""]
        .iter()
        .find_map(|m| report.split_once(m))
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(why, _)| why.to_owned());
    let why = quoted.unwrap_or_else(|| {
        let plain = report.split("Hint:").next().unwrap_or_default();
        plain.trim().trim_end_matches('.').to_owned()
    });
    (!why.is_empty()).then_some(why)
}

struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_handshake_is_told_by_its_reason() {
        let r = "QUIC acceptor failed: ConnectionClosed(ConnectionClose { error_code: Code::crypto(30), frame_type: None, reason: b\"invalid peer certificate: UnknownIssuer\" }) at /x/unicast.rs:68. Hint: increase the system open file limit.";
        assert_eq!(
            refusal_reason(r).as_deref(),
            Some("invalid peer certificate: UnknownIssuer")
        );
        let r = "QUIC acceptor failed: TransportError(Error { code: Code::crypto(74), frame: None, reason: \"peer sent no certificates\" }) at x";
        assert_eq!(
            refusal_reason(r).as_deref(),
            Some("peer sent no certificates")
        );
        assert_eq!(
            refusal_reason("timed out. Hint: increase the system open file limit.").as_deref(),
            Some("timed out")
        );
        assert_eq!(refusal_reason(" Hint: x"), None);
    }

    /// A call site of the target and level given, for asking a
    /// subscriber what it wants of it.
    macro_rules! call_site {
        ($target:expr, $level:expr) => {{
            struct Site;
            static SITE: Site = Site;
            static META: tracing::Metadata<'static> = tracing::Metadata::new(
                "a test event",
                $target,
                $level,
                None,
                None,
                None,
                tracing::field::FieldSet::new(&[], tracing::callsite::Identifier(&SITE)),
                tracing::metadata::Kind::EVENT,
            );
            impl tracing::callsite::Callsite for Site {
                fn set_interest(&self, _: tracing::subscriber::Interest) {}
                fn metadata(&self) -> &tracing::Metadata<'_> {
                    &META
                }
            }
            &META
        }};
    }

    #[test]
    fn the_watcher_wants_nothing_but_quic_refusals() {
        // The subscriber `watch_refusals` installs without `RUST_LOG`.
        let d = subscriber(false);
        assert_eq!(
            d.max_level_hint(),
            Some(tracing::level_filters::LevelFilter::WARN)
        );
        // Every other call site is off where it is (never, not
        // "sometimes": nothing is made for it per event).
        for meta in [
            call_site!("zenoh_transport::unicast", tracing::Level::TRACE),
            call_site!("zenoh_transport::unicast", tracing::Level::WARN),
            call_site!("zenoh_link_commons::quic::unicast", tracing::Level::INFO),
        ] {
            assert!(d.register_callsite(meta).is_never(), "{meta:?}");
        }
        let refusal = call_site!("zenoh_link_commons::quic::unicast", tracing::Level::WARN);
        assert!(d.register_callsite(refusal).is_always());
    }

    #[test]
    fn the_watcher_notes_quic_refusals() {
        // The process's own subscriber (with or without `RUST_LOG`).
        watch_refusals();
        tracing::warn!(
            target: "zenoh_link_commons::quic::unicast",
            "QUIC acceptor failed: TransportError(Error {{ code: Code::crypto(74), frame: None, reason: \"watcher test: no certificate\" }}) at x"
        );
        tracing::warn!(target: "zenoh_transport::unicast", "not a refusal: watcher test");
        let seen = refusals().all();
        assert!(
            seen.iter()
                .any(|r| r == "a TLS connection refused: watcher test: no certificate"),
            "{seen:?}"
        );
        assert!(
            !seen.iter().any(|r| r.contains("not a refusal")),
            "{seen:?}"
        );
    }

    #[test]
    fn refusals_keep_the_newest_distinct_ones() {
        let r = Refusals::default();
        for i in 0..40 {
            r.note(format!("r{i}"));
        }
        // A repeat is not noted again.
        r.note("r39".into());
        let all = r.all();
        assert_eq!(all.len(), Refusals::MOST);
        assert_eq!(all.first().map(String::as_str), Some("r8"));
        assert_eq!(all.last().map(String::as_str), Some("r39"));
    }
}
