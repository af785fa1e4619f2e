//! The harness's resident memory while cases run: a plain thread (so a
//! busy runtime cannot starve it) samples `/proc/self/status` every
//! [`PERIOD`] and raises the peak of every case running at that moment.
//!
//! Each sample also reads `VmHWM`, the process's all-time peak: when it rose
//! since the last sample, the RSS went that high in between, so a spike
//! shorter than the period still counts whenever it set a new high (one
//! that did not is below a peak already seen).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

/// How often the sampler reads the harness's RSS.
pub const PERIOD: Duration = Duration::from_millis(20);

const STATUS: &str = "/proc/self/status";

/// Bytes in the MiB the table, the summary and `max_harness_mb` use.
pub const MIB: u64 = 1 << 20;

/// The harness's resident memory during one case, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HarnessMemory {
    /// When the case started.
    pub start_bytes: u64,
    /// The highest seen while it ran (cases running alongside included).
    pub peak_bytes: u64,
    /// `peak_bytes - start_bytes`: what the bound applies to.
    pub growth_bytes: u64,
    /// The cases that ran at some moment of this one (`--jobs` > 1): the
    /// figures are theirs too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alongside: Vec<String>,
}

impl HarnessMemory {
    pub fn new(start_bytes: u64, peak_bytes: u64) -> HarnessMemory {
        HarnessMemory {
            start_bytes,
            peak_bytes: peak_bytes.max(start_bytes),
            growth_bytes: peak_bytes.saturating_sub(start_bytes),
            alongside: Vec::new(),
        }
    }

    pub fn growth_mib(&self) -> f64 {
        self.growth_bytes as f64 / MIB as f64
    }

    pub fn peak_mib(&self) -> f64 {
        self.peak_bytes as f64 / MIB as f64
    }
}

/// Why the harness's RSS could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RssError {
    #[error("reading {STATUS}: {0}")]
    Read(#[from] std::io::Error),
    #[error("{STATUS} has no `{0}` line in kB")]
    Missing(&'static str),
    #[error("the sampling thread did not start: {0}")]
    NoThread(Arc<std::io::Error>),
}

/// The sampling thread; it stops when dropped.
pub struct RssSampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Why there is no thread.
    failed: Option<Arc<std::io::Error>>,
}

struct Shared {
    stop: AtomicBool,
    /// The cases running now.
    running: Mutex<Vec<Weak<Watched>>>,
    /// `VmHWM` at the last sample.
    high_water: AtomicU64,
}

/// What the sampler keeps of one running case.
struct Watched {
    id: String,
    peak: AtomicU64,
    alongside: Mutex<Vec<String>>,
}

/// One case's watch: its starting RSS and the peak the sampler raises.
pub struct RssWatch {
    start: u64,
    watched: Arc<Watched>,
    shared: Arc<Shared>,
}

impl RssSampler {
    /// Starts sampling. A thread that cannot start fails every watch, as
    /// does an unreadable status: a case is never reported unmeasured.
    pub fn start() -> RssSampler {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            running: Mutex::new(Vec::new()),
            high_water: AtomicU64::new(0),
        });
        // The first sample sets the high water, so no case is charged with
        // the peak of what ran before the check.
        let _ = shared.sample();
        let sampling = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rss-sampler".into())
            .spawn(move || {
                while !sampling.stop.load(Ordering::Relaxed) {
                    // An unreadable status shows at the watches' own reads.
                    let _ = sampling.sample();
                    std::thread::sleep(PERIOD);
                }
            });
        match thread {
            Ok(thread) => RssSampler {
                shared,
                thread: Some(thread),
                failed: None,
            },
            Err(e) => RssSampler {
                shared,
                thread: None,
                failed: Some(Arc::new(e)),
            },
        }
    }

    /// Starts watching case `id` from the RSS now.
    pub fn watch(&self, id: &str) -> Result<RssWatch, RssError> {
        if let Some(e) = &self.failed {
            return Err(RssError::NoThread(e.clone()));
        }
        let start = self.shared.sample()?;
        let mut running = self.shared.lock();
        running.retain(|w| w.strong_count() > 0);
        let mut alongside = Vec::new();
        for other in running.iter().filter_map(Weak::upgrade) {
            lock(&other.alongside).push(id.to_string());
            alongside.push(other.id.clone());
        }
        let watched = Arc::new(Watched {
            id: id.to_string(),
            peak: AtomicU64::new(start),
            alongside: Mutex::new(alongside),
        });
        running.push(Arc::downgrade(&watched));
        drop(running);
        Ok(RssWatch {
            start,
            watched,
            shared: self.shared.clone(),
        })
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl RssWatch {
    /// Ends the watch with a last sample: the case's memory.
    pub fn finish(self) -> Result<HarnessMemory, RssError> {
        self.shared.sample()?;
        let mut alongside = std::mem::take(&mut *lock(&self.watched.alongside));
        alongside.sort();
        alongside.dedup();
        Ok(HarnessMemory {
            alongside,
            ..HarnessMemory::new(self.start, self.watched.peak.load(Ordering::Relaxed))
        })
    }
}

/// A panic elsewhere leaves a list itself intact.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Watched>>> {
        lock(&self.running)
    }

    /// Reads the RSS, raises every running case's peak to what the harness
    /// reached since the last sample, and returns the RSS now.
    fn sample(&self) -> Result<u64, RssError> {
        let status = std::fs::read_to_string(STATUS)?;
        let rss = status_kib(&status, "VmRSS").ok_or(RssError::Missing("VmRSS"))? * 1024;
        let hwm = status_kib(&status, "VmHWM").ok_or(RssError::Missing("VmHWM"))? * 1024;
        let before = self.high_water.fetch_max(hwm, Ordering::Relaxed);
        let reached = if hwm > before { hwm.max(rss) } else { rss };
        self.lock().retain(|weak| match weak.upgrade() {
            Some(watched) => {
                watched.peak.fetch_max(reached, Ordering::Relaxed);
                true
            }
            None => false,
        });
        Ok(rss)
    }
}

/// The value of a `Name:   1234 kB` line of `/proc/<pid>/status`.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_kib() {
        let status = "Name:\tretrace\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(10240));
        assert_eq!(status_kib(status, "VmHWM"), Some(20480));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib("VmRSSx: 1 kB\n", "VmRSS"), None);
    }

    #[test]
    fn growth_is_over_the_start_and_never_negative() {
        let m = HarnessMemory::new(100 * MIB, 130 * MIB);
        assert_eq!(m.growth_bytes, 30 * MIB);
        assert_eq!(m.growth_mib(), 30.0);
        let shrunk = HarnessMemory::new(100 * MIB, 90 * MIB);
        assert_eq!((shrunk.growth_bytes, shrunk.peak_bytes), (0, 100 * MIB));
    }

    /// Memory touched while a watch runs shows as its growth.
    #[test]
    fn a_watch_sees_memory_touched_during_it() {
        let sampler = RssSampler::start();
        let watch = sampler.watch("big").expect("own status readable");
        let block = std::hint::black_box(vec![1u8; 64 * MIB as usize]);
        std::thread::sleep(PERIOD * 3);
        let small = sampler.watch("small").expect("own status readable");
        let small = small.finish().expect("own status readable");
        let memory = watch.finish().expect("own status readable");
        drop(block);
        assert_eq!(small.alongside, ["big"]);
        assert_eq!(memory.alongside, ["small"]);
        assert!(
            memory.growth_bytes >= 48 * MIB,
            "64 MiB touched, growth {:.1} MiB",
            memory.growth_mib()
        );
        assert!(memory.peak_bytes >= memory.start_bytes + memory.growth_bytes);
    }
}
