//! `cargo xtask blaze`: checks that Blaze's `datashape` package (PyPI)
//! reads our canonical datashape text as the same type and prints it the
//! same way. Uses a virtual environment in `target/venv-blaze`.

use std::process::Command;

use crate::root;
use crate::step::Step;

const PACKAGES: [&str; 2] = ["datashape==0.5.2", "numpy==2.4.6"];

pub(crate) fn run() -> Result<(), String> {
    let python = crate::venv::python("venv-blaze", &PACKAGES, "blaze")?;
    // Our canonical text, piped into Blaze.
    let script = format!(
        "cargo run --quiet -p dtype --example canonical | '{}' crates/dtype/compat/blaze_check.py",
        python.display()
    );
    let mut check = Command::new("bash");
    check
        .args(["-c", &format!("set -euo pipefail; {script}")])
        .current_dir(root());
    Step::new("blaze datashape", check).run().map(drop)
}
