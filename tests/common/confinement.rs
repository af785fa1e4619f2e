//! A kernel's confinement as the host sees it: its processes, the uid it
//! runs as and its memory cgroup's limit, from /proc and the cgroup
//! filesystem only (never from the kernel).

/// Processes descending from `root` (not `root` itself).
pub fn descendants(root: u32) -> Vec<u32> {
    let parent = |pid: u32| -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse().ok())
    };
    let all: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    let mut found = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for &pid in &all {
            if !found.contains(&pid) && parent(pid).is_some_and(|p| found.contains(&p)) {
                found.push(pid);
                grew = true;
            }
        }
    }
    found.retain(|&p| p != root);
    found
}

/// A kernel process as the host sees it.
#[derive(Debug)]
pub struct Confinement {
    pub pid: u32,
    pub uid: u32,
    /// Its memory cgroup's directory and limit (v1 or v2).
    pub memory_cgroup: std::path::PathBuf,
    pub memory_limit: u64,
}

/// The kernel's python among `launcher`'s descendants, read from the host.
pub fn of_kernel_under(launcher: u32) -> Confinement {
    let pid = descendants(launcher)
        .into_iter()
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("ipykernel"))
        })
        .unwrap_or_else(|| panic!("no kernel process under the launcher {launcher}"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let (memory_cgroup, memory_limit) = cgroups
        .lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let (dir, file) = if controllers.split(',').any(|c| c == "memory") {
                (
                    format!("/sys/fs/cgroup/memory{path}"),
                    "memory.limit_in_bytes",
                )
            } else if controllers.is_empty() {
                (format!("/sys/fs/cgroup{path}"), "memory.max")
            } else {
                return None;
            };
            let dir = std::path::PathBuf::from(dir);
            let limit = std::fs::read_to_string(dir.join(file))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            Some((dir, limit))
        })
        .expect("the kernel's memory cgroup has a limit");
    Confinement {
        pid,
        uid,
        memory_cgroup,
        memory_limit,
    }
}
