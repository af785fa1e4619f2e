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

/// Opens a suite file for [`JsonLines`]; the error names the file.
pub(super) fn json_lines(path: &Path) -> Result<JsonLines, TaskError> {
    let file = open_suite_file(path).map_err(|e| {
        let message = match e {
            InputFileError::Io(e) => format!("cannot read: {e}"),
            refused => format!("refused: {refused}"),
        };
        TaskError::File {
            file: path.to_path_buf(),
            message,
        }
    })?;
    Ok(JsonLines {
        reader: BufReader::new(file),
        file: path.to_path_buf(),
        number: 0,
        failed: false,
    })
}

impl Iterator for JsonLines {
    type Item = Result<(usize, String), TaskError>;

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

    fn lines_of(bytes: &[u8]) -> Vec<Result<(usize, String), String>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, bytes).unwrap();
        json_lines(&path)
            .unwrap()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn comments_blanks_and_a_bom_are_skipped_and_numbers_kept() {
        let got = lines_of(b"\xef\xbb\xbf{\"a\": 1}\r\n\n// note\n# note\n  {\"b\": 2}  ");
        assert_eq!(
            got,
            vec![Ok((1, "{\"a\": 1}".into())), Ok((5, "{\"b\": 2}".into()))]
        );
    }

    #[test]
    fn an_invalid_byte_fails_its_line_only() {
        let got = lines_of(b"{\"a\": 1}\n{\"b\": \"\xff\"}\n{\"c\": 3}\n");
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0], Ok((1, "{\"a\": 1}".into())));
        let err = got[1].as_ref().unwrap_err();
        assert!(
            err.ends_with("t.jsonl:2: invalid UTF-8 at byte 8 of the line"),
            "{err}"
        );
        assert_eq!(got[2], Ok((3, "{\"c\": 3}".into())));
    }
}
