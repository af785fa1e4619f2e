//! What a build shows while it runs: indicatif bars on a terminal, one plain
//! line per phase when stderr is redirected (CI logs), nothing when the caller
//! asked for silence. Shared by image builds (labelled by image name) and the
//! local model's prepare (labelled by its spec, with byte-sized bars for the
//! weights), so both look and behave the same.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    Plain,
    Bars,
}

pub(crate) struct Progress {
    mode: Mode,
    prefix: String,
}

/// How a phase's position is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Total {
    /// Unknown: a spinner.
    None,
    Items(u64),
    Bytes(u64),
}

impl Progress {
    pub fn new(prefix: &str, enabled: bool) -> Self {
        let mode = match (enabled, std::io::stderr().is_terminal()) {
            (false, _) => Mode::Off,
            (true, false) => Mode::Plain,
            (true, true) => Mode::Bars,
        };
        Progress {
            mode,
            prefix: prefix.to_string(),
        }
    }

    /// A one-off line (e.g. waiting for another process's build).
    pub fn note(&self, message: &str) {
        if self.mode != Mode::Off {
            eprintln!("{}: {message}", self.prefix);
        }
    }

    /// Starts a phase: a bar when the total is known, a spinner otherwise.
    pub fn phase(&self, label: &str, total: Total) -> Phase {
        let bar = match self.mode {
            Mode::Bars => {
                let len = match total {
                    Total::None => None,
                    Total::Items(n) | Total::Bytes(n) => Some(n),
                };
                // One stack of bars for the process: an image build and
                // the model's preparation run at once on first use.
                let bar = bars().add(match len {
                    Some(n) => ProgressBar::new(n),
                    None => ProgressBar::no_length(),
                });
                bar.set_style(style(match total {
                    Total::None => SPINNER,
                    Total::Items(_) => ITEMS,
                    Total::Bytes(_) => BYTES,
                }));
                bar.set_prefix(format!("{}: {label}", self.prefix));
                bar.enable_steady_tick(Duration::from_millis(100));
                Some(bar)
            }
            Mode::Plain => {
                eprintln!("{}: {label}...", self.prefix);
                None
            }
            Mode::Off => None,
        };
        Phase {
            bar,
            mode: self.mode,
            label: format!("{}: {label}", self.prefix),
            started: Instant::now(),
            finished: false,
        }
    }
}

/// Every bar of the process, drawn together on stderr.
fn bars() -> &'static MultiProgress {
    static BARS: std::sync::OnceLock<MultiProgress> = std::sync::OnceLock::new();
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

const SPINNER: &str = "{spinner:.cyan} {prefix} {wide_msg:.dim} {elapsed}";
const ITEMS: &str =
    "{spinner:.cyan} {prefix} [{bar:25.cyan/blue}] {pos}/{len} {wide_msg:.dim} {elapsed}, ~{eta} left";
const BYTES: &str = "{spinner:.cyan} {prefix} [{bar:25.cyan/blue}] {bytes}/{total_bytes} {wide_msg:.dim} {elapsed}, ~{eta} left";

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

    /// `done` of `total` steps, once a phase started without a total
    /// learns it (a compiler's `[done/total]`): the spinner becomes a bar
    /// with the time left.
    pub fn set_steps(&self, done: u64, total: u64) {
        if let Some(bar) = &self.bar {
            if bar.length() != Some(total) {
                bar.set_length(total);
                bar.set_style(style(ITEMS));
            }
            bar.set_position(done);
        }
    }

    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    /// A line for the plain (CI log) mode too: for rare, important events
    /// such as "compiling llama.cpp", which can take many minutes.
    pub fn announce(&self, message: &str) {
        match (&self.bar, self.mode) {
            (Some(bar), _) => bar.set_message(message.to_string()),
            (None, Mode::Plain) => eprintln!("{}: {message}", self.label),
            _ => {}
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
