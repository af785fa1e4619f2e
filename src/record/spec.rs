//! The run specification: everything that shapes a run, in typed
//! sections, written once. The CLI builds it from its flags, the library
//! runs it, and `run.json` records it beside the run's provenance, so a
//! resumed run is the same run.
//!
//! An experiment's *arm* is this spec with some fields changed
//! ([`RunSpec::arms`]): its package strategy, model, sampling temperature
//! (of round 0 or of the rounds after it), feedback mode, stop rule,
//! what follows a failure (repair or resample) or execution mode (what
//! a repair round's kernel holds). Every arm runs every task
//! of the run; arms that differ only in what happens after round 0 share
//! it ([`ArmSpec::round0_key`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::gateway::GatewayConfig;
use crate::kernel::{KernelEnv, KernelStart};
use crate::model::spec::ModelSpec;
use crate::model::Generation;
use crate::pyenv::Strategy;
use crate::repair::{ExecutionMode, FeedbackMode};
use crate::sandbox::SandboxLimits;
use crate::task::load::{LoadOptions, TagQuota};
use crate::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSpec {
    pub tasks: TaskSpec,
    pub policy: LoopPolicy,
    pub model: ModelSetup,
    pub packages: PackageSpec,
    pub execution: Execution,
    /// The variables the arms vary besides the package strategy (whose
    /// arms are `packages.strategies`).
    #[serde(default, skip_serializing_if = "ArmAxes::is_empty")]
    pub arms: ArmAxes,
    /// `--env KEY=VALUE`: the variables every kernel gets (secret values
    /// are written redacted and given again on resume).
    #[serde(default, skip_serializing_if = "KernelEnv::is_empty")]
    pub env: KernelEnv,
    /// `--false-alarm N`: the control of N tasks right at round 0 told
    /// they are wrong (docs/methodology.md, "False-alarm controls").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_alarm: Option<u32>,
}

/// The values each arm variable takes; the first of each is the
/// baseline's (and is what the spec's own field holds). More than one
/// variable with several values makes a product of arms, which must be
/// asked for (`product`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArmAxes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<ModelSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub temperature: Vec<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repair_temperature: Vec<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<FeedbackMode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_failure: Vec<AfterFailure>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_on: Vec<StopOn>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub execution: Vec<ExecutionMode>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub product: bool,
}

impl ArmAxes {
    pub fn is_empty(&self) -> bool {
        *self == ArmAxes::default()
    }
}

/// What the model gets after a round that did not stop its task.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AfterFailure {
    /// The feedback on what went wrong, in the same conversation and kernel.
    #[default]
    Repair,
    /// The original task again (no feedback, no earlier attempt) in a fresh
    /// kernel, sampled at the repair temperature: the baseline every repair
    /// claim needs.
    Resample,
}

impl AfterFailure {
    pub fn name(self) -> &'static str {
        match self {
            AfterFailure::Repair => "repair",
            AfterFailure::Resample => "resample",
        }
    }
}

/// Which tasks, reproducibly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSpec {
    /// `math`, `tabular`, `packages`, or a path to a .jsonl or .parquet file or a directory.
    pub suite: String,
    pub selection: Selection,
    /// `--skip-invalid`: flawed dataset records are left out (and left out
    /// again on resume) instead of refusing the suite.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_invalid: bool,
    /// `--max-task-file-bytes`: the largest task file loaded, hashed and
    /// copied into a kernel. Recorded, so a resumed run loads alike; runs
    /// written before it existed read the default.
    #[serde(default = "default_max_task_file_bytes")]
    pub max_task_file_bytes: u64,
}

fn default_max_task_file_bytes() -> u64 {
    DEFAULT_MAX_TASK_FILE_BYTES
}

impl TaskSpec {
    /// How the loader reads this suite.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            skip_invalid: self.skip_invalid,
            max_task_file_bytes: self.max_task_file_bytes,
        }
    }

    /// The suite as a name: a suite given by path is named by its file or
    /// folder (`data/test.jsonl` → `test`).
    pub fn suite_name(&self) -> String {
        std::path::Path::new(&self.suite)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.suite.clone())
    }
}

/// Which tasks of the suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Selection {
    pub limit_tasks: Option<usize>,
    pub sample: Option<usize>,
    /// Of the sample, how many come from tasks with a tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_tagged: Option<TagQuota>,
    pub seed: u64,
}

/// The repair loop: how many rounds, when a task stops, what the model is
/// told after a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoopPolicy {
    /// Rounds are 0..=rounds.
    pub rounds: u32,
    pub stop_on: StopOn,
    pub feedback: FeedbackMode,
    /// Characters of feedback per repair message.
    pub feedback_budget: usize,
    /// `--prompts DIR`, when the templates are overridden.
    #[serde(default)]
    pub prompts: Option<PathBuf>,
    /// What follows a round that did not stop the task.
    #[serde(default)]
    pub after_failure: AfterFailure,
    /// `--max-task-tokens`: a task's rounds stop once its cumulative
    /// prompt and completion tokens exceed this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_task_tokens: Option<u64>,
    /// `--round0-from RUN_DIR[:ARM]`: every task's round 0 is that recorded
    /// run's, and each arm repairs it from round 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round0_from: Option<Round0From>,
    /// `--execution`: what a repair round's kernel holds (`live`, the
    /// default, is left unsaid so older runs read the same).
    #[serde(default, skip_serializing_if = "ExecutionMode::is_live")]
    pub execution: ExecutionMode,
}

/// A recorded run whose round 0 a new run starts from (`--round0-from`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Round0From {
    /// The recorded run's directory.
    pub run: PathBuf,
    /// Its arm; the recorded run's baseline arm when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
}

impl Round0From {
    /// `RUN_DIR` or `RUN_DIR:ARM`. Arm names may hold `:` (`oracle:faults`)
    /// and so may directories: the run directory is the shortest prefix
    /// before a `:` that is a directory, else the whole text.
    pub fn parse(text: &str) -> Round0From {
        let split = text
            .match_indices(':')
            .map(|(i, _)| (&text[..i], &text[i + 1..]))
            .find(|(dir, arm)| !arm.is_empty() && std::path::Path::new(dir).is_dir());
        match split {
            Some((dir, arm)) if !std::path::Path::new(text).is_dir() => Round0From {
                run: PathBuf::from(dir),
                arm: Some(arm.to_string()),
            },
            _ => Round0From {
                run: PathBuf::from(text),
                arm: None,
            },
        }
    }
}

/// The model and how it is sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelSetup {
    pub spec: ModelSpec,
    pub generation: Generation,
    /// Failing rounds' plots are sent to the model as images.
    #[serde(default)]
    pub vision: bool,
}

/// How packages reach the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PackageSpec {
    /// One arm per strategy, in this order; the first is the baseline the
    /// others are compared with.
    pub strategies: Vec<Strategy>,
    /// What triggers installs in a `dynamic` arm.
    #[serde(default)]
    pub install_on: InstallOn,
}

/// Where and how kernels run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Execution {
    pub limits: SandboxLimits,
    /// `--unsafe-no-sandbox`: kernels run without confinement.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
    /// How kernels start; `--resume` may choose again.
    #[serde(default)]
    pub kernel_start: KernelStart,
    /// Tasks in flight at once.
    pub concurrency: usize,
    pub executor: ExecutorSpec,
}

/// Where the kernels run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExecutorSpec {
    /// retrace's own confined kernels on this machine.
    #[default]
    Local,
    /// A Jupyter Kernel Gateway or Enterprise Gateway.
    Gateway(GatewaySpec),
}

/// A gateway as a run records it: never its token, which is given again
/// on resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GatewaySpec {
    /// `http(s)://host:port[/base]`.
    pub url: String,
    /// The kernelspec to start; the gateway's default when `None`.
    pub kernel: Option<String>,
    /// Kernels alive on the gateway at once.
    pub concurrency: usize,
    /// How long one REST call may take before it is retried.
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
}

impl GatewaySpec {
    /// What a gateway's flags give, less the token.
    pub fn of(config: &GatewayConfig) -> GatewaySpec {
        GatewaySpec {
            url: config.url.clone(),
            kernel: config.kernel.clone(),
            concurrency: config.concurrency,
            request_timeout: config.request_timeout,
        }
    }

    pub fn with_token(&self, token: Option<String>) -> GatewayConfig {
        GatewayConfig {
            url: self.url.clone(),
            token,
            kernel: self.kernel.clone(),
            concurrency: self.concurrency,
            request_timeout: self.request_timeout,
        }
    }
}

/// When a task stops before its last round.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StopOn {
    /// Non-oracle (default): the code ran cleanly and produced an answer
    /// value of any type; the checker decides correctness afterwards.
    #[value(name = "clean")]
    #[serde(alias = "clean_answer")]
    Clean,
    /// Every task runs all rounds; after a clean round the model is asked
    /// to review its answer (intrinsic self-correction).
    Never,
    /// Oracle feedback: stop on a correct answer; a clean wrong answer is
    /// reported as wrong (uses ground truth; labelled everywhere).
    Correct,
}

impl StopOn {
    pub fn name(self) -> &'static str {
        match self {
            StopOn::Clean => "clean",
            StopOn::Never => "never",
            StopOn::Correct => "correct",
        }
    }
}

/// What makes the `dynamic` strategy install a package.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum InstallOn {
    /// The model's own `pip install` lines (intercepted; they never run).
    Explicit,
    /// A `ModuleNotFoundError` for a module the image lacks.
    Missing,
    /// Both.
    #[default]
    Both,
}

impl InstallOn {
    pub fn explicit(self) -> bool {
        self != InstallOn::Missing
    }

    pub fn missing(self) -> bool {
        self != InstallOn::Explicit
    }
}

/// One arm of a run: its name (what records call their `arm`) and the
/// run's spec with the arm's fields changed.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmSpec {
    pub name: String,
    pub spec: RunSpec,
}

impl ArmSpec {
    /// Arms with the same key share round 0: the same model, round-0
    /// temperature and packages write and run the same first attempt,
    /// whatever follows it (feedback, stop rule, repair temperature,
    /// after failure and execution mode only change later rounds).
    pub fn round0_key(&self) -> String {
        let model = &self.spec.model;
        format!(
            "{}|{}|{}",
            self.spec.strategy(),
            model.spec,
            model.generation.temperature_at(0)
        )
    }
}

/// One arm variable: its values in order, as (name, how it changes a spec).
type Axis = Vec<(String, Box<dyn Fn(&mut RunSpec)>)>;

impl RunSpec {
    /// The run's arms, the baseline first: one per value of the variable
    /// that varies, or per combination with `product` (named
    /// `value/value`, variables in the order strategy, model, temperature
    /// (`t=0.7`), repair temperature (`repair_t=0.7`), feedback, after
    /// failure, stop rule, execution mode).
    pub fn arms(&self) -> Vec<ArmSpec> {
        let mut arms = vec![ArmSpec {
            name: String::new(),
            spec: RunSpec {
                arms: ArmAxes::default(),
                ..self.clone()
            },
        }];
        for axis in self.axes() {
            arms = arms
                .into_iter()
                .flat_map(|arm| {
                    axis.iter()
                        .map(|(value, apply)| {
                            let mut spec = arm.spec.clone();
                            apply(&mut spec);
                            let name = match arm.name.as_str() {
                                "" => value.clone(),
                                base => format!("{base}/{value}"),
                            };
                            ArmSpec { name, spec }
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
        }
        if arms[0].name.is_empty() {
            arms[0].name = self.strategy().to_string();
        }
        arms
    }

    /// The variables with several values.
    fn axes(&self) -> Vec<Axis> {
        let a = &self.arms;
        let mut axes: Vec<Axis> = Vec::new();
        let strategies = &self.packages.strategies;
        axes.push(
            strategies
                .iter()
                .map(|&s| {
                    let apply: Box<dyn Fn(&mut RunSpec)> =
                        Box::new(move |spec| spec.packages.strategies = vec![s]);
                    (s.to_string(), apply)
                })
                .collect(),
        );
        axes.push(axis(
            &a.model,
            |m| m.to_string(),
            |spec, m| spec.model.spec = m,
        ));
        axes.push(axis(
            &a.temperature,
            |t| format!("t={t}"),
            |spec, t| spec.model.generation.temperature = t,
        ));
        axes.push(axis(
            &a.repair_temperature,
            |t| format!("repair_t={t}"),
            |spec, t| spec.model.generation.repair_temperature = Some(t),
        ));
        axes.push(axis(
            &a.feedback,
            |f| f.name().into(),
            |spec, f| spec.policy.feedback = f,
        ));
        axes.push(axis(
            &a.after_failure,
            |f| f.name().into(),
            |spec, f| spec.policy.after_failure = f,
        ));
        axes.push(axis(
            &a.stop_on,
            |s| s.name().into(),
            |spec, s| spec.policy.stop_on = s,
        ));
        axes.push(axis(
            &a.execution,
            |m| m.name().into(),
            |spec, m| spec.policy.execution = m,
        ));
        axes.retain(|x| x.len() > 1);
        axes
    }

    /// The flags of the variables that vary: more than one needs `product`.
    pub fn varying(&self) -> Vec<&'static str> {
        let a = &self.arms;
        [
            ("--strategy", self.packages.strategies.len()),
            ("--model", a.model.len()),
            ("--temperature", a.temperature.len()),
            ("--repair-temperature", a.repair_temperature.len()),
            ("--feedback", a.feedback.len()),
            ("--after-failure", a.after_failure.len()),
            ("--stop-on", a.stop_on.len()),
            ("--execution", a.execution.len()),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(flag, _)| flag)
        .collect()
    }

    /// The execution modes of the run's arms, each once, in order.
    pub fn execution_modes(&self) -> Vec<ExecutionMode> {
        let mut modes = vec![self.policy.execution];
        for &m in &self.arms.execution {
            if !modes.contains(&m) {
                modes.push(m);
            }
        }
        modes
    }

    /// The run compares execution modes (or runs one other than `live`):
    /// its repairs are checked for the state they use.
    pub fn compares_execution(&self) -> bool {
        self.execution_modes() != [ExecutionMode::Live]
    }

    /// The package strategy of an arm's spec (the baseline's of a run's).
    pub fn strategy(&self) -> Strategy {
        self.packages.strategies[0]
    }
}

/// One variable's values as spec changes.
fn axis<T: Clone + 'static>(
    values: &[T],
    name: impl Fn(&T) -> String,
    set: impl Fn(&mut RunSpec, T) + Clone + 'static,
) -> Axis {
    values
        .iter()
        .map(|v| {
            let (v2, set) = (v.clone(), set.clone());
            let apply: Box<dyn Fn(&mut RunSpec)> = Box::new(move |spec| set(spec, v2.clone()));
            (name(v), apply)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::run::{tests::schema_2, RunConfig};

    fn schema_2_spec() -> RunSpec {
        serde_json::from_value::<RunConfig>(schema_2())
            .unwrap()
            .spec
    }

    #[test]
    fn temperature_arms_draw_their_own_round_0_and_repair_temperature_arms_share_it() {
        let mut spec = schema_2_spec();
        spec.packages.strategies.truncate(1);
        spec.arms.temperature = vec![0.0, 0.7];
        let arms = spec.arms();
        let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["t=0", "t=0.7"]);
        assert_eq!(arms[1].spec.model.generation.temperature, 0.7);
        assert_ne!(arms[0].round0_key(), arms[1].round0_key());

        spec.arms.temperature.clear();
        spec.arms.repair_temperature = vec![0.2, 0.7];
        let arms = spec.arms();
        let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["repair_t=0.2", "repair_t=0.7"]);
        let temperatures: Vec<f32> = arms
            .iter()
            .map(|a| a.spec.model.generation.temperature_at(1))
            .collect();
        assert_eq!(temperatures, [0.2, 0.7]);
        assert_eq!(arms[0].round0_key(), arms[1].round0_key());
        assert_eq!(spec.varying(), ["--repair-temperature"]);
    }

    /// `RUN_DIR[:ARM]`: the run directory is the shortest prefix before a
    /// `:` that is a directory, so arms and directories may both hold `:`.
    #[test]
    fn round0_from_splits_at_the_first_colon_after_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        let odd = tmp.path().join("a:b");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::create_dir_all(&odd).unwrap();
        let parse = |text: String| Round0From::parse(&text);
        let (r, o) = (run.display(), odd.display());
        let whole = |dir: &std::path::Path| Round0From {
            run: dir.to_path_buf(),
            arm: None,
        };
        let arm = |dir: &std::path::Path, arm: &str| Round0From {
            run: dir.to_path_buf(),
            arm: Some(arm.into()),
        };
        assert_eq!(parse(format!("{r}")), whole(&run));
        assert_eq!(parse(format!("{r}:fat")), arm(&run, "fat"));
        assert_eq!(
            parse(format!("{r}:oracle:faults")),
            arm(&run, "oracle:faults")
        );
        assert_eq!(parse(format!("{o}")), whole(&odd));
        assert_eq!(parse(format!("{o}:parsed")), arm(&odd, "parsed"));
        // Nothing is a directory: the whole text is the run, refused later
        // as not a run.
        let none = tmp.path().join("none:x");
        assert_eq!(parse(none.display().to_string()), whole(&none));
    }

    #[test]
    fn execution_modes_are_arms_that_share_round_0() {
        let mut spec = schema_2_spec();
        spec.packages.strategies.truncate(1);
        assert_eq!(spec.execution_modes(), [ExecutionMode::Live]);
        spec.arms.execution = vec![
            ExecutionMode::Live,
            ExecutionMode::Replay,
            ExecutionMode::Fresh,
        ];
        spec.policy.execution = ExecutionMode::Live;
        let arms = spec.arms();
        let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["live", "replay", "fresh"]);
        let modes: Vec<ExecutionMode> = arms.iter().map(|a| a.spec.policy.execution).collect();
        assert_eq!(
            modes,
            [
                ExecutionMode::Live,
                ExecutionMode::Replay,
                ExecutionMode::Fresh
            ]
        );
        assert_eq!(arms[0].round0_key(), arms[1].round0_key());
        assert_eq!(arms[0].round0_key(), arms[2].round0_key());
        assert_eq!(spec.varying(), ["--execution"]);
        assert_eq!(spec.execution_modes().len(), 3);

        // With the feedback varied too, a product names both.
        spec.arms.feedback = vec![FeedbackMode::Parsed, FeedbackMode::None];
        assert_eq!(spec.varying(), ["--feedback", "--execution"]);
        spec.arms.product = true;
        let names: Vec<String> = spec.arms().into_iter().map(|a| a.name).collect();
        assert_eq!(names[..3], ["parsed/live", "parsed/replay", "parsed/fresh"]);
        assert_eq!(names.len(), 6);
    }

    #[test]
    fn a_live_run_json_says_nothing_of_the_execution_mode() {
        let spec = schema_2_spec();
        assert!(spec.policy.execution.is_live());
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json["policy"].get("execution").is_none(), "{json}");
        assert!(json.get("arms").is_none(), "{json}");
        let mut fresh = spec.clone();
        fresh.policy.execution = ExecutionMode::Fresh;
        let json = serde_json::to_value(&fresh).unwrap();
        assert_eq!(json["policy"]["execution"], "fresh");
        let back: RunSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, fresh);
    }
}
