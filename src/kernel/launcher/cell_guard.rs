//! The host's own limits on a cell of a kernel served to a gateway: its
//! CPU time and its output. On a local kernel the client watches both as
//! the cell runs; through a gateway it sees the kernel's CPU time only in
//! the host's readings after the cell, and a flood only as fast as the
//! gateway's buffers pass it on, so a runaway cell would run on to the
//! wall timeout. The guard stops such a cell on its host as the client
//! would: an interrupt, then, if the cell outlives the interrupt grace, a
//! kill of every process of the kernel. Each stop is counted before it is
//! made, so the host's reading after the cell (or after the kernel's
//! death) gives the cell its reason.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::super::capture::OutputCap;
use super::super::options::KernelOptions;
use crate::sandbox::Jail;

/// How often a running cell's CPU time is read (as a local client does).
const CPU_POLL: Duration = Duration::from_millis(50);
/// Requests kept waiting behind a running cell (a few may be pipelined).
const WAITING_KEPT: usize = 16;
/// Output past which the host stops a cell: twice the client's cap and a
/// little more, counted in the messages' JSON content (escapes included),
/// so a cell the client would let through is never stopped here; the
/// client, when the output reaches it in time, stops the cell first.
const OUTPUT_SLACK: u64 = 64 * 1024;

/// What the taps tell the guard about the kernel's cells: the shell's of
/// each execute request going in, IOPub's once per message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellEvent {
    /// Execute request `request` went into the kernel. Its cell is watched
    /// from here (or from the end of the cells before it): a cell that
    /// holds the interpreter's lock from its first line keeps the kernel's
    /// `busy` from ever leaving it.
    Requested(String),
    /// The kernel is busy with execute request `request`.
    Busy(String),
    /// It is idle again after `request`.
    Idle(String),
    /// One message of `request`'s output, of `bytes`.
    Output { request: String, bytes: u64 },
    /// The wire cap emptied a message past the cap (of `request`, when its
    /// parent could be read).
    Emptied(Option<String>),
}

/// The host's limits on one cell.
#[derive(Debug, Clone, Copy)]
pub struct CellLimits {
    /// `None`: the kernel is not confined, its CPU time is not counted.
    pub cpu_time: Option<Duration>,
    pub output: OutputCap,
    pub interrupt_grace: Duration,
}

impl CellLimits {
    pub fn of(options: &KernelOptions) -> CellLimits {
        CellLimits {
            cpu_time: options.cpu_time,
            output: options.output_cap,
            interrupt_grace: options.interrupt_grace,
        }
    }

    fn output_over(&self, bytes: u64, messages: u64) -> bool {
        bytes
            > self
                .output
                .bytes
                .saturating_mul(2)
                .saturating_add(OUTPUT_SLACK)
            || messages > self.output.messages.saturating_mul(2)
    }
}

/// The guard's stops so far, for the host's readings.
#[derive(Debug, Default)]
pub struct GuardCounts {
    pub cpu_stops: AtomicU64,
    pub output_stops: AtomicU64,
    /// Stopped cells that outlived their interrupt.
    pub kills: AtomicU64,
}

/// The kernel's cells as the guard sees them.
#[derive(Default)]
struct Cells {
    /// The cell the kernel is running.
    running: Option<Cell>,
    /// Requests that went in after it, in order.
    waiting: VecDeque<String>,
}

impl Cells {
    fn is_running(&self, request: &str) -> bool {
        self.running.as_ref().is_some_and(|c| c.request == request)
    }

    /// Ends the running cell and the waiting requests up to `request`
    /// (included) when it is one of them; only the running cell otherwise.
    fn end_until(&mut self, request: &str) {
        self.running = None;
        if let Some(at) = self.waiting.iter().position(|r| r == request) {
            self.waiting.drain(..=at);
        }
    }
}

/// A cell the kernel is running.
struct Cell {
    request: String,
    cpu_at_start: u64,
    bytes: u64,
    messages: u64,
    /// Once stopped: when its processes are killed unless it ended.
    kill_at: Option<Instant>,
}

pub struct CellGuard {
    pub limits: CellLimits,
    pub jail: Arc<dyn Jail>,
    /// Asks the launcher, which holds the kernel, for an interrupt.
    pub interrupt: mpsc::Sender<()>,
    pub counts: Arc<GuardCounts>,
}

impl CellGuard {
    /// Watches the cells `events` tells of until the tap goes.
    pub async fn run(self, mut events: mpsc::UnboundedReceiver<CellEvent>) {
        let mut cells = Cells::default();
        let mut tick = tokio::time::interval(CPU_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let kill_at = cells.running.as_ref().and_then(|c| c.kill_at);
            let cpu_watched = self.limits.cpu_time.is_some()
                && cells.running.as_ref().is_some_and(|c| c.kill_at.is_none());
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.on(event, &mut cells),
                    None => return,
                },
                _ = tick.tick(), if cpu_watched => {
                    if let (Some(c), Some(limit)) = (cells.running.as_mut(), self.limits.cpu_time) {
                        let used = self.jail.counters().cpu_usage_usec.saturating_sub(c.cpu_at_start);
                        if used > limit.as_micros() as u64 {
                            self.stop(c, &self.counts.cpu_stops, "its CPU time");
                        }
                    }
                }
                () = tokio::time::sleep_until(kill_at.unwrap_or_else(Instant::now)), if kill_at.is_some() => {
                    if let Some(c) = cells.running.take() {
                        // Nothing waiting outlives the kernel.
                        cells.waiting.clear();
                        self.kill(&c.request).await;
                    }
                }
            }
        }
    }

    fn on(&self, event: CellEvent, cells: &mut Cells) {
        match event {
            CellEvent::Requested(request) => {
                if cells.waiting.len() == WAITING_KEPT {
                    cells.waiting.pop_front();
                }
                cells.waiting.push_back(request);
                self.start_next(cells);
            }
            CellEvent::Busy(request) => {
                if cells.is_running(&request) {
                    return;
                }
                // A later request's busy ends the cells before it the
                // guard still watched or kept waiting (their idle was lost
                // or forged).
                cells.end_until(&request);
                cells.running = Some(self.cell(request));
            }
            CellEvent::Idle(request) => {
                if cells.is_running(&request) || cells.waiting.contains(&request) {
                    cells.end_until(&request);
                    self.start_next(cells);
                }
            }
            CellEvent::Output { request, bytes } => {
                let Some(c) = cells.running.as_mut().filter(|c| c.request == request) else {
                    return;
                };
                c.bytes = c.bytes.saturating_add(bytes);
                c.messages += 1;
                if self.limits.output_over(c.bytes, c.messages) {
                    self.stop(c, &self.counts.output_stops, "its output");
                }
            }
            CellEvent::Emptied(request) => {
                let Some(c) = cells.running.as_mut() else {
                    return;
                };
                if request.as_ref().is_none_or(|r| *r == c.request) {
                    self.stop(c, &self.counts.output_stops, "a message past the cap");
                }
            }
        }
    }

    /// With no cell running, the first waiting request's cell starts now.
    fn start_next(&self, cells: &mut Cells) {
        if cells.running.is_none() {
            if let Some(request) = cells.waiting.pop_front() {
                cells.running = Some(self.cell(request));
            }
        }
    }

    fn cell(&self, request: String) -> Cell {
        Cell {
            request,
            cpu_at_start: self.jail.counters().cpu_usage_usec,
            bytes: 0,
            messages: 0,
            kill_at: None,
        }
    }

    /// Stops `cell` once: counted first, then interrupted; killed after the
    /// grace unless it ends.
    fn stop(&self, cell: &mut Cell, count: &AtomicU64, why: &str) {
        if cell.kill_at.is_some() {
            return;
        }
        tracing::info!(request = %cell.request, "the cell went past {why} on the host; interrupting it");
        count.fetch_add(1, Ordering::SeqCst);
        cell.kill_at = Some(Instant::now() + self.limits.interrupt_grace);
        let _ = self.interrupt.try_send(());
    }

    async fn kill(&self, request: &str) {
        tracing::info!(
            request,
            "the stopped cell outlived its interrupt; killing the kernel"
        );
        // Counted first: the reading after the kernel's death must see it.
        self.counts.kills.fetch_add(1, Ordering::SeqCst);
        let jail = self.jail.clone();
        let report = tokio::task::spawn_blocking(move || jail.kill_all(None)).await;
        if let Ok(report) = report {
            tracing::info!(method = %report.method, kill_ms = report.kill_ms, survivors = report.survivors, "killed on the host");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::fake_jail::FakeJail;
    use super::*;

    struct Guarded {
        jail: Arc<FakeJail>,
        events: mpsc::UnboundedSender<CellEvent>,
        interrupts: mpsc::Receiver<()>,
        counts: Arc<GuardCounts>,
    }

    fn guarded() -> Guarded {
        let jail = Arc::new(FakeJail::default());
        let (interrupt, interrupts) = mpsc::channel(4);
        let counts = Arc::new(GuardCounts::default());
        let guard = CellGuard {
            limits: CellLimits {
                cpu_time: Some(Duration::from_millis(500)),
                output: OutputCap {
                    bytes: 1000,
                    messages: 10,
                },
                interrupt_grace: Duration::from_millis(100),
            },
            jail: jail.clone(),
            interrupt,
            counts: counts.clone(),
        };
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(guard.run(rx));
        Guarded {
            jail,
            events,
            interrupts,
            counts,
        }
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    /// The running cell goes past its 500 ms of CPU time and ignores its
    /// interrupt.
    async fn past_its_cpu_time_it_is_interrupted_then_killed(g: &mut Guarded) {
        g.jail.cpu_usec.store(600_000, Ordering::SeqCst);
        settle().await;
        assert_eq!(g.counts.cpu_stops.load(Ordering::SeqCst), 1);
        assert!(g.interrupts.try_recv().is_ok(), "not interrupted");
        settle().await;
        assert_eq!(g.jail.kills.load(Ordering::SeqCst), 1, "not killed");
    }

    #[tokio::test]
    async fn a_cell_past_its_cpu_time_is_interrupted_then_killed() {
        let mut g = guarded();
        g.events.send(CellEvent::Busy("a".into())).unwrap();
        settle().await;
        // Another connection's `busy` of the same cell starts nothing anew.
        g.jail.cpu_usec.store(300_000, Ordering::SeqCst);
        g.events.send(CellEvent::Busy("a".into())).unwrap();
        settle().await;
        assert!(g.interrupts.try_recv().is_err(), "stopped within its time");
        past_its_cpu_time_it_is_interrupted_then_killed(&mut g).await;
        assert_eq!(g.counts.kills.load(Ordering::SeqCst), 1);
        // Counted once, and the CPU time before a cell is not its own.
        g.events.send(CellEvent::Busy("b".into())).unwrap();
        settle().await;
        assert_eq!(g.counts.cpu_stops.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_cell_is_watched_from_its_request_even_when_its_busy_never_comes() {
        // A cell holding the interpreter's lock from its first line keeps
        // the kernel's `busy` in the kernel.
        let mut g = guarded();
        g.events.send(CellEvent::Requested("a".into())).unwrap();
        settle().await;
        past_its_cpu_time_it_is_interrupted_then_killed(&mut g).await;
    }

    #[tokio::test]
    async fn a_request_sent_behind_a_running_cell_is_watched_from_that_cells_end() {
        let mut g = guarded();
        g.events.send(CellEvent::Requested("a".into())).unwrap();
        g.events.send(CellEvent::Busy("a".into())).unwrap();
        g.events.send(CellEvent::Requested("b".into())).unwrap();
        settle().await;
        g.jail.cpu_usec.store(400_000, Ordering::SeqCst);
        g.events.send(CellEvent::Idle("a".into())).unwrap();
        settle().await;
        // b's own time is 300 ms, a's and b's together 700 ms; b's `busy`
        // starts nothing anew.
        g.jail.cpu_usec.store(700_000, Ordering::SeqCst);
        g.events.send(CellEvent::Busy("b".into())).unwrap();
        settle().await;
        assert_eq!(g.counts.cpu_stops.load(Ordering::SeqCst), 0);
        assert!(
            g.interrupts.try_recv().is_err(),
            "b stopped within its time"
        );
        g.jail.cpu_usec.store(1_000_000, Ordering::SeqCst);
        settle().await;
        assert_eq!(g.counts.cpu_stops.load(Ordering::SeqCst), 1);
        g.events.send(CellEvent::Idle("b".into())).unwrap();
        // A busy of a later request ends the cells waiting before it.
        g.events.send(CellEvent::Requested("c".into())).unwrap();
        g.events.send(CellEvent::Requested("d".into())).unwrap();
        g.events.send(CellEvent::Busy("d".into())).unwrap();
        g.events.send(CellEvent::Idle("d".into())).unwrap();
        settle().await;
        g.jail.cpu_usec.store(5_000_000, Ordering::SeqCst);
        settle().await;
        assert_eq!(
            g.counts.cpu_stops.load(Ordering::SeqCst),
            1,
            "c still watched"
        );
    }

    #[tokio::test]
    async fn a_cell_that_ends_after_its_interrupt_is_not_killed() {
        let mut g = guarded();
        g.events.send(CellEvent::Busy("a".into())).unwrap();
        for _ in 0..30 {
            let output = CellEvent::Output {
                request: "a".into(),
                bytes: 100,
            };
            g.events.send(output).unwrap();
        }
        g.events.send(CellEvent::Idle("a".into())).unwrap();
        settle().await;
        settle().await;
        assert_eq!(g.counts.output_stops.load(Ordering::SeqCst), 1);
        assert!(g.interrupts.try_recv().is_ok());
        assert_eq!(g.jail.kills.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn output_within_twice_the_cap_and_other_requests_output_pass() {
        let g = guarded();
        g.events.send(CellEvent::Busy("a".into())).unwrap();
        let output = |request: &str, bytes| CellEvent::Output {
            request: request.into(),
            bytes,
        };
        g.events.send(output("a", 2000)).unwrap();
        g.events.send(output("other", 1 << 20)).unwrap();
        g.events
            .send(CellEvent::Emptied(Some("other".into())))
            .unwrap();
        settle().await;
        assert_eq!(g.counts.output_stops.load(Ordering::SeqCst), 0);
        // A message of the cell emptied on the wire stops it.
        g.events.send(CellEvent::Emptied(Some("a".into()))).unwrap();
        settle().await;
        assert_eq!(g.counts.output_stops.load(Ordering::SeqCst), 1);
    }
}
