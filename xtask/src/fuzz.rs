//! `cargo xtask fuzz [--seconds N] [TARGET]`: build the cargo-fuzz targets
//! in `fuzz/` on nightly, replay every input of each target's committed
//! corpus (`fuzz/corpus/TARGET`, seeded from `fuzz/seeds/TARGET`; a crash
//! there fails at once), then fuzz each for N seconds, adding what it
//! finds to the corpus. `cargo xtask fuzz --cmin [TARGET]` minimizes the
//! corpora (`cargo fuzz cmin`) before they are committed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;
use crate::step::{Step, cargo_nightly, succeeds};

/// Options every libFuzzer run of ours takes.
const LIBFUZZER: [&str; 3] = ["-timeout=10", "-rss_limit_mb=2048", "-max_len=4096"];

pub(crate) fn parse_args(args: &[String]) -> Result<(u64, Option<String>, bool), String> {
    let mut seconds = 60;
    let mut target = None;
    let mut cmin = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--cmin" => cmin = true,
            "--seconds" => {
                let value = it.next().ok_or("--seconds needs a value")?;
                seconds = value
                    .parse()
                    .map_err(|_| format!("--seconds: not a whole number: {value}"))?;
            }
            other if other.starts_with('-') => return Err(format!("unknown option {other}")),
            other => target = Some(other.to_owned()),
        }
    }
    Ok((seconds, target, cmin))
}

/// The fuzz targets: the file stems in `fuzz/fuzz_targets`.
fn targets() -> Result<Vec<String>, String> {
    let dir = root().join("fuzz").join("fuzz_targets");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("read {}: {e}", dir.display()))?
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "rs").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    Ok(names)
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    if succeeds(cargo_nightly(["fuzz", "--version"])) {
        return Ok(());
    }
    let mut install = Command::new("cargo");
    install.args(["install", "--locked", "cargo-fuzz"]);
    Step::new("install cargo-fuzz", install).run().map(drop)
}

fn copy_seeds(target: &str, corpus: &Path) -> Result<(), String> {
    std::fs::create_dir_all(corpus).map_err(|e| format!("create {}: {e}", corpus.display()))?;
    let seeds = root().join("fuzz").join("seeds").join(target);
    let Ok(entries) = std::fs::read_dir(&seeds) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let dest = corpus.join(entry.file_name());
        if !dest.exists() {
            std::fs::copy(entry.path(), &dest)
                .map_err(|e| format!("copy seed {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn newest_artifact(target: &str) -> Option<PathBuf> {
    let dir = root().join("fuzz").join("artifacts").join(target);
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
}

pub(crate) fn run(seconds: u64, only: Option<&str>, cmin: bool) -> Result<(), String> {
    let all = targets()?;
    let selected: Vec<String> = match only {
        Some(t) if all.iter().any(|a| a == t) => vec![t.to_owned()],
        Some(t) => {
            return Err(format!(
                "unknown fuzz target {t}; targets: {}",
                all.join(", ")
            ));
        }
        None => all,
    };
    ensure_cargo_fuzz()?;
    let mut build = vec!["fuzz", "build"];
    if let [one] = selected.as_slice() {
        build.push(one);
    }
    Step::new("fuzz build", cargo_nightly(build)).run()?;
    for target in selected {
        let corpus = root().join("fuzz").join("corpus").join(&target);
        copy_seeds(&target, &corpus)?;
        let before = newest_artifact(&target);
        let failed =
            |e: String| match newest_artifact(&target).filter(|a| Some(a) != before.as_ref()) {
                Some(path) => format!("{e}: reproducer at {}", path.display()),
                None => e,
            };
        if cmin {
            let mut args = vec!["fuzz".to_owned(), "cmin".to_owned(), target.clone()];
            args.push(corpus.display().to_string());
            args.push("--".to_owned());
            args.extend(LIBFUZZER.map(str::to_owned));
            Step::new(format!("fuzz {target} cmin"), cargo_nightly(args)).run()?;
            continue;
        }
        let mut replay = vec![
            "fuzz".to_owned(),
            "run".to_owned(),
            target.clone(),
            corpus.display().to_string(),
            "--".to_owned(),
            "-runs=0".to_owned(),
        ];
        replay.extend(LIBFUZZER.map(str::to_owned));
        Step::new(format!("fuzz {target} replay"), cargo_nightly(replay))
            .run()
            .map_err(failed)?;
        let cmd = cargo_nightly([
            "fuzz".to_owned(),
            "run".to_owned(),
            target.clone(),
            corpus.display().to_string(),
            "--".to_owned(),
            format!("-max_total_time={seconds}"),
            LIBFUZZER[0].to_owned(),
            LIBFUZZER[1].to_owned(),
            LIBFUZZER[2].to_owned(),
        ]);
        Step::new(format!("fuzz {target} {seconds}s"), cmd)
            .run()
            .map_err(failed)?;
    }
    Ok(())
}
