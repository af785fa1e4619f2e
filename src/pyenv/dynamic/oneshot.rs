//! One helper process of the `dynamic` strategy (the installer, the cell
//! scanner) in a jail of its own: a fresh runtime, work and home directory
//! under a work directory, the process run to its end or its time limit,
//! its output kept, its processes killed and its directories removed.
//! Also used outside the strategy by parsers of model code that run the
//! slim image's interpreter offline (the repair masking check).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::pyenv::Image;
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
pub(crate) struct Scratch {
    pub(crate) layout: KernelLayout,
    base: PathBuf,
}

impl Scratch {
    /// `<work_dir>/<prefix>-<pid>-<uuid>/{rt,work,home}`, private to the
    /// harness until the jail hands the runtime directory to its user. The
    /// pid lets a later retrace see that the one that made it is gone.
    pub(crate) fn create(work_dir: &Path, prefix: &str) -> Result<Scratch, IoError> {
        let id = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
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
    pub(crate) fn write(&self, name: &str, text: &str) -> Result<PathBuf, IoError> {
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
pub(crate) async fn run(
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

/// `python -I ARGS` of `image` with no network, nothing bound but the
/// image and the scratch directories, and an environment of its own.
pub(crate) fn offline_python(
    image: &Image,
    scratch: &Scratch,
    args: Vec<OsString>,
) -> LaunchCommand {
    let mut all = vec![OsString::from("-I")];
    all.extend(args);
    LaunchCommand {
        program: image.python(),
        args: all,
        env: vec![
            ("HOME".into(), scratch.layout.home_dir.clone().into()),
            ("LANG".into(), "C.UTF-8".into()),
        ],
        image_dir: image.dir.clone(),
        ro_binds: Vec::new(),
        network: false,
    }
}

/// The limits of a parser of model code: `memory`, `time` of wall and CPU
/// time, a few processes, one CPU and little disk.
pub(crate) fn parser_limits(memory: u64, time: Duration) -> SandboxLimits {
    SandboxLimits {
        memory_bytes: memory,
        pids: 16,
        cpus: 1.0,
        timeout: time,
        cpu_time: time,
        disk_bytes: 16 << 20,
        ..SandboxLimits::default()
    }
}

/// The last line a failed helper wrote on stderr (where Python puts the
/// exception), or a note that it wrote nothing within a jail of `memory`.
pub(crate) fn last_stderr_line(stderr: &[u8], memory: u64) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    last.map_or_else(
        || format!("no message (its jail holds {} MiB)", memory >> 20),
        str::to_string,
    )
}

fn private_dir(dir: &Path) -> Result<(), IoError> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .at("creating", dir)
}
