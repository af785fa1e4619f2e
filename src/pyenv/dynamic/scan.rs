//! What a cell asks to install and what it imports, found by `scan.py`
//! with IPython's input transformer and Python's own parser, run by the
//! slim image's interpreter (about 0.3-0.5 s per cell, mostly importing
//! IPython). The install lines come back neutralised: they never run in
//! the kernel.
//!
//! The cell is the model's, so the scanner runs in a jail of its own, as
//! the installer does but without network: the kernel user, a filesystem
//! view with only the slim image and the scan's runtime directory, no
//! network, a cgroup with [`SCAN_MEMORY`] and a few processes, killed past
//! [`SCAN_TIME`]. It only parses the cell (never runs it); the jail is for a
//! parser fed something built to exhaust or subvert it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::decision::{Request, RequestSource};
use super::oneshot::{self, OneShotError, Scratch};
use crate::pyenv::Image;
use crate::sandbox::Sandbox;

const SCAN_PY: &str = include_str!("scan.py");

/// Wall and CPU time one scan may take (a normal one takes half a second).
pub const SCAN_TIME: Duration = Duration::from_secs(20);
/// Memory of the scanner's jail (IPython's import needs about 100 MB).
pub const SCAN_MEMORY: u64 = 512 << 20;

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
    #[error("the cell scanner could not run: {0}")]
    Jail(#[source] OneShotError),
    #[error("the cell scanner failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("the cell scanner wrote something unexpected")]
    Output(#[from] serde_json::Error),
}

/// Only a cell that mentions `install` can hold an install line; the
/// scanner (a Python start, ~0.3 s) decides for the others.
pub fn might_install(code: &str) -> bool {
    code.contains("install")
}

/// Scans cells with the slim image's interpreter (it has IPython), each
/// in a jail of its own.
pub struct CellScanner {
    image: Image,
    sandbox: Arc<dyn Sandbox>,
    /// Where each scan's directories are made (and removed).
    work_dir: PathBuf,
}

impl CellScanner {
    pub fn new(image: Image, sandbox: Arc<dyn Sandbox>, work_dir: PathBuf) -> Self {
        CellScanner {
            image,
            sandbox,
            work_dir,
        }
    }

    pub async fn scan(&self, cell: &str) -> Result<CellScan, ScanError> {
        let jail = ScanError::Jail;
        let scratch = Scratch::create(&self.work_dir, "scan").map_err(|e| jail(e.into()))?;
        let script = scratch
            .write("scan.py", SCAN_PY)
            .map_err(|e| jail(e.into()))?;
        let input = scratch.write("cell.py", cell).map_err(|e| jail(e.into()))?;
        let launch =
            oneshot::offline_python(&self.image, &scratch, vec![script.into(), input.into()]);
        let limits = oneshot::parser_limits(SCAN_MEMORY, SCAN_TIME);
        let out = oneshot::run(
            self.sandbox.as_ref(),
            &limits,
            &scratch,
            &launch,
            "cell scanner",
        )
        .await
        .map_err(jail)?;
        if !out.status.success() {
            return Err(ScanError::Failed {
                status: out.status.to_string(),
                stderr: oneshot::last_stderr_line(&out.stderr, SCAN_MEMORY),
            });
        }
        Ok(serde_json::from_slice(&out.stdout)?)
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
    fn only_cells_that_mention_install_are_scanned() {
        assert!(might_install("%pip install scipy"));
        assert!(might_install("!pip3 install -q sympy"));
        assert!(!might_install("import scipy\nprint(scipy.__version__)"));
    }

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
