//! Where kernels run: retrace's own confined kernels on this machine, or a
//! Jupyter gateway's. Callers start an [`AnyKernel`] from an [`Executor`]
//! and use it the same way either way.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::gateway::{Gateway, GatewayInfo, GatewayKernel};
use super::{ExecOptions, Kernel, KernelBanner, KernelError, KernelOptions, KernelSpec, Outcome};
use super::{StateQuery, StateView};
use crate::sandbox::{Sandbox, SandboxError};

/// Where a run's kernels run.
#[derive(Clone)]
pub enum Executor {
    /// retrace's own kernels, confined by `sandbox` on this machine.
    Local(Arc<dyn Sandbox>),
    /// Kernels on a Jupyter Kernel Gateway or Enterprise Gateway.
    Gateway(Arc<Gateway>),
}

/// What records and reports say about the executor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExecutorInfo {
    #[default]
    Local,
    Gateway(GatewayInfo),
}

impl ExecutorInfo {
    pub fn is_local(&self) -> bool {
        matches!(self, ExecutorInfo::Local)
    }

    /// `local`, or `gateway <url> (kernel <name>)`.
    pub fn describe(&self) -> String {
        match self {
            ExecutorInfo::Local => "local".into(),
            ExecutorInfo::Gateway(g) => format!("gateway {} (kernel {})", g.url, g.kernel),
        }
    }
}

impl Executor {
    /// Why the `dynamic` strategy cannot run on a gateway.
    pub const LOCAL_ONLY_DYNAMIC: &'static str =
        "strategy `dynamic` runs on the local executor only: its kernels import from this \
         machine's package store, which a gateway's kernels cannot see";

    /// A kernel for `spec` (its image on this machine; its task files are
    /// copied to the gateway's kernel).
    pub async fn start(
        &self,
        spec: Arc<KernelSpec>,
        options: KernelOptions,
    ) -> Result<AnyKernel, KernelError> {
        match self {
            Executor::Local(sandbox) => Kernel::start(spec, sandbox.as_ref(), options)
                .await
                .map(AnyKernel::Local),
            Executor::Gateway(gateway) => gateway
                .start(&spec.files, options)
                .await
                .map(AnyKernel::Gateway),
        }
    }

    /// The local sandbox that images, installs and zygotes use: this
    /// executor's, or an unconfined one beside a gateway (whose kernels it
    /// never runs), which needs neither root nor cgroups on this machine.
    pub fn local_sandbox(&self, init: PathBuf) -> Result<Arc<dyn Sandbox>, SandboxError> {
        match self {
            Executor::Local(sandbox) => Ok(sandbox.clone()),
            Executor::Gateway(_) => crate::sandbox::open(true, init),
        }
    }

    pub fn info(&self) -> ExecutorInfo {
        match self {
            Executor::Local(_) => ExecutorInfo::Local,
            Executor::Gateway(gateway) => ExecutorInfo::Gateway(gateway.info().clone()),
        }
    }
}

/// A running kernel of either executor.
pub enum AnyKernel {
    Local(Kernel),
    Gateway(GatewayKernel),
}

impl AnyKernel {
    pub fn id(&self) -> &str {
        match self {
            AnyKernel::Local(k) => k.id(),
            AnyKernel::Gateway(k) => k.id(),
        }
    }

    pub fn banner(&self) -> &KernelBanner {
        match self {
            AnyKernel::Local(k) => k.banner(),
            AnyKernel::Gateway(k) => k.banner(),
        }
    }

    pub fn restarts(&self) -> u32 {
        match self {
            AnyKernel::Local(k) => k.restarts(),
            AnyKernel::Gateway(k) => k.restarts(),
        }
    }

    /// The local kernel, for what only it has (processes, its jail).
    pub fn as_local(&self) -> Option<&Kernel> {
        match self {
            AnyKernel::Local(k) => Some(k),
            AnyKernel::Gateway(_) => None,
        }
    }

    pub async fn execute(&mut self, code: &str, exec: &ExecOptions) -> Outcome {
        match self {
            AnyKernel::Local(k) => k.execute(code, exec).await,
            AnyKernel::Gateway(k) => k.execute(code, exec).await,
        }
    }

    pub async fn inspect_state(&mut self, query: &StateQuery) -> Result<StateView, KernelError> {
        match self {
            AnyKernel::Local(k) => k.inspect_state(query).await,
            AnyKernel::Gateway(k) => k.inspect_state(query).await,
        }
    }

    /// Local kernels only: a gateway's kernels cannot see this machine's
    /// package store.
    pub async fn add_import_paths(&mut self, dirs: &[PathBuf]) -> Result<(), KernelError> {
        match self {
            AnyKernel::Local(k) => k.add_import_paths(dirs).await,
            AnyKernel::Gateway(_) => Err(KernelError::Gateway(
                "a gateway's kernels cannot import from this machine's package store".into(),
            )),
        }
    }

    pub async fn interrupt(&mut self) -> Result<(), KernelError> {
        match self {
            AnyKernel::Local(k) => k.interrupt().await,
            AnyKernel::Gateway(k) => k.interrupt().await,
        }
    }

    pub async fn restart(&mut self) -> Result<(), KernelError> {
        match self {
            AnyKernel::Local(k) => k.restart().await,
            AnyKernel::Gateway(k) => k.restart().await,
        }
    }

    pub async fn shutdown(self) {
        match self {
            AnyKernel::Local(k) => k.shutdown().await,
            AnyKernel::Gateway(k) => k.shutdown().await,
        }
    }

    pub async fn discard(self) {
        match self {
            AnyKernel::Local(k) => k.discard().await,
            AnyKernel::Gateway(k) => k.discard().await,
        }
    }
}
