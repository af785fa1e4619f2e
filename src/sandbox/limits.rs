//! The limits every confined kernel gets. The same flags set them on
//! `exec`, `run` and `sandbox check`, and every run's outputs record them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxLimits {
    /// Memory of all the kernel's processes together (no swap).
    pub memory_bytes: u64,
    /// Processes and threads.
    pub pids: u64,
    /// CPU quota in cores.
    pub cpus: f64,
    /// Wall time per execution.
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub timeout: Duration,
    /// CPU time per execution.
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub cpu_time: Duration,
    /// Output bytes per execution (stdout, stderr and displays).
    pub output_cap_bytes: u64,
    /// Output messages per execution.
    pub output_cap_messages: u64,
    /// Size of each private tmpfs (`/tmp`, `/dev/shm`, working directory,
    /// HOME), counted by real usage (a kernel has no file-size rlimit).
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

/// The smallest value a limit may take, and why: below it a kernel
/// cannot start, or every cell would be killed at once. The one rule the
/// limit flags, the launcher's environment overrides and the checker's
/// own jail are held to (docs/sandbox.md, "Limits").
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// The flag that sets the limit.
    pub flag: &'static str,
    /// The smallest value, as a flag would be written.
    pub minimum: &'static str,
    pub why: &'static str,
}

pub const MEMORY_FLOOR: (u64, Floor) = (
    128 << 20,
    Floor {
        flag: "--memory",
        minimum: "128M",
        why: "a cold fat kernel peaks at about 91 MiB while it starts",
    },
);
pub const PIDS_FLOOR: (u64, Floor) = (
    16,
    Floor {
        flag: "--pids",
        minimum: "16",
        why: "ipykernel runs about ten threads of its own",
    },
);
pub const CPUS_FLOOR: (f64, Floor) = (
    0.05,
    Floor {
        flag: "--cpus",
        minimum: "0.05",
        why: "below a twentieth of a core a kernel takes minutes to start",
    },
);
pub const TIMEOUT_FLOOR: (Duration, Floor) = (
    Duration::from_millis(100),
    Floor {
        flag: "--timeout",
        minimum: "100ms",
        why: "a cell's round trip alone takes milliseconds; 0 would kill every cell at once",
    },
);
pub const CPU_TIME_FLOOR: (Duration, Floor) = (
    Duration::from_millis(100),
    Floor {
        flag: "--cpu-time",
        minimum: "100ms",
        why: "0 would kill every cell at once",
    },
);
pub const OUTPUT_FLOOR: (u64, Floor) = (
    1 << 10,
    Floor {
        flag: "--output-cap",
        minimum: "1K",
        why: "a traceback alone takes hundreds of bytes",
    },
);
pub const OUTPUT_MESSAGES_FLOOR: (u64, Floor) = (
    10,
    Floor {
        flag: "--output-messages",
        minimum: "10",
        why: "a cell's status and reply messages count too",
    },
);
pub const DISK_FLOOR: (u64, Floor) = (
    16 << 20,
    Floor {
        flag: "--disk",
        minimum: "16M",
        why: "IPython writes its profile and history into the kernel's home",
    },
);

/// A limit below its [`Floor`]: the value as it was written, and the flag.
#[derive(Debug, thiserror::Error)]
#[error("{shown} is below {}'s minimum {}: {}", rule.flag, rule.minimum, rule.why)]
pub struct BelowFloor {
    shown: String,
    rule: Floor,
}

impl Floor {
    /// `value` if it is at least `floor`, else why not, naming the flag.
    pub fn hold<T: PartialOrd>(
        (floor, rule): (T, Floor),
        value: T,
        shown: &str,
    ) -> Result<T, BelowFloor> {
        // NaN is below every floor.
        if value >= floor {
            return Ok(value);
        }
        Err(BelowFloor {
            shown: shown.to_string(),
            rule,
        })
    }
}

impl SandboxLimits {
    /// The first limit below its [`Floor`], said as the flag that sets it.
    pub fn below_floor(&self) -> Option<BelowFloor> {
        use crate::util::units::format_bytes;
        let bytes = |(floor, rule): (u64, Floor), v: u64| {
            Floor::hold((floor, rule), v, &format_bytes(v)).err()
        };
        let secs = |(floor, rule): (Duration, Floor), v: Duration| {
            Floor::hold((floor, rule), v, &format!("{v:?}")).err()
        };
        bytes(MEMORY_FLOOR, self.memory_bytes)
            .or_else(|| Floor::hold(PIDS_FLOOR, self.pids, &self.pids.to_string()).err())
            .or_else(|| Floor::hold(CPUS_FLOOR, self.cpus, &self.cpus.to_string()).err())
            .or_else(|| secs(TIMEOUT_FLOOR, self.timeout))
            .or_else(|| secs(CPU_TIME_FLOOR, self.cpu_time))
            .or_else(|| bytes(OUTPUT_FLOOR, self.output_cap_bytes))
            .or_else(|| {
                let n = self.output_cap_messages;
                Floor::hold(OUTPUT_MESSAGES_FLOOR, n, &n.to_string()).err()
            })
            .or_else(|| bytes(DISK_FLOOR, self.disk_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_above_every_floor_and_zero_is_below_each() {
        let below = SandboxLimits::default().below_floor();
        assert!(below.is_none(), "{below:?}");
        let zeroed = [
            SandboxLimits {
                memory_bytes: 0,
                ..Default::default()
            },
            SandboxLimits {
                pids: 0,
                ..Default::default()
            },
            SandboxLimits {
                cpus: 0.0,
                ..Default::default()
            },
            SandboxLimits {
                cpus: f64::NAN,
                ..Default::default()
            },
            SandboxLimits {
                timeout: Duration::ZERO,
                ..Default::default()
            },
            SandboxLimits {
                cpu_time: Duration::ZERO,
                ..Default::default()
            },
            SandboxLimits {
                output_cap_bytes: 0,
                ..Default::default()
            },
            SandboxLimits {
                output_cap_messages: 0,
                ..Default::default()
            },
            SandboxLimits {
                disk_bytes: 0,
                ..Default::default()
            },
        ];
        let flags = [
            "--memory",
            "--pids",
            "--cpus",
            "--cpus",
            "--timeout",
            "--cpu-time",
            "--output-cap",
            "--output-messages",
            "--disk",
        ];
        for (limits, flag) in zeroed.iter().zip(flags) {
            let why = limits.below_floor().expect("zero is below the floor");
            assert!(why.to_string().contains(flag), "{why}");
        }
    }

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
