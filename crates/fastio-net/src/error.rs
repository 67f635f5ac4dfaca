//! The errors of the link between hosts.

/// What went wrong in a host's link to the others of a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A Zenoh call failed (opening the session, declaring a publisher or
    /// subscriber, sending).
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// The Zenoh configuration could not be made (a file or a setting
    /// Zenoh refused).
    #[error("zenoh configuration {what}: {why}")]
    Config {
        /// The file or the setting.
        what: String,
        /// What Zenoh said.
        why: String,
    },
    /// A TLS file of this host cannot serve (unreadable, not a
    /// certificate, naming another host, expired), or TLS options that
    /// would let an unauthenticated peer in.
    #[error("tls {what}: {why}")]
    Tls {
        /// The file or the option.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// The host asked for runs no operator of the pipeline.
    #[error("host {host:?} runs no operator of this pipeline (its hosts: {hosts})")]
    UnknownHost {
        /// The host asked for.
        host: String,
        /// The pipeline's hosts.
        hosts: String,
    },
    /// The run id is not a name.
    #[error("run id {0:?}: 1 to 63 characters of a-z 0-9 _ -")]
    RunId(String),
    /// Hosts of the run did not join in time (the text names them, the
    /// run and the endpoints).
    #[error("{0}")]
    NotJoined(String),
    /// The local context refused what a crossing needs.
    #[error("{what}: {source}")]
    Local {
        /// What was being done.
        what: String,
        /// The context's error.
        source: fastio::Error,
    },
    /// What was received (or was to be sent) breaks the link's rules: a
    /// piece or frame that cannot be placed, a header that does not read.
    #[error("{0}")]
    Protocol(String),
}
