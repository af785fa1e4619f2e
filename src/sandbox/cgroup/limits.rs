//! The limits of one kernel's group.

/// Limits of one kernel's group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgroupLimits {
    /// Hard memory limit (page cache and tmpfs included); no swap on top.
    /// Rounded down to whole pages.
    pub memory_bytes: u64,
    /// Processes plus threads.
    pub pids: u64,
    /// CPU quota in cores per 100 ms period; 0 means no quota.
    pub cpus: f64,
}
