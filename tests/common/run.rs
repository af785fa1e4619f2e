//! Evaluations run in process, for tests whose subject is a run's results
//! rather than the binary: the one place a test builds a run's options
//! (`options`, then change the fields the test is about), starts one
//! (`execute`, `blocking`) and resumes one (`resume_options`).

use std::path::{Path, PathBuf};

use retrace::harness::{ResumeOptions, Run, RunOptions, RunResult};
use retrace::model::spec::Endpoint;
use retrace::model::Generation;
use retrace::pyenv::{ImageName, Strategy};
use retrace::record::{FeedbackMode, InstallOn, Selection, StopOn};
use retrace::sandbox::SandboxLimits;
use retrace::task::load::datasets_dir;

/// A run of `model` on `suite` into `out` as the CLI's defaults make it
/// (fat strategy, confined local kernels, 2 rounds, concurrency 2), without
/// model retries.
pub fn options(suite: &str, model: &str, out: &Path) -> RunOptions {
    super::image(ImageName::Fat);
    RunOptions {
        suite: suite.into(),
        datasets: datasets_dir(suite).unwrap(),
        selection: Selection::default(),
        skip_invalid: false,
        model: model.into(),
        endpoint: Endpoint::default(),
        generation: Generation {
            max_retries: 0,
            ..Generation::default()
        },
        rounds: 2,
        stop_on: StopOn::Clean,
        feedback: FeedbackMode::Parsed,
        feedback_budget: 4000,
        concurrency: 2,
        strategies: vec![Strategy::Fat],
        install_on: InstallOn::Both,
        limits: SandboxLimits::default(),
        unconfined: false,
        kernel_start: Default::default(),
        gateway: None,
        out: Some(out.to_path_buf()),
        prompts: None,
        init_binary: init_binary(),
        progress: false,
    }
}

/// What `retrace run --resume` passes for a run of `suite`, with the
/// gateway's token if it ran on one.
pub fn resume_options(suite: &str, gateway_token: Option<String>) -> ResumeOptions {
    ResumeOptions {
        endpoint: Endpoint::default(),
        datasets: datasets_dir(suite).unwrap(),
        init_binary: init_binary(),
        progress: false,
        kernel_start: Default::default(),
        gateway_token,
    }
}

/// Creates and executes a run to its end (no cancel).
pub async fn execute(opts: RunOptions) -> RunResult {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    Run::create(opts)
        .await
        .expect("run created")
        .execute(rx)
        .await
        .expect("run executed")
}

/// [`execute`] from a plain `#[test]`.
pub fn blocking(opts: RunOptions) -> RunResult {
    tokio::runtime::Runtime::new()
        .expect("a tokio runtime")
        .block_on(execute(opts))
}

/// The binary confined kernels start as their init (the CLI passes itself).
fn init_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_retrace"))
}
