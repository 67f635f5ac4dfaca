//! The Node.js peer of `fastio-view`'s tests: Foxglove's own client of
//! its WebSocket protocol (`@foxglove/ws-protocol`, npm) with the `ws`
//! package under it, installed at pinned versions into
//! `target/node-foxglove` (never into the system). The tests
//! (`crates/fastio-cli/tests/view.rs`) find it there or through
//! `FASTIO_FOXGLOVE_NODE_MODULES`.

use std::path::PathBuf;
use std::process::Command;

use crate::root;
use crate::step::{Step, succeeds};

/// Foxglove's client of its WebSocket protocol (npm).
pub(crate) const WS_PROTOCOL: &str = "0.8.0";
/// The WebSocket implementation the client runs on in Node.js (npm).
pub(crate) const WS: &str = "8.18.3";

/// Installs the pinned client into `target/node-foxglove` (a no-op when
/// it is there at those versions) and returns its `node_modules`.
pub(crate) fn foxglove_client() -> Result<PathBuf, String> {
    let dir = root().join("target").join("node-foxglove");
    let modules = dir.join("node_modules");
    for tool in ["node", "npm"] {
        let mut version = Command::new(tool);
        version.arg("--version");
        if !succeeds(version) {
            return Err(format!(
                "{tool} is not installed: the viewer's tests run Foxglove's client in Node.js \
                 (Debian: apt-get install nodejs npm; bash .ci/run does)"
            ));
        }
    }
    let package = format!(
        "{{\"name\": \"fastio-foxglove-client\", \"private\": true, \"dependencies\": \
         {{\"@foxglove/ws-protocol\": \"{WS_PROTOCOL}\", \"ws\": \"{WS}\"}}}}\n"
    );
    let installed = |name: &str, version: &str| {
        std::fs::read_to_string(modules.join(name).join("package.json"))
            .is_ok_and(|t| t.contains(&format!("\"version\": \"{version}\"")))
    };
    if installed("@foxglove/ws-protocol", WS_PROTOCOL) && installed("ws", WS) {
        return Ok(modules);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    std::fs::write(dir.join("package.json"), package)
        .map_err(|e| format!("write {}: {e}", dir.join("package.json").display()))?;
    let mut install = Command::new("npm");
    install
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir);
    Step::new("foxglove client npm install", install)
        .run()
        .map_err(|e| {
            format!(
                "{e}: npm could not install @foxglove/ws-protocol@{WS_PROTOCOL} and ws@{WS} into \
                 {} (the npm registry must be reachable)",
                dir.display()
            )
        })?;
    Ok(modules)
}
