//! `retrace run`: the main job — an evaluation of a model on a suite.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use retrace::harness::{cancel_on_ctrl_c, HarnessError, ResumeOptions, Run, RunOptions};
use retrace::model::{spec::Endpoint, Generation};
use retrace::pyenv::Strategy;
use retrace::record::{FeedbackMode, InstallOn, Selection, StopOn};
use retrace::report;
use retrace::task::load::datasets_dir;
use retrace::util::units::parse_duration;

use super::executor::ExecutorArgs;
use super::limits::LimitArgs;
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
    /// When a task stops early: `clean` (ran cleanly with an answer of any
    /// type; no ground truth), `never` (all rounds; clean rounds get a
    /// review prompt) or `correct` (oracle feedback; labelled as such).
    #[arg(long, value_enum, default_value = "clean")]
    pub stop_on: StopOn,
    /// What repair messages say after a failure: `parsed`, `parsed+state`
    /// (adds the live kernel's state around the failure), `raw`,
    /// `minimal` or `none`.
    #[arg(long, value_enum, default_value = "parsed")]
    pub feedback: FeedbackMode,
    /// Exit 0 despite up to N tasks ending on infrastructure errors
    /// (endpoint down, kernel start failed); more exit 3.
    #[arg(long, default_value_t = 0)]
    pub max_infra_errors: usize,
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
    /// Leave out flawed dataset records (bad JSON, missing fields, bad
    /// labels, duplicate ids) instead of refusing the suite; each is
    /// printed with file:line and recorded in run.json and the report.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Package strategy: `fat` (everything pre-installed), `dynamic` (the
    /// slim image plus installs on demand from the allowlist), `slim`
    /// (standard library only), or several comma-separated (`fat,dynamic`):
    /// one arm each on the same tasks, compared in the report, the first
    /// being the baseline. `--image` is an alias.
    #[arg(long, alias = "image", default_value = "fat", value_parser = parse_strategies)]
    pub strategy: Strategies,
    /// What makes a `dynamic` arm install: the model's own `pip install`
    /// lines (`explicit`), a `ModuleNotFoundError` (`missing`), or `both`.
    #[arg(long, value_enum, default_value = "both")]
    pub install_on: InstallOn,
    /// Run directory (default `reports/<run-id>/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run in this directory; tasks that ended on an
    /// infrastructure error are redone too (its run.json decides
    /// everything that shapes the run; other flags are ignored except
    /// --base-url, --api-key, --gateway-token and --max-infra-errors).
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
    /// Sampling temperature (round 0, and repairs unless
    /// `--repair-temperature` is given).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Sampling temperature of repair rounds [default: `--temperature`;
    /// 0.7 for `local` models, which resend failing code when greedy].
    /// Each request carries a seed derived from its conversation, so runs
    /// stay reproducible on servers that honour `seed`.
    #[arg(long)]
    pub repair_temperature: Option<f32>,
    /// Completion tokens per reply.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Timeout of one model request [default: 120s; 600s for `local`
    /// models, whose replies take minutes on a busy CPU].
    #[arg(long, value_parser = parse_duration)]
    pub request_timeout: Option<Duration>,
    /// Retries of a failed model request (429, 5xx, timeouts).
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,
    /// Also write the run as JUnit XML to FILE (one test case per task,
    /// per arm with several strategies), for CI dashboards.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub executor: ExecutorArgs,
}

pub async fn run(args: RunArgs) -> Result<i32, Failure> {
    // A bar on a terminal, plain lines in a log (the library picks).
    let progress = true;
    let init_binary = std::env::current_exe().map_err(Failure::infra)?;
    let endpoint = Endpoint {
        base_url: args.base_url.clone(),
        api_key: args.api_key.clone(),
        vision: args.vision,
    };
    let prepared = match &args.resume {
        Some(dir) => {
            Run::resume(
                dir,
                ResumeOptions {
                    endpoint,
                    datasets: super::report::run_datasets(dir)?,
                    init_binary,
                    progress,
                    kernel_start: args.limits.kernel_start(),
                    gateway_token: args.executor.gateway_token.clone(),
                },
            )
            .await
        }
        None => {
            if args.limits.unsafe_no_sandbox {
                eprintln!("warning: --unsafe-no-sandbox: kernels run WITHOUT confinement");
            }
            Run::create(RunOptions {
                suite: args.suite.clone(),
                datasets: datasets_dir(&args.suite).map_err(Failure::infra)?,
                selection: Selection {
                    limit_tasks: args.limit_tasks,
                    sample: args.sample.or_else(|| default_sample(&args)),
                    seed: args.seed,
                },
                skip_invalid: args.skip_invalid,
                model: args.model.clone(),
                endpoint,
                generation: Generation {
                    temperature: args.temperature,
                    repair_temperature: args
                        .repair_temperature
                        .or_else(|| is_local(&args.model).then_some(LOCAL_REPAIR_TEMPERATURE)),
                    max_tokens: args.max_tokens,
                    request_timeout: args.request_timeout.unwrap_or(if is_local(&args.model) {
                        LOCAL_REQUEST_TIMEOUT
                    } else {
                        REQUEST_TIMEOUT
                    }),
                    max_retries: args.max_retries,
                },
                rounds: args.rounds,
                stop_on: args.stop_on,
                feedback: args.feedback,
                feedback_budget: args.feedback_budget,
                concurrency: args.concurrency,
                strategies: args.strategy.0.clone(),
                install_on: args.install_on,
                limits: args.limits.limits(),
                unconfined: args.limits.unsafe_no_sandbox,
                kernel_start: args.limits.kernel_start(),
                gateway: args.executor.gateway(args.concurrency)?,
                out: args.out.clone(),
                prompts: args.prompts.clone(),
                init_binary,
                progress,
            })
            .await
        }
    };
    let run = prepared.map_err(failure)?;
    let config = run.config();
    super::tasks::print_skipped(&config.skipped);
    let (todo, done) = run.counts();
    eprintln!(
        "run {}: {} tasks ({todo} to do, {done} done), strategy {}, model {}, rounds 0..={}, stop on {}, feedback {}",
        config.run_id,
        config.task_ids.len(),
        config.strategy,
        config.model,
        config.rounds,
        config.stop_on.name(),
        config.feedback.name(),
    );
    eprintln!(
        "{}",
        super::limits::describe(&config.sandbox, &config.limits)
    );
    let result = run.execute(cancel_on_ctrl_c()).await.map_err(failure)?;
    print_summary(&result.summary, &result.dir);
    if let Some(path) = &args.junit {
        super::report::write_junit(&result.dir, path)?;
    }
    for f in &result.files {
        eprintln!("wrote {}", f.display());
    }
    if result.interrupted {
        eprintln!("resume with: retrace run --resume {}", result.dir.display());
        return Ok(130);
    }
    if result.infra_tasks > args.max_infra_errors {
        eprintln!(
            "error: {} task(s) ended on an infrastructure error (allowed: {}, see --max-infra-errors); \
             their records say why",
            result.infra_tasks, args.max_infra_errors
        );
        return Ok(3);
    }
    Ok(0)
}

/// `--strategy fat,dynamic`, parsed as one value.
#[derive(Debug, Clone)]
pub struct Strategies(pub Vec<Strategy>);

fn parse_strategies(text: &str) -> Result<Strategies, String> {
    Strategy::parse_list(text).map(Strategies)
}

fn failure(e: HarnessError) -> Failure {
    if e.is_usage() {
        Failure::usage(e)
    } else {
        Failure::infra(e)
    }
}

/// The embedded model is small and slow (one request at a time on the
/// CPU), so its default run is a sample that finishes in minutes; any
/// explicit selection wins.
fn default_sample(args: &RunArgs) -> Option<usize> {
    (is_local(&args.model) && args.limit_tasks.is_none()).then(|| {
        eprintln!(
            "note: the local model runs on {LOCAL_DEFAULT_SAMPLE} sampled tasks by default; \
             pass --sample N or --limit-tasks N to change that"
        );
        LOCAL_DEFAULT_SAMPLE
    })
}

const LOCAL_DEFAULT_SAMPLE: usize = retrace::model::local::DEFAULT_SAMPLE;
const LOCAL_REPAIR_TEMPERATURE: f32 = retrace::model::local::DEFAULT_REPAIR_TEMPERATURE;
const LOCAL_REQUEST_TIMEOUT: Duration = retrace::model::local::DEFAULT_REQUEST_TIMEOUT;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

fn is_local(model: &str) -> bool {
    model == "local" || model.starts_with("local:")
}

fn print_summary(s: &report::Summary, out: &std::path::Path) {
    for label in report::labels(s) {
        println!("** {label} **");
    }
    println!("report: {}", out.join("report.md").display());
    if s.arms.is_empty() {
        print_arm(s);
    }
    for arm in &s.arms {
        print!("[{}] ", arm.strategy);
        print_arm(arm);
    }
    if let Some(c) = &s.comparison {
        for arm in &c.arms {
            println!(
                "{} vs {} on {} shared tasks: McNemar b={} c={} p={:.3}",
                arm.strategy,
                c.baseline,
                arm.shared_tasks,
                arm.mcnemar.b,
                arm.mcnemar.c,
                arm.mcnemar.p_value
            );
        }
    }
}

fn print_arm(s: &report::Summary) {
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
    if let Some(i) = &s.installs {
        println!(
            "installs {} ({} from the store, {} downloaded)  denials {}  failures {}",
            i.steps, i.store_hits, i.downloads, i.denials, i.failures
        );
    }
}
