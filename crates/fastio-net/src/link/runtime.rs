//! The sizes of Zenoh's own thread pools that fastio-net chooses.
//!
//! Zenoh 1.10 runs five Tokio runtimes (`app`, `acc`, `tx`, `rx`, `net`)
//! of six worker threads in all by default, sized only by the
//! `ZENOH_RUNTIME` environment variable (RON), read once, when Zenoh first
//! starts a runtime. On a machine of few cores those threads wake one
//! another for every message. fastio-net's choice ([`zenoh_runtime_for`]):
//! receiving, accepting and the network tasks handed over to `app`, whose
//! workers are the machine's cores (one to four), and one transmit worker.
//! On our 2-core machine, with `hostbench zenoh` in two namespaces, three
//! rounds taking turns with the default: a 4 KiB round trip of 242–278 µs
//! against 298–330 µs, a 1 MiB entry in 500–526 µs against 714–897 µs.

/// The environment variable Zenoh reads its runtime sizes from.
pub const ZENOH_RUNTIME_VAR: &str = "ZENOH_RUNTIME";

/// fastio-net's Zenoh runtime sizes for a machine of `cores` cores, as the
/// RON that `ZENOH_RUNTIME` takes.
pub fn zenoh_runtime_for(cores: usize) -> String {
    let app = cores.clamp(1, 4);
    format!(
        "(app: (worker_threads: {app}), tx: (worker_threads: 1), rx: (handover: app), acc: (handover: app), net: (handover: app))"
    )
}

/// Runs this process's program again at once (`exec`: the same process,
/// arguments and pid) with `ZENOH_RUNTIME` set to
/// [`zenoh_runtime_for`] this machine's cores, before Zenoh has started:
/// Zenoh reads its sizes only from the environment. Returns `None` at once
/// when the variable is set already (the caller's choice stands), and the
/// error when the program could not be run again (Zenoh's defaults then
/// serve); on success it does not return.
pub fn exec_with_zenoh_runtime() -> Option<std::io::Error> {
    use std::os::unix::process::CommandExt;
    if std::env::var_os(ZENOH_RUNTIME_VAR).is_some() {
        return None;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Some(e),
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
    Some(
        std::process::Command::new(&exe)
            .arg0(arg0)
            .args(args)
            .env(ZENOH_RUNTIME_VAR, zenoh_runtime_for(cores))
            .exec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_pool_takes_the_cores_up_to_four() {
        assert!(zenoh_runtime_for(0).starts_with("(app: (worker_threads: 1),"));
        assert!(zenoh_runtime_for(2).starts_with("(app: (worker_threads: 2),"));
        assert!(zenoh_runtime_for(64).starts_with("(app: (worker_threads: 4),"));
        assert!(zenoh_runtime_for(2).contains("rx: (handover: app)"));
    }
}
