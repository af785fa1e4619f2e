//! One task's rounds: the model writes code, the task's own kernel runs it,
//! the answer of that round is checked, and the stop rule decides whether
//! the model gets feedback (a repair, a review) for another round.
//!
//! The model never sees ground truth: requests carry only the conversation.
//! Ground truth is used to score each round and, only under
//! `--stop-on correct` (oracle feedback, labelled), to stop.

use std::sync::Arc;
use std::time::Instant;

use crate::kernel::{AnyKernel, ExecOptions, KernelError, KernelSpec, Outcome};
use crate::model::{ChatRequest, Message, Part, Role, Usage, KEEP_TOKEN};
use crate::pyenv::Strategy;
use crate::record::{
    AttemptRecord, FeedbackKind, RecordKind, RoundTimings, StopOn, StopReason, SCHEMA_VERSION,
};
use crate::repair::extract::extract_code;
use crate::repair::feedback::{error_feedback, state_query};
use crate::repair::prompt::{describe_files, describe_images, TemplateName, NO_OUTPUT};
use crate::repair::FeedbackMode;
use crate::task::check::{check, Check};
use crate::task::Task;

use super::answer::RoundAnswer;
use super::packages::{Activated, Packages};
use super::runner::{Arm, Runner};
use super::HarnessError;

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
    starting: Option<tokio::task::JoinHandle<Result<(AnyKernel, f64), KernelError>>>,
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
            ..(*arm.spec).clone()
        });
        let (executor, options) = (runner.executor.clone(), runner.kernel_options.clone());
        let starting = tokio::spawn(async move {
            let started = Instant::now();
            let kernel = executor.start(spec, options).await?;
            Ok((kernel, started.elapsed().as_secs_f64() * 1e3))
        });
        let (policy, packages) = packages_prompt(arm.strategy, arm.packages.as_deref());
        let system = runner.templates.render(
            TemplateName::System,
            &[("packages_policy", policy.as_str())],
        )?;
        let user = runner.templates.render(
            TemplateName::Task,
            &[
                ("question", task.question.as_str()),
                ("files", describe_task_files(task).as_str()),
                ("packages", packages.as_str()),
            ],
        )?;
        Ok(Self {
            runner,
            arm,
            task,
            conversation: Vec::new(),
            pending: vec![
                Message::text(Role::System, system),
                Message::text(Role::User, user),
            ],
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
        let rounds = self.runner.config.rounds;
        let mut reviewing = false;
        for round in 0..=rounds {
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
        let config = &self.runner.config;
        self.conversation.extend(self.pending.iter().cloned());
        let mut rec = self.record(round);
        rec.prompt = std::mem::take(&mut self.pending);

        let request = ChatRequest {
            messages: self.conversation.clone(),
            round,
        };
        let reply = match self.runner.model.chat(&request).await {
            Ok(reply) => reply,
            Err(e) => return Ok(self.infra(rec, e.to_string(), started)),
        };
        rec.timings_ms.model = reply.latency_ms;
        rec.tokens = reply.usage;
        rec.fault = reply.fault.clone();
        rec.note = reply.note.clone();
        rec.reply = Some(reply.text.clone());
        self.conversation
            .push(Message::text(Role::Assistant, reply.text.clone()));
        let extraction = extract_code(&reply.text);
        rec.code = extraction.code.clone();
        rec.extraction = Some(extraction);
        rec.kept_answer = reviewing && rec.code.is_none() && reply.text.contains(KEEP_TOKEN);

        let mut outcome: Option<Outcome> = None;
        if let Some(code) = rec.code.clone() {
            let exec = ExecOptions {
                timeout: config.limits.timeout,
                artifact_dir: Some(self.runner.artifact_dir(self.arm, &self.task.id)),
                artifact_prefix: format!("r{round}"),
            };
            if let Err(e) = self.kernel().await {
                let why = format!("kernel failed to start: {e}");
                return Ok(self.infra(rec, why, started));
            }
            rec.timings_ms.kernel_start = self.kernel_start_ms.take();
            let kernel = self.kernel.as_mut().expect("started above");
            let exec_started = Instant::now();
            let o = match &self.arm.packages {
                Some(packages) => {
                    let run = packages
                        .run_cell(kernel, &mut self.activated, &code, &exec)
                        .await;
                    if !run.steps.is_empty() {
                        rec.timings_ms.install = Some(run.steps.iter().map(|s| s.ms).sum());
                    }
                    rec.installs = run.steps;
                    rec.timings_ms.exec = exec_started.elapsed().as_secs_f64() * 1e3;
                    run.outcome
                }
                None => {
                    let o = kernel.execute(&code, &exec).await;
                    rec.timings_ms.exec = o.timings_ms.total;
                    o
                }
            };
            if let Some(why) = &o.infra_error {
                // The gateway lost the execution: not the model's doing.
                let why = format!("executor: {why}");
                return Ok(self.infra(rec, why, started));
            }
            outcome = Some(o);
        }

        // The answer of this round comes from this round's code only.
        let answer = outcome
            .as_ref()
            .filter(|o| o.succeeded())
            .map(RoundAnswer::of)
            .unwrap_or(RoundAnswer::None);
        if let RoundAnswer::Value { text, .. } = &answer {
            let stdout = outcome.as_ref().map(|o| o.stdout.as_str()).unwrap_or("");
            self.carried = Some(check(&self.task.expected, Some(text), stdout));
            self.carried_text = Some(text.clone());
            rec.answered = true;
        }
        rec.check = self.carried.clone();
        rec.correct = self.carried.as_ref().is_some_and(|c| c.correct);
        rec.parsed = self.carried.as_ref().is_some_and(|c| c.parsed);

        let clean = outcome.as_ref().is_some_and(Outcome::succeeded) && rec.answered;
        rec.stop = match config.stop_on {
            StopOn::Clean if clean => Some(StopReason::Clean),
            StopOn::Correct if rec.correct => Some(StopReason::Correct),
            _ if round == config.rounds => Some(StopReason::RoundsExhausted),
            _ => None,
        };
        if rec.stop.is_none() {
            let kind = next_feedback(config.stop_on, &rec, outcome.as_ref(), &answer);
            let message = self
                .feedback(kind, round, &rec, outcome.as_ref(), &answer)
                .await?;
            rec.feedback_kind = Some(kind);
            self.pending.push(message);
        }
        rec.outcome = outcome.map(without_images);
        rec.timings_ms.total = started.elapsed().as_secs_f64() * 1e3;
        Ok(rec)
    }

    /// The message for the next round, by kind.
    async fn feedback(
        &mut self,
        kind: FeedbackKind,
        round: u32,
        rec: &AttemptRecord,
        outcome: Option<&Outcome>,
        answer: &RoundAnswer,
    ) -> Result<Message, HarnessError> {
        let config = self.runner.config.clone();
        let templates = self.runner.templates.clone();
        let rounds_left = (config.rounds - round).to_string();
        let rounds_left = rounds_left.as_str();
        let stdout = outcome
            .map(|o| stdout_excerpt(o, config.feedback_budget / 4))
            .unwrap_or_else(|| NO_OUTPUT.to_string());
        let answer_text = self.carried_text.clone().unwrap_or_default();
        let render = |name, vars: &[(&str, &str)]| templates.render(name, vars);
        let text = match kind {
            FeedbackKind::NoCode => {
                render(TemplateName::RepairNoCode, &[("rounds_left", rounds_left)])?
            }
            FeedbackKind::NoAnswer => render(
                TemplateName::RepairNoAnswer,
                &[("stdout", &stdout), ("rounds_left", rounds_left)],
            )?,
            FeedbackKind::Unsupported => {
                let type_name = match answer {
                    RoundAnswer::Unsupported { description } => description.clone(),
                    _ => "an unreadable value".into(),
                };
                render(
                    TemplateName::RepairUnsupported,
                    &[
                        ("answer_type", &type_name),
                        ("stdout", &stdout),
                        ("rounds_left", rounds_left),
                    ],
                )?
            }
            FeedbackKind::Review => render(
                TemplateName::Review,
                &[
                    ("answer", &answer_text),
                    ("stdout", &stdout),
                    ("rounds_left", rounds_left),
                ],
            )?,
            FeedbackKind::Wrong => render(
                TemplateName::RepairWrong,
                &[("answer", &answer_text), ("rounds_left", rounds_left)],
            )?,
            FeedbackKind::Error => {
                let outcome = outcome.expect("an error feedback follows an execution");
                return self.error_message(outcome, rec, rounds_left).await;
            }
        };
        Ok(Message::text(Role::User, text))
    }

    /// The repair message after a failed or killed execution, filled
    /// according to the feedback mode.
    async fn error_message(
        &mut self,
        outcome: &Outcome,
        rec: &AttemptRecord,
        rounds_left: &str,
    ) -> Result<Message, HarnessError> {
        let config = self.runner.config.clone();
        let templates = self.runner.templates.clone();
        let code = rec.code.as_deref().unwrap_or_default();
        let fb = error_feedback(
            config.feedback,
            outcome,
            code,
            &config.limits,
            config.feedback_budget,
        );
        let Some(stdout) = fb.stdout else {
            let text = templates.render(
                TemplateName::RepairBare,
                &[("feedback", &fb.error), ("rounds_left", rounds_left)],
            )?;
            return Ok(Message::text(Role::User, text));
        };
        let mut error = fb.error;
        if config.feedback == FeedbackMode::ParsedState {
            if let Some(view) = self.state_view(outcome, code).await {
                error.push_str("\n\n");
                error.push_str(&view);
            }
        }
        let vars = [
            ("feedback", error.as_str()),
            ("stdout", stdout.as_str()),
            ("rounds_left", rounds_left),
        ];
        let images: Vec<Part> = outcome
            .artifacts
            .iter()
            .filter(|a| a.mime == "image/png")
            .filter_map(|a| a.base64.clone())
            .map(|base64| Part::ImagePng { base64 })
            .collect();
        if self.runner.model.vision() && !images.is_empty() {
            let described = describe_images(&outcome.artifacts);
            let mut with_images = vars.to_vec();
            with_images.push(("images", described.as_str()));
            let text = templates.render(TemplateName::RepairWithImages, &with_images)?;
            let mut message = Message::text(Role::User, text);
            message.parts.extend(images);
            return Ok(message);
        }
        let text = templates.render(TemplateName::Repair, &vars)?;
        Ok(Message::text(Role::User, text))
    }

    /// `--feedback parsed+state`: what the live kernel holds around the
    /// failure, asked through retrace's own code with a time and size
    /// budget. `None` when the kernel is gone or the view is empty.
    async fn state_view(&mut self, outcome: &Outcome, code: &str) -> Option<String> {
        let query = state_query(outcome, code)?;
        let kernel = self.kernel.as_mut()?;
        let view = kernel.inspect_state(&query).await.ok()?;
        let text = view.render(self.runner.config.feedback_budget / 4);
        (!text.trim().is_empty())
            .then(|| format!("What your variables hold now (checked by retrace):\n{text}"))
    }

    async fn kernel(&mut self) -> Result<&mut AnyKernel, String> {
        if self.kernel.is_none() {
            let started = match self.starting.take() {
                Some(handle) => match handle.await {
                    Ok(Ok((k, ms))) => {
                        self.kernel_start_ms = Some(ms);
                        k
                    }
                    Ok(Err(e)) => return Err(e.to_string()),
                    Err(e) => return Err(e.to_string()),
                },
                None => return Err("kernel start was already consumed".into()),
            };
            self.kernel = Some(started);
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

    fn record(&self, round: u32) -> AttemptRecord {
        let config = &self.runner.config;
        AttemptRecord {
            schema_version: SCHEMA_VERSION,
            run_id: config.run_id.clone(),
            task_id: self.task.id.clone(),
            round,
            model: self.runner.model.name(),
            synthetic_model: self.runner.model.is_synthetic(),
            strategy: self.arm.strategy.to_string(),
            stop_on: config.stop_on,
            feedback: config.feedback,
            kind: RecordKind::Attempt,
            prompt: Vec::new(),
            reply: None,
            kept_answer: false,
            fault: None,
            note: None,
            extraction: None,
            code: None,
            outcome: None,
            check: None,
            correct: false,
            answered: false,
            parsed: false,
            stop: None,
            feedback_kind: None,
            infra_error: None,
            installs: Vec::new(),
            timings_ms: RoundTimings::default(),
            tokens: Usage::default(),
        }
    }

    fn infra(&self, mut rec: AttemptRecord, why: String, started: Instant) -> AttemptRecord {
        rec.kind = RecordKind::InfraError;
        rec.infra_error = Some(why);
        rec.stop = Some(StopReason::InfraError);
        rec.check = self.carried.clone();
        rec.correct = self.carried.as_ref().is_some_and(|c| c.correct);
        rec.parsed = self.carried.as_ref().is_some_and(|c| c.parsed);
        rec.timings_ms.total = started.elapsed().as_secs_f64() * 1e3;
        rec
    }
}

/// Which message follows a round that did not stop the task.
pub(super) fn next_feedback(
    stop_on: StopOn,
    rec: &AttemptRecord,
    outcome: Option<&Outcome>,
    answer: &RoundAnswer,
) -> FeedbackKind {
    if rec.kept_answer {
        return FeedbackKind::Review;
    }
    let Some(outcome) = outcome else {
        return FeedbackKind::NoCode;
    };
    if !outcome.succeeded() {
        return FeedbackKind::Error;
    }
    match answer {
        RoundAnswer::None => FeedbackKind::NoAnswer,
        RoundAnswer::Unsupported { .. } => FeedbackKind::Unsupported,
        RoundAnswer::Value { .. } => match stop_on {
            StopOn::Correct => FeedbackKind::Wrong,
            // `clean` stops on a value; `never` asks for a review.
            StopOn::Clean | StopOn::Never => FeedbackKind::Review,
        },
    }
}

/// Scrubbed head and tail of stdout, or `(no output)`.
fn stdout_excerpt(outcome: &Outcome, budget: usize) -> String {
    crate::repair::prompt::stdout_excerpt(outcome, budget).unwrap_or_else(|| NO_OUTPUT.into())
}

fn describe_task_files(task: &Task) -> String {
    let sizes: Vec<(String, u64)> = task
        .files
        .iter()
        .map(|f| {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
            let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            (name.unwrap_or_default(), size)
        })
        .collect();
    let sizes: Vec<(&str, u64)> = sizes.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    describe_files(&sizes)
}

/// What the prompts tell the model about packages, true for its arm: the
/// system prompt's rule (`packages_policy`) and the task prompt's list
/// (`packages`).
fn packages_prompt(strategy: Strategy, packages: Option<&Packages>) -> (String, String) {
    const NO_INSTALLS: &str = "There is no network access and you cannot install packages: \
         use only the standard library and the packages listed in the task.";
    match (strategy, packages) {
        (Strategy::Dynamic, Some(p)) => (
            "There is no network access, but the packages listed in the task as installable \
             can be installed for you, each at one fixed version: import it, or write \
             `%pip install NAME` on its own line in your code. Nothing else can be installed."
                .into(),
            format!(
                "the Python standard library; installable on request: {}",
                p.allowlist.available().join(", ")
            ),
        ),
        (Strategy::Fat, _) => (
            NO_INSTALLS.into(),
            "numpy, pandas, matplotlib, scipy, sympy, scikit-learn, statsmodels, networkx, \
             seaborn and the standard library"
                .into(),
        ),
        _ => (
            NO_INSTALLS.into(),
            "the Python standard library only".into(),
        ),
    }
}

/// Images stay on disk as artifacts; the journal keeps their paths only.
fn without_images(mut o: Outcome) -> Outcome {
    for a in &mut o.artifacts {
        a.base64 = None;
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Verdict;

    fn outcome(verdict: Verdict) -> Outcome {
        serde_json::from_value(serde_json::json!({
            "status": if verdict == Verdict::Ok { "ok" } else { "error" },
            "verdict": verdict, "flags": [], "execution_count": 1, "stdout": "", "stderr": "",
            "results": [], "displays": [], "error": null, "answer": null, "artifacts": [],
            "truncated": false,
            "truncation": {"truncated": false, "dropped_bytes": 0, "dropped_messages": 0},
            "timings_ms": {"total": 1.0}, "state_lost": false
        }))
        .unwrap()
    }

    fn record(kept: bool) -> AttemptRecord {
        let mut r: AttemptRecord = serde_json::from_value(serde_json::json!({
            "schema_version": SCHEMA_VERSION, "run_id": "t", "task_id": "a", "round": 0,
            "model": "m", "synthetic_model": true, "strategy": "fat", "stop_on": "clean",
            "feedback": "parsed", "kind": "attempt", "prompt": [], "reply": null,
            "extraction": null, "code": null, "outcome": null, "check": null,
            "correct": false, "answered": false, "stop": null, "infra_error": null,
            "timings_ms": {"model": 0.0, "exec": 0.0, "total": 0.0},
            "tokens": {"prompt_tokens": 0, "completion_tokens": 0}
        }))
        .unwrap();
        r.kept_answer = kept;
        r
    }

    #[test]
    fn the_repair_template_follows_what_happened() {
        let value = RoundAnswer::Value { text: "1".into() };
        let unsupported = RoundAnswer::Unsupported {
            description: "DataFrame".into(),
        };
        let ok = outcome(Verdict::Ok);
        let rec = record(false);
        let next = |stop, o: Option<&Outcome>, a: &RoundAnswer| next_feedback(stop, &rec, o, a);
        use FeedbackKind as F;
        assert_eq!(next(StopOn::Clean, None, &RoundAnswer::None), F::NoCode);
        let raised = outcome(Verdict::Error);
        assert_eq!(
            next(StopOn::Clean, Some(&raised), &RoundAnswer::None),
            F::Error
        );
        let killed = outcome(Verdict::OomKilled);
        assert_eq!(
            next(StopOn::Never, Some(&killed), &RoundAnswer::None),
            F::Error
        );
        assert_eq!(
            next(StopOn::Clean, Some(&ok), &RoundAnswer::None),
            F::NoAnswer
        );
        assert_eq!(next(StopOn::Clean, Some(&ok), &unsupported), F::Unsupported);
        assert_eq!(next(StopOn::Never, Some(&ok), &unsupported), F::Unsupported);
        assert_eq!(next(StopOn::Never, Some(&ok), &value), F::Review);
        assert_eq!(next(StopOn::Correct, Some(&ok), &value), F::Wrong);
        // A kept answer is reviewed again (it ran nothing).
        let kept = record(true);
        assert_eq!(
            next_feedback(StopOn::Never, &kept, None, &RoundAnswer::None),
            F::Review
        );
    }
}
