//! `retrace run`: the main job — an evaluation of a model on a suite.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use retrace::harness::journal::{self, Journal};
use retrace::harness::progress::Progress;
use retrace::harness::{RunConfig, Runner, Selection, StopOn, SCHEMA_VERSION};
use retrace::kernel::{default_kernel_root, KernelSpec};
use retrace::model::{spec::from_spec, spec::Endpoint, Generation, ModelError};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::repair::prompt::Templates;
use retrace::report::{self, metrics::summarize};
use retrace::task::load::{datasets_dir, load_suite, select};
use retrace::util::units::parse_duration;

use super::limits::{kernel_options_for, sandbox_for, LimitArgs};
use super::Failure;

#[derive(Args)]
pub struct RunArgs {
    /// Suite: `math`, `tabular`, `packages`, or a path to a .jsonl file or directory.
    #[arg(long, default_value = "math")]
    pub suite: String,
    /// Model: `local`, `openai:<model>`, `oracle`, `oracle:faults`, `oracle:wrong`,
    /// `replay:<file>`.
    #[arg(long, default_value = "local")]
    pub model: String,
    /// Repair rounds after the first attempt (rounds are 0..=K).
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// When a task stops early: `clean` (ran cleanly with an answer; no
    /// ground truth) or `correct` (oracle feedback; labelled as such).
    #[arg(long, value_enum, default_value = "clean")]
    pub stop_on: StopOn,
    /// Tasks in flight at once.
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// Keep only the first N tasks (after sampling).
    #[arg(long)]
    pub limit_tasks: Option<usize>,
    /// Sample N tasks with `--seed`.
    #[arg(long)]
    pub sample: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Python image (package strategy): `fat` or `slim`.
    #[arg(long, default_value = "fat")]
    pub image: ImageName,
    /// Run directory (default `reports/<run-id>/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run in this directory (its configuration wins).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Directory with prompt templates overriding the built-in ones.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Characters of error feedback per repair message.
    #[arg(long, default_value_t = 4000)]
    pub feedback_budget: usize,
    /// OpenAI-compatible endpoint (else `OPENAI_BASE_URL`).
    #[arg(long)]
    pub base_url: Option<String>,
    /// API key (else `OPENAI_API_KEY`).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Send the plots of a failing round to the model as images.
    #[arg(long)]
    pub vision: bool,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Completion tokens per reply.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Timeout of one model request.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Retries of a failed model request (429, 5xx, timeouts).
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub async fn run(args: RunArgs) -> Result<i32, Failure> {
    let generation = Generation {
        temperature: args.temperature,
        max_tokens: args.max_tokens,
        request_timeout: args.request_timeout,
        max_retries: args.max_retries,
    };
    let endpoint = Endpoint {
        base_url: args.base_url.clone(),
        api_key: args.api_key.clone(),
        vision: args.vision,
    };

    // A resumed run keeps its own configuration.
    let resumed: Option<RunConfig> = match &args.resume {
        Some(dir) => {
            let path = dir.join("run.json");
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))
                .map_err(Failure::usage)?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))
                    .map_err(Failure::usage)?,
            )
        }
        None => None,
    };
    let (suite, selection, model_spec, rounds, stop_on) = match &resumed {
        Some(c) => (
            c.suite.clone(),
            c.selection.clone(),
            c.model.clone(),
            c.rounds,
            c.stop_on,
        ),
        None => (
            args.suite.clone(),
            Selection {
                limit_tasks: args.limit_tasks,
                sample: args.sample.or_else(|| default_sample(&args)),
                seed: args.seed,
            },
            args.model.clone(),
            args.rounds,
            args.stop_on,
        ),
    };
    let all = load_suite(&suite, &datasets_dir()).map_err(Failure::usage)?;
    let tasks = select(all, selection.limit_tasks, selection.sample, selection.seed);
    if tasks.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "suite `{suite}` selected no tasks"
        )));
    }
    let model = from_spec(
        &model_spec,
        resumed
            .as_ref()
            .map(|c| &c.generation)
            .unwrap_or(&generation),
        &endpoint,
        &tasks,
    )
    .await
    .map_err(|e| match e {
        ModelError::Config(_) => Failure::usage(e),
        // The local model could not be prepared or started.
        _ => Failure::infra(e),
    })?;

    let image_name = match &resumed {
        Some(c) => c
            .strategy
            .parse()
            .map_err(|e: String| Failure::usage(anyhow::anyhow!(e)))?,
        None => args.image,
    };
    let store = ImageStore::from_env();
    let image = tokio::task::spawn_blocking(move || store.ensure(image_name, true))
        .await
        .map_err(Failure::infra)?
        .map_err(Failure::infra)?;
    let (limits, unconfined) = match &resumed {
        Some(c) => (c.limits, !c.sandbox.confined),
        None => (args.limits.limits(), args.limits.unsafe_no_sandbox),
    };
    let sandbox = sandbox_for(&limits, unconfined)?;

    let config = match resumed {
        Some(c) => c,
        None => {
            let created = chrono::Utc::now();
            let short_model: String = model
                .name()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let run_id = format!("{}-{}", created.format("%Y%m%d-%H%M%S"), short_model);
            RunConfig {
                schema_version: SCHEMA_VERSION,
                out_dir: args
                    .out
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("reports").join(&run_id)),
                run_id,
                retrace_version: env!("CARGO_PKG_VERSION").into(),
                created: created.to_rfc3339(),
                suite: suite.clone(),
                selection,
                task_ids: tasks.iter().map(|t| t.id.clone()).collect(),
                rounds,
                stop_on,
                concurrency: args.concurrency,
                model: model.name(),
                synthetic_model: model.is_synthetic(),
                model_info: model.info(),
                generation,
                strategy: image_name.to_string(),
                image_lock_hash: image.lock_hash.clone(),
                limits,
                sandbox: sandbox.info(),
                feedback_budget: args.feedback_budget,
            }
        }
    };
    let out = config.out_dir.clone();
    std::fs::create_dir_all(&out)
        .with_context(|| format!("creating {}", out.display()))
        .map_err(Failure::infra)?;
    let results = out.join("results.jsonl");
    let finished = if args.resume.is_some() {
        journal::compact_for_resume(&results).map_err(Failure::infra)?
    } else {
        std::fs::write(
            out.join("run.json"),
            serde_json::to_string_pretty(&config).map_err(Failure::infra)?,
        )
        .map_err(Failure::infra)?;
        Default::default()
    };
    let todo: Vec<_> = tasks
        .into_iter()
        .filter(|t| !finished.contains(&t.id))
        .collect();

    eprintln!(
        "run {}: {} tasks ({} to do), model {}, rounds 0..={}, stop on {:?}",
        config.run_id,
        config.task_ids.len(),
        todo.len(),
        config.model,
        config.rounds,
        config.stop_on
    );
    eprintln!(
        "{}",
        super::limits::describe(&config.sandbox, &config.limits)
    );
    let templates = match &args.prompts {
        Some(dir) => Templates::from_dir(dir).map_err(Failure::usage)?,
        None => Templates::default(),
    };
    let progress = Arc::new(Progress::new(
        config.task_ids.len() as u64,
        finished.len() as u64,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    ));
    let kernel_options = kernel_options_for(&config.limits, unconfined);
    let runner = Arc::new(Runner {
        spec: Arc::new(KernelSpec {
            threads: config.limits.threads(),
            ..KernelSpec::new(image, default_kernel_root())
        }),
        config: Arc::new(config.clone()),
        model,
        sandbox,
        kernel_options,
        templates: Arc::new(templates),
        journal: Arc::new(Journal::open(&results).map_err(Failure::infra)?),
        progress: progress.clone(),
    });

    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\ninterrupted: stopping kernels; continue with --resume");
            let _ = cancel_tx.send(true);
        }
    });
    let outcome = runner.run_all(todo, cancel_rx).await;
    progress.finish();

    let records = journal::read(&results).map_err(Failure::infra)?;
    let summary = summarize(&config, &records);
    let files =
        report::write_all(&summary, &out).map_err(|e| Failure::infra(anyhow::anyhow!(e)))?;
    print_summary(&summary, &out);
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    match outcome {
        Ok(()) => Ok(0),
        Err(retrace::harness::HarnessError::Interrupted) => {
            eprintln!("resume with: retrace run --resume {}", out.display());
            Ok(130)
        }
        Err(e) => Err(Failure::infra(e)),
    }
}

/// The embedded model is small and slow (one request at a time on the
/// CPU), so its default run is a sample that finishes in minutes; any
/// explicit selection wins.
fn default_sample(args: &RunArgs) -> Option<usize> {
    let local = args.model == "local" || args.model.starts_with("local:");
    (local && args.limit_tasks.is_none()).then(|| {
        eprintln!(
            "note: the local model runs on {LOCAL_DEFAULT_SAMPLE} sampled tasks by default; \
             pass --sample N or --limit-tasks N to change that"
        );
        LOCAL_DEFAULT_SAMPLE
    })
}

const LOCAL_DEFAULT_SAMPLE: usize = 12;

fn print_summary(s: &report::Summary, out: &std::path::Path) {
    for label in report::labels(s) {
        println!("** {label} **");
    }
    println!("report: {}", out.join("report.md").display());
    let accs: Vec<String> = s
        .accuracy_by_round
        .iter()
        .enumerate()
        .map(|(r, a)| format!("Acc@{r} {:.1}%", 100.0 * a.value))
        .collect();
    println!("{} tasks: {}", s.tasks, accs.join("  "));
    println!(
        "recovery {}  regression {}  kill rate {}  infra errors {}",
        report::percent(s.recovery_rate.as_ref()),
        report::percent(s.regression_rate.as_ref()),
        report::percent(s.kill_rate.total.as_ref()),
        report::percent(s.infra_error_rate.as_ref()),
    );
}
