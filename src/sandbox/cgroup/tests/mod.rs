//! Host-level tests on fixture trees shaped like cgroupfs (see `fake`),
//! one file per version and per job of the layer.

mod detect;
mod fake;
mod hybrid_host;
mod kill;
mod lifecycle;
mod probe;
mod v1_host;
mod v2_host;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::detect::{find_mounts, CGROUP_ROOT};
use super::fs::{self, Fs, Simulator};
use super::layout::{Dirs, Tree, SUBTREE};
use super::mountinfo::parse_mountinfo;
use super::reclaim::{harness_alive, is_retrace};
use super::{unified, v1, v2, CgroupError, CgroupHost, CgroupLimits, CgroupMode, KillMethod};
use crate::sandbox::{Counters, SandboxError};
use fake::{fixture, FakeKernfs};

pub(super) fn limits() -> CgroupLimits {
    CgroupLimits {
        memory_bytes: 64 << 20,
        pids: 16,
        cpus: 0.5,
    }
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

pub(super) fn write(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
}

pub(super) fn pid_dir() -> String {
    std::process::id().to_string()
}

#[test]
fn mode_names() {
    assert_eq!(CgroupMode::V1.to_string(), "cgroup-v1");
    assert_eq!(CgroupMode::Hybrid.to_string(), "cgroup-v1-hybrid");
    assert_eq!(CgroupMode::V2.to_string(), "cgroup-v2");
    assert_eq!(KillMethod::CgroupKill.to_string(), "cgroup.kill");
    assert_eq!(KillMethod::Freezer.to_string(), "freezer");
}
