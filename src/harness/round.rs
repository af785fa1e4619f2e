//! One round's typed parts, in the order the loop makes them — what the
//! model replied ([`Solved`]), what the kernel did ([`Executed`]), what the
//! scorer said ([`Scored`]), what the stop rule decided ([`Decision`]) —
//! and the attempt record assembled from them in one place.

use crate::kernel::Outcome;
use crate::model::{Message, Reply, Usage};
use crate::record::{
    AttemptRecord, ExecutionMode, FeedbackKind, InstallStep, RecordKind, Replay, RoundTimings,
    Spent, StopReason, SCHEMA_VERSION,
};
use crate::repair::extract::{extract_code, Extraction};
use crate::repair::masking::{MaskFlag, Unchecked};
use crate::task::check::Check;

use super::answer::RoundAnswer;

/// What every record of a round says about where it belongs.
pub(super) struct RoundHead {
    pub run_id: String,
    pub task_id: String,
    pub round: u32,
    pub model: String,
    pub synthetic_model: bool,
    pub arm: String,
    pub strategy: String,
    pub stop_on: crate::record::StopOn,
    pub feedback: crate::record::FeedbackMode,
    pub execution: ExecutionMode,
}

/// The model's reply and the code in it.
pub(super) struct Solved {
    pub reply: Reply,
    pub extraction: Extraction,
    pub code: Option<String>,
    /// The reply kept the previous answer after a review prompt (nothing
    /// to run).
    pub kept_answer: bool,
}

impl Solved {
    /// The reply a record holds, as its round solved it (a shared round 0).
    pub fn of_record(r: &AttemptRecord) -> Solved {
        let text = r.reply.clone().unwrap_or_default();
        Solved {
            extraction: r.extraction.clone().unwrap_or_else(|| extract_code(&text)),
            code: r.code.clone(),
            kept_answer: false,
            reply: Reply {
                text,
                usage: r.tokens,
                attempts: 1,
                latency_ms: r.timings_ms.model,
                finish_reason: None,
                fault: r.fault.clone(),
                note: r.note.clone(),
                server: r.server_timings,
            },
        }
    }
}

/// What running the round's code did (nothing, when it had none).
#[derive(Default)]
pub(super) struct Executed {
    pub outcome: Option<Outcome>,
    pub installs: Vec<InstallStep>,
    pub exec_ms: f64,
    pub install_ms: Option<f64>,
    /// The task's kernel start, on the round that first used it.
    pub kernel_start_ms: Option<f64>,
    /// `--execution replay`: the earlier cells re-run before the code.
    pub replay: Option<Replay>,
    /// The executor could not do it (the kernel did not start, the gateway
    /// lost the execution): not the model's doing.
    pub infra: Option<String>,
}

impl Executed {
    /// The execution a record holds (a shared round 0; its kernel start
    /// was the sharing arm's).
    pub fn of_record(r: &AttemptRecord) -> Executed {
        Executed {
            outcome: r.outcome.clone(),
            installs: r.installs.clone(),
            exec_ms: r.timings_ms.exec,
            install_ms: r.timings_ms.install,
            kernel_start_ms: None,
            replay: None,
            infra: None,
        }
    }

    /// The answer the round's own code left (none unless it ran cleanly).
    pub fn answer(&self) -> RoundAnswer {
        self.outcome
            .as_ref()
            .filter(|o| o.succeeded())
            .map(RoundAnswer::of)
            .unwrap_or(RoundAnswer::None)
    }

    pub fn clean(&self) -> bool {
        self.outcome.as_ref().is_some_and(Outcome::succeeded)
    }
}

/// The check in force after the round.
pub(super) struct Scored {
    pub check: Option<Check>,
    /// The round's own code produced a plain answer value.
    pub answered: bool,
    /// Signs that the round's repair hid the error before it (`None`: not
    /// checked).
    pub masking: Option<Vec<MaskFlag>>,
    /// Why the round's repair was not checked, when a check was due.
    pub masking_unchecked: Option<Unchecked>,
}

impl Scored {
    pub fn correct(&self) -> bool {
        self.check.as_ref().is_some_and(|c| c.correct)
    }
}

/// Whether the task stops, and if not, what the model is told.
pub(super) struct Decision {
    pub stop: Option<StopReason>,
    pub feedback: Option<FeedbackKind>,
}

impl RoundHead {
    /// The record of a round the model and the kernel did.
    pub fn attempt(
        self,
        prompt: Vec<Message>,
        solved: Solved,
        executed: Executed,
        scored: Scored,
        decision: Decision,
        total_ms: f64,
    ) -> AttemptRecord {
        let mut rec = self.record(RecordKind::Attempt, prompt, Some(solved), &executed, scored);
        rec.outcome = executed.outcome.map(without_images);
        rec.stop = decision.stop;
        rec.feedback_kind = decision.feedback;
        rec.timings_ms.total = total_ms;
        rec
    }

    /// The record of a round the infrastructure could not do: the task
    /// ends here with the check it had, and `--resume` redoes it.
    pub fn infra(
        self,
        prompt: Vec<Message>,
        solved: Option<Solved>,
        executed: &Executed,
        carried: Option<Check>,
        why: String,
        total_ms: f64,
    ) -> AttemptRecord {
        let scored = Scored {
            check: carried,
            answered: false,
            masking: None,
            masking_unchecked: None,
        };
        let mut rec = self.record(RecordKind::InfraError, prompt, solved, executed, scored);
        rec.infra_error = Some(why);
        rec.stop = Some(StopReason::InfraError);
        rec.timings_ms.total = total_ms;
        rec
    }

    fn record(
        self,
        kind: RecordKind,
        prompt: Vec<Message>,
        solved: Option<Solved>,
        executed: &Executed,
        scored: Scored,
    ) -> AttemptRecord {
        let (reply, extraction, code, kept_answer) = match solved {
            Some(s) => (Some(s.reply), Some(s.extraction), s.code, s.kept_answer),
            None => (None, None, None, false),
        };
        let correct = scored.correct();
        let parsed = scored.check.as_ref().is_some_and(|c| c.parsed);
        AttemptRecord {
            schema_version: SCHEMA_VERSION,
            run_id: self.run_id,
            task_id: self.task_id,
            round: self.round,
            model: self.model,
            synthetic_model: self.synthetic_model,
            strategy: self.strategy,
            arm: self.arm,
            shared_from: None,
            stop_on: self.stop_on,
            feedback: self.feedback,
            execution: self.execution,
            kind,
            prompt,
            kept_answer,
            fault: reply.as_ref().and_then(|r| r.fault.clone()),
            note: reply.as_ref().and_then(|r| r.note.clone()),
            extraction,
            code,
            outcome: None,
            check: scored.check,
            correct,
            answered: scored.answered,
            parsed,
            stop: None,
            feedback_kind: None,
            infra_error: None,
            installs: executed.installs.clone(),
            timings_ms: RoundTimings {
                model: reply.as_ref().map_or(0.0, |r| r.latency_ms),
                exec: executed.exec_ms,
                total: 0.0,
                kernel_start: executed.kernel_start_ms,
                install: executed.install_ms,
            },
            tokens: reply.as_ref().map_or(Usage::ZERO, |r| r.usage),
            server_timings: reply.as_ref().and_then(|r| r.server),
            reply: reply.map(|r| r.text),
            cumulative: Spent::default(),
            masking: scored.masking,
            masking_unchecked: scored.masking_unchecked,
            replay: executed.replay.clone(),
            state_names: None,
        }
    }
}

/// Images stay on disk as artifacts; the journal keeps their paths only.
fn without_images(mut o: Outcome) -> Outcome {
    for a in &mut o.artifacts {
        a.base64 = None;
    }
    o
}
