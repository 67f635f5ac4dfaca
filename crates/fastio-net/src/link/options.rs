//! How one host joins a run ([`NetOptions`]) and the Zenoh
//! configuration it makes.

use super::*;

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
        }
    }

    /// The Zenoh configuration these options make.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, NetError> {
        let mut c = match &self.config_file {
            Some(p) => zenoh::Config::from_file(p).map_err(|e| NetError::Config {
                what: p.display().to_string(),
                why: e.to_string(),
            })?,
            None => zenoh::Config::default(),
        };
        let json = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(","))
        };
        let mut set = |key: &str, value: String| {
            c.insert_json5(key, &value).map_err(|e| NetError::Config {
                what: format!("{key} = {value}"),
                why: e.to_string(),
            })
        };
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
            // That queue holds 16 batches (Zenoh's most; 2 by default):
            // large entries move about a fifth faster, the sender filling
            // batches while earlier ones are written (`cargo xtask bench
            // hosts`; about 1 MiB more memory a link).
            set("transport/link/tx/queue/size/data", "16".into())?;
        }
        if !self.connect.is_empty() {
            set("connect/endpoints", json(&self.connect))?;
        }
        if !self.listen.is_empty() {
            set("listen/endpoints", json(&self.listen))?;
        }
        set(
            "transport/link/tx/lease",
            self.lease.as_millis().max(100).to_string(),
        )?;
        Ok(c)
    }
}
