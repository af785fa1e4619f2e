//! A suite file in Parquet (`test-00000-of-00001.parquet`, as Hugging Face
//! publishes every dataset): each row becomes the JSON object a JSONL line
//! of the same dataset would hold (a column is a field, a list column an
//! array), so GSM8K-, DABench- and native-shaped rows go through the same
//! loaders, checks and errors as lines do; a row is named by its 1-based
//! number where a line would be.
//!
//! The file is opened as any suite file (regular, at most
//! [`MAX_SUITE_FILE_BYTES`]) and read whole; what its rows decode to is
//! bounded too ([`MAX_DECODED_BYTES`]): compressed pages can hold far more
//! than their size.

use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};

use super::lines::{read_suite, Numbered};
use crate::task::TaskError;
use crate::util::input_file::MAX_SUITE_FILE_BYTES;

/// The most text a Parquet suite's rows may decode to.
pub const MAX_DECODED_BYTES: u64 = 4 * MAX_SUITE_FILE_BYTES;

/// Whether `path` names a Parquet suite file.
pub(super) fn is_parquet(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "parquet")
}

/// The rows of a Parquet suite file as (row number, JSON object text).
/// A file that cannot be read or is not Parquet is a [`TaskError::File`];
/// a row that cannot be decoded, a [`TaskError::Parse`] of that row.
pub(super) fn parquet_rows(path: &Path) -> Result<Vec<Numbered>, TaskError> {
    let file_error = |message: String| TaskError::File {
        file: path.to_path_buf(),
        message,
    };
    let bytes = read_suite(path)?;
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes))
        .map_err(|e| file_error(format!("not a Parquet file: {e}")))?;
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| file_error(format!("cannot read its rows: {e}")))?;
    let mut out = Vec::new();
    let mut decoded: u64 = 0;
    for (i, row) in rows.enumerate() {
        let number = i + 1;
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                // A page that cannot be decoded ends the rows.
                out.push(Err(TaskError::Parse {
                    file: path.to_path_buf(),
                    line: number,
                    message: format!("row {number} cannot be decoded: {e}"),
                }));
                break;
            }
        };
        let text = row.to_json_value().to_string();
        decoded = decoded.saturating_add(text.len() as u64);
        if decoded > MAX_DECODED_BYTES {
            return Err(file_error(format!(
                "its rows decode to more than {MAX_DECODED_BYTES} bytes (row {number})"
            )));
        }
        out.push(Ok((number, text)));
    }
    if out.is_empty() {
        return Err(file_error("no rows".into()));
    }
    Ok(out)
}
