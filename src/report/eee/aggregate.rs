//! The aggregate record of one model (EEE's `eval.schema.json`): who ran
//! what, the model, and one `evaluation_results` entry per headline
//! metric per arm, each with its standard error and Wilson interval.

use serde_json::{json, Value};

use super::{epoch_seconds, strings, EeeView, ModelGroup, SCHEMA_VERSION};
use crate::record::ArmSpec;
use crate::report::limits_line;
use crate::report::metrics::{headline, ArmSummary, Headline};

/// The instance sidecar as the aggregate names it.
pub(super) struct Detailed {
    pub file_path: String,
    pub checksum: String,
    pub rows: usize,
}

pub(super) fn record(view: &EeeView, group: &ModelGroup, detailed: &Detailed) -> Value {
    let p = &view.config.provenance;
    let ended = ended(view);
    let mut undefined = Vec::new();
    let mut results = Vec::new();
    for (arm, summary) in &group.arms {
        for h in headline(summary) {
            match result(view, group, arm, summary, &h) {
                Some(r) => results.push(r),
                None => undefined.push(format!("{}: {}", arm.name, h.id)),
            }
        }
    }
    let mut library = vec![
        ("run_id", json!(p.run_id)),
        ("protocol", json!("retrace repair loop")),
    ];
    if let Some((commit, dirty)) = p.commit() {
        library.push(("commit", json!(commit)));
        library.push(("dirty", json!(dirty.to_string())));
    }
    json!({
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": group.evaluation_id,
        "evaluation_timestamp": epoch_seconds(&p.created),
        "retrieved_timestamp": ended,
        "source_metadata": {
            "source_name": "retrace",
            "source_type": "evaluation_run",
            "source_organization_name": view.source.organization,
            "evaluator_relationship": view.source.relationship,
            "additional_details": strings(if undefined.is_empty() {
                Vec::new()
            } else {
                vec![
                    ("undefined_metrics", json!(undefined.join("; "))),
                    ("undefined_because", json!(
                        "an empty denominator (no task wrong at round 0 to recover, \
                         none right at round 0 to regress, no execution to kill)"
                    )),
                ]
            }),
        },
        "eval_library": {
            "name": "retrace",
            "version": p.version_line(),
            "additional_details": strings(library),
        },
        "model_info": model_info(view, group),
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": detailed.file_path,
            "hash_algorithm": "sha256",
            "checksum": detailed.checksum,
            "total_rows": detailed.rows,
        },
    })
}

/// When the run ended (its start plus its wall time), as epoch seconds:
/// the record is the run's, whenever it is exported.
fn ended(view: &EeeView) -> String {
    let p = &view.config.provenance;
    p.ended()
        .map(|t| epoch_seconds(&t.to_rfc3339()))
        .unwrap_or_else(|| epoch_seconds(&p.created))
}

fn model_info(view: &EeeView, group: &ModelGroup) -> Value {
    let id = &group.identity;
    let spec = &group.arms[0].0.spec.model.spec;
    let mut details = vec![
        ("deployment_type", json!(id.deployment)),
        ("model_availability", json!(id.availability)),
        ("retrace_model", json!(spec.to_string())),
        ("synthetic", json!(id.synthetic.to_string())),
    ];
    let info = &view.config.provenance.model_info;
    if !info.is_null() {
        details.push(("model_info", info.clone()));
    }
    let mut m = json!({
        "name": spec.to_string(),
        "id": id.hub_id(),
        "developer": id.developer_and_name().0,
        "additional_details": strings(details),
    });
    if let Some(engine) = id.engine {
        m["inference_engine"] = json!({ "name": engine });
        m["inference_platform"] = json!("local");
    }
    m
}

/// One headline metric of one arm; `None` when its rate is undefined.
fn result(
    view: &EeeView,
    group: &ModelGroup,
    arm: &ArmSpec,
    summary: &ArmSummary,
    h: &Headline,
) -> Option<Value> {
    let rate = h.rate?;
    let s = &arm.spec;
    let g = &s.model.generation;
    let mut parameters = json!({ "arm": arm.name });
    if let Some(r) = h.round {
        parameters["round"] = json!(r);
    }
    Some(json!({
        "evaluation_result_id": result_id(arm, &h.id),
        "evaluation_name": evaluation_name(view, group, arm),
        "source_data": {
            "dataset_name": view.config.spec.tasks.suite_name(),
            "source_type": "other",
            "additional_details": strings(vec![
                ("suite", json!(view.config.spec.tasks.suite)),
                ("tasks", json!(summary.header.tasks.to_string())),
            ]),
        },
        "evaluation_timestamp": epoch_seconds(&view.config.provenance.created),
        "metric_config": {
            "evaluation_description": h.description,
            "metric_id": h.id,
            "metric_name": h.name,
            "metric_kind": if h.round.is_some() { "accuracy" } else { "rate" },
            "metric_unit": "proportion",
            "metric_parameters": parameters,
            "lower_is_better": h.lower_is_better,
            "score_type": "continuous",
            "min_score": 0.0,
            "max_score": 1.0,
        },
        "score_details": {
            "score": rate.value,
            "details": strings(vec![
                ("successes", json!(rate.successes.to_string())),
                ("n", json!(rate.n.to_string())),
            ]),
            "uncertainty": {
                "standard_error": { "value": rate.stderr(), "method": "analytic" },
                "confidence_interval": {
                    "lower": rate.ci_low,
                    "upper": rate.ci_high,
                    "confidence_level": 0.95,
                    "method": "wilson",
                },
                "num_samples": rate.n,
            },
        },
        "generation_config": {
            "generation_args": {
                "temperature": g.temperature,
                "max_tokens": g.max_tokens.max(1),
                "max_attempts": s.policy.rounds + 1,
                "incorrect_attempt_feedback": s.policy.feedback.name(),
                "sandbox": {
                    "type": "retrace",
                    "config": limits_line(summary),
                },
            },
            "additional_details": strings(vec![
                ("repair_temperature", json!(g.repair_temperature)),
                ("stop_on", json!(s.policy.stop_on)),
                ("after_failure", json!(s.policy.after_failure)),
                ("strategy", json!(s.strategy().to_string())),
            ]),
        },
    }))
}

/// `<arm>/<metric id>`: the key instance records join on.
pub(super) fn result_id(arm: &ArmSpec, metric: &str) -> String {
    format!("{}/{metric}", arm.name)
}

/// The suite, and the arm when the model has several.
pub(super) fn evaluation_name(view: &EeeView, group: &ModelGroup, arm: &ArmSpec) -> String {
    let suite = view.config.spec.tasks.suite_name();
    if group.arms.len() > 1 {
        format!("{suite} ({})", arm.name)
    } else {
        suite
    }
}
