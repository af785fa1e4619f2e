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
