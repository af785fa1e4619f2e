//! `retrace doctor`: checks that this host can run confined kernels and
//! says, for each problem, what to do about it. On top of the data flow
//! (beside `conformance`): it asks sandbox, pyenv and model; nothing asks it.
//!
//! One file per group of checks: `host` (root, cgroups, namespaces,
//! seccomp), `python` (interpreter, venv, compiler, package index) and
//! `store` (disk, images, local model).

mod check;
mod host;
mod python;
mod report;
mod store;

use std::path::PathBuf;

pub use check::{Check, Status};
pub use report::Report;

use crate::pyenv::ImageStore;

/// Every check, in the order they are printed. Blocking (runs Python and
/// pip for seconds): call it off an async runtime.
pub fn run() -> Report {
    let mut checks = host::checks();

    let images = ImageStore::from_env();
    let home = images.home().to_path_buf();
    let scratch = Scratch::new();
    let (python_check, python) = python::interpreter_check();
    checks.push(python_check);
    let (venv_check, venv_python) = match &scratch {
        Ok(dir) => python::venv_check(python.as_ref(), &dir.0),
        Err(e) => (
            Check::info("venv", format!("not checked: no scratch directory: {e}")),
            None,
        ),
    };
    checks.push(venv_check);
    let model = store::model_status(&home);
    checks.push(python::compiler_check(model.server.prepared));
    let (images_check, images_missing) = store::images_check(&images);
    let found = python::Found {
        python,
        venv_python,
    };
    checks.push(match &scratch {
        Ok(dir) => python::index_check(&found, &dir.0, images_missing),
        Err(e) => Check::info(
            "package-index",
            format!("not checked: no scratch directory: {e}"),
        ),
    });

    checks.push(store::disk_check(&home));
    checks.push(images_check);
    checks.push(store::model_check(&model));
    Report::new(checks)
}

/// A private temporary directory for the venv and the download, removed
/// when the checks are done.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, std::io::Error> {
        let dir = std::env::temp_dir().join(format!(
            "retrace-doctor-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
