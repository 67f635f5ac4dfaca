//! Python virtual environments under `target/` for the checks that run
//! third-party Python packages (Blaze's `datashape`, Apache TVM).

use std::path::PathBuf;
use std::process::Command;

use crate::root;
use crate::step::{Step, succeeds};

/// Creates `target/<name>` if it is missing or broken (no working pip),
/// installs `packages` (a no-op when they already are), and returns its
/// Python interpreter. `label` names the check in step lines and errors.
pub(crate) fn python(name: &str, packages: &[&str], label: &str) -> Result<PathBuf, String> {
    let venv = root().join("target").join(name);
    let python = venv.join("bin").join("python");
    let mut pip_works = Command::new(&python);
    pip_works.args(["-m", "pip", "--version"]);
    if !python.exists() || !succeeds(pip_works) {
        let mut version = Command::new("python3");
        version.arg("--version");
        if !succeeds(version) {
            return Err(format!(
                "python3 is not installed: {label} needs python3 with the venv \
                 module (Debian: apt-get install python3-venv)"
            ));
        }
        // --clear: start over from a half-made environment.
        let mut create = Command::new("python3");
        create.args(["-m", "venv", "--clear"]).arg(&venv);
        Step::new(format!("{label} venv"), create)
            .run()
            .map_err(|e| {
                format!(
                    "{e}: could not create the virtual environment {} \
                     (Debian: apt-get install python3-venv)",
                    venv.display()
                )
            })?;
    }
    let mut install = Command::new(&python);
    install
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages);
    Step::new(format!("{label} pip install"), install)
        .run()
        .map_err(|e| {
            format!(
                "{e}: pip could not install {} into {} (PyPI must be reachable; \
                 pip's output is above)",
                packages.join(" "),
                venv.display()
            )
        })?;
    Ok(python)
}
