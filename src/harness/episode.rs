//! One task's rounds. Each round is the loop the README describes: the
//! model writes code (solve), the task's own kernel runs it (execute), the
//! answer it left is checked (score), the stop rule decides (stop), and
//! unless the task stops the model is told what happened (feedback).
//!
//! The model never sees ground truth: requests carry only the conversation.
//! Ground truth is used to score each round and, only under
//! `--stop-on correct` (oracle feedback, labelled), to stop.

use std::sync::Arc;
use std::time::Instant;

use crate::kernel::{AnyKernel, ExecOptions, KernelError, KernelSpec, StateView};
use crate::model::{ChatRequest, Message, ModelError, Role, KEEP_TOKEN};
use crate::record::{AttemptRecord, FeedbackKind, FeedbackMode};
use crate::repair::extract::extract_code;
use crate::repair::feedback::state_query;
use crate::repair::message::{next_message, opening, FeedbackPolicy, PackageOffer, RoundContext};
use crate::task::check::Check;
use crate::task::score::score;
use crate::task::Task;

use super::answer::RoundAnswer;
use super::arm::Arm;
use super::error::HarnessError;
use super::packages::Activated;
use super::round::{Executed, RoundHead, Scored, Solved};
use super::runner::Runner;
use super::stop::decide;

type Starting = tokio::task::JoinHandle<Result<(AnyKernel, f64), KernelError>>;

/// Why the task's kernel is not there when its first code is.
#[derive(Debug, thiserror::Error)]
enum StartFailed {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
    #[error("kernel start was already consumed")]
    Consumed,
}

/// The state of one task between rounds.
pub(super) struct Episode<'a> {
    runner: &'a Runner,
    arm: &'a Arm,
    task: &'a Task,
    conversation: Vec<Message>,
    /// Messages to add before the next request.
    pending: Vec<Message>,
    /// The check of the latest answer value (carried forward).
    carried: Option<Check>,
    /// The latest answer value as shown to the model in a review.
    carried_text: Option<String>,
    starting: Option<Starting>,
    kernel: Option<AnyKernel>,
    /// The kernel's start time (ms), until a round records it.
    kernel_start_ms: Option<f64>,
    /// What the `dynamic` strategy has put on the kernel's path.
    activated: Activated,
}

impl<'a> Episode<'a> {
    /// Starts the task's kernel in the background (it boots while the
    /// model writes round 0) and renders the first messages.
    pub(super) fn begin(
        runner: &'a Runner,
        arm: &'a Arm,
        task: &'a Task,
    ) -> Result<Self, HarnessError> {
        let spec = Arc::new(KernelSpec {
            files: task.files.clone(),
            ..(*arm.kernels.kernel).clone()
        });
        let (executor, options) = (runner.executor.clone(), runner.kernel_options.clone());
        let starting = tokio::spawn(async move {
            let started = Instant::now();
            let kernel = executor.start(spec, options).await?;
            Ok((kernel, started.elapsed().as_secs_f64() * 1e3))
        });
        let installable = arm
            .kernels
            .packages
            .as_ref()
            .map(|p| p.allowlist.available());
        let offer = PackageOffer::of(arm.kernels.strategy, installable.as_deref());
        Ok(Self {
            runner,
            arm,
            task,
            conversation: Vec::new(),
            pending: opening(&runner.templates, task, offer)?.to_vec(),
            carried: None,
            carried_text: None,
            starting: Some(starting),
            kernel: None,
            kernel_start_ms: None,
            activated: Activated::default(),
        })
    }

    /// All rounds. Infrastructure failures end the task with an
    /// `infra_error` record; they never drop it.
    pub(super) async fn run(mut self) -> Result<(), HarnessError> {
        let mut reviewing = false;
        for round in 0..=self.arm.spec.policy.rounds {
            let rec = self.round(round, reviewing).await?;
            reviewing = rec.feedback_kind == Some(FeedbackKind::Review);
            let done = rec.is_final();
            self.runner.append(&rec)?;
            if done {
                break;
            }
        }
        self.close().await;
        Ok(())
    }

    async fn round(&mut self, round: u32, reviewing: bool) -> Result<AttemptRecord, HarnessError> {
        let started = Instant::now();
        let elapsed = || started.elapsed().as_secs_f64() * 1e3;
        let head = self.head(round);
        let prompt = std::mem::take(&mut self.pending);
        self.conversation.extend(prompt.iter().cloned());

        let solved = match self.solve(round, reviewing).await {
            Ok(solved) => solved,
            Err(e) => {
                let (carried, why) = (self.carried.clone(), e.to_string());
                return Ok(head.infra(prompt, None, &Executed::default(), carried, why, elapsed()));
            }
        };
        let executed = self.execute(round, solved.code.as_deref()).await;
        if let Some(why) = executed.infra.clone() {
            let carried = self.carried.clone();
            return Ok(head.infra(prompt, Some(solved), &executed, carried, why, elapsed()));
        }
        let answer = executed.answer();
        let scored = self.score(&answer, &executed);
        let decision = decide(
            &self.arm.spec.policy,
            round,
            solved.kept_answer,
            &executed,
            &scored,
        );
        if let Some(kind) = decision.feedback {
            let message = self
                .feedback(kind, round, solved.code.as_deref(), &executed, &answer)
                .await?;
            self.pending.push(message);
        }
        Ok(head.attempt(prompt, solved, executed, scored, decision, elapsed()))
    }

    /// The model's reply to the conversation so far; `Err` names why there
    /// was none (an infrastructure failure).
    async fn solve(&mut self, round: u32, reviewing: bool) -> Result<Solved, ModelError> {
        let request = ChatRequest {
            messages: self.conversation.clone(),
            round,
        };
        let reply = self.runner.model.chat(&request).await?;
        self.conversation
            .push(Message::text(Role::Assistant, reply.text.clone()));
        let extraction = extract_code(&reply.text);
        let code = extraction.code.clone();
        let kept_answer = reviewing && code.is_none() && reply.text.contains(KEEP_TOKEN);
        Ok(Solved {
            reply,
            extraction,
            code,
            kept_answer,
        })
    }

    /// Runs the round's code, if any, in the task's kernel (a `dynamic`
    /// arm installs what it asks for or misses).
    async fn execute(&mut self, round: u32, code: Option<&str>) -> Executed {
        let Some(code) = code else {
            return Executed::default();
        };
        let exec = ExecOptions {
            timeout: self.arm.spec.execution.limits.timeout,
            artifact_dir: Some(self.runner.artifact_dir(self.arm, &self.task.id)),
            artifact_prefix: format!("r{round}"),
        };
        if let Err(e) = self.kernel().await {
            return Executed {
                infra: Some(format!("kernel failed to start: {e}")),
                ..Executed::default()
            };
        }
        let mut executed = Executed {
            kernel_start_ms: self.kernel_start_ms.take(),
            ..Executed::default()
        };
        let kernel = self.kernel.as_mut().expect("started above");
        let outcome = match &self.arm.kernels.packages {
            Some(packages) => {
                let exec_started = Instant::now();
                let run = packages
                    .run_cell(kernel, &mut self.activated, code, &exec)
                    .await;
                if !run.steps.is_empty() {
                    executed.install_ms = Some(run.steps.iter().map(|s| s.ms).sum());
                }
                executed.installs = run.steps;
                executed.exec_ms = exec_started.elapsed().as_secs_f64() * 1e3;
                run.outcome
            }
            None => {
                let o = kernel.execute(code, &exec).await;
                executed.exec_ms = o.timings_ms.total;
                o
            }
        };
        // The gateway lost the execution: not the model's doing.
        executed.infra = outcome
            .infra_error
            .as_ref()
            .map(|why| format!("executor: {why}"));
        executed.outcome = Some(outcome);
        executed
    }

    /// The check in force after this round; its answer comes from this
    /// round's code only.
    fn score(&mut self, answer: &RoundAnswer, executed: &Executed) -> Scored {
        let value = match answer {
            RoundAnswer::Value { text } => Some(text.as_str()),
            _ => None,
        };
        let stdout = executed.outcome.as_ref().map_or("", |o| o.stdout.as_str());
        self.carried = score(&self.task.expected, self.carried.as_ref(), value, stdout);
        if let Some(text) = value {
            self.carried_text = Some(text.to_string());
        }
        Scored {
            check: self.carried.clone(),
            answered: value.is_some(),
        }
    }

    /// The message for the next round.
    async fn feedback(
        &mut self,
        kind: FeedbackKind,
        round: u32,
        code: Option<&str>,
        executed: &Executed,
        answer: &RoundAnswer,
    ) -> Result<Message, HarnessError> {
        let spec = &self.arm.spec;
        let code = code.unwrap_or_default();
        let outcome = executed.outcome.as_ref();
        let state = match (kind, outcome) {
            (FeedbackKind::Error, Some(o)) if spec.policy.feedback == FeedbackMode::ParsedState => {
                self.state_view(o, code).await
            }
            _ => None,
        };
        let unsupported = match answer {
            RoundAnswer::Unsupported { description } => Some(description.as_str()),
            _ => None,
        };
        let policy = FeedbackPolicy {
            mode: spec.policy.feedback,
            budget: spec.policy.feedback_budget,
            limits: &spec.execution.limits,
            vision: self.runner.model.vision(),
        };
        let context = RoundContext {
            kind,
            rounds_left: spec.policy.rounds - round,
            outcome,
            code,
            answer: self.carried_text.as_deref().unwrap_or_default(),
            unsupported,
            state: state.as_ref(),
        };
        Ok(next_message(&self.runner.templates, policy, context)?)
    }

    /// `--feedback parsed+state`: what the live kernel holds around the
    /// failure, asked through retrace's own code with a time and size
    /// budget. `None` when the kernel is gone.
    async fn state_view(
        &mut self,
        outcome: &crate::kernel::Outcome,
        code: &str,
    ) -> Option<StateView> {
        let query = state_query(outcome, code)?;
        let kernel = self.kernel.as_mut()?;
        kernel.inspect_state(&query).await.ok()
    }

    async fn kernel(&mut self) -> Result<&mut AnyKernel, StartFailed> {
        if self.kernel.is_none() {
            let handle = self.starting.take().ok_or(StartFailed::Consumed)?;
            let (kernel, ms) = handle.await??;
            self.kernel_start_ms = Some(ms);
            self.kernel = Some(kernel);
        }
        Ok(self.kernel.as_mut().expect("set above"))
    }

    /// The task is over: its kernel's state is not needed, so it is
    /// discarded (killed) rather than asked to shut down.
    async fn close(mut self) {
        if let Some(k) = self.kernel.take() {
            k.discard().await;
        } else if let Some(start) = self.starting.take() {
            if let Ok(Ok((k, _))) = start.await {
                k.discard().await;
            }
        }
    }

    fn head(&self, round: u32) -> RoundHead {
        RoundHead {
            run_id: self.runner.config.provenance.run_id.clone(),
            task_id: self.task.id.clone(),
            round,
            model: self.runner.model.name(),
            synthetic_model: self.runner.model.is_synthetic(),
            arm: self.arm.name.clone(),
            stop_on: self.arm.spec.policy.stop_on,
            feedback: self.arm.spec.policy.feedback,
        }
    }
}
