//! The run as a library: create a run from its [`RunSpec`] (or resume one
//! from its directory), execute it with a cancel signal, get its summary.
//! The CLI only maps flags onto the spec; tests drive runs in-process the
//! same way.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

use super::error::{HarnessError, UsageError};
use super::journal::{self, ArmTask, Journal};
use super::prepare::{prepare, Prepared, RunContext};
use super::progress::Progress;
use super::round0_source::{self, Round0s};
use super::run_dir::{
    load_tasks, read_config, refuse_existing_run, same_env, same_tasks, task_hash, write_config,
};
use super::runner::Runner;
use super::schedule::{self, Job};
use crate::kernel::{Executor, ExecutorInfo, KernelOptions};
use crate::model::local::NO_DRAFT;
use crate::model::spec::ModelSpec;
use crate::pyenv::Image;
use crate::record::{ArmImage, AttemptRecord, Provenance, RunConfig, RunSpec, RUN_SCHEMA_VERSION};
use crate::report::{self, Summary};
use crate::task::check::published::rules_of;
use crate::task::Task;

/// A run ready to execute: `run.json` written, journal open, model,
/// images and sandbox prepared, tasks still to do selected.
pub struct Run {
    runner: Arc<Runner>,
    /// Tasks still to run, each in the arms of one round-0 group.
    todo: Vec<Job>,
    finished: usize,
    progress: Arc<Progress>,
    /// The tasks, kept for the false-alarm control (none without it).
    control_tasks: Vec<Task>,
}

/// What a resumed run finished before: its tasks per arm, and their
/// round-0 records; and the round 0 recorded by another run
/// (`--round0-from`).
#[derive(Default)]
struct Done {
    finished: HashSet<ArmTask>,
    shared: Vec<AttemptRecord>,
    round0s: Round0s,
}

/// The round 0 of `--round0-from`, if the spec asks for one.
fn recorded_round0s(spec: &RunSpec, tasks: &[Task]) -> Result<Round0s, HarnessError> {
    match &spec.policy.round0_from {
        Some(from) => round0_source::load(from, tasks, spec.tasks.max_task_file_bytes),
        None => Ok(Round0s::default()),
    }
}

/// What an executed run gives back.
#[derive(Debug)]
pub struct RunResult {
    pub dir: PathBuf,
    pub summary: Summary,
    /// The report files written.
    pub files: Vec<PathBuf>,
    /// Stopped by the cancel signal; `--resume` continues it.
    pub interrupted: bool,
    /// Tasks that ended on an infrastructure failure.
    pub infra_tasks: usize,
    /// The run's configuration and its journal as the reports read it, for
    /// the outputs the caller writes (JUnit) without reading them again.
    pub config: RunConfig,
    pub records: Vec<AttemptRecord>,
}

impl Run {
    /// Prepares a new run of `spec` in `out` (default `reports/<run-id>/`),
    /// a directory that must not hold a run yet.
    pub async fn create(
        mut spec: RunSpec,
        out: Option<PathBuf>,
        ctx: RunContext,
    ) -> Result<Run, HarnessError> {
        spec.execution.concurrency = spec.execution.concurrency.max(1);
        let varying = spec.varying();
        if varying.len() > 1 && !spec.arms.product {
            return Err(UsageError::ArmsProduct { flags: varying }.into());
        }
        let names: Vec<String> = spec.arms().into_iter().map(|a| a.name).collect();
        if let Some(name) = names
            .iter()
            .enumerate()
            .find_map(|(i, n)| names[..i].contains(n).then(|| n.clone()))
        {
            return Err(UsageError::DuplicateArm { name }.into());
        }
        spec.env.check().map_err(UsageError::from)?;
        spec.env.register_secrets();
        let (tasks, skipped) = load_tasks(&spec.tasks, &ctx.datasets)?;
        if tasks.is_empty() {
            return Err(UsageError::NoTasks {
                suite: spec.tasks.suite.clone(),
            }
            .into());
        }
        let round0s = recorded_round0s(&spec, &tasks)?;
        let prepared = prepare(&spec, &tasks, &ctx).await?;
        let created = chrono::Utc::now();
        let run_id = format!(
            "{}-{}",
            created.format("%Y%m%d-%H%M%S"),
            slug(&prepared.model.name())
        );
        let dir = out.unwrap_or_else(|| PathBuf::from("reports").join(&run_id));
        refuse_existing_run(&dir)?;
        let mut provenance = provenance(&spec, &prepared, &tasks, skipped, run_id, &dir);
        provenance.created = created.to_rfc3339();
        provenance.round0_source = round0s.source.clone();
        let config = RunConfig {
            schema_version: RUN_SCHEMA_VERSION,
            spec,
            provenance,
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| crate::util::IoError::new(format!("creating {}", dir.display()), e))?;
        write_config(&config, &dir)?;
        let done = Done {
            round0s,
            ..Done::default()
        };
        Self::assemble(config, dir, tasks, done, prepared, &ctx)
    }

    /// Reopens the run in `dir` (its `run.json` decides everything that
    /// shapes it): finished tasks are kept, unfinished ones are redone from
    /// round 0. A changed dataset, selection or prompt set is refused.
    pub async fn resume(dir: &Path, mut ctx: RunContext) -> Result<Run, HarnessError> {
        let mut config = read_config(dir)?;
        let given = ctx.endpoint.serving.draft.take();
        ctx.endpoint.serving.draft = recorded_draft(&config.provenance.model_info, given);
        // The directory given wins over where the run was made: a moved run
        // continues where it is.
        config.provenance.out_dir = dir.to_path_buf();
        ctx.env.register_secrets();
        config.spec.env = same_env(&config, &ctx.env)?;
        // A run.json edited by hand is held to the rules a flag is.
        config.spec.env.check().map_err(UsageError::from)?;
        let tasks = load_tasks(&config.spec.tasks, &ctx.datasets)?.0;
        same_tasks(&config, &tasks)?;
        let recorded = recorded_round0s(&config.spec, &tasks)?;
        if let (Some(then), Some(now), Some(from)) = (
            &config.provenance.round0_source,
            &recorded.source,
            &config.spec.policy.round0_from,
        ) {
            if then.run_id != now.run_id {
                return Err(UsageError::Round0Changed {
                    dir: from.run.clone(),
                    then: then.run_id.clone(),
                    now: now.run_id.clone(),
                }
                .into());
            }
        }
        let prepared = prepare(&config.spec, &tasks, &ctx).await?;
        let hash = &config.provenance.prompts_hash;
        if !hash.is_empty() && prepared.templates.hash(&config.spec.execution_modes()) != *hash {
            let dir = config.spec.policy.prompts.as_ref();
            return Err(UsageError::PromptsChanged {
                dir: dir.map_or_else(|| "built-in".into(), |d| d.display().to_string()),
            }
            .into());
        }
        let torn: Vec<PathBuf> = [dir.to_path_buf(), dir.join("plots")]
            .iter()
            .flat_map(|d| crate::util::atomic_write::remove_torn_writes(d))
            .collect();
        for torn in torn {
            tracing::warn!(file = %torn.display(), "removed a file a crash left half written");
        }
        let journal = dir.join("results.jsonl");
        let (finished, kept) = journal::compact(&journal)?;
        // The round 0 an unfinished arm shares with a finished one.
        let shared = kept.into_iter().filter(|r| r.round == 0).collect();
        let done = Done {
            finished,
            shared,
            round0s: recorded,
        };
        Self::assemble(config, dir.to_path_buf(), tasks, done, prepared, &ctx)
    }

    fn assemble(
        config: RunConfig,
        dir: PathBuf,
        tasks: Vec<Task>,
        done: Done,
        prepared: Prepared,
        ctx: &RunContext,
    ) -> Result<Run, HarnessError> {
        let arms = prepared.arms;
        let todo = schedule::jobs(&arms, &tasks, &done.finished, done.shared, &done.round0s);
        let finished = done.finished;
        let progress = Arc::new(Progress::new(
            (config.provenance.task_ids.len() * arms.len()) as u64,
            finished.len() as u64,
            ctx.progress,
        ));
        let journal = Journal::open(&dir.join("results.jsonl"))?;
        let execution = &config.spec.execution;
        let runner = Runner {
            arms,
            kernel_options: KernelOptions {
                start: ctx.kernel_start.unwrap_or(execution.kernel_start),
                env: config.spec.env.clone(),
                ..KernelOptions::enforcing(&execution.limits, !execution.unconfined)
            },
            config: Arc::new(config),
            out_dir: dir,
            model: prepared.model,
            sandbox: prepared.sandbox,
            executor: prepared.executor,
            templates: Arc::new(prepared.templates),
            journal: Arc::new(journal),
            progress: progress.clone(),
        };
        let control_tasks = match runner.config.spec.false_alarm {
            Some(_) => tasks,
            None => Vec::new(),
        };
        Ok(Run {
            runner: Arc::new(runner),
            todo,
            finished: finished.len(),
            progress,
            control_tasks,
        })
    }

    pub fn config(&self) -> &RunConfig {
        &self.runner.config
    }

    pub fn dir(&self) -> &Path {
        &self.runner.out_dir
    }

    /// Tasks still to run, and tasks already finished (a resumed run).
    pub fn counts(&self) -> (usize, usize) {
        (self.todo.iter().map(Job::pairs).sum(), self.finished)
    }

    /// Runs every task still to do, then writes the reports. When `cancel`
    /// turns true, running tasks are stopped (their kernels killed), the
    /// reports cover what finished, and the result says `interrupted`.
    pub async fn execute(self, cancel: watch::Receiver<bool>) -> Result<RunResult, HarnessError> {
        let Run {
            runner,
            todo,
            progress,
            control_tasks,
            ..
        } = self;
        let started = std::time::Instant::now();
        let outcome = match schedule::run_all(runner.clone(), todo, cancel.clone()).await {
            Ok(()) => super::false_alarm::run(&runner, &control_tasks, cancel).await,
            interrupted => interrupted,
        };
        progress.finish();
        // The arms share one symbolic checker.
        if let Some(math) = runner.arms.iter().find_map(|a| a.math.as_ref()) {
            math.close().await;
        }
        let interrupted = match outcome {
            Ok(()) => false,
            Err(HarnessError::Interrupted) => true,
            Err(e) => return Err(e),
        };
        let dir = runner.out_dir.clone();
        let config = end_session(&runner, started.elapsed(), &dir)?;
        // Read once, here, rather than kept in memory as the run goes: a
        // long run's own memory stays flat.
        let records = journal::read(&dir.join("results.jsonl"))?;
        let (summary, files) = report::write_all(&config, &records, &dir)?;
        let infra_tasks = summary
            .execution
            .infra_error_rate
            .map_or(0, |r| r.successes as usize);
        Ok(RunResult {
            dir,
            summary,
            files,
            interrupted,
            infra_tasks,
            config,
            records,
        })
    }
}

/// What this session adds to `run.json`'s provenance, to what earlier
/// sessions of the same run recorded: its wall time, the restarts of the
/// model's server (the local model's `model_restarts`), and the kernels a
/// gateway started on each host. Returns the config as written.
fn end_session(
    runner: &Runner,
    elapsed: std::time::Duration,
    dir: &Path,
) -> Result<RunConfig, HarnessError> {
    let model = runner.model.as_ref();
    let mut config = runner.config.as_ref().clone();
    if let (ExecutorInfo::Gateway(info), Executor::Gateway(gateway)) =
        (&mut config.provenance.executor, &runner.executor)
    {
        for (host, kernels) in gateway.hosts() {
            *info.hosts.entry(host).or_default() += kernels;
        }
    }
    config.provenance.wall_ms += elapsed.as_secs_f64() * 1e3;
    let key = "model_restarts";
    let now = model.info().get(key).and_then(|v| v.as_u64()).unwrap_or(0);
    if now > 0 {
        tracing::warn!(
            restarts = now,
            "the model's server was restarted during the run"
        );
        if let Some(info) = config.provenance.model_info.as_object_mut() {
            let before = info.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
            info.insert(key.into(), (before + now).into());
        }
    }
    write_config(&config, dir)?;
    Ok(config)
}

/// What the run turned out to be, beside what was asked for.
fn provenance(
    spec: &RunSpec,
    prepared: &Prepared,
    tasks: &[Task],
    skipped: Vec<crate::task::load::Skipped>,
    run_id: String,
    dir: &Path,
) -> Provenance {
    let model = &prepared.model;
    Provenance {
        run_id,
        retrace_version: env!("CARGO_PKG_VERSION").into(),
        retrace_commit: Some(env!("RETRACE_COMMIT").into()),
        created: String::new(),
        out_dir: dir.to_path_buf(),
        skipped,
        task_ids: tasks.iter().map(|t| t.id.clone()).collect(),
        task_hashes: tasks
            .iter()
            .map(|t| (t.id.clone(), task_hash(t, spec.tasks.max_task_file_bytes)))
            .collect(),
        task_tags: tasks
            .iter()
            .map(|t| (t.id.clone(), t.tags.clone()))
            .collect(),
        task_rules: tasks
            .iter()
            .map(|t| (t.id.clone(), rules_of(t)))
            .filter(|(_, rules)| !rules.is_empty())
            .map(|(id, rules)| (id, rules.iter().map(|r| r.to_string()).collect()))
            .collect(),
        model: model.name(),
        synthetic_model: model.is_synthetic(),
        model_info: model.info(),
        image_lock_hash: prepared.images[0].lock_hash.clone(),
        images: spec
            .packages
            .strategies
            .iter()
            .zip(&prepared.images)
            .map(|(s, image)| (s.to_string(), arm_image(image)))
            .collect(),
        sandbox: prepared.sandbox.info(),
        executor: prepared.executor.info(),
        prompts_hash: prepared.templates.hash(&spec.execution_modes()),
        // Computed from the config when run.json is written.
        fingerprints: Default::default(),
        wall_ms: 0.0,
        round0_source: None,
    }
}

fn arm_image(image: &Image) -> ArmImage {
    ArmImage {
        name: image.name.to_string(),
        lock_hash: image.lock_hash.clone(),
        bytes: image.size(),
    }
}

/// Rewrites every report of the run in `dir` from its journal.
pub fn write_reports(
    config: &RunConfig,
    dir: &Path,
) -> Result<(Summary, Vec<PathBuf>), HarnessError> {
    let records = journal::read(&dir.join("results.jsonl"))?;
    Ok(report::write_all(config, &records, dir)?)
}

/// A watch that turns true on the first Ctrl-C.
pub fn cancel_on_ctrl_c() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ninterrupted: stopping kernels; continue with --resume");
            let _ = tx.send(true);
        }
    });
    rx
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The draft model a resumed run is served with: the one given again,
/// else the one that served it (run.json's `model_info.draft`, a `local:`
/// spec; `none` for a local model served without one), since a
/// draft can change sampled replies and the fingerprint holds it.
fn recorded_draft(model_info: &serde_json::Value, given: Option<String>) -> Option<String> {
    given.or_else(
        || match model_info.get("draft").and_then(|d| d.get("model")) {
            Some(model) => match model.as_str()?.parse() {
                Ok(ModelSpec::Local(Some(arg))) => Some(arg),
                _ => None,
            },
            None => model_info.get("gguf_sha256").map(|_| NO_DRAFT.into()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::recorded_draft;
    use serde_json::json;

    #[test]
    fn a_resumed_run_keeps_the_draft_that_served_it() {
        let drafted = json!({"gguf_sha256": "a", "draft": {"model": "local:small-draft"}});
        assert_eq!(
            recorded_draft(&drafted, None).as_deref(),
            Some("small-draft")
        );
        let path = json!({"gguf_sha256": "a", "draft": {"model": "local:/m/d.gguf"}});
        assert_eq!(recorded_draft(&path, None).as_deref(), Some("/m/d.gguf"));
        // Served without one: none, whatever the catalogue says now.
        let plain = json!({"gguf_sha256": "a", "draft": null});
        assert_eq!(recorded_draft(&plain, None).as_deref(), Some("none"));
        // The flag given again wins; a remote model has no draft.
        assert_eq!(
            recorded_draft(&drafted, Some("none".into())).as_deref(),
            Some("none")
        );
        assert_eq!(recorded_draft(&json!({}), None), None);
    }
}
