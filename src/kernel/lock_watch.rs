//! The lock watchdog of one local kernel: a thread that counts the file
//! locks the kernel's processes hold (see `sandbox::locks`) every
//! [`LOCK_POLL`] for the kernel's whole life, between cells too (a child
//! left running would otherwise pile up locks while the model thinks), and
//! kills every process of the kernel past [`LOCKS_PER_KERNEL`]. No memory
//! cgroup is charged for locks, so no other limit would ever stop them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sandbox::locks::{held, Held, LOCKS_PER_KERNEL};
use crate::sandbox::Jail;

/// How often the locks are counted: at the fastest rate a cell can take
/// them (a few hundred thousand a second on two cores), at most a few MB
/// of slab go by between two counts.
const LOCK_POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Kills so far, for the evidence of the cell they happen in.
    kills: AtomicU64,
    /// Bumped by every restart: a count read before one says nothing about
    /// the fresh kernel's processes.
    generation: AtomicU64,
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

    /// Kills so far.
    pub(super) fn kills(&self) -> u64 {
        self.shared.kills.load(Ordering::SeqCst)
    }

    /// Called before the kernel's processes are replaced.
    pub(super) fn restarting(&self) {
        self.shared.generation.fetch_add(1, Ordering::SeqCst);
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
    while !shared.stop.load(Ordering::SeqCst) {
        std::thread::sleep(LOCK_POLL);
        let generation = shared.generation.load(Ordering::SeqCst);
        let count = held(&jail.live_processes(), LOCKS_PER_KERNEL);
        if !count.is_over() || shared.stop.load(Ordering::SeqCst) {
            continue;
        }
        if shared.generation.load(Ordering::SeqCst) != generation {
            continue;
        }
        kill(jail, shared, kernel, count);
    }
}

fn kill(jail: &dyn Jail, shared: &Shared, kernel: &str, count: Held) {
    tracing::info!(kernel, locks = %count, bound = LOCKS_PER_KERNEL, "the kernel's processes hold too many file locks; killing them");
    // Counted first: the cell's evidence must see it once the kernel's
    // death is noticed.
    shared.kills.fetch_add(1, Ordering::SeqCst);
    let report = jail.kill_all(None);
    tracing::info!(kernel, method = %report.method, kill_ms = report.kill_ms, survivors = report.survivors, "killed for its file locks");
}
