//! `results.jsonl`: append-only, one record per round, flushed per line so a
//! crash or `kill -9` loses at most the round in flight. On resume, records
//! of unfinished tasks, and of tasks that ended on an infrastructure error
//! (an endpoint or a gateway that was down), are dropped: those tasks are
//! redone from round 0, so nothing is duplicated.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::error::HarnessError;
use crate::record::{AttemptRecord, RecordKind};
use crate::util::fault::{self, Point};
use crate::util::redact;
use crate::util::IoContext;

pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
}

impl Journal {
    /// Opens the journal for appending (creating it).
    pub fn open(path: &Path) -> Result<Self, HarnessError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .at("opening", path)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one record as one line and flushes it.
    pub fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        let mut line = encode(record)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap();
        if fault::is_armed(Point::MidJournalLine) {
            let half = line.len() / 2;
            file.write_all(&line[..half])
                .and_then(|_| file.flush())
                .at("writing", &self.path)?;
            fault::reached(Point::MidJournalLine);
            line.drain(..half);
        }
        // One write call per line, under the lock: a line is never
        // interleaved with another.
        Ok(file
            .write_all(&line)
            .and_then(|_| file.flush())
            .at("writing", &self.path)?)
    }
}

/// One record as a line of JSON, with the configured secrets redacted
/// (every line written, appended or rewritten, is made here).
fn encode(record: &AttemptRecord) -> Result<Vec<u8>, HarnessError> {
    let line = serde_json::to_string(record).map_err(|source| HarnessError::Encode {
        what: "a record",
        source,
    })?;
    Ok(redact::json(line).into_bytes())
}

/// Reads every record. A torn last line (the process died mid-write: no
/// newline after it, and not a whole record) is dropped with a warning; a
/// bad line anywhere else is an error naming its line. Lines are read as
/// bytes: a tear can split a multi-byte character.
pub fn read(path: &Path) -> Result<Vec<AttemptRecord>, HarnessError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(crate::util::IoError::new(format!("reading {}", path.display()), e).into())
        }
    };
    let mut records = Vec::new();
    let mut lines = bytes.split(|b| *b == b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        // `split` gives one piece after the last newline: the unterminated
        // tail, empty when the file ends with a newline.
        let unterminated = lines.peek().is_none();
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(r) => records.push(r),
            Err(_) if unterminated => {
                tracing::warn!(
                    journal = %path.display(),
                    line = i + 1,
                    bytes = line.len(),
                    "dropping a torn last line (the run was stopped while writing it)"
                );
            }
            Err(source) => {
                return Err(HarnessError::JournalLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                })
            }
        }
    }
    Ok(records)
}

/// A task in one arm of a run: what resume counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArmTask {
    pub arm: String,
    pub task_id: String,
}

impl ArmTask {
    pub fn of(record: &AttemptRecord) -> Self {
        Self {
            arm: record.arm_name().to_string(),
            task_id: record.task_id.clone(),
        }
    }
}

/// Keeps only the records of finished tasks, rewriting the journal
/// atomically; returns the ids of the finished tasks. A task that ended on
/// an infrastructure error is not finished: the model never had its chance.
pub fn compact_for_resume(path: &Path) -> Result<HashSet<ArmTask>, HarnessError> {
    Ok(compact(path)?.0)
}

/// [`compact_for_resume`], also giving back the records kept (a resumed
/// run's shared round 0s are among them), so the journal is read once.
pub(super) fn compact(path: &Path) -> Result<(HashSet<ArmTask>, Vec<AttemptRecord>), HarnessError> {
    let records = read(path)?;
    let finished: HashSet<ArmTask> = records
        .iter()
        .filter(|r| r.is_final() && r.kind != RecordKind::InfraError)
        .map(ArmTask::of)
        .collect();
    let kept: Vec<AttemptRecord> = records
        .into_iter()
        .filter(|r| finished.contains(&ArmTask::of(r)))
        .collect();
    rewrite(path, &kept)?;
    Ok((finished, kept))
}

/// Replaces the journal with `records`, atomically (a temporary file
/// renamed over it), so a crash leaves either journal whole.
pub fn rewrite(path: &Path, records: &[AttemptRecord]) -> Result<(), HarnessError> {
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = File::create(&tmp).at("writing", &tmp)?;
    for r in records {
        let mut line = encode(r)?;
        line.push(b'\n');
        out.write_all(&line).at("writing", &tmp)?;
    }
    out.sync_all().at("writing", &tmp)?;
    Ok(fs::rename(&tmp, path).at("replacing", path)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::StopReason;

    fn record(task: &str, round: u32, last: bool) -> AttemptRecord {
        serde_json::from_value(serde_json::json!({
            "schema_version": crate::record::SCHEMA_VERSION, "run_id": "t", "task_id": task,
            "round": round, "model": "m", "synthetic_model": true, "strategy": "fat",
            "stop_on": "clean", "feedback": "parsed", "kind": "attempt", "prompt": [],
            "reply": null, "extraction": null, "code": null, "outcome": null, "check": null,
            "correct": false, "answered": false,
            "stop": if last { Some(StopReason::RoundsExhausted) } else { None },
            "infra_error": null, "timings_ms": {"model": 0.0, "exec": 0.0, "total": 0.0},
            "tokens": {"prompt_tokens": 0, "completion_tokens": 0}
        }))
        .unwrap()
    }

    fn write(path: &Path, records: &[AttemptRecord], tail: &str) {
        let j = Journal::open(path).unwrap();
        for r in records {
            j.append(r).unwrap();
        }
        let mut f = OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(tail.as_bytes()).unwrap();
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_a_bad_middle_line_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        write(
            &path,
            &[record("a", 0, true)],
            "{\"schema_version\": 2, \"run_",
        );
        assert_eq!(read(&path).unwrap().len(), 1);

        let bad = dir.path().join("bad.jsonl");
        write(&bad, &[record("a", 0, true)], "not json\n");
        Journal::open(&bad)
            .unwrap()
            .append(&record("b", 0, true))
            .unwrap();
        let err = read(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.jsonl:2"), "{err}");
        assert!(read(&dir.path().join("missing.jsonl")).unwrap().is_empty());
    }

    #[test]
    fn a_tear_inside_a_character_is_still_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut whole = encode(&record("é→", 0, true)).unwrap();
        // Cut inside the three bytes of `→`.
        let cut = whole.windows(3).position(|w| w == "→".as_bytes()).unwrap() + 1;
        whole.truncate(cut);
        write(&path, &[record("a", 0, true)], "");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&whole)
            .unwrap();
        let ids: Vec<String> = read(&path)
            .unwrap()
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        assert_eq!(ids, ["a"]);
        // Compaction drops the tear, so the next record starts a line.
        compact_for_resume(&path).unwrap();
        Journal::open(&path)
            .unwrap()
            .append(&record("b", 0, true))
            .unwrap();
        assert_eq!(read(&path).unwrap().len(), 2);
    }

    #[test]
    fn a_whole_bad_last_line_is_an_error_not_a_tear() {
        // It ends with a newline: the write completed, so it is damage,
        // not a crash mid-write, and is never dropped quietly.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        write(&path, &[record("a", 0, true)], "{\"torn\n");
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("results.jsonl:2"), "{err}");
    }

    #[test]
    fn compaction_keeps_finished_tasks_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let records = [
            record("a", 0, false),
            record("b", 0, false),
            record("a", 1, true),
            record("c", 0, true),
            record("b", 1, false),
        ];
        write(&path, &records, "{\"torn");
        let finished = compact_for_resume(&path).unwrap();
        let mut ids: Vec<&str> = finished.iter().map(|t| t.task_id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["a", "c"]);
        let kept: Vec<(String, u32)> = read(&path)
            .unwrap()
            .into_iter()
            .map(|r| (r.task_id, r.round))
            .collect();
        assert_eq!(kept, [("a".into(), 0), ("a".into(), 1), ("c".into(), 0)]);
        // The same task in another arm is another unit of work.
        let mut other = record("a", 0, false);
        other.strategy = "dynamic".into();
        Journal::open(&path).unwrap().append(&other).unwrap();
        let finished_now = compact_for_resume(&path).unwrap();
        assert!(!finished_now.contains(&ArmTask::of(&other)));
        assert_eq!(finished_now, finished);
        // Compacting again changes nothing.
        assert_eq!(compact_for_resume(&path).unwrap(), finished);
        assert_eq!(read(&path).unwrap().len(), 3);
    }

    #[test]
    fn tasks_lost_to_the_infrastructure_are_redone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut lost = record("b", 0, true);
        lost.kind = RecordKind::InfraError;
        write(&path, &[record("a", 0, true), lost], "");
        let finished = compact_for_resume(&path).unwrap();
        let ids: Vec<&str> = finished.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids, ["a"]);
        assert_eq!(read(&path).unwrap().len(), 1);
    }
}

#[cfg(test)]
#[path = "journal_props.rs"]
mod props;
