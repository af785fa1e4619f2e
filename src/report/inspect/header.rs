//! The header of one arm's log: Inspect's `EvalLog` without its samples
//! (`eval`, `plan`, `results`, `stats`), as `header.json` of a `.eval`.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::record::{ArmSpec, RunConfig};
use crate::report::episode::Episode;
use crate::report::metrics::{headline, ArmSummary};
use crate::report::model_identity::ModelIdentity;
use crate::util::file_name::file_name;

/// Inspect's log schema version.
const LOG_VERSION: u32 = 2;

/// The name of the one scorer: retrace's answer check.
pub(super) const SCORER: &str = "retrace_check";

/// What every part of one arm's log is made from.
pub(super) struct ArmContext<'a> {
    pub config: &'a RunConfig,
    pub arm: &'a ArmSpec,
    pub summary: &'a ArmSummary,
    /// How many arms the run has (the task is named by its arm when > 1).
    pub arms: usize,
    /// The model as Inspect names models, `provider/model`.
    pub model: String,
}

impl<'a> ArmContext<'a> {
    pub fn new(
        config: &'a RunConfig,
        arm: &'a ArmSpec,
        summary: &'a ArmSummary,
        arms: usize,
    ) -> ArmContext<'a> {
        ArmContext {
            config,
            arm,
            summary,
            arms,
            model: ModelIdentity::of(&arm.spec.model.spec).inspect_name(),
        }
    }

    /// The suite as Inspect's task name.
    pub fn task_name(&self) -> String {
        self.config.spec.tasks.suite_name()
    }

    /// A stable id of this log (the run and the arm): the same run exported
    /// twice gives the same ids.
    pub fn id(&self, what: &str) -> String {
        let digest = Sha256::digest(format!(
            "{what}\0{}\0{}",
            self.config.provenance.run_id, self.arm.name
        ));
        hex::encode(&digest[..11])
    }

    /// `<created>_<task>_<arm>`: Inspect's own naming (the start time
    /// first, `2026-12-06T21-25-39-00-00`), each part safe as a file name.
    pub fn file_stem(&self) -> String {
        let created = chrono::DateTime::parse_from_rfc3339(&self.config.provenance.created)
            .map(|t| {
                t.with_timezone(&chrono::Utc)
                    .format("%Y-%m-%dT%H-%M-%S-00-00")
                    .to_string()
            })
            .unwrap_or_else(|_| "unknown-time".into());
        format!(
            "{}_{}_{}",
            file_name(&created),
            file_name(&self.task_name()),
            file_name(&self.arm.name)
        )
    }

    /// When the run started, RFC 3339 in UTC.
    pub fn created(&self) -> String {
        utc(&self.config.provenance.created)
    }

    pub fn temperature(&self, round: u32) -> f32 {
        let g = &self.arm.spec.model.generation;
        match (round, g.repair_temperature) {
            (r, Some(t)) if r > 0 => t,
            _ => g.temperature,
        }
    }
}

/// A recorded timestamp in UTC with its offset (what Inspect requires);
/// the text as recorded when it does not parse.
pub(super) fn utc(text: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc).to_rfc3339())
        .unwrap_or_else(|_| text.to_string())
}

/// The header of one arm's log.
pub(super) fn header(c: &ArmContext, episodes: &[&Episode]) -> Value {
    let finished = episodes.iter().all(|e| e.finished());
    json!({
        "version": LOG_VERSION,
        // An interrupted run (resumable) is a cancelled eval in Inspect.
        "status": if finished { "success" } else { "cancelled" },
        "eval": eval_spec(c, episodes),
        "plan": plan(c),
        "results": results(c, episodes),
        "stats": stats(c, episodes),
        "invalidated": false,
        "tags": [],
        "metadata": {},
    })
}

fn eval_spec(c: &ArmContext, episodes: &[&Episode]) -> Value {
    let p = &c.config.provenance;
    let g = &c.arm.spec.model.generation;
    let ids: Vec<&str> = episodes.iter().map(|e| e.task_id).collect();
    let display = if c.arms > 1 {
        format!("{} · {}", c.task_name(), c.arm.name)
    } else {
        c.task_name()
    };
    let mut spec = json!({
        "eval_id": c.id("eval"),
        "run_id": p.run_id,
        "created": c.created(),
        "task": c.task_name(),
        "task_id": c.id("task"),
        "task_version": suite_version(c.config),
        "task_display_name": display,
        "task_args": task_args(c),
        "dataset": {
            "name": c.config.spec.tasks.suite,
            "samples": ids.len(),
            "sample_ids": ids,
            "shuffled": false,
        },
        "model": c.model,
        "model_generate_config": {
            "temperature": g.temperature,
            "max_tokens": g.max_tokens,
        },
        "config": { "epochs": 1 },
        "packages": { "retrace": p.version_line() },
        "metadata": { "retrace": retrace_metadata(c) },
    });
    if let Some((commit, dirty)) = p.commit() {
        spec["revision"] = json!({
            "type": "git", "origin": "retrace", "commit": commit, "dirty": dirty,
        });
    }
    spec
}

/// What a task of the suite is asked and how it is repaired: the loop's
/// parameters, as Inspect shows a task's arguments.
fn task_args(c: &ArmContext) -> Value {
    let s = &c.arm.spec;
    json!({
        "arm": c.arm.name,
        "rounds": s.policy.rounds,
        "feedback": s.policy.feedback,
        "stop_on": s.policy.stop_on,
        "after_failure": s.policy.after_failure,
        "repair_temperature": s.model.generation.repair_temperature,
        "strategy": s.strategy().to_string(),
    })
}

/// retrace's own record of the arm: the run, the whole protocol
/// fingerprint, the sandbox and executor, the model as run.json has it.
fn retrace_metadata(c: &ArmContext) -> Value {
    let p = &c.config.provenance;
    json!({
        "run_id": p.run_id,
        "arm": c.arm.name,
        "model": c.arm.spec.model.spec.to_string(),
        "synthetic_model": p.synthetic_model,
        "model_info": p.model_info,
        "fingerprint": c.config.fingerprint(&c.arm.name),
        "sandbox": p.sandbox,
        "executor": p.executor,
        "limits": c.arm.spec.execution.limits,
        "prompts_hash": p.prompts_hash,
        "task_hashes": p.task_hashes,
        "skipped": p.skipped,
    })
}

/// The suite's version: a digest of every task's recorded hash, so two
/// logs of the same tasks have the same version.
fn suite_version(config: &RunConfig) -> String {
    let mut h = Sha256::new();
    for (id, hash) in &config.provenance.task_hashes {
        h.update(id.as_bytes());
        h.update([0]);
        h.update(hash.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..6])
}

fn plan(c: &ArmContext) -> Value {
    let s = &c.arm.spec;
    json!({
        "name": "plan",
        "steps": [{
            "solver": "retrace/repair_loop",
            "params": {
                "rounds": s.policy.rounds,
                "feedback": s.policy.feedback,
                "stop_on": s.policy.stop_on,
                "after_failure": s.policy.after_failure,
            },
        }],
        "config": {
            "temperature": s.model.generation.temperature,
            "max_tokens": s.model.generation.max_tokens,
        },
    })
}

/// The headline metrics as the one scorer's metrics: `accuracy` (Acc@K)
/// and its `stderr` first, as Inspect's own scorers report them, then
/// Acc@r per round, recovery, regression and kill rate, each with its
/// Wilson interval in its metadata. A rate with an empty denominator is
/// left out and named in the results' metadata.
fn results(c: &ArmContext, episodes: &[&Episode]) -> Value {
    let mut metrics = Map::new();
    let mut undefined = Vec::new();
    let lines = headline(c.summary);
    let last = format!("acc@{}", c.summary.header.rounds);
    if let Some(rate) = lines.iter().find(|h| h.id == last).and_then(|h| h.rate) {
        metrics.insert("accuracy".into(), metric("accuracy", rate.value, &rate));
        metrics.insert("stderr".into(), metric("stderr", rate.stderr(), &rate));
    }
    for h in &lines {
        match &h.rate {
            Some(rate) => {
                let mut m = metric(&h.name, rate.value, rate);
                m["metadata"]["description"] = json!(h.description);
                metrics.insert(h.name.clone(), m);
            }
            None => undefined.push(h.name.clone()),
        }
    }
    let scored = episodes.iter().filter(|e| e.finished()).count();
    json!({
        "total_samples": episodes.len(),
        "completed_samples": scored,
        "scores": [{
            "name": SCORER,
            "scorer": SCORER,
            "scored_samples": scored,
            "unscored_samples": episodes.len() - scored,
            "params": {},
            "metrics": metrics,
        }],
        "metadata": {
            "rounds": c.summary.header.rounds,
            "undefined_metrics": undefined,
            "interval": "Wilson score, 95%",
        },
    })
}

fn metric(name: &str, value: f64, rate: &crate::report::stats::Rate) -> Value {
    json!({
        "name": name,
        "value": value,
        "params": {},
        "metadata": {
            "ci_low": rate.ci_low,
            "ci_high": rate.ci_high,
            "successes": rate.successes,
            "n": rate.n,
            "stderr": rate.stderr(),
        },
    })
}

fn stats(c: &ArmContext, episodes: &[&Episode]) -> Value {
    let p = &c.config.provenance;
    let completed = p.ended().map(|t| t.to_rfc3339());
    let mut usage = Map::new();
    if let Some(u) = super::sample::usage_of(episodes.iter().copied()) {
        usage.insert(c.model.clone(), u);
    }
    json!({
        "started_at": c.created(),
        "completed_at": completed.unwrap_or_default(),
        "model_usage": usage,
    })
}
