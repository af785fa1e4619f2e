//! Where kernels run: retrace's own confined kernels on this machine, or a
//! Jupyter gateway's. Callers start an [`AnyKernel`] from an [`Executor`]
//! and use it the same way either way.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::gateway::{Gateway, GatewayInfo};
use super::{AnyKernel, Kernel, KernelError, KernelOptions, KernelSpec};
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

    /// `local`, or `gateway <url> (kernel <name>)` with the kernels each
    /// host ran when retrace's launcher reported them.
    pub fn describe(&self) -> String {
        match self {
            ExecutorInfo::Local => "local".into(),
            ExecutorInfo::Gateway(g) if g.hosts.is_empty() => {
                format!("gateway {} (kernel {})", g.url, g.kernel)
            }
            ExecutorInfo::Gateway(g) => {
                let hosts: Vec<String> = g
                    .hosts
                    .iter()
                    .map(|(host, kernels)| format!("{host} {kernels}"))
                    .collect();
                format!(
                    "gateway {} (kernel {}; kernels by host: {})",
                    g.url,
                    g.kernel,
                    hosts.join(", ")
                )
            }
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
                .map(Kernel::into_any),
            Executor::Gateway(gateway) => gateway
                .start(&spec.files, spec.max_file_bytes, options)
                .await
                .map(Kernel::into_any),
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
