//! The harness process as seen from outside: a case must not change it.

/// What the harness process looks like from the outside; a case must not
/// change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessState {
    pub oom_score_adj: String,
    pub cgroup: String,
}

impl HarnessState {
    pub fn now() -> HarnessState {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| format!("<unreadable: {e}>"))
        };
        HarnessState {
            oom_score_adj: read("/proc/self/oom_score_adj"),
            cgroup: read("/proc/self/cgroup"),
        }
    }
}
