//! The limits every confined kernel gets. The same flags set them on
//! `exec`, `run` and `sandbox check`, and every run's outputs record them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SandboxLimits {
    /// Memory of all the kernel's processes together (no swap).
    pub memory_bytes: u64,
    /// Processes and threads.
    pub pids: u64,
    /// CPU quota in cores.
    pub cpus: f64,
    /// Wall time per execution.
    #[serde(with = "crate::util::secs")]
    pub timeout: Duration,
    /// CPU time per execution.
    #[serde(with = "crate::util::secs")]
    pub cpu_time: Duration,
    /// Output bytes per execution (stdout, stderr and displays).
    pub output_cap_bytes: u64,
    /// Output messages per execution.
    pub output_cap_messages: u64,
    /// Size of each private tmpfs (`/tmp`, `/dev/shm`, working directory)
    /// and the largest file the kernel may write.
    pub disk_bytes: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 512 << 20,
            pids: 128,
            cpus: 1.0,
            timeout: Duration::from_secs(10),
            cpu_time: Duration::from_secs(10),
            output_cap_bytes: 1 << 20,
            output_cap_messages: 10_000,
            disk_bytes: 256 << 20,
        }
    }
}

impl SandboxLimits {
    /// Lifetime CPU seconds of one kernel (RLIMIT_CPU): only a backstop for
    /// when the harness itself dies, so generous.
    pub fn cpu_backstop_secs(&self) -> u64 {
        self.cpu_time.as_secs().saturating_mul(20) + 60
    }

    /// BLAS/OpenMP threads: the CPU quota, rounded up.
    pub fn threads(&self) -> u32 {
        self.cpus.ceil().max(1.0) as u32
    }
}

impl SandboxLimits {
    /// `memory 512M, pids 128, cpus 1, timeout 10s, cpu-time 10s, output 1M,
    /// disk 256M`: the limits as every human-readable output names them.
    pub fn describe(&self) -> String {
        use crate::util::units::format_bytes;
        format!(
            "memory {}, pids {}, cpus {}, timeout {:?}, cpu-time {:?}, output {}, disk {}",
            format_bytes(self.memory_bytes),
            self.pids,
            self.cpus,
            self.timeout,
            self.cpu_time,
            format_bytes(self.output_cap_bytes),
            format_bytes(self.disk_bytes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_json() {
        let l = SandboxLimits::default();
        assert_eq!(l.threads(), 1);
        assert_eq!(l.cpu_backstop_secs(), 260);
        let json = serde_json::to_value(l).unwrap();
        assert_eq!(json["timeout"], 10.0);
        let back: SandboxLimits = serde_json::from_value(json).unwrap();
        assert_eq!(back, l);
    }
}
