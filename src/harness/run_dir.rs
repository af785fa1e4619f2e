//! The run directory's own files as the harness keeps them: `run.json`
//! written and read, a directory that already holds a run refused, and the
//! tasks a resumed run finds checked against the ones it started with.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::{HarnessError, UsageError};
use crate::kernel::KernelEnv;
use crate::record::{RunConfig, TaskSpec};
use crate::task::load::{load_suite_with, select};
use crate::task::Task;
use crate::util::atomic_write::write_atomically;
use crate::util::fault::Point;
use crate::util::input_file::{open_task_file, ReadAs};
use crate::util::IoContext;

/// The configuration of the run in `dir` (its `run.json`, any schema).
pub fn read_config(dir: &Path) -> Result<RunConfig, HarnessError> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path).map_err(|source| UsageError::NotARun {
        path: path.clone(),
        source,
    })?;
    RunConfig::from_json(&text).map_err(|source| UsageError::BadRunJson { path, source }.into())
}

/// Writes `run.json` (schema 3) into `dir`.
pub(super) fn write_config(config: &RunConfig, dir: &Path) -> Result<(), HarnessError> {
    let path = dir.join("run.json");
    let text = serde_json::to_string_pretty(config).map_err(|source| HarnessError::Encode {
        what: "run.json",
        source,
    })?;
    // Atomically: a crash while writing must leave a run.json that resumes.
    Ok(write_atomically(&path, text.as_bytes(), Point::DuringRunJson).at("writing", &path)?)
}

/// The run's tasks as its suite gives them now: the suite loaded again and
/// the run's selection applied (what resume and re-scoring see).
pub fn run_tasks(config: &RunConfig, datasets: &Path) -> Result<Vec<Task>, HarnessError> {
    Ok(load_tasks(&config.spec.tasks, datasets)?.0)
}

/// The spec's tasks, and the records `--skip-invalid` left out.
pub(super) fn load_tasks(
    spec: &TaskSpec,
    datasets: &Path,
) -> Result<(Vec<Task>, Vec<crate::task::load::Skipped>), HarnessError> {
    let loaded = load_suite_with(&spec.suite, datasets, &spec.load_options())?;
    let s = &spec.selection;
    Ok((
        select(
            loaded.tasks,
            s.limit_tasks,
            s.sample,
            s.sample_tagged.as_ref(),
            s.seed,
        ),
        loaded.skipped,
    ))
}

/// A directory that already holds a run is never written into by a new
/// run: its journal would get a second run's records.
pub(super) fn refuse_existing_run(dir: &Path) -> Result<(), HarnessError> {
    if dir.join("run.json").exists() || dir.join("results.jsonl").exists() {
        return Err(UsageError::ExistingRun {
            dir: dir.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// A task's identity for resume: everything that shapes its rounds and
/// its score, with files by content (not by where they are). Files are
/// streamed through the hash (never held whole) and opened as every task
/// file is, within `max_file_bytes`; one that cannot be read hashes as
/// unreadable.
pub(super) fn task_hash(task: &Task, max_file_bytes: u64) -> String {
    let mut h = Sha256::new();
    let mut plain = task.clone();
    plain.files = Vec::new();
    h.update(serde_json::to_vec(&plain).unwrap_or_default());
    for f in &task.files {
        h.update(
            f.file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default(),
        );
        h.update([0]);
        let mut content = Sha256::new();
        let streamed = open_task_file(f, max_file_bytes, ReadAs::Harness)
            .map_err(std::io::Error::other)
            .and_then(|mut file| std::io::copy(&mut file, &mut content));
        match streamed {
            Ok(_) => h.update(content.finalize()),
            Err(_) => h.update(b"unreadable"),
        }
    }
    format!("{:x}", h.finalize())
}

/// The kernels' variables of a resumed run: those run.json records when
/// none are given (none of them secret, whose values it keeps redacted),
/// else those given, which must be the run's, value for value (secret
/// ones compared by their fingerprint's hash, never in clear).
pub(super) fn same_env(config: &RunConfig, given: &KernelEnv) -> Result<KernelEnv, UsageError> {
    let recorded = &config.spec.env;
    if given.is_empty() {
        if let Some(key) = recorded.missing_secrets().first() {
            return Err(UsageError::EnvSecretMissing {
                key: key.to_string(),
            });
        }
        return Ok(recorded.clone());
    }
    let then = config
        .arm_names()
        .first()
        .and_then(|arm| config.fingerprint(arm))
        .map_or_else(|| recorded.print(), |f| f.env);
    let now = given.print();
    let keys: BTreeSet<&String> = then.keys().chain(now.keys()).collect();
    // A secret's hash says nothing to the reader: only that it differs.
    let shown = |v: Option<&String>| match v {
        None => "not set".to_string(),
        Some(v) if v.starts_with("sha256:") => "a secret value".to_string(),
        Some(v) => format!("`{v}`"),
    };
    for key in keys {
        let (t, n) = (then.get(key), now.get(key));
        if t != n {
            return Err(UsageError::EnvChanged {
                key: key.clone(),
                then: shown(t),
                now: shown(n),
            });
        }
    }
    Ok(given.clone())
}

/// The selection recomputed on resume must be the run's selection, task by
/// task; anything else names the tasks that differ.
pub(super) fn same_tasks(config: &RunConfig, tasks: &[Task]) -> Result<(), HarnessError> {
    let provenance = &config.provenance;
    let now: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    let then: BTreeSet<&str> = provenance.task_ids.iter().map(String::as_str).collect();
    let missing: Vec<&str> = then.difference(&now).copied().collect();
    let added: Vec<&str> = now.difference(&then).copied().collect();
    let hashes: BTreeMap<&str, String> = tasks
        .iter()
        .map(|t| {
            let max = config.spec.tasks.max_task_file_bytes;
            (t.id.as_str(), task_hash(t, max))
        })
        .collect();
    let changed: Vec<&str> = provenance
        .task_hashes
        .iter()
        .filter(|(id, h)| hashes.get(id.as_str()).is_some_and(|now| now != *h))
        .map(|(id, _)| id.as_str())
        .collect();
    if missing.is_empty() && added.is_empty() && changed.is_empty() {
        return Ok(());
    }
    let list = |ids: &[&str]| {
        let shown: Vec<&str> = ids.iter().take(10).copied().collect();
        let more = ids.len().saturating_sub(shown.len());
        let mut s = shown.join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("no longer selected: {}", list(&missing)));
    }
    if !added.is_empty() {
        parts.push(format!("newly selected: {}", list(&added)));
    }
    if !changed.is_empty() {
        parts.push(format!("changed since the run started: {}", list(&changed)));
    }
    Err(UsageError::TasksChanged {
        suite: config.spec.tasks.suite.clone(),
        detail: parts.join("; "),
    }
    .into())
}
