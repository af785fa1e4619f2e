//! One cgroup per kernel, on cgroup v1, v1 hybrid and v2 hosts.
//!
//! Plain reads and writes of cgroupfs files, one file per controller and
//! version (`v1/`, `v2/`), behind one `Version` trait (`version.rs`). The
//! layer is our own rather than the `cgroups-rs` crate, which moves live
//! tasks to the root cgroup when it destroys a group, swallows errors of
//! memory-limit writes, hard-codes the mount point `/sys/fs/cgroup` (so it
//! cannot be tested on fixture trees) and has no `cgroup.kill` on hybrid
//! hosts (reference §1.11).
//!
//! Layout: in every hierarchy `<mount>/retrace/<harness pid>/<kernel id>`.
//! The per-harness directory lets a later harness find and reclaim what a
//! crashed one left. On v2 without the root cgroup, `retrace/` lives in the
//! cgroup delegated to us and the harness moves itself into a `harness` leaf.
//!
//! Every limit is read back after writing, processes are never migrated out
//! of a group (a group is emptied by killing), and counters are cumulative:
//! callers classify on deltas ([`Counters::since`]).
//!
//! [`Counters::since`]: crate::sandbox::Counters::since

mod boost;
mod detect;
mod error;
mod group;
mod host;
mod kill;
mod layout;
mod limits;
mod mode;
mod probe;
mod reclaim;
mod version;

// The files: shared ones here, each version's in its own folder.
mod cpu;
mod fs;
mod mountinfo;
mod pids;
mod unified;
mod v1;
mod v2;

#[cfg(test)]
mod tests;

pub use detect::host_has_swap;
pub use error::CgroupError;
pub use group::KernelCgroup;
pub use host::CgroupHost;
pub use kill::KillMethod;
pub use limits::CgroupLimits;
pub use mode::CgroupMode;

/// Mount points of every cgroup and cgroup2 filesystem in a mountinfo text,
/// in mount order, each once: where a leak check looks for groups.
pub fn mount_points(mountinfo: &str) -> Vec<std::path::PathBuf> {
    let mut points = Vec::new();
    for mount in mountinfo::parse_mountinfo(mountinfo) {
        if !points.contains(&mount.point) {
            points.push(mount.point);
        }
    }
    points
}
pub use probe::Probe;
pub use reclaim::{harness_alive, made_at};
