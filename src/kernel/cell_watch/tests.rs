//! The watch as a pure state machine: events in, actions out, on a clock
//! the test moves.

use std::cell::Cell as Counter;

use super::*;

const GRACE: Duration = Duration::from_millis(100);

fn limits() -> Limits {
    Limits {
        cpu_time: Some(Duration::from_millis(500)),
        wall_time: None,
        output: Some(OutputCap {
            bytes: 1000,
            messages: 10,
        }),
        interrupt_grace: GRACE,
    }
}

/// A watch, a clock and a CPU counter.
struct Bench {
    watch: CellWatch,
    now: Instant,
    cpu: Counter<u64>,
}

impl Bench {
    fn new(limits: Limits) -> Bench {
        Bench {
            watch: CellWatch::new(limits),
            now: Instant::now(),
            cpu: Counter::new(0),
        }
    }

    fn on(&mut self, event: Event) -> Vec<Action> {
        let cpu = &self.cpu;
        self.watch.on(event, self.now, &|| cpu.get())
    }

    fn later(&mut self, d: Duration) {
        self.now += d;
    }

    fn cpu_at(&mut self, usec: u64) -> Vec<Action> {
        self.cpu.set(usec);
        self.on(Event::CpuTick)
    }
}

fn interrupt(request: &str, limit: Limit) -> Vec<Action> {
    vec![Action::Interrupt {
        request: request.into(),
        limit,
    }]
}

fn kill(request: &str) -> Vec<Action> {
    vec![Action::Kill {
        request: request.into(),
    }]
}

fn output(request: &str, bytes: u64) -> Event {
    Event::Output {
        request: request.into(),
        bytes,
    }
}

#[test]
fn over_its_cpu_time_a_cell_is_interrupted_then_killed_after_the_grace() {
    let mut b = Bench::new(limits());
    assert!(!b.watch.watches_cpu(), "no cell, nothing to read");
    b.cpu.set(1_000_000);
    assert!(b.on(Event::Busy("a".into())).is_empty());
    assert!(b.watch.watches_cpu());
    // Another connection's `busy` of the same cell starts nothing anew,
    // and the CPU time before the cell is not its own.
    b.cpu.set(1_300_000);
    assert!(b.on(Event::Busy("a".into())).is_empty());
    assert!(b.cpu_at(1_500_000).is_empty(), "exactly its limit");
    assert_eq!(b.cpu_at(1_500_001), interrupt("a", Limit::CpuTime));
    assert!(!b.watch.watches_cpu(), "interrupted once");
    assert!(b.cpu_at(9_000_000).is_empty());
    assert_eq!(b.watch.next_wake(), Some(b.now + GRACE));
    b.later(GRACE / 2);
    assert!(b.on(Event::Tick).is_empty(), "within the grace");
    b.later(GRACE / 2);
    assert_eq!(b.on(Event::Tick), kill("a"));
    assert_eq!(b.watch.next_wake(), None);
    assert!(b.on(Event::Tick).is_empty(), "killed once");
}

#[test]
fn a_cell_that_ends_within_its_grace_is_not_killed() {
    let mut b = Bench::new(limits());
    b.on(Event::Busy("a".into()));
    assert!(b.on(output("a", 1000)).is_empty());
    assert!(b.on(output("a", 1000)).is_empty(), "within twice the cap");
    assert!(b.on(output("a", 64 * 1024)).is_empty(), "and the slack");
    assert_eq!(b.on(output("a", 1)), interrupt("a", Limit::Output));
    assert!(b.on(output("a", 1000)).is_empty(), "stopped once");
    assert!(b.on(Event::Idle("a".into())).is_empty());
    b.later(GRACE * 2);
    assert!(b.on(Event::Tick).is_empty());
    assert_eq!(b.watch.next_wake(), None);
}

#[test]
fn twice_the_caps_messages_stop_a_cell() {
    let mut b = Bench::new(limits());
    b.on(Event::Busy("a".into()));
    for _ in 0..20 {
        assert!(b.on(output("a", 1)).is_empty());
    }
    assert_eq!(b.on(output("a", 1)), interrupt("a", Limit::Output));
}

#[test]
fn unknown_requests_are_ignored() {
    let mut b = Bench::new(limits());
    // Nothing runs: nothing to stop, nothing to count.
    assert!(b.on(output("x", 1 << 30)).is_empty());
    assert!(b.on(Event::OverCap(None)).is_empty());
    assert!(b.on(Event::Idle("x".into())).is_empty());
    b.on(Event::Busy("a".into()));
    assert!(b.on(output("other", 1 << 30)).is_empty());
    assert!(b.on(Event::OverCap(Some("other".into()))).is_empty());
    assert!(b.on(Event::Idle("other".into())).is_empty());
    assert_eq!(b.cpu_at(600_000), interrupt("a", Limit::CpuTime));
    // A message of the running cell emptied on the wire, or one whose
    // parent could not be read, counts against it.
    let mut b = Bench::new(limits());
    b.on(Event::Busy("a".into()));
    assert_eq!(
        b.on(Event::OverCap(Some("a".into()))),
        interrupt("a", Limit::Output)
    );
    let mut b = Bench::new(limits());
    b.on(Event::Busy("a".into()));
    assert_eq!(b.on(Event::OverCap(None)), interrupt("a", Limit::Output));
}

#[test]
fn a_cell_is_watched_from_its_request_even_when_its_busy_never_comes() {
    let mut b = Bench::new(limits());
    b.on(Event::Requested("a".into()));
    assert!(b.watch.watches_cpu());
    assert_eq!(b.cpu_at(600_000), interrupt("a", Limit::CpuTime));
}

#[test]
fn a_request_sent_behind_a_running_cell_is_watched_from_that_cells_end() {
    let mut b = Bench::new(limits());
    b.on(Event::Requested("a".into()));
    b.on(Event::Busy("a".into()));
    b.on(Event::Requested("b".into()));
    b.cpu.set(400_000);
    b.on(Event::Idle("a".into()));
    // b's own time is 300 ms, a's and b's together 700 ms; b's `busy`
    // starts nothing anew.
    b.cpu.set(700_000);
    b.on(Event::Busy("b".into()));
    assert!(b.cpu_at(700_000).is_empty(), "b stopped within its time");
    assert_eq!(b.cpu_at(1_000_000), interrupt("b", Limit::CpuTime));
    b.on(Event::Idle("b".into()));
    // A busy of a later request ends the cells waiting before it.
    for event in [
        Event::Requested("c".into()),
        Event::Requested("d".into()),
        Event::Busy("d".into()),
        Event::Idle("d".into()),
    ] {
        b.on(event);
    }
    assert!(!b.watch.watches_cpu(), "c still watched");
    assert!(b.cpu_at(5_000_000).is_empty());
}

#[test]
fn the_wall_time_interrupts_then_the_grace_kills_and_the_first_limit_wins() {
    let mut b = Bench::new(Limits {
        wall_time: Some(Duration::from_secs(2)),
        ..limits()
    });
    b.on(Event::Requested("a".into()));
    assert_eq!(b.watch.next_wake(), Some(b.now + Duration::from_secs(2)));
    b.later(Duration::from_secs(1));
    assert!(b.on(Event::Tick).is_empty());
    b.later(Duration::from_secs(1));
    assert_eq!(b.on(Event::Tick), interrupt("a", Limit::WallTime));
    assert!(b.cpu_at(9_000_000).is_empty(), "already stopped");
    assert!(b.on(Event::OverCap(None)).is_empty());
    b.later(GRACE);
    assert_eq!(b.on(Event::Tick), kill("a"));
}

#[test]
fn nothing_is_counted_that_is_not_limited() {
    let mut b = Bench::new(Limits {
        cpu_time: None,
        wall_time: None,
        output: None,
        interrupt_grace: GRACE,
    });
    b.cpu.set(u64::MAX);
    b.on(Event::Busy("a".into()));
    assert!(!b.watch.watches_cpu());
    assert!(b.on(Event::CpuTick).is_empty());
    assert!(b.on(output("a", u64::MAX)).is_empty());
    assert_eq!(b.watch.next_wake(), None);
    // The client's capture past its own cap still stops the cell.
    assert_eq!(b.on(Event::OverCap(None)), interrupt("a", Limit::Output));
}

#[test]
fn a_real_end_is_believed_once_the_main_thread_stays_in_its_loop() {
    let t = Instant::now();
    let mut claim = EndClaim::default();
    assert!(!claim.claimed());
    assert_eq!(claim.look(Some(Back::No), t), End::Pending);
    assert!(claim.claimed());
    assert_eq!(
        claim.look(Some(Back::Waiting), t),
        End::Pending,
        "not before it settled"
    );
    let settled = t + Duration::from_millis(2);
    assert_eq!(claim.look(Some(Back::Waiting), settled), End::Believed);
    assert!(!claim.forged(settled));

    let mut hidden = EndClaim::default();
    assert_eq!(
        hidden.look(None, t),
        End::Believed,
        "the claim is all there is"
    );

    let mut interrupted = EndClaim::default();
    assert_eq!(interrupted.look(Some(Back::Waiting), t), End::Pending);
    let left = t + Duration::from_millis(1);
    assert_eq!(interrupted.look(Some(Back::No), left), End::Pending);
    let back = t + Duration::from_millis(3);
    assert_eq!(
        interrupted.look(Some(Back::Waiting), back),
        End::Pending,
        "leaving the loop restarts the settling"
    );
}

#[test]
fn an_end_whose_main_thread_does_not_come_back_is_forged() {
    let t = Instant::now();
    let mut claim = EndClaim::default();
    assert_eq!(claim.look(Some(Back::No), t), End::Pending);
    let late = t + Duration::from_millis(999);
    assert_eq!(claim.look(Some(Back::No), late), End::Pending);
    assert!(!claim.forged(late));
    let later = t + Duration::from_secs(1);
    assert_eq!(claim.look(Some(Back::No), later), End::Forged);
    // Back at last: believed, and forged all the same.
    let back = t + Duration::from_millis(1500);
    assert_eq!(claim.look(Some(Back::Waiting), back), End::Forged);
    let settled = back + Duration::from_millis(2);
    assert_eq!(claim.look(Some(Back::Waiting), settled), End::Believed);
    assert!(claim.forged(settled));
}

#[test]
fn a_loop_waiting_with_nothing_scheduled_is_believed_at_once() {
    let t = Instant::now();
    let mut claim = EndClaim::default();
    assert_eq!(claim.look(Some(Back::No), t), End::Pending);
    assert_eq!(claim.look(Some(Back::Idle), t), End::Believed);
    assert!(!claim.forged(t));

    // A wait with a timeout seen first still settles, until one without.
    let mut waiting = EndClaim::default();
    assert_eq!(waiting.look(Some(Back::Waiting), t), End::Pending);
    let next = t + Duration::from_millis(1);
    assert_eq!(waiting.look(Some(Back::Idle), next), End::Believed);

    // Long after the claim: believed, and forged all the same.
    let mut late = EndClaim::default();
    assert_eq!(late.look(Some(Back::No), t), End::Pending);
    let back = t + Duration::from_millis(1500);
    assert_eq!(late.look(Some(Back::Idle), back), End::Believed);
    assert!(late.forged(back));
}
