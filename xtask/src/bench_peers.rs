//! The peers `cargo xtask bench` measures beside ours, in the same run on
//! the same machine with the same payloads, each installed by xtask itself:
//!
//! * **iceoryx2** (crates.io, the version `peers/iceoryx2/Cargo.toml`
//!   pins): `peers/iceoryx2` is built into `target/peers` and writes its
//!   handoff and stream results into our criterion directory, under the
//!   same group and parameter names;
//! * **Apache TVM** and **numpy's `.npz`** (PyPI, in the interop venv):
//!   params files loaded and written in fresh processes, with peak RSS
//!   (module `bench_params`);
//! * **numpy** (PyPI, same venv): the copies and casts of ndobject's bench;
//! * **the Python package** (built by `cargo xtask python`): `get` + map
//!   per call and a 64 MiB handoff between Python processes beside
//!   `multiprocessing.shared_memory` and pickling.
//!
//! A peer that cannot run is reported as such ([`Peer::status`]), never
//! left out silently.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::bench::{Groups, human_time};
use crate::step::Step;
use crate::{interop, root};

/// What became of one peer in this run.
pub(crate) struct Peer {
    pub(crate) name: &'static str,
    /// Whether its numbers are in this run.
    pub(crate) measured: bool,
    /// How it was installed and run, or why it was not.
    pub(crate) status: String,
}

impl Peer {
    pub(crate) fn measured(name: &'static str, status: impl Into<String>) -> Peer {
        Peer {
            name,
            measured: true,
            status: status.into(),
        }
    }

    pub(crate) fn missing(name: &'static str, why: impl Into<String>) -> Peer {
        Peer {
            name,
            measured: false,
            status: why.into(),
        }
    }
}

/// The iceoryx2 version `peers/iceoryx2/Cargo.toml` pins.
fn iceoryx2_version() -> Option<String> {
    let manifest = std::fs::read_to_string(root().join("peers/iceoryx2/Cargo.toml")).ok()?;
    let line = manifest.lines().find(|l| l.starts_with("iceoryx2 = "))?;
    Some(line.split('"').nth(1)?.trim_start_matches('=').to_owned())
}

/// Builds and runs the iceoryx2 handoff bench (with the same criterion
/// filter as ours), writing into `criterion_dir`.
pub(crate) fn iceoryx2(criterion_dir: &Path, filter: &[String]) -> Peer {
    let name = "iceoryx2";
    let Some(version) = iceoryx2_version() else {
        return Peer::missing(name, "peers/iceoryx2/Cargo.toml names no iceoryx2 version");
    };
    let mut cmd = crate::step::cargo(["bench", "--manifest-path", "peers/iceoryx2/Cargo.toml"]);
    cmd.current_dir(root())
        .env("CARGO_TARGET_DIR", root().join("target").join("peers"))
        .env("CRITERION_HOME", criterion_dir);
    if !filter.is_empty() {
        cmd.arg("--").args(filter);
    }
    match Step::new("bench iceoryx2", cmd).run() {
        Ok(_) => Peer::measured(
            name,
            format!(
                "iceoryx2 {version} from crates.io, built by xtask into target/peers \
                 (peers/iceoryx2/benches/handoff.rs)"
            ),
        ),
        Err(e) => Peer::missing(
            name,
            format!("iceoryx2 {version} could not be built or run: {e}"),
        ),
    }
}

/// The words `key=value` of `line`, as numbers.
pub(crate) fn field(line: &str, key: &str) -> Option<f64> {
    word(line, key)?.parse().ok()
}

/// The word `key=value` of `line`: its value.
pub(crate) fn word<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// One `NAME seconds=MEDIAN [min=S max=S samples=N]` line of a peer script.
#[derive(Debug, PartialEq)]
pub(crate) struct Timed {
    name: String,
    median: f64,
    range: Option<(f64, f64, u32)>,
}

impl Timed {
    /// `median (min–max, n samples)`, human-readable.
    fn describe(&self) -> String {
        match self.range {
            Some((lo, hi, n)) => format!(
                "{} ({}–{}, {n} samples)",
                human_time(self.median * 1e9),
                human_time(lo * 1e9),
                human_time(hi * 1e9)
            ),
            None => human_time(self.median * 1e9),
        }
    }
}

fn parse_timed(output: &str) -> Vec<Timed> {
    output
        .lines()
        .filter_map(|l| {
            let name = l.split_whitespace().next()?;
            let median = field(l, "seconds")?;
            let range = match (field(l, "min"), field(l, "max"), field(l, "samples")) {
                (Some(lo), Some(hi), Some(n)) => Some((lo, hi, n as u32)),
                _ => None,
            };
            Some(Timed {
                name: name.to_owned(),
                median,
                range,
            })
        })
        .collect()
}

/// numpy's side of the ndobject copies and casts.
const NUMPY_SCRIPT: &str = "crates/ndobject/compat/numpy_bench.py";
/// Elements per array in the ndobject bench (`N` in
/// `crates/ndobject/benches/assign.rs`); numpy is timed on the same count.
const NDOBJECT_BENCH_ELEMENTS: &str = "1048576";
/// The most our time may be, as a multiple of numpy's, per operation.
const NUMPY_GOALS: [(&str, f64); 6] = [
    ("ndobject/assign_f32/assign_contiguous", 1.1),
    ("ndobject/cast_f32_to_f64/cast_contiguous", 1.2),
    ("ndobject/copy_f32/strided_step2", 1.2),
    ("ndobject/copy_f32/negative_stride", 1.2),
    ("ndobject/copy_f32/unaligned", 1.5),
    ("ndobject/copy_f32/byteswapped", 1.5),
];

/// Times the same operations in numpy right after our bench and writes
/// each beside ours, with the ratio and its goal.
pub(crate) fn numpy_beside(groups: &Groups, out: &mut String) -> Result<Peer, String> {
    let name = "numpy";
    let python = match interop::python() {
        Ok(p) => p,
        Err(e) => return Ok(Peer::missing(name, format!("no Python environment: {e}"))),
    };
    let mut cmd = Command::new(&python);
    cmd.arg(root().join(NUMPY_SCRIPT))
        .arg(NDOBJECT_BENCH_ELEMENTS)
        .current_dir(root());
    let log = Step::new("bench numpy", cmd).run()?;
    let _ = writeln!(
        out,
        "numpy beside ndobject ({NDOBJECT_BENCH_ELEMENTS} elements, same run; both medians); \
         ratio = our time / numpy's"
    );
    for t in parse_timed(&log) {
        let Some((group, function)) = t.name.rsplit_once('/') else {
            continue;
        };
        let Some(ours) = groups
            .get(group)
            .and_then(|rs| rs.iter().find(|r| r.function == function))
        else {
            let _ = writeln!(
                out,
                "  {:<44} numpy {}  (not in this run)",
                t.name,
                t.describe()
            );
            continue;
        };
        let ratio = ours.median_ns / (t.median * 1e9);
        let goal = NUMPY_GOALS
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, g)| {
                let verdict = if ratio <= *g { "met" } else { "MISSED" };
                format!("  goal <= x{g:.1}: {verdict}")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<44} ours {:>10}  numpy {}  x{ratio:.3}{goal}",
            t.name,
            human_time(ours.median_ns),
            t.describe()
        );
    }
    Ok(Peer::measured(
        name,
        "numpy from PyPI in target/venv-interop (crates/ndobject/compat/numpy_bench.py)",
    ))
}

/// The Python package's side (`crates/fastio-python/bench/bench_python.py`,
/// in the venv `cargo xtask python` builds; a report builds it when it is
/// missing): the steady-state get + map per call beside Rust's from this
/// run, and a 64 MiB handoff between two Python processes beside
/// `multiprocessing.shared_memory` and pickling.
pub(crate) fn python_beside(
    groups: &Groups,
    report: bool,
    out: &mut String,
) -> Result<Peer, String> {
    let name = "Python (fastio package, multiprocessing.shared_memory, pickle)";
    let python = root()
        .join("target")
        .join("venv-python")
        .join("bin")
        .join("python");
    // Built, and from today's sources: one from older sources may not
    // read the contexts today's binaries make.
    if !crate::python::package_ready(report)? {
        return Ok(Peer::missing(
            name,
            "the fastio package is not built from the current sources (run `cargo xtask python` first)",
        ));
    }
    let mut cmd = Command::new(&python);
    cmd.arg(root().join("crates/fastio-python/bench/bench_python.py"))
        .current_dir(root());
    let log = Step::new("bench python", cmd).run()?;
    let results: BTreeMap<String, Timed> = parse_timed(&log)
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let _ = writeln!(out, "Python beside Rust (both medians), same run:");
    let rust = groups
        .get("steady_state")
        .and_then(|rs| rs.iter().find(|r| r.function == "fastio_get_map"));
    if let (Some(py), Some(rust)) = (results.get("python/get_map_numpy"), rust) {
        let over = py.median * 1e9 - rust.median_ns;
        let verdict = if over <= 3000.0 { "met" } else { "MISSED" };
        let _ = writeln!(
            out,
            "  get + map_as_numpy_array + release: python {}  rust {}  python over rust {}  \
             goal <= 3 us: {verdict}",
            py.describe(),
            human_time(rust.median_ns),
            human_time(over)
        );
    }
    if let Some(f) = results.get("handoff_64MiB/fastio") {
        for peer in ["handoff_64MiB/shared_memory", "handoff_64MiB/pickle_pipe"] {
            if let Some(p) = results.get(peer) {
                let _ = writeln!(
                    out,
                    "  64 MiB handoff between Python processes: fastio {}  {peer} {}  x{:.3}",
                    f.describe(),
                    p.describe(),
                    f.median / p.median
                );
            }
        }
    }
    Ok(Peer::measured(
        name,
        "the wheel built by `cargo xtask python`, in target/venv-python \
         (crates/fastio-python/bench/bench_python.py)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_timed_lines_with_and_without_a_range() {
        let t = parse_timed(
            "numpy 2.3\nbaseline_fs_read seconds=0.5829 gbps=1.842\n\
             a/b seconds=0.25 min=0.125 max=0.5 samples=15\n",
        );
        assert_eq!(
            t,
            [
                Timed {
                    name: "baseline_fs_read".into(),
                    median: 0.5829,
                    range: None
                },
                Timed {
                    name: "a/b".into(),
                    median: 0.25,
                    range: Some((0.125, 0.5, 15))
                }
            ]
        );
    }
}
