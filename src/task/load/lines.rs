//! A suite file's lines (a dataset's or a labels JSONL): the file opened
//! as untrusted input ([`open_suite_file`]: only a regular file of at most
//! [`MAX_SUITE_FILE_BYTES`]; a link to a device or a FIFO is refused without
//! blocking), read one line at a time and each line decoded on its own, so
//! an invalid UTF-8 byte makes that line an error naming the file and the
//! line while the lines around it load.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::task::TaskError;
use crate::util::input_file::{open_suite_file, InputFile, InputFileError};

#[cfg(doc)]
use crate::util::input_file::MAX_SUITE_FILE_BYTES;

/// The lines of a suite file that hold JSON, with their 1-based numbers:
/// blank lines and `//` or `#` comments are skipped, a BOM dropped. A line
/// that is not UTF-8 is a [`TaskError::Parse`] of that line; a read that
/// fails ends the lines with a [`TaskError::File`].
pub(super) struct JsonLines {
    reader: BufReader<InputFile>,
    file: PathBuf,
    number: usize,
    failed: bool,
}

/// One record of a suite file: its 1-based number (line or row) and its
/// JSON object's text, or the error of that record.
pub(super) type Numbered = Result<(usize, String), TaskError>;

/// Opens a suite file as every suite file is opened (a regular file, at
/// most [`MAX_SUITE_FILE_BYTES`](crate::util::input_file::MAX_SUITE_FILE_BYTES));
/// the error names the file.
pub(super) fn open_suite(path: &Path) -> Result<InputFile, TaskError> {
    open_suite_file(path).map_err(|e| TaskError::File {
        file: path.to_path_buf(),
        message: match e {
            InputFileError::Io(e) => format!("cannot read: {e}"),
            refused => format!("refused: {refused}"),
        },
    })
}

/// A suite file's bytes, read whole ([`open_suite`]).
pub(super) fn read_suite(path: &Path) -> Result<Vec<u8>, TaskError> {
    use std::io::Read;
    let mut file = open_suite(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(|e| TaskError::File {
        file: path.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    Ok(bytes)
}

/// Opens a suite file for [`JsonLines`]; the error names the file.
pub(super) fn json_lines(path: &Path) -> Result<JsonLines, TaskError> {
    let file = open_suite(path)?;
    Ok(JsonLines {
        reader: BufReader::new(file),
        file: path.to_path_buf(),
        number: 0,
        failed: false,
    })
}

impl Iterator for JsonLines {
    type Item = Numbered;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.failed {
            let mut raw = Vec::new();
            match self.reader.read_until(b'\n', &mut raw) {
                Ok(0) => return None,
                Ok(_) => self.number += 1,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(TaskError::File {
                        file: self.file.clone(),
                        message: format!("cannot read: {e}"),
                    }));
                }
            }
            let text = match String::from_utf8(raw) {
                Ok(text) => text,
                Err(e) => {
                    return Some(Err(TaskError::Parse {
                        file: self.file.clone(),
                        line: self.number,
                        message: format!(
                            "invalid UTF-8 at byte {} of the line",
                            e.utf8_error().valid_up_to() + 1
                        ),
                    }))
                }
            };
            let trimmed = text.trim_start_matches('\u{feff}').trim();
            let skip = trimmed.is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#');
            if !skip {
                return Some(Ok((self.number, trimmed.to_string())));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(bytes: &[u8]) -> Vec<Result<(usize, String), TaskError>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, bytes).unwrap();
        json_lines(&path).unwrap().collect()
    }

    #[test]
    fn comments_blanks_and_a_bom_are_skipped_and_numbers_kept() {
        let got = lines_of(b"\xef\xbb\xbf{\"a\": 1}\r\n\n// note\n# note\n  {\"b\": 2}  ");
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![(1, "{\"a\": 1}".into()), (5, "{\"b\": 2}".into())]
        );
    }

    #[test]
    fn an_invalid_byte_fails_its_line_only() {
        let got = lines_of(b"{\"a\": 1}\n{\"b\": \"\xff\"}\n{\"c\": 3}\n");
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].as_ref().ok(), Some(&(1, "{\"a\": 1}".into())));
        let err = got[1].as_ref().unwrap_err().to_string();
        assert!(
            err.ends_with("t.jsonl:2: invalid UTF-8 at byte 8 of the line"),
            "{err}"
        );
        assert_eq!(got[2].as_ref().ok(), Some(&(3, "{\"c\": 3}".into())));
    }
}

#[cfg(test)]
mod suite_tests {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::super::fixtures::dir_with;
    use super::super::{load_suite_with, LoadOptions, Loaded};
    use crate::task::TaskError;

    const GOOD: &str =
        r#"{"id": "a", "question": "q", "expected": {"type": "number", "value": 1}}"#;

    /// Loads `suite`, failing the test if the load has not returned after a
    /// minute (far above what a load takes: only a hang gets there).
    fn load(suite: &Path, skip_invalid: bool) -> Result<Loaded, TaskError> {
        let suite = suite.to_path_buf();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let options = LoadOptions {
                skip_invalid,
                ..LoadOptions::default()
            };
            let _ = tx.send(load_suite_with(suite.to_str().unwrap(), &suite, &options));
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the load hung")
    }

    fn refused(suite: &Path, file: &Path, why: &str) {
        for skip_invalid in [false, true] {
            match load(suite, skip_invalid) {
                Err(TaskError::File { file: f, message }) => {
                    assert_eq!(f, file, "{message}");
                    assert!(message.contains(why), "{message}");
                }
                other => panic!("{}: {other:?}", file.display()),
            }
        }
    }

    #[test]
    fn fifos_and_devices_named_like_suite_files_are_refused_without_hanging() {
        let dir = dir_with(&[("set/a.jsonl", GOOD)]);
        let set = dir.path().join("set");
        let fifo = set.join("b.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        refused(&fifo, &fifo, "refused: is a FIFO, not a regular file");
        refused(&set, &fifo, "refused: is a FIFO, not a regular file");
        fs::remove_file(&fifo).unwrap();
        let zero = set.join("c.jsonl");
        symlink("/dev/zero", &zero).unwrap();
        refused(&zero, &zero, "refused: is a character device");
        fs::remove_file(&zero).unwrap();
        // A labels file is a suite file too.
        let da = r#"{"id": 1, "question": "q", "format": "@x[v]"}"#;
        fs::write(set.join("da.jsonl"), da).unwrap();
        let labels = set.join("da_labels.jsonl");
        symlink("/dev/urandom", &labels).unwrap();
        refused(
            &set.join("da.jsonl"),
            &labels,
            "refused: is a character device",
        );
    }

    #[test]
    fn a_suite_file_over_the_bound_is_refused_unread() {
        let dir = dir_with(&[("set/a.jsonl", GOOD)]);
        let big = dir.path().join("set/a.jsonl");
        // Sparse: nothing of it is stored, and nothing must be read.
        fs::File::options()
            .write(true)
            .open(&big)
            .unwrap()
            .set_len(crate::util::input_file::MAX_SUITE_FILE_BYTES + 1)
            .unwrap();
        refused(&big, &big, "over the bound of 268435456 bytes");
    }

    #[test]
    fn links_out_of_a_suite_folder_are_refused() {
        let dir = dir_with(&[("set/a.jsonl", GOOD), ("elsewhere/x.jsonl", GOOD)]);
        let set = dir.path().join("set");
        let link = set.join("more");
        symlink(dir.path().join("elsewhere"), &link).unwrap();
        refused(&set, &link, "a link that leads out of the suite's folder");
        fs::remove_file(&link).unwrap();
        let link = set.join("b.jsonl");
        symlink(dir.path().join("elsewhere/x.jsonl"), &link).unwrap();
        refused(&set, &link, "a link that leads out of the suite's folder");
        // A suite file named on the command line may be a link anywhere.
        assert_eq!(load(&link, false).unwrap().tasks.len(), 1);
    }

    #[test]
    fn an_invalid_utf8_line_is_one_flawed_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        // Latin-1 "café": byte 29 is not UTF-8.
        let bad = b"{\"id\": \"b\", \"question\": \"caf\xe9\", \"expected\": {\"type\": \"number\", \"value\": 1}}";
        let good2 = GOOD.replace("\"a\"", "\"c\"");
        let mut bytes = format!("{GOOD}\n").into_bytes();
        bytes.extend_from_slice(bad);
        bytes.extend_from_slice(format!("\n{good2}\n").as_bytes());
        fs::write(&path, bytes).unwrap();
        match load(&path, false) {
            Err(TaskError::Parse {
                file,
                line,
                message,
            }) => {
                assert_eq!((file, line), (path.clone(), 2));
                assert_eq!(message, "invalid UTF-8 at byte 29 of the line");
            }
            other => panic!("{other:?}"),
        }
        let loaded = load(&path, true).unwrap();
        let ids: Vec<&str> = loaded.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(loaded.skipped.len(), 1);
        assert_eq!(loaded.skipped[0].line, 2);
        assert!(
            loaded.skipped[0].reason.contains("invalid UTF-8"),
            "{:?}",
            loaded.skipped
        );
    }
}

/// Whether `path` names a JSON suite file: one record (the original MATH
/// release's one problem per file) or an array of records.
pub(super) fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "json")
}

/// The records of a `.json` suite file: the object it holds as record 1,
/// or each element of the array it holds, numbered from 1. Opened and
/// bounded as any suite file.
pub(super) fn json_records(path: &Path) -> Result<Vec<Numbered>, TaskError> {
    let text = String::from_utf8(read_suite(path)?).map_err(|e| TaskError::File {
        file: path.to_path_buf(),
        message: format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to() + 1),
    })?;
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Array(items)) => Ok(items
            .into_iter()
            .enumerate()
            .map(|(i, item)| Ok((i + 1, item.to_string())))
            .collect()),
        // An object, or JSON the line loader names the fault of.
        _ => Ok(vec![Ok((1, text))]),
    }
}
