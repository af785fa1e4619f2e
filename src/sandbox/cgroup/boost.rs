//! The CPU weight of retrace's own directories above a kernel group (the
//! harness's `<pid>` directory and the subtree), raised while a kill is
//! waited for.
//!
//! Killed processes exit on the CPU of their group, and a group competes
//! at every level of its path: the kernel group's own raised weight only
//! wins against sibling kernels, while the subtree competes with every
//! other process at its level of the host. With two busy processes beside
//! it, a fork bomb's hundred exits got a third of the machine. Only
//! directories retrace created are touched, never the host's.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::cpu::Files;
use super::fs;

/// One raised directory of this process: kills in parallel share it, the
/// last one puts the saved weight back.
struct Raised {
    file: PathBuf,
    holders: usize,
    saved: String,
}

static RAISED: Mutex<Vec<Raised>> = Mutex::new(Vec::new());

/// Raised weights, put back on drop.
#[must_use = "the weights go back when this is dropped"]
pub(super) struct ChainBoost {
    files: Vec<PathBuf>,
}

impl ChainBoost {
    /// Raises the weight of each of `dirs` (cpu hierarchy; `files` name
    /// the weight file) that has one. A directory whose weight is already at the top
    /// was raised by another retrace's kill in progress: the default is
    /// what goes back, so no kill can leave a raised weight behind.
    pub(super) fn raise(dirs: &[&Path], files: &Files) -> ChainBoost {
        let (name, top, default) = (files.weight, files.top_weight, files.default_weight);
        let mut raised = RAISED.lock().unwrap_or_else(PoisonError::into_inner);
        let mut files = Vec::new();
        for dir in dirs {
            let file = dir.join(name);
            if let Some(r) = raised.iter_mut().find(|r| r.file == file) {
                r.holders += 1;
                files.push(file);
                continue;
            }
            let Ok(saved) = fs::read(&file).map(|w| w.trim().to_string()) else {
                continue;
            };
            if fs::write(&file, top).is_err() {
                continue;
            }
            let saved = if saved == top { default.into() } else { saved };
            raised.push(Raised {
                file: file.clone(),
                holders: 1,
                saved,
            });
            files.push(file);
        }
        ChainBoost { files }
    }
}

impl Drop for ChainBoost {
    fn drop(&mut self) {
        let mut raised = RAISED.lock().unwrap_or_else(PoisonError::into_inner);
        for file in &self.files {
            let Some(i) = raised.iter().position(|r| &r.file == file) else {
                continue;
            };
            raised[i].holders -= 1;
            if raised[i].holders == 0 {
                let r = raised.swap_remove(i);
                if let Err(e) = fs::write(&r.file, &r.saved) {
                    tracing::warn!(file = %r.file.display(), error = %e, "a cgroup's CPU weight could not be put back after a kill");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{v1, v2};
    use super::*;

    const V1: &Files = &v1::cpu::FILES;
    const V2: &Files = &v2::cpu::FILES;

    fn weight(dir: &Path) -> String {
        std::fs::read_to_string(dir.join(V1.weight)).unwrap()
    }

    #[test]
    fn raised_while_held_and_put_back_by_the_last_holder() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("a/b"));
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join(V1.weight), "1024\n").unwrap();
        std::fs::write(b.join(V1.weight), "500\n").unwrap();
        let first = ChainBoost::raise(&[&b, &a], V1);
        let second = ChainBoost::raise(&[&b, &a], V1);
        let top = (V1.top_weight.to_string(), V1.top_weight.to_string());
        assert_eq!((weight(&a), weight(&b)), top);
        drop(first);
        assert_eq!((weight(&a), weight(&b)), top);
        drop(second);
        assert_eq!((weight(&a), weight(&b)), ("1024".into(), "500".into()));
    }

    #[test]
    fn a_weight_left_at_the_top_goes_back_to_the_default() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(V2.weight), "10000\n").unwrap();
        drop(ChainBoost::raise(&[d.path()], V2));
        let back = std::fs::read_to_string(d.path().join(V2.weight)).unwrap();
        assert_eq!(back, V2.default_weight);
        assert_eq!(back, "100");
    }

    #[test]
    fn directories_without_a_weight_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        let boost = ChainBoost::raise(&[d.path()], V1);
        assert!(boost.files.is_empty());
        assert!(!d.path().join(V1.weight).exists());
    }
}
