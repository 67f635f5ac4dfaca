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
    let text = read_pem(path, "a PEM certificate")?;
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

/// The names of the options that gave a run's TLS files, for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TlsOptionNames {
    ca: &'static str,
    cert: &'static str,
    key: &'static str,
}

impl TlsOptionNames {
    /// `fastio run`'s options.
    pub(crate) const CLI: TlsOptionNames = TlsOptionNames {
        ca: "--tls-ca",
        cert: "--tls-cert",
        key: "--tls-key",
    };
    /// The keys of a Zenoh configuration file (`--zenoh-config`).
    pub(crate) const CONFIG_FILE: TlsOptionNames = TlsOptionNames {
        ca: "transport/link/tls/root_ca_certificate",
        cert: "transport/link/tls/listen_certificate",
        key: "transport/link/tls/listen_private_key",
    };
}

/// `e` of the file given by `option`: its `what` names the option too
/// (`--tls-key FILE`).
fn given_by(option: &str, e: NetError) -> NetError {
    match e {
        NetError::Tls { what, why } => NetError::Tls {
            what: format!("{option} {what}"),
            why,
        },
        e => e,
    }
}

/// The largest TLS file read: a PEM certificate or key is a few KiB.
const LARGEST_PEM: u64 = 1 << 20;

/// Reads a PEM file of at most [`LARGEST_PEM`] bytes; `kind` says what it
/// should hold (for the messages).
fn read_pem(path: &Path, kind: &str) -> Result<Vec<u8>, NetError> {
    let bad = |why: String| NetError::Tls {
        what: path.display().to_string(),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if meta.is_dir() {
        return Err(bad(format!("a directory, not {kind}")));
    }
    if meta.len() > LARGEST_PEM {
        return Err(bad(format!("{} bytes: not {kind}", meta.len())));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    if bytes.is_empty() {
        return Err(bad(format!("an empty file, not {kind}")));
    }
    Ok(bytes)
}

/// Reads the private key of a PEM file as Zenoh's QUIC link does
/// (zenoh-link-commons 1.10 `quic/utils.rs`): the first of its `RSA
/// PRIVATE KEY` blocks, else of its `PRIVATE KEY` (PKCS #8) ones, else of
/// its `EC PRIVATE KEY` ones; and checks that rustls can sign with it.
fn read_private_key(path: &Path) -> Result<std::sync::Arc<dyn rustls::sign::SigningKey>, NetError> {
    use rustls::pki_types::PrivateKeyDer;
    const KIND: &str = "a PEM private key";
    let bad = |why: String| NetError::Tls {
        what: path.display().to_string(),
        why,
    };
    let pem = read_pem(path, KIND)?;
    let unreadable = |e: std::io::Error| bad(format!("not {KIND} ({e})"));
    let mut keys: Vec<PrivateKeyDer<'static>> =
        rustls_pemfile::rsa_private_keys(&mut pem.as_slice())
            .map(|k| k.map(PrivateKeyDer::from))
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
    if keys.is_empty() {
        keys = rustls_pemfile::pkcs8_private_keys(&mut pem.as_slice())
            .map(|k| k.map(PrivateKeyDer::from))
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
    }
    if keys.is_empty() {
        keys = rustls_pemfile::ec_private_keys(&mut pem.as_slice())
            .map(|k| k.map(PrivateKeyDer::from))
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
    }
    let Some(key) = keys.into_iter().next() else {
        let encrypted = pem
            .windows(b"ENCRYPTED PRIVATE KEY".len())
            .any(|w| w == b"ENCRYPTED PRIVATE KEY");
        return Err(bad(if encrypted {
            format!(
                "an encrypted private key: Zenoh reads only unencrypted ones (`openssl pkey -in {0} -out {0}.plain`)",
                path.display()
            )
        } else {
            format!(
                "not {KIND} (no BEGIN PRIVATE KEY, BEGIN EC PRIVATE KEY or BEGIN RSA PRIVATE KEY block)"
            )
        }));
    };
    rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| bad(format!("a private key TLS cannot sign with ({e})")))
}

/// Reads the first certificate of a PEM file as rustls takes it (DER).
fn read_certificate_der(
    path: &Path,
) -> Result<rustls::pki_types::CertificateDer<'static>, NetError> {
    const KIND: &str = "a PEM certificate";
    let bad = |why: String| NetError::Tls {
        what: path.display().to_string(),
        why,
    };
    let pem = read_pem(path, KIND)?;
    rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .ok_or_else(|| bad(format!("not {KIND}")))?
        .map_err(|e| bad(format!("not {KIND} ({e})")))
}

/// Whether `cert` is one the hosts of a run whose CA is `ca` accept, as
/// Zenoh's QUIC link checks a peer's (rustls with ring; the name is not
/// checked): as a client's certificate and as a server's.
fn signed_by(
    cert: &rustls::pki_types::CertificateDer<'static>,
    ca: rustls::pki_types::CertificateDer<'static>,
) -> Result<(), rustls::Error> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca)?;
    let roots = std::sync::Arc::new(roots);
    let now = rustls::pki_types::UnixTime::now();
    rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| rustls::Error::General(e.to_string()))?
        .verify_client_cert(cert, &[], now)?;
    let parsed = rustls::server::ParsedCertificate::try_from(cert)?;
    rustls::client::verify_server_cert_signed_by_trust_anchor(
        &parsed,
        &roots,
        &[],
        now,
        provider.signature_verification_algorithms.all,
    )
}

impl TlsFiles {
    /// Checks this host's files before any connection, so that a mistake
    /// of ours is told here rather than as a refusal on the other hosts
    /// (or as nothing at all: a key Zenoh cannot use leaves the host
    /// waiting for peers that never link): the CA and the certificate are
    /// certificates, the certificate names `host`, is valid now and is
    /// signed by the CA (as the other hosts check it), and the private key
    /// reads and is the key of the certificate. Each
    /// error names the option (`--tls-ca`, `--tls-cert`, `--tls-key`) and
    /// the file.
    pub fn check(&self, host: &str) -> Result<CertificateSummary, NetError> {
        self.check_given(host, TlsOptionNames::CLI)
    }

    /// [`TlsFiles::check`], the files given by the options `names`.
    pub(crate) fn check_given(
        &self,
        host: &str,
        names: TlsOptionNames,
    ) -> Result<CertificateSummary, NetError> {
        read_certificate(&self.ca).map_err(|e| given_by(names.ca, e))?;
        let cert = read_certificate(&self.cert).map_err(|e| given_by(names.cert, e))?;
        let bad = |why: String| NetError::Tls {
            what: format!("{} {}", names.cert, self.cert.display()),
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
        let der = read_certificate_der(&self.cert).map_err(|e| given_by(names.cert, e))?;
        // Signed by the CA, as the other hosts check it: as a client's
        // (when this host connects) and as a server's (when it listens).
        let ca = read_certificate_der(&self.ca).map_err(|e| given_by(names.ca, e))?;
        if let Err(e) = signed_by(&der, ca) {
            return Err(bad(format!(
                "not a certificate of {} {} ({e}): every other host would refuse it",
                names.ca,
                self.ca.display()
            )));
        }
        let key = read_private_key(&self.key).map_err(|e| given_by(names.key, e))?;
        // The key's public key against the certificate's (their
        // SubjectPublicKeyInfo, compared by rustls).
        match rustls::sign::CertifiedKey::new(vec![der], key).keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(NetError::Tls {
                    what: format!("{} {}", names.key, self.key.display()),
                    why: format!(
                        "not the key of {} {} (their public keys differ)",
                        names.cert,
                        self.cert.display()
                    ),
                });
            }
            // The key cannot give its public key (no key rustls signs
            // with here): it is not checked beyond signing.
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(e) => return Err(bad(format!("not a certificate TLS takes ({e})"))),
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
/// What host `h` owns: `<run>/host/h` (liveliness),
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

    /// Notes one refusal. A repeat of one already noted is not noted
    /// again; one that differs only in the time rustls verified at (an
    /// expired certificate's `verification time ...`, each attempt anew)
    /// replaces it.
    pub fn note(&self, what: String) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains(&what) {
            return;
        }
        let clockless = |r: &str| r.split(VERIFIED_AT).next().map(str::to_owned);
        if what.contains(VERIFIED_AT) {
            let key = clockless(&what);
            seen.retain(|r| !r.contains(VERIFIED_AT) || clockless(r) != key);
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

/// Where rustls's text of an expired (or not yet valid) certificate gives
/// the time it verified at.
const VERIFIED_AT: &str = "verification time ";

/// The refusals of this process.
pub fn refusals() -> &'static Refusals {
    static R: OnceLock<Refusals> = OnceLock::new();
    R.get_or_init(Refusals::default)
}

/// Installs the process's `tracing` subscriber once: Zenoh's log to
/// stderr as `RUST_LOG` asks (as Zenoh's own would), and every handshake
/// of Zenoh's TLS links refused (no certificate, an unknown CA, an
/// expired certificate), on either side, noted in [`refusals`]: the
/// warnings of Zenoh's QUIC listener, and the reports of Zenoh's
/// connector (`DEBUG`: "Unable to connect to configured peer ...", once
/// a try). Does nothing when the process already has a subscriber (then
/// refusals are not gathered).
///
/// Without `RUST_LOG`, every other event and span stays disabled at its
/// call site (interest never) and `TRACE` is not even looked at, about
/// as cheap as no subscriber at all: a layer that is not there
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

/// [`RefusalLayer`] for the TLS reports only: every other call site is
/// disabled where it is (`FilterFn` caches its answer as the call site's
/// interest), and nothing above `DEBUG` is asked.
fn refusal_layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    RefusalLayer.with_filter(
        tracing_subscriber::filter::filter_fn(is_tls_report)
            .with_max_level_hint(tracing::level_filters::LevelFilter::DEBUG),
    )
}

/// Notes the refused handshakes of Zenoh's TLS links in [`refusals`].
struct RefusalLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RefusalLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if !is_tls_report(meta) {
            return;
        }
        let mut text = MessageText(String::new());
        event.record(&mut text);
        let refusal = if meta.target() == LISTENER {
            accept_refusal(&text.0)
        } else {
            connect_refusal(&text.0)
        };
        if let Some(r) = refusal {
            refusals().note(r);
        }
    }
}

/// The target of the warnings of Zenoh's QUIC listener (a handshake
/// that failed).
const LISTENER: &str = "zenoh_link_commons::quic::unicast";
/// The target of the reports of Zenoh's connector (a connection to a
/// configured endpoint that failed, at `DEBUG` when it will be tried
/// again).
const CONNECTOR: &str = "zenoh::net::runtime::orchestrator";

/// The warnings of Zenoh's QUIC listener (not its other notes, such as
/// skipping the server's name, which we ask for), and the reports of its
/// connector.
fn is_tls_report(meta: &tracing::Metadata<'_>) -> bool {
    (meta.target() == LISTENER && *meta.level() <= tracing::Level::WARN)
        || (meta.target() == CONNECTOR && *meta.level() <= tracing::Level::DEBUG)
}

/// What a failed handshake of the listener says: `a TLS connection
/// refused: WHY` when this host refused the peer's certificate (Zenoh's
/// `TransportError`), `a TLS connection refused by the peer: WHY` when
/// the peer closed the handshake, refusing this host's certificate
/// (`ConnectionClosed`, its reason).
fn accept_refusal(report: &str) -> Option<String> {
    let why = refusal_reason(report)?;
    Some(if report.contains("ConnectionClosed(") {
        format!("a TLS connection refused by the peer: {why}")
    } else {
        format!("a TLS connection refused: {why}")
    })
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

/// What a connection that failed in its TLS handshake says, on the
/// connecting side: `a TLS connection to ENDPOINT refused: WHY` when this
/// host refused the peer's certificate, `... refused by the peer: WHY`
/// when the peer refused this host's (`aborted by peer`). From Zenoh's
/// report: `Unable to connect to configured peer quic/10.0.0.1:7447!
/// Cannot initialize QUIC streams 10.0.0.1: aborted by peer: the
/// cryptographic handshake failed: error 42: invalid peer certificate:
/// BadSignature at /.../unicast.rs:602.. Retry in 1s.` Any other failure
/// (nobody listening yet, a connection lost) is no refusal: `None`.
fn connect_refusal(report: &str) -> Option<String> {
    let (before, after) = report.split_once("the cryptographic handshake failed: ")?;
    // `error N: ` is the TLS alert's number.
    let why = after
        .split_once(": ")
        .filter(|(alert, _)| alert.starts_with("error "))
        .map_or(after, |(_, why)| why);
    // Zenoh's error ends with where it was made, and the retry.
    let why = why
        .split(" at /")
        .next()
        .and_then(|w| w.split(". Retry in").next())
        .unwrap_or_default()
        .trim()
        .trim_end_matches('.');
    if why.is_empty() {
        return None;
    }
    let to = [
        "Unable to connect to configured peer ",
        "Unable to connect to ",
    ]
    .iter()
    .find_map(|p| before.strip_prefix(p))
    .and_then(|rest| rest.split_once('!'))
    .map_or_else(|| "a peer".to_owned(), |(e, _)| e.trim().to_owned());
    let by = if before.contains("aborted by peer") {
        " by the peer"
    } else {
        ""
    };
    Some(format!("a TLS connection to {to} refused{by}: {why}"))
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
        // The peer closed it: it refused ours.
        assert_eq!(
            accept_refusal(r).as_deref(),
            Some("a TLS connection refused by the peer: invalid peer certificate: UnknownIssuer")
        );
        let r = "QUIC acceptor failed: TransportError(Error { code: Code::crypto(74), frame: None, reason: \"peer sent no certificates\" }) at x";
        assert_eq!(
            refusal_reason(r).as_deref(),
            Some("peer sent no certificates")
        );
        assert_eq!(
            accept_refusal(r).as_deref(),
            Some("a TLS connection refused: peer sent no certificates")
        );
        assert_eq!(
            refusal_reason("timed out. Hint: increase the system open file limit.").as_deref(),
            Some("timed out")
        );
        assert_eq!(refusal_reason(" Hint: x"), None);
    }

    #[test]
    fn a_refused_connection_is_told_by_whom_and_why() {
        // Zenoh 1.10.2's reports, as printed (ours refused theirs; they
        // refused ours; not a refusal).
        let ours = "Unable to connect to configured peer quic/127.0.0.1:17801! Can not create a new QUIC link bound to 127.0.0.1: the cryptographic handshake failed: error 51: invalid peer certificate: BadSignature at /root/.cargo/registry/src/x/zenoh-link-commons-1.10.2/src/quic/unicast.rs:597.. Retry in 1s.";
        assert_eq!(
            connect_refusal(ours).as_deref(),
            Some(
                "a TLS connection to quic/127.0.0.1:17801 refused: invalid peer certificate: BadSignature"
            )
        );
        let theirs = "Unable to connect to configured peer quic/127.0.0.1:17811! Cannot initialize QUIC streams 127.0.0.1: aborted by peer: the cryptographic handshake failed: error 51: invalid peer certificate: BadSignature at /root/.cargo/registry/src/x/zenoh-link-commons-1.10.2/src/quic/unicast.rs:602.. Retry in 2s.";
        assert_eq!(
            connect_refusal(theirs).as_deref(),
            Some(
                "a TLS connection to quic/127.0.0.1:17811 refused by the peer: invalid peer certificate: BadSignature"
            )
        );
        let lost = "Unable to connect to configured peer quic/127.0.0.1:17811! Read error on QUIC link 0.0.0.0:48547 => 127.0.0.1:17811: connection lost at /root/.cargo/registry/src/x/zenoh-link-quic-1.10.2/src/unicast.rs:135.. Retry in 1s.";
        assert_eq!(connect_refusal(lost), None);
    }

    #[test]
    fn an_expired_certificate_tried_again_is_one_refusal() {
        let r = Refusals::default();
        let at = |t: u64| {
            format!(
                "a TLS connection refused: invalid peer certificate: certificate expired: verification time {t} (UNIX), but certificate is not valid after 1735776000 ({} seconds ago)",
                t - 1_735_776_000
            )
        };
        r.note("a TLS connection refused: peer sent no certificates".into());
        r.note(at(1_796_619_915));
        r.note(at(1_796_619_916));
        assert_eq!(
            r.all(),
            [
                "a TLS connection refused: peer sent no certificates".to_owned(),
                at(1_796_619_916)
            ]
        );
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
            Some(tracing::level_filters::LevelFilter::DEBUG)
        );
        // Every other call site is off where it is (never, not
        // "sometimes": nothing is made for it per event).
        for meta in [
            call_site!("zenoh_transport::unicast", tracing::Level::TRACE),
            call_site!("zenoh_transport::unicast", tracing::Level::WARN),
            call_site!("zenoh_link_commons::quic::unicast", tracing::Level::INFO),
            call_site!("zenoh::net::runtime::orchestrator", tracing::Level::TRACE),
            call_site!("zenoh::net::routing", tracing::Level::DEBUG),
        ] {
            assert!(d.register_callsite(meta).is_never(), "{meta:?}");
        }
        let refusal = call_site!("zenoh_link_commons::quic::unicast", tracing::Level::WARN);
        assert!(d.register_callsite(refusal).is_always());
        let connect = call_site!("zenoh::net::runtime::orchestrator", tracing::Level::DEBUG);
        assert!(d.register_callsite(connect).is_always());
    }

    #[test]
    fn the_watcher_notes_quic_refusals() {
        // The process's own subscriber (with or without `RUST_LOG`).
        watch_refusals();
        tracing::warn!(
            target: "zenoh_link_commons::quic::unicast",
            "QUIC acceptor failed: TransportError(Error {{ code: Code::crypto(74), frame: None, reason: \"watcher test: no certificate\" }}) at x"
        );
        tracing::debug!(
            target: "zenoh::net::runtime::orchestrator",
            "Unable to connect to configured peer quic/192.0.2.1:7447! Cannot initialize QUIC streams 192.0.2.1: aborted by peer: the cryptographic handshake failed: error 48: watcher test: UnknownIssuer at /x/unicast.rs:602.. Retry in 1s."
        );
        tracing::warn!(target: "zenoh_transport::unicast", "not a refusal: watcher test");
        let seen = refusals().all();
        assert!(
            seen.iter()
                .any(|r| r == "a TLS connection refused: watcher test: no certificate"),
            "{seen:?}"
        );
        assert!(
            seen.iter().any(|r| r
                == "a TLS connection to quic/192.0.2.1:7447 refused by the peer: watcher test: UnknownIssuer"),
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
