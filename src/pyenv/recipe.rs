//! One builder for every directory retrace prepares: the images, the local
//! model's server venv and its weights, and whatever else is made from
//! pinned inputs. A [`Recipe`] says where the directory goes, how to tell
//! that one on disk is current, and the steps that fill it; [`prepare`] does
//! the rest the same way for all of them:
//!
//! - a current directory is returned at once;
//! - otherwise `.lock-<key>` is taken (other preparers, threads or
//!   processes, wait for it and then find the directory current), what dead
//!   preparers left is removed, and the steps run in a private
//!   `.tmp-<key>-<pid>`;
//! - the marker (`complete.json`) is written last, durably, and the
//!   directory takes its final name in one rename, so the final name only
//!   ever holds a complete directory (a stale one is moved aside first to
//!   `.old-<key>-<pid>`: a process still using it keeps its open files);
//! - on failure the temporary directory goes and the log stays; a failure
//!   that filled the file system is reported as such (`disk::NoSpace`:
//!   where, how much is free, about how much the recipe needs).

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::progress::{Phase, Progress, Total};
use super::publish::publish;
use super::step::{BuildLog, StepError};
use super::venv::{self, rewrite_prefix};
use super::{file_lock, marker, Interpreter, PyenvError};
use crate::util::disk::{self, NoSpace};
use crate::util::IoContext;

const TMP_PREFIX: &str = ".tmp-";
const OLD_PREFIX: &str = ".old-";
pub(crate) const LOCK_PREFIX: &str = ".lock-";

/// Where a recipe's directory goes and what it is called.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// The directory that holds the final directory and its `.tmp-`,
    /// `.old-` and `.lock-` siblings.
    pub parent: PathBuf,
    /// The final directory's name in `parent`.
    pub key: String,
    /// Prefix of the progress lines.
    pub label: String,
    /// What is prepared, for messages ("this image").
    pub what: String,
    pub log: PathBuf,
    /// The first line of the log.
    pub header: String,
}

/// Why a directory on disk is not what this binary would prepare: shown
/// to users as the reason a build starts over, so each says what changed.
#[derive(Debug, thiserror::Error)]
pub enum NotCurrent {
    /// No readable marker: `not prepared`, `not built`.
    #[error("not {done}")]
    Absent { done: &'static str },
    #[error("prepared by another retrace layout ({}format {format})", .name.as_ref().map(|n| format!("{n} ")).unwrap_or_default())]
    Layout { name: Option<String>, format: u32 },
    /// The pinned inputs changed (`what`: which ones).
    #[error("prepared from {what}")]
    Pins { what: &'static str },
    /// The base interpreter moved or changed its minor version.
    #[error("prepared with {} ({was_tag}), now {} ({now_tag})", .was.display(), .now.display())]
    Python {
        was: PathBuf,
        was_tag: String,
        now: PathBuf,
        now_tag: String,
    },
    #[error("{} is missing", .0.display())]
    Missing(PathBuf),
    #[error("{} has {size} bytes, expected {expected}", .path.display())]
    Size {
        path: PathBuf,
        size: u64,
        expected: u64,
    },
    #[error(transparent)]
    Unreadable(#[from] crate::util::IoError),
}

/// What a prepared directory is and how it is made.
pub(crate) trait Recipe {
    /// What a current directory gives its user.
    type Built;
    /// Written last as `complete.json`; `current` reads it back.
    type Marker: Serialize;
    type Error: From<PyenvError>
        + From<crate::util::IoError>
        + std::error::Error
        + Send
        + Sync
        + 'static;

    fn site(&self) -> &Site;
    /// The directory at `dir` if its marker is current (and whatever else
    /// must be there is), else why not.
    fn current(&self, dir: &Path) -> Result<Self::Built, NotCurrent>;
    /// Fills `work.tmp`; returns the marker to write last.
    fn steps(&self, work: &Workspace<'_, Self>) -> Result<Self::Marker, Self::Error>;
    /// A step that failed, as this recipe's error (naming its log).
    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> Self::Error;
    /// About how much free space a build takes at its peak, for the error
    /// of a build that filled its file system.
    fn space_needed(&self) -> Option<u64> {
        None
    }
}

/// Prepares what `recipe` describes unless it is current. Idempotent and
/// safe to run concurrently.
pub(crate) fn prepare<R: Recipe>(recipe: &R, progress: bool) -> Result<R::Built, R::Error> {
    let site = recipe.site();
    let parent = &site.parent;
    let dest = parent.join(&site.key);
    if let Ok(built) = recipe.current(&dest) {
        return Ok(built);
    }
    let progress = Progress::new(&site.label, progress);
    fs::create_dir_all(parent).at("creating", parent)?;
    let lock = file_lock::acquire(&lock_path(parent, &site.key), || {
        progress.note(&format!(
            "waiting for another build of {} to finish",
            site.what
        ))
    })?;
    // Whoever held the lock may have just finished.
    if let Ok(built) = recipe.current(&dest) {
        return Ok(built);
    }
    reclaim(parent, &site.key);
    let work = Workspace {
        recipe,
        tmp: parent.join(format!("{TMP_PREFIX}{}-{}", site.key, std::process::id())),
        dest,
        log: BuildLog::create(&site.log)?,
        progress,
    };
    tracing::info!(build = %site.key, into = %work.dest.display(), "preparing {}", site.what);
    let started = std::time::Instant::now();
    if let Err(e) = work.build() {
        // Judged before the partial build goes: removing it frees the space.
        let full = disk::ran_out(&work.tmp, &disk::chain_text(&e));
        let _ = fs::remove_dir_all(&work.tmp);
        if !full {
            return Err(e);
        }
        let space = NoSpace::new(&site.label, &work.dest, recipe.space_needed(), Box::new(e));
        return Err(PyenvError::from(Box::new(space)).into());
    }
    tracing::info!(build = %site.key, secs = started.elapsed().as_secs_f64(), "prepared {}", site.what);
    drop(lock);
    recipe.current(&work.dest).map_err(|reason| {
        PyenvError::NotCurrentAfterBuild {
            what: site.what.clone(),
            dir: work.dest.clone(),
            reason: Box::new(reason),
        }
        .into()
    })
}

/// A build in progress: its private directory, log and progress, and the
/// steps recipes share.
pub(crate) struct Workspace<'a, R: Recipe + ?Sized> {
    recipe: &'a R,
    /// Absolute when the recipe's parent is.
    pub tmp: PathBuf,
    /// The final name.
    pub dest: PathBuf,
    pub log: BuildLog,
    pub progress: Progress,
}

impl<R: Recipe + ?Sized> Workspace<'_, R> {
    fn build(&self) -> Result<(), R::Error> {
        let tmp = &self.tmp;
        let site = self.recipe.site();
        self.log
            .line(&format!("# {}\n# into {}", site.header, tmp.display()));
        fs::create_dir_all(tmp).at("creating", tmp)?;
        let marker = self.recipe.steps(self)?;
        crate::util::fault::reached(crate::util::fault::Point::DuringBuild);
        marker::write(tmp, &marker).at("writing the marker in", tmp)?;
        let dest = &self.dest;
        if dest.exists() {
            // Stale or incomplete (it was not current under the lock).
            let old = site
                .parent
                .join(format!("{OLD_PREFIX}{}-{}", site.key, std::process::id()));
            fs::rename(dest, &old).at("moving aside", dest)?;
            let _ = fs::remove_dir_all(&old);
        }
        publish(tmp, dest)?;
        self.log.line(&format!("# complete: {}", dest.display()));
        Ok(())
    }

    /// Writes `contents` to `name` in the private directory.
    pub fn write(&self, name: &str, contents: &str) -> Result<PathBuf, R::Error> {
        let path = self.tmp.join(name);
        fs::write(&path, contents).at("writing", &path)?;
        Ok(path)
    }

    /// `venv/` from `python`, shown as its own phase; returns the venv's
    /// interpreter.
    pub fn create_venv(&self, python: &Interpreter) -> Result<PathBuf, R::Error> {
        let venv = self.tmp.join("venv");
        let phase = self.progress.phase("create venv", Total::None);
        self.run("create the venv", &mut venv::create(python, &venv))?;
        phase.finish();
        Ok(venv.join("bin").join("python"))
    }

    /// Makes `venv/` valid under the final name (see `rewrite_prefix`).
    pub fn relocate_venv(&self) -> Result<(), R::Error> {
        let venv = self.tmp.join("venv");
        rewrite_prefix(
            &venv,
            &self.tmp.to_string_lossy(),
            &self.dest.to_string_lossy(),
        )
        .at("rewriting paths under", &venv)?;
        Ok(())
    }

    /// Runs `cmd` to the end with its output in the log.
    pub fn run(&self, step: &str, cmd: &mut Command) -> Result<(), R::Error> {
        tracing::debug!(build = %self.recipe.site().key, step, command = ?cmd, "build step");
        self.log.run(cmd).map_err(|e| self.step_error(step, e))
    }

    /// Runs a `pip install` with its output in the log, handing each line
    /// (trimmed) to `on_line` as it arrives, to drive the progress bars.
    pub fn pip_install(
        &self,
        step: &str,
        cmd: &mut Command,
        on_line: impl FnMut(&str),
    ) -> Result<(), R::Error> {
        tracing::info!(build = %self.recipe.site().key, step, command = ?cmd, "pip install");
        self.run_reading(step, cmd, on_line)
    }

    /// Runs `cmd` to the end with its output in the log, handing each line
    /// (trimmed) to `on_line` as it arrives.
    pub fn run_reading(
        &self,
        step: &str,
        cmd: &mut Command,
        mut on_line: impl FnMut(&str),
    ) -> Result<(), R::Error> {
        let mut child = self
            .log
            .spawn_reading_stdout(cmd)
            .map_err(|e| self.step_error(step, e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let line = String::from_utf8_lossy(&line);
            self.log.line(&line);
            on_line(line.trim());
        }
        let status = child
            .wait()
            .map_err(|e| self.failed(step, format!("waiting for it: {e}")))?;
        self.log
            .check_status(status)
            .map_err(|_| self.failed(step, format!("it exited with {status}")))
    }

    pub fn step_error(&self, step: &str, error: StepError) -> R::Error {
        error.into_error(|detail| self.failed(step, detail))
    }

    pub fn failed(&self, step: &str, detail: String) -> R::Error {
        tracing::warn!(build = %self.recipe.site().key, step, %detail, log = %self.log.path.display(), "build step failed");
        self.recipe.failed(&self.log, step, detail)
    }
}

/// A `Collecting <requirement>` line of pip counts one package.
pub(crate) fn count_collecting(phase: &Phase, line: &str) {
    if let Some(requirement) = line.strip_prefix("Collecting ") {
        phase.inc(1);
        phase.set_message(requirement.to_string());
    }
}

fn lock_path(parent: &Path, key: &str) -> PathBuf {
    parent.join(format!("{LOCK_PREFIX}{key}"))
}

/// Removes what preparers that died left in `parent`: the caller holds
/// `key`'s lock, so `key`'s leftovers are stale by definition; another key's
/// are stale when its lock file exists and nobody holds it. Only names of
/// the form `.tmp-<key>-<pid>` and `.old-<key>-<pid>` are touched. Best
/// effort: a failure here only wastes disk.
pub(crate) fn reclaim(parent: &Path, key: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = [TMP_PREFIX, OLD_PREFIX]
            .iter()
            .find_map(|p| file_name.strip_prefix(p))
        else {
            continue;
        };
        let Some((other, pid)) = rest.rsplit_once('-') else {
            continue;
        };
        if other.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Holding the other key's lock while deleting keeps a new build of
        // it from starting meanwhile.
        let mut _held: Option<File> = None;
        let stale = other == key || {
            match File::open(lock_path(parent, other)) {
                Ok(lock) => {
                    let free = lock.try_lock().is_ok();
                    _held = Some(lock);
                    free
                }
                Err(_) => false,
            }
        };
        if stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with(LOCK_PREFIX))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn stale_tmp_dirs_go_unless_their_build_is_running() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path();
        let slim = "slim-0123456789abcdef";
        let mine = parent.join(format!(".tmp-{slim}-4242"));
        let running = parent.join(".tmp-fat-00000000000000aa-17");
        let dead = parent.join(".tmp-fat-00000000000000bb-18");
        let unrelated = parent.join(".tmp-something-else");
        for dir in [&mine, &running, &dead, &unrelated] {
            fs::create_dir_all(dir.join("venv")).unwrap();
        }
        let held = File::create(lock_path(parent, "fat-00000000000000aa")).unwrap();
        held.lock().unwrap();
        File::create(lock_path(parent, "fat-00000000000000bb")).unwrap();

        reclaim(parent, slim);
        assert!(!mine.exists());
        assert!(running.exists(), "a build holding its lock keeps its dir");
        assert!(!dead.exists());
        assert!(
            unrelated.exists(),
            "names retrace did not make are left alone"
        );

        drop(held);
        reclaim(parent, slim);
        assert!(!running.exists());
    }

    #[test]
    fn leftovers_of_dead_preparers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        for name in [".tmp-a-1", ".old-a-2", ".tmp-a-b-3", "a", "other"] {
            fs::create_dir_all(dir.path().join(name)).unwrap();
        }
        reclaim(dir.path(), "a");
        // `.tmp-a-b-3` belongs to a key `a-b` that never took its lock.
        assert_eq!(names(dir.path()), [".tmp-a-b-3", "a", "other"]);
    }

    /// A recipe that writes one file, or fails after writing it.
    struct Note {
        site: Site,
        fail: bool,
    }

    impl Note {
        fn new(dir: &Path, fail: bool) -> Note {
            let site = Site {
                parent: dir.join("things"),
                key: "note".into(),
                label: "note".into(),
                what: "the note".into(),
                log: dir.join("note.log"),
                header: "a note".into(),
            };
            Note { site, fail }
        }
    }

    impl Recipe for Note {
        type Built = PathBuf;
        type Marker = String;
        type Error = PyenvError;

        fn site(&self) -> &Site {
            &self.site
        }

        fn current(&self, dir: &Path) -> Result<PathBuf, NotCurrent> {
            match marker::read::<String>(dir) {
                Some(m) if m == "v1" => Ok(dir.join("note.txt")),
                Some(_) => Err(NotCurrent::Layout {
                    name: None,
                    format: 0,
                }),
                None => Err(NotCurrent::Absent { done: "prepared" }),
            }
        }
        fn steps(&self, work: &Workspace<'_, Self>) -> Result<String, PyenvError> {
            work.write("note.txt", "hello")?;
            work.run("say hello", Command::new("echo").arg("hello"))?;
            if self.fail {
                work.run("fail", &mut Command::new("false"))?;
            }
            Ok("v1".into())
        }
        fn failed(&self, log: &BuildLog, step: &str, detail: String) -> PyenvError {
            crate::util::IoError::new(
                format!("{step}: {detail} (log {})", log.path.display()),
                std::io::ErrorKind::Other.into(),
            )
            .into()
        }
    }

    #[test]
    fn prepares_once_publishes_by_rename_and_replaces_a_stale_dir() {
        let dir = tempfile::tempdir().unwrap();
        let parent = dir.path().join("things");
        let failing = Note::new(dir.path(), true);
        let err = prepare(&failing, false).unwrap_err();
        assert!(err.to_string().contains("fail: command exited"), "{err}");
        assert!(names(&parent).is_empty(), "{:?}", names(&parent));

        // A stale directory under the final name is replaced.
        fs::create_dir_all(parent.join("note")).unwrap();
        marker::write(&parent.join("note"), &"v0").unwrap();
        let note = Note::new(dir.path(), false);
        let built = prepare(&note, false).unwrap();
        assert_eq!(built, parent.join("note/note.txt"));
        assert_eq!(fs::read_to_string(&built).unwrap(), "hello");
        assert_eq!(names(&parent), ["note"]);
        let log = fs::read_to_string(dir.path().join("note.log")).unwrap();
        assert!(log.starts_with("# a note\n# into "), "{log}");
        assert!(log.contains("$ echo hello\nhello\n"), "{log}");

        // Current: nothing runs again.
        fs::remove_file(dir.path().join("note.log")).unwrap();
        assert_eq!(prepare(&note, false).unwrap(), built);
        assert!(!dir.path().join("note.log").exists());
    }
}
