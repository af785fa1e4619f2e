//! CPU bandwidth (the `cpu` controller) and CPU time used (`cpuacct` on v1,
//! `cpu.stat` on v2). A quota throttles and never kills: the harness's own
//! timers end runaway loops.

use std::path::Path;

use super::fs;
use crate::sandbox::SandboxError;

/// Scheduling period for the quota: 100 ms, the kernel default.
pub(super) const PERIOD_US: u64 = 100_000;
/// The kernel refuses quotas below 1 ms.
const MIN_QUOTA_US: u64 = 1_000;

pub(super) const V1_PERIOD: &str = "cpu.cfs_period_us";
pub(super) const V1_QUOTA: &str = "cpu.cfs_quota_us";
/// Cumulative CPU time in nanoseconds (cpuacct hierarchy).
pub(super) const V1_USAGE: &str = "cpuacct.usage";
/// `nr_throttled` on v1 (cpu hierarchy); also `usage_usec` on v2 and in the
/// hybrid unified tree, where it exists without any controller.
pub(super) const STAT: &str = "cpu.stat";
/// `"<quota|max> <period>"`.
pub(super) const V2_MAX: &str = "cpu.max";
/// Relative weight against sibling groups (v1: 2..=262144, default 1024).
pub(super) const V1_SHARES: &str = "cpu.shares";
/// Relative weight against sibling groups (v2: 1..=10000, default 100).
pub(super) const V2_WEIGHT: &str = "cpu.weight";

/// The highest weights the kernel accepts.
pub(super) const V1_SHARES_MAX: &str = "262144";
pub(super) const V2_WEIGHT_MAX: &str = "10000";

/// A group's quota and weight as they were before [`unleash`]; written back
/// by [`Unleashed::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unleashed {
    v2: bool,
    dir: std::path::PathBuf,
    /// `cpu.cfs_quota_us` (v1) or `cpu.max` (v2) as read.
    quota: String,
    /// `cpu.shares` (v1) or `cpu.weight` (v2) as read; `None` when absent.
    weight: Option<String>,
}

/// Lifts the quota and raises the weight of a group whose processes all
/// have SIGKILL pending: they never run user code again, but each must run
/// through its exit (unmapping its memory, closing its files), and under a
/// spent quota or beside busy siblings that waits for CPU. `None` when the
/// quota cannot be read (nothing is changed then).
pub(super) fn unleash(dir: &Path, v2: bool) -> Option<Unleashed> {
    let (quota_file, weight_file, open_quota, top_weight) = if v2 {
        (V2_MAX, V2_WEIGHT, format!("max {PERIOD_US}"), V2_WEIGHT_MAX)
    } else {
        (V1_QUOTA, V1_SHARES, "-1".to_string(), V1_SHARES_MAX)
    };
    let quota = fs::read(&dir.join(quota_file)).ok()?.trim().to_string();
    let weight = fs::read(&dir.join(weight_file))
        .ok()
        .map(|w| w.trim().to_string());
    let saved = Unleashed {
        v2,
        dir: dir.to_path_buf(),
        quota,
        weight,
    };
    // v1 wants the period kept: only the quota is written there.
    let _ = fs::write(&dir.join(quota_file), &open_quota);
    if saved.weight.is_some() {
        let _ = fs::write(&dir.join(weight_file), top_weight);
    }
    Some(saved)
}

impl Unleashed {
    /// Writes the saved quota and weight back and reads them back: the
    /// group may host the kernel's restart, which must run under the same
    /// limits as before the kill.
    pub(super) fn restore(&self) -> Result<(), SandboxError> {
        let (quota_file, weight_file) = if self.v2 {
            (V2_MAX, V2_WEIGHT)
        } else {
            (V1_QUOTA, V1_SHARES)
        };
        fs::write_checked(&self.dir.join(quota_file), &self.quota, &self.quota)?;
        if let Some(weight) = &self.weight {
            fs::write_checked(&self.dir.join(weight_file), weight, weight)?;
        }
        Ok(())
    }
}

/// Quota per period for `cpus` cores; `None` (no limit) for 0, negative or
/// non-finite values.
pub(super) fn quota_us(cpus: f64) -> Option<u64> {
    if !(cpus.is_finite() && cpus > 0.0) {
        return None;
    }
    Some(((cpus * PERIOD_US as f64).round() as u64).max(MIN_QUOTA_US))
}

pub(super) fn apply_v1(dir: &Path, cpus: f64) -> Result<(), SandboxError> {
    let period = PERIOD_US.to_string();
    fs::write_checked(&dir.join(V1_PERIOD), &period, &period)?;
    let quota = quota_us(cpus).map_or_else(|| "-1".to_string(), |q| q.to_string());
    fs::write_checked(&dir.join(V1_QUOTA), &quota, &quota)
}

pub(super) fn apply_v2(dir: &Path, cpus: f64) -> Result<(), SandboxError> {
    let value = match quota_us(cpus) {
        Some(q) => format!("{q} {PERIOD_US}"),
        None => format!("max {PERIOD_US}"),
    };
    fs::write_checked(&dir.join(V2_MAX), &value, &value)
}

fn cores(quota: Option<u64>, period: u64) -> f64 {
    match quota {
        Some(q) if period > 0 => q as f64 / period as f64,
        _ => 0.0,
    }
}

/// The quota in cores; 0.0 when unlimited.
pub(super) fn cpus_v1(dir: &Path) -> f64 {
    let quota = fs::read(&dir.join(V1_QUOTA)).unwrap_or_default();
    let quota = quota.trim().parse::<i64>().ok().filter(|q| *q > 0);
    let period = fs::read_u64(&dir.join(V1_PERIOD)).unwrap_or(0);
    cores(quota.map(|q| q as u64), period)
}

pub(super) fn cpus_v2(dir: &Path) -> f64 {
    let text = fs::read(&dir.join(V2_MAX)).unwrap_or_default();
    let mut it = text.split_whitespace();
    let quota = it.next().and_then(|q| q.parse().ok());
    let period = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    cores(quota, period)
}

/// v1 CPU time in microseconds, from the cpuacct hierarchy.
pub(super) fn usage_usec_v1(cpuacct_dir: &Path) -> u64 {
    fs::read_u64(&cpuacct_dir.join(V1_USAGE)).unwrap_or(0) / 1_000
}

/// v2 (or hybrid unified) CPU time; `None` when `cpu.stat` is absent.
pub(super) fn usage_usec_v2(dir: &Path) -> Option<u64> {
    fs::keyed(&fs::read(&dir.join(STAT)).ok()?, "usage_usec")
}

pub(super) fn nr_throttled(cpu_dir: &Path) -> u64 {
    fs::read_keyed(&cpu_dir.join(STAT), "nr_throttled")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(name)).unwrap()
    }

    #[test]
    fn quota_from_cores() {
        assert_eq!(quota_us(0.5), Some(50_000));
        assert_eq!(quota_us(2.0), Some(200_000));
        assert_eq!(quota_us(0.001), Some(1_000));
        assert_eq!(quota_us(0.0), None);
        assert_eq!(quota_us(f64::NAN), None);
    }

    #[test]
    fn v1_writes_period_and_quota() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V1_PERIOD), "100000\n").unwrap();
        std::fs::write(d.path().join(V1_QUOTA), "-1\n").unwrap();
        assert_eq!(cpus_v1(d.path()), 0.0);
        apply_v1(d.path(), 0.5).unwrap();
        assert_eq!(content(d.path(), V1_PERIOD), "100000");
        assert_eq!(content(d.path(), V1_QUOTA), "50000");
        assert_eq!(cpus_v1(d.path()), 0.5);
    }

    #[test]
    fn v2_writes_cpu_max() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V2_MAX), "max 100000\n").unwrap();
        assert_eq!(cpus_v2(d.path()), 0.0);
        apply_v2(d.path(), 0.5).unwrap();
        assert_eq!(content(d.path(), V2_MAX), "50000 100000");
        assert_eq!(cpus_v2(d.path()), 0.5);
        apply_v2(d.path(), 0.0).unwrap();
        assert_eq!(content(d.path(), V2_MAX), "max 100000");
    }

    #[test]
    fn unleash_lifts_quota_and_weight_and_restore_puts_them_back() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V1_PERIOD), "100000\n").unwrap();
        std::fs::write(d.path().join(V1_QUOTA), "50000\n").unwrap();
        std::fs::write(d.path().join(V1_SHARES), "1024\n").unwrap();
        let saved = unleash(d.path(), false).unwrap();
        assert_eq!(content(d.path(), V1_QUOTA), "-1");
        assert_eq!(content(d.path(), V1_SHARES), V1_SHARES_MAX);
        assert_eq!(content(d.path(), V1_PERIOD), "100000\n");
        saved.restore().unwrap();
        assert_eq!(content(d.path(), V1_QUOTA), "50000");
        assert_eq!(content(d.path(), V1_SHARES), "1024");
        assert_eq!(cpus_v1(d.path()), 0.5);

        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V2_MAX), "50000 100000\n").unwrap();
        std::fs::write(d.path().join(V2_WEIGHT), "100\n").unwrap();
        let saved = unleash(d.path(), true).unwrap();
        assert_eq!(content(d.path(), V2_MAX), "max 100000");
        assert_eq!(content(d.path(), V2_WEIGHT), V2_WEIGHT_MAX);
        saved.restore().unwrap();
        assert_eq!(content(d.path(), V2_MAX), "50000 100000");
        assert_eq!(content(d.path(), V2_WEIGHT), "100");
        assert_eq!(cpus_v2(d.path()), 0.5);
    }

    #[test]
    fn unleash_without_weight_file_restores_the_quota_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V2_MAX), "25000 100000\n").unwrap();
        let saved = unleash(d.path(), true).unwrap();
        assert_eq!(content(d.path(), V2_MAX), "max 100000");
        assert!(!d.path().join(V2_WEIGHT).exists());
        saved.restore().unwrap();
        assert_eq!(content(d.path(), V2_MAX), "25000 100000");
        // No quota file: nothing to lift, nothing changed.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(unleash(empty.path(), false), None);
    }

    #[test]
    fn usage_and_throttling() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(usage_usec_v1(d.path()), 0);
        assert_eq!(usage_usec_v2(d.path()), None);
        assert_eq!(nr_throttled(d.path()), 0);
        std::fs::write(d.path().join(V1_USAGE), "1234567890\n").unwrap();
        std::fs::write(
            d.path().join(STAT),
            "usage_usec 52000\nuser_usec 50000\nsystem_usec 2000\n\
             nr_periods 12\nnr_throttled 7\nthrottled_usec 300000\n",
        )
        .unwrap();
        assert_eq!(usage_usec_v1(d.path()), 1_234_567);
        assert_eq!(usage_usec_v2(d.path()), Some(52_000));
        assert_eq!(nr_throttled(d.path()), 7);
    }
}
