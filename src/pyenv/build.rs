//! An image as a [`Recipe`]: venv, pinned wheels, checks, caches, made
//! readable by the kernel user; `recipe::prepare` builds it in private
//! and publishes it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use walkdir::WalkDir;

use super::marker::Marker;
use super::progress::{Phase, Total};
use super::recipe::{count_collecting, NotCurrent, Recipe, Site, Workspace};
use super::step::BuildLog;
use super::venv;
use super::{Image, ImageName, Interpreter, Lock, PyenvError, KERNEL_CONFIG, MPL_CACHE_DIR};
use crate::util::IoContext;

pub(crate) struct ImageRecipe<'a> {
    pub name: ImageName,
    pub hash: &'a str,
    pub python: &'a Interpreter,
    pub site: Site,
}

impl<'a> ImageRecipe<'a> {
    /// `images_dir/<name>-<hash>`, logged to `log`.
    pub fn new(
        name: ImageName,
        hash: &'a str,
        python: &'a Interpreter,
        images_dir: PathBuf,
        log: PathBuf,
    ) -> Self {
        let site = Site {
            parent: images_dir,
            key: format!("{name}-{hash}"),
            label: name.to_string(),
            what: "this image".into(),
            log,
            header: format!(
                "retrace image build: {name}-{hash} with {} ({}, {})",
                python.path.display(),
                python.version,
                python.tag
            ),
        };
        ImageRecipe {
            name,
            hash,
            python,
            site,
        }
    }
}

impl Recipe for ImageRecipe<'_> {
    type Built = Image;
    type Marker = Marker;
    type Error = PyenvError;

    fn site(&self) -> &Site {
        &self.site
    }

    fn current(&self, dir: &Path) -> Result<Image, NotCurrent> {
        Marker::read(dir, self.name, self.hash)
            .map(|_| Image {
                name: self.name,
                lock_hash: self.hash.to_string(),
                dir: dir.to_path_buf(),
            })
            .ok_or(NotCurrent::Absent { done: "built" })
    }

    fn steps(&self, work: &Workspace<'_, Self>) -> Result<Marker, PyenvError> {
        let lock_text = self.name.lock_text();
        let lock = Lock::parse(lock_text)?;
        let lock_file = work.write("requirements.lock", lock_text)?;
        work.write("kernel_config.py", KERNEL_CONFIG)?;
        let python = work.create_venv(self.python)?;
        install(work, &python, &lock_file, lock.len())?;

        let with_matplotlib = lock.contains("matplotlib");
        let phase = work.progress.phase(
            if with_matplotlib {
                "check, warm font cache"
            } else {
                "check"
            },
            Total::None,
        );
        phase.set_message("pip check");
        work.run(
            "check installed requirements (pip check)",
            &mut venv::pip_check(&python),
        )?;
        phase.set_message(if with_matplotlib {
            "import ipykernel, build font cache"
        } else {
            "import ipykernel"
        });
        let mut script = String::from("import ipykernel.kernelapp\n");
        let mpl_dir = work.tmp.join(MPL_CACHE_DIR);
        let mut warm = Command::new(&python);
        if with_matplotlib {
            // Builds the font cache once here instead of on every task's
            // first plot; kernels copy it into their own MPLCONFIGDIR.
            script.push_str("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot\n");
            warm.env("MPLCONFIGDIR", &mpl_dir);
        }
        warm.env_remove("MPLBACKEND").args(["-I", "-c", &script]);
        work.run("import ipykernel and warm caches", &mut warm)?;
        if with_matplotlib && !has_font_cache(&mpl_dir) {
            return Err(work.failed(
                "warm the matplotlib font cache",
                format!("no fontlist-*.json appeared in {}", mpl_dir.display()),
            ));
        }
        phase.finish();

        // Valid under the final name and readable by the kernel user.
        let phase = work.progress.phase("finalize", Total::None);
        work.relocate_venv()?;
        let tmp = &work.tmp;
        make_world_readable(tmp).at("chmod a+rX", tmp)?;
        phase.finish();
        let mut marker = Marker::new(
            self.name,
            self.hash,
            self.python,
            &lock.entries,
            with_matplotlib,
        );
        marker.size_bytes = Some(super::disk_usage(tmp));
        Ok(marker)
    }

    fn space_needed(&self) -> Option<u64> {
        Some(approx_size(self.name))
    }

    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> PyenvError {
        PyenvError::BuildFailed {
            name: self.name,
            step: step.to_string(),
            detail,
            log: log.tail(),
        }
    }
}

/// An image's size as built (x86-64, CPython 3.11, rounded up): what a
/// build needs free, told when one fills its file system.
fn approx_size(name: ImageName) -> u64 {
    match name {
        ImageName::Slim => 130_000_000,
        ImageName::Fat => 800_000_000,
        ImageName::Checker => 220_000_000,
    }
}

/// `pip install --only-binary :all: --no-deps -r requirements.lock`.
fn install(
    work: &Workspace<'_, ImageRecipe>,
    python: &Path,
    lock_file: &Path,
    total: usize,
) -> Result<(), PyenvError> {
    let mut cmd = venv::pip(python, "install");
    cmd.args(["--only-binary", ":all:", "--no-deps", "-r"])
        .arg(lock_file);
    let mut fetch: Option<Phase> = Some(work.progress.phase(
        &format!("fetch {total} packages"),
        Total::Items(total as u64),
    ));
    let mut unpack: Option<Phase> = None;
    work.pip_install("install the locked packages", &mut cmd, |line| {
        if line.starts_with("Installing collected packages") {
            if let Some(bar) = fetch.take() {
                bar.finish();
            }
            unpack = Some(
                work.progress
                    .phase(&format!("install {total} packages"), Total::None),
            );
        } else if let Some(bar) = &fetch {
            count_collecting(bar, line);
        }
    })?;
    for phase in [fetch, unpack].into_iter().flatten() {
        phase.finish();
    }
    Ok(())
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
