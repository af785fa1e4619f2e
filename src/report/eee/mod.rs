//! A run as Every Eval Ever records (schema 0.3.0, `retrace export eee`):
//! per model of the run, one aggregate record (one `evaluation_results`
//! entry per headline metric per arm) and its instance-level sidecar (one
//! `multi_turn` record per task and arm, one `answer_attribution` per
//! round), laid out as EEE's datastore lays them out:
//! `data/<suite>/<developer>/<model>/<uuid>.json` and `<uuid>_samples.jsonl`.
//!
//! Records are deterministic: the ids and the file uuid derive from the
//! run, and the timestamps are the run's, so exporting a run again gives
//! the same bytes (EEE refuses a second record of one evaluation).
//! docs/outputs.md maps each field.

mod aggregate;
mod instance;

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::episode::episodes;
use super::error::ReportError;
use super::export::{create_dir, write_file};
use super::model_identity::ModelIdentity;
use super::Summary;
use crate::record::{ArmSpec, AttemptRecord, RunConfig};
use crate::task::Task;

/// The schema version the records follow.
pub const SCHEMA_VERSION: &str = "0.3.0";

/// Who publishes the records: EEE's `source_metadata` asks for the
/// organisation and its relationship to the model, which only the user knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub organization: String,
    /// `first_party`, `third_party`, `collaborative` or `other`.
    pub relationship: String,
}

/// What the records are made from.
pub struct EeeView<'a> {
    pub config: &'a RunConfig,
    pub records: &'a [AttemptRecord],
    pub tasks: &'a [Task],
    pub summary: &'a Summary,
    pub source: &'a Source,
}

/// The arms of one model, with what both record kinds need of them.
pub(super) struct ModelGroup<'a> {
    pub identity: ModelIdentity,
    pub arms: Vec<(&'a ArmSpec, &'a super::metrics::ArmSummary)>,
    pub evaluation_id: String,
    pub file_uuid: String,
}

impl ModelGroup<'_> {
    /// `data/<suite>/<developer>/<model>`: where EEE's datastore keeps the
    /// model's records of the suite.
    pub fn dir(&self, suite: &str) -> String {
        let (developer, name) = self.identity.developer_and_name();
        format!(
            "data/{}/{}/{}",
            path_part(suite),
            path_part(&developer),
            path_part(&name)
        )
    }
}

/// Writes every model's aggregate record and instance sidecar under
/// `dir`; returns the paths.
pub fn write_records(view: &EeeView, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let arms = view.config.spec.arms();
    let summaries = view.summary.each_arm();
    let all = episodes(view.config, view.records, view.tasks);
    let suite = view.config.spec.tasks.suite_name();
    let mut paths = Vec::new();
    for group in groups(view.config, &arms, &summaries) {
        let rel = group.dir(&suite);
        let folder = dir.join(&rel);
        create_dir(&folder)?;
        let lines: Vec<String> = all
            .iter()
            .filter(|e| group.arms.iter().any(|(a, _)| a.name == e.arm))
            .map(|e| instance::record(view, &group, e).to_string())
            .collect();
        let mut samples = lines.join("\n");
        if !samples.is_empty() {
            samples.push('\n');
        }
        let samples_name = format!("{}_samples.jsonl", group.file_uuid);
        let detailed = aggregate::Detailed {
            file_path: format!("{rel}/{samples_name}"),
            checksum: hex::encode(Sha256::digest(samples.as_bytes())),
            rows: lines.len(),
        };
        let record = aggregate::record(view, &group, &detailed);
        for (name, bytes) in [
            (samples_name, samples.into_bytes()),
            (
                format!("{}.json", group.file_uuid),
                pretty(&record).into_bytes(),
            ),
        ] {
            let path = folder.join(name);
            write_file(&path, &bytes)?;
            paths.push(path);
        }
    }
    Ok(paths)
}

/// The run's arms grouped by model, in run order.
fn groups<'a>(
    config: &RunConfig,
    arms: &'a [ArmSpec],
    summaries: &[&'a super::metrics::ArmSummary],
) -> Vec<ModelGroup<'a>> {
    let mut out: Vec<ModelGroup> = Vec::new();
    for (arm, summary) in arms.iter().zip(summaries.iter().copied()) {
        let identity = ModelIdentity::of(&arm.spec.model.spec);
        match out.iter_mut().find(|g| g.identity == identity) {
            Some(g) => g.arms.push((arm, summary)),
            None => {
                let evaluation_id = format!(
                    "{}/{}/{}",
                    config.spec.tasks.suite_name(),
                    identity.hub_id(),
                    epoch_seconds(&config.provenance.created)
                );
                out.push(ModelGroup {
                    file_uuid: uuid_v4_of(&format!(
                        "{}\0{}",
                        config.provenance.run_id, evaluation_id
                    )),
                    evaluation_id,
                    identity,
                    arms: vec![(arm, summary)],
                });
            }
        }
    }
    out
}

/// An RFC 3339 time as Unix epoch seconds (EEE's timestamps); the text
/// as recorded when it does not parse.
pub(super) fn epoch_seconds(text: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(t) => {
            let ms = t.timestamp_millis();
            format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
        }
        Err(_) => text.to_string(),
    }
}

/// A UUID of version 4's form, derived from `seed` (EEE's datastore
/// accepts only canonical v4 file names; deriving it keeps exports
/// idempotent).
fn uuid_v4_of(seed: &str) -> String {
    let d = Sha256::digest(seed.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    uuid::Builder::from_random_bytes(b).into_uuid().to_string()
}

/// One component of a datastore path: the name itself when it is a
/// plain file name, else its coded form (no separators, nothing hidden).
fn path_part(text: &str) -> String {
    crate::util::file_name::file_name(text)
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("a JSON value always serialises") + "\n"
}

/// A map of strings (EEE's `additional_details` and instance `metadata`
/// accept strings only): text as is, anything else as compact JSON;
/// nulls left out.
pub(super) fn strings(pairs: Vec<(&str, Value)>) -> Value {
    let map = pairs
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            (k.to_string(), Value::String(text))
        })
        .collect();
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::report::testing::two_arms;

    fn exported() -> (tempfile::TempDir, Vec<PathBuf>, Summary) {
        let (cfg, records) = two_arms();
        exported_from(&cfg, &records)
    }

    fn exported_from(
        cfg: &RunConfig,
        records: &[AttemptRecord],
    ) -> (tempfile::TempDir, Vec<PathBuf>, Summary) {
        let summary = crate::report::summarize(cfg, records);
        let dir = tempfile::tempdir().unwrap();
        let source = Source {
            organization: "lab".into(),
            relationship: "third_party".into(),
        };
        let view = EeeView {
            config: cfg,
            records,
            tasks: &[],
            summary: &summary,
            source: &source,
        };
        let paths = write_records(&view, dir.path()).unwrap();
        (dir, paths, summary)
    }

    #[test]
    fn one_aggregate_and_one_sidecar_per_model_with_every_arms_headline() {
        let (dir, paths, summary) = exported();
        assert_eq!(paths.len(), 2, "one model: one sidecar, one aggregate");
        let sidecar = std::fs::read_to_string(&paths[0]).unwrap();
        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(&paths[1]).unwrap()).unwrap();
        let detailed = &record["detailed_evaluation_results"];
        // The datastore path, relative to the output folder, and a checksum
        // of the sidecar's exact bytes.
        let rel = detailed["file_path"].as_str().unwrap();
        assert_eq!(dir.path().join(rel), paths[0]);
        assert!(rel.starts_with("data/s/"), "{rel}");
        assert_eq!(
            detailed["checksum"],
            hex::encode(Sha256::digest(sidecar.as_bytes()))
        );
        assert_eq!(detailed["total_rows"], 12);
        let results = record["evaluation_results"].as_array().unwrap();
        for (arm, s) in ["fat", "dynamic"].iter().zip(summary.each_arm()) {
            for (r, acc) in s.answers.accuracy_by_round.iter().enumerate() {
                let id = format!("{arm}/acc@{r}");
                let found = results
                    .iter()
                    .find(|x| x["evaluation_result_id"] == id.as_str())
                    .unwrap_or_else(|| panic!("no {id}"));
                assert_eq!(found["score_details"]["score"], acc.value);
                let ci = &found["score_details"]["uncertainty"]["confidence_interval"];
                assert_eq!(ci["lower"], acc.ci_low);
            }
        }
        assert!(record["source_metadata"]["additional_details"]
            .get("undefined_metrics")
            .is_none());
    }

    #[test]
    fn a_rate_without_a_denominator_is_named_not_dropped() {
        use crate::report::testing::{config, task, R};
        let s = crate::record::StopOn::Clean;
        let cfg = config(&["a"], 1, s);
        let (_dir, paths, _) = exported_from(&cfg, &task("a", &[R::Right], s, 1));
        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(&paths[1]).unwrap()).unwrap();
        let undefined = &record["source_metadata"]["additional_details"]["undefined_metrics"];
        // Right at round 0: nothing to recover (regression is 0 of 1).
        assert_eq!(undefined, "fat: recovery_rate");
    }

    #[test]
    fn an_instance_is_one_task_of_one_arm_round_by_round() {
        let (_dir, paths, _) = exported();
        let sidecar = std::fs::read_to_string(&paths[0]).unwrap();
        let lines: Vec<Value> = sidecar
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let e = lines
            .iter()
            .find(|l| l["sample_id"] == "e" && l["metadata"]["arm"] == "dynamic")
            .unwrap();
        assert_eq!(e["interaction_type"], "multi_turn");
        assert_eq!(e["evaluation_result_id"], "dynamic/acc@1");
        assert_eq!(e["evaluation"]["is_correct"], true);
        assert_eq!(e["evaluation"]["num_turns"], 2);
        let attribution = e["answer_attribution"].as_array().unwrap();
        let terminal: Vec<bool> = attribution
            .iter()
            .map(|a| a["is_terminal"].as_bool().unwrap())
            .collect();
        assert_eq!(terminal, [false, true]);
        assert_eq!(attribution[1]["turn_idx"], 1);
        assert_eq!(attribution[1]["extraction_method"], "retrace:number");
        assert_eq!(e["metadata"]["verdicts"], "error:ImportError,ok");
        assert_eq!(e["token_usage"]["total_tokens"], 240);
        // Metadata holds strings only (the schema's rule).
        assert!(lines.iter().all(|l| l["metadata"]
            .as_object()
            .unwrap()
            .values()
            .all(Value::is_string)));
    }

    #[test]
    fn exports_are_deterministic_with_a_version_4_file_uuid() {
        let (_d1, first, _) = exported();
        let (_d2, second, _) = exported();
        assert_eq!(first[1].file_name(), second[1].file_name());
        assert_eq!(
            std::fs::read(&first[1]).unwrap(),
            std::fs::read(&second[1]).unwrap()
        );
        let name = first[1].file_stem().unwrap().to_string_lossy().to_string();
        let uuid = uuid::Uuid::parse_str(&name).unwrap();
        assert_eq!(uuid.get_version_num(), 4);
    }
}
