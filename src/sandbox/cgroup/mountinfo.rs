//! Where the cgroup hierarchies are mounted (`/proc/self/mountinfo`) and
//! which cgroup this process is in (`/proc/self/cgroup`).

use std::path::PathBuf;

/// One cgroup or cgroup2 mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CgroupMount {
    pub point: PathBuf,
    /// The hierarchy path mounted there: "/" unless a container bind-mounts
    /// a sub-tree; `/proc/self/cgroup` paths are relative to the hierarchy.
    pub root: String,
    /// `true` for cgroup2.
    pub v2: bool,
    /// v1 super options, which name the bound controllers (`cpu`,
    /// `cpuacct`, `memory`, `name=systemd`, ...).
    pub options: Vec<String>,
}

impl CgroupMount {
    pub fn has_controller(&self, name: &str) -> bool {
        !self.v2 && self.options.iter().any(|o| o == name)
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        if let Some(d) = octal {
            let v = d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup and cgroup2 mounts in a mountinfo text, in mount order.
/// Line: `id parent maj:min root point opts [optional...] - fstype source superopts`.
pub(super) fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let _source = right.next()?;
            let superopts = right.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(CgroupMount {
                root: unescape(left.get(3)?),
                point: PathBuf::from(unescape(left.get(4)?)),
                v2,
                options: superopts.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// This process's cgroups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ProcCgroup {
    /// The `0::<path>` line (v2 and hybrid).
    pub unified: Option<String>,
    /// v1 lines: bound controllers and path.
    pub v1: Vec<(Vec<String>, String)>,
}

/// Lines are `hierarchy-id:controllers:path`; the path may contain ':'.
pub(super) fn parse_proc_cgroup(text: &str) -> ProcCgroup {
    let mut out = ProcCgroup::default();
    for line in text.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            out.unified = Some(path.to_string());
        } else {
            let names = controllers.split(',').map(str::to_string).collect();
            out.v1.push((names, path.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's layout: separate cpu and cpuacct, plus unified.
    const HYBRID: &str = "\
23 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn parses_hybrid_with_separate_cpu_and_cpuacct() {
        let m = parse_mountinfo(HYBRID);
        assert_eq!(m.len(), 8);
        assert!(m[0].has_controller("cpu") && !m[0].has_controller("cpuacct"));
        assert_eq!(m[1].point, PathBuf::from("/sys/fs/cgroup/cpuacct"));
        assert!(m[1].has_controller("cpuacct"));
        let unified = m.iter().find(|m| m.v2).unwrap();
        assert_eq!(unified.point, PathBuf::from("/sys/fs/cgroup/unified"));
        assert!(!unified.has_controller("memory"));
        assert!(!m[6].has_controller("systemd"));
    }

    #[test]
    fn parses_combined_cpu_cpuacct_with_optional_fields() {
        let text = "\
26 25 0:23 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:8 - cgroup cgroup rw,cpu,cpuacct
27 25 0:24 /docker/abc /sys/fs/cgroup/memory rw,nosuid shared:9 master:2 - cgroup cgroup rw,memory
";
        let m = parse_mountinfo(text);
        assert_eq!(m[0].point, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
        assert!(m[0].has_controller("cpu") && m[0].has_controller("cpuacct"));
        assert_eq!(m[1].root, "/docker/abc");
        assert!(m[1].has_controller("memory"));
    }

    #[test]
    fn parses_v2_and_escapes() {
        let text = "\
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
99 24 0:31 / /mnt/my\\040cg rw - cgroup2 none rw
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert!(m[0].v2);
        assert_eq!(m[0].point, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(m[1].point, PathBuf::from("/mnt/my cg"));
    }

    #[test]
    fn parses_proc_cgroup() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/ec0a\n2:cpuacct:/\n1:cpu:/\n0::/\n";
        let p = parse_proc_cgroup(hybrid);
        assert_eq!(p.unified.as_deref(), Some("/"));
        assert_eq!(p.v1.len(), 4);
        assert_eq!(
            p.v1[1],
            (vec!["memory".to_string()], "/process_api/ec0a".to_string())
        );
        let v2 = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1:x.scope\n";
        let p = parse_proc_cgroup(v2);
        assert_eq!(
            p.unified.as_deref(),
            Some("/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1:x.scope")
        );
        assert!(p.v1.is_empty());
        let combined = "3:cpu,cpuacct:/a\n";
        assert_eq!(
            parse_proc_cgroup(combined).v1[0].0,
            vec!["cpu".to_string(), "cpuacct".to_string()]
        );
    }
}
