//! Live progress: tasks done of total, current accuracy, kills so far, ETA.
//! A bar on a terminal; when stderr is redirected (CI logs, `> log 2>&1`)
//! a plain line at most every few seconds instead, so a long run is never
//! silent and a fast one prints only its final line.

use std::io::IsTerminal;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::record::AttemptRecord;

/// At most one plain line per interval, and only when something happened.
const LINE_INTERVAL: Duration = Duration::from_secs(10);
/// A line even when nothing happened: a slow task still shows the run lives.
const HEARTBEAT: Duration = Duration::from_secs(60);

pub struct Progress {
    bar: ProgressBar,
    state: Arc<Mutex<State>>,
    /// The plain-line writer (stderr not a terminal): a stop signal and its thread.
    lines: Mutex<Option<(Sender<()>, JoinHandle<()>)>>,
}

struct State {
    total: u64,
    /// Finished before this session (a resumed run).
    before: u64,
    done: u64,
    correct: u64,
    kills: u64,
    infra: u64,
    /// Records seen: what tells the line writer something happened.
    records: u64,
    started: Instant,
}

impl Progress {
    /// `done` tasks were finished before (a resumed run). `visible`: a bar
    /// when stderr is a terminal, plain lines otherwise.
    pub fn new(total: u64, done: u64, visible: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = if visible && terminal {
            ProgressBar::new(total)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} tasks  {msg}  ETA {eta}",
            )
            .expect("valid template"),
        );
        bar.set_position(done);
        let state = Arc::new(Mutex::new(State {
            total,
            before: done,
            done: 0,
            correct: 0,
            kills: 0,
            infra: 0,
            records: 0,
            started: Instant::now(),
        }));
        let lines = (visible && !terminal).then(|| spawn_lines(state.clone()));
        Self {
            bar,
            state,
            lines: Mutex::new(lines),
        }
    }

    pub fn on_record(&self, r: &AttemptRecord) {
        let mut s = self.state.lock().unwrap();
        s.records += 1;
        if r.outcome.as_ref().is_some_and(|o| o.verdict.is_kill()) {
            s.kills += 1;
        }
        if r.is_final() {
            s.done += 1;
            s.correct += r.correct as u64;
            s.infra += (r.infra_error.is_some()) as u64;
            self.bar.inc(1);
        }
        self.bar.set_message(format!(
            "acc {:.1}%  kills {}  infra {}",
            s.accuracy(),
            s.kills,
            s.infra
        ));
    }

    /// Clears the bar, or writes the final plain line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        if let Some((stop, thread)) = self.lines.lock().unwrap().take() {
            drop(stop);
            let _ = thread.join();
            eprintln!("{}", self.state.lock().unwrap().line(Instant::now()));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Dropping the sender ends the thread at its next wake-up.
        if let Ok(mut lines) = self.lines.lock() {
            lines.take();
        }
    }
}

/// The thread that writes a plain line when one is due (see [`due`]),
/// until its sender is dropped.
fn spawn_lines(state: Arc<Mutex<State>>) -> (Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut last_line = Instant::now();
        let mut last_records = 0;
        while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(LINE_INTERVAL) {
            let now = Instant::now();
            let s = state.lock().unwrap();
            if due(now, last_line, s.records != last_records) {
                eprintln!("{}", s.line(now));
                last_line = now;
                last_records = s.records;
            }
        }
    });
    (stop, thread)
}

/// Whether a plain line is due at `now`: an interval after the last one
/// when records came in since, a heartbeat after it otherwise.
fn due(now: Instant, last_line: Instant, changed: bool) -> bool {
    let since = now.saturating_duration_since(last_line);
    since >= if changed { LINE_INTERVAL } else { HEARTBEAT }
}

impl State {
    /// Accuracy of the tasks finished in this session, in percent.
    fn accuracy(&self) -> f64 {
        if self.done == 0 {
            0.0
        } else {
            100.0 * self.correct as f64 / self.done as f64
        }
    }

    /// `[1m 10s] 12/40 tasks, Acc 58%, 1 kill, ETA 3m` (infrastructure
    /// errors only when there are some; no accuracy or ETA before a task
    /// of this session finished).
    fn line(&self, now: Instant) -> String {
        let elapsed = now.saturating_duration_since(self.started);
        let position = self.before + self.done;
        // Accuracy of this session's tasks: none yet is no accuracy, not 0%.
        let accuracy = match self.done {
            0 => "-".to_string(),
            _ => format!("{:.0}%", self.accuracy()),
        };
        let mut line = format!(
            "[{}] {position}/{} tasks, Acc {accuracy}, {} kill{}",
            short(elapsed),
            self.total,
            self.kills,
            if self.kills == 1 { "" } else { "s" },
        );
        if self.infra > 0 {
            line.push_str(&format!(", {} infra error", self.infra));
            if self.infra > 1 {
                line.push('s');
            }
        }
        let left = self.total.saturating_sub(position);
        if self.done > 0 && left > 0 {
            let eta = elapsed.mul_f64(left as f64 / self.done as f64);
            line.push_str(&format!(", ETA {}", short(eta)));
        }
        line
    }
}

/// A duration as a person reads it in a log: `45s`, `3m 5s`, `2h 7m`.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m {}s", s / 60, s % 60)
    } else {
        format!("{}h {}m", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(started: Instant) -> State {
        State {
            total: 40,
            before: 2,
            done: 10,
            correct: 7,
            kills: 1,
            infra: 0,
            records: 14,
            started,
        }
    }

    #[test]
    fn a_line_has_the_facts_of_the_bar() {
        let t0 = Instant::now();
        let mut s = state(t0);
        let now = t0 + Duration::from_secs(100);
        // 28 left at 10 s a task.
        assert_eq!(
            s.line(now),
            "[1m 40s] 12/40 tasks, Acc 70%, 1 kill, ETA 4m 40s"
        );
        s.kills = 2;
        s.infra = 1;
        assert_eq!(
            s.line(now),
            "[1m 40s] 12/40 tasks, Acc 70%, 2 kills, 1 infra error, ETA 4m 40s"
        );
        s.done = 38;
        assert!(s.line(now).ends_with("1 infra error"), "no ETA when done");
        s.done = 0;
        assert_eq!(
            s.line(now),
            "[1m 40s] 2/40 tasks, Acc -, 2 kills, 1 infra error",
            "no accuracy or ETA before a task ended"
        );
    }

    #[test]
    fn lines_are_rate_limited() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert!(!due(at(5), t0, true));
        assert!(due(at(10), t0, true));
        assert!(!due(at(30), t0, false), "nothing new: no line yet");
        assert!(due(at(60), t0, false), "a heartbeat");
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(Duration::from_secs(45)), "45s");
        assert_eq!(short(Duration::from_secs(185)), "3m 5s");
        assert_eq!(short(Duration::from_secs(7620)), "2h 7m");
    }
}
