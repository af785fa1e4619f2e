//! What a build shows while it runs: indicatif bars on a terminal, one plain
//! line per phase when stderr is redirected (CI logs), nothing when the caller
//! asked for silence.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::ImageName;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Plain,
    Bars,
}

pub(crate) struct BuildProgress {
    mode: Mode,
    image: ImageName,
}

impl BuildProgress {
    pub fn new(image: ImageName, enabled: bool) -> Self {
        let mode = match (enabled, std::io::stderr().is_terminal()) {
            (false, _) => Mode::Off,
            (true, false) => Mode::Plain,
            (true, true) => Mode::Bars,
        };
        BuildProgress { mode, image }
    }

    /// A one-off line (e.g. waiting for another process's build).
    pub fn note(&self, message: &str) {
        if self.mode != Mode::Off {
            eprintln!("{}: {message}", self.image);
        }
    }

    /// Starts a phase: a bar when `total` is known, a spinner otherwise.
    pub fn phase(&self, label: &str, total: Option<u64>) -> Phase {
        let bar = match self.mode {
            Mode::Bars => {
                let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
                let template = if total.is_some() {
                    "{spinner:.cyan} {prefix} [{bar:25.cyan/blue}] {pos}/{len} {wide_msg:.dim} {elapsed}"
                } else {
                    "{spinner:.cyan} {prefix} {wide_msg:.dim} {elapsed}"
                };
                bar.set_style(style(template));
                bar.set_prefix(format!("{}: {label}", self.image));
                bar.enable_steady_tick(Duration::from_millis(100));
                Some(bar)
            }
            Mode::Plain => {
                eprintln!("{}: {label}...", self.image);
                None
            }
            Mode::Off => None,
        };
        Phase {
            bar,
            mode: self.mode,
            label: format!("{}: {label}", self.image),
            started: Instant::now(),
            finished: false,
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("progress templates are valid")
        .progress_chars("=> ")
}

pub(crate) struct Phase {
    bar: Option<ProgressBar>,
    mode: Mode,
    label: String,
    started: Instant,
    finished: bool,
}

impl Phase {
    pub fn set_message(&self, message: impl Into<String>) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.into());
        }
    }

    pub fn inc(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    pub fn finish(mut self) {
        self.finished = true;
        let took = format!("{:.1}s", self.started.elapsed().as_secs_f64());
        match (&self.bar, self.mode) {
            (Some(bar), _) => {
                bar.set_style(style("  {prefix} {msg}"));
                bar.finish_with_message(format!("done in {took}"));
            }
            (None, Mode::Plain) => eprintln!("{} done in {took}", self.label),
            _ => {}
        }
    }
}

impl Drop for Phase {
    /// A phase dropped unfinished failed: leave its last state on screen.
    fn drop(&mut self) {
        if !self.finished {
            if let Some(bar) = &self.bar {
                bar.set_style(style("! {prefix} {msg}"));
                bar.abandon_with_message("failed");
            }
        }
    }
}
