//! Live progress: tasks done of total, current accuracy, kills so far, ETA.

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

use crate::record::AttemptRecord;

pub struct Progress {
    bar: ProgressBar,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    done: u64,
    correct: u64,
    kills: u64,
    infra: u64,
}

impl Progress {
    /// `done` tasks were finished before (a resumed run).
    pub fn new(total: u64, done: u64, visible: bool) -> Self {
        let bar = if visible {
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
        Self {
            bar,
            state: Mutex::new(State::default()),
        }
    }

    pub fn on_record(&self, r: &AttemptRecord) {
        let mut s = self.state.lock().unwrap();
        if r.outcome.as_ref().is_some_and(|o| o.verdict.is_kill()) {
            s.kills += 1;
        }
        if r.is_final() {
            s.done += 1;
            s.correct += r.correct as u64;
            s.infra += (r.infra_error.is_some()) as u64;
            self.bar.inc(1);
        }
        let acc = if s.done == 0 {
            0.0
        } else {
            100.0 * s.correct as f64 / s.done as f64
        };
        self.bar.set_message(format!(
            "acc {acc:.1}%  kills {}  infra {}",
            s.kills, s.infra
        ));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
