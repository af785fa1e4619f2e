//! One task of one arm as Inspect's `EvalSample`: the opening messages as
//! input, the expected answer as target, the whole conversation, the
//! score (correct at the last round, the answer as read and the rule that
//! decided it), every round's record in the metadata, usage and time, and
//! the events Inspect's transcript view shows (each round's model call,
//! the execution of its code in the kernel, the round's outcome, the
//! score).

use serde_json::{json, Map, Value};

use super::header::{ArmContext, SCORER};
use super::message::{message, messages};
use crate::kernel::Outcome;
use crate::model::Role;
use crate::record::AttemptRecord;
use crate::repair::traceback::kill_message;
use crate::report::episode::{Episode, Turn};
use crate::sandbox::{SandboxLimits, Verdict};

/// The sample of one task of the arm.
pub(super) fn sample(c: &ArmContext, e: &Episode) -> Value {
    let turns = e.conversation();
    let cost = e.cost();
    let score = score(c, e);
    let mut metadata = Map::new();
    metadata.insert("arm".into(), json!(e.arm));
    if let Some(tags) = c.config.provenance.task_tags.get(e.task_id) {
        metadata.insert("tags".into(), json!(tags));
    }
    if e.expected.is_none() {
        metadata.insert(
            "target_unknown".into(),
            json!("the suite no longer has this task: no expected answer to show"),
        );
    }
    metadata.insert("finished".into(), json!(e.finished()));
    metadata.insert("rounds_used".into(), json!(e.rounds_used()));
    metadata.insert(
        "rounds".into(),
        Value::Array(
            e.records
                .iter()
                .map(|r| round_record(r, &c.arm.spec.execution.limits))
                .collect(),
        ),
    );
    let mut sample = json!({
        "id": e.task_id,
        "epoch": 1,
        // The task as the model was given it (the system prompt opens
        // `messages`), so the viewer's input column shows the task.
        // A task the run never reached has no messages: its input is empty text.
        "input": match messages(e.opening().iter().filter(|t| t.role == Role::User)) {
            task if task.is_empty() => json!(""),
            task => json!(task),
        },
        "target": e.target().unwrap_or_default(),
        "messages": messages(&turns),
        "output": output(c, e),
        "scores": { SCORER: score.clone() },
        "metadata": metadata,
        "model_usage": {},
        "total_time": cost.total_ms / 1e3,
        "working_time": cost.working_ms / 1e3,
        "uuid": c.id(&format!("sample\0{}", e.task_id)),
        "events": events(c, e, &turns, &score),
    });
    if let Some(u) = usage_of([e]) {
        sample["model_usage"] = json!({ c.model.clone(): u });
    }
    sample
}

/// The sample's entry in `summaries.json` (what the viewer lists before
/// it opens a sample).
pub(super) fn summary(sample: &Value) -> Value {
    let mut s = Map::new();
    for key in [
        "id",
        "epoch",
        "input",
        "target",
        "metadata",
        "scores",
        "model_usage",
        "total_time",
        "working_time",
        "uuid",
    ] {
        s.insert(key.into(), sample[key].clone());
    }
    let finished = sample["metadata"]["finished"].as_bool().unwrap_or(false);
    s.insert("completed".into(), json!(finished));
    let messages = sample["messages"].as_array().map_or(0, Vec::len);
    s.insert("message_count".into(), json!(messages));
    // The per-round records stay in the sample: summaries are kept small.
    if let Some(m) = s.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("rounds");
    }
    Value::Object(s)
}

/// Inspect's `ModelUsage` summed over `episodes`; `None` when no round's
/// token counts are known.
pub(super) fn usage_of<'a, 'b: 'a>(
    episodes: impl IntoIterator<Item = &'a Episode<'b>>,
) -> Option<Value> {
    let (mut input, mut output, mut cached, mut any, mut any_cache) =
        (0u64, 0u64, 0u64, false, false);
    for e in episodes {
        let cost = e.cost();
        if let (Some(p), Some(c)) = (cost.prompt_tokens, cost.completion_tokens) {
            input += p;
            output += c;
            any = true;
        }
        if let Some(c) = cost.cached_tokens {
            cached += c;
            any_cache = true;
        }
    }
    if !any {
        return None;
    }
    let mut usage = json!({
        "input_tokens": input,
        "output_tokens": output,
        "total_tokens": input + output,
    });
    if any_cache {
        usage["input_tokens_cache_read"] = json!(cached);
    }
    Some(usage)
}

/// Correct (`C`) or incorrect (`I`) at the last round, as Inspect's own
/// match scorers write it.
fn score(c: &ArmContext, e: &Episode) -> Value {
    let last = e.last();
    let check = last.and_then(|r| r.check.as_ref());
    let explanation = match e.why_wrong(c.config) {
        None => format!(
            "correct at round {} (first correct at round {}), rule {}",
            e.rounds_used().saturating_sub(1),
            e.first_correct_round().unwrap_or_default(),
            e.check_rule().unwrap_or("none")
        ),
        Some(why) => why,
    };
    json!({
        "value": if e.correct() { "C" } else { "I" },
        "answer": e.answer(),
        "explanation": explanation,
        "metadata": {
            "round": last.map(|r| r.round),
            "first_correct_round": e.first_correct_round(),
            "rule": check.map(|c| c.rule.clone()),
            "reading": check.map(|c| c.reading()),
            "normalized": check.and_then(|c| c.normalized.clone()),
            "tolerance": check.and_then(|c| c.tolerance),
        },
    })
}

/// The last reply as the sample's output.
fn output(c: &ArmContext, e: &Episode) -> Value {
    let reply = e.records.iter().rev().find_map(|r| r.reply.as_deref());
    let choices = match reply {
        Some(text) => vec![json!({
            "message": { "role": "assistant", "content": text, "source": "generate" },
            "stop_reason": "stop",
        })],
        None => Vec::new(),
    };
    json!({ "model": c.model, "choices": choices })
}

/// One round's record, as the sample's metadata lists them.
fn round_record(r: &AttemptRecord, limits: &SandboxLimits) -> Value {
    let outcome = r.outcome.as_ref();
    json!({
        "round": r.round,
        "kind": r.kind,
        "verdict": outcome.map(|o| o.verdict),
        "exception": outcome.and_then(|o| o.error.as_ref()).map(|e| &e.ename),
        "kill": outcome.and_then(|o| kill_message(o, limits)),
        "fired": outcome.map(|o| &o.fired),
        "artifacts": outcome.map(|o| o.artifacts.iter().map(|a| &a.path).collect::<Vec<_>>()),
        "correct": r.correct,
        "answered": r.answered,
        "parsed": r.parsed,
        "kept_answer": r.kept_answer,
        "stop_reason": r.stop,
        "feedback_kind": r.feedback_kind,
        "masking": r.masking,
        "masking_unchecked": r.masking_unchecked,
        "shared_from": r.shared_from,
        "fault": r.fault,
        "note": r.note,
        "infra_error": r.infra_error,
        "extraction_rule": r.extraction.as_ref().map(|x| x.rule),
        "tokens": r.tokens,
        "timings_ms": r.timings_ms,
    })
}

/// The transcript: per round, the model call (with the conversation it
/// was given), the execution of its code, the round's record; then the
/// score. Events carry the run's start time (the journal keeps no clock
/// time per round); their order and `working_start` are the journal's.
fn events(c: &ArmContext, e: &Episode, turns: &[Turn], score: &Value) -> Vec<Value> {
    let at = c.created();
    let limits = &c.arm.spec.execution.limits;
    let mut out = Vec::new();
    let mut working = 0.0;
    for r in &e.records {
        // The conversation up to this round's reply.
        let given: Vec<Value> = turns
            .iter()
            .filter(|t| t.round < r.round || t.round == r.round && t.role != Role::Assistant)
            .map(message)
            .collect();
        let base = |working: f64| json!({ "timestamp": at, "working_start": working });
        if r.reply.is_some() || r.infra_error.is_some() {
            let mut ev = base(working);
            let choices: Vec<Value> = r
                .reply
                .iter()
                .map(|text| {
                    json!({
                        "message": { "role": "assistant", "content": text, "source": "generate" },
                        "stop_reason": "stop",
                    })
                })
                .collect();
            let mut output = json!({ "model": c.model, "choices": choices });
            if let (Some(p), Some(o)) = (r.tokens.prompt_tokens, r.tokens.completion_tokens) {
                output["usage"] = json!({
                    "input_tokens": p, "output_tokens": o, "total_tokens": p + o,
                });
            }
            let fields = json!({
                "event": "model",
                "model": c.model,
                "input": given,
                "tools": [],
                "tool_choice": "none",
                "config": {
                    "temperature": c.temperature(r.round),
                    "max_tokens": c.arm.spec.model.generation.max_tokens,
                },
                "output": output,
                "error": r.infra_error,
                "working_time": r.timings_ms.model / 1e3,
                "metadata": { "round": r.round },
            });
            merge(&mut ev, fields);
            out.push(ev);
        }
        working += r.timings_ms.model / 1e3;
        if let (Some(code), Some(o)) = (&r.code, &r.outcome) {
            let mut ev = base(working);
            merge(
                &mut ev,
                json!({
                    "event": "sandbox",
                    "action": "exec",
                    "cmd": "python (a cell of the task's IPython kernel)",
                    "input": code,
                    "result": if o.verdict == Verdict::Ok { 0 } else { 1 },
                    "output": outcome_text(o, limits),
                    "metadata": { "round": r.round, "verdict": o.verdict },
                }),
            );
            out.push(ev);
        }
        working += r.timings_ms.exec / 1e3;
        let mut ev = base(working);
        merge(
            &mut ev,
            json!({
                "event": "info",
                "source": "retrace",
                "data": round_record(r, limits),
            }),
        );
        out.push(ev);
    }
    let mut ev = json!({ "timestamp": at, "working_start": working });
    merge(
        &mut ev,
        json!({
            "event": "score",
            "score": score,
            "target": e.target().unwrap_or_default(),
            "intermediate": false,
            "scorer": SCORER,
        }),
    );
    out.push(ev);
    out
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

/// What an execution printed and how it ended, as a terminal shows it:
/// stdout, stderr, the exception and traceback, the kill and the
/// artifacts saved.
fn outcome_text(o: &Outcome, limits: &SandboxLimits) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !o.stdout.is_empty() {
        parts.push(o.stdout.clone());
    }
    if !o.stderr.is_empty() {
        parts.push(o.stderr.clone());
    }
    if let Some(err) = &o.error {
        let tb = err.traceback.join("\n");
        let tb = console::strip_ansi_codes(&tb).into_owned();
        parts.push(if tb.is_empty() {
            format!("{}: {}", err.ename, err.evalue)
        } else {
            tb
        });
    }
    if !matches!(o.verdict, Verdict::Ok | Verdict::Error) {
        let why = kill_message(o, limits).unwrap_or_default();
        parts.push(format!("[killed: {}] {why}", o.verdict));
    }
    for a in &o.artifacts {
        parts.push(format!(
            "[artifact {} ({}, {} bytes)]",
            a.path, a.mime, a.bytes
        ));
    }
    parts.join("\n")
}
