//! One helper process of the `dynamic` strategy (the installer, the cell
//! scanner) in a jail of its own: a fresh runtime, work and home directory
//! under a work directory, the process run to its end or its time limit,
//! its output kept, its processes killed and its directories removed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::sandbox::{KernelLayout, LaunchCommand, Sandbox, SandboxError, SandboxLimits};
use crate::util::{IoContext, IoError};

#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("ran out of time ({} s) and was killed", .0.as_secs())]
    Timeout(Duration),
}

/// The directories of one helper run, removed when dropped.
pub(super) struct Scratch {
    pub(super) layout: KernelLayout,
    base: PathBuf,
}

impl Scratch {
    /// `<work_dir>/<prefix>-<uuid>/{rt,work,home}`, private to the harness
    /// until the jail hands the runtime directory to its user.
    pub(super) fn create(work_dir: &Path, prefix: &str) -> Result<Scratch, IoError> {
        let id = format!("{prefix}-{}", uuid::Uuid::new_v4().simple());
        let base = work_dir.join(&id);
        let scratch = Scratch {
            layout: KernelLayout {
                id,
                runtime_dir: base.join("rt"),
                work_dir: base.join("work"),
                home_dir: base.join("home"),
            },
            base,
        };
        for dir in [
            &scratch.layout.runtime_dir,
            &scratch.layout.work_dir,
            &scratch.layout.home_dir,
        ] {
            private_dir(dir)?;
        }
        Ok(scratch)
    }

    /// Writes a file the helper reads into its runtime directory.
    pub(super) fn write(&self, name: &str, text: &str) -> Result<PathBuf, IoError> {
        let path = self.layout.runtime_dir.join(name);
        fs::write(&path, text).at("writing", &path)?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

/// Runs `launch` in a new jail with `limits` (its `timeout` bounds the
/// run); every process of the jail is killed and the jail released after.
pub(super) async fn run(
    sandbox: &dyn Sandbox,
    limits: &SandboxLimits,
    scratch: &Scratch,
    launch: &LaunchCommand,
    what: &str,
) -> Result<Output, OneShotError> {
    let layout = &scratch.layout;
    let jail = sandbox.jail(layout, limits)?;
    let ran = async {
        let mut cmd = jail.command(launch, layout)?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn().io_context(|| format!("starting the {what}"))?;
        match tokio::time::timeout(limits.timeout, child.wait_with_output()).await {
            Err(_) => Err(OneShotError::Timeout(limits.timeout)),
            Ok(out) => Ok(out.io_context(|| format!("waiting for the {what}"))?),
        }
    }
    .await;
    jail.kill_all(None);
    let _ = jail.release();
    ran
}

fn private_dir(dir: &Path) -> Result<(), IoError> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .at("creating", dir)
}
