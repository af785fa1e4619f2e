//! Temporary dataset folders and error accessors shared by the loaders'
//! tests.

use std::fs;

use super::load_file;
use crate::task::{Expected, TaskError};

/// Writes `files` (name → content) into a fresh temp dir.
pub(super) fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir
}

pub(super) fn load_err(files: &[(&str, &str)], which: &str) -> (String, TaskError) {
    let dir = dir_with(files);
    let path = dir.path().join(which);
    let err = load_file(&path).expect_err("loading should fail");
    (err.to_string(), err)
}

pub(super) fn parse_line_of(err: &TaskError) -> (String, usize, String) {
    match err {
        TaskError::Parse {
            file,
            line,
            message,
        } => (
            file.file_name().unwrap().to_string_lossy().into_owned(),
            *line,
            message.clone(),
        ),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

pub(super) fn number(e: &Expected) -> (f64, Option<f64>) {
    match e {
        Expected::Number { value, abs_tol, .. } => (*value, *abs_tol),
        other => panic!("expected a number, got {other:?}"),
    }
}
