//! Managed Python images: virtual environments that retrace builds itself from
//! the pinned lock files in `images/`, so every kernel runs against exactly the
//! same packages and the harness never depends on whatever Python the machine
//! happens to have set up.
//!
//! An image lives in `$RETRACE_HOME/images/<name>-<hash>/`, where the hash
//! covers the lock, the kernel configuration and the base interpreter; any
//! change therefore yields a new directory instead of mutating one that running
//! kernels may use. A directory counts as built only once its `complete.json`
//! marker exists, and it only ever appears under its final name complete (built
//! elsewhere, then renamed). That discipline is [`recipe`]'s, shared by every
//! directory retrace prepares from pinned inputs (images, the local model's
//! server venv and weights).
//!
//! The lock files and `kernel_config.py` are compiled into the binary, so an
//! installed `retrace` needs no checkout.

mod build;
pub mod dynamic;
mod file_lock;
mod fixed_image;
mod interpreter;
mod kernelspec;
pub mod llm;
mod lock;
pub(crate) mod marker;
pub(crate) mod progress;
mod publish;
pub(crate) mod recipe;
pub(crate) mod step;
mod store;
mod strategy;
pub(crate) mod venv;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use strum::IntoEnumIterator;

pub use fixed_image::{FixedImage, Rewritten};
pub(crate) use interpreter::resolve as find_program;
pub use interpreter::{Interpreter, ProbeError};
pub use kernelspec::{Kernelspec, KernelspecImage, KernelspecMetadata, RETRACE_LAUNCHER};
pub use lock::{normalize, Lock, LockEntry};
pub use step::LogTail;
pub(crate) use store::disk_usage;
pub use store::ImageStore;
pub use strategy::{Strategy, StrategyListError};

/// The IPython kernel configuration every image carries (see the file for why
/// each setting is there).
pub const KERNEL_CONFIG: &str = include_str!("../../images/kernel_config.py");

/// What the fat image offers beside ipykernel, as the task prompt lists it;
/// each is pinned in `images/fat.lock` (a test holds the two together).
pub const FAT_PACKAGES: [&str; 9] = [
    "numpy",
    "pandas",
    "matplotlib",
    "scipy",
    "sympy",
    "scikit-learn",
    "statsmodels",
    "networkx",
    "seaborn",
];

/// Which image: `slim` (ipykernel only, for dynamic installs) or `fat` (the
/// scientific stack pre-installed).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    strum::Display,
    strum::EnumIter,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ImageName {
    Slim,
    Fat,
    /// The symbolic answer checker's (never runs task code).
    Checker,
}

impl ImageName {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The lock file text compiled into the binary.
    pub fn lock_text(self) -> &'static str {
        match self {
            ImageName::Slim => lock::SLIM_LOCK,
            ImageName::Fat => lock::FAT_LOCK,
            ImageName::Checker => lock::CHECKER_LOCK,
        }
    }
}

impl FromStr for ImageName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        ImageName::iter()
            .find(|n| n.as_str() == wanted)
            .ok_or_else(|| format!("unknown image `{s}`; expected `slim`, `fat` or `checker`"))
    }
}

/// A built image, ready to start kernels from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub name: ImageName,
    /// First 16 hex digits of the SHA-256 of lock, kernel config and base
    /// interpreter; part of the directory name.
    pub lock_hash: String,
    /// Absolute, so paths derived from it can be handed to a kernel as is
    /// (ipykernel silently ignores a relative `--config`).
    pub dir: PathBuf,
}

/// The variables that size BLAS, OpenMP and numexpr thread pools.
pub(crate) const THREAD_VARS: [&str; 5] = [
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
];

impl Image {
    /// Its size on disk (recorded when it was built).
    pub fn size(&self) -> u64 {
        marker::Marker::image_size(&self.dir, self.name, &self.lock_hash)
    }

    pub fn python(&self) -> PathBuf {
        self.dir.join("venv").join("bin").join("python")
    }

    pub fn kernel_config(&self) -> PathBuf {
        self.dir.join("kernel_config.py")
    }

    /// What follows `python()` on a kernel's command line: ipykernel
    /// reading `connection_file`, configured by the image's kernel config.
    /// retrace's launcher passes a path, a kernelspec jupyter's
    /// `{connection_file}` placeholder. IPython is told not to put the
    /// working directory on the import path while the kernel starts (see
    /// `PYTHONSAFEPATH` in [`Image::kernel_env`]).
    pub fn kernel_args(&self, connection_file: &OsStr) -> Vec<OsString> {
        vec![
            "-m".into(),
            "ipykernel_launcher".into(),
            "-f".into(),
            connection_file.to_owned(),
            format!("--config={}", self.kernel_config().display()).into(),
            "--IPKernelApp.ignore_cwd=True".into(),
        ]
    }

    /// The environment of every kernel of this image, wherever it runs, with
    /// BLAS/OpenMP pools of `threads` threads (at least one). retrace's
    /// launcher adds the per-kernel HOME, IPYTHONDIR and MPLCONFIGDIR.
    ///
    /// `PYTHONSAFEPATH` keeps the working directory, which holds the
    /// task's files, off the import path while the kernel starts: `python
    /// -m ipykernel_launcher` would put it first, and a task file named
    /// `types.py`, `enum.py` or `ipykernel_launcher.py` would run instead of
    /// the kernel's own module. Once the kernel has started, retrace's probe
    /// makes the working directory importable again, as in any notebook,
    /// and drops the variable (probe.py, at its end).
    pub fn kernel_env(&self, threads: u32) -> Vec<(String, String)> {
        let python = self.python();
        let venv_bin = python.parent().map(Path::to_path_buf).unwrap_or_default();
        let threads = threads.max(1).to_string();
        let mut env: Vec<(String, String)> = [
            (
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", venv_bin.display()),
            ),
            (
                "MPLBACKEND",
                "module://matplotlib_inline.backend_inline".into(),
            ),
            ("TMPDIR", "/tmp".into()),
            ("LANG", "C.UTF-8".into()),
            ("LC_ALL", "C.UTF-8".into()),
            ("PYTHONNOUSERSITE", "1".into()),
            ("PYTHONSAFEPATH", "1".into()),
            ("PYTHONDONTWRITEBYTECODE", "1".into()),
            ("PYDEVD_DISABLE_FILE_VALIDATION", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for var in THREAD_VARS {
            env.push((var.to_string(), threads.clone()));
        }
        env
    }

    /// Matplotlib config dir with a prebuilt font cache. Kernels should copy
    /// it into a writable `MPLCONFIGDIR`: matplotlib rebuilds the cache (about
    /// a second, on the first plot of every task) when its dir is missing or
    /// read-only.
    pub fn mpl_cache(&self) -> Option<PathBuf> {
        let dir = self.dir.join(MPL_CACHE_DIR);
        dir.is_dir().then_some(dir)
    }
}

pub(crate) const MPL_CACHE_DIR: &str = "mplconfig";

/// One row of `retrace image list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageInfo {
    pub name: ImageName,
    pub lock_hash: String,
    /// Version of the base interpreter (from the marker when built).
    pub python_version: Option<String>,
    /// Disk usage of the image directory, when built.
    pub size_bytes: Option<u64>,
    pub path: PathBuf,
    pub built: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PyenvError {
    #[error("image `{name}` is not built; run `retrace image build {name}`")]
    NotBuilt { name: ImageName },
    #[error(
        "no usable Python interpreter ({detail}); install Debian's python3 with python3-venv, \
         or set RETRACE_PYTHON to a python3 that has the venv and ensurepip modules"
    )]
    NoInterpreter { detail: String },
    #[error("lock file line {line}: {reason}")]
    Lock { line: usize, reason: String },
    #[error("building image `{name}` failed while trying to {step}: {detail}\n{log}")]
    BuildFailed {
        name: ImageName,
        step: String,
        detail: String,
        log: step::LogTail,
    },
    #[error(
        "kernelspec name `{name}`: jupyter lists only names of ASCII letters, digits, `.`, `_` \
         and `-`"
    )]
    KernelspecName { name: String },
    #[error("encoding {path}", path = .path.display())]
    Encoding {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what} just built in {dir} is not current: {reason}", dir = .dir.display())]
    NotCurrentAfterBuild {
        what: String,
        dir: PathBuf,
        #[source]
        reason: Box<recipe::NotCurrent>,
    },
    /// A build filled the file system under `$RETRACE_HOME` (boxed: it
    /// is large and rare).
    #[error(transparent)]
    NoSpace(#[from] Box<crate::util::disk::NoSpace>),
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_name_round_trips() {
        for name in ImageName::iter() {
            assert_eq!(name.to_string().parse::<ImageName>().unwrap(), name);
            let json = serde_json::to_string(&name).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ImageName>(&json).unwrap(), name);
        }
        assert_eq!("FAT".parse::<ImageName>().unwrap(), ImageName::Fat);
        let err = "big".parse::<ImageName>().unwrap_err();
        assert!(err.contains("`slim`, `fat` or `checker`"), "{err}");
    }

    #[test]
    fn embedded_locks_parse_and_slim_is_subset_of_fat() {
        let slim = Lock::parse(ImageName::Slim.lock_text()).unwrap();
        let fat = Lock::parse(ImageName::Fat.lock_text()).unwrap();
        assert!(slim.contains("ipykernel") && !slim.contains("matplotlib"));
        for pkg in std::iter::once("ipykernel").chain(FAT_PACKAGES) {
            assert!(fat.contains(pkg), "fat lacks {pkg}");
        }
        for entry in &slim.entries {
            assert!(
                fat.entries.contains(entry),
                "{}=={} in slim but not pinned identically in fat",
                entry.name,
                entry.version
            );
        }
    }

    #[test]
    fn not_built_message_says_what_to_do() {
        let e = PyenvError::NotBuilt {
            name: ImageName::Fat,
        };
        assert_eq!(
            e.to_string(),
            "image `fat` is not built; run `retrace image build fat`"
        );
    }

    #[test]
    fn image_paths() {
        let image = Image {
            name: ImageName::Slim,
            lock_hash: "0123456789abcdef".into(),
            dir: PathBuf::from("/nonexistent/images/slim-0123456789abcdef"),
        };
        assert_eq!(
            image.python(),
            Path::new("/nonexistent/images/slim-0123456789abcdef/venv/bin/python")
        );
        assert_eq!(
            image.kernel_config(),
            Path::new("/nonexistent/images/slim-0123456789abcdef/kernel_config.py")
        );
        assert_eq!(image.mpl_cache(), None);
    }
}
