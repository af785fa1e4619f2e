//! A run as Inspect eval logs (`retrace export inspect`, `retrace run
//! --inspect-log`): one log per arm, in Inspect's `.eval` format (a zip of
//! JSON entries) or its `.json` format, that Inspect's reader and viewer
//! open. Inspect calls its format versioned but not a frozen public spec:
//! what is written here is checked against the real `inspect-ai` named in
//! the test lock file (`tests/tools/inspect.lock`); docs/outputs.md maps
//! each field.
//!
//! - `header`: the eval spec, plan, results (the headline metrics) and
//!   stats of one arm;
//! - `sample`: one sample per task, its conversation, score, per-round
//!   records and events;
//! - `archive`: the `.eval` zip.
//!
//! Everything is read from the journal through [`Episode`]s and the run's
//! [`Summary`]: a resumed or re-scored run exports what its journal now says.

mod archive;
mod header;
mod message;
mod sample;

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::episode::{episodes, Episode};
use super::error::ReportError;
use super::export::{create_dir, write_file};
use super::Summary;
use crate::record::{AttemptRecord, RunConfig};
use crate::task::Task;

/// Inspect's log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// `.eval`: a zip of JSON entries, Inspect's default.
    #[default]
    Eval,
    /// `.json`: one JSON document (slower for the viewer on large logs).
    Json,
}

/// What the logs are made from: a run, its journal and summary, and the
/// suite's tasks for the targets (a task missing from them has an empty
/// target, named in its metadata).
pub struct InspectView<'a> {
    pub config: &'a RunConfig,
    pub records: &'a [AttemptRecord],
    pub tasks: &'a [Task],
    pub summary: &'a Summary,
}

/// One arm's log: the header (Inspect's `EvalLog` without samples), the
/// samples and their summaries.
struct ArmLog {
    file_stem: String,
    header: Value,
    samples: Vec<(String, Value)>,
    summaries: Vec<Value>,
}

/// Writes one log per arm into `dir` (created); returns the paths.
pub fn write_logs(
    view: &InspectView,
    dir: &Path,
    format: LogFormat,
) -> Result<Vec<PathBuf>, ReportError> {
    create_dir(dir)?;
    let mut paths = Vec::new();
    for log in arm_logs(view) {
        let (path, bytes) = match format {
            LogFormat::Eval => {
                let path = dir.join(format!("{}.eval", log.file_stem));
                let zip = archive::eval_zip(&log.header, &log.samples, &log.summaries);
                let bytes = zip.map_err(|source| ReportError::Write {
                    path: path.clone(),
                    source,
                })?;
                (path, bytes)
            }
            LogFormat::Json => (
                dir.join(format!("{}.json", log.file_stem)),
                json_log(&log.header, log.samples),
            ),
        };
        write_file(&path, &bytes)?;
        paths.push(path);
    }
    Ok(paths)
}

/// The `.json` log: the header's fields in Inspect's order (its reader
/// of headers streams the file and wants `version` first), then the
/// samples.
fn json_log(header: &Value, samples: Vec<(String, Value)>) -> Vec<u8> {
    const ORDER: [&str; 8] = [
        "version",
        "status",
        "eval",
        "plan",
        "results",
        "stats",
        "invalidated",
        "tags",
    ];
    let mut fields: Vec<(String, Value)> = ORDER
        .iter()
        .filter_map(|k| Some((k.to_string(), header.get(*k)?.clone())))
        .collect();
    if let Some(map) = header.as_object() {
        fields.extend(
            map.iter()
                .filter(|(k, _)| !ORDER.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
    }
    let samples = Value::Array(samples.into_iter().map(|(_, s)| s).collect());
    fields.push(("samples".into(), samples));
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), v))
        .collect();
    format!("{{{}}}\n", body.join(", ")).into_bytes()
}

/// Every arm's log, in run order.
fn arm_logs(view: &InspectView) -> Vec<ArmLog> {
    let all = episodes(view.config, view.records, view.tasks);
    let arms = view.config.spec.arms();
    let summaries = view.summary.each_arm();
    arms.iter()
        .zip(summaries)
        .map(|(arm, summary)| {
            let mine: Vec<&Episode> = all.iter().filter(|e| e.arm == arm.name).collect();
            let context = header::ArmContext::new(view.config, arm, summary, arms.len());
            let samples: Vec<(String, Value)> = mine
                .iter()
                .map(|e| (e.task_id.to_string(), sample::sample(&context, e)))
                .collect();
            let summaries = samples.iter().map(|(_, s)| sample::summary(s)).collect();
            ArmLog {
                file_stem: context.file_stem(),
                header: header::header(&context, &mine),
                samples,
                summaries,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use serde_json::Value;

    use super::*;
    use crate::model::{Message, Role};
    use crate::report::testing::{number, two_arms};

    fn entries(path: &Path) -> Vec<(String, Value)> {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
        (0..zip.len())
            .map(|i| {
                let mut f = zip.by_index(i).unwrap();
                let mut text = String::new();
                f.read_to_string(&mut text).unwrap();
                (
                    f.name().unwrap().to_string(),
                    serde_json::from_str(&text).unwrap(),
                )
            })
            .collect()
    }

    fn exported(format: LogFormat) -> (tempfile::TempDir, Vec<PathBuf>, Summary) {
        exported_with(format, &[])
    }

    /// `two_arms` with `unreached` tasks the run never started.
    fn exported_with(
        format: LogFormat,
        unreached: &[&str],
    ) -> (tempfile::TempDir, Vec<PathBuf>, Summary) {
        let (mut cfg, mut records) = two_arms();
        for id in unreached {
            cfg.provenance.task_ids.push(id.to_string());
        }
        // Task d of the baseline: the conversation as the model saw it.
        for r in records
            .iter_mut()
            .filter(|r| r.task_id == "d" && r.arm_name() == "fat")
        {
            r.prompt = match r.round {
                0 => vec![
                    Message::text(Role::System, "sys"),
                    Message::text(Role::User, "task d"),
                ],
                _ => vec![Message::text(Role::User, "KeyError: fix it")],
            };
            r.reply = Some(format!("reply {}", r.round));
        }
        let summary = crate::report::summarize(&cfg, &records);
        let tasks = [number("d", 1.0)];
        let dir = tempfile::tempdir().unwrap();
        let view = InspectView {
            config: &cfg,
            records: &records,
            tasks: &tasks,
            summary: &summary,
        };
        let paths = write_logs(&view, dir.path(), format).unwrap();
        (dir, paths, summary)
    }

    #[test]
    fn one_eval_log_per_arm_laid_out_as_inspect_writes_it() {
        let (_dir, paths, summary) = exported(LogFormat::Eval);
        assert_eq!(paths.len(), 2);
        assert!(
            paths[0].to_string_lossy().ends_with("_s_fat.eval"),
            "{paths:?}"
        );
        let fat = entries(&paths[0]);
        let names: Vec<&str> = fat.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.first(), Some(&"_journal/start.json"));
        assert_eq!(&names[names.len() - 2..], ["summaries.json", "header.json"]);
        assert_eq!(
            names.iter().filter(|n| n.starts_with("samples/")).count(),
            6
        );
        let header = &fat.last().unwrap().1;
        assert_eq!(header["version"], 2);
        assert_eq!(header["status"], "success");
        assert_eq!(header["eval"]["task"], "s");
        assert_eq!(header["eval"]["dataset"]["samples"], 6);

        let metrics = &header["results"]["scores"][0]["metrics"];
        let fat_summary = summary.each_arm()[0];
        for (r, acc) in fat_summary.answers.accuracy_by_round.iter().enumerate() {
            assert_eq!(metrics[format!("Acc@{r}")]["value"], acc.value);
        }
        assert_eq!(
            metrics["accuracy"]["value"],
            fat_summary.answers.accuracy_by_round[1].value
        );
        // The dynamic arm's task f was interrupted: a cancelled eval.
        let dynamic = entries(&paths[1]);
        assert_eq!(dynamic.last().unwrap().1["status"], "cancelled");
    }

    #[test]
    fn a_sample_is_the_conversation_score_and_rounds_of_its_task() {
        let (_dir, paths, _) = exported(LogFormat::Eval);
        let fat = entries(&paths[0]);
        let d = &fat
            .iter()
            .find(|(n, _)| n == "samples/d_epoch_1.json")
            .unwrap()
            .1;
        let roles: Vec<&str> = d["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
        assert_eq!(d["messages"][3]["content"], "KeyError: fix it");
        assert_eq!(d["input"].as_array().unwrap().len(), 1);
        assert_eq!(d["input"][0]["content"], "task d");
        assert_eq!(d["target"], "1");
        assert_eq!(d["scores"]["retrace_check"]["value"], "C");
        assert_eq!(
            d["scores"]["retrace_check"]["metadata"]["first_correct_round"],
            1
        );
        let rounds = d["metadata"]["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 2);
        assert_eq!(rounds[0]["exception"], "KeyError");
        let usage = d["model_usage"].as_object().unwrap();
        assert_eq!(usage.len(), 1, "{usage:?}");
        let usage = usage.values().next().unwrap();
        assert_eq!(usage["input_tokens"], 200);
        assert_eq!(usage["total_tokens"], 240);
        // Two model calls, one execution each, a record each, the score.
        let kinds: Vec<&str> = d["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["model", "sandbox", "info", "model", "sandbox", "info", "score"]
        );
        // The second call was given the whole conversation before its reply.
        assert_eq!(d["events"][3]["input"].as_array().unwrap().len(), 4);
        // A task the suite no longer has: no target, and the sample says so.
        let a = &fat
            .iter()
            .find(|(n, _)| n == "samples/a_epoch_1.json")
            .unwrap()
            .1;
        assert_eq!(a["target"], "");
        assert!(a["metadata"]["target_unknown"].is_string());
    }

    #[test]
    fn a_task_the_run_never_reached_is_an_unscored_sample_of_a_cancelled_eval() {
        let (_dir, paths, _) = exported_with(LogFormat::Eval, &["never"]);
        let fat = entries(&paths[0]);
        let header = &fat.last().unwrap().1;
        assert_eq!(header["status"], "cancelled");
        assert_eq!(header["eval"]["dataset"]["samples"], 7);
        assert_eq!(header["results"]["completed_samples"], 6);
        let never = &fat
            .iter()
            .find(|(n, _)| n == "samples/never_epoch_1.json")
            .unwrap()
            .1;
        assert_eq!(never["input"], "");
        assert_eq!(never["messages"], serde_json::json!([]));
        assert_eq!(never["scores"]["retrace_check"]["value"], "I");
        let why = never["scores"]["retrace_check"]["explanation"]
            .as_str()
            .unwrap();
        assert!(why.starts_with("not run"), "{why}");
    }

    #[test]
    fn exports_are_deterministic_and_json_logs_start_with_their_version() {
        let (_d1, first, _) = exported(LogFormat::Eval);
        let (_d2, second, _) = exported(LogFormat::Eval);
        assert_eq!(
            std::fs::read(&first[0]).unwrap(),
            std::fs::read(&second[0]).unwrap()
        );
        let (_d3, json, _) = exported(LogFormat::Json);
        let text = std::fs::read_to_string(&json[0]).unwrap();
        assert!(
            text.starts_with("{\"version\": 2, \"status\""),
            "{}",
            &text[..40]
        );
        let whole: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(whole["samples"].as_array().unwrap().len(), 6);
    }
}
