//! The file locks a kernel's processes hold, counted in `/proc/locks`.
//! Each POSIX byte range and each `flock` is a `file_lock` in a slab that no
//! memory cgroup is charged for (measured on Linux 6.18), and Linux enforces
//! no RLIMIT_LOCKS: a cell could pile them up by the million. POSIX locks
//! belong to a live process (closing the file or exiting drops them) and
//! `/proc/locks` shows that process's host pid; a `flock` shows the pid
//! that took it. OFD locks show pid -1 and leases need no pid: the syscall
//! filter denies both (see `seccomp.rs`).

use std::io::BufRead;

/// POSIX and flock locks one kernel's processes may hold (sqlite holds at
/// most a handful per open database).
pub const LOCKS_PER_KERNEL: usize = 4096;

/// Lines of `/proc/locks` read at most: a longer table (every kernel at its
/// bound many times over) counts as over the bound, whoever holds it.
const MAX_LINES: usize = 1 << 20;

/// One read of `/proc/locks` generates as many lines as fit the buffer; a
/// big buffer saves the restarts of its walk over the lock list.
const READ_BUFFER: usize = 1 << 20;

/// What counting the locks of a set of processes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Every line was read: the processes hold this many locks.
    Counted(usize),
    /// More than the bound (counting stopped past it).
    Over(usize),
    /// The table is longer than [`MAX_LINES`]: taken as over the bound.
    TableTooLong,
}

impl Held {
    pub fn is_over(self) -> bool {
        !matches!(self, Held::Counted(_))
    }
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Counted(n) => write!(f, "{n} locks"),
            Held::Over(n) => write!(f, "more than {} locks ({n} counted)", n - 1),
            Held::TableTooLong => write!(f, "/proc/locks longer than {MAX_LINES} lines"),
        }
    }
}

/// `/proc/locks`, opened once and read again from its start for each
/// count, with one buffer for all of them (a watchdog counts every 50 ms).
pub struct LockTable {
    /// `None` on a host without `/proc/locks`: no file locking at all.
    table: Option<std::io::BufReader<std::fs::File>>,
}

impl LockTable {
    pub fn open() -> LockTable {
        let table = match std::fs::File::open("/proc/locks") {
            Ok(file) => Some(std::io::BufReader::with_capacity(READ_BUFFER, file)),
            Err(e) => {
                tracing::debug!(error = %e, "/proc/locks cannot be read; no locks counted");
                None
            }
        };
        LockTable { table }
    }

    /// The locks `pids` (host pids) hold, counted up to one past `bound`.
    pub fn held(&mut self, pids: &[i32], bound: usize) -> Held {
        use std::io::Seek;
        let Some(table) = self.table.as_mut() else {
            return Held::Counted(0);
        };
        // Rewinding drops what is buffered and keeps the buffer.
        if table.rewind().is_err() {
            return Held::Counted(0);
        }
        tally(table, pids, bound, MAX_LINES)
    }
}

fn tally(mut table: impl BufRead, pids: &[i32], bound: usize, max_lines: usize) -> Held {
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    let mut line = Vec::with_capacity(128);
    let mut held = 0;
    for _ in 0..max_lines {
        line.clear();
        match table.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return Held::Counted(held),
            Ok(_) => {}
        }
        let owner = std::str::from_utf8(&line).ok().and_then(pid_of);
        if owner.is_some_and(|pid| pids.binary_search(&pid).is_ok()) {
            held += 1;
            if held > bound {
                return Held::Over(held);
            }
        }
    }
    // A line past the last one read is a table longer than the budget.
    match table.fill_buf() {
        Ok(rest) if !rest.is_empty() => Held::TableTooLong,
        _ => Held::Counted(held),
    }
}

/// The pid of one line: `1: POSIX  ADVISORY  WRITE 1234 00:2f:17 0 0`,
/// `2: -> FLOCK  ADVISORY  WRITE 99 ...` (a waiter), `3: OFDLCK ADVISORY
/// READ  -1 ...`, `4: LEASE  ACTIVE    READ  77 ...`: the first number after
/// the line's id (no word of the type columns is one).
fn pid_of(line: &str) -> Option<i32> {
    line.split_ascii_whitespace()
        .skip(1)
        .find_map(|t| t.parse::<i32>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
1: POSIX  ADVISORY  WRITE 4242 00:2f:17 0 0
1: -> POSIX  ADVISORY  WRITE 4243 00:2f:17 0 0
2: FLOCK  ADVISORY  WRITE 4243 00:30:5 0 EOF
3: OFDLCK ADVISORY  READ  -1 00:2f:18 0 EOF
4: LEASE  ACTIVE    READ  4242 00:2f:19 0 EOF
5: POSIX  *NOINODE* WRITE 4242 <none>:0 0 EOF
6: POSIX  ADVISORY  READ  77 08:01:1234 128 128
7: UNKNOWN UNKNOWN  UNLCK 4242 00:2f:20 0 EOF
";

    fn count(table: &str, pids: &[i32], bound: usize) -> Held {
        tally(table.as_bytes(), pids, bound, MAX_LINES)
    }

    #[test]
    fn reads_the_pid_of_every_kind_of_line() {
        let pids: Vec<Option<i32>> = TABLE.lines().map(pid_of).collect();
        assert_eq!(pids, [4242, 4243, 4243, -1, 4242, 4242, 77, 4242].map(Some));
        assert_eq!(pid_of("garbage"), None);
        assert_eq!(pid_of(""), None);
    }

    #[test]
    fn counts_only_the_given_processes() {
        assert_eq!(count(TABLE, &[4242], 100), Held::Counted(4));
        assert_eq!(count(TABLE, &[4243, 4242], 100), Held::Counted(6));
        assert_eq!(count(TABLE, &[77], 100), Held::Counted(1));
        assert_eq!(count(TABLE, &[], 100), Held::Counted(0));
        // An OFD lock's -1 is nobody's, not a pid to match.
        assert_eq!(count(TABLE, &[1], 100), Held::Counted(0));
    }

    #[test]
    fn stops_one_past_the_bound() {
        assert_eq!(count(TABLE, &[4242, 4243], 5), Held::Over(6));
        assert_eq!(count(TABLE, &[4242, 4243], 6), Held::Counted(6));
        assert!(count(TABLE, &[4242], 3).is_over());
        assert!(!count(TABLE, &[4242], 4).is_over());
    }

    #[test]
    fn a_table_past_the_read_budget_is_over() {
        let lines = TABLE.lines().count();
        assert_eq!(
            tally(TABLE.as_bytes(), &[9], 100, lines - 1),
            Held::TableTooLong
        );
        assert_eq!(tally(TABLE.as_bytes(), &[9], 100, lines), Held::Counted(0));
        assert!(Held::TableTooLong.is_over());
    }

    #[test]
    fn reads_this_hosts_table() {
        // A lock this test process takes is found under its own pid.
        let path = std::env::temp_dir().join(format!("retrace-locks-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        // `File::lock` is a flock on Linux.
        file.lock().unwrap();
        let me = std::process::id() as i32;
        let mut table = LockTable::open();
        let found = table.held(&[me], LOCKS_PER_KERNEL);
        // Counted again from the start, the same lock once.
        assert_eq!(table.held(&[me], LOCKS_PER_KERNEL), found);
        drop(file);
        let _ = std::fs::remove_file(&path);
        assert!(
            matches!(found, Held::Counted(n) if n >= 1),
            "found {found:?}"
        );
    }
}
