//! Why a run failed, as a value: [`Failure`] is made where a failure
//! happens (an operator's exit, the link's news, a signal), travels to the
//! other hosts as itself (JSON on the link), and is rendered by one
//! function for every reader: [`Failure`]'s `Display` for the CLI's line,
//! serde for `--report json` and the link. Nobody decodes a failure from
//! text.
//!
//! A failure is **primary** (a cause: an operator that exited, was killed
//! or timed out, a host that vanished, the link, the driver, an interrupt)
//! or **secondary** (a consequence: an operator that stopped because one
//! of its streams was poisoned by another failure or by the stopping run). [`RootCause`] keeps the
//! run's first primary failure, whatever order the news arrives in, and
//! falls back to the first secondary one only when no cause is known.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Failure {
    /// An operator exited with a non-zero status.
    Exited {
        /// The operator.
        operator: String,
        /// The host it ran on (multi-host runs).
        host: Option<String>,
        /// Its exit status.
        code: i32,
        /// In a streaming run: the first frame it did not deliver.
        frame: Option<u64>,
    },
    /// An operator was killed by a signal it did not get from the driver.
    Signaled {
        /// The operator.
        operator: String,
        /// The host it ran on (multi-host runs).
        host: Option<String>,
        /// The signal.
        signal: i32,
        /// In a streaming run: the first frame it did not deliver.
        frame: Option<u64>,
    },
    /// An operator ran past the run's timeout and was stopped.
    TimedOut {
        /// The operator.
        operator: String,
        /// The host it ran on (multi-host runs).
        host: Option<String>,
    },
    /// An operator could not be started.
    SpawnFailed {
        /// The operator.
        operator: String,
        /// The host it was to run on (multi-host runs).
        host: Option<String>,
        /// Why.
        error: String,
    },
    /// An operator stopped because one of its streams was poisoned (an
    /// input whose producer, or something upstream, failed; or an output
    /// the stopping run poisoned): a consequence.
    Poisoned {
        /// The operator.
        operator: String,
        /// The host it ran on (multi-host runs).
        host: Option<String>,
        /// The poisoned stream's entry (`operator/output`).
        entry: String,
        /// The first frame of it that never came.
        frame: u64,
    },
    /// A host of the run vanished: its driver died or the link to it was
    /// cut.
    HostGone {
        /// The host.
        host: String,
        /// What this run lost with it.
        lost: Lost,
    },
    /// An entry (or a stream's frame) could not cross between hosts.
    Transfer {
        /// The entry (`operator/output`).
        entry: String,
        /// The sending host.
        from: String,
        /// The receiving host(s).
        to: Vec<String>,
        /// What went wrong.
        error: String,
    },
    /// Another host's driver failed on its own (not an operator).
    HostFailed {
        /// The host.
        host: String,
        /// What its driver said.
        error: String,
    },
    /// The link to the other hosts closed under the run.
    LinkClosed,
    /// The driver itself failed while the run went on.
    Driver {
        /// What happened.
        error: String,
    },
    /// The run was interrupted (SIGINT or SIGTERM).
    Interrupted,
}

impl Failure {
    /// Whether this is only a consequence of another failure (an input
    /// poisoned upstream).
    pub fn is_secondary(&self) -> bool {
        matches!(self, Failure::Poisoned { .. })
    }

    /// The operator it names, if any.
    pub fn operator(&self) -> Option<&str> {
        match self {
            Failure::Exited { operator, .. }
            | Failure::Signaled { operator, .. }
            | Failure::TimedOut { operator, .. }
            | Failure::SpawnFailed { operator, .. }
            | Failure::Poisoned { operator, .. } => Some(operator),
            Failure::HostGone { lost, .. } => lost.operator(),
            _ => None,
        }
    }

    /// The host it happened on, if it names one.
    pub fn host(&self) -> Option<&str> {
        match self {
            Failure::Exited { host, .. }
            | Failure::Signaled { host, .. }
            | Failure::TimedOut { host, .. }
            | Failure::SpawnFailed { host, .. }
            | Failure::Poisoned { host, .. } => host.as_deref(),
            Failure::HostGone { host, .. } | Failure::HostFailed { host, .. } => Some(host),
            _ => None,
        }
    }

    /// The same failure, said to have happened on `host` (for an
    /// operator's failure that has no host yet).
    pub fn on_host(mut self, here: &str) -> Failure {
        match &mut self {
            Failure::Exited { host, .. }
            | Failure::Signaled { host, .. }
            | Failure::TimedOut { host, .. }
            | Failure::SpawnFailed { host, .. }
            | Failure::Poisoned { host, .. } => {
                host.get_or_insert_with(|| here.to_owned());
            }
            _ => {}
        }
        self
    }

    /// One line of JSON: what the link carries.
    pub fn to_json(&self) -> String {
        // A plain enum of strings and numbers: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{\"kind\":\"link-closed\"}".into())
    }

    /// Reads [`Failure::to_json`]'s line.
    pub fn from_json(text: &str) -> Result<Failure, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// What a run lost with a host that vanished ([`Failure::HostGone`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "kebab-case")]
pub enum Lost {
    /// An operator that was running there.
    Running {
        /// The operator.
        operator: String,
    },
    /// An entry (or a stream) of an operator there that had not arrived.
    Entry {
        /// Its producer.
        operator: String,
        /// The entry.
        entry: String,
    },
    /// An operator placed there that had not finished (not started yet).
    Unfinished {
        /// The operator.
        operator: String,
    },
    /// Nothing of it but its word that it was done.
    Nothing,
}

impl Lost {
    /// The operator it names, if any.
    pub fn operator(&self) -> Option<&str> {
        match self {
            Lost::Running { operator }
            | Lost::Entry { operator, .. }
            | Lost::Unfinished { operator } => Some(operator),
            Lost::Nothing => None,
        }
    }
}

/// `operator X` or `operator X on host H`.
fn who(f: &mut fmt::Formatter<'_>, operator: &str, host: &Option<String>) -> fmt::Result {
    write!(f, "operator {operator}")?;
    if let Some(h) = host {
        write!(f, " on host {h}")?;
    }
    Ok(())
}

fn at(f: &mut fmt::Formatter<'_>, frame: &Option<u64>) -> fmt::Result {
    match frame {
        Some(k) => write!(f, " at frame {k}"),
        None => Ok(()),
    }
}

impl fmt::Display for Failure {
    /// The one text of a failure: the CLI's line, the metrics' label.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Exited {
                operator,
                host,
                code,
                frame,
            } => {
                who(f, operator, host)?;
                write!(f, " exited with status {code}")?;
                at(f, frame)
            }
            Failure::Signaled {
                operator,
                host,
                signal,
                frame,
            } => {
                who(f, operator, host)?;
                write!(f, " was killed by signal {signal}")?;
                at(f, frame)
            }
            Failure::TimedOut { operator, host } => {
                who(f, operator, host)?;
                write!(f, " timed out")
            }
            Failure::SpawnFailed {
                operator,
                host,
                error,
            } => {
                who(f, operator, host)?;
                write!(f, " could not start: {error}")
            }
            Failure::Poisoned {
                operator,
                host,
                entry,
                frame,
            } => {
                who(f, operator, host)?;
                write!(f, " stopped: stream {entry} is poisoned from frame {frame}")
            }
            Failure::HostGone { host, lost } => {
                write!(
                    f,
                    "host {host} is gone (its driver died or the link to it was cut)"
                )?;
                match lost {
                    Lost::Running { operator } => write!(f, " while {operator} was running"),
                    Lost::Entry { operator, entry } => {
                        write!(f, " before {entry} of {operator} arrived")
                    }
                    Lost::Unfinished { operator } => write!(f, " before {operator} finished"),
                    Lost::Nothing => write!(f, " before it said it was done"),
                }
            }
            Failure::Transfer {
                entry,
                from,
                to,
                error,
            } => write!(
                f,
                "entry {entry} could not cross from host {from} to host {}: {error}",
                to.join(", ")
            ),
            Failure::HostFailed { host, error } => write!(f, "host {host} failed: {error}"),
            Failure::LinkClosed => write!(f, "the link to the other hosts closed"),
            Failure::Driver { error } => write!(f, "driver: {error}"),
            Failure::Interrupted => write!(f, "interrupted: every operator was stopped"),
        }
    }
}

/// The run's root cause, from failures noted in any order: the first
/// primary one, else the first secondary one.
#[derive(Debug, Clone, Default)]
pub struct RootCause {
    first: Option<Failure>,
    first_primary: Option<Failure>,
}

impl RootCause {
    /// Notes a failure (later ones of the same rank never replace the
    /// first).
    pub fn note(&mut self, f: Failure) {
        if !f.is_secondary() && self.first_primary.is_none() {
            self.first_primary = Some(f.clone());
        }
        self.first.get_or_insert(f);
    }

    /// Whether any failure was noted.
    pub fn any(&self) -> bool {
        self.first.is_some()
    }

    /// Whether a primary failure (a cause) was noted.
    pub fn has_cause(&self) -> bool {
        self.first_primary.is_some()
    }

    /// The root cause so far.
    pub fn get(&self) -> Option<&Failure> {
        self.first_primary.as_ref().or(self.first.as_ref())
    }

    /// The root cause.
    pub fn into_inner(self) -> Option<Failure> {
        self.first_primary.or(self.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poisoned(op: &str) -> Failure {
        Failure::Poisoned {
            operator: op.into(),
            host: Some("c".into()),
            entry: "mid/w".into(),
            frame: 273,
        }
    }

    #[test]
    fn a_cause_wins_over_its_consequences_in_any_order() {
        let gone = Failure::HostGone {
            host: "b".into(),
            lost: Lost::Running {
                operator: "mid".into(),
            },
        };
        let mut r = RootCause::default();
        r.note(poisoned("sink"));
        assert_eq!(r.get(), Some(&poisoned("sink")));
        assert!(!r.has_cause());
        r.note(gone.clone());
        r.note(Failure::Interrupted);
        assert_eq!(r.get(), Some(&gone));
        let mut r = RootCause::default();
        r.note(gone.clone());
        r.note(poisoned("sink"));
        assert_eq!(r.into_inner(), Some(gone));
    }

    #[test]
    fn every_kind_goes_through_json_unchanged_and_reads_as_one_line() {
        let all = [
            Failure::Exited {
                operator: "src".into(),
                host: None,
                code: 1,
                frame: Some(300),
            },
            Failure::Signaled {
                operator: "mid".into(),
                host: Some("b".into()),
                signal: 9,
                frame: None,
            },
            Failure::TimedOut {
                operator: "slow".into(),
                host: None,
            },
            Failure::SpawnFailed {
                operator: "x".into(),
                host: None,
                error: "no such file\nor directory".into(),
            },
            poisoned("sink"),
            Failure::HostGone {
                host: "b".into(),
                lost: Lost::Nothing,
            },
            Failure::HostGone {
                host: "b".into(),
                lost: Lost::Entry {
                    operator: "src".into(),
                    entry: "src/v".into(),
                },
            },
            Failure::HostFailed {
                host: "b".into(),
                error: "context: no room".into(),
            },
            Failure::Transfer {
                entry: "src/v".into(),
                from: "a".into(),
                to: vec!["b".into(), "c".into()],
                error: "a piece with a bad header".into(),
            },
            Failure::LinkClosed,
            Failure::Driver {
                error: "boom".into(),
            },
            Failure::Interrupted,
        ];
        for f in all {
            let line = f.to_json();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(Failure::from_json(&line).unwrap(), f);
            assert!(!f.to_string().is_empty());
        }
        assert_eq!(
            poisoned("sink").to_string(),
            "operator sink on host c stopped: stream mid/w is poisoned from frame 273"
        );
        assert!(Failure::from_json("{\"kind\":\"nope\"}").is_err());
    }
}
