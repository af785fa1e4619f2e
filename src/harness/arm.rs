//! A run's arms: each is the run's spec with some fields changed, with
//! the kernels of its package strategy.

use std::sync::Arc;

use super::error::HarnessError;
use super::math_checker::MathChecker;
use super::packages::Packages;
use crate::kernel::{default_kernel_root, KernelSpec};
use crate::model::ModelClient;
use crate::pyenv::dynamic::{Allowlist, CellScanner, Installer, PackageStore};
use crate::pyenv::{FixedImage, Image, Strategy};
use crate::record::{ArmSpec, InstallOn, RunSpec};
use crate::repair::masking::MaskCheck;
use crate::sandbox::Sandbox;

/// One arm of a run: its spec (the run's with the arm's fields changed),
/// its model, and how its kernels start and get packages.
pub struct Arm {
    /// What records call the arm (their `arm`).
    pub name: String,
    pub spec: RunSpec,
    pub model: Arc<dyn ModelClient>,
    pub kernels: ArmKernels,
    /// Arms with the same key share round 0 ([`ArmSpec::round0_key`]).
    pub round0_key: String,
    /// Compares a repair with the code it repairs, in a jail with the
    /// arm's own image.
    pub masking: Arc<MaskCheck>,
    /// Decides LaTeX answers: the run's one symbolic checker, when its
    /// suite has such tasks.
    pub math: Option<Arc<MathChecker>>,
    /// The false-alarm control (`--false-alarm`): after round 0 the model
    /// is told its answer is wrong (see `false_alarm.rs`).
    pub false_alarm: bool,
}

impl Arm {
    /// The arm with its `kernels` ([`ArmKernels::for_arm`]) and its `model`.
    pub fn new(
        arm: ArmSpec,
        kernels: ArmKernels,
        model: Arc<dyn ModelClient>,
        sandbox: &Arc<dyn Sandbox>,
        math: Option<Arc<MathChecker>>,
    ) -> Arm {
        let round0_key = arm.round0_key();
        let masking = Arc::new(MaskCheck::new(
            kernels.kernel.image.clone(),
            sandbox.clone(),
            PackageStore::from_env().work_dir(),
        ));
        let ArmSpec { name, spec } = arm;
        Arm {
            name,
            spec,
            model,
            kernels,
            round0_key,
            masking,
            math,
            false_alarm: false,
        }
    }
}

/// How the kernels of one package strategy start and get packages.
#[derive(Clone)]
pub struct ArmKernels {
    pub strategy: Strategy,
    pub kernel: Arc<KernelSpec>,
    /// The `dynamic` strategy's installs (`None` for the others).
    pub packages: Option<Arc<Packages>>,
    /// The other strategies' install lines, answered with a notice
    /// (`None` for `dynamic`).
    pub fixed: Option<Arc<FixedImage>>,
}

/// How long one installer run may take (a cold download of a large
/// closure included).
const INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

impl ArmKernels {
    /// The kernels of `strategy` with its built `image`; a `dynamic` arm
    /// gets the installer and the package store, read-only in its kernels.
    /// The kernels of `arm`, whose strategy's image is `image` built.
    pub fn for_arm(
        arm: &RunSpec,
        image: Image,
        sandbox: &Arc<dyn Sandbox>,
    ) -> Result<ArmKernels, HarnessError> {
        ArmKernels::new(
            arm.strategy(),
            image,
            arm.execution.limits.threads(),
            arm.packages.install_on,
            sandbox,
        )
    }

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
                scanner: Arc::new(CellScanner::new(
                    image.clone(),
                    sandbox.clone(),
                    PackageStore::from_env().work_dir(),
                )),
                install_on,
            };
            kernel.ro_binds.push(packages.store_dir().to_path_buf());
            Some(Arc::new(packages))
        } else {
            None
        };
        let fixed = packages.is_none().then(|| {
            let scanner =
                CellScanner::new(image, sandbox.clone(), PackageStore::from_env().work_dir());
            Arc::new(FixedImage::new(scanner, strategy))
        });
        Ok(ArmKernels {
            strategy,
            kernel: Arc::new(kernel),
            packages,
            fixed,
        })
    }
}
