//! v1 CPU bandwidth (`cpu` hierarchy) and CPU time used (`cpuacct`).

use std::path::Path;

use crate::sandbox::cgroup::cpu::{self, Files, PERIOD_US};
use crate::sandbox::cgroup::{fs, CgroupError};

pub(crate) const PERIOD: &str = "cpu.cfs_period_us";
pub(crate) const QUOTA: &str = "cpu.cfs_quota_us";
/// Cumulative CPU time in nanoseconds (cpuacct hierarchy).
pub(crate) const USAGE: &str = "cpuacct.usage";
/// Relative weight against sibling groups (2..=262144, default 1024).
pub(crate) const SHARES: &str = "cpu.shares";

pub(crate) static FILES: Files = Files {
    quota: QUOTA,
    // The period is kept: only the quota is written.
    open_quota: "-1",
    weight: SHARES,
    top_weight: "262144",
    default_weight: "1024",
};

pub(crate) fn apply(dir: &Path, cpus: f64) -> Result<(), CgroupError> {
    let period = PERIOD_US.to_string();
    fs::write_checked(&dir.join(PERIOD), &period, &period)?;
    let quota = cpu::quota_us(cpus).map_or_else(|| "-1".to_string(), |q| q.to_string());
    fs::write_checked(&dir.join(QUOTA), &quota, &quota)
}

/// The quota in cores; 0.0 when unlimited.
pub(crate) fn cpus(dir: &Path) -> f64 {
    let quota = fs::read(&dir.join(QUOTA)).unwrap_or_default();
    let quota = quota.trim().parse::<i64>().ok().filter(|q| *q > 0);
    let period = fs::read_u64(&dir.join(PERIOD)).unwrap_or(0);
    cpu::cores(quota.map(|q| q as u64), period)
}

/// CPU time in microseconds, from the cpuacct hierarchy.
pub(crate) fn usage_usec(cpuacct_dir: &Path) -> u64 {
    fs::read_u64(&cpuacct_dir.join(USAGE)).unwrap_or(0) / 1_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::cgroup::fs::testing::content;

    #[test]
    fn writes_period_and_quota() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(PERIOD), "100000\n").unwrap();
        std::fs::write(d.path().join(QUOTA), "-1\n").unwrap();
        assert_eq!(cpus(d.path()), 0.0);
        apply(d.path(), 0.5).unwrap();
        assert_eq!(content(d.path(), PERIOD), "100000");
        assert_eq!(content(d.path(), QUOTA), "50000");
        assert_eq!(cpus(d.path()), 0.5);
    }
}
