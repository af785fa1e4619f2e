//! v2 CPU bandwidth: `cpu.max` and `cpu.weight`.

use std::path::Path;

use crate::sandbox::cgroup::cpu::{self, Files, PERIOD_US};
use crate::sandbox::cgroup::{fs, CgroupError};

/// `"<quota|max> <period>"`.
pub(crate) const MAX: &str = "cpu.max";
/// Relative weight against sibling groups (1..=10000, default 100).
pub(crate) const WEIGHT: &str = "cpu.weight";

pub(crate) static FILES: Files = Files {
    quota: MAX,
    // "max" with the period of `cpu::PERIOD_US` (a test checks the two agree).
    open_quota: "max 100000",
    weight: WEIGHT,
    top_weight: "10000",
    default_weight: "100",
};

pub(crate) fn apply(dir: &Path, cpus: f64) -> Result<(), CgroupError> {
    let value = match cpu::quota_us(cpus) {
        Some(q) => format!("{q} {PERIOD_US}"),
        None => format!("max {PERIOD_US}"),
    };
    fs::write_checked(&dir.join(MAX), &value, &value)
}

/// The quota in cores; 0.0 when unlimited.
pub(crate) fn cpus(dir: &Path) -> f64 {
    let text = fs::read(&dir.join(MAX)).unwrap_or_default();
    let mut it = text.split_whitespace();
    let quota = it.next().and_then(|q| q.parse().ok());
    let period = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    cpu::cores(quota, period)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::cgroup::fs::testing::content;

    #[test]
    fn writes_cpu_max() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(MAX), "max 100000\n").unwrap();
        assert_eq!(cpus(d.path()), 0.0);
        apply(d.path(), 0.5).unwrap();
        assert_eq!(content(d.path(), MAX), "50000 100000");
        assert_eq!(cpus(d.path()), 0.5);
        apply(d.path(), 0.0).unwrap();
        assert_eq!(content(d.path(), MAX), "max 100000");
    }
}
