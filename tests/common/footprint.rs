//! What a fixture has on the machine (network namespaces, interfaces,
//! processes, directories), recorded while it runs so that a test can
//! check, after it is dropped, that none of it is left.

use std::path::{Path, PathBuf};

use super::hosts::netns_path;

/// What a fixture has on the machine, to check after it is gone that none
/// of it is left.
#[derive(Debug, Default, Clone)]
pub struct Footprint {
    pub netns: Vec<String>,
    /// Network interfaces in the root namespace.
    pub links: Vec<String>,
    pub processes: Vec<Process>,
    pub dirs: Vec<PathBuf>,
}

/// A process as seen once: a pid alone could be reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    pub cmdline: Vec<u8>,
}

impl Process {
    /// `pid` with its command line, if it is alive now.
    pub fn of(pid: i32) -> Option<Process> {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let alive =
            retrace::util::proc::stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X');
        alive.then_some(Process { pid, cmdline })
    }

    /// Whether this same process still runs (alive, same command line).
    pub fn alive(&self) -> bool {
        Process::of(self.pid).is_some_and(|now| now.cmdline == self.cmdline)
    }
}

impl Footprint {
    /// What of it is still on the machine, one line each.
    pub fn remaining(&self) -> Vec<String> {
        let mut left = Vec::new();
        for netns in &self.netns {
            if Path::new(&netns_path(netns)).exists() {
                left.push(format!("network namespace {netns}"));
            }
        }
        for link in &self.links {
            if Path::new("/sys/class/net").join(link).exists() {
                left.push(format!("network interface {link}"));
            }
        }
        for process in self.processes.iter().filter(|p| p.alive()) {
            let cmdline = String::from_utf8_lossy(&process.cmdline).replace('\0', " ");
            left.push(format!("process {} ({})", process.pid, cmdline.trim()));
        }
        for dir in self.dirs.iter().filter(|d| d.exists()) {
            left.push(format!("directory {}", dir.display()));
        }
        left
    }
}
