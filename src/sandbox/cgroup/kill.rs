//! Emptying a group: `cgroup.kill` where the host has it, else freeze,
//! SIGKILL every member, thaw.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::boost::ChainBoost;
use super::{cpu, fs, unified, KernelCgroup};
use crate::sandbox::KillReport;

/// How long a kill may take before survivors are reported (and the
/// execution becomes `internal_error`). Generous: killed processes still
/// exit under the group's CPU quota, and a fork bomb's hundred exits on a
/// loaded machine can take seconds. Kill latency is measured, not bounded here.
const KILL_BUDGET: Duration = Duration::from_secs(10);

/// Kill again if a group is not empty after this long.
const REKILL_EVERY: Duration = Duration::from_millis(50);

/// How long to wait for a freezer to reach FROZEN in one kill round.
const FREEZE_BUDGET: Duration = Duration::from_millis(100);

/// Poll interval while waiting for a group to empty.
const POLL: Duration = Duration::from_millis(1);

/// What a kill lifts while killed processes exit: the group's quota and
/// weight, and the weight of retrace's directories above it.
struct Unleashed {
    group: Option<cpu::Unleashed>,
    _ancestors: ChainBoost,
}

/// How [`KernelCgroup::kill_all`] kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display)]
pub enum KillMethod {
    /// Write `1` to `cgroup.kill` (v2, and the unified tree on hybrid).
    #[strum(to_string = "cgroup.kill")]
    CgroupKill,
    /// Freeze, SIGKILL every member, thaw (v1 `freezer`; v2 `cgroup.freeze`
    /// before Linux 5.14).
    #[strum(to_string = "freezer")]
    Freezer,
}

impl KernelCgroup {
    pub fn kill_method(&self) -> KillMethod {
        match self.mode.version().kill_dir(&self.dirs) {
            Some(dir) if unified::has_kill(dir) => KillMethod::CgroupKill,
            _ => KillMethod::Freezer,
        }
    }

    /// Nothing alive in any hierarchy: `populated 0` where `cgroup.events`
    /// exists, an empty `cgroup.procs` elsewhere.
    pub(super) fn is_empty(&self) -> bool {
        self.dirs
            .unique()
            .into_iter()
            .flat_map(fs::bottom_up)
            .all(|d| match unified::populated(&d) {
                Some(populated) => !populated,
                None => fs::read_pids(&d.join(unified::PROCS)).is_empty(),
            })
    }

    /// Kills every process of the group and waits (up to 10 s) until none is
    /// left. `extra_pid`, the namespace init, also gets SIGCONT and SIGKILL
    /// (a stopped namespaced process may ignore a lone SIGKILL); it must not
    /// have been reaped yet.
    pub fn kill_all(&self, extra_pid: Option<i32>) -> KillReport {
        let start = Instant::now();
        let method = self.kill_method();
        let mut last_round: Option<Instant> = None;
        let mut rounds = 0u32;
        let mut unleashed: Option<Unleashed> = None;
        loop {
            if last_round.is_none_or(|t| t.elapsed() >= REKILL_EVERY) {
                rounds += 1;
                tracing::debug!(%method, round = rounds, extra_pid, "kill round");
                self.kill_round(method, last_round.is_some());
                if last_round.is_none() {
                    if let Some(pid) = extra_pid.filter(|p| *p > 1) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    }
                    // Only now: every member has SIGKILL pending.
                    if !self.is_empty() {
                        unleashed = Some(self.unleash_cpu());
                    }
                }
                last_round = Some(Instant::now());
            }
            if self.is_empty() || start.elapsed() >= KILL_BUDGET {
                break;
            }
            std::thread::sleep(POLL);
        }
        if let Some(unleashed) = unleashed {
            self.restore_cpu(unleashed);
        }
        let report = KillReport {
            method: method.to_string(),
            kill_ms: start.elapsed().as_secs_f64() * 1e3,
            survivors: self.pids().len(),
        };
        if report.survivors > 0 {
            tracing::warn!(
                %method,
                rounds,
                kill_ms = report.kill_ms,
                survivors = report.survivors,
                "processes survived the kill"
            );
        } else {
            tracing::debug!(%method, rounds, kill_ms = report.kill_ms, "group emptied");
        }
        report
    }

    /// Runs `wait` (the wait for killed processes to exit) with the group's
    /// CPU quota lifted and its weight raised (and the weight of retrace's
    /// directories above it), then puts all back. Call it
    /// only once every member has SIGKILL pending: a killed process never
    /// returns to user code, so the lift buys its exit, not the task's code.
    pub fn with_cpu_unleashed<T>(&self, wait: impl FnOnce() -> T) -> T {
        let unleashed = self.unleash_cpu();
        let out = wait();
        self.restore_cpu(unleashed);
        out
    }

    fn unleash_cpu(&self) -> Unleashed {
        let (tree, files) = self.mode.version().cpu();
        Unleashed {
            group: cpu::unleash(self.dirs.dir(tree), files),
            _ancestors: ChainBoost::raise(&self.ancestors(tree), files),
        }
    }

    /// The harness's `<pid>` directory and the subtree above it in `tree`:
    /// retrace's own.
    fn ancestors(&self, tree: super::layout::Tree) -> Vec<&std::path::Path> {
        let harness = self.owner.as_ref().map(|h| h.dirs.dir(tree));
        harness
            .into_iter()
            .flat_map(|dir| [Some(dir), dir.parent()])
            .flatten()
            .collect()
    }

    /// The group's weight and its ancestors' raised (the quota kept) until
    /// the guard is dropped: for a kernel's start, which runs no task code.
    pub fn favour(&self) -> impl Send {
        let (tree, files) = self.mode.version().cpu();
        let mut chain = vec![self.dirs.dir(tree)];
        chain.extend(self.ancestors(tree));
        ChainBoost::raise(&chain, files)
    }

    /// A failed restore leaves the group without its quota: said loudly, and
    /// the next `apply` of limits (a new group) is unaffected. The
    /// ancestors' weights go back as `unleashed` is dropped.
    fn restore_cpu(&self, unleashed: Unleashed) {
        let Some(saved) = unleashed.group else { return };
        if let Err(first) = saved.restore() {
            if let Err(e) = saved.restore() {
                tracing::error!(error = %e, first = %first, "the CPU quota could not be restored after a kill");
            }
        }
    }

    fn kill_round(&self, method: KillMethod, again: bool) {
        match method {
            KillMethod::CgroupKill => {
                let dir = self
                    .mode
                    .version()
                    .kill_dir(&self.dirs)
                    .expect("cgroup.kill implies a unified directory");
                let killed = unified::kill(dir).is_ok();
                // cgroup.kill handles racing forks; a later round only
                // catches what it could not see (on hybrid, a process that
                // is in the v1 hierarchies only).
                if !killed {
                    tracing::debug!("cgroup.kill failed; freezing and killing each member");
                    self.freeze_kill_thaw();
                } else if again {
                    self.sigkill_members();
                }
            }
            KillMethod::Freezer => self.freeze_kill_thaw(),
        }
    }

    /// Frozen processes cannot fork, so the member list is complete; the
    /// SIGKILLs take effect on thaw.
    fn freeze_kill_thaw(&self) {
        let version = self.mode.version();
        version.freeze(&self.dirs, FREEZE_BUDGET);
        self.sigkill_members();
        version.thaw(&self.dirs);
    }

    fn sigkill_members(&self) {
        let own = std::process::id() as i32;
        // Never pid 1 or ourselves, whatever a group lists.
        for pid in self.pids().into_iter().filter(|p| *p > 1 && *p != own) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
