//! One task's rounds. Each round is the loop docs/methodology.md describes: the
//! model writes code (solve), the task's own kernel runs it (execute), the
//! answer it left is checked (score), the stop rule decides (stop), and
//! unless the task stops the model is told what happened (feedback).
//!
//! The model never sees ground truth: requests carry only the conversation.
//! Ground truth is used to score each round and, only under
//! `--stop-on correct` (oracle feedback, labelled), to stop.

use std::sync::Arc;
use std::time::Instant;

use crate::kernel::{AnyKernel, ExecOptions, KernelError, KernelSpec, Outcome, StateView};
use crate::model::{ChatRequest, Message, ModelError, Role, KEEP_TOKEN};
use crate::record::{
    AttemptRecord, ExecutionMode, FeedbackKind, FeedbackMode, RecordKind, Replay, Spent,
};
use crate::repair::extract::extract_code;
use crate::repair::feedback::state_query;
use crate::repair::masking::{MaskCheck, MaskError, MaskFlag, RepairPair, Unchecked};
use crate::repair::message::{next_message, opening, FeedbackPolicy, PackageOffer, RoundContext};
use crate::sandbox::Verdict;
use crate::task::check::math::MathVerdict;
use crate::task::check::Check;
use crate::task::score::score;
use crate::task::{Expected, Task};

use super::answer::{symbolic, RoundAnswer};
use super::arm::Arm;
use super::error::HarnessError;
use super::packages::{fixed_cell, Activated};
use super::round::{Decision, Executed, RoundHead, Scored, Solved};
use super::runner::Runner;
use super::stop::{decide, Turn};

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
    /// What the task has spent so far.
    spent: Spent,
    /// Round 0 as another arm did it, to reuse (arms sharing round 0).
    shared: Option<&'a AttemptRecord>,
    /// The code and outcome of the last round when it failed and the
    /// model was told so: what the next round repairs.
    failed: Option<(String, Outcome)>,
    /// The task's cells so far (round, code, ran without error): what
    /// `--execution replay` re-runs and what state a later cell may use.
    cells: Vec<(u32, String, bool)>,
    /// The kernel has run a cell: a mode other than `live` replaces it
    /// before the next round.
    used: bool,
}

impl<'a> Episode<'a> {
    /// Starts the task's kernel in the background (it boots while the
    /// model writes round 0) and renders the first messages. With `shared`,
    /// round 0 is that record's reply and outcome instead of a new one.
    pub(super) fn begin(
        runner: &'a Runner,
        arm: &'a Arm,
        task: &'a Task,
        shared: Option<&'a AttemptRecord>,
    ) -> Result<Self, HarnessError> {
        let mut episode = Self {
            runner,
            arm,
            task,
            conversation: Vec::new(),
            pending: Vec::new(),
            carried: None,
            carried_text: None,
            starting: None,
            kernel: None,
            kernel_start_ms: None,
            activated: Activated::default(),
            spent: Spent::default(),
            shared,
            failed: None,
            cells: Vec::new(),
            used: false,
        };
        episode.pending = episode.opening()?;
        episode.starting = Some(episode.start_kernel());
        Ok(episode)
    }

    /// The task's first messages (again, for a resampled round).
    fn opening(&self) -> Result<Vec<Message>, HarnessError> {
        let installable = self
            .arm
            .kernels
            .packages
            .as_ref()
            .map(|p| p.allowlist.available());
        let offer = PackageOffer::of(self.arm.kernels.strategy, installable.as_deref());
        Ok(opening(&self.runner.templates, self.task, offer)?.to_vec())
    }

    /// A fresh kernel for the task, booting in the background.
    fn start_kernel(&self) -> Starting {
        let spec = Arc::new(KernelSpec {
            files: self.task.files.clone(),
            max_file_bytes: self.runner.config.spec.tasks.max_task_file_bytes,
            ..(*self.arm.kernels.kernel).clone()
        });
        let executor = self.runner.executor.clone();
        let options = self.runner.kernel_options.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let kernel = executor.start(spec, options).await?;
            Ok((kernel, started.elapsed().as_secs_f64() * 1e3))
        })
    }

    /// `--after-failure resample`: the next round starts over, as a fresh
    /// sample of round 0 would, with nothing of the earlier attempts: the
    /// opening messages alone and a new kernel. The answer in force stays.
    async fn start_over(&mut self) -> Result<(), HarnessError> {
        self.discard_kernel().await;
        self.activated = Activated::default();
        self.cells.clear();
        self.used = false;
        self.conversation.clear();
        self.pending = self.opening()?;
        self.starting = Some(self.start_kernel());
        Ok(())
    }

    /// All rounds; gives back round 0's record, for the arms that share
    /// it. Infrastructure failures end the task with an `infra_error`
    /// record; they never drop it.
    pub(super) async fn run(mut self) -> Result<Option<AttemptRecord>, HarnessError> {
        let mut reviewing = false;
        let mut first = None;
        for round in 0..=self.arm.spec.policy.rounds {
            let mut rec = match (round, self.shared) {
                (0, Some(shared)) => self.shared_round(shared).await?,
                _ => self.round(round, reviewing).await?,
            };
            if round == 0 && self.arm.false_alarm && !rec.is_final() {
                self.raise_false_alarm(&mut rec);
            }
            self.spent = self.spent.plus(&rec.tokens, &rec.timings_ms);
            rec.cumulative = self.spent;
            reviewing = rec.feedback_kind == Some(FeedbackKind::Review);
            let done = rec.is_final();
            match rec.feedback_kind {
                Some(FeedbackKind::Resample) => self.start_over().await?,
                Some(_) if !done => self.renew_kernel().await,
                _ => {}
            }
            crate::util::fault::reached(crate::util::fault::Point::AfterExecute);
            self.runner.append(&rec)?;
            if round == 0 {
                first = Some(rec);
            }
            if done {
                break;
            }
        }
        self.close().await;
        Ok(first)
    }

    /// The false-alarm control: whatever the feedback would have been, the
    /// next message says the answer is wrong (`false_alarm.md`, no traceback).
    fn raise_false_alarm(&mut self, rec: &mut AttemptRecord) {
        let answer = self.carried_text.as_deref().unwrap_or_default();
        let text = crate::repair::false_alarm::message(answer);
        self.pending = vec![Message::text(Role::User, text)];
        rec.feedback_kind = Some(FeedbackKind::FalseAlarm);
    }

    /// `--execution replay` and `fresh`: the next round gets a new kernel,
    /// booting while the model writes (`live` keeps the kernel).
    async fn renew_kernel(&mut self) {
        if self.arm.spec.policy.execution.is_live() || !self.used {
            return;
        }
        self.discard_kernel().await;
        self.activated = Activated::default();
        self.used = false;
        self.starting = Some(self.start_kernel());
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
        let state_names = match solved.code.as_deref() {
            Some(code) if self.runner.config.spec.compares_execution() => {
                let earlier: Vec<&str> = self.cells.iter().map(|(_, c, _)| c.as_str()).collect();
                state_names(&self.arm.masking, &self.task.id, &earlier, code).await
            }
            _ => None,
        };
        self.remember(round, solved.code.as_deref(), &executed);
        let masking = match self.repair_pair(solved.code.as_deref(), &executed) {
            Some(pair) => Some(mask_flags(&self.arm.masking, &self.task.id, &pair).await),
            None => None,
        };
        let symbolic = Self::symbolic(self.arm, self.task, &executed).await;
        let (answer, scored, decision) =
            self.decide(round, &solved, &executed, masking, symbolic.as_ref());
        self.follow_up(&decision, round, &solved, &executed, &answer)
            .await?;
        let mut rec = head.attempt(prompt, solved, executed, scored, decision, elapsed());
        rec.state_names = state_names;
        Ok(rec)
    }

    /// Keeps the round's cell: for a replay, and for what a later cell
    /// may use of it.
    fn remember(&mut self, round: u32, code: Option<&str>, executed: &Executed) {
        if let (Some(code), Some(outcome)) = (code, &executed.outcome) {
            let ok = outcome.verdict == Verdict::Ok;
            self.cells.push((round, code.to_string(), ok));
        }
    }

    /// The symbolic checker's verdicts on the round's answer value, for a
    /// task whose answer is LaTeX.
    async fn symbolic(arm: &Arm, task: &Task, executed: &Executed) -> Option<MathVerdict> {
        let RoundAnswer::Value { text } = executed.answer() else {
            return None;
        };
        symbolic(arm.math.as_deref(), task, Some(&text)).await
    }

    /// Scores the round and lets the stop rule decide.
    fn decide(
        &mut self,
        round: u32,
        solved: &Solved,
        executed: &Executed,
        masking: Option<Masking>,
        symbolic: Option<&MathVerdict>,
    ) -> (RoundAnswer, Scored, Decision) {
        let (answer, scored) = self.score(executed, masking, symbolic);
        let turn = Turn {
            round,
            kept_answer: solved.kept_answer,
            spent: self.spent.tokens() + solved.reply.usage.tokens(),
        };
        let decision = decide(&self.arm.spec.policy, turn, executed, &answer, &scored);
        let masked = scored.masking.as_ref().is_some_and(|m| !m.is_empty());
        self.failed = match (decision.feedback, &solved.code, &executed.outcome) {
            (Some(FeedbackKind::Error), Some(code), Some(outcome)) => {
                Some((code.clone(), outcome.clone()))
            }
            // A repair that hid the failure did not fix it: the next round
            // is compared with the code that failed.
            (Some(_), _, _) if masked => self.failed.take(),
            _ => None,
        };
        (answer, scored, decision)
    }

    /// What this round repairs: the failing round before it, and its code.
    fn repair_pair(&self, code: Option<&str>, executed: &Executed) -> Option<RepairPair> {
        let (failing_code, failing) = self.failed.as_ref()?;
        let outcome = executed.outcome.as_ref()?;
        Some(RepairPair::of_rounds(failing_code, failing, code?, outcome))
    }

    /// Renders the next message when the task goes on in this conversation.
    async fn follow_up(
        &mut self,
        decision: &Decision,
        round: u32,
        solved: &Solved,
        executed: &Executed,
        answer: &RoundAnswer,
    ) -> Result<(), HarnessError> {
        match decision.feedback {
            None | Some(FeedbackKind::Resample) => {}
            Some(kind) => {
                let message = self
                    .feedback(kind, round, solved.code.as_deref(), executed, answer)
                    .await?;
                self.pending.push(message);
            }
        }
        Ok(())
    }

    /// Round 0 as the arm sharing it did it: its reply and outcome, judged
    /// by this arm's rules. When this arm repairs, the code runs again in
    /// this arm's own kernel so that the kernel holds what round 0 left
    /// (unless round 0 ended the kernel, as the sharing arm's was).
    async fn shared_round(
        &mut self,
        shared: &AttemptRecord,
    ) -> Result<AttemptRecord, HarnessError> {
        let head = self.head(0);
        let prompt = std::mem::take(&mut self.pending);
        let from = shared
            .shared_from
            .clone()
            .unwrap_or_else(|| shared.arm_name().to_string());
        if shared.kind == RecordKind::InfraError {
            let why = shared.infra_error.clone().unwrap_or_default();
            let mut rec = head.infra(prompt, None, &Executed::default(), None, why, 0.0);
            rec.shared_from = Some(from);
            return Ok(rec);
        }
        self.conversation.extend(prompt.iter().cloned());
        let (solved, executed) = (Solved::of_record(shared), Executed::of_record(shared));
        let reply = solved.reply.text.clone();
        self.conversation
            .push(Message::text(Role::Assistant, reply));
        let symbolic = Self::symbolic(self.arm, self.task, &executed).await;
        let (answer, scored, decision) =
            self.decide(0, &solved, &executed, None, symbolic.as_ref());
        let kernel_lived = executed
            .outcome
            .as_ref()
            .is_some_and(|o| matches!(o.verdict, Verdict::Ok | Verdict::Error));
        let repairs = decision
            .feedback
            .is_some_and(|k| k != FeedbackKind::Resample);
        if kernel_lived && repairs && self.arm.spec.policy.execution.is_live() {
            // Only the kernel's state matters; the outcome is round 0's.
            let _ = self.execute(0, solved.code.as_deref()).await;
        }
        self.remember(0, solved.code.as_deref(), &executed);
        self.follow_up(&decision, 0, &solved, &executed, &answer)
            .await?;
        let total = shared.timings_ms.total;
        let mut rec = head.attempt(prompt, solved, executed, scored, decision, total);
        rec.shared_from = Some(from);
        Ok(rec)
    }

    /// The model's reply to the conversation so far; `Err` names why there
    /// was none (an infrastructure failure).
    async fn solve(&mut self, round: u32, reviewing: bool) -> Result<Solved, ModelError> {
        let request = ChatRequest {
            messages: self.conversation.clone(),
            round,
            temperature: self.arm.spec.model.generation.temperature_at(round),
        };
        let reply = self.arm.model.chat(&request).await?;
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
    /// arm installs what it asks for or misses); under `--execution
    /// replay`, a new kernel first re-runs the task's clean cells.
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
        let kernel_start_ms = self.kernel_start_ms.take();
        let replay = match self.arm.spec.policy.execution {
            ExecutionMode::Replay if !self.used => self.replay().await,
            _ => None,
        };
        self.used = true;
        let mut executed = self.run_cell(code, &exec).await;
        executed.kernel_start_ms = kernel_start_ms;
        executed.replay = replay;
        executed
    }

    /// `--execution replay`: the task's cells that ran without error, re-run
    /// silently in the new kernel; `None` when there are none.
    async fn replay(&mut self) -> Option<Replay> {
        let cells: Vec<(u32, String)> = self
            .cells
            .iter()
            .filter(|(_, _, ok)| *ok)
            .map(|(r, c, _)| (*r, c.clone()))
            .collect();
        if cells.is_empty() {
            return None;
        }
        let exec = ExecOptions {
            timeout: self.arm.spec.execution.limits.timeout,
            artifact_dir: None,
            artifact_prefix: String::new(),
        };
        let mut replay = Replay::default();
        let started = Instant::now();
        for (round, code) in cells {
            replay.rounds.push(round);
            let ran = self.run_cell(&code, &exec).await;
            let verdict = ran.outcome.as_ref().map(|o| o.verdict);
            if verdict != Some(Verdict::Ok) {
                replay.diverged.push(round);
            }
            // A kill ends the kernel: the rest cannot run in it.
            if !matches!(verdict, Some(Verdict::Ok | Verdict::Error)) {
                break;
            }
        }
        replay.ms = started.elapsed().as_secs_f64() * 1e3;
        Some(replay)
    }

    /// One cell in the task's started kernel.
    async fn run_cell(&mut self, code: &str, exec: &ExecOptions) -> Executed {
        let mut executed = Executed::default();
        let kernel = self.kernel.as_mut().expect("started before a cell runs");
        let outcome = match &self.arm.kernels.packages {
            Some(packages) => {
                let exec_started = Instant::now();
                let run = packages
                    .run_cell(kernel, &mut self.activated, code, exec)
                    .await;
                if !run.steps.is_empty() {
                    executed.install_ms = Some(run.steps.iter().map(|s| s.ms).sum());
                }
                executed.installs = run.steps;
                executed.exec_ms = exec_started.elapsed().as_secs_f64() * 1e3;
                run.outcome
            }
            None => {
                let o = match &self.arm.kernels.fixed {
                    Some(fixed) => fixed_cell(fixed, kernel, code, exec).await,
                    None => kernel.execute(code, exec).await,
                };
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

    /// The round's answer and the check in force after it; the answer
    /// comes from this round's code only. A value not in the form the
    /// question asks for is no answer, and the check in force stays: a
    /// multi-answer task's value that carries none of its named parts, or
    /// a masking repair's value the checker cannot read (its error message).
    fn score(
        &mut self,
        executed: &Executed,
        masking: Option<Masking>,
        symbolic: Option<&MathVerdict>,
    ) -> (RoundAnswer, Scored) {
        let (masking, masking_unchecked) = match masking {
            Some(Ok(flags)) => (Some(flags), None),
            Some(Err(why)) => (None, Some(why)),
            None => (None, None),
        };
        let mut answer = executed.answer();
        let stdout = executed.outcome.as_ref().map_or("", |o| o.stdout.as_str());
        if let RoundAnswer::Value { text } = &answer {
            let check = score(self.task, None, Some(text), stdout, symbolic);
            let multi = matches!(self.task.expected, Expected::Multi { .. });
            let unread = !check.as_ref().is_some_and(|c| c.parsed);
            let masked = masking.as_ref().is_some_and(|m| !m.is_empty());
            if unread && (multi || masked) {
                let text = text.clone();
                answer = RoundAnswer::Formless { text, multi };
            } else {
                self.carried = check;
                self.carried_text = Some(text.clone());
            }
        }
        let scored = Scored {
            check: self.carried.clone(),
            answered: matches!(answer, RoundAnswer::Value { .. }),
            masking,
            masking_unchecked,
        };
        (answer, scored)
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
        let parts: Vec<String> = match &self.task.expected {
            Expected::Multi { answers } => answers.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let shown = match answer {
            RoundAnswer::Formless { text, .. } => Some(text.as_str()),
            _ => self.carried_text.as_deref(),
        };
        let policy = FeedbackPolicy {
            mode: spec.policy.feedback,
            budget: spec.policy.feedback_budget,
            limits: &spec.execution.limits,
            vision: self.arm.model.vision(),
            execution: spec.policy.execution,
        };
        let context = RoundContext {
            kind,
            rounds_left: spec.policy.rounds - round,
            outcome,
            code,
            answer: shown.unwrap_or_default(),
            unsupported,
            state: state.as_ref(),
            parts: &parts,
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
        self.discard_kernel().await;
    }

    async fn discard_kernel(&mut self) {
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
            model: self.arm.model.name(),
            synthetic_model: self.arm.model.is_synthetic(),
            arm: self.arm.name.clone(),
            strategy: self.arm.kernels.strategy.to_string(),
            stop_on: self.arm.spec.policy.stop_on,
            feedback: self.arm.spec.policy.feedback,
            execution: self.arm.spec.policy.execution,
        }
    }
}

/// The names `code` takes from the task's `earlier` cells (measured in
/// runs with execution-mode arms only); `None` with no earlier cell, or
/// when the check could not read the code.
async fn state_names(
    check: &MaskCheck,
    task: &str,
    earlier: &[&str],
    code: &str,
) -> Option<Vec<String>> {
    if earlier.is_empty() {
        return None;
    }
    match check.state_names(earlier, code).await {
        Ok(names) => Some(names),
        Err(e) => {
            tracing::debug!(task, error = %e, "state use not checked");
            None
        }
    }
}

/// The masking check of a repair: its flags, or why it was not checked.
type Masking = Result<Vec<MaskFlag>, Unchecked>;

/// Signs that a repair hid the failure it repairs. A pair that could not
/// be compared, or a check that failed, is recorded as not checked with
/// its reason; a failure of the check is also logged.
async fn mask_flags(check: &MaskCheck, task: &str, pair: &RepairPair) -> Masking {
    check.check(pair).await.map_err(|e| {
        let why = e.unchecked();
        match e {
            MaskError::Unread(_) => {
                tracing::debug!(task, reason = %why, "repair not checked for masking")
            }
            _ => tracing::warn!(task, error = %e, "the masking check failed"),
        }
        why
    })
}
