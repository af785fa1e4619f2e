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
use super::metrics::Summary;
use crate::record::{AttemptRecord, RunConfig};
use crate::task::Task;
use crate::util::atomic_write::write_atomically;
use crate::util::fault::Point;

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
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths = Vec::new();
    for log in arm_logs(view) {
        let (path, bytes) = match format {
            LogFormat::Eval => (
                dir.join(format!("{}.eval", log.file_stem)),
                archive::eval_zip(&log.header, &log.samples, &log.summaries).map_err(|source| {
                    ReportError::Write {
                        path: dir.join(format!("{}.eval", log.file_stem)),
                        source,
                    }
                })?,
            ),
            LogFormat::Json => (
                dir.join(format!("{}.json", log.file_stem)),
                json_log(&log.header, log.samples),
            ),
        };
        write_atomically(&path, &bytes, Point::DuringSummary).map_err(|source| {
            ReportError::Write {
                path: path.clone(),
                source,
            }
        })?;
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
