//! The lock watchdog of one local kernel: a thread that counts the file
//! locks the kernel's processes hold (see `sandbox::locks`) every
//! [`LOCK_POLL`] for the kernel's whole life, between cells too (a child
//! left running would otherwise pile up locks while the model thinks), and
//! kills every process of the kernel past [`LOCKS_PER_KERNEL`]. No memory
//! cgroup is charged for locks, so no other limit would ever stop them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sandbox::locks::{Held, LockTable, LOCKS_PER_KERNEL};
use crate::sandbox::{Jail, KillReport};

/// How often the locks are counted: at the fastest rate a cell can take
/// them (a few hundred thousand a second on two cores), at most a few MB
/// of slab go by between two counts.
const LOCK_POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Kills so far, for the evidence of the cell they happen in.
    kills: Arc<AtomicU64>,
    /// Bumped by every [`LockWatch::hold`]: a count read before says
    /// nothing about the processes after it (a fresh kernel's).
    generation: AtomicU64,
    /// Held while the watchdog kills and while the backend kills or
    /// restarts: two kills of one group at once would each save and restore
    /// its CPU quota, and a kill still running would reach a fresh kernel.
    killing: Mutex<()>,
    last_kill: Mutex<Option<KillReport>>,
}

pub(super) struct LockWatch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl LockWatch {
    /// Starts watching `jail`'s processes.
    pub(super) fn start(jail: Arc<dyn Jail>, kernel: &str) -> LockWatch {
        let shared = Arc::new(Shared::default());
        let watched = shared.clone();
        let kernel = kernel.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("locks-{kernel}"))
            .spawn(move || watch(&*jail, &watched, &kernel))
            .map_err(|e| tracing::warn!(error = %e, "the lock watchdog did not start"))
            .ok();
        LockWatch { shared, thread }
    }

    /// The count of kills, as it goes on.
    pub(super) fn counter(&self) -> Arc<AtomicU64> {
        self.shared.kills.clone()
    }

    /// Kills so far.
    pub(super) fn kills(&self) -> u64 {
        self.shared.kills.load(Ordering::SeqCst)
    }

    /// The report of the latest kill, once it has ended.
    pub(super) fn last_kill(&self) -> Option<KillReport> {
        self.shared
            .last_kill
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Holds the watchdog off until the guard goes: a kill of its in
    /// progress ends first, and no count read before is acted on.
    pub(super) fn hold(&self) -> MutexGuard<'_, ()> {
        let guard = lock(&self.shared.killing);
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
        guard
    }
}

impl Drop for LockWatch {
    /// Stops the thread before the jail it reads goes.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn watch(jail: &dyn Jail, shared: &Shared, kernel: &str) {
    let mut table = LockTable::open();
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(LOCK_POLL);
        let generation = shared.generation.load(Ordering::SeqCst);
        let count = table.held(&jail.live_processes(), LOCKS_PER_KERNEL);
        if !count.is_over() || shared.stop.load(Ordering::SeqCst) {
            continue;
        }
        let _killing = lock(&shared.killing);
        if shared.generation.load(Ordering::SeqCst) != generation {
            continue;
        }
        kill(jail, shared, kernel, count);
    }
}

fn lock(killing: &Mutex<()>) -> MutexGuard<'_, ()> {
    killing
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn kill(jail: &dyn Jail, shared: &Shared, kernel: &str, count: Held) {
    tracing::info!(kernel, locks = %count, bound = LOCKS_PER_KERNEL, "the kernel's processes hold too many file locks; killing them");
    // Counted first: the cell's evidence must see it once the kernel's
    // death is noticed.
    shared.kills.fetch_add(1, Ordering::SeqCst);
    let report = jail.kill_all(None);
    tracing::info!(kernel, method = %report.method, kill_ms = report.kill_ms, survivors = report.survivors, "killed for its file locks");
    *shared
        .last_kill
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(report);
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::time::Instant;

    use nix::fcntl::{fcntl, FcntlArg};

    use super::super::fake_jail::FakeJail;
    use super::*;

    /// POSIX locks on every other byte of `file` (neighbours would merge).
    fn lock_bytes(file: &std::fs::File, count: usize) {
        for i in 0..count {
            let range = libc::flock {
                l_type: libc::F_WRLCK as libc::c_short,
                l_whence: libc::SEEK_SET as libc::c_short,
                l_start: 2 * i as libc::off_t,
                l_len: 1,
                l_pid: 0,
            };
            fcntl(file.as_fd(), FcntlArg::F_SETLK(&range)).expect("a POSIX lock");
        }
    }

    fn wait_for(what: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn kills_past_the_bound_and_not_before() {
        let path = std::env::temp_dir().join(format!("retrace-lock-watch-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let jail = Arc::new(FakeJail::default());
        let watch = LockWatch::start(jail.clone(), "ktest");
        lock_bytes(&file, LOCKS_PER_KERNEL / 2);
        std::thread::sleep(LOCK_POLL * 4);
        let early = jail.kills.load(Ordering::SeqCst);
        lock_bytes(&file, LOCKS_PER_KERNEL + 1);
        let killed = wait_for(|| watch.kills() >= 1);
        // Held off, it counts but does not kill.
        let kills = jail.kills.load(Ordering::SeqCst);
        let held = watch.hold();
        std::thread::sleep(LOCK_POLL * 4);
        let while_held = jail.kills.load(Ordering::SeqCst);
        drop(held);
        drop(file);
        let _ = std::fs::remove_file(&path);
        assert_eq!(early, 0, "killed under the bound");
        assert!(killed, "not killed past the bound");
        assert!(kills >= 1);
        assert_eq!(while_held, kills, "killed while held off");
    }
}
