//! The run specification: everything that shapes a run, in typed
//! sections, written once. The CLI builds it from its flags, the library
//! runs it, and `run.json` records it beside the run's provenance, so a
//! resumed run is the same run.
//!
//! An experiment's *arm* is this spec with some fields changed
//! ([`RunSpec::arms`]): today arms differ in their package strategy; every
//! arm runs every task of the run.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::gateway::GatewayConfig;
use crate::kernel::KernelStart;
use crate::model::spec::ModelSpec;
use crate::model::Generation;
use crate::pyenv::Strategy;
use crate::repair::FeedbackMode;
use crate::sandbox::SandboxLimits;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub tasks: TaskSpec,
    pub policy: LoopPolicy,
    pub model: ModelSetup,
    pub packages: PackageSpec,
    pub execution: Execution,
}

/// Which tasks, reproducibly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// `math`, `tabular`, `packages`, or a path to a .jsonl file or directory.
    pub suite: String,
    pub selection: Selection,
    /// `--skip-invalid`: flawed dataset records are left out (and left out
    /// again on resume) instead of refusing the suite.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_invalid: bool,
}

/// Which tasks of the suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub limit_tasks: Option<usize>,
    pub sample: Option<usize>,
    pub seed: u64,
}

/// The repair loop: how many rounds, when a task stops, what the model is
/// told after a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// The model and how it is sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSetup {
    pub spec: ModelSpec,
    pub generation: Generation,
    /// Failing rounds' plots are sent to the model as images.
    #[serde(default)]
    pub vision: bool,
}

/// How packages reach the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageSpec {
    /// One arm per strategy, in this order; the first is the baseline the
    /// others are compared with.
    pub strategies: Vec<Strategy>,
    /// What triggers installs in a `dynamic` arm.
    #[serde(default)]
    pub install_on: InstallOn,
}

/// Where and how kernels run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewaySpec {
    /// `http(s)://host:port[/base]`.
    pub url: String,
    /// The kernelspec to start; the gateway's default when `None`.
    pub kernel: Option<String>,
    /// Kernels alive on the gateway at once.
    pub concurrency: usize,
    /// How long one REST call may take before it is retried.
    #[serde(with = "crate::util::secs")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
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

/// One arm of a run: its name (what records call their `strategy`) and
/// the run's spec with the arm's fields changed.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmSpec {
    pub name: String,
    pub spec: RunSpec,
}

impl RunSpec {
    /// The run's arms, the baseline first: one per package strategy.
    pub fn arms(&self) -> Vec<ArmSpec> {
        self.packages
            .strategies
            .iter()
            .map(|&strategy| {
                let mut spec = self.clone();
                spec.packages.strategies = vec![strategy];
                ArmSpec {
                    name: strategy.to_string(),
                    spec,
                }
            })
            .collect()
    }

    /// The package strategy of an arm's spec (the baseline's of a run's).
    pub fn strategy(&self) -> Strategy {
        self.packages.strategies[0]
    }
}
