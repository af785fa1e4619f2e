//! The JSON Schemas in docs/schemas/ hold for what retrace writes: the
//! golden journal's run.json and records as this retrace writes them back,
//! and the summary.json and compare.json its exporters render from them,
//! each checked with a draft 2020-12 validator. The schemas close every
//! object, so a field serialized outside the types (or a representation the
//! schema gets wrong) fails here. `golden_run.rs` checks a real run's files
//! the same way.

use std::path::Path;

use super::golden_reports::{fat_against_slim, fixture, load};
use retrace::report::compare::{self, CompareView};
use retrace::report::{exporters, summarize, RunView};
use serde_json::Value;

/// A schema of docs/schemas/: `run`, `record`, `summary` or `compare`.
pub(crate) fn validator(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(format!("{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft202012::new(&schema)
        .unwrap_or_else(|e| panic!("{}: not a valid schema: {e}", path.display()))
}

/// Panics with every error when `text` (a file's JSON, `what` naming it)
/// does not validate against schema `name`.
pub(crate) fn assert_valid(name: &str, what: &str, text: &str) {
    let value: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    let validator = validator(name);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("  {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match docs/schemas/{name}.schema.json:\n{}",
        errors.join("\n")
    );
}

#[test]
fn run_json_matches_its_schema() {
    let (config, _) = load();
    assert_valid(
        "run",
        "run.json",
        &serde_json::to_string_pretty(&config).unwrap(),
    );
}

/// The parts of a spec the golden run leaves out: a gateway executor, the
/// kernels' variables (a secret one written redacted) and arm axes.
#[test]
fn a_gateway_run_json_with_variables_and_arms_matches_its_schema() {
    use retrace::kernel::KernelEnv;
    use retrace::record::{AfterFailure, ExecutorSpec, GatewaySpec};
    let (mut config, _) = load();
    config.spec.execution.executor = ExecutorSpec::Gateway(GatewaySpec {
        url: "http://127.0.0.1:8888/base".into(),
        kernel: Some("python3".into()),
        concurrency: 3,
        request_timeout: std::time::Duration::from_millis(2500),
    });
    config.spec.env = KernelEnv::from_pairs([
        ("RT_COLOR".to_string(), "blue".to_string()),
        ("RT_API_TOKEN".to_string(), "s3cret-value".to_string()),
    ])
    .unwrap();
    config.spec.arms.temperature = vec![0.0, 0.7];
    config.spec.arms.after_failure = vec![AfterFailure::Repair, AfterFailure::Resample];
    config.spec.arms.product = true;
    let text = serde_json::to_string_pretty(&config).unwrap();
    assert!(!text.contains("s3cret-value"), "{text}");
    assert_valid("run", "run.json of a gateway run", &text);
}

#[test]
fn records_match_their_schema() {
    let (_, records) = load();
    assert!(!records.is_empty());
    for r in &records {
        let what = format!("record {} round {} ({})", r.task_id, r.round, r.arm);
        assert_valid("record", &what, &serde_json::to_string(r).unwrap());
    }
}

#[test]
fn summary_json_matches_its_schema() {
    let (config, records) = load();
    let summary = summarize(&config, &records);
    assert!(
        !summary.comparisons.is_empty(),
        "two arms: the comparison too"
    );
    let dir = fixture();
    let view = RunView {
        dir: &dir,
        config: &config,
        records: &records,
        summary: &summary,
        plots: &[],
    };
    let json = exporters()
        .into_iter()
        .find(|e| e.file_name() == "summary.json")
        .expect("a summary.json exporter");
    assert_valid("summary", "summary.json", &json.render(&view).unwrap());
    // The golden file too: what the previous blessing wrote.
    let file = std::fs::read_to_string(fixture().join("expected/summary.json")).unwrap();
    assert_valid("summary", "expected/summary.json", &file);
}

#[test]
fn compare_json_matches_its_schema() {
    let judged = fat_against_slim();
    let dir = fixture();
    let view = CompareView {
        dir: &dir,
        judged: &judged,
        plots: &[],
    };
    let json = compare::exporters()
        .into_iter()
        .find(|e| e.file_name() == "compare.json")
        .expect("a compare.json exporter");
    assert_valid("compare", "compare.json", &json.render(&view).unwrap());
}

/// A `dynamic` round's install steps: an allowed and a denied decision (a
/// flattened reason inside an internally tagged enum), wheels, findings and
/// the failed execution, as the record writes them.
#[test]
fn records_with_install_steps_match_their_schema() {
    use retrace::pyenv::dynamic::{Decision, Denial, Finding, Pin, Request, RequestSource};
    use retrace::record::{InstallStep, InstallTrigger, WheelRecord};
    let (_, records) = load();
    let mut record = records
        .iter()
        .find(|r| r.outcome.is_some())
        .expect("a record with an outcome")
        .clone();
    let request = |name: &str, source| Request {
        requested: name.into(),
        source,
    };
    let pin = Pin {
        name: "tabulate".into(),
        version: "0.9.0".into(),
        sha256: "0".repeat(64),
    };
    record.installs = vec![
        InstallStep {
            trigger: InstallTrigger::ExplicitLines,
            decisions: vec![
                Decision::Allowed {
                    request: request("tabulate", RequestSource::ExplicitLine { line: 1 }),
                    distribution: "tabulate".into(),
                    version: "0.9.0".into(),
                    closure: vec![pin],
                },
                Decision::Denied {
                    request: request("numpyy", RequestSource::ExplicitLine { line: 2 }),
                    distribution: None,
                    denial: Denial::LikelyTyposquat { of: "numpy".into() },
                    message: "not installed".into(),
                },
            ],
            wheels: vec![WheelRecord {
                name: "tabulate".into(),
                version: "0.9.0".into(),
                sha256: "0".repeat(64),
                store_hit: false,
                bytes: 1234,
            }],
            store_hit: false,
            ms: 12.5,
            installer_ms: 10.0,
            error: None,
            refused: Some("runs code at start-up".into()),
            findings: vec![Finding::StartupHook {
                file: "sitecustomize.py".into(),
            }],
            rerun: false,
            failed_outcome: None,
        },
        InstallStep {
            trigger: InstallTrigger::MissingImport {
                module: "sklearn".into(),
            },
            decisions: vec![Decision::Denied {
                request: request("sklearn", RequestSource::MissingImport),
                distribution: Some("scikit-learn".into()),
                denial: Denial::VersionNotAllowed {
                    wanted: "1.0".into(),
                    pinned: "1.5.2".into(),
                },
                message: "pinned".into(),
            }],
            wheels: vec![],
            store_hit: true,
            ms: 0.0,
            installer_ms: 0.0,
            error: Some("no index".into()),
            refused: None,
            findings: vec![],
            rerun: true,
            failed_outcome: record.outcome.clone().map(Box::new),
        },
    ];
    assert_valid(
        "record",
        "a record with install steps",
        &serde_json::to_string(&record).unwrap(),
    );
}

/// The validator is real: a record with a field its type does not have, or
/// a field of the wrong type, fails.
#[test]
fn the_schemas_refuse_what_retrace_does_not_write() {
    let (config, records) = load();
    let records_schema = validator("record");
    let mut record = serde_json::to_value(&records[0]).unwrap();
    assert!(records_schema.is_valid(&record));
    record["undocumented"] = Value::from(1);
    assert!(!records_schema.is_valid(&record), "an unknown field");
    let mut record = serde_json::to_value(&records[0]).unwrap();
    record["round"] = Value::from("0");
    assert!(!records_schema.is_valid(&record), "a round as text");
    let mut run = serde_json::to_value(&config).unwrap();
    run["spec"]["execution"]["limits"]["timeout"] = Value::from("10s");
    assert!(
        !validator("run").is_valid(&run),
        "a duration is seconds, a number"
    );
}
