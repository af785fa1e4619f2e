//! `run.json` of schema 2 (one flat object), as retrace wrote it before
//! the spec/provenance split, and its conversion to schema 3. Runs made
//! then are still reported, compared, re-scored and resumed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::provenance::{ArmImage, Provenance};
use super::spec::{
    Execution, ExecutorSpec, GatewaySpec, InstallOn, LoopPolicy, ModelSetup, PackageSpec, RunSpec,
    Selection, StopOn, TaskSpec,
};
use crate::kernel::gateway::REQUEST_TIMEOUT;
use crate::kernel::{ExecutorInfo, KernelStart};
use crate::model::spec::ModelSpec;
use crate::model::Generation;
use crate::pyenv::Strategy;
use crate::repair::FeedbackMode;
use crate::sandbox::{SandboxInfo, SandboxLimits};
use crate::task::load::Skipped;
use crate::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

#[derive(Debug, Deserialize)]
pub(super) struct RunConfigV2 {
    run_id: String,
    retrace_version: String,
    created: String,
    out_dir: PathBuf,
    suite: String,
    selection: Selection,
    #[serde(default)]
    skip_invalid: bool,
    #[serde(default)]
    skipped: Vec<Skipped>,
    task_ids: Vec<String>,
    #[serde(default)]
    task_hashes: BTreeMap<String, String>,
    #[serde(default)]
    task_tags: BTreeMap<String, Vec<String>>,
    rounds: u32,
    stop_on: StopOn,
    #[serde(default)]
    feedback: FeedbackMode,
    concurrency: usize,
    model: String,
    /// The `--model` value; runs older than this field rebuild from `model`.
    #[serde(default)]
    model_spec: String,
    synthetic_model: bool,
    #[serde(default)]
    model_info: serde_json::Value,
    generation: Generation,
    #[serde(default)]
    vision: bool,
    /// Comma-separated strategies.
    strategy: String,
    image_lock_hash: String,
    #[serde(default)]
    install_on: InstallOn,
    #[serde(default)]
    images: BTreeMap<String, ArmImage>,
    limits: SandboxLimits,
    sandbox: SandboxInfo,
    #[serde(default)]
    executor: ExecutorInfo,
    feedback_budget: usize,
    #[serde(default)]
    prompts_dir: Option<PathBuf>,
    #[serde(default)]
    prompts_hash: String,
}

/// A schema-2 `strategy` list that names no strategy retrace knows.
#[derive(Debug, thiserror::Error)]
#[error("schema 2 names an unknown strategy list `{list}`: {why}")]
pub struct UnknownStrategies {
    list: String,
    why: String,
}

impl RunConfigV2 {
    pub(super) fn upgrade(self) -> Result<(RunSpec, Provenance), UnknownStrategies> {
        let strategies = Strategy::parse_list(&self.strategy).map_err(|why| UnknownStrategies {
            list: self.strategy.clone(),
            why: why.to_string(),
        })?;
        let model_text = if self.model_spec.is_empty() {
            &self.model
        } else {
            &self.model_spec
        };
        // A model named in a way no spec reads (a client's own name of a
        // local file, say) can still be reported; resuming it says why not.
        let model = model_text
            .parse::<ModelSpec>()
            .unwrap_or_else(|_| ModelSpec::OpenAi(model_text.clone()));
        let executor = match &self.executor {
            ExecutorInfo::Local => ExecutorSpec::Local,
            ExecutorInfo::Gateway(info) => ExecutorSpec::Gateway(GatewaySpec {
                url: info.url.clone(),
                kernel: Some(info.kernel.clone()),
                concurrency: info.concurrency,
                request_timeout: REQUEST_TIMEOUT,
            }),
        };
        let spec = RunSpec {
            tasks: TaskSpec {
                suite: self.suite,
                selection: self.selection,
                skip_invalid: self.skip_invalid,
                max_task_file_bytes: DEFAULT_MAX_TASK_FILE_BYTES,
            },
            policy: LoopPolicy {
                rounds: self.rounds,
                stop_on: self.stop_on,
                feedback: self.feedback,
                feedback_budget: self.feedback_budget,
                prompts: self.prompts_dir,
                after_failure: Default::default(),
                max_task_tokens: None,
                round0_from: None,
                execution: Default::default(),
            },
            model: ModelSetup {
                spec: model,
                generation: self.generation,
                vision: self.vision,
            },
            packages: PackageSpec {
                strategies,
                install_on: self.install_on,
            },
            execution: Execution {
                limits: self.limits,
                unconfined: !self.sandbox.confined,
                kernel_start: KernelStart::default(),
                concurrency: self.concurrency,
                executor,
            },
            arms: Default::default(),
            env: Default::default(),
            false_alarm: None,
        };
        Ok((
            spec,
            Provenance {
                run_id: self.run_id,
                retrace_version: self.retrace_version,
                retrace_commit: None,
                created: self.created,
                out_dir: self.out_dir,
                skipped: self.skipped,
                task_ids: self.task_ids,
                task_hashes: self.task_hashes,
                task_tags: self.task_tags,
                task_rules: BTreeMap::new(),
                model: self.model,
                synthetic_model: self.synthetic_model,
                model_info: self.model_info,
                image_lock_hash: self.image_lock_hash,
                images: self.images,
                sandbox: self.sandbox,
                executor: self.executor,
                prompts_hash: self.prompts_hash,
                fingerprints: BTreeMap::new(),
                wall_ms: 0.0,
                round0_source: None,
            },
        ))
    }
}
