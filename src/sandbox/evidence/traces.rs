//! What the kernel's namespaces show beyond its cgroup, and its change
//! over one execution.

use serde::{Deserialize, Serialize};

/// What the kernel's confinement shows beyond its cgroup, read from outside
/// the kernel before and after each execution (too costly to poll). Zero
/// when unconfined: there is then nothing that could confirm a claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traces {
    /// Refused network attempts: the refusal counters of the kernel's
    /// network namespace (see `netns.rs`).
    pub net_refusals: u64,
    /// Processes of the kernel whose descriptor table reached
    /// RLIMIT_NOFILE (see `fdtable.rs`).
    pub full_fd_tables: u64,
    /// Private tmpfs mounts of the kernel that are full (see `tmpfs.rs`): a
    /// level, after the execution.
    pub full_mounts: u64,
    /// Mounts that became full during the execution (a delta).
    #[serde(default)]
    pub filled_mounts: u64,
}

impl Traces {
    /// Per-execution change; `full_mounts` keeps the later level.
    pub fn since(&self, before: &Traces) -> Traces {
        Traces {
            net_refusals: self.net_refusals.saturating_sub(before.net_refusals),
            full_fd_tables: self.full_fd_tables.saturating_sub(before.full_fd_tables),
            full_mounts: self.full_mounts,
            filled_mounts: self.full_mounts.saturating_sub(before.full_mounts),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_deltas() {
        let before = Traces {
            net_refusals: 2,
            full_fd_tables: 1,
            full_mounts: 1,
            filled_mounts: 0,
        };
        let after = Traces {
            net_refusals: 5,
            full_fd_tables: 1,
            full_mounts: 2,
            filled_mounts: 0,
        };
        assert_eq!(
            after.since(&before),
            Traces {
                net_refusals: 3,
                full_fd_tables: 0,
                full_mounts: 2,
                filled_mounts: 1,
            }
        );
        // Processes gone since: no negative change.
        assert_eq!(Traces::default().since(&after).full_fd_tables, 0);
    }
}
