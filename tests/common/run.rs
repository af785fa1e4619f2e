//! Evaluations run in process, for tests whose subject is a run's results
//! rather than the binary: the one place a test builds a run's spec
//! (`options`, then change the fields the test is about), starts one
//! (`execute`, `blocking`) and resumes one (`context`).

use std::path::{Path, PathBuf};

use retrace::harness::{Run, RunContext, RunResult};
use retrace::model::spec::Endpoint;
use retrace::model::Generation;
use retrace::pyenv::{ImageName, Strategy};
use retrace::record::{
    Execution, ExecutorSpec, FeedbackMode, InstallOn, LoopPolicy, ModelSetup, PackageSpec, RunSpec,
    Selection, StopOn, TaskSpec,
};
use retrace::sandbox::SandboxLimits;
use retrace::task::load::datasets_dir;

/// A run as a test makes it: its spec, its directory and its context.
#[derive(Debug, Clone)]
pub struct TestRun {
    pub spec: RunSpec,
    pub out: PathBuf,
    pub ctx: RunContext,
}

/// The context of a test's run of `suite` (no progress, this build as the
/// kernels' init); also what a resumed run is given.
pub fn context(suite: &str) -> RunContext {
    RunContext {
        datasets: datasets_dir(suite).unwrap(),
        init_binary: PathBuf::from(env!("CARGO_BIN_EXE_retrace")),
        progress: false,
        endpoint: Endpoint::default(),
        gateway_token: None,
        kernel_start: None,
        env: Default::default(),
    }
}

/// A run of `model` on `suite` into `out` as the CLI's defaults make it
/// (fat strategy, confined local kernels, 2 rounds, concurrency 2), without
/// model retries.
pub fn options(suite: &str, model: &str, out: &Path) -> TestRun {
    super::image(ImageName::Fat);
    let spec = RunSpec {
        tasks: TaskSpec {
            suite: suite.into(),
            selection: Selection::default(),
            skip_invalid: false,
            max_task_file_bytes: retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES,
        },
        policy: LoopPolicy {
            rounds: 2,
            stop_on: StopOn::Clean,
            feedback: FeedbackMode::Parsed,
            feedback_budget: 4000,
            prompts: None,
            after_failure: Default::default(),
            max_task_tokens: None,
            round0_from: None,
            execution: Default::default(),
        },
        model: ModelSetup {
            spec: model.parse().expect("a valid model spec"),
            generation: Generation {
                max_retries: 0,
                ..Generation::default()
            },
            vision: false,
        },
        packages: PackageSpec {
            strategies: vec![Strategy::Fat],
            install_on: InstallOn::Both,
        },
        execution: Execution {
            limits: SandboxLimits::default(),
            unconfined: false,
            kernel_start: Default::default(),
            concurrency: 2,
            executor: ExecutorSpec::Local,
        },
        arms: Default::default(),
        env: Default::default(),
        false_alarm: None,
    };
    TestRun {
        spec,
        out: out.to_path_buf(),
        ctx: context(suite),
    }
}

/// [`options`] for `openai:captured` against the endpoint at `base_url`
/// (a scripted server on 127.0.0.1).
pub fn captured(suite: &str, base_url: String, out: &Path) -> TestRun {
    let mut opts = options(suite, "openai:captured", out);
    opts.ctx.endpoint = Endpoint {
        base_url: Some(base_url),
        api_key: Some("test".into()),
        vision: false,
        ..Endpoint::default()
    };
    opts
}

/// Creates and executes a run to its end (no cancel).
pub async fn execute(opts: TestRun) -> RunResult {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    Run::create(opts.spec, Some(opts.out), opts.ctx)
        .await
        .expect("run created")
        .execute(rx)
        .await
        .expect("run executed")
}

/// [`execute`] from a plain `#[test]`.
pub fn blocking(opts: TestRun) -> RunResult {
    tokio::runtime::Runtime::new()
        .expect("a tokio runtime")
        .block_on(execute(opts))
}

/// A one-task suite (`a`: what is 6 times 7, answer 42) in `dir` and a
/// `replay:` model that answers it with `replies` as (round, reply):
/// the suite's path and the model, as `--suite` and `--model` take them.
pub fn replayed_task(dir: &Path, replies: &[(u32, &str)]) -> (String, String) {
    let suite = dir.join("tasks.jsonl");
    let task = serde_json::json!({
        "id": "a", "question": "What is 6 times 7?",
        "expected": {"type": "number", "value": 42}, "reference": "answer = 6 * 7",
    });
    std::fs::write(&suite, task.to_string() + "\n").unwrap();
    let replay = dir.join("replies.jsonl");
    let lines: Vec<String> = replies
        .iter()
        .map(|(round, reply)| {
            serde_json::json!({"task_id": "a", "round": round, "reply": reply}).to_string()
        })
        .collect();
    std::fs::write(&replay, lines.join("\n") + "\n").unwrap();
    (
        suite.display().to_string(),
        format!("replay:{}", replay.display()),
    )
}

/// A small suite of our own, in a temporary directory.
pub fn suite(dir: &Path, tasks: &[(&str, &str, f64)]) -> String {
    let path = dir.join("tiny.jsonl");
    let lines: Vec<String> = tasks
        .iter()
        .map(|(id, q, v)| {
            serde_json::json!({
                "id": id, "question": q,
                "expected": {"type": "number", "value": v},
                "reference": format!("answer = {v}"),
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

/// `t1`: 6 × 7 = 42; `t2`: 2 + 2 = 4.
pub fn two_tasks(dir: &Path) -> String {
    suite(
        dir,
        &[
            ("t1", "What is 6 times 7?", 42.0),
            ("t2", "What is 2 plus 2?", 4.0),
        ],
    )
}
