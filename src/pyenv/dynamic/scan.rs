//! What a cell asks to install and what it imports, found by `scan.py`
//! with IPython's input transformer and Python's own parser, run by the
//! slim image's interpreter (about 0.3-0.5 s per cell, mostly importing
//! IPython). The install lines come back neutralised: they never run in
//! the kernel.
//!
//! The cell is the model's and the scanner runs on the host, so it runs
//! bounded: no new privileges, at most [`SCAN_TIME`] of wall and CPU time,
//! [`SCAN_MEMORY`] of address space, no core file, no file written, a few
//! descriptors. It only parses the cell (never runs it); the bounds are for
//! a parser fed something built to exhaust it. It still runs as the
//! harness's user: the image lives under `$RETRACE_HOME`, which another uid
//! cannot reach outside a kernel's jail.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::decision::{Request, RequestSource};

const SCAN_PY: &str = include_str!("scan.py");

/// Wall and CPU time one scan may take (a normal one takes half a second).
pub const SCAN_TIME: Duration = Duration::from_secs(20);
/// Address space of the scanner (IPython's import needs about 100 MB).
pub const SCAN_MEMORY: u64 = 1 << 30;

/// One `%pip install …` / `!pip install …` / `pip install …` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallLine {
    /// 1-based line in the cell.
    pub line: u32,
    /// `pip`, `pip3`, `uv`, `conda`, `mamba`.
    pub tool: String,
    /// Everything after `install`, split as a shell would.
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// The top-level module.
    pub module: String,
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellScan {
    pub installs: Vec<InstallLine>,
    pub imports: Vec<Import>,
    /// The cell with every install line replaced by `pass` (indentation
    /// and line numbers kept): what the kernel runs.
    pub code: String,
    /// Set when the cell is not valid Python; what was found before the
    /// error is still reported.
    pub syntax_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    // The cause is in the message (as the CLI shows one line), so it is
    // not also a `source`.
    #[error("running the cell scanner with {python}: {cause}")]
    Run {
        python: String,
        cause: crate::util::bounded::BoundedError,
    },
    #[error("the cell scanner failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("the cell scanner wrote something unexpected")]
    Output(#[from] serde_json::Error),
}

/// Scans `cell` with `python` (an interpreter with IPython: the slim
/// image's).
pub fn scan(python: &Path, cell: &str) -> Result<CellScan, ScanError> {
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-c", SCAN_PY]);
    bound(&mut cmd);
    let out = crate::util::bounded::run_with_input(cmd, Some(cell.as_bytes().to_vec()), SCAN_TIME)
        .map_err(|cause| ScanError::Run {
            python: python.display().to_string(),
            cause,
        })?;
    if !out.status.success() {
        return Err(ScanError::Failed {
            status: out.status.to_string(),
            stderr: out.stderr.lines().last().unwrap_or_default().to_string(),
        });
    }
    Ok(serde_json::from_str(&out.stdout)?)
}

/// The scanner's bounds, applied between fork and exec.
// pre_exec is unsafe by nature; the block says why it is sound.
#[allow(unsafe_code)]
fn bound(cmd: &mut Command) {
    let cpu = SCAN_TIME.as_secs();
    // SAFETY: between fork and exec only async-signal-safe calls
    // (setrlimit, prctl), no allocation.
    unsafe {
        cmd.pre_exec(move || {
            let limit = |resource, value: u64| {
                let r = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_CPU, cpu)?;
            limit(libc::RLIMIT_AS, SCAN_MEMORY)?;
            limit(libc::RLIMIT_CORE, 0)?;
            limit(libc::RLIMIT_NOFILE, 64)?;
            limit(libc::RLIMIT_FSIZE, 0)?;
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Options of `pip install` that take a value which is not a requirement:
/// the value is recorded as part of an unsupported request.
const OPTIONS_WITH_VALUE: [&str; 12] = [
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--target",
];

impl InstallLine {
    /// The requests this line makes: one per requirement; flags such as
    /// `-q` or `--upgrade` are dropped, and options that point somewhere
    /// (`-r file`, `--index-url URL`) become requests of their own, which
    /// the policy refuses.
    pub fn requests(&self) -> Vec<Request> {
        let source = RequestSource::ExplicitLine { line: self.line };
        let mut out = Vec::new();
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            let (option, inline) = match arg.split_once('=') {
                Some((o, v)) if o.starts_with('-') => (o, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let requested = if OPTIONS_WITH_VALUE.contains(&option) {
                let value = inline.or_else(|| args.next().cloned()).unwrap_or_default();
                format!("{option} {value}")
            } else if arg.starts_with('-') {
                continue;
            } else {
                arg.clone()
            };
            out.push(Request {
                requested,
                source: source.clone(),
            });
        }
        out
    }
}

impl Import {
    pub fn request(&self) -> Request {
        Request {
            requested: self.module.clone(),
            source: RequestSource::MissingImport,
        }
    }
}

/// The top-level module of `ModuleNotFoundError: No module named 'x.y'`
/// (or an `ImportError` saying the same), else `None`.
pub fn missing_module(ename: &str, evalue: &str) -> Option<String> {
    if !matches!(ename, "ModuleNotFoundError" | "ImportError") {
        return None;
    }
    let rest = &evalue[evalue.find("No module named ")? + "No module named ".len()..];
    let name = rest
        .trim_start_matches(['\'', '"'])
        .split(['\'', '"', ';', ' '])
        .next()?;
    let top = name.split('.').next()?;
    (!top.is_empty()).then(|| top.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_modules_are_read_from_the_error() {
        let m = |e, v| missing_module(e, v);
        assert_eq!(
            m("ModuleNotFoundError", "No module named 'scipy'").as_deref(),
            Some("scipy")
        );
        assert_eq!(
            m(
                "ModuleNotFoundError",
                "No module named 'sklearn.linear_model'"
            )
            .as_deref(),
            Some("sklearn")
        );
        assert_eq!(
            m(
                "ImportError",
                "No module named 'yaml'; 'x' is not a package"
            )
            .as_deref(),
            Some("yaml")
        );
        assert_eq!(
            m("ImportError", "cannot import name 'foo' from 'bar'"),
            None
        );
        assert_eq!(m("KeyError", "No module named 'x'"), None);
    }

    #[test]
    fn install_lines_become_requests_without_their_flags() {
        let line = InstallLine {
            line: 3,
            tool: "pip".into(),
            args: [
                "-q",
                "scipy==1.17.1",
                "--upgrade",
                "-r",
                "req.txt",
                "--index-url=http://x",
                "sympy",
            ]
            .map(String::from)
            .to_vec(),
        };
        let got: Vec<String> = line.requests().into_iter().map(|r| r.requested).collect();
        assert_eq!(
            got,
            [
                "scipy==1.17.1",
                "-r req.txt",
                "--index-url http://x",
                "sympy"
            ]
        );
        assert!(line
            .requests()
            .iter()
            .all(|r| r.source == RequestSource::ExplicitLine { line: 3 }));
    }
}
