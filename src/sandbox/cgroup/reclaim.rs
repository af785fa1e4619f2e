//! Reclaiming what crashed harnesses left: their `<pid>` directories and
//! the kernel groups in them.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::{fs, CgroupHost, KernelCgroup};

impl CgroupHost {
    /// Kills and removes the groups of harnesses that are gone: `<pid>`
    /// directories whose process is dead, a zombie, or (pid reused) not a
    /// retrace process. Returns the removed groups' paths. Touches nothing
    /// outside retrace's subtree, nor directories not named by a pid.
    pub fn reclaim_stale(&self) -> Vec<PathBuf> {
        let own = std::process::id();
        let mut names: Vec<String> = Vec::new();
        for dir in self.subtree.unique() {
            for name in fs::child_names(dir) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        let mut reclaimed = Vec::new();
        for name in names {
            let Ok(pid) = name.parse::<u32>() else {
                continue;
            };
            // A crash may leave only some hierarchies; any one dates the dir.
            let dirs = self.subtree.join(&name);
            let made = dirs.unique().into_iter().find_map(made_at);
            if pid == own || harness_alive(pid, made) {
                continue;
            }
            let mut ids: Vec<String> = Vec::new();
            for dir in dirs.unique() {
                for id in fs::child_names(dir) {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
            for id in ids {
                let group = KernelCgroup {
                    mode: self.mode,
                    dirs: dirs.join(&id),
                    fs: self.fs().clone(),
                    owner: None,
                    removed: AtomicBool::new(false),
                };
                if group.remove().is_ok() {
                    reclaimed.push(group.path());
                }
            }
            let deadline = Instant::now() + Duration::from_millis(100);
            for dir in dirs.unique() {
                let _ = self.fs().rmdir_retry(dir, deadline);
            }
        }
        reclaimed
    }
}

/// Seconds since the epoch of a path's last modification: when a harness
/// made it, for [`harness_alive`] (a cgroupfs directory keeps its creation
/// time; child groups do not change it).
pub fn made_at(path: &Path) -> Option<f64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

/// Start of a process, in seconds since the epoch (to about 1 s: `btime`
/// is whole seconds).
fn process_start(starttime_ticks: u64) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime = fs::keyed(&stat, "btime")?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0)?;
    Some(btime as f64 + starttime_ticks as f64 / hz as f64)
}

/// Whether the harness that made a `<pid>` directory (last modified at
/// `made`) still runs. A live process that started before the directory
/// existed must be its maker (a pid is never shared by two live
/// processes); a later one holds a reused pid unless it is retrace itself.
pub fn harness_alive(pid: u32, made: Option<f64>) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The command name may contain spaces and ')': fields follow the last ')'.
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    if matches!(fields.first(), None | Some(&"Z") | Some(&"X")) {
        return false;
    }
    // Field 22 of stat, starttime, is the 20th after the command name.
    let started = fields
        .get(19)
        .and_then(|t| t.parse().ok())
        .and_then(process_start);
    if let (Some(started), Some(made)) = (started, made) {
        // One second of slack for btime's rounding.
        if started <= made + 1.0 {
            return true;
        }
    }
    is_retrace(pid)
}

/// Same executable name as ours, or a command name mentioning retrace.
pub(super) fn is_retrace(pid: u32) -> bool {
    let name = |p: PathBuf| {
        p.file_name().map(|n| {
            n.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string()
        })
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(name);
    let own = std::fs::read_link("/proc/self/exe").ok().and_then(name);
    if exe.is_some() && exe == own {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.contains("retrace"))
}
