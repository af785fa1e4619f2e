//! What kernels of one image are started from, and the command line and
//! environment each kernel gets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::pyenv::Image;
use crate::sandbox::{KernelLayout, LaunchCommand};
use crate::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

/// Everything needed to start kernels of one image.
#[derive(Debug, Clone)]
pub struct KernelSpec {
    pub image: Image,
    /// Parent of the per-kernel directories.
    pub root: PathBuf,
    /// BLAS/OpenMP thread count, capped to the CPU limit.
    pub threads: u32,
    /// Files copied into each kernel's working directory.
    pub files: Vec<PathBuf>,
    /// `--max-task-file-bytes`: a larger task file is refused.
    pub max_file_bytes: u64,
    /// Directories the kernel may read besides its image (the package
    /// store of the `dynamic` strategy).
    pub ro_binds: Vec<PathBuf>,
}

impl KernelSpec {
    pub fn new(image: Image, root: PathBuf) -> Self {
        Self {
            image,
            root,
            threads: 1,
            files: Vec::new(),
            max_file_bytes: DEFAULT_MAX_TASK_FILE_BYTES,
            ro_binds: Vec::new(),
        }
    }
}

/// The default parent of per-kernel directories. Short, because a unix
/// socket path must fit in 108 bytes.
pub fn default_kernel_root() -> PathBuf {
    std::env::temp_dir().join(format!("retrace-{}", nix::unistd::getuid()))
}

/// The command line and environment of one kernel: the image's own
/// (shared with its kernelspec) plus this kernel's HOME and the
/// directories under it.
pub fn launch_command(spec: &KernelSpec, layout: &KernelLayout, conn_file: &Path) -> LaunchCommand {
    let image = &spec.image;
    let mut env: Vec<(OsString, OsString)> = image
        .kernel_env(spec.threads)
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    env.extend([
        ("HOME".into(), layout.home_dir.as_os_str().to_owned()),
        ("IPYTHONDIR".into(), layout.home_dir.join(".ipython").into()),
        (
            "MPLCONFIGDIR".into(),
            layout.home_dir.join(".mplconfig").into(),
        ),
    ]);
    LaunchCommand {
        program: image.python(),
        args: image.kernel_args(conn_file.as_os_str()),
        env,
        image_dir: image.dir.clone(),
        ro_binds: spec.ro_binds.clone(),
        network: false,
    }
}
