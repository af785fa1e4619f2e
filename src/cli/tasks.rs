//! `retrace tasks list|validate SUITE`.

use std::sync::Arc;
use std::time::Duration;

use clap::Subcommand;
use retrace::harness::validate::validate;
use retrace::harness::ArmKernels;
use retrace::kernel::Executor;
use retrace::pyenv::{ImageStore, Strategy};
use retrace::record::{InstallOn, InstallStep};
use retrace::task::load::{datasets_dir, load_suite_with, Skipped};
use retrace::task::{Expected, Task};
use retrace::util::terminal;
use retrace::util::units::parse_duration;

use super::executor::ExecutorArgs;
use super::limits::LimitArgs;
use super::Failure;

#[derive(Subcommand)]
pub enum TasksCommand {
    /// List the tasks of a suite (`math`, `tabular`, `packages` or a path).
    List {
        suite: String,
        #[arg(long)]
        json: bool,
        /// Leave out flawed records (listed on stderr) instead of refusing
        /// the suite.
        #[arg(long)]
        skip_invalid: bool,
    },
    /// Run every reference solution in a confined kernel; fails unless every
    /// answer checks correct.
    Validate {
        suite: String,
        /// Package strategy of the kernels: `fat`, `dynamic` (installs what
        /// each reference needs) or `slim`. `--image` is an alias.
        #[arg(long, alias = "image", default_value = "fat")]
        strategy: Strategy,
        /// What makes a `dynamic` kernel install.
        #[arg(long, value_enum, default_value = "both")]
        install_on: InstallOn,
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Leave out flawed records (listed on stderr) instead of refusing
        /// the suite.
        #[arg(long)]
        skip_invalid: bool,
        /// Wall time per reference solution.
        #[arg(long = "reference-timeout", default_value = "60s", value_parser = parse_duration)]
        reference_timeout: Duration,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        executor: Box<ExecutorArgs>,
    },
}

fn kind(e: &Expected) -> &'static str {
    match e {
        Expected::Number { .. } => "number",
        Expected::Text { .. } => "text",
        Expected::List { .. } => "list",
        Expected::Multi { .. } => "multi",
    }
}

/// `[installed numpy, scipy: store] ` for a dynamic validation.
fn installed(steps: &[InstallStep]) -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut downloaded = 0;
    for w in steps.iter().flat_map(|s| &s.wheels) {
        if !names.contains(&w.name.as_str()) {
            names.push(&w.name);
        }
        downloaded += usize::from(!w.store_hit);
    }
    match (names.is_empty(), downloaded) {
        (true, _) => String::new(),
        (false, 0) => format!("[installed {}: store] ", names.join(", ")),
        (false, n) => format!("[installed {}: {n} downloaded] ", names.join(", ")),
    }
}

/// The suite's tasks; skipped records are printed on stderr.
fn load(suite: &str, skip_invalid: bool) -> Result<Vec<Task>, Failure> {
    let datasets = datasets_dir(suite).map_err(Failure::infra)?;
    let loaded = load_suite_with(suite, &datasets, skip_invalid).map_err(Failure::usage)?;
    print_skipped(&loaded.skipped);
    Ok(loaded.tasks)
}

/// One stderr line per record `--skip-invalid` left out, then the count.
/// A record's id and flaw come from the dataset: shown, never acted on.
pub(super) fn print_skipped(skipped: &[Skipped]) {
    for s in skipped {
        eprintln!("skipped {}", terminal::line(&s.to_string()));
    }
    if !skipped.is_empty() {
        eprintln!(
            "skipped {} invalid record(s) (--skip-invalid)",
            skipped.len()
        );
    }
}

pub async fn run(cmd: TasksCommand) -> Result<i32, Failure> {
    match cmd {
        TasksCommand::List {
            suite,
            json,
            skip_invalid,
        } => {
            let tasks = load(&suite, skip_invalid)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&tasks).map_err(Failure::infra)?
                );
                return Ok(0);
            }
            for t in &tasks {
                let mut question: String = t.question.chars().take(70).collect();
                if t.question.chars().count() > 70 {
                    question.push('…');
                }
                println!(
                    "{:<24} {:<6} {:<24} {}",
                    terminal::line(&t.id),
                    kind(&t.expected),
                    terminal::line(&t.packages.join(",")),
                    terminal::line(&question.replace('\n', " "))
                );
            }
            println!("{} tasks", tasks.len());
            Ok(0)
        }
        TasksCommand::Validate {
            suite,
            strategy,
            install_on,
            jobs,
            skip_invalid,
            reference_timeout,
            limits,
            executor,
        } => {
            let tasks = load(&suite, skip_invalid)?;
            if strategy.installs() && executor.gateway(jobs)?.is_some() {
                return Err(Failure::usage(anyhow::anyhow!(
                    Executor::LOCAL_ONLY_DYNAMIC
                )));
            }
            let executor = executor.open(&limits, jobs).await?;
            let image = ImageStore::from_env()
                .ensure_blocking(strategy.image(), true)
                .await
                .map_err(Failure::infra)?;
            let sandbox = executor
                .local_sandbox(std::env::current_exe().map_err(Failure::infra)?)
                .map_err(Failure::infra)?;
            if let Some(line) = super::executor::describe(&executor) {
                eprintln!("{line}");
            }
            let threads = limits.limits().threads();
            let arm = ArmKernels::new(strategy, image, threads, install_on, &sandbox)
                .map_err(Failure::infra)?;
            let mut options = limits.kernel_options();
            options.cpu_time = options.cpu_time.map(|_| reference_timeout);
            let results = validate(
                tasks,
                Arc::new(arm),
                executor,
                options,
                reference_timeout,
                jobs,
            )
            .await;
            let mut failed = 0;
            for v in &results {
                let mark = if v.correct { "ok" } else { "FAIL" };
                println!(
                    "{:<4} {:<24} {:>8.0} ms  {}{}",
                    mark,
                    terminal::line(&v.task_id),
                    v.ms,
                    terminal::line(&installed(&v.installs)),
                    terminal::line(v.problem.as_deref().unwrap_or(""))
                );
                failed += usize::from(!v.correct);
            }
            println!(
                "{} of {} references check correct",
                results.len() - failed,
                results.len()
            );
            Ok(if failed == 0 { 0 } else { 1 })
        }
    }
}
