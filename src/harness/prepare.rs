//! What a run needs before its first task, the same for a new run and a
//! resumed one: prompt templates, the model client, each arm's image, the
//! executor and sandbox, the arms themselves, and early zygotes.

use std::path::Path;
use std::sync::Arc;

use super::arm::{Arm, ArmKernels};
use super::error::{HarnessError, UsageError};
use super::math_checker::MathChecker;
use crate::kernel::gateway::{Gateway, GatewayConfig};
use crate::kernel::{zygote, Executor, KernelStart};
use crate::model::spec::Endpoint;
use crate::model::ModelClient;
use crate::pyenv::{Image, ImageName, ImageStore, Strategy};
use crate::record::{ExecutorSpec, RunSpec};
use crate::repair::prompt::Templates;
use crate::sandbox::Sandbox;
use crate::task::Task;

/// What a run is given besides its spec: where things are, the secrets
/// that are never written down, and how it shows progress.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Where built-in suites live.
    pub datasets: std::path::PathBuf,
    /// retrace's own binary, PID 1 of every kernel's PID namespace.
    pub init_binary: std::path::PathBuf,
    /// Show progress on stderr: a bar on a terminal, a plain line every
    /// few seconds otherwise (CI logs).
    pub progress: bool,
    /// The endpoint's address and key (its `vision` comes from the spec).
    pub endpoint: Endpoint,
    /// The gateway's token, for a run on a gateway.
    pub gateway_token: Option<String>,
    /// On resume: start kernels this way instead of as the run did.
    pub kernel_start: Option<KernelStart>,
    /// On resume: the kernels' variables given again (`--env`), which
    /// must be the run's; the values of secret ones are only here.
    pub env: crate::kernel::KernelEnv,
}

pub(super) struct Prepared {
    pub templates: Templates,
    pub model: Arc<dyn ModelClient>,
    pub images: Vec<Image>,
    pub executor: Executor,
    pub sandbox: Arc<dyn Sandbox>,
    pub arms: Vec<Arm>,
}

/// Prepares everything `spec` needs for `tasks`. The synthetic models
/// (oracle, replay) get the tasks, with their references, here and only
/// here: requests never carry them.
pub(super) async fn prepare(
    spec: &RunSpec,
    tasks: &[Task],
    ctx: &RunContext,
) -> Result<Prepared, HarnessError> {
    let templates = match &spec.policy.prompts {
        Some(dir) => Templates::from_dir(dir)?,
        None => Templates::default(),
    };
    let strategies = &spec.packages.strategies;
    if strategies.is_empty() {
        return Err(UsageError::NoStrategy.into());
    }
    let endpoint = Endpoint {
        vision: spec.model.vision,
        ..ctx.endpoint.clone()
    };
    let arm_specs = spec.arms();
    let start = ctx.kernel_start.unwrap_or(spec.execution.kernel_start);
    // The kernels' side (images, executor, each arm's kernels and their
    // zygotes) and the models' side (a local model's preparation, server
    // and idle speed) get ready together: the zygotes boot while a model
    // server loads, and on first use the images build while the model is
    // prepared. The first error ends both.
    let kernels_side = async {
        let images = ensure_images(strategies).await?;
        let gateway = match &spec.execution.executor {
            ExecutorSpec::Local => None,
            ExecutorSpec::Gateway(g) => Some(g.with_token(ctx.gateway_token.clone())),
        };
        let executor = open_executor(
            gateway,
            spec.execution.unconfined,
            &ctx.init_binary,
            strategies,
        )
        .await?;
        let sandbox = executor.local_sandbox(ctx.init_binary.clone())?;
        let kernels = (arm_specs.iter())
            .map(|arm| {
                let at = strategies.iter().position(|s| *s == arm.spec.strategy());
                let image = images[at.expect("an arm's strategy is the run's")].clone();
                ArmKernels::for_arm(&arm.spec, image, &sandbox)
            })
            .collect::<Result<Vec<ArmKernels>, HarnessError>>()?;
        start_zygotes(&kernels, &sandbox, &executor, start);
        Ok::<_, HarnessError>((images, executor, sandbox, kernels))
    };
    // One client per model the arms use, built once.
    let models_side = async {
        let mut models: Vec<(String, Arc<dyn ModelClient>)> = Vec::new();
        for arm in &arm_specs {
            let key = arm.spec.model.spec.to_string();
            if !models.iter().any(|(k, _)| *k == key) {
                let model = &arm.spec.model;
                let client = model
                    .spec
                    .client(&model.generation, &endpoint, tasks)
                    .await?;
                models.push((key, client));
            }
        }
        Ok::<_, HarnessError>(models)
    };
    let (models, (images, executor, sandbox, kernels)) =
        tokio::try_join!(models_side, kernels_side)?;
    let model = models[0].1.clone();
    let math = MathChecker::for_tasks(tasks, &sandbox).await?;
    let arms = (arm_specs.into_iter().zip(kernels))
        .map(|(arm, kernels)| {
            let key = arm.spec.model.spec.to_string();
            let (_, model) = models.iter().find(|(k, _)| *k == key).expect("built above");
            Arm::new(arm, kernels, model.clone(), &sandbox, math.clone())
        })
        .collect::<Vec<Arm>>();
    Ok(Prepared {
        templates,
        model,
        images,
        executor,
        sandbox,
        arms,
    })
}

/// When kernels are forked locally from a zygote (not cold, not on a
/// gateway), each strategy's zygote starts now, in the background: its own
/// start (about 1.5 s for the fat image) then overlaps the rest of the
/// run's setup (a local model's server start and idle speed) instead of
/// delaying the first kernels.
fn start_zygotes(
    kernels: &[ArmKernels],
    sandbox: &Arc<dyn Sandbox>,
    executor: &Executor,
    start: KernelStart,
) {
    if start != KernelStart::Zygote || !matches!(executor, Executor::Local(_)) {
        return;
    }
    let mut started = Vec::new();
    for k in kernels {
        if !started.contains(&k.strategy) {
            started.push(k.strategy);
            zygote::start_early((*k.kernel).clone(), sandbox.clone());
        }
    }
}

/// Each strategy's image, built on first use.
async fn ensure_images(strategies: &[Strategy]) -> Result<Vec<Image>, HarnessError> {
    let mut images = Vec::new();
    for strategy in strategies {
        images.push(ensure_image(strategy.image()).await?);
    }
    Ok(images)
}

/// An image, built on first use with progress.
pub(super) async fn ensure_image(name: ImageName) -> Result<Image, HarnessError> {
    ImageStore::from_env()
        .ensure_blocking(name, true)
        .await
        .map_err(|source| HarnessError::Image {
            name: name.to_string(),
            source: Box::new(source),
        })
}

/// The executor of a run: the gateway when one is given (checked now, so a
/// wrong URL, token or kernelspec stops the run before any task), else
/// local kernels in this machine's sandbox.
async fn open_executor(
    gateway: Option<GatewayConfig>,
    unconfined: bool,
    init: &Path,
    strategies: &[Strategy],
) -> Result<Executor, HarnessError> {
    let Some(config) = gateway else {
        let sandbox = crate::sandbox::open(unconfined, init.to_path_buf())?;
        return Ok(Executor::Local(sandbox));
    };
    if strategies.iter().any(|s| s.installs()) {
        return Err(UsageError::Gateway(Executor::LOCAL_ONLY_DYNAMIC).into());
    }
    if strategies.len() > 1 {
        return Err(UsageError::Gateway(
            "a run on a gateway has one strategy: the gateway's kernelspec (--gateway-kernel) \
             decides its packages",
        )
        .into());
    }
    Ok(Executor::Gateway(Gateway::connect(config).await?))
}
