//! `retrace tasks list|validate SUITE`.

use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use retrace::harness::math_checker::MathChecker;
use retrace::harness::validate::validate;
use retrace::harness::ArmKernels;
use retrace::kernel::Executor;
use retrace::pyenv::{ImageStore, Strategy};
use retrace::record::{InstallOn, InstallStep};
use retrace::task::load::{datasets_dir, load_suite_with, LoadOptions, Skipped};
use retrace::task::{Expected, Task};
use retrace::util::terminal;
use retrace::util::units::{parse_bytes, parse_duration};

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
        #[command(flatten)]
        load: LoadArgs,
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
        #[command(flatten)]
        load: LoadArgs,
        /// Wall time per reference solution.
        #[arg(long = "reference-timeout", default_value = "60s", value_parser = parse_duration)]
        reference_timeout: Duration,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        executor: Box<ExecutorArgs>,
    },
}

/// How a suite is loaded: `retrace run`, `tasks list` and `tasks validate`.
#[derive(Args, Clone, Debug)]
pub struct LoadArgs {
    /// Leave out flawed dataset records (bad JSON or UTF-8, missing
    /// fields, bad labels, refused task files, duplicate ids) instead of
    /// refusing the suite; each is printed with file:line (and a run
    /// records it in run.json and the report).
    #[arg(long)]
    pub skip_invalid: bool,
    /// The largest task file (a file a dataset line names to be copied
    /// into its kernel); a larger one makes its record flawed. A run
    /// records it, and `--resume` loads with the recorded value.
    #[arg(
        long,
        value_name = "BYTES",
        default_value = "64M",
        value_parser = parse_task_file_bound
    )]
    pub max_task_file_bytes: u64,
}

impl LoadArgs {
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            skip_invalid: self.skip_invalid,
            max_task_file_bytes: self.max_task_file_bytes,
        }
    }
}

/// A size of at least one byte (`64M`, `1G`, `4096`).
fn parse_task_file_bound(text: &str) -> Result<u64, String> {
    match parse_bytes(text) {
        Ok(0) => Err(format!(
            "`{text}`: a task file bound must be at least 1 byte"
        )),
        Ok(bytes) => Ok(bytes),
        Err(e) => Err(e.to_string()),
    }
}

fn kind(e: &Expected) -> &'static str {
    match e {
        Expected::Number { .. } => "number",
        Expected::Text { .. } => "text",
        Expected::List { .. } => "list",
        Expected::Multi { .. } => "multi",
        Expected::Math { .. } => "math",
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
fn load(suite: &str, load: &LoadArgs) -> Result<Vec<Task>, Failure> {
    let datasets = datasets_dir(suite).map_err(Failure::infra)?;
    let loaded = load_suite_with(suite, &datasets, &load.options()).map_err(Failure::usage)?;
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
        TasksCommand::List { suite, json, load } => {
            let tasks = self::load(&suite, &load)?;
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
            load,
            reference_timeout,
            limits,
            executor,
        } => {
            let tasks = self::load(&suite, &load)?;
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
            let mut arm = ArmKernels::new(strategy, image, threads, install_on, &sandbox)
                .map_err(Failure::infra)?;
            arm.kernel = Arc::new(retrace::kernel::KernelSpec {
                max_file_bytes: load.max_task_file_bytes,
                ..(*arm.kernel).clone()
            });
            let mut options = limits.kernel_options();
            options.cpu_time = options.cpu_time.map(|_| reference_timeout);
            let math = MathChecker::for_tasks(&tasks, &sandbox)
                .await
                .map_err(Failure::infra)?;
            let results = validate(
                tasks,
                Arc::new(arm),
                math.clone(),
                executor,
                options,
                reference_timeout,
                jobs,
            )
            .await;
            if let Some(math) = math {
                math.close().await;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

    #[test]
    fn the_task_file_bound_defaults_to_the_librarys_and_refuses_zero() {
        assert_eq!(
            parse_task_file_bound("64M"),
            Ok(DEFAULT_MAX_TASK_FILE_BYTES)
        );
        assert_eq!(parse_task_file_bound("4096"), Ok(4096));
        for bad in ["0", "0K", "lots", "-1"] {
            assert!(parse_task_file_bound(bad).is_err(), "{bad}");
        }
    }
}
