//! `fastio run --cpu-latency-us US`: a Linux PM QoS request that keeps
//! every core's wake-up latency at most `US` microseconds while the run
//! lasts (the kernel's `/dev/cpu_dma_latency`: the request holds while
//! the file is open and goes when it closes, also when the process dies).
//!
//! Idle cores then stay in shallow idle states (at 0, they poll), so a
//! thread woken from another core runs at once instead of after the core
//! comes out of a halt: on a VM whose idle cores halt, a wake-up across
//! cores went from 47 to 5 µs (`cargo xtask bench wakes`). The cost is
//! power, and on a VM host CPU time: idle cores no longer sleep.

use std::fs::File;
use std::io::Write;

use crate::Failure;

/// The kernel's PM QoS file for the CPU wake-up latency.
const DEVICE: &str = "/dev/cpu_dma_latency";

/// A held request; dropping it ends the request.
pub(crate) struct CpuLatency {
    _file: File,
}

impl CpuLatency {
    /// Asks for a wake-up latency of at most `us` microseconds.
    pub(crate) fn hold(us: u32) -> Result<CpuLatency, Failure> {
        let value = i32::try_from(us).map_err(|_| Failure {
            message: format!("--cpu-latency-us {us}: at most {}", i32::MAX),
            code: 2,
        })?;
        let mut file = File::options()
            .write(true)
            .open(DEVICE)
            .map_err(|e| Failure {
                message: format!(
                    "--cpu-latency-us: cannot open {DEVICE} to hold the request ({e}; it needs root)"
                ),
                code: 1,
            })?;
        // The kernel takes the value as a native-endian 32-bit integer.
        file.write_all(&value.to_ne_bytes()).map_err(|e| Failure {
            message: format!("--cpu-latency-us {us}: {DEVICE} refused the request ({e})"),
            code: 1,
        })?;
        Ok(CpuLatency { _file: file })
    }
}
