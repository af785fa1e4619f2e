//! The log of a build (an image build or the local model's prepare): every
//! command it runs and all of their output go to one file, and a command
//! that fails is reported with the last lines of that file, which is where
//! pip and compilers say what went wrong.
//!
//! The caller turns a [`StepError`] into its own error type: only it knows
//! which build failed and how to say so.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use super::PyenvError;
use crate::util::IoContext;

/// Lines of the log quoted in an error.
pub(crate) const TAIL_LINES: usize = 25;

/// Why a logged command did not succeed.
#[derive(Debug)]
pub(crate) enum StepError {
    /// The log itself could not be written to.
    Log(PyenvError),
    /// The command could not run, or exited unsuccessfully: what to say
    /// about it (the log's tail is the caller's to add).
    Failed(String),
}

impl StepError {
    /// The caller's error: a log error as is, a failure through `failed`
    /// (which names the step and quotes the log).
    pub fn into_error<E: From<PyenvError>>(self, failed: impl FnOnce(String) -> E) -> E {
        match self {
            StepError::Log(e) => e.into(),
            StepError::Failed(detail) => failed(detail),
        }
    }
}

/// A log file: every command and all of its output.
pub(crate) struct BuildLog {
    pub path: PathBuf,
    file: File,
}

impl BuildLog {
    /// Truncates: one log per attempt. Reopened in append mode because
    /// children write to it through their own handles.
    pub fn create(path: &Path) -> Result<BuildLog, PyenvError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).at("creating", dir)?;
        }
        let file = File::create(path)
            .and_then(|_| OpenOptions::new().append(true).open(path))
            .at("creating the build log", path)?;
        Ok(BuildLog {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn line(&self, text: &str) {
        let _ = writeln!(&self.file, "{text}");
    }

    pub fn stdio(&self) -> Result<Stdio, PyenvError> {
        self.file
            .try_clone()
            .map(Stdio::from)
            .at("sharing the build log", &self.path)
            .map_err(PyenvError::from)
    }

    pub fn tail(&self) -> LogTail {
        LogTail::of(&self.path)
    }

    /// Runs `cmd` to the end with its output in the log.
    pub fn run(&self, cmd: &mut Command) -> Result<(), StepError> {
        let mut child = self.spawn(cmd)?;
        let status = child
            .wait()
            .map_err(|e| StepError::Failed(format!("waiting: {e}")))?;
        self.check_status(status)
    }

    /// Starts `cmd` with stdout and stderr in the log, for a caller that
    /// watches it while it runs.
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child, StepError> {
        let stdout = self.stdio().map_err(StepError::Log)?;
        self.spawn_with(cmd, stdout)
    }

    /// Starts `cmd` with stderr in the log and stdout piped to the caller,
    /// which reads it (and should copy it into the log with [`Self::line`]).
    pub fn spawn_reading_stdout(&self, cmd: &mut Command) -> Result<Child, StepError> {
        self.spawn_with(cmd, Stdio::piped())
    }

    fn spawn_with(&self, cmd: &mut Command, stdout: Stdio) -> Result<Child, StepError> {
        self.line(&format!("$ {}", describe(cmd)));
        cmd.stdin(Stdio::null())
            .stdout(stdout)
            .stderr(self.stdio().map_err(StepError::Log)?)
            .spawn()
            .map_err(|e| {
                StepError::Failed(format!(
                    "cannot run {}: {e}",
                    Path::new(cmd.get_program()).display()
                ))
            })
    }

    /// Logs how a command ended; an unsuccessful end is a failure.
    pub fn check_status(&self, status: ExitStatus) -> Result<(), StepError> {
        self.line(&format!("# {status}"));
        if status.success() {
            Ok(())
        } else {
            Err(StepError::Failed(format!("command exited with {status}")))
        }
    }
}

/// A failed step's log as its error shows it: where the whole log is, and
/// its last lines.
#[derive(Debug, Clone)]
pub struct LogTail {
    pub log: PathBuf,
    pub tail: String,
}

impl LogTail {
    pub(crate) fn of(log: &Path) -> LogTail {
        LogTail {
            log: log.to_path_buf(),
            tail: tail(log, TAIL_LINES),
        }
    }
}

impl std::fmt::Display for LogTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "full log: {}\n--- last lines of the log ---\n{}",
            self.log.display(),
            self.tail
        )
    }
}

/// The last `lines` non-blank lines of a file.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    kept[kept.len().saturating_sub(lines)..].join("\n")
}

/// A command as a shell would need it, for the log.
pub(crate) fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| {
            let a = a.to_string_lossy();
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("{a:?}")
            } else {
                a.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_and_command_description() {
        let dir = tempfile::tempdir().unwrap();
        let log = BuildLog::create(&dir.path().join("logs/x.log")).unwrap();
        for i in 0..40 {
            log.line(&format!("line {i}"));
        }
        let tail = tail(&log.path, 3);
        assert_eq!(tail, "line 37\nline 38\nline 39");

        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", "import sys; print(1)"]);
        assert_eq!(
            describe(&cmd),
            "/usr/bin/python3 -c \"import sys; print(1)\""
        );
    }

    #[test]
    fn failed_commands_are_logged_with_their_status() {
        let dir = tempfile::tempdir().unwrap();
        let log = BuildLog::create(&dir.path().join("x.log")).unwrap();
        log.run(Command::new("sh").args(["-c", "echo hello"]))
            .unwrap();
        match log.run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"])) {
            Err(StepError::Failed(detail)) => assert!(detail.contains("exit"), "{detail}"),
            other => panic!("{other:?}"),
        }
        match log.run(&mut Command::new("/nonexistent/program")) {
            Err(StepError::Failed(detail)) => assert!(detail.starts_with("cannot run"), "{detail}"),
            other => panic!("{other:?}"),
        }
        let text = tail(&log.path, 10);
        assert!(
            text.contains("$ sh -c \"echo hello\"\nhello\n# exit status: 0"),
            "{text}"
        );
        assert!(text.contains("oops"), "{text}");
    }
}
