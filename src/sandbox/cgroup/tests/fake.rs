//! A fake cgroupfs: a simulator that plays the kernel's part, filling new
//! directories with the interface files of one version and ignoring them
//! on rmdir, and fixture trees with their root cgroups in place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::fs::{Fs, Simulator};
use super::super::{cpu, pids, unified, v1, v2, CgroupHost, CgroupMode};

pub(super) const UNLIMITED_V1: &str = "9223372036854771712\n";

type Files = Vec<(&'static str, &'static str)>;

pub(super) struct FakeKernfs {
    pub(super) root: PathBuf,
    pub(super) mode: CgroupMode,
    pub(super) swap_accounting: bool,
    pub(super) cgroup_kill: bool,
    /// A file that accepts writes and reads back empty (`/dev/null`).
    pub(super) broken: Option<&'static str>,
}

impl FakeKernfs {
    pub(super) fn new(root: &Path, mode: CgroupMode) -> FakeKernfs {
        FakeKernfs {
            root: root.to_path_buf(),
            mode,
            swap_accounting: true,
            cgroup_kill: true,
            broken: None,
        }
    }

    fn files(&self, dir: &Path) -> Files {
        let mut files = vec![(unified::PROCS, "")];
        if self.mode == CgroupMode::V2 {
            files.extend(self.v2_files());
            return files;
        }
        let hierarchy = dir
            .strip_prefix(&self.root)
            .ok()
            .and_then(|r| r.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        match self.v1_files(&hierarchy) {
            Some(more) => files.extend(more),
            None => panic!(
                "fixture has no hierarchy {hierarchy:?} for {}",
                dir.display()
            ),
        }
        files
    }

    fn v2_files(&self) -> Files {
        let mut files = vec![
            (unified::EVENTS, "populated 0\nfrozen 0\n"),
            (v2::freezer::FREEZE, "0\n"),
            (unified::SUBTREE_CONTROL, ""),
            (unified::CONTROLLERS, "cpu io memory pids\n"),
            (v2::memory::MAX, "max\n"),
            (v2::memory::OOM_GROUP, "0\n"),
            (
                v2::memory::EVENTS,
                "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
            ),
            (v2::memory::PEAK, "0\n"),
            (v2::cpu::MAX, "max 100000\n"),
            (v2::cpu::WEIGHT, "100\n"),
            (
                cpu::STAT,
                "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\n",
            ),
        ];
        files.extend(PIDS);
        if self.swap_accounting {
            files.push((v2::memory::SWAP_MAX, "max\n"));
        }
        if self.cgroup_kill {
            files.push((unified::KILL, ""));
        }
        files
    }

    /// The files of one v1 hierarchy (or the hybrid unified tree).
    fn v1_files(&self, hierarchy: &str) -> Option<Files> {
        let mut files = Vec::new();
        match hierarchy {
            "memory" => {
                files.extend([
                    (v1::memory::LIMIT, UNLIMITED_V1),
                    (
                        v1::memory::OOM_CONTROL,
                        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
                    ),
                    (v1::memory::PEAK, "0\n"),
                    (v1::memory::FAILCNT, "0\n"),
                ]);
                if self.swap_accounting {
                    files.push((v1::memory::MEMSW, UNLIMITED_V1));
                }
            }
            "pids" => files.extend(PIDS),
            "cpu" => files.extend(CPU_V1),
            "cpuacct" => files.push(CPUACCT),
            "cpu,cpuacct" => {
                files.extend(CPU_V1);
                files.push(CPUACCT);
            }
            "freezer" => files.push((v1::freezer::STATE, "THAWED\n")),
            "unified" => {
                files.extend([
                    (unified::EVENTS, "populated 0\nfrozen 0\n"),
                    (v2::freezer::FREEZE, "0\n"),
                    (unified::SUBTREE_CONTROL, ""),
                    (unified::CONTROLLERS, ""),
                    (cpu::STAT, "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"),
                ]);
                if self.cgroup_kill {
                    files.push((unified::KILL, ""));
                }
            }
            _ => return None,
        }
        Some(files)
    }
}

const PIDS: [(&str, &str); 2] = [(pids::MAX, "max\n"), (pids::EVENTS, "max 0\n")];

const CPU_V1: [(&str, &str); 4] = [
    (v1::cpu::PERIOD, "100000\n"),
    (v1::cpu::QUOTA, "-1\n"),
    (v1::cpu::SHARES, "1024\n"),
    (
        cpu::STAT,
        "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
    ),
];

const CPUACCT: (&str, &str) = (v1::cpu::USAGE, "0\n");

impl Simulator for FakeKernfs {
    fn populate(&self, dir: &Path) {
        for (name, content) in self.files(dir) {
            let path = dir.join(name);
            if self.broken == Some(name) {
                std::os::unix::fs::symlink("/dev/null", &path).unwrap();
            } else {
                std::fs::write(&path, content).unwrap();
            }
        }
    }

    fn depopulate(&self, dir: &Path) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            if !entry.file_type().unwrap().is_dir() {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
    }
}

/// A fixture tree for `sim.mode` with its root cgroups in place.
pub(super) fn fixture(sim: FakeKernfs) -> CgroupHost {
    let root = sim.root.clone();
    let mode = sim.mode;
    match mode {
        CgroupMode::V2 => {
            std::fs::write(root.join(unified::PROCS), "1\n").unwrap();
            std::fs::write(root.join(unified::SUBTREE_CONTROL), "").unwrap();
            std::fs::write(root.join(unified::CONTROLLERS), "cpu io memory pids\n").unwrap();
        }
        _ => {
            let cpu: &[&str] = if root.join("cpu,cpuacct").exists() {
                &["cpu,cpuacct"]
            } else {
                &["cpu", "cpuacct"]
            };
            let mut names = vec!["memory", "pids", "freezer"];
            names.extend(cpu);
            if mode == CgroupMode::Hybrid {
                names.push("unified");
            }
            for name in names {
                let dir = root.join(name);
                std::fs::create_dir_all(&dir).unwrap();
                sim.populate(&dir);
            }
        }
    }
    let fs = Fs {
        sim: Some(Arc::new(sim)),
    };
    let mut host = CgroupHost::at_on(mode, &root, fs);
    host.host_has_swap = false;
    host
}
