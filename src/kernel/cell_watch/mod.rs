//! The one watch over a kernel's cells, written once for the client of a
//! local kernel and for the host of a kernel served to a gateway. It does
//! no I/O: its drivers feed it what they see (an execute request going in,
//! the kernel's `busy` and `idle`, output, a message emptied past the cap,
//! the clock) and carry out what it decides (interrupt the cell, kill the
//! kernel). It holds the per-cell limit policy: the CPU time read every
//! [`CPU_POLL`], the wall time, the output budget, one interrupt per cell
//! and the kill once the cell outlives its interrupt by the grace; the
//! cells by msg_id (a few requests may be pipelined behind the running
//! one); and, in [`EndClaim`], the rule that decides whether the kernel's
//! word that a cell ended is to be believed.
//!
//! Time is the driver's: every call takes `now`, and [`CellWatch::next_wake`]
//! says when it must be called again.

mod end_claim;

use std::time::{Duration, Instant};

use super::capture::OutputCap;
use super::options::KernelOptions;
use super::recent::Recent;
use crate::sandbox::HarnessReason;
pub use end_claim::{Back, End, EndClaim, END_POLL};

/// How often a running cell's CPU time is read.
pub const CPU_POLL: Duration = Duration::from_millis(50);
/// Requests kept waiting behind a running cell (a few may be pipelined).
const WAITING_KEPT: usize = 16;
/// Output past which the host stops a cell: twice the client's cap and a
/// little more, counted in the messages' JSON content (escapes included),
/// so a cell the client would let through is never stopped there; the
/// client, when the output reaches it in time, stops the cell first.
const OUTPUT_SLACK: u64 = 64 * 1024;

/// The limits the watch holds a cell to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `None`: the kernel's CPU time is not counted.
    pub cpu_time: Option<Duration>,
    /// `None`: no wall time (the host's: the client keeps it).
    pub wall_time: Option<Duration>,
    /// The cap whose budget [`Event::Output`] is counted against: twice
    /// the cap and a little more. `None`: output is not counted here (the
    /// client's capture keeps its own cap and says [`Event::OverCap`]).
    pub output: Option<OutputCap>,
    /// How long a cell may take to stop after its interrupt before the
    /// kernel is killed.
    pub interrupt_grace: Duration,
}

impl Limits {
    /// A client's: its wall time, and the CPU time when it counts it; its
    /// capture keeps the output cap ([`Event::OverCap`]).
    pub fn client(options: &KernelOptions, wall_time: Duration, counts_cpu: bool) -> Limits {
        Limits {
            cpu_time: options.cpu_time.filter(|_| counts_cpu),
            wall_time: Some(wall_time),
            output: None,
            interrupt_grace: options.interrupt_grace,
        }
    }

    /// A host's: the CPU time and the output budget, no wall time (the
    /// client keeps it).
    pub fn host(options: &KernelOptions) -> Limits {
        Limits {
            cpu_time: options.cpu_time,
            wall_time: None,
            output: Some(options.output_cap),
            interrupt_grace: options.interrupt_grace,
        }
    }

    fn output_over(&self, bytes: u64, messages: u64) -> bool {
        let Some(cap) = self.output else {
            return false;
        };
        bytes > cap.bytes.saturating_mul(2).saturating_add(OUTPUT_SLACK)
            || messages > cap.messages.saturating_mul(2)
    }
}

/// Which limit stopped a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    CpuTime,
    WallTime,
    Output,
}

impl Limit {
    pub fn reason(self) -> HarnessReason {
        match self {
            Limit::CpuTime => HarnessReason::TimeoutCpu,
            Limit::WallTime => HarnessReason::TimeoutWall,
            Limit::Output => HarnessReason::OutputLimit,
        }
    }
}

/// What a driver saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
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
    /// Output went past the cap: a message emptied on the wire (of
    /// `request`, when its parent could be read; else of the running
    /// cell), or the client's capture past its own cap.
    OverCap(Option<String>),
    /// A [`CPU_POLL`] went by: the CPU time is read.
    CpuTick,
    /// The time [`CellWatch::next_wake`] named has come.
    Tick,
}

/// What the watch decided; its driver carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `request`'s cell went past `limit`: interrupt it (once).
    Interrupt { request: String, limit: Limit },
    /// `request`'s cell outlived its interrupt: kill the kernel.
    Kill { request: String },
}

/// A cell the kernel is running.
#[derive(Debug)]
struct Cell {
    request: String,
    cpu_at_start: u64,
    wall_end: Option<Instant>,
    bytes: u64,
    messages: u64,
    /// Once interrupted: why, and when the kernel is killed unless the
    /// cell ended.
    stop: Option<(Limit, Instant)>,
}

/// The kernel's cells, and the limits they are held to.
#[derive(Debug)]
pub struct CellWatch {
    limits: Limits,
    /// The cell the kernel is running.
    running: Option<Cell>,
    /// Requests that went in after it, in order.
    waiting: Recent<(), WAITING_KEPT>,
}

impl CellWatch {
    pub fn new(limits: Limits) -> CellWatch {
        CellWatch {
            limits,
            running: None,
            waiting: Recent::default(),
        }
    }

    /// Takes in `event` at `now`; `cpu_usec` reads the kernel's CPU time
    /// (a counter), when the watch needs it.
    pub fn on(&mut self, event: Event, now: Instant, cpu_usec: &dyn Fn() -> u64) -> Vec<Action> {
        match event {
            Event::Requested(request) => {
                self.waiting.push(request, ());
                self.start_next(now, cpu_usec);
            }
            Event::Busy(request) => {
                if self.is_running(&request) {
                    return Vec::new();
                }
                // A later request's busy ends the cells before it still
                // watched or waiting (their idle was lost or forged).
                self.end_until(&request);
                self.running = Some(self.cell(request, now, cpu_usec));
            }
            Event::Idle(request) => {
                if self.is_running(&request) || self.waiting.contains(&request) {
                    self.end_until(&request);
                    self.start_next(now, cpu_usec);
                }
            }
            Event::Output { request, bytes } => {
                let limits = self.limits;
                if let Some(c) = self.running.as_mut().filter(|c| c.request == request) {
                    c.bytes = c.bytes.saturating_add(bytes);
                    c.messages += 1;
                    if limits.output_over(c.bytes, c.messages) {
                        return self.stop(Limit::Output, now);
                    }
                }
            }
            Event::OverCap(request) => {
                let ours = self
                    .running
                    .as_ref()
                    .is_some_and(|c| request.as_ref().is_none_or(|r| *r == c.request));
                if ours {
                    return self.stop(Limit::Output, now);
                }
            }
            Event::CpuTick => {
                if let (true, Some(c), Some(limit)) =
                    (self.watches_cpu(), &self.running, self.limits.cpu_time)
                {
                    let used = cpu_usec().saturating_sub(c.cpu_at_start);
                    if used > limit.as_micros() as u64 {
                        return self.stop(Limit::CpuTime, now);
                    }
                }
            }
            Event::Tick => return self.tick(now),
        }
        Vec::new()
    }

    /// Whether the CPU time is to be read every [`CPU_POLL`]: a cell runs
    /// that is not stopped yet, and its CPU time is limited.
    pub fn watches_cpu(&self) -> bool {
        self.limits.cpu_time.is_some() && self.running.as_ref().is_some_and(|c| c.stop.is_none())
    }

    /// When [`Event::Tick`] is due: the running cell's wall time or the
    /// end of its grace.
    pub fn next_wake(&self) -> Option<Instant> {
        let cell = self.running.as_ref()?;
        match cell.stop {
            Some((_, kill_at)) => Some(kill_at),
            None => cell.wall_end,
        }
    }

    fn tick(&mut self, now: Instant) -> Vec<Action> {
        let Some(cell) = &self.running else {
            return Vec::new();
        };
        match cell.stop {
            Some((_, kill_at)) if now >= kill_at => {
                let request = cell.request.clone();
                // Nothing waiting outlives the kernel.
                self.running = None;
                self.waiting.clear();
                vec![Action::Kill { request }]
            }
            Some(_) => Vec::new(),
            None if cell.wall_end.is_some_and(|end| now >= end) => self.stop(Limit::WallTime, now),
            None => Vec::new(),
        }
    }

    /// Stops the running cell once: interrupted now, killed after the
    /// grace unless it ends.
    fn stop(&mut self, limit: Limit, now: Instant) -> Vec<Action> {
        let grace = self.limits.interrupt_grace;
        let Some(cell) = self.running.as_mut().filter(|c| c.stop.is_none()) else {
            return Vec::new();
        };
        let kill_at = now.checked_add(grace).unwrap_or(now);
        cell.stop = Some((limit, kill_at));
        vec![Action::Interrupt {
            request: cell.request.clone(),
            limit,
        }]
    }

    fn is_running(&self, request: &str) -> bool {
        self.running.as_ref().is_some_and(|c| c.request == request)
    }

    /// Ends the running cell and the waiting requests up to `request`
    /// (included) when it is one of them; only the running cell otherwise.
    fn end_until(&mut self, request: &str) {
        self.running = None;
        self.waiting.drain_through(request);
    }

    /// With no cell running, the first waiting request's cell starts now.
    fn start_next(&mut self, now: Instant, cpu_usec: &dyn Fn() -> u64) {
        if self.running.is_none() {
            if let Some((request, ())) = self.waiting.pop_front() {
                self.running = Some(self.cell(request, now, cpu_usec));
            }
        }
    }

    fn cell(&self, request: String, now: Instant, cpu_usec: &dyn Fn() -> u64) -> Cell {
        Cell {
            request,
            cpu_at_start: if self.limits.cpu_time.is_some() {
                cpu_usec()
            } else {
                0
            },
            wall_end: self.limits.wall_time.and_then(|d| now.checked_add(d)),
            bytes: 0,
            messages: 0,
            stop: None,
        }
    }
}

#[cfg(test)]
mod tests;
