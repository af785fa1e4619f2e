//! The cgroup counters of a kernel and their per-execution change.

use serde::{Deserialize, Serialize};

/// Cumulative counters of a kernel's confinement. Zero when unconfined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub oom_kills: u64,
    /// Times the memory use reached the limit (v1 `memory.failcnt`, v2
    /// `memory.events` `max`).
    #[serde(default)]
    pub memory_limit_hits: u64,
    pub pids_max_events: u64,
    pub cpu_usage_usec: u64,
    pub nr_throttled: u64,
    /// Highest memory use of the group so far (page cache included): a
    /// level, not a count. `None` when unconfined or not reported (cgroup
    /// v2 before Linux 5.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
}

impl Counters {
    /// Per-execution change; counters are sticky for a cgroup's lifetime.
    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            oom_kills: self.oom_kills.saturating_sub(before.oom_kills),
            memory_limit_hits: self
                .memory_limit_hits
                .saturating_sub(before.memory_limit_hits),
            pids_max_events: self.pids_max_events.saturating_sub(before.pids_max_events),
            cpu_usage_usec: self.cpu_usage_usec.saturating_sub(before.cpu_usage_usec),
            nr_throttled: self.nr_throttled.saturating_sub(before.nr_throttled),
            // A peak cannot be split per execution: the later reading stands.
            memory_peak_bytes: self.memory_peak_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_deltas() {
        let before = Counters {
            oom_kills: 2,
            cpu_usage_usec: 100,
            ..Default::default()
        };
        let after = Counters {
            oom_kills: 3,
            cpu_usage_usec: 250,
            ..Default::default()
        };
        let d = after.since(&before);
        assert_eq!((d.oom_kills, d.cpu_usage_usec), (1, 150));
    }

    #[test]
    fn memory_peak_keeps_the_later_reading() {
        let before = Counters {
            memory_peak_bytes: Some(300),
            ..Default::default()
        };
        let after = Counters {
            memory_peak_bytes: Some(500),
            ..Default::default()
        };
        assert_eq!(after.since(&before).memory_peak_bytes, Some(500));
        let unknown = Counters::default();
        assert_eq!(unknown.since(&before).memory_peak_bytes, None);
    }
}
