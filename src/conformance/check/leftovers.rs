//! What a kernel may leave after its shutdown: processes (by command
//! line, cgroup membership and PID namespace) and cgroup directories.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use walkdir::WalkDir;

use crate::conformance::expectation::shorten;
use crate::kernel::{AnyKernel, Executor};

/// How long leftovers (processes, cgroup directories) may take to vanish
/// after `shutdown()` returns.
const LEFTOVER_WAIT: Duration = Duration::from_secs(3);

/// PID namespaces the kernel's processes live in (other than ours), so a
/// child that changed its command line and left the cgroup is still found.
#[derive(Debug, Default)]
pub(super) struct PidNamespaces(HashSet<String>);

impl PidNamespaces {
    pub(super) fn record(&mut self, kernel: &AnyKernel) {
        let Some(kernel) = kernel.as_local() else {
            return;
        };
        let own = pid_namespace(std::process::id() as i32);
        let mut pids = kernel.live_processes();
        pids.push(kernel.pid());
        for pid in pids {
            if let Some(ns) = pid_namespace(pid) {
                if Some(&ns) != own.as_ref() {
                    self.0.insert(ns);
                }
            }
        }
    }
}

fn pid_namespace(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Waits up to [`LEFTOVER_WAIT`] for every trace of kernel `id` to vanish
/// (on a gateway: for the gateway to no longer list it); returns what is
/// still there.
pub(super) async fn leftovers(
    executor: &Executor,
    id: &str,
    namespaces: &PidNamespaces,
) -> Vec<String> {
    match executor {
        Executor::Local(_) => local_leftovers(id, namespaces).await,
        Executor::Gateway(gateway) => match gateway.has_kernel(id).await {
            Ok(false) => Vec::new(),
            Ok(true) => vec![format!(
                "the gateway still has kernel {id} after its shutdown"
            )],
            Err(e) => vec![format!("could not ask the gateway about kernel {id}: {e}")],
        },
    }
}

async fn local_leftovers(id: &str, namespaces: &PidNamespaces) -> Vec<String> {
    let deadline = Instant::now() + LEFTOVER_WAIT;
    loop {
        let procs = processes_of(id, namespaces);
        let dirs = cgroup_dirs_named(id);
        if (procs.is_empty() && dirs.is_empty()) || Instant::now() >= deadline {
            let mut reasons = Vec::new();
            if !procs.is_empty() {
                reasons.push(format!(
                    "{} process(es) of kernel {id} still alive {:.0} s after shutdown: {}",
                    procs.len(),
                    LEFTOVER_WAIT.as_secs_f64(),
                    procs.join("; ")
                ));
            }
            if !dirs.is_empty() {
                let dirs: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
                reasons.push(format!(
                    "cgroup directories of kernel {id} remain: {}",
                    dirs.join(", ")
                ));
            }
            return reasons;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Live (non-zombie) processes whose command line mentions `id`, whose
/// cgroup path contains it, or that live in one of `namespaces`.
fn processes_of(id: &str, namespaces: &PidNamespaces) -> Vec<String> {
    let own = std::process::id() as i32;
    let group = format!("/{id}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Some(stat) = crate::util::proc::stat(pid) else {
            continue;
        };
        if stat.state == 'Z' {
            continue;
        }
        let dir = entry.path();
        let cmdline = std::fs::read(dir.join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
        let why = if cmdline.contains(id) {
            "command line"
        } else if cgroup.lines().any(|l| in_group(l, &group)) {
            "cgroup"
        } else if pid_namespace(pid).is_some_and(|ns| namespaces.0.contains(&ns))
            // Namespace inode numbers are reused: a process in another
            // kernel's group belongs to that kernel, not to this one.
            && !cgroup.contains("/retrace/")
        {
            "pid namespace"
        } else {
            continue;
        };
        found.push(format!(
            "pid {pid} ({why}) {}",
            shorten(cmdline.trim(), 100)
        ));
    }
    found
}

/// Whether a `/proc/PID/cgroup` line places the process in `group` (a
/// `/<kernel id>` path component) or below it.
fn in_group(line: &str, group: &str) -> bool {
    let path = line.splitn(3, ':').nth(2).unwrap_or("");
    path.ends_with(group) || path.contains(&format!("{group}/"))
}

/// Every directory named `id` in any mounted cgroup hierarchy: the v1
/// controllers, the v2 tree, and hybrid's (controller-less) `unified` tree.
pub fn cgroup_dirs_named(id: &str) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    dirs_named_below(&crate::sandbox::cgroup::mount_points(&text), id)
}

/// Every directory named `id` below any of `mounts`, sorted.
fn dirs_named_below(mounts: &[PathBuf], id: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for mount in mounts {
        found.extend(find_dirs(mount, id));
    }
    found.sort();
    found.dedup();
    found
}

/// Directories named `name` below `dir`, not looking inside a match. The walk
/// is depth-limited: cgroup trees are shallow, retrace's groups sit at
/// `<mount>/…/retrace/<harness pid>/<kernel id>`.
fn find_dirs(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut walk = WalkDir::new(dir).min_depth(1).max_depth(13).into_iter();
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_dir() && entry.file_name() == name {
            found.push(entry.into_path());
            walk.skip_current_dir();
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_lines_match_whole_components() {
        assert!(in_group("4:memory:/retrace/123/kabc", "/kabc"));
        assert!(in_group("0::/retrace/123/kabc/sub", "/kabc"));
        assert!(!in_group("0::/retrace/123/kabcdef", "/kabc"));
        assert!(!in_group("0::/", "/kabc"));
    }

    #[test]
    fn finds_processes_and_directories_named_after_a_kernel() {
        let id = format!("kself{}", std::process::id());
        // `read` is a shell builtin: the shell forks nothing, so exactly one
        // process carries the id (`sh -c "sleep 30"` forks a child that
        // shows the shell's command line until it execs, and was found twice
        // under load).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read _", &id])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let ns = PidNamespaces::default();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = processes_of(&id, &ns);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("command line"), "{found:?}");
        assert!(
            found[0].contains(&format!("pid {} ", child.id())),
            "{found:?}"
        );
        let left = processes_of(&id, &ns);
        assert!(left.is_empty(), "{left:?}");

        let tree = tempfile::tempdir().unwrap();
        let deep = tree.path().join("retrace/123").join(&id);
        std::fs::create_dir_all(deep.join("child")).unwrap();
        std::fs::create_dir_all(tree.path().join("other/x")).unwrap();
        assert_eq!(find_dirs(tree.path(), &id), vec![deep]);
        assert!(cgroup_dirs_named(&id).is_empty());
    }

    /// The leak search covers every layout: v1 controllers, hybrid's empty
    /// `unified` v2 tree, a pure v2 tree with retrace deep under a
    /// delegated service, and escaped mount points; never a non-cgroup mount.
    #[test]
    fn leak_search_covers_v1_hybrid_unified_and_v2_trees() {
        let id = "kleak";
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path();
        let group = |base: &str| root.join(base).join("retrace/4242").join(id);
        let v1_memory = group("hybrid/memory");
        let v1_pids = group("hybrid/pids");
        let unified = group("hybrid/unified");
        let v2 = group("v2/system.slice/ci.service");
        let spaced = group("my cg");
        let not_cgroup = group("tmpfs");
        for dir in [&v1_memory, &v1_pids, &unified, &v2, &spaced, &not_cgroup] {
            std::fs::create_dir_all(dir.join("child")).unwrap();
        }
        let r = root.display();
        let mountinfo = format!(
            "31 23 0:28 / {r}/hybrid rw,relatime - tmpfs tmpfs rw,mode=755\n\
             35 31 0:32 / {r}/hybrid/memory rw,relatime - cgroup cgroup rw,memory\n\
             39 31 0:36 / {r}/hybrid/pids rw,relatime - cgroup cgroup rw,pids\n\
             41 31 0:38 / {r}/hybrid/unified rw,relatime - cgroup2 cgroup2 rw\n\
             50 24 0:40 / {r}/v2 rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
             51 24 0:41 / {r}/my\\040cg rw - cgroup2 none rw\n\
             52 24 0:42 / {r}/tmpfs rw - tmpfs tmpfs rw\n"
        );
        let mounts = crate::sandbox::cgroup::mount_points(&mountinfo);
        assert_eq!(mounts.len(), 5, "{mounts:?}");
        assert!(mounts.contains(&root.join("hybrid/unified")), "{mounts:?}");
        assert!(mounts.contains(&root.join("my cg")), "{mounts:?}");
        let mut want = vec![v1_memory, v1_pids, unified, v2, spaced];
        want.sort();
        assert_eq!(dirs_named_below(&mounts, id), want);
    }
}
