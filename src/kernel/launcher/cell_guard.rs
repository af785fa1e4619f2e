//! The host's own limits on a cell of a kernel served to a gateway: its
//! CPU time and its output. On a local kernel the client watches both as
//! the cell runs; through a gateway it sees the kernel's CPU time only in
//! the host's readings after the cell, and a flood only as fast as the
//! gateway's buffers pass it on, so a runaway cell would run on to the
//! wall timeout. The guard drives the same [`CellWatch`] as the client,
//! fed by the taps, with the host's output budget: an interrupt, then, if
//! the cell outlives the interrupt grace, a kill of every process of the
//! kernel. Each stop is counted before it is made, so the host's reading
//! after the cell (or after the kernel's death) gives the cell its reason.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::super::cell_watch::{Action, CellWatch, Event, Limit, Limits, CPU_POLL};
use crate::sandbox::Jail;

/// The guard's stops so far, for the host's readings.
#[derive(Debug, Default)]
pub struct GuardCounts {
    pub cpu_stops: AtomicU64,
    pub output_stops: AtomicU64,
    /// Stopped cells that outlived their interrupt.
    pub kills: AtomicU64,
}

pub struct CellGuard {
    pub limits: Limits,
    pub jail: Arc<dyn Jail>,
    /// Asks the launcher, which holds the kernel, for an interrupt.
    pub interrupt: mpsc::Sender<()>,
    pub counts: Arc<GuardCounts>,
}

impl CellGuard {
    /// Watches the cells `events` tells of until the tap goes.
    pub async fn run(self, mut events: mpsc::UnboundedReceiver<Event>) {
        let mut watch = CellWatch::new(self.limits);
        let mut tick = tokio::time::interval(CPU_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            let wake = watch.next_wake().map(tokio::time::Instant::from_std);
            let event = tokio::select! {
                event = events.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
                _ = tick.tick(), if watch.watches_cpu() => Event::CpuTick,
                () = tokio::time::sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => Event::Tick,
            };
            let jail = &self.jail;
            let cpu = || jail.counters().cpu_usage_usec;
            for action in watch.on(event, Instant::now(), &cpu) {
                self.carry_out(action).await;
            }
        }
    }

    async fn carry_out(&self, action: Action) {
        match action {
            Action::Interrupt { request, limit } => {
                let (count, why) = match limit {
                    Limit::CpuTime => (&self.counts.cpu_stops, "its CPU time"),
                    Limit::Output | Limit::WallTime => (&self.counts.output_stops, "its output"),
                };
                tracing::info!(%request, "the cell went past {why} on the host; interrupting it");
                count.fetch_add(1, Ordering::SeqCst);
                let _ = self.interrupt.try_send(());
            }
            Action::Kill { request } => {
                tracing::info!(
                    %request,
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
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::super::capture::OutputCap;
    use super::super::super::fake_jail::FakeJail;
    use super::*;

    /// The driver on a real clock: the watch's decisions become the
    /// counted stops, the interrupt and the jail's kill.
    #[tokio::test]
    async fn the_guard_counts_interrupts_and_kills_what_the_watch_decides() {
        let jail = Arc::new(FakeJail::default());
        let (interrupt, mut interrupts) = mpsc::channel(4);
        let counts = Arc::new(GuardCounts::default());
        let guard = CellGuard {
            limits: Limits {
                cpu_time: Some(Duration::from_millis(500)),
                wall_time: None,
                output: Some(OutputCap {
                    bytes: 1000,
                    messages: 10,
                }),
                interrupt_grace: Duration::from_millis(100),
            },
            jail: jail.clone(),
            interrupt,
            counts: counts.clone(),
        };
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(guard.run(rx));
        let settle = || tokio::time::sleep(Duration::from_millis(150));

        events.send(Event::Requested("a".into())).unwrap();
        events.send(Event::OverCap(Some("a".into()))).unwrap();
        events.send(Event::Idle("a".into())).unwrap();
        settle().await;
        settle().await;
        assert_eq!(counts.output_stops.load(Ordering::SeqCst), 1);
        assert!(interrupts.try_recv().is_ok());
        assert_eq!(jail.kills.load(Ordering::SeqCst), 0, "it ended in time");

        events.send(Event::Busy("b".into())).unwrap();
        settle().await;
        jail.cpu_usec.store(600_000, Ordering::SeqCst);
        settle().await;
        assert_eq!(counts.cpu_stops.load(Ordering::SeqCst), 1);
        assert!(interrupts.try_recv().is_ok(), "not interrupted");
        settle().await;
        assert_eq!(jail.kills.load(Ordering::SeqCst), 1, "not killed");
        assert_eq!(counts.kills.load(Ordering::SeqCst), 1);
    }
}
