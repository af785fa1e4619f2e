//! A task's input files, as its dataset line names them (native `files`,
//! DABench's `file_name`): each name resolved against the dataset's folder
//! (the JSONL file's directory, canonical) and followed through links; the
//! file must end inside that folder, be a regular file and be within
//! `--max-task-file-bytes`; and no two files of one task may share a file
//! name (both would land on that name in the kernel's working directory).
//! A dataset is untrusted input: without this a line could copy any host
//! file (`../../etc/...`, an absolute path, a link out of the folder) into
//! the kernel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Ctx, LineResult};
use crate::util::input_file::{open_task_file, InputFileError, ReadAs};

/// A task's files, resolved and checked (see the module's doc).
pub(super) fn task_files(ctx: &Ctx, names: &[PathBuf]) -> LineResult<Vec<PathBuf>> {
    let files: Vec<PathBuf> = names
        .iter()
        .map(|name| resolve_file(ctx, name, &[]))
        .collect::<LineResult<_>>()?;
    let mut first: HashMap<&std::ffi::OsStr, &Path> = HashMap::new();
    for (file, name) in files.iter().zip(names) {
        let base = file.file_name().unwrap_or_default();
        if let Some(other) = first.insert(base, name) {
            return Err(format!(
                "input files `{}` and `{}` have the same file name `{}`: both would be \
                 copied to it in the kernel's working directory",
                other.display(),
                name.display(),
                Path::new(base).display()
            ));
        }
    }
    Ok(files)
}

/// Resolves an input file against the dataset's folder (and, for DABench
/// layouts, a few table folders in it); errors name every place tried.
pub(super) fn resolve_file(ctx: &Ctx, name: &Path, subdirs: &[&str]) -> LineResult<PathBuf> {
    let candidates: Vec<PathBuf> = if name.is_absolute() {
        vec![name.to_path_buf()]
    } else {
        std::iter::once("")
            .chain(subdirs.iter().copied())
            .map(|sub| ctx.dir.join(sub).join(name))
            .collect()
    };
    for candidate in &candidates {
        let real = match std::fs::canonicalize(candidate) {
            Ok(real) => real,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(format!("input file `{}`: {e}", name.display())),
        };
        if !real.starts_with(&ctx.dir) {
            return Err(format!(
                "input file `{}` is outside the dataset's folder `{}` (task files must \
                 be inside the folder of the JSONL file that names them, links followed)",
                name.display(),
                ctx.dir.display()
            ));
        }
        return match open_task_file(&real, ctx.max_file_bytes, ReadAs::Harness) {
            Ok(_) => Ok(real),
            Err(InputFileError::Io(e)) => {
                Err(format!("input file `{}`: cannot read: {e}", name.display()))
            }
            Err(refused) => Err(format!(
                "input file `{}` is refused: it {refused}",
                name.display()
            )),
        };
    }
    if name.is_absolute() {
        return Err(format!("input file `{}` not found", name.display()));
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(format!(
        "input file `{}` not found (looked for {})",
        name.display(),
        tried.join(", ")
    ))
}

/// Nothing there: a missing file, a dangling link, a file where a folder
/// was named.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::fixtures::dir_with;
    use super::super::{load_file, load_suite_with, LoadOptions};
    use crate::task::{Task, TaskError};

    /// A native line with these `files`.
    fn line(id: &str, files: &[&str]) -> String {
        serde_json::json!({
            "id": id, "question": "q", "files": files,
            "expected": {"type": "number", "value": 1}
        })
        .to_string()
    }

    /// Runs `f` on a thread, failing the test if it has not returned after
    /// a minute (far above what a load takes: only a hang gets there).
    fn without_hanging<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the load hung")
    }

    fn load_one(dir: &std::path::Path, files: &[&str]) -> Result<Vec<Task>, TaskError> {
        fs::write(dir.join("t.jsonl"), line("a", files)).unwrap();
        let path = dir.join("t.jsonl");
        without_hanging(move || load_file(&path))
    }

    fn refusal(dir: &std::path::Path, files: &[&str]) -> String {
        match load_one(dir, files) {
            Err(TaskError::Parse {
                line: 1, message, ..
            }) => message,
            other => panic!("{files:?}: expected a refusal of line 1, got {other:?}"),
        }
    }

    /// A dataset folder `set/` beside a secret file outside it.
    fn with_secret() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = dir_with(&[("secret.txt", "host secret"), ("set/ok.csv", "a\n1\n")]);
        let root = dir.path().canonicalize().unwrap();
        (dir, root.join("set"), root.join("secret.txt"))
    }

    #[test]
    fn files_outside_the_dataset_folder_are_refused() {
        let (_dir, set, secret) = with_secret();
        symlink(&secret, set.join("out.csv")).unwrap();
        fs::create_dir(set.join("sub")).unwrap();
        symlink(set.parent().unwrap(), set.join("sub/up")).unwrap();
        let abs = secret.to_str().unwrap();
        for name in [
            "../secret.txt",
            abs,
            "out.csv",
            "sub/up/secret.txt",
            "sub/../../secret.txt",
        ] {
            let message = refusal(&set, &[name]);
            assert!(
                message.contains(&format!(
                    "input file `{name}` is outside the dataset's folder"
                )),
                "{name}: {message}"
            );
            assert!(!message.contains("host secret"), "{message}");
        }
    }

    #[test]
    fn links_and_absolute_paths_inside_the_folder_are_kept() {
        let (_dir, set, _) = with_secret();
        fs::create_dir(set.join("data")).unwrap();
        fs::write(set.join("data/real.csv"), "x\n").unwrap();
        symlink(set.join("data/real.csv"), set.join("link.csv")).unwrap();
        symlink("data", set.join("tables")).unwrap();
        let abs = set.join("ok.csv");
        let tasks = load_one(&set, &["link.csv"]).unwrap();
        // The canonical path: what the kernel copy opens without links.
        assert_eq!(tasks[0].files, vec![set.join("data/real.csv")]);
        let tasks = load_one(&set, &[abs.to_str().unwrap()]).unwrap();
        assert_eq!(tasks[0].files, vec![abs]);
        let tasks = load_one(&set, &["tables/real.csv"]).unwrap();
        assert_eq!(tasks[0].files, vec![set.join("data/real.csv")]);
    }

    #[test]
    fn fifos_devices_and_directories_are_refused_without_hanging() {
        let (_dir, set, _) = with_secret();
        let fifo = set.join("pipe.csv");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        symlink("/dev/zero", set.join("zero.csv")).unwrap();
        fs::create_dir(set.join("folder.csv")).unwrap();
        for (name, kind) in [
            ("pipe.csv", "a FIFO"),
            ("zero.csv", "outside the dataset's folder"),
            ("folder.csv", "a directory"),
        ] {
            let message = refusal(&set, &[name]);
            assert!(message.contains(kind), "{name}: {message}");
        }
    }

    #[test]
    fn a_file_over_the_bound_is_refused_by_its_size() {
        let (_dir, set, _) = with_secret();
        // Sparse: a terabyte that takes no disk, and must take no memory.
        let big = fs::File::create(set.join("big.csv")).unwrap();
        big.set_len(1 << 40).unwrap();
        let message = refusal(&set, &["big.csv"]);
        assert!(
            message.contains(
                "is 1099511627776 bytes, over the bound of 67108864 bytes (--max-task-file-bytes)"
            ),
            "{message}"
        );
        fs::write(set.join("small.csv"), "12345").unwrap();
        fs::write(set.join("t.jsonl"), line("a", &["small.csv"])).unwrap();
        let path = set.join("t.jsonl");
        let options = |max| LoadOptions {
            skip_invalid: true,
            max_task_file_bytes: max,
        };
        let loaded = load_suite_with(path.to_str().unwrap(), &set, &options(5)).unwrap();
        assert_eq!(loaded.tasks.len(), 1);
        let err = load_suite_with(path.to_str().unwrap(), &set, &options(4)).unwrap_err();
        assert!(
            err.to_string()
                .contains("no valid tasks found (1 invalid records skipped)"),
            "{err}"
        );
    }

    #[test]
    fn refused_files_are_skipped_and_listed_with_skip_invalid() {
        let (_dir, set, _) = with_secret();
        let text = [line("good", &["ok.csv"]), line("bad", &["../secret.txt"])].join("\n");
        fs::write(set.join("t.jsonl"), text).unwrap();
        let skipping = LoadOptions {
            skip_invalid: true,
            ..LoadOptions::default()
        };
        let path = set.join("t.jsonl");
        let loaded = load_suite_with(path.to_str().unwrap(), &set, &skipping).unwrap();
        assert_eq!(loaded.tasks.len(), 1);
        assert_eq!(loaded.skipped.len(), 1);
        let skipped = &loaded.skipped[0];
        assert_eq!((skipped.id.as_deref(), skipped.line), (Some("bad"), 2));
        assert!(
            skipped.reason.contains("outside the dataset's folder"),
            "{skipped}"
        );
    }

    #[test]
    fn two_files_of_one_name_are_refused_at_their_line() {
        let (_dir, set, _) = with_secret();
        fs::create_dir(set.join("b")).unwrap();
        fs::write(set.join("b/ok.csv"), "b\n").unwrap();
        let message = refusal(&set, &["ok.csv", "b/ok.csv"]);
        assert!(
            message
                .contains("input files `ok.csv` and `b/ok.csv` have the same file name `ok.csv`"),
            "{message}"
        );
        let message = refusal(&set, &["ok.csv", "ok.csv"]);
        assert!(message.contains("the same file name"), "{message}");
    }

    #[test]
    fn dabench_file_names_are_held_to_the_same_rules() {
        let (_dir, set, _) = with_secret();
        let da = |file: &str| {
            serde_json::json!({
                "id": 1, "question": "q", "format": "@x[v]", "file_name": file,
                "answers": [["x", "1"]]
            })
            .to_string()
        };
        fs::create_dir(set.join("tables")).unwrap();
        symlink("../../secret.txt", set.join("tables/t.csv")).unwrap();
        for name in ["../secret.txt", "t.csv"] {
            fs::write(set.join("da.jsonl"), da(name)).unwrap();
            let err = load_file(&set.join("da.jsonl")).unwrap_err();
            assert!(
                err.to_string().contains("outside the dataset's folder"),
                "{name}: {err}"
            );
        }
    }
}
