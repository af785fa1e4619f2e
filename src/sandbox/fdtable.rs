//! The size of a process's file descriptor table (`FDSize` in
//! `/proc/<pid>/status`). The table grows in powers of two and never
//! shrinks, so it reaches RLIMIT_NOFILE only once more than half of the
//! limit was in use: with the table at the limit, an EMFILE is plausible,
//! without it impossible.

use std::path::Path;

/// `FDSize` of `pid`; `None` when the process is gone.
pub fn size(pid: i32) -> Option<u64> {
    let status =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status")).ok()?;
    parse(&status)
}

fn parse(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fdsize() {
        let status = "Name:\tpython\nUmask:\t0022\nFDSize:\t1024\nGroups:\t\n";
        assert_eq!(parse(status), Some(1024));
        assert_eq!(parse("Name:\tx\n"), None);
        assert!(size(std::process::id() as i32).is_some_and(|n| n >= 64));
    }
}
