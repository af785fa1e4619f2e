//! Hand-built journals for the report tests: records as the harness
//! writes them, from a shorthand of how each round went.

use serde_json::json;

use crate::kernel::{ErrorInfo, Outcome};
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
    let mut o = Outcome::ended(verdict, 5.0);
    o.error = ename.map(|e| ErrorInfo {
        ename: e.into(),
        evalue: String::new(),
        traceback: Vec::new(),
    });
    o
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
        published: Default::default(),
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

/// The same records, in another arm.
pub fn in_arm(mut records: Vec<AttemptRecord>, strategy: &str) -> Vec<AttemptRecord> {
    for r in &mut records {
        r.strategy = strategy.into();
    }
    records
}

/// A run of two arms, `fat` (baseline) and `dynamic`, on tasks a..f with
/// K = 1 and images of 3 GiB and 200 MiB. Final correctness:
///
/// | task | fat | dynamic |
/// |---|---|---|
/// | a | right | right |
/// | b | right | wrong (ModuleNotFoundError twice) |
/// | c | wrong | right |
/// | d | right at 1 | right at 1 |
/// | e | wrong | right at 1 (ImportError at 0) |
/// | f | right | right, interrupted (not shared) |
pub fn two_arms() -> (RunConfig, Vec<AttemptRecord>) {
    use R::*;
    let (k, s) = (1, StopOn::Clean);
    let mut cfg = config(&["a", "b", "c", "d", "e", "f"], k, s);
    cfg.spec.packages.strategies =
        vec![crate::pyenv::Strategy::Fat, crate::pyenv::Strategy::Dynamic];
    for (name, bytes) in [("fat", 3u64 << 30), ("dynamic", 200 << 20)] {
        let image = json!({"name": name, "lock_hash": "h", "bytes": bytes});
        cfg.provenance
            .images
            .insert(name.into(), serde_json::from_value(image).unwrap());
    }
    let mut fat = Vec::new();
    fat.extend(task("a", &[Right], s, k));
    fat.extend(task("b", &[Right], s, k));
    fat.extend(task("c", &[Wrong], s, k));
    fat.extend(task("d", &[Raised("KeyError"), Right], s, k));
    fat.extend(task("e", &[Wrong], s, k));
    fat.extend(task("f", &[Right], s, k));
    let mut dynamic = Vec::new();
    dynamic.extend(task("a", &[Right], s, k));
    let lost = Raised("ModuleNotFoundError");
    dynamic.extend(task("b", &[lost, lost], s, k));
    dynamic.extend(task("c", &[Right], s, k));
    dynamic.extend(task("d", &[Raised("KeyError"), Right], s, k));
    dynamic.extend(task("e", &[Raised("ImportError"), Right], s, k));
    let mut f = task("f", &[Right], s, k);
    f[0].stop = None;
    dynamic.extend(f);
    // The journal interleaves arms; the summary must not care.
    let mut records = in_arm(dynamic, "dynamic");
    records.extend(fat);
    records.reverse();
    (cfg, records)
}

/// An allowed request for `name`, with itself as its closure.
pub fn allowed(name: &str) -> serde_json::Value {
    json!({
        "decision": "allowed",
        "request": {"requested": name, "source": {"kind": "missing_import"}},
        "distribution": name, "version": "1.0",
        "closure": [{"name": name, "version": "1.0", "sha256": format!("sha-{name}")}]
    })
}

/// A denied request; `denial` is the reason's fields, e.g.
/// `{"reason": "likely_typosquat", "of": "numpy"}`.
pub fn denied(name: &str, denial: serde_json::Value) -> serde_json::Value {
    let mut d = json!({
        "decision": "denied",
        "request": {"requested": name, "source": {"kind": "explicit_line", "line": 1}},
        "distribution": name, "message": "not available"
    });
    d.as_object_mut()
        .unwrap()
        .extend(denial.as_object().unwrap().clone());
    d
}

/// A wheel as installed: from the store or downloaded.
pub fn wheel(name: &str, store_hit: bool, bytes: u64) -> serde_json::Value {
    json!({"name": name, "version": "1.0", "sha256": format!("sha-{name}"),
           "store_hit": store_hit, "bytes": bytes})
}

/// One install step with these decisions and wheels.
pub fn step(
    decisions: Vec<serde_json::Value>,
    wheels: Vec<serde_json::Value>,
    ms: f64,
    error: Option<&str>,
) -> crate::record::InstallStep {
    let store_hit = !wheels.is_empty() && wheels.iter().all(|w| w["store_hit"] == true);
    serde_json::from_value(json!({
        "trigger": {"kind": "explicit_lines"},
        "decisions": decisions, "wheels": wheels, "store_hit": store_hit,
        "ms": ms, "installer_ms": if store_hit { 0.0 } else { ms / 2.0 },
        "error": error, "rerun": error.is_none()
    }))
    .unwrap()
}

/// What an exporter writes for `records` (no plots).
pub fn render(
    exporter: &dyn for<'a> super::Exporter<super::RunView<'a>>,
    config: &RunConfig,
    records: &[AttemptRecord],
) -> Result<String, super::RenderError> {
    let summary = super::summarize(config, records);
    exporter.render(&super::RunView {
        dir: std::path::Path::new(""),
        config,
        records,
        summary: &summary,
        plots: &[],
    })
}

/// A task expecting `value`, with default tolerances.
pub fn number(id: &str, value: f64) -> crate::task::Task {
    crate::task::Task {
        id: id.into(),
        question: "q".into(),
        files: Vec::new(),
        expected: crate::task::Expected::Number {
            value,
            abs_tol: None,
            rel_tol: None,
            allow_percent: false,
            exact: None,
        },
        reference: None,
        packages: Vec::new(),
        tags: Vec::new(),
        published: None,
    }
}
