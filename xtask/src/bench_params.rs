//! Parameter files beside Apache TVM and numpy, every operation in a fresh
//! process: `crates/params-io/interop/params_peers.py` runs each variant
//! several times under `interop measure` (peak RSS from `wait4`) and
//! prints one line per file and variant; this module makes the files,
//! runs it, and writes the report's section with the memory goals.

use std::fmt::Write as _;

use crate::bench::{human_time, target_dir};
use crate::bench_peers::{Peer, field, word};
use crate::step::Step;
use crate::{interop, root};

const SCRIPT: &str = "crates/params-io/interop/params_peers.py";
/// Tensors in the model-shaped file.
const MODEL_TENSORS: &str = "2000";
/// The memory goal: peak RSS added by our full read or write ≤ this × the
/// file size.
const RSS_BOUND: f64 = 1.1;

/// One `params file=… variant=…` line: medians over fresh processes.
#[derive(Debug, PartialEq)]
pub(crate) struct Row {
    file: String,
    variant: String,
    bytes: f64,
    samples: u32,
    median: f64,
    min: f64,
    max: f64,
    start_kib: f64,
    peak_kib: f64,
}

impl Row {
    /// Peak RSS above the process's own start (after its imports), as a
    /// multiple of the file size.
    fn rss_ratio(&self) -> f64 {
        (self.peak_kib - self.start_kib) * 1024.0 / self.bytes
    }
}

pub(crate) fn parse(output: &str) -> Vec<Row> {
    output
        .lines()
        .filter(|l| l.starts_with("params "))
        .filter_map(|l| {
            Some(Row {
                file: word(l, "file")?.to_owned(),
                variant: word(l, "variant")?.to_owned(),
                bytes: field(l, "bytes")?,
                samples: field(l, "samples")? as u32,
                median: field(l, "median")?,
                min: field(l, "min")?,
                max: field(l, "max")?,
                start_kib: field(l, "start_kib")?,
                peak_kib: field(l, "peak_kib")?,
            })
        })
        .collect()
}

/// What each variant does, for the report.
fn what(variant: &str) -> &'static str {
    match variant {
        "ours_mmap_open" => "`map_path`: index every tensor, touch no data",
        "ours_mmap_touch" => "`map_path`, then read every byte of every tensor",
        "ours_read_full" => "`read_path`: every tensor copied into memory",
        "tvm_load" => "TVM `load_param_dict_from_file` (copies every tensor)",
        "numpy_npz_load" => "numpy `np.load` of the `.npz`, every array read",
        "ours_write" => "`write_path` of tensors in memory (no fsync)",
        "tvm_save" => "TVM `save_param_dict` + writing its bytes (no fsync)",
        "numpy_npz_save" => "numpy `np.savez` of arrays in memory",
        _ => "",
    }
}

/// The peer a variant's time is compared with.
fn peers_of(variant: &str) -> [&'static str; 2] {
    if variant.ends_with("write") || variant.ends_with("save") {
        ["tvm_save", "numpy_npz_save"]
    } else {
        ["tvm_load", "numpy_npz_load"]
    }
}

pub(crate) fn markdown(rows: &[Row], repeat: &str) -> String {
    let mut w = String::new();
    let _ = writeln!(
        w,
        "## Parameter files beside TVM and numpy\n\n\
         Every run is a fresh process ({repeat} runs per variant; median and fastest–slowest \
         run of the operation's own time, process start and imports excluded). Peak RSS is \
         `wait4`'s `ru_maxrss` of that process, read by a small launcher; *added* is the \
         peak minus the process's RSS before it touched any tensor (after its imports: \
         Python with TVM starts far above Rust). A write's added RSS includes the tensors \
         it writes, held in memory (read untimed first), so a writer that adds nothing \
         shows 1.0×. RSS counts the file's pages a mapping touched (shared page cache, not \
         private memory). The files stay in the page cache throughout: this measures the \
         libraries, not the disk. Ratios: our median / the peer's.\n"
    );
    let mut files: Vec<&str> = rows.iter().map(|r| r.file.as_str()).collect();
    files.dedup();
    for file in files {
        let rs: Vec<&Row> = rows.iter().filter(|r| r.file == file).collect();
        let bytes = rs.first().map_or(0.0, |r| r.bytes);
        let _ = writeln!(
            w,
            "### `{file}` ({:.1} MiB)\n\n\
             | variant | what it does | median | min – max | × TVM | × numpy | peak RSS | added / file |\n\
             |---|---|---|---|---|---|---|---|",
            bytes / 1048576.0
        );
        let find = |v: &str| rs.iter().find(|r| r.variant == v);
        for r in &rs {
            let ratio = |peer: &str| match find(peer) {
                Some(p) if p.variant != r.variant && r.variant.starts_with("ours") => {
                    format!("×{:.2}", r.median / p.median)
                }
                _ => String::new(),
            };
            let [tvm, numpy] = peers_of(&r.variant);
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} – {} | {} | {} | {:.1} MiB | {:.2}× |",
                r.variant,
                what(&r.variant),
                human_time(r.median * 1e9),
                human_time(r.min * 1e9),
                human_time(r.max * 1e9),
                ratio(tvm),
                ratio(numpy),
                r.peak_kib / 1024.0,
                r.rss_ratio()
            );
        }
        let _ = writeln!(w);
        for v in ["ours_read_full", "ours_write"] {
            let verdict = match find(v) {
                Some(r) if r.rss_ratio() <= RSS_BOUND => {
                    format!("**met** ({:.2}×)", r.rss_ratio())
                }
                Some(r) => format!(
                    "**missed** by ×{:.2} ({:.2}×)",
                    r.rss_ratio() / RSS_BOUND,
                    r.rss_ratio()
                ),
                None => "not measured in this run".to_owned(),
            };
            let _ = writeln!(
                w,
                "- Goal: `{v}` adds ≤ {RSS_BOUND}× the file size in peak RSS: {verdict}"
            );
        }
        let _ = writeln!(w);
    }
    w
}

/// Makes the two files (the bench's layout at `PARAMS_IO_BENCH_MIB`, and a
/// model-shaped one), runs the script, and returns the peers with the
/// report's section.
pub(crate) fn run(report: bool) -> (Vec<Peer>, String) {
    let (tvm, numpy) = ("Apache TVM (params)", "numpy (.npz)");
    let python = match interop::python() {
        Ok(p) => p,
        Err(e) => {
            let why = format!("no Python environment: {e}");
            return (
                vec![Peer::missing(tvm, why.clone()), Peer::missing(numpy, why)],
                String::new(),
            );
        }
    };
    let repeat = if report { "10" } else { "3" };
    let mib = std::env::var("PARAMS_IO_BENCH_MIB").unwrap_or_else(|_| "1024".to_owned());
    // On disk under target/ (a tmpfs /tmp would hold the files in memory).
    let dir = target_dir().join("bench-params");
    let result = (|| {
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
        Step::new(
            "bench params files",
            interop::example(true, &["make-bench-file", &file("large.params"), &mib]),
        )
        .run()?;
        Step::new(
            "bench params model file",
            interop::example(
                true,
                &["make-model-file", &file("model.params"), MODEL_TENSORS],
            ),
        )
        .run()?;
        let launcher = target_dir()
            .join("release")
            .join("examples")
            .join("interop");
        let mut cmd = std::process::Command::new(&python);
        cmd.arg(root().join(SCRIPT))
            .arg("run")
            .arg(&dir)
            .arg(&launcher)
            .arg(repeat);
        Step::new("bench params peers", cmd).run()
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let rows = match result {
        Ok(log) => parse(&log),
        Err(e) => {
            let why = format!("the params peer run failed: {e}");
            return (
                vec![Peer::missing(tvm, why.clone()), Peer::missing(numpy, why)],
                String::new(),
            );
        }
    };
    let has = |v: &str| rows.iter().any(|r| r.variant == v);
    let status = |v: &str, what: &'static str| {
        if has(v) {
            Peer::measured(
                what,
                format!(
                    "from PyPI in target/venv-interop; {repeat} fresh processes per variant \
                     on a {mib} MiB file and a model-shaped file of {MODEL_TENSORS} tensors \
                     ({SCRIPT})"
                ),
            )
        } else {
            Peer::missing(what, "no result line from the params peer run")
        }
    };
    let peers = vec![status("tvm_load", tvm), status("numpy_npz_load", numpy)];
    (peers, markdown(&rows, repeat))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINES: &str = "noise\n\
        params file=large variant=ours_read_full bytes=1048576 samples=3 median=0.5 min=0.4 \
        max=0.6 start_kib=2048 before_kib=2048 peak_kib=3072\n\
        params file=large variant=tvm_load bytes=1048576 samples=3 median=0.25 min=0.2 \
        max=0.3 start_kib=100000 before_kib=100000 peak_kib=102048\n\
        params file=large variant=ours_write bytes=1048576 samples=3 median=0.1 min=0.1 \
        max=0.1 start_kib=2048 before_kib=3072 peak_kib=3584\n";

    #[test]
    fn parses_rows_and_judges_the_memory_goals() {
        let rows = parse(LINES);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].rss_ratio(), 1.0);
        assert_eq!(rows[1].rss_ratio(), 2.0);
        let md = markdown(&rows, "3");
        assert!(md.contains("| ours_read_full |"), "{md}");
        assert!(md.contains("| ×2.00 |"), "ratio to TVM's load: {md}");
        assert!(
            md.contains("`ours_read_full` adds ≤ 1.1× the file size in peak RSS: **met** (1.00×)")
        );
        assert!(md.contains(
            "`ours_write` adds ≤ 1.1× the file size in peak RSS: **missed** by ×1.36 (1.50×)"
        ));
    }
}
