//! The round loop of one task, and the scheduler that runs tasks
//! concurrently. One fresh confined kernel per task, started while the model
//! writes its first reply and kept across the task's rounds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{watch, Semaphore};

use super::config::{RunConfig, StopOn};
use super::journal::Journal;
use super::progress::Progress;
use super::record::{AttemptRecord, RecordKind, RoundTimings, StopReason, SCHEMA_VERSION};
use super::HarnessError;
use crate::kernel::{ExecOptions, Kernel, KernelError, KernelOptions, KernelSpec, Outcome};
use crate::model::{ChatRequest, Message, ModelClient, Part, Role, Usage};
use crate::repair::extract::extract_code;
use crate::repair::prompt::{
    describe_files, describe_images, feedback_parts, TemplateName, Templates,
};
use crate::sandbox::Sandbox;
use crate::task::check::{check, Check};
use crate::task::Task;

/// Everything a task needs, shared by all tasks of a run.
pub struct Runner {
    pub config: Arc<RunConfig>,
    pub model: Arc<dyn ModelClient>,
    pub sandbox: Arc<dyn Sandbox>,
    pub spec: Arc<KernelSpec>,
    pub kernel_options: KernelOptions,
    pub templates: Arc<Templates>,
    pub journal: Arc<Journal>,
    pub progress: Arc<Progress>,
}

impl Runner {
    /// Runs every task (concurrently, up to the configured number).
    /// Stops early when `cancel` turns true (Ctrl-C): running tasks are
    /// aborted and awaited, so their kernels are killed before this returns;
    /// their unfinished rounds are redone by `--resume`.
    pub async fn run_all(
        self: Arc<Self>,
        tasks: Vec<Task>,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<(), HarnessError> {
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let mut running = tokio::task::JoinSet::new();
        let result = async {
            for task in tasks {
                let permit = tokio::select! {
                    p = slots.clone().acquire_owned() => p.map_err(|_| HarnessError::Interrupted)?,
                    _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
                };
                let runner = self.clone();
                running.spawn(async move {
                    let result = runner.run_task(&task).await;
                    drop(permit);
                    result
                });
                while let Some(done) = running.try_join_next() {
                    done.map_err(|e| HarnessError::Task(e.to_string()))??;
                }
            }
            loop {
                tokio::select! {
                    done = running.join_next() => match done {
                        Some(done) => done.map_err(|e| HarnessError::Task(e.to_string()))??,
                        None => return Ok(()),
                    },
                    _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
                }
            }
        }
        .await;
        running.abort_all();
        while running.join_next().await.is_some() {}
        result
    }

    fn record(&self, task: &Task, round: u32, kind: RecordKind) -> AttemptRecord {
        AttemptRecord {
            schema_version: SCHEMA_VERSION,
            run_id: self.config.run_id.clone(),
            task_id: task.id.clone(),
            round,
            model: self.model.name(),
            synthetic_model: self.model.is_synthetic(),
            strategy: self.config.strategy.clone(),
            kind,
            prompt: Vec::new(),
            reply: None,
            extraction: None,
            code: None,
            outcome: None,
            check: None,
            correct: false,
            answered: false,
            stop: None,
            infra_error: None,
            timings_ms: RoundTimings::default(),
            tokens: Usage::default(),
        }
    }

    fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        self.journal.append(record)?;
        self.progress.on_record(record);
        Ok(())
    }

    /// All rounds of one task. Infrastructure failures end the task with an
    /// `infra_error` record; they never drop it.
    pub async fn run_task(&self, task: &Task) -> Result<(), HarnessError> {
        let spec = Arc::new(KernelSpec {
            files: task.files.clone(),
            ..(*self.spec).clone()
        });
        let (sandbox, options) = (self.sandbox.clone(), self.kernel_options.clone());
        // The kernel starts while the model thinks about round 0.
        let mut starting = Some(tokio::spawn(async move {
            Kernel::start(spec, sandbox.as_ref(), options).await
        }));
        let mut kernel: Option<Kernel> = None;

        let system = self.templates.render(TemplateName::System, &[])?;
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
        let files = describe_files(&sizes);
        let user = self.templates.render(
            TemplateName::Task,
            &[
                ("question", task.question.as_str()),
                ("files", files.as_str()),
                ("packages", image_packages(&self.config.strategy)),
            ],
        )?;
        let mut pending = vec![
            Message::text(Role::System, system),
            Message::text(Role::User, user),
        ];
        let mut conversation: Vec<Message> = Vec::new();
        let mut carried: Option<Check> = None;
        let artifact_dir = self
            .config
            .out_dir
            .join("artifacts")
            .join(sanitize(&task.id));

        for round in 0..=self.config.rounds {
            let started = Instant::now();
            conversation.extend(pending.iter().cloned());
            let mut rec = self.record(task, round, RecordKind::Attempt);
            rec.prompt = std::mem::take(&mut pending);
            let request = ChatRequest {
                messages: conversation.clone(),
                round,
            };
            let reply = match self.model.chat(&request).await {
                Ok(reply) => reply,
                Err(e) => {
                    rec.kind = RecordKind::InfraError;
                    rec.infra_error = Some(e.to_string());
                    self.finish_infra(&mut rec, carried.as_ref(), started);
                    self.append(&rec)?;
                    break;
                }
            };
            rec.timings_ms.model = reply.latency_ms;
            rec.tokens = reply.usage;
            rec.reply = Some(reply.text.clone());
            conversation.push(Message::text(Role::Assistant, reply.text.clone()));
            let extraction = extract_code(&reply.text);
            rec.code = extraction.code.clone();
            rec.extraction = Some(extraction);

            let mut outcome: Option<Outcome> = None;
            if let Some(code) = rec.code.clone() {
                if kernel.is_none() {
                    match join_start(starting.take()).await {
                        Ok(k) => kernel = Some(k),
                        Err(e) => {
                            rec.kind = RecordKind::InfraError;
                            rec.infra_error = Some(format!("kernel failed to start: {e}"));
                            self.finish_infra(&mut rec, carried.as_ref(), started);
                            self.append(&rec)?;
                            break;
                        }
                    }
                }
                let k = kernel.as_mut().expect("started above");
                let exec = ExecOptions {
                    timeout: self.config.limits.timeout,
                    artifact_dir: Some(artifact_dir.clone()),
                    artifact_prefix: format!("r{round}"),
                };
                let o = k.execute(&code, &exec).await;
                rec.timings_ms.exec = o.timings_ms.total;
                outcome = Some(o);
            }

            // The answer this round produced, else the one carried forward.
            let this_check = outcome.as_ref().filter(|o| o.succeeded()).map(|o| {
                check(
                    &task.expected,
                    o.answer.as_ref().map(|a| a.value.as_str()),
                    &o.stdout,
                )
            });
            rec.answered = this_check.as_ref().is_some_and(|c| c.parsed);
            if rec.answered {
                carried = this_check;
            }
            rec.check = carried.clone();
            rec.correct = carried.as_ref().is_some_and(|c| c.correct);

            let clean = outcome.as_ref().is_some_and(Outcome::succeeded) && rec.answered;
            rec.stop = match self.config.stop_on {
                StopOn::CleanAnswer if clean => Some(StopReason::CleanAnswer),
                StopOn::Correct if rec.correct => Some(StopReason::Correct),
                _ if round == self.config.rounds => Some(StopReason::RoundsExhausted),
                _ => None,
            };
            if rec.stop.is_none() {
                pending.push(self.repair_message(&rec, outcome.as_ref(), round)?);
            }
            rec.outcome = outcome.map(without_images);
            rec.timings_ms.total = started.elapsed().as_secs_f64() * 1e3;
            let done = rec.stop.is_some();
            self.append(&rec)?;
            if done {
                break;
            }
        }
        if let Some(k) = kernel {
            k.shutdown().await;
        } else if let Some(start) = starting {
            if let Ok(Ok(k)) = start.await {
                k.shutdown().await;
            }
        }
        Ok(())
    }

    fn finish_infra(&self, rec: &mut AttemptRecord, carried: Option<&Check>, started: Instant) {
        rec.stop = Some(StopReason::InfraError);
        rec.check = carried.cloned();
        rec.correct = carried.is_some_and(|c| c.correct);
        rec.timings_ms.total = started.elapsed().as_secs_f64() * 1e3;
    }

    /// The message that asks for a repair, with the parsed feedback.
    fn repair_message(
        &self,
        rec: &AttemptRecord,
        outcome: Option<&Outcome>,
        round: u32,
    ) -> Result<Message, HarnessError> {
        let rounds_left = (self.config.rounds - round).to_string();
        let Some(outcome) = outcome else {
            let text = self.templates.render(
                TemplateName::RepairNoCode,
                &[("rounds_left", rounds_left.as_str())],
            )?;
            return Ok(Message::text(Role::User, text));
        };
        let code = rec.code.as_deref().unwrap_or_default();
        let fb = feedback_parts(
            outcome,
            code,
            &self.config.limits,
            self.config.feedback_budget,
        );
        if outcome.succeeded() && !rec.answered {
            let text = self.templates.render(
                TemplateName::RepairNoAnswer,
                &[
                    ("stdout", fb.stdout.as_str()),
                    ("rounds_left", rounds_left.as_str()),
                ],
            )?;
            return Ok(Message::text(Role::User, text));
        }
        let images: Vec<Part> = outcome
            .artifacts
            .iter()
            .filter(|a| a.mime == "image/png")
            .filter_map(|a| a.base64.clone())
            .map(|base64| Part::ImagePng { base64 })
            .collect();
        let vars = [
            ("feedback", fb.error.as_str()),
            ("stdout", fb.stdout.as_str()),
            ("rounds_left", rounds_left.as_str()),
        ];
        if self.model.vision() && !images.is_empty() {
            let described = describe_images(&outcome.artifacts);
            let mut with_images = vars.to_vec();
            with_images.push(("images", described.as_str()));
            let text = self
                .templates
                .render(TemplateName::RepairWithImages, &with_images)?;
            let mut message = Message::text(Role::User, text);
            message.parts.extend(images);
            return Ok(message);
        }
        let text = self.templates.render(TemplateName::Repair, &vars)?;
        Ok(Message::text(Role::User, text))
    }
}

/// What the task prompt says about importable packages.
fn image_packages(strategy: &str) -> &'static str {
    match strategy {
        "fat" => "numpy, pandas, matplotlib, scipy, sympy, scikit-learn, statsmodels, networkx, seaborn and the standard library",
        _ => "the Python standard library only",
    }
}

async fn join_start(
    start: Option<tokio::task::JoinHandle<Result<Kernel, KernelError>>>,
) -> Result<Kernel, String> {
    match start {
        Some(handle) => match handle.await {
            Ok(Ok(k)) => Ok(k),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        None => Err("kernel start was already consumed".into()),
    }
}

/// Images stay on disk as artifacts; the journal keeps their paths only.
fn without_images(mut o: Outcome) -> Outcome {
    for a in &mut o.artifacts {
        a.base64 = None;
    }
    o
}

/// A task id as a directory name.
pub fn sanitize(id: &str) -> PathBuf {
    PathBuf::from(
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>(),
    )
}
