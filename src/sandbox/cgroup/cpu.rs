//! What the CPU files of both versions share: the quota period, quota from
//! cores, `cpu.stat`, and lifting a group's quota and weight while killed
//! processes exit. The spellings are in `v1/cpu.rs` and `v2/cpu.rs`. A
//! quota throttles and never kills: the harness's own timers end runaway
//! loops.

use std::path::{Path, PathBuf};

use super::fs;
use super::CgroupError;

/// Scheduling period for the quota: 100 ms, the kernel default.
pub(super) const PERIOD_US: u64 = 100_000;
/// The kernel refuses quotas below 1 ms.
const MIN_QUOTA_US: u64 = 1_000;

/// `nr_throttled` on v1 (cpu hierarchy); also `usage_usec` on v2 and in the
/// hybrid unified tree, where it exists without any controller.
pub(super) const STAT: &str = "cpu.stat";

/// One version's quota and weight files.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Files {
    pub(super) quota: &'static str,
    /// The quota that lifts every limit (v1 keeps its period file).
    pub(super) open_quota: &'static str,
    /// Relative weight against sibling groups.
    pub(super) weight: &'static str,
    /// The highest weight the kernel accepts.
    pub(super) top_weight: &'static str,
    /// The weight the kernel gives a new group.
    pub(super) default_weight: &'static str,
}

/// A group's quota and weight as they were before [`unleash`]; written back
/// by [`Unleashed::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unleashed {
    files: &'static Files,
    dir: PathBuf,
    /// The quota file as read.
    quota: String,
    /// The weight file as read; `None` when absent.
    weight: Option<String>,
}

/// Lifts the quota and raises the weight of a group whose processes all
/// have SIGKILL pending: they never run user code again, but each must run
/// through its exit (unmapping its memory, closing its files), and under a
/// spent quota or beside busy siblings that waits for CPU. `None` when the
/// quota cannot be read (nothing is changed then).
pub(super) fn unleash(dir: &Path, files: &'static Files) -> Option<Unleashed> {
    let quota = fs::read(&dir.join(files.quota)).ok()?.trim().to_string();
    let weight = fs::read(&dir.join(files.weight))
        .ok()
        .map(|w| w.trim().to_string());
    let saved = Unleashed {
        files,
        dir: dir.to_path_buf(),
        quota,
        weight,
    };
    let _ = fs::write(&dir.join(files.quota), files.open_quota);
    if saved.weight.is_some() {
        let _ = fs::write(&dir.join(files.weight), files.top_weight);
    }
    Some(saved)
}

impl Unleashed {
    /// Writes the saved quota and weight back and reads them back: the
    /// group may host the kernel's restart, which must run under the same
    /// limits as before the kill.
    pub(super) fn restore(&self) -> Result<(), CgroupError> {
        let quota = self.dir.join(self.files.quota);
        fs::write_checked(&quota, &self.quota, &self.quota)?;
        if let Some(weight) = &self.weight {
            fs::write_checked(&self.dir.join(self.files.weight), weight, weight)?;
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

/// A quota in cores; 0.0 when unlimited.
pub(super) fn cores(quota: Option<u64>, period: u64) -> f64 {
    match quota {
        Some(q) if period > 0 => q as f64 / period as f64,
        _ => 0.0,
    }
}

/// CPU time from `cpu.stat` (v2, or hybrid unified); `None` when absent.
pub(super) fn usage_usec(dir: &Path) -> Option<u64> {
    fs::keyed(&fs::read(&dir.join(STAT)).ok()?, "usage_usec")
}

pub(super) fn nr_throttled(cpu_dir: &Path) -> u64 {
    fs::read_keyed(&cpu_dir.join(STAT), "nr_throttled")
}

#[cfg(test)]
mod tests {
    use super::super::fs::testing::content;
    use super::super::{v1, v2};
    use super::*;

    #[test]
    fn quota_from_cores() {
        assert_eq!(quota_us(0.5), Some(50_000));
        assert_eq!(quota_us(2.0), Some(200_000));
        assert_eq!(quota_us(0.001), Some(1_000));
        assert_eq!(quota_us(0.0), None);
        assert_eq!(quota_us(f64::NAN), None);
    }

    #[test]
    fn the_open_v2_quota_keeps_the_period() {
        assert_eq!(v2::cpu::FILES.open_quota, format!("max {PERIOD_US}"));
    }

    #[test]
    fn unleash_lifts_quota_and_weight_and_restore_puts_them_back() {
        use v1::cpu::{FILES as V1, PERIOD as V1_PERIOD};
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V1_PERIOD), "100000\n").unwrap();
        std::fs::write(d.path().join(V1.quota), "50000\n").unwrap();
        std::fs::write(d.path().join(V1.weight), "1024\n").unwrap();
        let saved = unleash(d.path(), &V1).unwrap();
        assert_eq!(content(d.path(), V1.quota), "-1");
        assert_eq!(content(d.path(), V1.weight), V1.top_weight);
        assert_eq!(content(d.path(), V1_PERIOD), "100000\n");
        saved.restore().unwrap();
        assert_eq!(content(d.path(), V1.quota), "50000");
        assert_eq!(content(d.path(), V1.weight), "1024");
        assert_eq!(v1::cpu::cpus(d.path()), 0.5);

        let v2 = &v2::cpu::FILES;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(v2.quota), "50000 100000\n").unwrap();
        std::fs::write(d.path().join(v2.weight), "100\n").unwrap();
        let saved = unleash(d.path(), v2).unwrap();
        assert_eq!(content(d.path(), v2.quota), "max 100000");
        assert_eq!(content(d.path(), v2.weight), v2.top_weight);
        saved.restore().unwrap();
        assert_eq!(content(d.path(), v2.quota), "50000 100000");
        assert_eq!(content(d.path(), v2.weight), "100");
        assert_eq!(super::super::v2::cpu::cpus(d.path()), 0.5);
    }

    #[test]
    fn unleash_without_weight_file_restores_the_quota_only() {
        let v2 = &v2::cpu::FILES;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(v2.quota), "25000 100000\n").unwrap();
        let saved = unleash(d.path(), v2).unwrap();
        assert_eq!(content(d.path(), v2.quota), "max 100000");
        assert!(!d.path().join(v2.weight).exists());
        saved.restore().unwrap();
        assert_eq!(content(d.path(), v2.quota), "25000 100000");
        // No quota file: nothing to lift, nothing changed.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(unleash(empty.path(), &v1::cpu::FILES), None);
    }

    #[test]
    fn usage_and_throttling() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(v1::cpu::usage_usec(d.path()), 0);
        assert_eq!(usage_usec(d.path()), None);
        assert_eq!(nr_throttled(d.path()), 0);
        std::fs::write(d.path().join(v1::cpu::USAGE), "1234567890\n").unwrap();
        std::fs::write(
            d.path().join(STAT),
            "usage_usec 52000\nuser_usec 50000\nsystem_usec 2000\n\
             nr_periods 12\nnr_throttled 7\nthrottled_usec 300000\n",
        )
        .unwrap();
        assert_eq!(v1::cpu::usage_usec(d.path()), 1_234_567);
        assert_eq!(usage_usec(d.path()), Some(52_000));
        assert_eq!(nr_throttled(d.path()), 7);
    }
}
