//! Building one image in a private temporary directory: venv, pinned wheels,
//! checks, caches, then a single rename that publishes it. The caller holds
//! the image's build lock.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use super::marker::Marker;
use super::progress::{BuildProgress, Phase};
use super::{ImageName, Interpreter, Lock, PyenvError, KERNEL_CONFIG, MPL_CACHE_DIR};

/// Lines of the log quoted in a build error.
const TAIL_LINES: usize = 25;
/// pip settings that would send packages somewhere other than the venv.
const PIP_REDIRECTS: [&str; 4] = ["PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER"];

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
pub(crate) fn run(plan: &Plan, progress: &BuildProgress) -> Result<(), PyenvError> {
    let log = BuildLog::create(&plan.log_path)?;
    let builder = Builder {
        plan,
        log,
        progress,
    };
    let result = builder.build();
    if result.is_err() {
        let _ = fs::remove_dir_all(&plan.tmp_dir);
    }
    result
}

struct Builder<'a> {
    plan: &'a Plan<'a>,
    log: BuildLog,
    progress: &'a BuildProgress,
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
        let phase = self.progress.phase("create venv", None);
        self.run_logged(
            "create the venv",
            Command::new(&plan.python.path)
                .args(["-I", "-m", "venv"])
                .arg(&venv),
        )?;
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
            None,
        );
        phase.set_message("pip check");
        self.run_logged(
            "check installed requirements (pip check)",
            Command::new(&python).args(["-I", "-m", "pip", "check", "--disable-pip-version-check"]),
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

        let phase = self.progress.phase("finalize", None);
        self.finalize(with_matplotlib)?;
        phase.finish();
        Ok(())
    }

    fn install(&self, python: &Path, lock_file: &Path) -> Result<(), PyenvError> {
        let step = "install the locked packages";
        let total = self.plan.lock.len();
        let mut cmd = Command::new(python);
        // -u: pip's lines must arrive as printed to drive the bar.
        cmd.args(["-I", "-u", "-m", "pip", "install"])
            .args([
                "--no-input",
                "--disable-pip-version-check",
                "--progress-bar",
                "off",
            ])
            .args(["--only-binary", ":all:", "--no-deps", "-r"])
            .arg(lock_file);
        for var in PIP_REDIRECTS {
            cmd.env_remove(var);
        }
        self.log.line(&format!("$ {}", describe(&cmd)));
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(self.log.stdio()?)
            .spawn()
            .map_err(|e| self.failed(step, format!("cannot run {}: {e}", python.display())))?;
        let stdout = child.stdout.take().expect("stdout is piped");

        let mut fetch: Option<Phase> = Some(
            self.progress
                .phase(&format!("fetch {total} packages"), Some(total as u64)),
        );
        let mut unpack: Option<Phase> = None;
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line);
            self.log.line(&line);
            if let Some(requirement) = line.strip_prefix("Collecting ") {
                if let Some(bar) = &fetch {
                    bar.inc();
                    bar.set_message(requirement.trim().to_string());
                }
            } else if line.starts_with("Installing collected packages") {
                if let Some(bar) = fetch.take() {
                    bar.finish();
                }
                unpack = Some(
                    self.progress
                        .phase(&format!("install {total} packages"), None),
                );
            }
        }
        let status = child
            .wait()
            .map_err(|e| self.failed(step, format!("waiting for pip: {e}")))?;
        self.log_status(status);
        if !status.success() {
            return Err(self.failed(step, format!("pip install exited with {status}")));
        }
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
        fs::rename(tmp, dest).map_err(|e| {
            PyenvError::io(
                format!("renaming {} to {}", tmp.display(), dest.display()),
                e,
            )
        })?;
        if let Some(parent) = dest.parent() {
            let _ = File::open(parent).and_then(|d| d.sync_all());
        }
        self.log.line(&format!("# complete: {}", dest.display()));
        Ok(())
    }

    fn run_logged(&self, step: &str, cmd: &mut Command) -> Result<(), PyenvError> {
        self.log.line(&format!("$ {}", describe(cmd)));
        let status = cmd
            .stdin(Stdio::null())
            .stdout(self.log.stdio()?)
            .stderr(self.log.stdio()?)
            .status()
            .map_err(|e| {
                self.failed(
                    step,
                    format!("cannot run {}: {e}", Path::new(cmd.get_program()).display()),
                )
            })?;
        self.log_status(status);
        if status.success() {
            Ok(())
        } else {
            Err(self.failed(step, format!("command exited with {status}")))
        }
    }

    fn log_status(&self, status: ExitStatus) {
        self.log.line(&format!("# {status}"));
    }

    fn failed(&self, step: &str, detail: String) -> PyenvError {
        PyenvError::BuildFailed {
            name: self.plan.name,
            step: step.to_string(),
            detail,
            log: self.log.path.clone(),
            tail: self.log.tail(TAIL_LINES),
        }
    }
}

/// The build's log: every command and all of its output.
struct BuildLog {
    path: PathBuf,
    file: File,
}

impl BuildLog {
    fn create(path: &Path) -> Result<BuildLog, PyenvError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| PyenvError::io_at("creating", dir, e))?;
        }
        // One log per attempt; reopened in append mode because children
        // write to it through their own handles.
        let file = File::create(path)
            .and_then(|_| OpenOptions::new().append(true).open(path))
            .map_err(|e| PyenvError::io_at("creating the build log", path, e))?;
        Ok(BuildLog {
            path: path.to_path_buf(),
            file,
        })
    }

    fn line(&self, text: &str) {
        let _ = writeln!(&self.file, "{text}");
    }

    fn stdio(&self) -> Result<Stdio, PyenvError> {
        self.file
            .try_clone()
            .map(Stdio::from)
            .map_err(|e| PyenvError::io_at("sharing the build log", &self.path, e))
    }

    fn tail(&self, lines: usize) -> String {
        let text = fs::read(&self.path).unwrap_or_default();
        let text = String::from_utf8_lossy(&text);
        let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        kept[kept.len().saturating_sub(lines)..].join("\n")
    }
}

fn describe(cmd: &Command) -> String {
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

fn has_font_cache(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("fontlist") && name.ends_with(".json")
        })
    })
}

/// A venv is not relocatable: console-script shebangs, the activate scripts
/// and pyvenv.cfg name the directory it was created in. Module code is fine
/// (imports find it relative to the interpreter, and .pyc paths are fixed up
/// on load), so only these text files need the final path.
fn rewrite_prefix(venv: &Path, from: &str, to: &str) -> std::io::Result<usize> {
    let mut files = vec![venv.join("pyvenv.cfg")];
    for entry in fs::read_dir(venv.join("bin"))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    let mut rewritten = 0;
    for file in files {
        // Binaries (not expected in bin/, but possible) are not text: skip.
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        if text.contains(from) {
            fs::write(&file, text.replace(from, to))?;
            rewritten += 1;
        }
    }
    Ok(rewritten)
}

/// `chmod -R a+rX`: kernels run as another user and must read (and traverse)
/// everything, and execute what is executable.
fn make_world_readable(root: &Path) -> std::io::Result<()> {
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        let wanted = if meta.is_dir() || mode & 0o111 != 0 {
            mode | 0o555
        } else {
            mode | 0o444
        };
        if wanted != mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(wanted))?;
        }
        if meta.is_dir() {
            for entry in fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_shebangs_and_cfg_but_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        fs::create_dir_all(venv.join("bin")).unwrap();
        fs::create_dir_all(venv.join("lib")).unwrap();
        let old = "/h/images/.tmp-fat-0123456789abcdef-42";
        let new = "/h/images/fat-0123456789abcdef";
        fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = /usr/bin\ncommand = /usr/bin/python3 -m venv {old}/venv\n"),
        )
        .unwrap();
        fs::write(
            venv.join("bin/ipython"),
            format!("#!{old}/venv/bin/python\nimport sys\n"),
        )
        .unwrap();
        fs::write(venv.join("lib/other.txt"), old).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", venv.join("bin/python")).unwrap();

        assert_eq!(rewrite_prefix(&venv, old, new).unwrap(), 2);
        let script = fs::read_to_string(venv.join("bin/ipython")).unwrap();
        assert_eq!(script, format!("#!{new}/venv/bin/python\nimport sys\n"));
        assert!(fs::read_to_string(venv.join("pyvenv.cfg"))
            .unwrap()
            .contains(&format!("venv {new}/venv")));
        assert_eq!(fs::read_to_string(venv.join("lib/other.txt")).unwrap(), old);
        assert_eq!(
            fs::read_link(venv.join("bin/python")).unwrap(),
            Path::new("/usr/bin/python3")
        );
    }

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

    #[test]
    fn log_tail_and_command_description() {
        let dir = tempfile::tempdir().unwrap();
        let log = BuildLog::create(&dir.path().join("logs/x.log")).unwrap();
        for i in 0..40 {
            log.line(&format!("line {i}"));
        }
        let tail = log.tail(3);
        assert_eq!(tail, "line 37\nline 38\nline 39");

        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", "import sys; print(1)"]);
        assert_eq!(
            describe(&cmd),
            "/usr/bin/python3 -c \"import sys; print(1)\""
        );
    }
}
