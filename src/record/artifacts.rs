//! Where a run keeps the images its tasks' code displayed:
//! `artifacts/[<arm>/]<task>/r<round>-NNN.<ext>` inside the run directory,
//! each task id and arm name made one file name by
//! [`crate::util::file_name::file_name`] (an id is never a path: `..` and
//! `a/b` stay inside, `a/b` and `a_b` get two directories), and
//! `artifacts/index.json`, which maps every directory back to its task and
//! arm. The harness writes the images there and the reports read them from
//! there, both through [`dir`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::AttemptRecord;
use crate::util::file_name::file_name;

/// The index of the task directories, relative to the run directory.
pub const INDEX: &str = "artifacts/index.json";

/// A task's image directory, relative to the run directory; `arm` is given
/// when the run has several arms (each has its own directory then).
pub fn dir(arm: Option<&str>, task_id: &str) -> PathBuf {
    let mut dir = PathBuf::from("artifacts");
    if let Some(arm) = arm {
        dir.push(file_name(arm));
    }
    dir.push(file_name(task_id));
    dir
}

/// One task directory of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The task id, exactly.
    pub task: String,
    /// The arm, when the run has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// The directory, relative to the run directory.
    pub dir: String,
}

/// The index of the task directories the records saved images into: one
/// entry per arm and task, in that order; empty when no record saved one.
pub fn index(records: &[AttemptRecord], several_arms: bool) -> Vec<IndexEntry> {
    let with_images: BTreeSet<(Option<&str>, &str)> = records
        .iter()
        .filter(|r| r.outcome.as_ref().is_some_and(|o| !o.artifacts.is_empty()))
        .map(|r| (several_arms.then(|| r.arm_name()), r.task_id.as_str()))
        .collect();
    with_images
        .into_iter()
        .map(|(arm, task)| IndexEntry {
            task: task.to_string(),
            arm: arm.map(str::to_string),
            dir: dir(arm, task).to_string_lossy().into_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_task_gets_its_own_directory_inside_artifacts() {
        let ids = [
            "a/b",
            "a_b",
            "..",
            ".",
            "",
            "/etc",
            "<img src=x onerror=alert(1)>",
            "`tick`",
        ];
        let dirs: BTreeSet<PathBuf> = ids.iter().map(|id| dir(None, id)).collect();
        assert_eq!(dirs.len(), ids.len(), "{dirs:#?}");
        for d in &dirs {
            let parts: Vec<_> = d.components().collect();
            assert_eq!(parts.len(), 2, "{d:?}");
            assert!(
                parts
                    .iter()
                    .all(|c| matches!(c, std::path::Component::Normal(_))),
                "{d:?}"
            );
        }
        // Plain ids and arm names keep the layout runs always had.
        assert_eq!(dir(None, "math-001"), Path::new("artifacts/math-001"));
        assert_eq!(
            dir(Some("dynamic"), "math-001"),
            Path::new("artifacts/dynamic/math-001")
        );
        let arm = dir(Some("fat/t=0.7"), "x");
        assert_eq!(arm.components().count(), 3, "{arm:?}");
    }
}
