//! `results.jsonl`: append-only, one record per round, flushed per line so a
//! crash or `kill -9` loses at most the round in flight. On resume, records
//! of unfinished tasks are dropped (the tasks are redone from round 0), so
//! nothing is duplicated.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::record::AttemptRecord;
use super::HarnessError;

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
            .map_err(|e| HarnessError::io(format!("opening {}", path.display()), e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// Appends one record as one line and flushes it.
    pub fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| HarnessError::Journal(format!("encoding a record: {e}")))?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap();
        // One write call per line: a line is never interleaved with another.
        file.write_all(&line)
            .and_then(|_| file.flush())
            .map_err(|e| HarnessError::io(format!("writing {}", self.path.display()), e))
    }
}

/// Reads every record. A torn last line (the process died mid-write) is
/// ignored; a bad line elsewhere is an error naming its line.
pub fn read(path: &Path) -> Result<Vec<AttemptRecord>, HarnessError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(HarnessError::io(format!("reading {}", path.display()), e)),
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|e| HarnessError::io(format!("reading {}", path.display()), e))?;
    let mut records = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(r) => records.push(r),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(HarnessError::Journal(format!(
                    "{}:{}: not a record: {e}",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(records)
}

/// Keeps only the records of finished tasks, rewriting the journal
/// atomically; returns the ids of the finished tasks.
pub fn compact_for_resume(path: &Path) -> Result<HashSet<String>, HarnessError> {
    let records = read(path)?;
    let finished: HashSet<String> = records
        .iter()
        .filter(|r| r.is_final())
        .map(|r| r.task_id.clone())
        .collect();
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = File::create(&tmp)
        .map_err(|e| HarnessError::io(format!("writing {}", tmp.display()), e))?;
    for r in records.iter().filter(|r| finished.contains(&r.task_id)) {
        let mut line = serde_json::to_vec(r)
            .map_err(|e| HarnessError::Journal(format!("encoding a record: {e}")))?;
        line.push(b'\n');
        out.write_all(&line)
            .map_err(|e| HarnessError::io(format!("writing {}", tmp.display()), e))?;
    }
    out.sync_all()
        .map_err(|e| HarnessError::io(format!("writing {}", tmp.display()), e))?;
    fs::rename(&tmp, path)
        .map_err(|e| HarnessError::io(format!("replacing {}", path.display()), e))?;
    Ok(finished)
}
