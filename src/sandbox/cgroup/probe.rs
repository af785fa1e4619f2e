//! The probe: what kernel groups would get on this host.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{unified, CgroupHost, CgroupMode};

/// What the host offers, for startup checks and run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub mode: CgroupMode,
    /// A throwaway group could be created and removed.
    pub writable: bool,
    /// Controllers available to kernel groups.
    pub controllers: Vec<String>,
    /// `cgroup.kill` exists (v2, or the unified tree on hybrid).
    pub cgroup_kill: bool,
    /// Swap can be limited (`memory.memsw.*` on v1, `memory.swap.max` on v2).
    pub swap_accounting: bool,
    pub host_has_swap: bool,
    /// Human-readable findings; empty when all is well.
    pub problems: Vec<String>,
}

impl CgroupHost {
    /// Checks what kernel groups would get, creating and removing a
    /// throwaway group.
    pub fn probe(&self) -> Probe {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut problems = Vec::new();
        let version = self.mode.version();
        let controllers = version.controllers(&self.subtree, self.v2_parent.as_deref());
        for name in version.needed() {
            if !controllers.iter().any(|c| c == name) {
                problems.push(format!("controller {name} is not available"));
            }
        }

        let name = format!(
            "probe-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let scratch = self.subtree.join(&name);
        let mut made = Vec::new();
        let mut failure = self.prepare().err().map(|e| e.to_string());
        if failure.is_none() {
            for dir in scratch.unique() {
                match self.fs().mkdir(dir) {
                    Ok(()) => made.push(dir),
                    Err(e) => {
                        failure = Some(format!("cannot create {}: {e}", dir.display()));
                        break;
                    }
                }
            }
        }
        let writable = failure.is_none();
        // Ask the throwaway group (a non-root group has every file a kernel
        // group would); without one, fall back to what the subtree shows.
        let sample = if writable { &scratch } else { &self.subtree };
        let cgroup_kill = version.kill_dir(sample).is_some_and(unified::has_kill);
        let swap_accounting = version.swap_accounting(sample, writable);
        let deadline = Instant::now() + Duration::from_millis(200);
        for dir in made.iter().rev() {
            let _ = self.fs().rmdir_retry(dir, deadline);
        }

        if let Some(failure) = failure {
            problems.push(failure);
        }
        if self.host_has_swap && !swap_accounting {
            problems.push("swap is on but swap accounting is off (swapaccount=1)".into());
        }
        // Plain v1 has no unified tree to look for cgroup.kill in.
        let has_unified = version.kill_dir(&self.subtree).is_some();
        if has_unified && writable && !cgroup_kill {
            problems.push("no cgroup.kill (Linux < 5.14): kills use the freezer".into());
        }
        Probe {
            mode: self.mode,
            writable,
            controllers,
            cgroup_kill,
            swap_accounting,
            host_has_swap: self.host_has_swap,
            problems,
        }
    }
}
