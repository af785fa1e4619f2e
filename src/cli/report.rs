//! `retrace report DIR [--rescore]`: every report file of a run written
//! again from its journal, optionally after re-checking every answer.

use std::path::{Path, PathBuf};

use clap::Args;
use retrace::harness::{read_config, rescore_run, run_tasks, write_reports, HarnessError};
use retrace::record::{AttemptRecord, RunConfig, StopOn};
use retrace::report::export;
use retrace::report::rescore::RescoreChanges;
use retrace::report::task_cases::{JunitExporter, JunitView};
use retrace::report::Summary;
use retrace::task::load::datasets_dir;
use retrace::task::Task;
use retrace::util::terminal;

use super::Failure;

#[derive(Args)]
pub struct ReportArgs {
    /// The run directory (holds run.json and results.jsonl).
    pub dir: PathBuf,
    /// Check every recorded answer again with the current checker and the
    /// suite's current expected answers (nothing is run again). The run's
    /// own journal is kept as results.jsonl.orig.
    #[arg(long)]
    pub rescore: bool,
}

pub async fn run(args: ReportArgs) -> Result<i32, Failure> {
    let (summary, files) = if args.rescore {
        let done = rescore_run(&args.dir, &run_datasets(&args.dir)?)
            .await
            .map_err(failure)?;
        if done.config.spec.policy.stop_on == StopOn::Correct {
            eprintln!(
                "note: this run stopped on correct answers (--stop-on correct); \
                 its rounds were steered by the old checks, only the scores change"
            );
        }
        print_changes(&done.changes);
        eprintln!("original journal kept as {}", done.original.display());
        (done.summary, done.files)
    } else {
        let config = read_config(&args.dir).map_err(failure)?;
        write_reports(&config, &args.dir).map_err(failure)?
    };
    print_accuracy(&summary);
    for f in &files {
        eprintln!("wrote {}", f.display());
    }
    Ok(0)
}

/// A finished run as JUnit XML in `path` (`retrace run --junit`).
pub fn write_junit(
    config: &RunConfig,
    records: &[AttemptRecord],
    path: &Path,
) -> Result<(), Failure> {
    let tasks = suite_tasks(config);
    let view = JunitView {
        config,
        records,
        tasks: &tasks,
    };
    export::write_one(&JunitExporter, &view, path).map_err(Failure::infra)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// The run's tasks as its suite has them now, for the expected answers
/// the task-by-task files name: a suite that cannot be read any more only
/// loses that detail.
pub(super) fn suite_tasks(config: &RunConfig) -> Vec<Task> {
    datasets_dir(&config.spec.tasks.suite)
        .ok()
        .and_then(|datasets| run_tasks(config, &datasets).ok())
        .unwrap_or_default()
}

/// Where the suite of the run in `dir` is found (its `run.json` names it).
pub(super) fn run_datasets(dir: &Path) -> Result<PathBuf, Failure> {
    let config = read_config(dir).map_err(failure)?;
    datasets_dir(&config.spec.tasks.suite).map_err(Failure::infra)
}

fn print_changes(c: &RescoreChanges) {
    for id in &c.missing_tasks {
        println!(
            "not in the suite any more, left as recorded: {}",
            terminal::line(id)
        );
    }
    println!("re-scored: {} record(s) changed", c.records_changed);
    for r in &c.by_round {
        if r.correct_before != r.correct_after {
            println!(
                "[{}] Acc@{}: {}/{} -> {}/{}",
                terminal::line(&r.strategy),
                r.round,
                r.correct_before,
                r.tasks,
                r.correct_after,
                r.tasks
            );
        }
    }
    if c.flipped.is_empty() {
        println!("no task changed its final correctness");
    }
    for f in &c.flipped {
        let how = if f.now_correct {
            "wrong -> right"
        } else {
            "right -> wrong"
        };
        println!(
            "[{}] {}: {how}",
            terminal::line(&f.strategy),
            terminal::line(&f.task_id)
        );
    }
}

fn print_accuracy(s: &Summary) {
    for arm in s.each_arm() {
        println!(
            "[{}] {} tasks: {}",
            terminal::line(&arm.header.strategy),
            arm.header.tasks,
            arm.accuracy_line()
        );
        for line in arm.published_lines() {
            println!("[{}] {line}", terminal::line(&arm.header.strategy));
        }
    }
}

pub(super) fn failure(e: HarnessError) -> Failure {
    if e.is_usage() {
        Failure::usage(e)
    } else {
        Failure::infra(e)
    }
}
