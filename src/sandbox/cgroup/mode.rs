//! How the host mounts cgroups, and the implementation each layout gets.

use super::v1::V1;
use super::v2::V2;
use super::version::Version;

/// How the host mounts cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display)]
pub enum CgroupMode {
    /// v1 controller hierarchies only.
    #[strum(to_string = "cgroup-v1")]
    V1,
    /// v1 controllers plus an (empty) cgroup2 tree at `/sys/fs/cgroup/unified`.
    #[strum(to_string = "cgroup-v1-hybrid")]
    Hybrid,
    /// The unified hierarchy at `/sys/fs/cgroup`.
    #[strum(to_string = "cgroup-v2")]
    V2,
}

impl CgroupMode {
    /// The one place the layer branches on the version.
    pub(super) fn version(self) -> &'static dyn Version {
        match self {
            CgroupMode::V1 => &V1 { hybrid: false },
            CgroupMode::Hybrid => &V1 { hybrid: true },
            CgroupMode::V2 => &V2,
        }
    }
}
