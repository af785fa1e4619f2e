//! The run as a library: create a run (or resume one from its directory),
//! execute it with a cancel signal, get its summary. The CLI only maps
//! flags onto [`RunOptions`]; tests drive runs in-process the same way.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::journal::{self, ArmTask, Journal};
use super::progress::Progress;
use super::runner::{Arm, Runner};
use super::HarnessError;
use crate::kernel::gateway::{Gateway, GatewayConfig};
use crate::kernel::{zygote, Executor, ExecutorInfo, KernelOptions, KernelStart};
use crate::model::spec::{from_spec, Endpoint};
use crate::model::{Generation, ModelClient, ModelError};
use crate::pyenv::{Image, ImageStore, Strategy};
use crate::record::{ArmImage, InstallOn, RunConfig, Selection, StopOn, SCHEMA_VERSION};
use crate::repair::prompt::Templates;
use crate::repair::FeedbackMode;
use crate::report::{self, Summary};
use crate::sandbox::{Sandbox, SandboxLimits};
use crate::task::load::{load_suite_with, select};
use crate::task::Task;

/// Everything that shapes a new run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `math`, `tabular`, `packages`, or a path to a .jsonl file or directory.
    pub suite: String,
    /// Where built-in suites live.
    pub datasets: PathBuf,
    pub selection: Selection,
    /// `--skip-invalid`: leave flawed dataset records out (they are listed
    /// in run.json and the report) instead of refusing the suite.
    pub skip_invalid: bool,
    /// The `--model` value.
    pub model: String,
    pub endpoint: Endpoint,
    pub generation: Generation,
    pub rounds: u32,
    pub stop_on: StopOn,
    pub feedback: FeedbackMode,
    pub feedback_budget: usize,
    pub concurrency: usize,
    /// One arm per strategy, in this order (the first is the baseline).
    pub strategies: Vec<Strategy>,
    /// What triggers installs in a `dynamic` arm.
    pub install_on: InstallOn,
    pub limits: SandboxLimits,
    /// `--unsafe-no-sandbox`.
    pub unconfined: bool,
    /// How kernels start (`--kernel-start`).
    pub kernel_start: KernelStart,
    /// Run the kernels on this Jupyter gateway instead of locally
    /// (`--executor gateway`).
    pub gateway: Option<GatewayConfig>,
    /// The run directory; `None` gives `reports/<run-id>/`.
    pub out: Option<PathBuf>,
    /// Templates overriding the built-in prompts.
    pub prompts: Option<PathBuf>,
    /// retrace's own binary, PID 1 of every kernel's PID namespace.
    pub init_binary: PathBuf,
    /// Show progress on stderr: a bar on a terminal, a plain line every
    /// few seconds otherwise (CI logs).
    pub progress: bool,
}

/// How a resumed run is given what `run.json` cannot hold.
#[derive(Debug, Clone)]
pub struct ResumeOptions {
    /// The endpoint's address and key (secrets are never written down).
    pub endpoint: Endpoint,
    pub datasets: PathBuf,
    pub init_binary: PathBuf,
    pub progress: bool,
    /// How kernels start (`--kernel-start`); not part of `run.json`.
    pub kernel_start: KernelStart,
    /// The gateway's token, for a run on a gateway (never written down).
    pub gateway_token: Option<String>,
}

/// A run ready to execute: configuration written, journal open, model,
/// image and sandbox prepared, tasks still to do selected.
pub struct Run {
    runner: Arc<Runner>,
    /// (arm index, task) pairs still to run.
    todo: Vec<(usize, Task)>,
    finished: usize,
    progress: Arc<Progress>,
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
}

impl Run {
    /// Prepares a new run in a directory that must not hold a run yet.
    pub async fn create(opts: RunOptions) -> Result<Run, HarnessError> {
        let loaded = load_suite_with(&opts.suite, &opts.datasets, opts.skip_invalid)
            .map_err(|e| HarnessError::Config(e.to_string()))?;
        let s = &opts.selection;
        let tasks = select(loaded.tasks, s.limit_tasks, s.sample, s.seed);
        if tasks.is_empty() {
            return Err(HarnessError::Config(format!(
                "suite `{}` selected no tasks",
                opts.suite
            )));
        }
        let templates = match &opts.prompts {
            Some(dir) => Templates::from_dir(dir)?,
            None => Templates::default(),
        };
        if opts.strategies.is_empty() {
            return Err(HarnessError::Config(
                "a run needs at least one strategy".into(),
            ));
        }
        let model = model_for(&opts.model, &opts.generation, &opts.endpoint, &tasks).await?;
        let images = ensure_images(&opts.strategies).await?;
        let executor = open_executor(
            opts.gateway.clone(),
            opts.unconfined,
            &opts.init_binary,
            &opts.strategies,
        )
        .await?;
        let sandbox = local_sandbox(&executor, &opts.init_binary)?;
        let arms = make_arms(
            &opts.strategies,
            &images,
            &opts.limits,
            opts.install_on,
            &sandbox,
        )?;
        start_zygotes(&arms, &sandbox, &executor, opts.kernel_start);

        let created = chrono::Utc::now();
        let run_id = format!(
            "{}-{}",
            created.format("%Y%m%d-%H%M%S"),
            slug(&model.name())
        );
        let dir = opts
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("reports").join(&run_id));
        refuse_existing_run(&dir)?;
        let config = RunConfig {
            schema_version: SCHEMA_VERSION,
            run_id,
            retrace_version: env!("CARGO_PKG_VERSION").into(),
            created: created.to_rfc3339(),
            out_dir: dir.clone(),
            suite: opts.suite.clone(),
            selection: opts.selection.clone(),
            skip_invalid: opts.skip_invalid,
            skipped: loaded.skipped,
            task_ids: tasks.iter().map(|t| t.id.clone()).collect(),
            task_hashes: tasks.iter().map(|t| (t.id.clone(), task_hash(t))).collect(),
            task_tags: tasks
                .iter()
                .map(|t| (t.id.clone(), t.tags.clone()))
                .collect(),
            rounds: opts.rounds,
            stop_on: opts.stop_on,
            feedback: opts.feedback,
            concurrency: opts.concurrency.max(1),
            model: model.name(),
            model_spec: resumable_spec(&opts.model),
            synthetic_model: model.is_synthetic(),
            model_info: model.info(),
            generation: opts.generation.clone(),
            vision: opts.endpoint.vision,
            strategy: Strategy::join(&opts.strategies),
            image_lock_hash: images[0].lock_hash.clone(),
            install_on: opts.install_on,
            images: opts
                .strategies
                .iter()
                .zip(&images)
                .map(|(s, image)| (s.to_string(), arm_image(image)))
                .collect(),
            limits: opts.limits,
            sandbox: sandbox.info(),
            executor: executor.info(),
            feedback_budget: opts.feedback_budget,
            prompts_dir: opts.prompts.clone(),
            prompts_hash: templates.hash(),
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
        let run_json = dir.join("run.json");
        let text = serde_json::to_string_pretty(&config)
            .map_err(|e| HarnessError::Journal(format!("encoding run.json: {e}")))?;
        std::fs::write(&run_json, text)
            .map_err(|e| HarnessError::io(format!("writing {}", run_json.display()), e))?;
        Self::assemble(
            config,
            dir,
            tasks,
            HashSet::new(),
            model,
            arms,
            (sandbox, executor),
            templates,
            opts.unconfined,
            opts.kernel_start,
            opts.progress,
        )
    }

    /// Reopens the run in `dir` (its `run.json` decides everything that
    /// shapes it): finished tasks are kept, unfinished ones are redone from
    /// round 0. A changed dataset, selection or prompt set is refused.
    pub async fn resume(dir: &Path, opts: ResumeOptions) -> Result<Run, HarnessError> {
        let mut config = read_config(dir)?;
        // The directory given wins over where the run was made: a moved run
        // continues where it is.
        config.out_dir = dir.to_path_buf();

        let tasks = run_tasks(&config, &opts.datasets)?;
        same_tasks(&config, &tasks)?;
        let templates = match &config.prompts_dir {
            Some(dir) => Templates::from_dir(dir)?,
            None => Templates::default(),
        };
        if !config.prompts_hash.is_empty() && templates.hash() != config.prompts_hash {
            return Err(HarnessError::Config(format!(
                "the prompt templates ({}) changed since the run started; \
                 a resumed run must use the same prompts",
                config
                    .prompts_dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_else(|| "built-in".into())
            )));
        }
        let spec = if config.model_spec.is_empty() {
            config.model.clone()
        } else {
            config.model_spec.clone()
        };
        let endpoint = Endpoint {
            vision: config.vision,
            ..opts.endpoint
        };
        let model = model_for(&spec, &config.generation, &endpoint, &tasks).await?;
        let strategies = Strategy::parse_list(&config.strategy).map_err(HarnessError::Config)?;
        let images = ensure_images(&strategies).await?;
        let unconfined = !config.sandbox.confined;
        let gateway = match &config.executor {
            ExecutorInfo::Local => None,
            ExecutorInfo::Gateway(info) => Some(GatewayConfig {
                token: opts.gateway_token.clone(),
                ..GatewayConfig::recorded(info)
            }),
        };
        let executor = open_executor(gateway, unconfined, &opts.init_binary, &strategies).await?;
        let sandbox = local_sandbox(&executor, &opts.init_binary)?;
        let arms = make_arms(
            &strategies,
            &images,
            &config.limits,
            config.install_on,
            &sandbox,
        )?;
        start_zygotes(&arms, &sandbox, &executor, opts.kernel_start);
        let finished = journal::compact_for_resume(&dir.join("results.jsonl"))?;
        Self::assemble(
            config,
            dir.to_path_buf(),
            tasks,
            finished,
            model,
            arms,
            (sandbox, executor),
            templates,
            unconfined,
            opts.kernel_start,
            opts.progress,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        config: RunConfig,
        dir: PathBuf,
        tasks: Vec<Task>,
        finished: HashSet<ArmTask>,
        model: Arc<dyn ModelClient>,
        arms: Vec<Arm>,
        (sandbox, executor): (Arc<dyn Sandbox>, Executor),
        templates: Templates,
        unconfined: bool,
        kernel_start: KernelStart,
        show_progress: bool,
    ) -> Result<Run, HarnessError> {
        // Task by task, every arm in turn: an interrupted run has compared
        // arms on the same tasks.
        let todo: Vec<(usize, Task)> = tasks
            .iter()
            .flat_map(|t| (0..arms.len()).map(move |a| (a, t.clone())))
            .filter(|(a, t)| {
                !finished.contains(&ArmTask {
                    strategy: arms[*a].strategy.to_string(),
                    task_id: t.id.clone(),
                })
            })
            .collect();
        let progress = Arc::new(Progress::new(
            (config.task_ids.len() * arms.len()) as u64,
            finished.len() as u64,
            show_progress,
        ));
        let journal = Journal::open(&dir.join("results.jsonl"))?;
        let runner = Runner {
            arms,
            kernel_options: KernelOptions {
                start: kernel_start,
                ..KernelOptions::enforcing(&config.limits, !unconfined)
            },
            config: Arc::new(config),
            out_dir: dir,
            model,
            sandbox,
            executor,
            templates: Arc::new(templates),
            journal: Arc::new(journal),
            progress: progress.clone(),
        };
        Ok(Run {
            runner: Arc::new(runner),
            todo,
            finished: finished.len(),
            progress,
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
        (self.todo.len(), self.finished)
    }

    /// Runs every task still to do, then writes the reports. When `cancel`
    /// turns true, running tasks are stopped (their kernels killed), the
    /// reports cover what finished, and the result says `interrupted`.
    pub async fn execute(self, cancel: watch::Receiver<bool>) -> Result<RunResult, HarnessError> {
        let Run {
            runner,
            todo,
            progress,
            ..
        } = self;
        let outcome = runner.clone().run_all(todo, cancel).await;
        progress.finish();
        let interrupted = match outcome {
            Ok(()) => false,
            Err(HarnessError::Interrupted) => true,
            Err(e) => return Err(e),
        };
        let dir = runner.out_dir.clone();
        record_model_restarts(&runner.config, runner.model.as_ref(), &dir)?;
        let (summary, files) = write_reports(&runner.config, &dir)?;
        let infra_tasks = summary.infra_error_rate.map_or(0, |r| r.successes as usize);
        Ok(RunResult {
            dir,
            summary,
            files,
            interrupted,
            infra_tasks,
        })
    }
}

/// A model that restarted its server during this session (the local
/// model's `model_restarts`) says so in `run.json`, added to what an
/// earlier session of the same run recorded.
fn record_model_restarts(
    config: &RunConfig,
    model: &dyn ModelClient,
    dir: &Path,
) -> Result<(), HarnessError> {
    let key = "model_restarts";
    let now = model.info().get(key).and_then(|v| v.as_u64()).unwrap_or(0);
    if now == 0 {
        return Ok(());
    }
    tracing::warn!(
        restarts = now,
        "the model's server was restarted during the run"
    );
    let mut config = config.clone();
    let Some(info) = config.model_info.as_object_mut() else {
        return Ok(());
    };
    let before = info.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
    info.insert(key.into(), (before + now).into());
    let path = dir.join("run.json");
    let text = serde_json::to_string_pretty(&config)
        .map_err(|e| HarnessError::Journal(format!("encoding run.json: {e}")))?;
    std::fs::write(&path, text)
        .map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))
}

/// The configuration of the run in `dir` (its `run.json`).
pub fn read_config(dir: &Path) -> Result<RunConfig, HarnessError> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        HarnessError::Config(format!(
            "{}: {e}; expected a run directory made by `retrace run`",
            path.display()
        ))
    })?;
    serde_json::from_str(&text)
        .map_err(|e| HarnessError::Config(format!("{}: {e}", path.display())))
}

/// The run's tasks as its suite gives them now: the suite loaded again and
/// the run's selection applied (what resume and re-scoring see).
pub fn run_tasks(config: &RunConfig, datasets: &Path) -> Result<Vec<Task>, HarnessError> {
    let all = load_suite_with(&config.suite, datasets, config.skip_invalid)
        .map_err(|e| HarnessError::Config(e.to_string()))?;
    let s = &config.selection;
    Ok(select(all.tasks, s.limit_tasks, s.sample, s.seed))
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

/// The model client. Synthetic models (oracle, replay) get the tasks, with
/// their references, here and only here: requests never carry them.
async fn model_for(
    spec: &str,
    generation: &Generation,
    endpoint: &Endpoint,
    tasks: &[Task],
) -> Result<Arc<dyn ModelClient>, HarnessError> {
    from_spec(spec, generation, endpoint, tasks)
        .await
        .map_err(|e| match e {
            ModelError::Config(m) => HarnessError::Config(m),
            other => HarnessError::Setup(other.to_string()),
        })
}

/// One arm per strategy with its image, in the same order.
fn make_arms(
    strategies: &[Strategy],
    images: &[Image],
    limits: &SandboxLimits,
    install_on: InstallOn,
    sandbox: &Arc<dyn Sandbox>,
) -> Result<Vec<Arm>, HarnessError> {
    strategies
        .iter()
        .zip(images)
        .map(|(&strategy, image)| {
            Arm::new(
                strategy,
                image.clone(),
                limits.threads(),
                install_on,
                sandbox,
            )
        })
        .collect()
}

/// When kernels are forked locally from a zygote (not cold, not on a
/// gateway), each arm's zygote starts now, in the background: its own start
/// (about 1.5 s for the fat image) then overlaps the rest of the run's setup
/// instead of delaying the first kernel.
fn start_zygotes(
    arms: &[Arm],
    sandbox: &Arc<dyn Sandbox>,
    executor: &Executor,
    start: KernelStart,
) {
    if start != KernelStart::Zygote || !matches!(executor, Executor::Local(_)) {
        return;
    }
    for arm in arms {
        zygote::start_early((*arm.spec).clone(), sandbox.clone());
    }
}

/// Each strategy's image, built on first use.
async fn ensure_images(strategies: &[Strategy]) -> Result<Vec<Image>, HarnessError> {
    let mut images = Vec::new();
    for strategy in strategies {
        let name = strategy.image();
        let image = ImageStore::from_env()
            .ensure_blocking(name, true)
            .await
            .map_err(|e| HarnessError::Setup(format!("image {name}: {e}")))?;
        images.push(image);
    }
    Ok(images)
}

fn arm_image(image: &Image) -> ArmImage {
    ArmImage {
        name: image.name.to_string(),
        lock_hash: image.lock_hash.clone(),
        bytes: image.size(),
    }
}

fn local_sandbox(executor: &Executor, init: &Path) -> Result<Arc<dyn Sandbox>, HarnessError> {
    executor
        .local_sandbox(init.to_path_buf())
        .map_err(|e| HarnessError::Setup(e.to_string()))
}

fn open_sandbox(unconfined: bool, init: &Path) -> Result<Arc<dyn Sandbox>, HarnessError> {
    crate::sandbox::open(unconfined, init.to_path_buf())
        .map_err(|e| HarnessError::Setup(e.to_string()))
}

/// The executor of a run: the gateway when one is given (checked now, so a
/// wrong URL, token or kernelspec stops the run before any task), else
/// local kernels in this machine's sandbox.
pub(super) async fn open_executor(
    gateway: Option<GatewayConfig>,
    unconfined: bool,
    init: &Path,
    strategies: &[Strategy],
) -> Result<Executor, HarnessError> {
    let Some(config) = gateway else {
        return Ok(Executor::Local(open_sandbox(unconfined, init)?));
    };
    if strategies.iter().any(|s| s.installs()) {
        return Err(HarnessError::Config(Executor::LOCAL_ONLY_DYNAMIC.into()));
    }
    if strategies.len() > 1 {
        return Err(HarnessError::Config(
            "a run on a gateway has one strategy: the gateway's kernelspec (--gateway-kernel) \
             decides its packages"
                .into(),
        ));
    }
    let gateway = Gateway::connect(config)
        .await
        .map_err(|e| HarnessError::Setup(e.to_string()))?;
    Ok(Executor::Gateway(gateway))
}

/// A directory that already holds a run is never written into by a new
/// run: its journal would get a second run's records.
fn refuse_existing_run(dir: &Path) -> Result<(), HarnessError> {
    if dir.join("run.json").exists() || dir.join("results.jsonl").exists() {
        return Err(HarnessError::Config(format!(
            "{} already holds a run; continue it with `retrace run --resume {}` \
             or choose another --out",
            dir.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// The spec that rebuilds the model on resume: a replay file by its
/// absolute path, so the run resumes from any directory.
fn resumable_spec(spec: &str) -> String {
    match spec.trim().split_once(':') {
        Some(("replay", path)) => match std::path::absolute(path.trim()) {
            Ok(abs) => format!("replay:{}", abs.display()),
            Err(_) => spec.to_string(),
        },
        _ => spec.trim().to_string(),
    }
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A task's identity for resume: everything that shapes its rounds and
/// its score, with files by content (not by where they are).
fn task_hash(task: &Task) -> String {
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
        match std::fs::read(f) {
            Ok(bytes) => h.update(Sha256::digest(bytes)),
            Err(_) => h.update(b"unreadable"),
        }
    }
    format!("{:x}", h.finalize())
}

/// The selection recomputed on resume must be the run's selection, task by
/// task; anything else names the tasks that differ.
fn same_tasks(config: &RunConfig, tasks: &[Task]) -> Result<(), HarnessError> {
    let now: BTreeSet<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    let then: BTreeSet<&str> = config.task_ids.iter().map(String::as_str).collect();
    let missing: Vec<&str> = then.difference(&now).copied().collect();
    let added: Vec<&str> = now.difference(&then).copied().collect();
    let hashes: BTreeMap<&str, String> = tasks
        .iter()
        .map(|t| (t.id.as_str(), task_hash(t)))
        .collect();
    let changed: Vec<&str> = config
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
    Err(HarnessError::Config(format!(
        "suite `{}` no longer gives this run's tasks ({}); a resumed run must see the same tasks",
        config.suite,
        parts.join("; ")
    )))
}
