//! `retrace run`: the main job — an evaluation of a model on a suite.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use retrace::harness::{cancel_on_ctrl_c, HarnessError, Run, RunContext};
use retrace::model::local::Serving;
use retrace::model::spec::{Endpoint, ModelSpec};
use retrace::model::Generation;
use retrace::pyenv::Strategy;
use retrace::record::{
    AfterFailure, ArmAxes, Execution, ExecutionMode, ExecutorSpec, FeedbackMode, GatewaySpec,
    InstallOn, LoopPolicy, ModelSetup, PackageSpec, Round0From, RunSpec, Selection, StopOn,
    TaskSpec,
};
use retrace::report;
use retrace::task::load::{datasets_dir, TagQuota};
use retrace::util::terminal;
use retrace::util::units::{parse_bytes, parse_duration};

use super::executor::ExecutorArgs;
use super::kernel_env::EnvArgs;
use super::limits::LimitArgs;
use super::tasks::LoadArgs;
use super::Failure;

/// `retrace run`'s flags: one group per section of the run's spec, and
/// what only this invocation needs (where, resume, exit policy, JUnit).
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub tasks: TaskArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Exit 0 despite up to N tasks ending on infrastructure errors
    /// (endpoint down, kernel start failed); more exit 3.
    #[arg(long, default_value_t = 0)]
    pub max_infra_errors: usize,
    /// Tasks in flight at once [default: 2; for `local` models the server's
    /// slot count, `RETRACE_MODEL_SLOTS` or 4].
    #[arg(long)]
    pub concurrency: Option<usize>,
    #[command(flatten)]
    pub packages: PackageArgs,
    /// Run directory (default `reports/<run-id>/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted run in this directory; tasks that ended on an
    /// infrastructure error are redone too (its run.json decides
    /// everything that shapes the run; other flags are ignored except
    /// --base-url, --api-key, --model-slots, --model-threads, --model-draft,
    /// --gateway-token, --kernel-start and --max-infra-errors; --env must
    /// give the run's variables again, needed when one is secret).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub serving: ServingArgs,
    #[command(flatten)]
    pub generation: GenerationArgs,
    /// Also write the run as JUnit XML to FILE (one test case per task,
    /// per arm with several strategies), for CI dashboards.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write Inspect eval logs (one per arm) when the run ends, into
    /// DIR [default: RUN_DIR/inspect]; `retrace export inspect` writes
    /// them for any run later.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub inspect_log: Option<Option<PathBuf>>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub executor: ExecutorArgs,
    #[command(flatten)]
    pub env: EnvArgs,
}

/// Which tasks (the spec's `tasks`).
#[derive(Args)]
pub struct TaskArgs {
    /// Suite: `math`, `tabular`, `packages`, or a path to a .jsonl or .parquet file or a directory.
    #[arg(long, default_value = "math")]
    pub suite: String,
    /// Keep only the first N tasks (after sampling).
    #[arg(long)]
    pub limit_tasks: Option<usize>,
    /// Sample N tasks with `--seed`.
    #[arg(long)]
    pub sample: Option<usize>,
    /// Of the `--sample` tasks, draw N from those tagged TAG and the rest
    /// from the others (`--sample 12 --sample-tagged organic-error=6`).
    #[arg(long, value_name = "TAG=N", requires = "sample", value_parser = parse_tag_quota)]
    pub sample_tagged: Option<TagQuota>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Args)]
pub struct ModelArgs {
    /// Model: `local`, `openai:<model>`, `oracle`, `oracle:faults`,
    /// `oracle:flaky`, `oracle:wrong`, `replay:<file>`; several
    /// comma-separated make one arm each (the first is the baseline).
    #[arg(long, default_value = "local", value_parser = parse_model, value_delimiter = ',')]
    pub model: Vec<ModelSpec>,
}

/// The repair loop (the spec's `policy`).
#[derive(Args)]
pub struct PolicyArgs {
    /// Repair rounds after the first attempt (rounds are 0..=K).
    #[arg(long, default_value_t = 2)]
    pub rounds: u32,
    /// When a task stops early: `clean` (ran cleanly with an answer of any
    /// type; no ground truth), `never` (all rounds; clean rounds get a
    /// review prompt) or `correct` (oracle feedback; labelled as such).
    /// Several comma-separated make one arm each, sharing round 0.
    #[arg(long, value_enum, default_value = "clean", value_delimiter = ',')]
    pub stop_on: Vec<StopOn>,
    /// What repair messages say after a failure: `parsed`, `parsed+state`
    /// (adds the live kernel's state around the failure and what its
    /// figures, tables and files show), `raw`,
    /// `minimal` or `none`. Several comma-separated (`parsed,none`) make
    /// one arm each, sharing round 0.
    #[arg(long, value_enum, default_value = "parsed", value_delimiter = ',')]
    pub feedback: Vec<FeedbackMode>,
    /// What follows a round that did not stop the task: `repair` (the
    /// feedback, same conversation and kernel) or `resample` (the task
    /// again from scratch in a fresh kernel). `repair,resample` makes two
    /// arms sharing round 0.
    #[arg(long, value_enum, default_value = "repair", value_delimiter = ',')]
    pub after_failure: Vec<AfterFailure>,
    /// What a repair round's kernel holds: `live` (the task's kernel, kept
    /// across rounds), `replay` (a fresh kernel that first re-runs,
    /// silently, the task's earlier cells that ran without error) or
    /// `fresh` (a fresh kernel, nothing carried). `live,replay,fresh`
    /// makes three arms sharing round 0.
    #[arg(long, value_enum, default_value = "live", value_delimiter = ',')]
    pub execution: Vec<ExecutionMode>,
    /// Allow arms from several varied flags at once: one arm per
    /// combination, named `value/value`.
    #[arg(long)]
    pub arms_product: bool,
    /// Stop a task's rounds once its prompt and completion tokens so far
    /// exceed N (stop reason `token_budget`).
    #[arg(long, value_name = "N")]
    pub max_task_tokens: Option<u64>,
    /// Directory with prompt templates overriding the built-in ones.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Take every task's round 0 (reply, code, outcome) from a recorded
    /// run, its baseline arm or ARM; each arm's own model repairs from
    /// round 1. The same model as the recorded run's repairs its own code,
    /// another model foreign code (docs/methodology.md).
    #[arg(long, value_name = "RUN_DIR[:ARM]", value_parser = parse_round0_from)]
    pub round0_from: Option<Round0From>,
    /// Characters of error feedback per repair message.
    #[arg(long, default_value_t = 4000)]
    pub feedback_budget: usize,
    /// A false-alarm control: N tasks right at round 0 in the first arm
    /// (drawn by --seed) are told, in a control arm apart from every
    /// metric, that their answer is wrong; the report gives the harm rate
    /// (docs/methodology.md). Fewer such tasks: all of them, said so.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub false_alarm: Option<u32>,
}

/// How packages reach the kernel (the spec's `packages`).
#[derive(Args)]
pub struct PackageArgs {
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
}

/// Where a remote model lives; never written down.
#[derive(Args)]
pub struct EndpointArgs {
    /// OpenAI-compatible endpoint (else `OPENAI_BASE_URL`).
    #[arg(long)]
    pub base_url: Option<String>,
    /// API key (else `OPENAI_API_KEY`).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Send the plots of a failing round to the model as images.
    #[arg(long)]
    pub vision: bool,
}

/// How a `local` model is served. Not part of the spec: what served a run
/// is recorded in run.json's `model_info`.
#[derive(Args)]
pub struct ServingArgs {
    /// Requests llama-server decodes together [default: 4]; also the
    /// default `--concurrency` of `local` runs.
    #[arg(long, env = "RETRACE_MODEL_SLOTS", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub model_slots: Option<u16>,
    /// Generation threads of the local server [default: the CPUs idle at
    /// start, at most 8].
    #[arg(long, env = "RETRACE_MODEL_THREADS", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub model_threads: Option<u16>,
    /// A draft model for the local model (speculative decoding): a name of
    /// `retrace model status` or a GGUF path sharing its tokenizer, or
    /// `none` [default: the catalogue's draft for the model, if any].
    /// Recorded in run.json's model_info and the fingerprint.
    #[arg(long, env = "RETRACE_MODEL_DRAFT", value_name = "NAME|PATH|none",
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub model_draft: Option<String>,
}

impl ServingArgs {
    fn serving(&self) -> Serving {
        Serving {
            slots: self.model_slots.map(usize::from),
            threads: self.model_threads.map(usize::from),
            draft: self.model_draft.clone(),
        }
    }
}

/// How the model is sampled (the spec's `model.generation`).
#[derive(Args)]
pub struct GenerationArgs {
    /// Sampling temperature (round 0, and repairs unless
    /// `--repair-temperature` is given). Several, comma-separated: one arm
    /// per temperature (`t=0.7`), each drawing its own round 0.
    #[arg(long, default_value = "0", value_delimiter = ',')]
    pub temperature: Vec<f32>,
    /// Sampling temperature of repair (and resampled) rounds [default:
    /// `--temperature`; 0.7 for `local` models, which resend failing code
    /// when greedy]. Each request carries a seed derived from its
    /// conversation, so runs stay reproducible on servers that honour
    /// `seed`. Several, comma-separated: one arm per temperature
    /// (`repair_t=0.7`), all sharing round 0.
    #[arg(long, value_delimiter = ',')]
    pub repair_temperature: Vec<f32>,
    /// Completion tokens per reply.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: u32,
    /// Timeout of one model request, its reply's body included [default:
    /// 120s; 600s for `local` models, whose replies take minutes on a busy
    /// CPU].
    #[arg(long, value_parser = parse_duration)]
    pub request_timeout: Option<Duration>,
    /// Retries of a failed model request (429, 5xx, timeouts).
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,
    /// The most bytes of a model reply's body (`8M`, `512K`, bytes; at
    /// most 1G). Reading stops there: a larger reply is a failed request
    /// (an infrastructure error of its round, not retried).
    #[arg(long, default_value = "8M", value_parser = parse_reply_bytes)]
    pub max_reply_bytes: u64,
}

impl RunArgs {
    /// The spec these flags ask for; the model's own defaults fill what
    /// the user left unsaid.
    fn spec(&self) -> Result<RunSpec, Failure> {
        let model = &self.model.model[0];
        let defaults = model.defaults(&self.serving.serving());
        let t = &self.tasks;
        let (sample, sample_tagged) =
            match (t.sample, &t.sample_tagged, t.limit_tasks, defaults.sample) {
                (None, None, None, Some(n)) => {
                    let quota = defaults.sample_tagged;
                    let tagged = quota
                        .as_ref()
                        .map(|q| format!(", {} of them tagged {}", q.count, q.tag));
                    eprintln!(
                        "note: the local model runs on {n} sampled tasks by default{}; \
                     pass --sample N or --limit-tasks N to change that",
                        tagged.unwrap_or_default(),
                    );
                    (Some(n), quota)
                }
                (sample, quota, ..) => (sample, quota.clone()),
            };
        let g = &self.generation;
        let p = &self.policy;
        let concurrency = self.concurrency.unwrap_or(defaults.concurrency);
        let executor = match self.executor.gateway(concurrency)? {
            Some(gateway) => ExecutorSpec::Gateway(GatewaySpec::of(&gateway)),
            None => ExecutorSpec::Local,
        };
        Ok(RunSpec {
            tasks: TaskSpec {
                suite: t.suite.clone(),
                selection: Selection {
                    limit_tasks: t.limit_tasks,
                    sample,
                    sample_tagged,
                    seed: t.seed,
                },
                skip_invalid: t.load.skip_invalid,
                max_task_file_bytes: t.load.max_task_file_bytes,
            },
            policy: LoopPolicy {
                rounds: p.rounds,
                stop_on: p.stop_on[0],
                feedback: p.feedback[0],
                feedback_budget: p.feedback_budget,
                prompts: p.prompts.clone(),
                after_failure: p.after_failure[0],
                max_task_tokens: p.max_task_tokens,
                round0_from: p.round0_from.clone(),
                execution: p.execution[0],
            },
            model: ModelSetup {
                spec: model.clone(),
                generation: Generation {
                    temperature: g.temperature[0],
                    repair_temperature: g
                        .repair_temperature
                        .first()
                        .copied()
                        .or(defaults.repair_temperature),
                    max_tokens: g.max_tokens,
                    request_timeout: g.request_timeout.unwrap_or(defaults.request_timeout),
                    max_retries: g.max_retries,
                    max_reply_bytes: g.max_reply_bytes,
                },
                vision: self.endpoint.vision,
            },
            packages: PackageSpec {
                strategies: self.packages.strategy.0.clone(),
                install_on: self.packages.install_on,
            },
            execution: Execution {
                limits: self.limits.limits(),
                unconfined: self.limits.unsafe_no_sandbox,
                kernel_start: self.limits.kernel_start(),
                concurrency,
                executor,
            },
            arms: ArmAxes {
                model: several(&self.model.model),
                temperature: several(&g.temperature),
                repair_temperature: several(&g.repair_temperature),
                feedback: several(&p.feedback),
                after_failure: several(&p.after_failure),
                stop_on: several(&p.stop_on),
                execution: several(&p.execution),
                product: p.arms_product,
            },
            env: self.env.env()?,
            false_alarm: p.false_alarm,
        })
    }

    /// What the run needs besides its spec; `datasets` for the suite.
    fn context(&self, datasets: PathBuf) -> Result<RunContext, Failure> {
        Ok(RunContext {
            datasets,
            init_binary: std::env::current_exe().map_err(Failure::infra)?,
            // A bar on a terminal, plain lines in a log (the library picks).
            progress: true,
            endpoint: Endpoint {
                base_url: self.endpoint.base_url.clone(),
                api_key: self.endpoint.api_key.clone(),
                vision: self.endpoint.vision,
                serving: self.serving.serving(),
            },
            gateway_token: self.executor.gateway_token.clone(),
            kernel_start: None,
            env: self.env.env()?,
        })
    }
}

pub async fn run(args: RunArgs) -> Result<i32, Failure> {
    let prepared = match &args.resume {
        Some(dir) => {
            let ctx = RunContext {
                kernel_start: Some(args.limits.kernel_start()),
                ..args.context(super::report::run_datasets(dir)?)?
            };
            Run::resume(dir, ctx).await
        }
        None => {
            if args.limits.unsafe_no_sandbox {
                eprintln!("warning: --unsafe-no-sandbox: kernels run WITHOUT confinement");
            }
            let spec = args.spec()?;
            let ctx = args.context(datasets_dir(&spec.tasks.suite).map_err(Failure::infra)?)?;
            Run::create(spec, args.out.clone(), ctx).await
        }
    };
    let run = prepared.map_err(failure)?;
    let config = run.config();
    super::tasks::print_skipped(&config.provenance.skipped);
    let (todo, done) = run.counts();
    let spec = &config.spec;
    eprintln!(
        "run {}: {} tasks ({todo} to do, {done} done), strategy {}, model {}, rounds 0..={}, stop on {}, feedback {}, after failure {}",
        terminal::line(&config.provenance.run_id),
        config.provenance.task_ids.len(),
        Strategy::join(&spec.packages.strategies),
        terminal::line(&config.provenance.model),
        spec.policy.rounds,
        spec.policy.stop_on.name(),
        spec.policy.feedback.name(),
        spec.policy.after_failure.name(),
    );
    let arms = config.arm_names();
    if arms.len() > 1 {
        eprintln!(
            "arms: {} (the first is the baseline)",
            terminal::line(&arms.join(", "))
        );
    }
    eprintln!(
        "{}",
        super::limits::describe(&config.provenance.sandbox, &spec.execution.limits)
    );
    let result = run.execute(cancel_on_ctrl_c()).await.map_err(failure)?;
    print_summary(&result.summary, &result.dir);
    if let Some(path) = &args.junit {
        super::report::write_junit(&result.config, &result.records, path)?;
    }
    if let Some(dir) = &args.inspect_log {
        let dir = dir.clone().unwrap_or_else(|| result.dir.join("inspect"));
        super::export::write_inspect(
            &result.config,
            &result.records,
            &result.summary,
            &dir,
            Default::default(),
        )?;
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

/// A flag's values when it gives several (one arm each), else none.
fn several<T: Clone>(values: &[T]) -> Vec<T> {
    if values.len() > 1 {
        values.to_vec()
    } else {
        Vec::new()
    }
}

/// The largest `--max-reply-bytes`: a reply is held in memory whole, once
/// per request in flight.
const MAX_REPLY_BYTES_LIMIT: u64 = 1 << 30;

fn parse_reply_bytes(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text).map_err(|e| e.to_string())?;
    if bytes == 0 || bytes > MAX_REPLY_BYTES_LIMIT {
        return Err(format!(
            "`{text}`: a reply's limit must be between 1 byte and 1G"
        ));
    }
    Ok(bytes)
}

fn parse_tag_quota(text: &str) -> Result<TagQuota, String> {
    let (tag, count) = text
        .rsplit_once('=')
        .filter(|(tag, _)| !tag.is_empty())
        .ok_or_else(|| format!("`{text}`: expected TAG=N, e.g. organic-error=6"))?;
    let count = count
        .parse()
        .map_err(|_| format!("`{text}`: N must be a whole number of tasks"))?;
    Ok(TagQuota {
        tag: tag.to_string(),
        count,
    })
}

fn parse_round0_from(text: &str) -> Result<Round0From, String> {
    if text.is_empty() {
        return Err("expected RUN_DIR or RUN_DIR:ARM".into());
    }
    Ok(Round0From::parse(text))
}

fn parse_model(text: &str) -> Result<ModelSpec, String> {
    text.parse()
        .map_err(|e: retrace::model::spec::ModelSpecError| e.to_string())
}

/// `--strategy fat,dynamic`, parsed as one value.
#[derive(Debug, Clone)]
pub struct Strategies(pub Vec<Strategy>);

fn parse_strategies(text: &str) -> Result<Strategies, retrace::pyenv::StrategyListError> {
    Strategy::parse_list(text).map(Strategies)
}

fn failure(e: HarnessError) -> Failure {
    if e.is_usage() {
        Failure::usage(e)
    } else {
        Failure::infra(e)
    }
}

fn print_summary(s: &report::Summary, out: &std::path::Path) {
    for label in report::labels(s) {
        println!("** {label} **");
    }
    println!("report: {}", out.join("report.md").display());
    if let Some(t) = &s.time {
        println!("time: {}", t.line());
    }
    if s.arms.is_empty() {
        print_arm(s);
    }
    for arm in &s.arms {
        print!("[{}] ", terminal::line(&arm.header.strategy));
        print_arm(arm);
    }
    for c in &s.comparisons {
        let last = c.last();
        let power = last
            .min_detectable_difference
            .map(|d| {
                format!(
                    "; smallest difference 80% power could see: {:.1} points",
                    100.0 * d
                )
            })
            .unwrap_or_default();
        println!(
            "{} vs {} on {} shared tasks: McNemar b={} c={} p={:.3}{power}",
            terminal::line(&c.new),
            terminal::line(&c.base),
            c.shared_tasks.len(),
            last.mcnemar.b,
            last.mcnemar.c,
            last.mcnemar.p_value
        );
    }
}

fn print_arm(s: &report::ArmSummary) {
    println!("{} tasks: {}", s.header.tasks, s.accuracy_line());
    for line in s.published_lines() {
        println!("{line}");
    }
    println!(
        "recovery {}  regression {}  kill rate {}  infra errors {}",
        report::percent(s.answers.recovery_rate.as_ref()),
        report::percent(s.answers.regression_rate.as_ref()),
        report::percent(s.execution.kill_rate.total.as_ref()),
        report::percent(s.execution.infra_error_rate.as_ref()),
    );
    if let Some(i) = &s.environment.installs {
        println!(
            "installs {} ({} from the store, {} downloaded)  denials {}  failures {}",
            i.steps, i.store_hits, i.downloads, i.denials, i.failures
        );
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Policy {
        #[command(flatten)]
        policy: super::PolicyArgs,
    }

    #[test]
    fn a_false_alarm_control_of_no_task_is_a_usage_error() {
        let parse = |n: &str| Policy::try_parse_from(["retrace", "--false-alarm", n]);
        let zero = parse("0").err().expect("0 is refused");
        assert_eq!(zero.kind(), clap::error::ErrorKind::ValueValidation);
        assert_eq!(parse("3").unwrap().policy.false_alarm, Some(3));
        let none = Policy::try_parse_from(["retrace"]).unwrap();
        assert_eq!(none.policy.false_alarm, None);
    }
}
