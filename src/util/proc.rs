//! Reading /proc: which processes exist, their groups and states.

use std::fs;

/// One line of `/proc/<pid>/stat`, the fields retrace needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// Field 19, when the line goes that far.
    pub nice: Option<i32>,
}

/// Parses `/proc/<pid>/stat`; the command name may contain spaces and ')'.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let pid = line.split_whitespace().next()?.parse().ok()?;
    let rest = &line[line.rfind(')')? + 1..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    let pgrp = it.next()?.parse().ok()?;
    // Fields 6 to 18 (session … priority), then nice.
    let nice = it.nth(13).and_then(|n| n.parse().ok());
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
        nice,
    })
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process visible in /proc.
pub fn all() -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// Live (non-zombie) members of a process group.
pub fn processes_in_group(pgid: i32) -> Vec<i32> {
    all()
        .into_iter()
        .filter(|p| p.pgrp == pgid && p.state != 'Z')
        .map(|p| p.pid)
        .collect()
}

/// The process and all its descendants, found through parent links.
pub fn descendants(root: i32) -> Vec<i32> {
    let procs = all();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(procs.iter().filter(|p| p.ppid == parent).map(|p| p.pid));
        i += 1;
    }
    found.retain(|pid| procs.iter().any(|p| p.pid == *pid));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parens() {
        let s = parse_stat("42 (a b) c)) S 7 42 42 0 -1").unwrap();
        assert_eq!(
            s,
            ProcStat {
                pid: 42,
                state: 'S',
                ppid: 7,
                pgrp: 42,
                nice: None,
            }
        );
        let full = "42 (x) S 7 42 42 0 -1 4194560 1 0 0 0 5 3 0 0 15 -5 3 0";
        assert_eq!(parse_stat(full).unwrap().nice, Some(-5));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn finds_itself() {
        let me = std::process::id() as i32;
        assert_eq!(stat(me).unwrap().pid, me);
        assert!(descendants(me).contains(&me));
    }
}
