//! The confined installer: puts the wheels of an allowed closure into the
//! package store. Wheels already in the store are not touched (a store hit
//! never uses the network); the others are installed by `install.py` in a
//! jail of its own — own cgroup with memory, pid and time limits, the
//! kernel user, a filesystem view with only the slim image and its work
//! directory — the one jail that keeps the host's network. What it
//! installed is audited before anything is published.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::allowlist::Pin;
use super::audit::{audit, Finding};
use super::oneshot::{self, OneShotError, Scratch};
use super::store::{Entry, PackageStore};
use crate::pyenv::Image;
use crate::sandbox::{KernelLayout, LaunchCommand, Sandbox, SandboxError, SandboxLimits};
use crate::util::disk::{self, NoSpace};
use crate::util::{IoContext, IoError};

const INSTALL_PY: &str = include_str!("install.py");

/// Environment variables handed to pip: its own settings and how this
/// machine reaches the index (proxies, certificates). Nothing else of the
/// harness's environment crosses into the jail.
const PASSED_ENV_PREFIXES: [&str; 1] = ["PIP_"];
const PASSED_ENV: [&str; 10] = [
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];
/// pip settings that would change what is installed where: ours win.
const REFUSED_PIP_ENV: [&str; 6] = [
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_USER",
    "PIP_ROOT",
    "PIP_CONFIG_FILE",
    "PIP_REQUIRE_VIRTUALENV",
];

/// Wheels installed in parallel by one installer.
const PARALLEL: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("the installer could not be confined: {0}")]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("reading the installer's result")]
    Result(#[source] serde_json::Error),
    #[error("the installer ran out of time ({secs} s) and was killed")]
    Timeout { secs: u64 },
    #[error("the installer failed before installing anything ({status}): {tail}")]
    Crashed { status: String, tail: String },
    #[error("installing {wheel} failed: {tail}")]
    Wheel { wheel: String, tail: String },
    /// The package store's file system filled up (boxed: large and rare).
    #[error(transparent)]
    NoSpace(Box<NoSpace>),
    #[error("{wheel} was refused: the file downloaded does not match its pinned sha256")]
    HashMismatch { wheel: String },
    #[error("{wheel} was refused: {}", findings.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Refused {
        wheel: String,
        findings: Vec<Finding>,
    },
}

impl InstallError {
    /// The installer refused what it got (a hash mismatch, content that
    /// runs code at start-up): a policy decision, not an infrastructure
    /// failure.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            InstallError::Refused { .. } | InstallError::HashMismatch { .. }
        )
    }

    /// What the post-install audit found, when that is why it failed.
    pub fn findings(&self) -> &[Finding] {
        match self {
            InstallError::Refused { findings, .. } => findings,
            _ => &[],
        }
    }
}

/// One wheel of a closure in the store.
#[derive(Debug, Clone)]
pub struct Placed {
    pub entry: Entry,
    /// Its `sys.path` directory.
    pub site: PathBuf,
    /// It was in the store already.
    pub store_hit: bool,
}

/// A closure in the store.
#[derive(Debug, Clone)]
pub struct Installed {
    pub wheels: Vec<Placed>,
    /// The installer's wall time (0 when every wheel was a store hit).
    pub installer_ms: f64,
}

/// Where the installer gets wheels from. The default is pip's own
/// configuration (the machine's index, its `pip.conf`, `PIP_*`);
/// tests point it at a local wheel directory.
#[derive(Debug, Clone, Default)]
pub struct IndexSource {
    /// Extra pip arguments (e.g. `--no-index --find-links DIR`).
    pub pip_args: Vec<String>,
    /// Local directories the installer must see read-only.
    pub dirs: Vec<PathBuf>,
}

pub struct Installer {
    store: PackageStore,
    image: Image,
    sandbox: Arc<dyn Sandbox>,
    limits: SandboxLimits,
    source: IndexSource,
    /// One install at a time: a second task wanting the same wheels waits
    /// and then finds them in the store.
    serial: tokio::sync::Mutex<()>,
}

impl Installer {
    /// `image` is the slim image (its pip installs); `timeout` bounds one
    /// installer run.
    pub fn new(
        store: PackageStore,
        image: Image,
        sandbox: Arc<dyn Sandbox>,
        timeout: Duration,
    ) -> Result<Self, InstallError> {
        store
            .create()
            .io_context(|| format!("creating {}", store.root().display()))?;
        // Older than any installer may run: its retrace is gone.
        store.reclaim_work(timeout * 4);
        let limits = SandboxLimits {
            memory_bytes: 2 << 30,
            pids: 64,
            cpus: 1.0,
            timeout,
            cpu_time: timeout,
            disk_bytes: 2 << 30,
            ..SandboxLimits::default()
        };
        Ok(Self {
            store,
            image,
            sandbox,
            limits,
            source: IndexSource::from_env(),
            serial: tokio::sync::Mutex::new(()),
        })
    }

    pub fn with_source(mut self, source: IndexSource) -> Self {
        self.source = source;
        self
    }

    pub fn store(&self) -> &PackageStore {
        &self.store
    }

    /// Puts every wheel of `closure` into the store (in order).
    pub async fn install(&self, closure: &[Pin]) -> Result<Installed, InstallError> {
        let _one_at_a_time = self.serial.lock().await;
        let missing: Vec<&Pin> = closure
            .iter()
            .filter(|p| self.store.entry(p).is_none())
            .collect();
        let mut installer_ms = 0.0;
        if !missing.is_empty() {
            let started = Instant::now();
            self.run_installer(&missing)
                .await
                .map_err(|e| self.no_space(e, &missing))?;
            installer_ms = started.elapsed().as_secs_f64() * 1e3;
        }
        let wheels = closure
            .iter()
            .map(|pin| {
                let entry = self.store.entry(pin).ok_or_else(|| InstallError::Wheel {
                    wheel: format!("{}=={}", pin.name, pin.version),
                    tail: "not in the store after installing".into(),
                })?;
                Ok(Placed {
                    entry,
                    site: self.store.site(pin),
                    store_hit: !missing.contains(&pin),
                })
            })
            .collect::<Result<_, InstallError>>()?;
        Ok(Installed {
            wheels,
            installer_ms,
        })
    }

    /// `error`, or the store's file system filling up when that is what
    /// ended the install. Asked once the installer's work directory is
    /// gone, so the free space shown is what a new attempt has.
    fn no_space(&self, error: InstallError, wheels: &[&Pin]) -> InstallError {
        let root = self.store.root();
        if error.is_refusal() || !disk::ran_out(root, &disk::chain_text(&error)) {
            return error;
        }
        let what: Vec<String> = wheels
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect();
        InstallError::NoSpace(Box::new(NoSpace::new(
            what.join(", "),
            root,
            None,
            Box::new(error),
        )))
    }

    /// One confined installer run for `wheels`; each one installed is
    /// audited and published, or refused.
    async fn run_installer(&self, wheels: &[&Pin]) -> Result<(), InstallError> {
        let scratch = Scratch::create(&self.store.work_dir(), "install")?;
        let layout = &scratch.layout;
        let rt = &layout.runtime_dir;
        let plan = serde_json::json!({
            "wheels": wheels.iter().map(|p| serde_json::json!({
                "key": PackageStore::key(p), "name": p.name,
                "version": p.version, "sha256": p.sha256,
            })).collect::<Vec<_>>(),
            "index_args": self.source.pip_args,
            "parallel": PARALLEL,
        });
        let script = scratch.write("install.py", INSTALL_PY)?;
        let plan = scratch.write("plan.json", &plan.to_string())?;
        let mut env = self.env(layout);
        if let Some(config) = user_pip_config() {
            let copy = rt.join("pip.conf");
            fs::copy(&config, &copy).io_context(|| format!("copying {}", config.display()))?;
            env.push(("PIP_CONFIG_FILE".into(), copy.into()));
        }
        let launch = LaunchCommand {
            program: self.image.python(),
            args: vec!["-I".into(), script.into(), plan.into()],
            env,
            image_dir: self.image.dir.clone(),
            ro_binds: self.source.dirs.clone(),
            network: true,
        };
        let out = oneshot::run(
            self.sandbox.as_ref(),
            &self.limits,
            &scratch,
            &launch,
            "installer",
        )
        .await
        .map_err(|e| match e {
            OneShotError::Sandbox(e) => InstallError::Sandbox(e),
            OneShotError::Io(e) => InstallError::Io(e),
            OneShotError::Timeout(limit) => InstallError::Timeout {
                secs: limit.as_secs(),
            },
        })?;
        if !out.status.success() {
            return Err(InstallError::Crashed {
                status: out.status.to_string(),
                tail: last_lines(
                    &(String::from_utf8_lossy(&out.stdout).into_owned()
                        + &String::from_utf8_lossy(&out.stderr)),
                    12,
                ),
            });
        }
        let text = fs::read_to_string(rt.join("result.json"))
            .io_context(|| "reading the installer's result".into())?;
        let results: Vec<WheelResult> =
            serde_json::from_str(&text).map_err(InstallError::Result)?;
        for (pin, result) in wheels.iter().zip(&results) {
            let wheel = format!("{}=={}", pin.name, pin.version);
            if result.status != 0 && result.log.contains("DO NOT MATCH THE HASHES") {
                return Err(InstallError::HashMismatch { wheel });
            }
            if result.status != 0 {
                return Err(InstallError::Wheel {
                    wheel,
                    tail: last_lines(&result.log, 12),
                });
            }
            let built = rt.join(&result.key);
            let findings = audit(&built.join("site")).io_context(|| format!("auditing {wheel}"))?;
            if !findings.is_empty() {
                return Err(InstallError::Refused { wheel, findings });
            }
            self.store
                .publish(pin, &built)
                .io_context(|| format!("publishing {wheel}"))?;
        }
        Ok(())
    }

    fn env(&self, layout: &KernelLayout) -> Vec<(OsString, OsString)> {
        let venv_bin = self.image.python().parent().map(Path::to_path_buf);
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            venv_bin.unwrap_or_default().display()
        );
        let mut env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), path.into()),
            ("HOME".into(), layout.home_dir.clone().into()),
            ("TMPDIR".into(), "/tmp".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("PYTHONNOUSERSITE".into(), "1".into()),
        ];
        env.extend(std::env::vars_os().filter(|(k, _)| {
            let k = k.to_string_lossy();
            (PASSED_ENV_PREFIXES.iter().any(|p| k.starts_with(p))
                && !REFUSED_PIP_ENV.contains(&k.as_ref()))
                || PASSED_ENV.contains(&k.as_ref())
        }));
        env
    }
}

impl IndexSource {
    /// pip's configuration as the harness sees it; local `PIP_FIND_LINKS`
    /// directories are made visible to the installer.
    pub fn from_env() -> Self {
        let dirs = std::env::var("PIP_FIND_LINKS")
            .unwrap_or_default()
            .split_whitespace()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_dir())
            .collect();
        Self {
            pip_args: Vec::new(),
            dirs,
        }
    }

    /// Only the wheels in `dir` (no index): for tests and air-gapped hosts.
    pub fn local(dir: &Path) -> Self {
        Self {
            pip_args: vec![
                "--no-index".into(),
                "--find-links".into(),
                dir.display().to_string(),
            ],
            dirs: vec![dir.to_path_buf()],
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct WheelResult {
    key: String,
    status: i32,
    #[allow(dead_code)]
    ms: f64,
    log: String,
}

/// The pip configuration file of the harness's user or the one named by
/// `PIP_CONFIG_FILE`: the installer's HOME is empty, so it gets a copy.
/// (Global files under /etc are visible as they are.)
fn user_pip_config() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("PIP_CONFIG_FILE").map(PathBuf::from) {
        return named.is_file().then_some(named);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    [
        xdg.join("pip").join("pip.conf"),
        home.join(".pip").join("pip.conf"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
