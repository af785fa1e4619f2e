//! One task of one arm as an EEE instance record
//! (`instance_level_eval.schema.json`): `multi_turn`, its messages with
//! `turn_idx` = the round that sent or produced them, one
//! `answer_attribution` per round (the answer the round's code left, read
//! by retrace's rule, `is_terminal` on the last), the final correctness,
//! tokens, time, and the repair facts in `metadata` (strings only, as the
//! schema asks).

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::aggregate::{evaluation_name, result_id};
use super::{strings, EeeView, ModelGroup, SCHEMA_VERSION};
use crate::model::Role;
use crate::record::AttemptRecord;
use crate::report::episode::Episode;

pub(super) fn record(view: &EeeView, group: &ModelGroup, e: &Episode) -> Value {
    let arm = group
        .arms
        .iter()
        .find(|(a, _)| a.name == e.arm)
        .map(|(a, _)| *a)
        .expect("episodes are filtered to the group's arms");
    let k = arm.spec.policy.rounds;
    let turns = e.conversation();
    let opening = e.opening();
    let raw = opening
        .iter()
        .filter(|t| t.role == Role::User)
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let formatted = opening
        .iter()
        .map(|t| format!("{}: {}", t.role.name(), t.text))
        .collect::<Vec<_>>()
        .join("\n\n");
    let reference: Vec<String> = e.target().into_iter().collect();
    let cost = e.cost();
    let token_usage = match (cost.prompt_tokens, cost.completion_tokens) {
        (Some(i), Some(o)) => json!({
            "input_tokens": i,
            "output_tokens": o,
            "total_tokens": i + o,
            "input_tokens_cache_read": cost.cached_tokens,
        }),
        // All or nothing: a round with unknown counts leaves it out.
        _ => Value::Null,
    };
    let model_ms: f64 = e.records.iter().map(|r| r.timings_ms.model).sum();
    let exec_ms: f64 = e.records.iter().map(|r| r.timings_ms.exec).sum();
    json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": group.evaluation_id,
        "model_id": group.identity.hub_id(),
        "evaluation_name": evaluation_name(view, group, arm),
        "evaluation_result_id": result_id(arm, &format!("acc@{k}")),
        "sample_id": e.task_id,
        "sample_hash": sample_hash(&raw, &reference),
        "interaction_type": "multi_turn",
        "input": { "raw": raw, "formatted": formatted, "reference": reference },
        "output": null,
        "messages": turns.iter().map(|t| json!({
            "turn_idx": t.round,
            "role": t.role.name(),
            "content": t.text,
        })).collect::<Vec<_>>(),
        "answer_attribution": attribution(e),
        "evaluation": {
            "score": if e.correct() { 1.0 } else { 0.0 },
            "is_correct": e.correct(),
            "num_turns": (e.rounds_used() > 0).then_some(e.rounds_used()),
            "tool_calls_count": 0,
        },
        "token_usage": token_usage,
        "performance": {
            "latency_ms": cost.total_ms.max(0.0),
            "generation_time_ms": model_ms.max(0.0),
            "additional_details": strings(vec![
                ("execution_time_ms", json!(format!("{exec_ms:.1}"))),
            ]),
        },
        "error": e.last().and_then(|r| r.infra_error.clone()),
        "metadata": metadata(view, e),
    })
}

/// One entry per round: the answer the round left (carried from an
/// earlier round when it left none), as retrace read it.
fn attribution(e: &Episode) -> Vec<Value> {
    let last = e.records.len().saturating_sub(1);
    e.records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let check = r.check.as_ref();
            json!({
                "turn_idx": r.round,
                "source": format!(
                    "the `answer` value after running the code of the assistant message of turn {}",
                    r.round
                ),
                "extracted_value": check.and_then(|c| c.extracted.clone()).unwrap_or_default(),
                "extraction_method": match check {
                    Some(c) => format!("retrace:{}", c.reading()),
                    None => "retrace:none".into(),
                },
                "is_terminal": i == last,
            })
        })
        .collect()
}

/// The repair facts, each a string.
fn metadata(view: &EeeView, e: &Episode) -> Value {
    let tags = view.config.provenance.task_tags.get(e.task_id);
    let per_round = |f: fn(&AttemptRecord) -> String| {
        e.records.iter().map(|r| f(r)).collect::<Vec<_>>().join(",")
    };
    strings(vec![
        ("arm", json!(e.arm)),
        ("finished", json!(e.finished().to_string())),
        ("first_correct_round", json!(e.first_correct_round())),
        (
            "correct_by_round",
            json!(per_round(|r| if r.correct { "1" } else { "0" }.into())),
        ),
        ("verdicts", json!(per_round(verdict))),
        (
            "feedback_kinds",
            json!(per_round(|r| r
                .feedback_kind
                .map(|k| json!(k).as_str().unwrap_or_default().to_string())
                .unwrap_or_else(|| "-".into()))),
        ),
        (
            "masking",
            json!(per_round(|r| match &r.masking {
                None => "-".into(),
                Some(flags) if flags.is_empty() => "clean".into(),
                Some(flags) => flags
                    .iter()
                    .map(|f| json!(f).as_str().unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
                    .join("+"),
            })),
        ),
        (
            "shared_from",
            json!(e.records.first().and_then(|r| r.shared_from.clone())),
        ),
        ("check_rule", json!(e.check_rule())),
        ("why_wrong", json!(e.why_wrong(view.config))),
        ("tags", json!(tags.map(|t| t.join(",")))),
        (
            "fault",
            json!(e.records.first().and_then(|r| r.fault.clone())),
        ),
    ])
}

/// How a round's execution ended: `ok`, `error:KeyError`, a kill verdict,
/// `no_code`, `infra_error`.
fn verdict(r: &AttemptRecord) -> String {
    match (&r.outcome, &r.infra_error) {
        (_, Some(_)) => "infra_error".into(),
        (None, None) if r.kept_answer => "kept_answer".into(),
        (None, None) => "no_code".into(),
        (Some(o), None) => match &o.error {
            Some(err) if o.verdict == crate::sandbox::Verdict::Error => {
                format!("error:{}", err.ename)
            }
            _ => o.verdict.to_string(),
        },
    }
}

/// EEE's cross-model key: SHA-256 of `{"raw": …, "reference": […]}` as
/// Python's `json.dumps(sort_keys=True, separators=(",", ":"))` writes it
/// (ASCII only, everything past `~` escaped as `\uXXXX`).
fn sample_hash(raw: &str, reference: &[String]) -> String {
    let compact = json!({ "raw": raw, "reference": reference }).to_string();
    let mut ascii = String::with_capacity(compact.len());
    for c in compact.chars() {
        if (c as u32) <= 0x7e {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    hex::encode(Sha256::digest(ascii.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::sample_hash;

    #[test]
    fn the_sample_hash_is_pythons_recipe() {
        // hashlib.sha256(json.dumps({"raw": "Était 5 €?\x7f 😀 \"q\"\n",
        //   "reference": ["5"]}, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        assert_eq!(
            sample_hash("Était 5 €?\u{7f} 😀 \"q\"\n", &["5".into()]),
            "6a544a83591319e71847f3201aef1693fbfb7c2ece0988cf2ba474a2b627663e"
        );
    }
}
