//! The sandbox flags shared by `exec`, `run` and `sandbox check`.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use retrace::kernel::{KernelOptions, KernelStart};
use retrace::sandbox::limits::{
    Floor, CPUS_FLOOR, CPU_TIME_FLOOR, DISK_FLOOR, MEMORY_FLOOR, OUTPUT_FLOOR,
    OUTPUT_MESSAGES_FLOOR, PIDS_FLOOR, TIMEOUT_FLOOR,
};
use retrace::sandbox::{Sandbox, SandboxInfo, SandboxLimits};
use retrace::util::units::{parse_bytes, parse_duration};

use super::Failure;

#[derive(Args, Clone, Debug)]
pub struct LimitArgs {
    /// Memory of the kernel and all its processes (no swap); at least 128M.
    #[arg(long, default_value = "512M", value_parser = memory_flag)]
    pub memory: u64,
    /// Processes and threads of one kernel; at least 16.
    #[arg(long, default_value_t = 128, value_parser = pids_flag)]
    pub pids: u64,
    /// CPU quota in cores; at least 0.05.
    #[arg(long, default_value_t = 1.0, value_parser = cpus_flag)]
    pub cpus: f64,
    /// Wall time per execution; at least 100ms.
    #[arg(long, default_value = "10s", value_parser = timeout_flag)]
    pub timeout: Duration,
    /// CPU time per execution; at least 100ms.
    #[arg(long, default_value = "10s", value_parser = cpu_time_flag)]
    pub cpu_time: Duration,
    /// Output per execution (stdout, stderr and displays together); at
    /// least 1K.
    #[arg(long, default_value = "1M", value_parser = output_flag)]
    pub output_cap: u64,
    /// Output messages per execution; at least 10.
    #[arg(long, default_value_t = 10_000, value_parser = output_messages_flag)]
    pub output_messages: u64,
    /// Size of each of the kernel's private /tmp, /dev/shm, working directory
    /// and HOME, counted by what they really hold (a sparse file counts its
    /// written pages); at least 16M.
    #[arg(long, default_value = "256M", value_parser = disk_flag)]
    pub disk: u64,
    /// Run kernels WITHOUT confinement (no cgroups, no namespaces). Every
    /// output then says so. Only for code you trust.
    #[arg(long)]
    pub unsafe_no_sandbox: bool,
    /// How kernels start: `zygote` (forked from a pre-imported process of
    /// the image; cold whenever the zygote cannot serve, and for unconfined
    /// kernels) or `cold` (a new interpreter each). Default: zygote, but
    /// cold for `exec`, whose one kernel would wait for the zygote's own
    /// start.
    #[arg(long, env = "RETRACE_KERNEL_START", value_parser = parse_start)]
    pub kernel_start: Option<KernelStart>,
}

fn parse_start(text: &str) -> Result<KernelStart, String> {
    text.parse()
}

// Each limit flag is held to its floor (`retrace::sandbox::limits`):
// zero, or a value a kernel cannot run under, is a usage error (exit 2)
// naming the flag and its minimum.

fn bytes_at_least(floor: (u64, Floor), text: &str) -> Result<u64, String> {
    let value = parse_bytes(text).map_err(|e| e.to_string())?;
    Floor::hold(floor, value, text).map_err(|e| e.to_string())
}

fn duration_at_least(floor: (Duration, Floor), text: &str) -> Result<Duration, String> {
    let value = parse_duration(text).map_err(|e| e.to_string())?;
    Floor::hold(floor, value, text).map_err(|e| e.to_string())
}

fn count_at_least(floor: (u64, Floor), text: &str) -> Result<u64, String> {
    let value: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number"))?;
    Floor::hold(floor, value, text).map_err(|e| e.to_string())
}

fn memory_flag(text: &str) -> Result<u64, String> {
    bytes_at_least(MEMORY_FLOOR, text)
}

fn disk_flag(text: &str) -> Result<u64, String> {
    bytes_at_least(DISK_FLOOR, text)
}

fn output_flag(text: &str) -> Result<u64, String> {
    bytes_at_least(OUTPUT_FLOOR, text)
}

fn timeout_flag(text: &str) -> Result<Duration, String> {
    duration_at_least(TIMEOUT_FLOOR, text)
}

fn cpu_time_flag(text: &str) -> Result<Duration, String> {
    duration_at_least(CPU_TIME_FLOOR, text)
}

fn pids_flag(text: &str) -> Result<u64, String> {
    count_at_least(PIDS_FLOOR, text)
}

fn output_messages_flag(text: &str) -> Result<u64, String> {
    count_at_least(OUTPUT_MESSAGES_FLOOR, text)
}

fn cpus_flag(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of cores"))?;
    Floor::hold(CPUS_FLOOR, value, text).map_err(|e| e.to_string())
}

impl LimitArgs {
    pub fn limits(&self) -> SandboxLimits {
        SandboxLimits {
            memory_bytes: self.memory,
            pids: self.pids,
            cpus: self.cpus,
            timeout: self.timeout,
            cpu_time: self.cpu_time,
            output_cap_bytes: self.output_cap,
            output_cap_messages: self.output_messages,
            disk_bytes: self.disk,
        }
    }

    /// `--kernel-start`, else the default (the zygote).
    pub fn kernel_start(&self) -> KernelStart {
        self.kernel_start.unwrap_or_default()
    }

    /// Kernel options that enforce these limits (CPU time needs cgroup
    /// accounting, so only when confined).
    pub fn kernel_options(&self) -> KernelOptions {
        KernelOptions {
            start: self.kernel_start(),
            ..KernelOptions::enforcing(&self.limits(), !self.unsafe_no_sandbox)
        }
    }

    /// The sandbox these flags ask for; fails closed unless
    /// `--unsafe-no-sandbox` is given.
    pub fn sandbox(&self) -> Result<Arc<dyn Sandbox>, Failure> {
        if self.unsafe_no_sandbox {
            eprintln!("warning: --unsafe-no-sandbox: kernels run WITHOUT confinement");
        }
        let exe = std::env::current_exe().map_err(Failure::infra)?;
        retrace::sandbox::open(self.unsafe_no_sandbox, exe).map_err(Failure::infra)
    }
}

/// One line naming the confinement and its limits, for human output.
pub fn describe(info: &SandboxInfo, l: &SandboxLimits) -> String {
    if !info.confined {
        return "sandbox: NONE (--unsafe-no-sandbox): kernels are not confined".into();
    }
    format!("sandbox: {} | {}", info.mode, l.describe())
}
