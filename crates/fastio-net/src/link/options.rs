//! How one host joins a run ([`NetOptions`]) and the Zenoh
//! configuration it makes.

use super::trust::{TlsFiles, TlsOptionNames};
use super::*;

/// Zenoh's receive buffers per link (`transport/link/rx/buffer_size`)
/// in a run of entries: 4 batches of at most 64 KiB. Zenoh's low-latency
/// reader keeps a pool of that many buffers, all allocated when the link
/// opens; a piece of an entry is copied out in Zenoh's callback, so the
/// reader never needs more than one at a time. A larger pool costs memory
/// even unused: with 64 batches the receiving host of a 1 MiB entry
/// (`hostbench zenoh` in two namespaces, 500 entries, four runs each,
/// taking turns) held 972–1,036 KiB beyond the entry, with 4 batches
/// 464–556 KiB, in the same time (241–309 µs against 245–263 µs).
pub(super) const ENTRY_RX_BUFFER_BYTES: usize = 4 * 65_535;

/// The same in a run of streams: 64 batches. A frame that finds no free
/// slot waits in its bridge with Zenoh's buffer (a window of frames at
/// most, `streams::Bridge`); past the pool every further batch would be
/// read into a buffer allocated, zeroed and freed for it alone.
pub(super) const STREAM_RX_BUFFER_BYTES: usize = 64 * 65_535;
const _: () = assert!(ENTRY_RX_BUFFER_BYTES < STREAM_RX_BUFFER_BYTES);

/// The first wait before connecting again to a host that did not answer
/// (Zenoh's default: 1 s). Hosts are started together by launchers and
/// tests, and one that connected before its peer listened joined 0.5–1 s
/// late (`cargo xtask bench growth hosts`: 1.03 s to the first frame with
/// two hosts in some rounds, 37 ms in others; 36–93 ms with 2–4 hosts
/// with this and no `scouting/delay`).
pub(super) const CONNECT_RETRY_FIRST_MS: u64 = 50;

/// The longest wait between two tries (doubled from the first; Zenoh's
/// default: 4 s): a host started late is found within a second of it.
pub(super) const CONNECT_RETRY_MAX_MS: u64 = 1000;

/// Sets `key` of a Zenoh configuration to `value` (json5); the key and
/// value in the error.
fn set_json(c: &mut zenoh::Config, key: &str, value: &str) -> Result<(), NetError> {
    c.insert_json5(key, value).map_err(|e| NetError::Config {
        what: format!("{key} = {value}"),
        why: e.to_string(),
    })
}

/// A JSON string's text (`None` for `null` or anything else).
fn serde_text(json: &str) -> Option<String> {
    let t = json.trim();
    let inner = t.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('"') && !inner.contains('\\')).then(|| inner.to_owned())
}

/// How one host joins a run.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// This host (a host of the pipeline's placement).
    pub host: String,
    /// Tells runs of one pipeline apart (every host of a run gives the
    /// same): the keys are `fastio/<pipeline>/<run id>/...`.
    pub run_id: String,
    /// Zenoh endpoints to connect to (`tcp/10.0.0.2:7447`).
    pub connect: Vec<String>,
    /// Zenoh endpoints to listen on.
    pub listen: Vec<String>,
    /// Longest wait for every host to join.
    pub join_timeout: Duration,
    /// Zenoh's lease: a host silent this long is gone.
    pub lease: Duration,
    /// A Zenoh configuration file (json5) to start from; the options
    /// above are set on top of it.
    pub config_file: Option<PathBuf>,
    /// Whether to scout for peers by multicast (off: only the endpoints
    /// given, or the file's).
    pub multicast_scouting: bool,
    /// Mutual TLS between the hosts ([`crate::access_control`]): the same
    /// CA on every host, this host's certificate and key. `None`: plain
    /// TCP, unless the configuration file turns mutual TLS on.
    pub tls: Option<TlsFiles>,
}

/// How the hosts of a run reach each other ([`NetOptions::transport`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Plain TCP (`tcp/` endpoints): neither authenticated nor encrypted,
    /// for a link that is trusted already.
    Tcp,
    /// Mutual TLS 1.3 over QUIC (`quic/` endpoints): each host proves its
    /// name with a certificate of the run's CA, and everything between
    /// hosts is encrypted.
    MutualTls(TlsFiles),
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Tcp => {
                f.write_str("plain TCP (hosts not authenticated, data not encrypted)")
            }
            Transport::MutualTls(t) => write!(
                f,
                "mutual TLS over QUIC (CA {}, certificate {})",
                t.ca.display(),
                t.cert.display()
            ),
        }
    }
}

/// The endpoints of `key` (`connect/endpoints`, `listen/endpoints`) in
/// the mode of `c`: a list, or a list per mode.
fn endpoints(c: &zenoh::Config, key: &str) -> Vec<String> {
    let Ok(text) = c.get_json(key) else {
        return Vec::new();
    };
    let mode = c
        .get_json("mode")
        .ok()
        .and_then(|m| serde_json::from_str::<String>(&m).ok())
        .unwrap_or_else(|| "peer".into());
    let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let list = match &value {
        serde_json::Value::Object(per_mode) => per_mode.get(&mode).cloned().unwrap_or_default(),
        v => v.clone(),
    };
    list.as_array()
        .map(|l| {
            l.iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses what would let an unauthenticated peer in: a `tls/` endpoint
/// without mutual TLS, or another kind of endpoint beside mutual TLS.
fn check_endpoints(c: &zenoh::Config, transport: &Transport) -> Result<(), NetError> {
    for key in ["connect/endpoints", "listen/endpoints"] {
        for e in endpoints(c, key) {
            if e.starts_with("tls/") {
                return Err(NetError::Tls {
                    what: e,
                    why: "tls/ endpoints are not built: Zenoh's TLS-over-TCP link reads and writes one TLS session from two threads at once (eclipse-zenoh/zenoh#2557) and drops connections under traffic both ways; use quic/ endpoints, the same mutual TLS 1.3 over QUIC".into(),
                });
            }
            let quic = e.starts_with("quic/");
            match transport {
                Transport::Tcp if quic => {
                    return Err(NetError::Tls {
                        what: e,
                        why: "a quic/ endpoint needs --tls-ca, --tls-cert and --tls-key (mutual TLS: without client certificates any peer could join)".into(),
                    });
                }
                Transport::MutualTls(_) if !quic => {
                    return Err(NetError::Tls {
                        what: e,
                        why: "a run over mutual TLS takes quic/ endpoints only (a plain one would let any peer in)".into(),
                    });
                }
                _ => {}
            }
        }
    }
    Ok(())
}

impl NetOptions {
    /// Options for `host`, with the defaults: run id `run`, no endpoints,
    /// 60 s to join, a 3 s lease, no multicast scouting.
    pub fn new(host: &str) -> NetOptions {
        NetOptions {
            host: host.to_owned(),
            run_id: "run".into(),
            connect: Vec::new(),
            listen: Vec::new(),
            join_timeout: Duration::from_secs(60),
            lease: Duration::from_secs(3),
            config_file: None,
            multicast_scouting: false,
            tls: None,
        }
    }

    fn file_config(&self) -> Result<zenoh::Config, NetError> {
        match &self.config_file {
            Some(p) => zenoh::Config::from_file(p).map_err(|e| NetError::Config {
                what: p.display().to_string(),
                why: e.to_string(),
            }),
            None => Ok(zenoh::Config::default()),
        }
    }

    /// How this host reaches the others: mutual TLS when [`Self::tls`] is
    /// given or the configuration file turns it on (`enable_mtls` with
    /// `root_ca_certificate`, `listen_certificate` and
    /// `listen_private_key` as files), plain TCP otherwise.
    pub fn transport(&self) -> Result<Transport, NetError> {
        if let Some(t) = &self.tls {
            return Ok(Transport::MutualTls(t.clone()));
        }
        let c = self.file_config()?;
        let text = |key: &str| -> Option<String> {
            let v = c.get_json(&format!("transport/link/tls/{key}")).ok()?;
            serde_text(&v)
        };
        let mtls = c
            .get_json("transport/link/tls/enable_mtls")
            .is_ok_and(|v| v.trim() == "true");
        if !mtls {
            return Ok(Transport::Tcp);
        }
        let need = |key: &str| {
            text(key).ok_or_else(|| NetError::Tls {
                what: format!("transport/link/tls/{key}"),
                why: "mutual TLS from a configuration file needs it as a file (docs/hosts.md)"
                    .into(),
            })
        };
        Ok(Transport::MutualTls(TlsFiles {
            ca: need("root_ca_certificate")?.into(),
            cert: need("listen_certificate")?.into(),
            key: need("listen_private_key")?.into(),
        }))
    }

    /// Checks this host's TLS files, when the run is over mutual TLS
    /// ([`Self::transport`]), as [`TlsFiles::check`] does; each error
    /// names the option that gave the file: `--tls-key` and the others
    /// ([`Self::tls`]), or the configuration file's key
    /// (`transport/link/tls/listen_private_key` and the others). `None`
    /// over plain TCP.
    pub fn check_tls(&self) -> Result<Option<CertificateSummary>, NetError> {
        let Transport::MutualTls(files) = self.transport()? else {
            return Ok(None);
        };
        let names = if self.tls.is_some() {
            TlsOptionNames::CLI
        } else {
            TlsOptionNames::CONFIG_FILE
        };
        files.check_given(&self.host, names).map(Some)
    }

    /// The Zenoh configuration these options make (without the access
    /// control of mutual TLS, which needs the pipeline: see
    /// [`crate::access_control`]).
    ///
    /// Refuses what would let an unauthenticated peer in: a `tls/`
    /// endpoint without mutual TLS, or another kind of endpoint beside
    /// mutual TLS.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, NetError> {
        let transport = self.transport()?;
        let mut c = self.file_config()?;
        let json = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(","))
        };
        let mut set = |key: &str, value: String| set_json(&mut c, key, &value);
        if self.config_file.is_none() {
            set("mode", "\"peer\"".into())?;
            set(
                "scouting/multicast/enabled",
                self.multicast_scouting.to_string(),
            )?;
            // One queue instead of one per priority: large entries move
            // about a third faster (`cargo xtask bench hosts`), and every
            // message of ours is data of one priority anyway.
            set("transport/unicast/qos/enabled", "false".into())?;
            // Zenoh's low-latency transport: each message is written to
            // the link by the thread that puts it, not handed to Zenoh's
            // transmitting thread: one wake-up less a crossing (a 4 KiB
            // round trip about a quarter faster, docs/hosts.md, *One
            // message, one batch*). It sends no fragments: every message
            // of ours fits the link's batch (`wire::message_bytes`).
            set("transport/unicast/lowlatency", "true".into())?;
            // That queue holds 16 batches (Zenoh's most; 2 by default):
            // large entries move about a fifth faster, the sender filling
            // batches while earlier ones are written (`cargo xtask bench
            // hosts`; about 1 MiB more memory a link).
            set("transport/link/tx/queue/size/data", "16".into())?;
            // A host that connects before its peer listens tries again
            // after 50 ms, then twice as long each time up to 1 s (Zenoh's
            // defaults: 1 s, up to 4 s), and opening the session does not
            // wait for its peers (Zenoh's `scouting/delay`, 500 ms by
            // default; the join waits for every host itself): hosts
            // started together join in tens of milliseconds instead of
            // 0.5–1 s, and one started late is found within a second
            // (docs/hosts.md, *One command per host*).
            set("scouting/delay", "0".into())?;
            set(
                "connect/retry",
                format!(
                    "{{ period_init_ms: {CONNECT_RETRY_FIRST_MS}, period_max_ms: \
                     {CONNECT_RETRY_MAX_MS}, period_increase_factor: 2 }}"
                ),
            )?;
            set(
                "transport/link/rx/buffer_size",
                ENTRY_RX_BUFFER_BYTES.to_string(),
            )?;
        }
        // Over TLS without a file, only the endpoints given: Zenoh's
        // default would listen on plain TCP too.
        let tls_only = matches!(transport, Transport::MutualTls(_)) && self.config_file.is_none();
        if !self.connect.is_empty() || tls_only {
            set("connect/endpoints", json(&self.connect))?;
        }
        if !self.listen.is_empty() || tls_only {
            set("listen/endpoints", json(&self.listen))?;
        }
        set(
            "transport/link/tx/lease",
            self.lease.as_millis().max(100).to_string(),
        )?;
        if let Transport::MutualTls(t) = &transport {
            let path = |p: &PathBuf| format!("{:?}", p.display().to_string());
            set("transport/link/tls/root_ca_certificate", path(&t.ca))?;
            set("transport/link/tls/listen_certificate", path(&t.cert))?;
            set("transport/link/tls/listen_private_key", path(&t.key))?;
            set("transport/link/tls/connect_certificate", path(&t.cert))?;
            set("transport/link/tls/connect_private_key", path(&t.key))?;
            set("transport/link/tls/enable_mtls", "true".into())?;
            // Endpoints are addresses; names are bound to certificates by
            // the access control instead (`trust.rs`).
            set("transport/link/tls/verify_name_on_connect", "false".into())?;
            // Off, whatever a file says: with it, every QUIC link gets a
            // watcher whose handle its first close takes, and Zenoh's
            // low-latency transport closes a link twice when both ends
            // close together (its `delete`, from our session's close and
            // from the peer's `Close` or the end of the connection, does
            // not check that the link is closed already): the second close
            // panicked ("handle should be set", zenoh-link-commons 1.10.2
            // tls.rs:192) at the end of most three-host runs. Certificates
            // are checked at each handshake instead (docs/hosts.md).
            set(
                "transport/link/tls/close_link_on_expiration",
                "false".into(),
            )?;
        }
        check_endpoints(&c, &transport)?;
        Ok(c)
    }

    /// [`NetOptions::zenoh_config`] for a run that `streams` or not: a run
    /// of streams gets the larger pool of receive buffers
    /// ([`STREAM_RX_BUFFER_BYTES`]) unless a configuration file says.
    pub(super) fn run_config(&self, streams: bool) -> Result<zenoh::Config, NetError> {
        let mut c = self.zenoh_config()?;
        if streams && self.config_file.is_none() {
            set_json(
                &mut c,
                "transport/link/rx/buffer_size",
                &STREAM_RX_BUFFER_BYTES.to_string(),
            )?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx_bytes(c: &zenoh::Config) -> usize {
        c.get_json("transport/link/rx/buffer_size")
            .expect("set")
            .parse()
            .expect("a number")
    }

    #[test]
    fn a_run_of_streams_gets_the_larger_receive_pool() {
        let mut o = NetOptions::new("a");
        o.listen = vec!["tcp/127.0.0.1:0".into()];
        assert_eq!(
            rx_bytes(&o.run_config(false).unwrap()),
            ENTRY_RX_BUFFER_BYTES
        );
        assert_eq!(rx_bytes(&o.zenoh_config().unwrap()), ENTRY_RX_BUFFER_BYTES);
        assert_eq!(
            rx_bytes(&o.run_config(true).unwrap()),
            STREAM_RX_BUFFER_BYTES
        );
    }

    #[test]
    fn hosts_try_again_soon_after_a_refused_connection() {
        let mut o = NetOptions::new("a");
        o.connect = vec!["tcp/127.0.0.1:7447".into()];
        let c = o.zenoh_config().unwrap();
        assert_eq!(c.get_json("scouting/delay").expect("set"), "0");
        let retry = c.get_json("connect/retry").expect("set");
        // As Zenoh reads it back: `{"period_init_ms":50,...}`.
        for (key, want) in [
            ("period_init_ms", CONNECT_RETRY_FIRST_MS.to_string()),
            ("period_max_ms", CONNECT_RETRY_MAX_MS.to_string()),
            ("period_increase_factor", "2".to_string()),
        ] {
            let at = retry.find(&format!("\"{key}\":")).expect(&retry) + key.len() + 3;
            let value: String = retry[at..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            assert_eq!(
                value.parse::<f64>(),
                want.parse::<f64>(),
                "{key} in {retry}"
            );
        }
    }

    #[test]
    fn a_configuration_file_keeps_its_receive_pool() {
        let dir = std::env::temp_dir().join(format!("fastio-net-rx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("zenoh.json5");
        std::fs::write(
            &file,
            r#"{ mode: "peer", transport: { link: { rx: { buffer_size: 131070 } } } }"#,
        )
        .unwrap();
        let mut o = NetOptions::new("a");
        o.config_file = Some(file);
        assert_eq!(rx_bytes(&o.run_config(true).unwrap()), 131_070);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
