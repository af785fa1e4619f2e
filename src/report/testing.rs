//! Hand-built journals for the report tests: records as the harness
//! writes them, from a shorthand of how each round went.

use serde_json::json;

use crate::kernel::Outcome;
use crate::record::{
    AttemptRecord, FeedbackKind, RecordKind, RunConfig, StopOn, StopReason, SCHEMA_VERSION,
};
use crate::sandbox::{SandboxLimits, Verdict};
use crate::task::check::Check;

pub fn config(ids: &[&str], rounds: u32, stop_on: StopOn) -> RunConfig {
    serde_json::from_value(json!({
        "schema_version": SCHEMA_VERSION,
        "run_id": "t",
        "retrace_version": "0",
        "created": "now",
        "out_dir": "x",
        "suite": "s",
        "selection": {"limit_tasks": null, "sample": null, "seed": 0},
        "task_ids": ids,
        "rounds": rounds,
        "stop_on": stop_on,
        "concurrency": 1,
        "model": "m",
        "synthetic_model": false,
        "generation": {"temperature": 0.0, "max_tokens": 1, "request_timeout": 1.0, "max_retries": 0},
        "strategy": "fat",
        "image_lock_hash": "h",
        "limits": SandboxLimits::default(),
        "sandbox": {"confined": true, "mode": "test", "notes": []},
        "feedback_budget": 100
    }))
    .unwrap()
}

/// How one round went, in shorthand.
#[derive(Clone, Copy)]
pub enum R {
    /// Ran cleanly with a right answer.
    Right,
    /// Ran cleanly with a wrong (but readable) answer.
    Wrong,
    /// Raised this exception; the earlier answer is carried.
    Raised(&'static str),
    /// Killed with this verdict.
    Killed(Verdict),
    /// No code in the reply.
    NoCode,
    /// Kept the earlier answer after a review prompt.
    Kept,
    /// The endpoint failed.
    Infra,
}

pub fn outcome(verdict: Verdict, ename: Option<&str>) -> Outcome {
    serde_json::from_value(json!({
        "status": if verdict == Verdict::Ok { "ok" } else { "error" },
        "verdict": verdict,
        "flags": [],
        "execution_count": 1,
        "stdout": "",
        "stderr": "",
        "results": [],
        "displays": [],
        "error": ename.map(|e| json!({"ename": e, "evalue": "", "traceback": []})),
        "answer": null,
        "artifacts": [],
        "truncated": false,
        "truncation": {"truncated": false, "dropped_bytes": 0, "dropped_messages": 0},
        "timings_ms": {"total": 5.0},
        "state_lost": false
    }))
    .unwrap()
}

pub fn checked(correct: bool) -> Check {
    Check {
        correct,
        parsed: true,
        extracted: Some("1".into()),
        normalized: Some("1".into()),
        rule: "number:abs_tol".into(),
        tolerance: Some(1e-6),
        parts: Vec::new(),
    }
}

/// The records of one task as the harness writes them, `rounds` being
/// how each round went; the last one carries the stop reason.
pub fn task(id: &str, rounds: &[R], stop_on: StopOn, k: u32) -> Vec<AttemptRecord> {
    let mut carried: Option<Check> = None;
    let mut out: Vec<AttemptRecord> = Vec::new();
    for (i, how) in rounds.iter().enumerate() {
        let mut rec: AttemptRecord = serde_json::from_value(json!({
            "schema_version": SCHEMA_VERSION, "run_id": "t", "task_id": id,
            "round": i, "model": "m", "synthetic_model": false, "strategy": "fat",
            "stop_on": stop_on, "feedback": "parsed", "kind": "attempt",
            "prompt": [], "reply": "r", "extraction": null, "code": "x = 1",
            "outcome": null, "check": null, "correct": false, "answered": false,
            "stop": null, "infra_error": null,
            "timings_ms": {"model": 10.0, "exec": 5.0, "total": 16.0},
            "tokens": {"prompt_tokens": 100, "completion_tokens": 20}
        }))
        .unwrap();
        match how {
            R::Right | R::Wrong => {
                rec.outcome = Some(outcome(Verdict::Ok, None));
                rec.answered = true;
                carried = Some(checked(matches!(how, R::Right)));
            }
            R::Raised(e) => rec.outcome = Some(outcome(Verdict::Error, Some(e))),
            R::Killed(v) => rec.outcome = Some(outcome(*v, None)),
            R::NoCode => rec.code = None,
            R::Kept => {
                rec.code = None;
                rec.kept_answer = true;
            }
            R::Infra => {
                rec.kind = RecordKind::InfraError;
                rec.code = None;
                rec.infra_error = Some("endpoint down".into());
                rec.stop = Some(StopReason::InfraError);
            }
        }
        rec.check = carried.clone();
        rec.correct = carried.as_ref().is_some_and(|c| c.correct);
        rec.parsed = carried.is_some();
        out.push(rec);
    }
    let n = out.len();
    for (i, rec) in out.iter_mut().enumerate() {
        let next = rounds.get(i + 1);
        rec.feedback_kind = match next {
            None => None,
            Some(_) if rec.answered || rec.kept_answer => Some(FeedbackKind::Review),
            Some(_) if rec.outcome.is_none() => Some(FeedbackKind::NoCode),
            Some(_) => Some(FeedbackKind::Error),
        };
        if i + 1 == n && rec.stop.is_none() {
            rec.stop = Some(if rec.round == k {
                StopReason::RoundsExhausted
            } else {
                StopReason::Clean
            });
        }
    }
    out
}
