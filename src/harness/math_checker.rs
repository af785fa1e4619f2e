//! The symbolic checker of LaTeX answers (docs/math-checking.md): one
//! confined kernel of the `checker` image per run, started on first use;
//! `math_checker/*.py` runs in it once, then each answer is one cell under
//! the checker's own limits. An answer built to make sympy run for minutes
//! or take gigabytes is stopped by those limits, scored "not equivalent"
//! with why (`math:checker_timeout`, `math:checker_killed`), and the kernel
//! is set up again for the next answer. Answers never run as code: the
//! checker reads them with Python's `ast` against an allow-list.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use tokio::sync::Mutex;

use super::error::HarnessError;
use super::prepare::ensure_image;
use crate::kernel::{
    default_kernel_root, ExecOptions, Kernel, KernelError, KernelOptions, KernelSpec, KernelStart,
};
use crate::pyenv::{Image, ImageName};
use crate::sandbox::{Sandbox, SandboxLimits, Verdict};
use crate::task::check::math::MathVerdict;
use crate::task::{Expected, Task};

/// The checker's code, run once in its kernel: one source, in this order.
const CHECKER_PY: &str = concat!(
    include_str!("../task/check/math_checker/base.py"),
    include_str!("../task/check/math_checker/reading.py"),
    include_str!("../task/check/math_checker/compare.py"),
    include_str!("../task/check/math_checker/rules.py"),
    include_str!("../task/check/math_checker/entry.py"),
);
/// What precedes the verdict's JSON on the cell's stdout.
const PREFIX: &str = "RETRACE-MATH ";
/// Wall time of one answer's check: each of its three rules has a 5 s
/// clock of its own inside; this is the backstop that kills.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Wall time of the checker's setup (importing sympy and the parsers).
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);
/// Relative tolerance of an inexact (float) answer: within it, the answer
/// passes as `math:numeric`.
pub const REL_TOL: f64 = 1e-6;

/// The checker's jail: enough for sympy, little else; `per_answer` of
/// wall and CPU time for each answer.
pub fn limits(per_answer: Duration) -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 1 << 30,
        pids: 64,
        cpus: 1.0,
        timeout: per_answer,
        cpu_time: per_answer,
        output_cap_bytes: 1 << 20,
        output_cap_messages: 1_000,
        disk_bytes: 64 << 20,
    }
}

/// The cell that runs the checker's code in a namespace of its own, so
/// that no later cell can swap one of its helpers. A JSON string is a
/// Python string literal.
fn setup_cell() -> String {
    let source = serde_json::to_string(CHECKER_PY).unwrap_or_default();
    format!("exec(compile({source}, '<retrace-math>', 'exec'), {{'__name__': '_retrace_math'}})")
}

/// One run's checker.
pub struct MathChecker {
    image: Image,
    sandbox: Arc<dyn Sandbox>,
    /// Wall and CPU time of one answer's check ([`ANSWER_TIMEOUT`]).
    per_answer: Duration,
    state: Mutex<State>,
}

enum State {
    Idle,
    /// Set up at the kernel's `restarts` count.
    Ready(Box<Kernel>, u32),
    /// The kernel could not start or be set up: every answer says why.
    Broken(CheckerError),
}

/// Why the checker cannot check: its kernel did not start, or the
/// checker's code did not run in it.
#[derive(Debug, Clone, thiserror::Error)]
enum CheckerError {
    #[error("the checker's kernel did not start")]
    Start(#[source] Arc<KernelError>),
    #[error(transparent)]
    SetUp(Arc<KernelError>),
}

impl MathChecker {
    pub fn new(image: Image, sandbox: Arc<dyn Sandbox>) -> MathChecker {
        MathChecker {
            image,
            sandbox,
            per_answer: ANSWER_TIMEOUT,
            state: Mutex::new(State::Idle),
        }
    }

    /// The same checker with another time limit per answer.
    pub fn with_answer_timeout(self, per_answer: Duration) -> MathChecker {
        MathChecker { per_answer, ..self }
    }

    /// The checker of a run or validation of `tasks`, when one's answer is
    /// LaTeX: its image built now (with progress), its kernel started on
    /// the first answer.
    pub async fn for_tasks(
        tasks: &[Task],
        sandbox: &Arc<dyn Sandbox>,
    ) -> Result<Option<Arc<MathChecker>>, HarnessError> {
        if !tasks
            .iter()
            .any(|t| matches!(t.expected, Expected::Math { .. }))
        {
            return Ok(None);
        }
        let image = ensure_image(ImageName::Checker).await?;
        Ok(Some(Arc::new(MathChecker::new(image, sandbox.clone()))))
    }

    /// The verdicts on `answer` (the kernel's answer text; `None` only
    /// reads `expected`).
    pub async fn check(&self, expected: &str, answer: Option<&str>) -> MathVerdict {
        let mut state = self.state.lock().await;
        if let Err(why) = self.ready(&mut state).await {
            let why = crate::util::disk::chain_text(&why);
            return MathVerdict::undecided("math:checker_error", &why);
        }
        let State::Ready(kernel, _) = &mut *state else {
            unreachable!("ready");
        };
        let request = serde_json::json!({
            "expected": expected, "answer": answer, "rel_tol": REL_TOL,
        });
        let b64 = base64::engine::general_purpose::STANDARD.encode(request.to_string());
        let exec = ExecOptions {
            timeout: self.per_answer,
            artifact_dir: None,
            artifact_prefix: "check".into(),
        };
        let outcome = kernel
            .execute(&format!("__retrace_math_check__({b64:?})"), &exec)
            .await;
        if outcome.state_lost {
            // Killed (or its state otherwise gone): the next answer gets a
            // new kernel, set up before it runs.
            if let State::Ready(kernel, _) = std::mem::replace(&mut *state, State::Idle) {
                kernel.discard().await;
            }
        }
        let verdict = match outcome.verdict {
            Verdict::Ok => outcome
                .stdout
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix(PREFIX))
                .and_then(|json| serde_json::from_str::<MathVerdict>(json).ok()),
            _ => None,
        };
        verdict.unwrap_or_else(|| {
            let (rule, why) = match outcome.verdict {
                Verdict::TimeoutWall | Verdict::TimeoutCpu => (
                    "math:checker_timeout",
                    format!("checker timed out after {:?}", self.per_answer),
                ),
                Verdict::OomKilled | Verdict::MemoryError => (
                    "math:checker_killed",
                    "checker ran out of memory".to_string(),
                ),
                Verdict::Ok | Verdict::Error => (
                    "math:checker_error",
                    outcome.error.as_ref().map_or_else(
                        || "checker printed no verdict".to_string(),
                        |e| format!("{}: {}", e.ename, e.evalue),
                    ),
                ),
                other => ("math:checker_killed", format!("checker ended: {other}")),
            };
            MathVerdict::undecided(rule, &why)
        })
    }

    /// Starts and sets up the kernel if it is not, or was restarted since
    /// its setup.
    async fn ready(&self, state: &mut State) -> Result<(), CheckerError> {
        match state {
            State::Broken(why) => return Err(why.clone()),
            State::Ready(kernel, at) if kernel.restarts() == *at => return Ok(()),
            State::Ready(..) | State::Idle => {}
        }
        let kernel = match std::mem::replace(state, State::Idle) {
            State::Ready(kernel, _) => Ok(kernel),
            _ => self.start().await.map(Box::new),
        };
        let set_up = match kernel {
            Ok(mut kernel) => kernel
                .set_up(&setup_cell(), SETUP_TIMEOUT, "the checker's setup")
                .await
                .map(|()| kernel)
                .map_err(|e| CheckerError::SetUp(Arc::new(e))),
            Err(e) => Err(e),
        };
        match set_up {
            Ok(kernel) => {
                let at = kernel.restarts();
                *state = State::Ready(kernel, at);
                Ok(())
            }
            Err(why) => {
                *state = State::Broken(why.clone());
                Err(why)
            }
        }
    }

    async fn start(&self) -> Result<Kernel, CheckerError> {
        let limits = limits(self.per_answer);
        let confined = self.sandbox.info().confined;
        let options = KernelOptions {
            start: KernelStart::Cold,
            startup_timeout: SETUP_TIMEOUT,
            ..KernelOptions::enforcing(&limits, confined)
        };
        let spec = Arc::new(KernelSpec {
            threads: 1,
            ..KernelSpec::new(self.image.clone(), default_kernel_root())
        });
        Kernel::start(spec, self.sandbox.as_ref(), options)
            .await
            .map_err(|e| CheckerError::Start(Arc::new(e)))
    }

    /// Stops the checker's kernel.
    pub async fn close(&self) {
        if let State::Ready(kernel, _) =
            std::mem::replace(&mut *self.state.lock().await, State::Idle)
        {
            kernel.shutdown().await;
        }
    }
}
