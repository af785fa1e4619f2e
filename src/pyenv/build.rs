//! Building one image in a private temporary directory: venv, pinned wheels,
//! checks, caches, then a single rename that publishes it. The caller holds
//! the image's build lock.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use walkdir::WalkDir;

use super::marker::Marker;
use super::progress::{Phase, Progress, Total};
use super::publish::publish;
use super::step::{BuildLog, StepError, TAIL_LINES};
use super::venv::{self, rewrite_prefix};
use super::{ImageName, Interpreter, Lock, PyenvError, KERNEL_CONFIG, MPL_CACHE_DIR};

pub(crate) struct Plan<'a> {
    pub name: ImageName,
    pub hash: &'a str,
    pub lock_text: &'a str,
    pub lock: &'a Lock,
    pub python: &'a Interpreter,
    pub tmp_dir: PathBuf,
    pub final_dir: PathBuf,
    pub log_path: PathBuf,
}

/// Builds into `plan.tmp_dir` and renames it to `plan.final_dir`. On failure
/// the temporary directory is removed; the log stays.
pub(crate) fn run(plan: &Plan, progress: &Progress) -> Result<(), PyenvError> {
    let log = BuildLog::create(&plan.log_path)?;
    let builder = Builder {
        plan,
        log,
        progress,
    };
    tracing::info!(image = %plan.name, hash = plan.hash, into = %plan.final_dir.display(), "building the image");
    let started = std::time::Instant::now();
    let result = builder.build();
    if result.is_ok() {
        tracing::info!(image = %plan.name, s = started.elapsed().as_secs(), "image built");
    }
    if result.is_err() {
        let _ = fs::remove_dir_all(&plan.tmp_dir);
    }
    result
}

struct Builder<'a> {
    plan: &'a Plan<'a>,
    log: BuildLog,
    progress: &'a Progress,
}

impl Builder<'_> {
    fn build(&self) -> Result<(), PyenvError> {
        let plan = self.plan;
        let tmp = &plan.tmp_dir;
        self.log.line(&format!(
            "# retrace image build: {}-{} with {} ({}, {})\n# into {}",
            plan.name,
            plan.hash,
            plan.python.path.display(),
            plan.python.version,
            plan.python.tag,
            tmp.display()
        ));
        fs::create_dir_all(tmp).map_err(|e| PyenvError::io_at("creating", tmp, e))?;
        let lock_file = tmp.join("requirements.lock");
        fs::write(&lock_file, plan.lock_text)
            .map_err(|e| PyenvError::io_at("writing", &lock_file, e))?;
        let config = tmp.join("kernel_config.py");
        fs::write(&config, KERNEL_CONFIG).map_err(|e| PyenvError::io_at("writing", &config, e))?;

        let venv = tmp.join("venv");
        let phase = self.progress.phase("create venv", Total::None);
        self.run_logged("create the venv", &mut venv::create(plan.python, &venv))?;
        phase.finish();

        let python = venv.join("bin").join("python");
        self.install(&python, &lock_file)?;

        let with_matplotlib = plan.lock.contains("matplotlib");
        let phase = self.progress.phase(
            if with_matplotlib {
                "check, warm font cache"
            } else {
                "check"
            },
            Total::None,
        );
        phase.set_message("pip check");
        self.run_logged(
            "check installed requirements (pip check)",
            &mut venv::pip_check(&python),
        )?;
        phase.set_message(if with_matplotlib {
            "import ipykernel, build font cache"
        } else {
            "import ipykernel"
        });
        let mut script = String::from("import ipykernel.kernelapp\n");
        let mpl_dir = tmp.join(MPL_CACHE_DIR);
        let mut warm = Command::new(&python);
        if with_matplotlib {
            // Builds the font cache once here instead of on every task's
            // first plot; kernels copy it into their own MPLCONFIGDIR.
            script.push_str("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot\n");
            warm.env("MPLCONFIGDIR", &mpl_dir);
        }
        warm.env_remove("MPLBACKEND").args(["-I", "-c", &script]);
        self.run_logged("import ipykernel and warm caches", &mut warm)?;
        if with_matplotlib && !has_font_cache(&mpl_dir) {
            return Err(self.failed(
                "warm the matplotlib font cache",
                format!("no fontlist-*.json appeared in {}", mpl_dir.display()),
            ));
        }
        phase.finish();

        let phase = self.progress.phase("finalize", Total::None);
        self.finalize(with_matplotlib)?;
        phase.finish();
        Ok(())
    }

    fn install(&self, python: &Path, lock_file: &Path) -> Result<(), PyenvError> {
        let step = "install the locked packages";
        let total = self.plan.lock.len();
        let mut cmd = venv::pip(python, "install");
        cmd.args(["--only-binary", ":all:", "--no-deps", "-r"])
            .arg(lock_file);
        tracing::info!(image = %self.plan.name, packages = total, "pip install");
        tracing::debug!(command = ?cmd, "pip install command");
        let mut child = self
            .log
            .spawn_reading_stdout(&mut cmd)
            .map_err(|e| self.step_error(step, e))?;
        let stdout = child.stdout.take().expect("stdout is piped");

        let mut fetch: Option<Phase> = Some(self.progress.phase(
            &format!("fetch {total} packages"),
            Total::Items(total as u64),
        ));
        let mut unpack: Option<Phase> = None;
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line);
            self.log.line(&line);
            if let Some(requirement) = line.strip_prefix("Collecting ") {
                if let Some(bar) = &fetch {
                    bar.inc(1);
                    bar.set_message(requirement.trim().to_string());
                }
            } else if line.starts_with("Installing collected packages") {
                if let Some(bar) = fetch.take() {
                    bar.finish();
                }
                unpack = Some(
                    self.progress
                        .phase(&format!("install {total} packages"), Total::None),
                );
            }
        }
        let status = child
            .wait()
            .map_err(|e| self.failed(step, format!("waiting for pip: {e}")))?;
        self.log
            .check_status(status)
            .map_err(|_| self.failed(step, format!("pip install exited with {status}")))?;
        for phase in [fetch, unpack].into_iter().flatten() {
            phase.finish();
        }
        Ok(())
    }

    /// Makes the temporary tree valid under its final name, readable by the
    /// kernel user, marked complete, then publishes it with one rename.
    fn finalize(&self, mpl_cache: bool) -> Result<(), PyenvError> {
        let plan = self.plan;
        let (tmp, dest) = (&plan.tmp_dir, &plan.final_dir);
        let venv = tmp.join("venv");
        rewrite_prefix(&venv, &tmp.to_string_lossy(), &dest.to_string_lossy())
            .map_err(|e| PyenvError::io_at("rewriting paths under", &venv, e))?;
        make_world_readable(tmp).map_err(|e| PyenvError::io_at("chmod a+rX", tmp, e))?;
        Marker::new(
            plan.name,
            plan.hash,
            plan.python,
            &plan.lock.entries,
            mpl_cache,
        )
        .write(tmp)
        .map_err(|e| PyenvError::io_at("writing the marker in", tmp, e))?;
        if dest.exists() {
            // Only an incomplete leftover can be here: the caller checked for
            // a complete image while holding the build lock.
            fs::remove_dir_all(dest).map_err(|e| PyenvError::io_at("removing", dest, e))?;
        }
        publish(tmp, dest)?;
        self.log.line(&format!("# complete: {}", dest.display()));
        Ok(())
    }

    fn run_logged(&self, step: &str, cmd: &mut Command) -> Result<(), PyenvError> {
        tracing::debug!(image = %self.plan.name, step, command = ?cmd, "build step");
        self.log.run(cmd).map_err(|e| self.step_error(step, e))
    }

    fn step_error(&self, step: &str, error: StepError) -> PyenvError {
        error.into_error(|detail| self.failed(step, detail))
    }

    fn failed(&self, step: &str, detail: String) -> PyenvError {
        tracing::warn!(image = %self.plan.name, step, %detail, log = %self.log.path.display(), "build step failed");
        PyenvError::BuildFailed {
            name: self.plan.name,
            step: step.to_string(),
            detail,
            log: self.log.path.clone(),
            tail: self.log.tail(TAIL_LINES),
        }
    }
}

fn has_font_cache(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("fontlist") && name.ends_with(".json")
        })
    })
}

/// `chmod -R a+rX`: kernels run as another user and must read (and traverse)
/// everything, and execute what is executable.
fn make_world_readable(root: &Path) -> std::io::Result<()> {
    // Symlinks are neither followed nor changed (chmod would reach the target).
    for entry in WalkDir::new(root).follow_root_links(false) {
        let entry = entry?;
        if entry.path_is_symlink() {
            continue;
        }
        let meta = entry.metadata()?;
        let mode = meta.permissions().mode();
        let wanted = if meta.is_dir() || mode & 0o111 != 0 {
            mode | 0o555
        } else {
            mode | 0o444
        };
        if wanted != mode {
            fs::set_permissions(entry.path(), fs::Permissions::from_mode(wanted))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_readable_keeps_exec_only_where_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let data = sub.join("data");
        let tool = sub.join("tool");
        fs::write(&data, "x").unwrap();
        fs::write(&tool, "x").unwrap();
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o700)).unwrap();
        fs::set_permissions(&data, fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o700)).unwrap();

        make_world_readable(dir.path()).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&sub), 0o755);
        assert_eq!(mode(&data), 0o644);
        assert_eq!(mode(&tool), 0o755);
    }
}
