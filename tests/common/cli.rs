//! The `retrace` binary as a test runs it: `common::retrace(args)`, then
//! optionally stdin, a working directory, environment and an image built
//! first, then `.run()` for the exit code and the text of both streams.
//! For tests of the CLI itself (exit codes, flags, output); a test that only
//! needs an evaluation runs it in process (`common::run`).

use std::ffi::OsStr;
use std::fmt;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use retrace::pyenv::ImageName;

/// A `retrace` command line about to run.
pub struct Cli {
    command: Command,
    stdin: Option<String>,
    image: Option<ImageName>,
}

/// The `retrace` binary with `args`; without [`Cli::stdin`] its stdin is
/// empty.
pub fn retrace<I, S>(args: I) -> Cli
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(env!("CARGO_BIN_EXE_retrace"));
    command.args(args);
    Cli {
        command,
        stdin: None,
        image: None,
    }
}

impl Cli {
    /// Feeds `text` on stdin.
    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_string());
        self
    }

    /// Runs in `dir`.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Builds `name` through [`super::image`] before the binary starts, so
    /// that parallel tests do not race to build it.
    pub fn image(mut self, name: ImageName) -> Self {
        self.image = Some(name);
        self
    }

    /// Runs the command to its end.
    pub fn run(self) -> Ran {
        self.run_until(None).expect("no deadline")
    }

    /// Runs the command, killing it (SIGKILL) if it has not ended after
    /// `limit`: `Err` with what it wrote until then. For a test whose
    /// failure would be a hang.
    pub fn run_within(self, limit: Duration) -> Result<Ran, Ran> {
        self.run_until(Some(Instant::now() + limit))
    }

    fn run_until(mut self, deadline: Option<Instant>) -> Result<Ran, Ran> {
        if let Some(name) = self.image {
            super::image(name);
        }
        let stdin = if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self
            .command
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("retrace starts");
        // Written from a thread: a child that prints before it has read all
        // of its input would otherwise block on a full pipe, and so would we.
        let feeder = self.stdin.take().map(|text| {
            let mut pipe = child.stdin.take().expect("piped stdin");
            std::thread::spawn(move || pipe.write_all(text.as_bytes()))
        });
        // Read from threads, so that a full pipe never blocks the child.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut text);
                }
                text
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let mut timed_out = false;
        let mut peak = PeakMemory::of(child.id());
        let status = loop {
            peak.sample();
            if let Some(status) = child.try_wait().expect("retrace runs") {
                break status;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("retrace runs");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(feeder) = feeder {
            // A child that exits without reading all of it is not an error here.
            let _ = feeder.join();
        }
        let out = Output {
            status,
            stdout: stdout.join().expect("stdout read"),
            stderr: stderr.join().expect("stderr read"),
        };
        let mut ran = Ran::from(out);
        ran.peak_bytes = peak.bytes;
        if timed_out {
            Err(ran)
        } else {
            Ok(ran)
        }
    }
}

/// What a finished `retrace` command left.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The exit code, -1 when a signal ended it.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The `retrace` process's own peak resident memory (`VmHWM`, its
    /// children not counted), as last read before it ended; 0 when the
    /// command was not run by [`Cli`].
    pub peak_bytes: u64,
}

impl Ran {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == 0
    }
}

/// A `retrace` child the test spawned itself (to signal it, say).
impl From<Output> for Ran {
    fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            peak_bytes: 0,
        }
    }
}

/// The exit code and both streams, for assertion messages.
impl fmt::Display for Ran {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A running process's all-time peak resident memory, read from
/// `/proc/<pid>/status` (`VmHWM`) each time the runner polls it. The figure
/// only grows, so the last reading before the exit holds every spike but
/// one in the last poll period.
struct PeakMemory {
    status: std::path::PathBuf,
    bytes: u64,
}

impl PeakMemory {
    fn of(pid: u32) -> PeakMemory {
        PeakMemory {
            status: std::path::PathBuf::from(format!("/proc/{pid}/status")),
            bytes: 0,
        }
    }

    fn sample(&mut self) {
        let Ok(text) = std::fs::read_to_string(&self.status) else {
            return;
        };
        let kib = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        if let Some(kib) = kib {
            self.bytes = self.bytes.max(kib * 1024);
        }
    }
}
