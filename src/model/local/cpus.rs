//! How the local server uses the machine's CPUs: its generation threads
//! and slots by default, and the priority it runs at.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// The local server's default nice value: a CPU-bound process started
/// beside it after it (a build, another run) then takes a quarter of a
/// contested core instead of half. llama.cpp's generation threads meet at a
/// barrier every token, so one thread sharing its core equally stalls them
/// all: measured on 2 cores with the default model, 2 threads beside one
/// busy loop fell from 10.7 to 1.7 tok/s at nice 0 and held 5.4 (of 11.4)
/// at nice -5 (benches/README.md, "Generation beside later load"). A
/// kernel's CPU-bound cell running while the model generates also gets a
/// quarter of the core it shares, instead of half. Not llama.cpp's `--prio`:
/// above normal it makes its threads SCHED_FIFO, which spin at their
/// barriers and would starve everything else on the machine.
pub const DEFAULT_NICE: i32 = -5;

/// Generation threads: `RETRACE_MODEL_THREADS` if set, else one per
/// available CPU (cgroup quota and affinity included) that is not already
/// busy at start (measured over a quarter second: a load average lags by
/// minutes, e.g. right after a build); at least 1, at most 8 (past
/// a few threads decoding is memory-bound and llama.cpp spends more on
/// synchronisation than it gains).
///
/// Why not simply every CPU: llama.cpp's threads meet at a barrier for
/// every token, so one thread preempted by other work stalls all of them.
/// Measured on 2 cores with Qwen2.5-Coder-1.5B Q4_K_M: idle, 2 threads
/// generated 9.9 tokens/s and 1 thread 5.4; beside CPU-bound builds, 2
/// threads fell to 1.9-7.0 while 1 thread held 5-8. The kernels' own work
/// between requests is short and does not count against this.
pub fn default_threads() -> usize {
    let requested = std::env::var("RETRACE_MODEL_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok());
    threads_for(requested, available_cpus(), busy_cpus())
}

/// Slots of `llama-server`: `RETRACE_MODEL_SLOTS` if set, else 4. On a
/// CPU decoding is bound by memory bandwidth, so sequences decoded
/// together share each pass over the weights (see benches/README.md).
pub fn default_slots() -> usize {
    std::env::var("RETRACE_MODEL_SLOTS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(DEFAULT_SLOTS, clamp_slots)
}

pub(super) fn clamp_slots(n: usize) -> usize {
    n.clamp(1, 64)
}

const DEFAULT_SLOTS: usize = 4;

/// CPUs of the host busy over the last quarter second, from `/proc/stat`.
fn busy_cpus() -> Option<f64> {
    fn sample() -> Option<(u64, u64, usize)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let idle = fields.get(3)? + fields.get(4).unwrap_or(&0);
        let total = fields.iter().take(8).sum();
        let cpus = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .count();
        Some((idle, total, cpus))
    }
    let (idle0, total0, cpus) = sample()?;
    std::thread::sleep(Duration::from_millis(250));
    let (idle1, total1, _) = sample()?;
    let total = total1.checked_sub(total0).filter(|t| *t > 0)?;
    let busy = total.saturating_sub(idle1.saturating_sub(idle0));
    Some(busy as f64 / total as f64 * cpus as f64)
}

fn threads_for(requested: Option<usize>, cpus: usize, load: Option<f64>) -> usize {
    if let Some(n) = requested.filter(|n| *n > 0) {
        return n.min(64);
    }
    let busy = load.map_or(0, |l| l.round().max(0.0) as usize);
    cpus.saturating_sub(busy).clamp(1, 8)
}

pub(super) fn available_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Starts the server at nice value `nice`: best effort, since lowering it
/// below the parent's needs root (or CAP_SYS_NICE); `LocalServer::nice`
/// reads what it got.
// pre_exec (between fork and exec) is unsafe by nature; the block says why it is sound.
#[allow(unsafe_code)]
pub(super) fn with_nice(cmd: &mut Command, nice: i32) {
    // SAFETY: between fork and exec only setpriority, async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::local::ServerOptions;

    #[test]
    fn threads_use_the_idle_cpus_within_bounds() {
        // Idle: every CPU, at most 8.
        assert_eq!(threads_for(None, 2, Some(0.1)), 2);
        assert_eq!(threads_for(None, 32, Some(0.0)), 8);
        // Busy: what is left, at least 1.
        assert_eq!(threads_for(None, 2, Some(1.2)), 1);
        assert_eq!(threads_for(None, 4, Some(1.6)), 2);
        assert_eq!(threads_for(None, 2, Some(7.0)), 1);
        assert_eq!(threads_for(None, 2, None), 2);
        // Asked for: as asked (0 means unset).
        assert_eq!(threads_for(Some(3), 2, Some(5.0)), 3);
        assert_eq!(threads_for(Some(0), 2, Some(0.0)), 2);
        let t = default_threads();
        assert!(t >= 1, "{t}");
        let o = ServerOptions::default();
        assert!(
            o.batch_threads >= o.threads && o.batch_threads <= 8,
            "{o:?}"
        );
    }
}
