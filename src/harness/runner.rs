//! The scheduler that runs a run's tasks concurrently, each as an
//! [`Episode`] with its own fresh confined kernel.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::episode::Episode;
use super::error::HarnessError;
use super::journal::Journal;
use super::packages::Packages;
use super::progress::Progress;
use crate::kernel::{default_kernel_root, Executor, KernelOptions, KernelSpec};
use crate::model::ModelClient;
use crate::pyenv::dynamic::{Allowlist, Installer, PackageStore};
use crate::pyenv::Image;
use crate::pyenv::Strategy;
use crate::record::{ArmSpec, AttemptRecord, InstallOn, RunConfig, RunSpec};
use crate::repair::prompt::Templates;
use crate::sandbox::Sandbox;
use crate::task::Task;

/// One arm of a run: its spec (the run's with the arm's fields changed)
/// and how its kernels start and get packages.
pub struct Arm {
    /// What records call the arm (their `strategy`).
    pub name: String,
    pub spec: RunSpec,
    pub kernels: ArmKernels,
}

impl Arm {
    /// The arm with its built `image`.
    pub fn new(
        arm: ArmSpec,
        image: Image,
        sandbox: &Arc<dyn Sandbox>,
    ) -> Result<Arm, HarnessError> {
        let ArmSpec { name, spec } = arm;
        let kernels = ArmKernels::new(
            spec.strategy(),
            image,
            spec.execution.limits.threads(),
            spec.packages.install_on,
            sandbox,
        )?;
        Ok(Arm {
            name,
            spec,
            kernels,
        })
    }
}

/// How the kernels of one package strategy start and get packages.
pub struct ArmKernels {
    pub strategy: Strategy,
    pub kernel: Arc<KernelSpec>,
    /// The `dynamic` strategy's installs (`None` for the others).
    pub packages: Option<Arc<Packages>>,
}

/// How long one installer run may take (a cold download of a large
/// closure included).
const INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

impl ArmKernels {
    /// The kernels of `strategy` with its built `image`; a `dynamic` arm
    /// gets the installer and the package store, read-only in its kernels.
    pub fn new(
        strategy: Strategy,
        image: Image,
        threads: u32,
        install_on: InstallOn,
        sandbox: &Arc<dyn Sandbox>,
    ) -> Result<ArmKernels, HarnessError> {
        let mut kernel = KernelSpec {
            threads,
            ..KernelSpec::new(image.clone(), default_kernel_root())
        };
        let packages = if strategy.installs() {
            let installer = Installer::new(
                PackageStore::from_env(),
                image.clone(),
                sandbox.clone(),
                INSTALL_TIMEOUT,
            )
            .map_err(|source| HarnessError::Installer {
                strategy: strategy.to_string(),
                source,
            })?;
            let packages = Packages {
                allowlist: Allowlist::embedded().map_err(|source| HarnessError::Allowlist {
                    strategy: strategy.to_string(),
                    source,
                })?,
                installer: Arc::new(installer),
                scanner_python: image.python(),
                install_on,
            };
            kernel.ro_binds.push(packages.store_dir().to_path_buf());
            Some(Arc::new(packages))
        } else {
            None
        };
        Ok(ArmKernels {
            strategy,
            kernel: Arc::new(kernel),
            packages,
        })
    }
}

/// Everything a task needs, shared by all tasks of a run.
pub struct Runner {
    pub config: Arc<RunConfig>,
    /// The run directory (journal, artifacts).
    pub out_dir: PathBuf,
    pub model: Arc<dyn ModelClient>,
    pub sandbox: Arc<dyn Sandbox>,
    /// Where the tasks' kernels run (locally in `sandbox`, or a gateway).
    pub executor: Executor,
    /// One per package strategy, in `--strategy` order; every task runs
    /// in every arm.
    pub arms: Vec<Arm>,
    pub kernel_options: KernelOptions,
    pub templates: Arc<Templates>,
    pub journal: Arc<Journal>,
    pub progress: Arc<Progress>,
}

impl Runner {
    /// Runs every task (concurrently, up to the configured number).
    /// Stops early when `cancel` turns true (Ctrl-C): running tasks are
    /// aborted and awaited, so their kernels are killed before this returns;
    /// their unfinished rounds are redone by `--resume`.
    pub async fn run_all(
        self: Arc<Self>,
        tasks: Vec<(usize, Task)>,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<(), HarnessError> {
        let slots = Arc::new(Semaphore::new(
            self.config.spec.execution.concurrency.max(1),
        ));
        let mut running = tokio::task::JoinSet::new();
        let result = async {
            for (arm, task) in tasks {
                let permit = tokio::select! {
                    p = slots.clone().acquire_owned() => p.map_err(|_| HarnessError::Interrupted)?,
                    _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
                };
                let runner = self.clone();
                running.spawn(async move {
                    let result = runner.run_task(arm, &task).await;
                    drop(permit);
                    result
                });
                while let Some(done) = running.try_join_next() {
                    done??;
                }
            }
            loop {
                tokio::select! {
                    done = running.join_next() => match done {
                        Some(done) => done??,
                        None => return Ok(()),
                    },
                    _ = cancel.wait_for(|c| *c) => return Err(HarnessError::Interrupted),
                }
            }
        }
        .await;
        running.abort_all();
        while running.join_next().await.is_some() {}
        result
    }

    pub(super) fn append(&self, record: &AttemptRecord) -> Result<(), HarnessError> {
        self.journal.append(record)?;
        self.progress.on_record(record);
        Ok(())
    }

    /// Where a task's plots go (per arm when the run has several).
    pub(super) fn artifact_dir(&self, arm: &Arm, task_id: &str) -> PathBuf {
        let dir = self.out_dir.join("artifacts");
        let dir = if self.arms.len() > 1 {
            dir.join(&arm.name)
        } else {
            dir
        };
        dir.join(sanitize(task_id))
    }

    /// All rounds of one task in one arm.
    pub async fn run_task(&self, arm: usize, task: &Task) -> Result<(), HarnessError> {
        Episode::begin(self, &self.arms[arm], task)?.run().await
    }
}

/// A task id as a directory name.
pub fn sanitize(id: &str) -> PathBuf {
    PathBuf::from(
        id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>(),
    )
}
