//! Re-scoring a run directory in place: the journal's answers checked
//! again against the suite as it is now, the original journal kept as
//! `results.jsonl.orig`, the fingerprints' checker version made the
//! current one, every report rewritten.

use std::path::{Path, PathBuf};

use super::error::{HarnessError, UsageError};
use super::journal;
use super::math_checker::MathChecker;
use super::run_dir::{read_config, run_tasks, write_config};
use crate::record::RunConfig;
use crate::report::rescore::{rescore, symbolic_pairs, RescoreChanges};
use crate::report::{self, Summary};
use crate::task::check::CHECKER_VERSION;
use crate::task::score::Symbolic;
use crate::util::IoContext;

/// The symbolic checker's verdicts on every LaTeX answer of the run, from
/// a checker of its own (confined as the run's kernels were).
async fn ask_checker(
    config: &RunConfig,
    records: &[crate::record::AttemptRecord],
    tasks: &[crate::task::Task],
) -> Result<Symbolic, HarnessError> {
    let pairs = symbolic_pairs(records, tasks);
    let mut symbolic = Symbolic::new();
    if pairs.is_empty() {
        return Ok(symbolic);
    }
    let init = std::env::current_exe().at("finding", Path::new("retrace's own binary"))?;
    let sandbox = crate::sandbox::open(config.spec.execution.unconfined, init)?;
    let Some(checker) = MathChecker::for_tasks(tasks, &sandbox).await? else {
        return Ok(symbolic);
    };
    for (latex, answer) in pairs {
        let verdict = checker.check(&latex, Some(&answer)).await;
        symbolic.insert((latex, answer), verdict);
    }
    checker.close().await;
    Ok(symbolic)
}

/// What re-scoring a run did.
#[derive(Debug)]
pub struct RescoreResult {
    pub config: RunConfig,
    pub changes: RescoreChanges,
    pub summary: Summary,
    /// The report files written.
    pub files: Vec<PathBuf>,
    /// Where the journal as the run wrote it is kept.
    pub original: PathBuf,
}

/// The name the original journal is kept under.
pub const ORIGINAL_JOURNAL: &str = "results.jsonl.orig";

/// Re-scores the run in `dir` with the suite found under `datasets`. The
/// first re-score moves the run's own journal to `results.jsonl.orig`;
/// later ones leave that file alone, so the journal as the run wrote it is
/// never lost. `results.jsonl` then holds the re-scored records, which
/// every report, `--resume` and `retrace compare` read.
pub async fn rescore_run(dir: &Path, datasets: &Path) -> Result<RescoreResult, HarnessError> {
    let config = read_config(dir)?;
    let path = dir.join("results.jsonl");
    let records = journal::read(&path)?;
    if records.is_empty() {
        return Err(UsageError::NoRecords { path }.into());
    }
    let tasks = run_tasks(&config, datasets)?;
    let symbolic = ask_checker(&config, &records, &tasks).await?;
    let rescored = rescore(&config, &records, &tasks, &symbolic);
    let original = dir.join(ORIGINAL_JOURNAL);
    if !original.exists() {
        std::fs::copy(&path, &original).at("keeping", &original)?;
    }
    journal::rewrite(&path, &rescored.records)?;
    // The verdicts are now the current checker's: the fingerprint says so,
    // so `compare` pairs this run with runs scored by the same rules.
    let mut config = config;
    for print in config.provenance.fingerprints.values_mut() {
        print.checker.version = CHECKER_VERSION;
    }
    write_config(&config, dir)?;
    let (summary, files) = report::write_all(&config, &rescored.records, dir)?;
    Ok(RescoreResult {
        config,
        changes: rescored.changes,
        summary,
        files,
        original,
    })
}
