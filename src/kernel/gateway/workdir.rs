//! A gateway kernel's private working directory: made (a gateway's
//! kernels share the gateway's, and tasks' files must not meet), filled
//! with the task's files, removed when the kernel goes.

use std::io::Read;

use base64::Engine;

use super::super::client::Channels;
use super::super::requests::silent_ok;
use super::super::KernelError;
use super::kernel::SETUP_TIMEOUT;
use crate::util::input_file::{open_task_file, ReadAs};
use crate::util::IoContext;

/// Bytes of a task file per setup request (base64 in the cell).
const FILE_CHUNK: usize = 512 * 1024;

/// The cell that gives each kernel a private working directory: a
/// gateway's kernels share the gateway's, and tasks' files must not meet.
/// Named after the kernel, so the process that replaces a dead one (same
/// id) removes what its predecessor could not. A link planted under the
/// name is not followed: `rmtree` refuses it and `mkdir` then fails.
pub(super) fn workdir_cell(kernel_id: &str) -> String {
    let name: String = kernel_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!(
        "(lambda os, s, d: (s.rmtree(d, True), os.mkdir(d, 0o700), os.chdir(d)))\
         (__import__('os'), __import__('shutil'), \
         __import__('os').path.join(__import__('tempfile').gettempdir(), 'retrace-{name}'))"
    )
}
/// Removes that directory when the kernel goes.
pub(super) const CLEANUP_CELL: &str =
    "(lambda os, s: (lambda d: (os.chdir('/'), s.rmtree(d, True)))(os.getcwd()))\
     (__import__('os'), __import__('shutil'))";

/// Writes `file` into the kernel's working directory under its own name,
/// in chunks a cell can carry, read one chunk at a time. The file is opened
/// as every task file is (`input_file::open_task_file`, with the harness's
/// rights: the gateway's kernel gets only the bytes sent).
pub(super) async fn upload(
    channels: &mut Channels,
    file: &std::path::Path,
    max_file_bytes: u64,
) -> Result<(), KernelError> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| KernelError::TaskFileName(file.to_path_buf()))?;
    let mut from = open_task_file(file, max_file_bytes, ReadAs::Harness).map_err(|source| {
        KernelError::TaskFile {
            file: file.to_path_buf(),
            source,
        }
    })?;
    let name = serde_json::to_string(name).unwrap_or_default();
    let what = format!("copying {} to the kernel", file.display());
    let mut chunk = Vec::with_capacity(FILE_CHUNK);
    for i in 0.. {
        chunk.clear();
        (&mut from)
            .take(FILE_CHUNK as u64)
            .read_to_end(&mut chunk)
            .at("reading task file", file)?;
        let cell = match (i, chunk.is_empty()) {
            (0, true) => format!("open({name}, 'wb').close()"),
            (_, true) => break,
            _ => {
                let mode = if i == 0 { "wb" } else { "ab" };
                let data = base64::engine::general_purpose::STANDARD.encode(&chunk);
                format!(
                    "(lambda b: (lambda f: (f.write(b.b64decode('{data}')), f.close()))(open({name}, '{mode}')))\
                     (__import__('base64'))"
                )
            }
        };
        silent_ok(channels, &cell, SETUP_TIMEOUT, &what).await?;
        if chunk.len() < FILE_CHUNK {
            break;
        }
    }
    Ok(())
}
