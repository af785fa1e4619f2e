//! A Jupyter kernelspec (`kernel.json`) for an image, so a Jupyter server or
//! kernel gateway on this machine starts kernels of that image the way
//! retrace's own launcher does: the same interpreter, arguments, kernel
//! config and environment. What it leaves out is per-kernel: the gateway
//! gives each kernel its own process and keeps its own HOME (so IPython and
//! matplotlib keep their caches there), and retrace's confinement does not
//! apply to kernels a gateway starts.
//!
//! The Enterprise Gateway kernelspec is the other kind: EG's
//! `DistributedProcessProxy` runs `retrace launch` on the host it picks,
//! and retrace starts the kernel there in its own confinement (see
//! `kernel::launcher`).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Image, ImageName, PyenvError};
use crate::util::IoContext;

/// Where jupyter looks for kernelspecs under each `JUPYTER_PATH` entry.
const KERNELS_DIR: &str = "kernels";
const KERNELSPEC_FILE: &str = "kernel.json";
/// Substituted by jupyter_client with the path of the connection file it
/// writes for each kernel.
const CONNECTION_FILE: &str = "{connection_file}";

/// The contents of `kernel.json`, in jupyter_client's format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernelspec {
    pub argv: Vec<String>,
    pub display_name: String,
    pub language: String,
    /// ipykernel handles SIGINT itself, so an interrupt is a signal (no
    /// control-channel round trip).
    pub interrupt_mode: String,
    pub env: BTreeMap<String, String>,
    pub metadata: KernelspecMetadata,
}

/// EG's substitutions in a launcher's argv.
const EG_ARGS: [(&str, &str); 4] = [
    ("--kernel-id", "{kernel_id}"),
    ("--response-address", "{response_address}"),
    ("--public-key", "{public_key}"),
    ("--port-range", "{port_range}"),
];
/// The process proxy that starts kernels on remote hosts over SSH.
const DISTRIBUTED_PROXY: &str =
    "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy";
/// `metadata.retrace.launcher` of a kernelspec whose kernels retrace
/// itself starts and confines on their host.
pub const RETRACE_LAUNCHER: &str = "retrace";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelspecMetadata {
    pub retrace: KernelspecImage,
    /// Enterprise Gateway's process proxy, for its kernelspecs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_proxy: Option<ProcessProxy>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessProxy {
    pub class_name: String,
}

/// Which of retrace's images the kernelspec runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelspecImage {
    pub image: ImageName,
    pub image_hash: String,
    /// [`RETRACE_LAUNCHER`] when retrace launches and confines the kernel
    /// on its host; absent when the gateway runs the interpreter itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
}

impl Image {
    /// The kernelspec that runs kernels of this image with BLAS/OpenMP
    /// pools of `threads` threads. Its paths are this machine's: the
    /// gateway must see the image at the same place.
    pub fn kernelspec(&self, threads: u32) -> Kernelspec {
        let mut argv = vec![self.python().to_string_lossy().into_owned()];
        argv.extend(
            self.kernel_args(OsStr::new(CONNECTION_FILE))
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        Kernelspec {
            argv,
            display_name: format!("Python 3 (retrace {} image {})", self.name, self.lock_hash),
            language: "python".into(),
            interrupt_mode: "signal".into(),
            env: self.kernel_env(threads).into_iter().collect(),
            metadata: KernelspecMetadata {
                retrace: KernelspecImage {
                    image: self.name,
                    image_hash: self.lock_hash.clone(),
                    launcher: None,
                },
                process_proxy: None,
            },
        }
    }

    /// The Enterprise Gateway kernelspec: EG's `DistributedProcessProxy`
    /// runs `retrace launch` (the binary at `retrace`) on the host it picks
    /// with `home` as `RETRACE_HOME`, and retrace confines the kernel there
    /// with `limits` (flags of `retrace launch`; `KERNEL_MEMORY` and
    /// `KERNEL_CPUS` from the client override theirs). Paths must hold on
    /// every host.
    pub fn enterprise_kernelspec(
        &self,
        threads: u32,
        retrace: &Path,
        home: &Path,
        limits: &[String],
    ) -> Kernelspec {
        let mut argv = vec![
            retrace.to_string_lossy().into_owned(),
            "launch".into(),
            "--image".into(),
            self.name.to_string(),
            "--threads".into(),
            threads.max(1).to_string(),
        ];
        argv.extend(limits.iter().cloned());
        for (flag, value) in EG_ARGS {
            argv.extend([flag.to_string(), value.to_string()]);
        }
        let env = [(
            "RETRACE_HOME".to_string(),
            home.to_string_lossy().into_owned(),
        )];
        Kernelspec {
            argv,
            display_name: format!(
                "Python 3 (retrace {} image {}, confined on its host)",
                self.name, self.lock_hash
            ),
            language: "python".into(),
            interrupt_mode: "signal".into(),
            env: env.into_iter().collect(),
            metadata: KernelspecMetadata {
                retrace: KernelspecImage {
                    image: self.name,
                    image_hash: self.lock_hash.clone(),
                    launcher: Some(RETRACE_LAUNCHER.into()),
                },
                process_proxy: Some(ProcessProxy {
                    class_name: DISTRIBUTED_PROXY.into(),
                }),
            },
        }
    }
}

impl Kernelspec {
    /// Writes `<dir>/kernels/<name>/kernel.json`, the layout jupyter expects
    /// of a `JUPYTER_PATH` entry, and returns the file's path. An existing
    /// file is replaced whole (renamed over), so a server reading it never
    /// sees half of it.
    pub fn write(&self, dir: &Path, name: &str) -> Result<PathBuf, PyenvError> {
        Self::check_name(name)?;
        let spec_dir = dir.join(KERNELS_DIR).join(name);
        fs::create_dir_all(&spec_dir).at("creating", &spec_dir)?;
        let path = spec_dir.join(KERNELSPEC_FILE);
        let partial = spec_dir.join(format!(".{KERNELSPEC_FILE}.partial"));
        let mut text =
            serde_json::to_string_pretty(self).map_err(|source| PyenvError::Encoding {
                path: path.clone(),
                source,
            })?;
        text.push('\n');
        fs::File::create(&partial)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .at("writing", &partial)?;
        fs::rename(&partial, &path).at("replacing", &path)?;
        Ok(path)
    }

    /// jupyter_client lists only kernelspecs whose directory name matches
    /// `[a-zA-Z0-9._-]+`; any other name would be written and never found.
    pub fn check_name(name: &str) -> Result<(), PyenvError> {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if valid {
            Ok(())
        } else {
            Err(PyenvError::KernelspecName {
                name: name.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        Image {
            name: ImageName::Fat,
            lock_hash: "0123456789abcdef".into(),
            dir: PathBuf::from("/nonexistent/images/fat-0123456789abcdef"),
        }
    }

    #[test]
    fn kernelspec_runs_the_image_like_the_launcher() {
        let spec = image().kernelspec(2);
        assert_eq!(
            spec.argv,
            [
                "/nonexistent/images/fat-0123456789abcdef/venv/bin/python",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                "--config=/nonexistent/images/fat-0123456789abcdef/kernel_config.py",
                "--IPKernelApp.ignore_cwd=True",
            ]
        );
        let env = |k: &str| spec.env.get(k).map(String::as_str);
        assert_eq!(
            env("PATH"),
            Some("/nonexistent/images/fat-0123456789abcdef/venv/bin:/usr/local/bin:/usr/bin:/bin")
        );
        assert_eq!(
            env("MPLBACKEND"),
            Some("module://matplotlib_inline.backend_inline")
        );
        for var in crate::pyenv::THREAD_VARS {
            assert_eq!(env(var), Some("2"), "{var}");
        }
        assert_eq!(env("PYTHONNOUSERSITE"), Some("1"));
        assert_eq!(env("PYTHONSAFEPATH"), Some("1"));
        assert_eq!(env("LANG"), Some("C.UTF-8"));
        assert_eq!(env("LC_ALL"), Some("C.UTF-8"));
        // Per-kernel paths stay the gateway's business.
        for var in ["HOME", "IPYTHONDIR", "MPLCONFIGDIR", "JPY_PARENT_PID"] {
            assert_eq!(env(var), None, "{var}");
        }
        // jupyter_client applies `string.Template` to env values: a `$`
        // would be replaced by the gateway's variables.
        assert!(
            spec.env.values().all(|v| !v.contains('$')),
            "{:?}",
            spec.env
        );
        assert_eq!(image().kernelspec(0).env["OMP_NUM_THREADS"], "1");
    }

    #[test]
    fn kernelspec_json_says_which_image() {
        let json = serde_json::to_value(image().kernelspec(1)).unwrap();
        assert_eq!(json["language"], "python");
        assert_eq!(json["interrupt_mode"], "signal");
        assert_eq!(
            json["display_name"],
            "Python 3 (retrace fat image 0123456789abcdef)"
        );
        assert_eq!(
            json["metadata"],
            serde_json::json!({"retrace": {"image": "fat", "image_hash": "0123456789abcdef"}})
        );
        assert_eq!(json["argv"][4], "{connection_file}");
        assert!(json["env"].is_object());
    }

    #[test]
    fn the_enterprise_kernelspec_launches_through_retrace() {
        let limits = ["--memory".to_string(), "256M".to_string()];
        let spec = image().enterprise_kernelspec(
            2,
            Path::new("/opt/retrace/bin/retrace"),
            Path::new("/var/lib/retrace"),
            &limits,
        );
        assert_eq!(
            spec.argv,
            [
                "/opt/retrace/bin/retrace",
                "launch",
                "--image",
                "fat",
                "--threads",
                "2",
                "--memory",
                "256M",
                "--kernel-id",
                "{kernel_id}",
                "--response-address",
                "{response_address}",
                "--public-key",
                "{public_key}",
                "--port-range",
                "{port_range}",
            ]
        );
        assert_eq!(spec.env["RETRACE_HOME"], "/var/lib/retrace");
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            json["metadata"],
            serde_json::json!({
                "retrace": {"image": "fat", "image_hash": "0123456789abcdef", "launcher": "retrace"},
                "process_proxy": {"class_name": DISTRIBUTED_PROXY},
            })
        );
        let read: Kernelspec = serde_json::from_value(json).unwrap();
        assert_eq!(read, spec);
    }

    #[test]
    fn write_puts_kernel_json_where_jupyter_path_looks() {
        let dir = tempfile::tempdir().unwrap();
        let spec = image().kernelspec(1);
        let path = spec.write(dir.path(), "retrace-fat").unwrap();
        assert_eq!(path, dir.path().join("kernels/retrace-fat/kernel.json"));
        let read: Kernelspec = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(read, spec);
        // Written again: replaced, nothing else left in the directory.
        let other = image().kernelspec(4);
        other.write(dir.path(), "retrace-fat").unwrap();
        let read: Kernelspec = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(read, other);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["kernel.json"]);
    }

    #[test]
    fn write_refuses_names_jupyter_would_not_list() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["", "a b", "../up", "retrace/fat", "ü"] {
            let err = image().kernelspec(1).write(dir.path(), name).unwrap_err();
            assert!(err.to_string().contains("kernelspec name"), "{name}: {err}");
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
