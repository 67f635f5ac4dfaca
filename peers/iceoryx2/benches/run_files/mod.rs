//! The files iceoryx2 makes in one bench run, for both iceoryx2 benches:
//! every node of a run (the producer's and its consumers') carries one
//! prefix, so that the run can remove what iceoryx2 leaves behind (its
//! node-management segment outlives the last node in `/dev/shm`).

#![allow(dead_code)]

use iceoryx2::prelude::*;

/// Names the prefix of this run's files in the consumers.
pub const PREFIX_ENV: &str = "FASTIO_PEER_BENCH_IOX2_PREFIX";

/// The prefix of every file iceoryx2 creates in this run: the producer
/// makes it (`fastio_<bench>_<pid>_`), its consumers get it in
/// [`PREFIX_ENV`].
pub fn prefix(bench: &str) -> String {
    std::env::var(PREFIX_ENV).unwrap_or_else(|_| format!("fastio_{bench}_{}_", std::process::id()))
}

/// A node whose files carry `prefix`.
pub fn node(prefix: &str) -> Node<ipc::Service> {
    let mut config = Config::default();
    config.global.prefix = FileName::new(prefix.as_bytes()).unwrap();
    NodeBuilder::new()
        .config(&config)
        .create::<ipc::Service>()
        .unwrap()
}

/// Removes the files of `prefix` from `/dev/shm`.
pub fn remove_leftovers(prefix: &str) {
    for entry in std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
