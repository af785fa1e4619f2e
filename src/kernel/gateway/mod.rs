//! Kernels on a Jupyter Kernel Gateway or Enterprise Gateway: created and
//! deleted through its REST API, spoken to over its websocket with the same
//! messages and the same filters as local kernels, giving the same
//! [`Outcome`](super::Outcome).
//!
//! retrace enforces on its side of the socket what it can from there: the
//! wall timeout (interrupt, then restart) and the output caps. Memory, CPU,
//! processes, disk, network and the filesystem belong to the gateway (the
//! kernelspec, a pod's limits); every outcome says so in `enforcement`.
//! Unless the kernelspec is retrace's own (`retrace image kernelspec
//! --enterprise-gateway`): retrace's launcher confines the kernel on its
//! host as a local one and reports what the host saw ([`evidence`]), and
//! the verdicts rest on that.

mod evidence;
mod kernel;
mod rest;
mod socket;
mod start_env;
mod workdir;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;

pub use kernel::GatewayBackend;

use evidence::HostTally;

use super::{Kernel, KernelError, KernelOptions};

/// A kernel on a gateway.
pub type GatewayKernel = Kernel<GatewayBackend>;
use rest::Rest;

/// Where the gateway is and how to use it.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `http(s)://host:port[/base]`.
    pub url: String,
    pub token: Option<String>,
    /// The kernelspec to start; the gateway's default when `None`.
    pub kernel: Option<String>,
    /// Kernels alive on the gateway at once (a run's tasks wait for a slot).
    pub concurrency: usize,
    /// How long one REST call may take before it is retried.
    pub request_timeout: Duration,
}

/// How long one REST call may take: creating a kernel on Enterprise
/// Gateway waits for its pod.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

impl GatewayConfig {
    /// The gateway a run recorded (its token is never recorded).
    pub fn recorded(info: &GatewayInfo) -> GatewayConfig {
        GatewayConfig {
            url: info.url.clone(),
            token: None,
            kernel: Some(info.kernel.clone()),
            concurrency: info.concurrency,
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

/// What records and reports say about a gateway (never its token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GatewayInfo {
    /// The URL without credentials or query.
    pub url: String,
    /// The kernelspec its kernels run.
    pub kernel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_display_name: Option<String>,
    /// The server's version (`GET /api`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub concurrency: usize,
    /// The kernelspec is retrace's own: its launcher confines each kernel
    /// on its host and reports the host's evidence.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retrace_launcher: bool,
    /// Kernel processes started on each host, as retrace's launcher names
    /// its host (a restarted kernel counts again): over every session of a
    /// run, written when a session ends.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, u64>,
}

/// A gateway retrace checked and can start kernels on.
pub struct Gateway {
    rest: Rest,
    info: GatewayInfo,
    slots: Arc<Semaphore>,
    /// The hosts this session's kernels ran on.
    hosts: Arc<HostTally>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("info", &self.info).finish()
    }
}

impl Gateway {
    /// Checks that `config.url` is a Jupyter gateway that takes the token
    /// and serves the kernelspec (its default when none is named).
    pub async fn connect(config: GatewayConfig) -> Result<Arc<Gateway>, KernelError> {
        let rest = Rest::new(&config.url, config.token.clone(), config.request_timeout)?;
        let specs = rest.call(Method::GET, "/api/kernelspecs", None).await?;
        if specs.status == StatusCode::NOT_FOUND {
            return Err(KernelError::Gateway(format!(
                "{} has no /api/kernelspecs: is it a Jupyter Kernel Gateway or Enterprise Gateway?",
                config.url
            )));
        }
        let available: Vec<String> = specs
            .body
            .get("kernelspecs")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let default = specs.body.get("default").and_then(Value::as_str);
        let kernel = match (&config.kernel, default) {
            (Some(name), _) => name.clone(),
            (None, Some(name)) => name.to_string(),
            (None, None) => {
                return Err(KernelError::Gateway(format!(
                    "{} names no default kernelspec; choose one with --gateway-kernel ({})",
                    config.url,
                    available.join(", ")
                )))
            }
        };
        if !available.contains(&kernel) {
            return Err(KernelError::Gateway(format!(
                "{} has no kernelspec `{kernel}`; it has: {}",
                config.url,
                available.join(", ")
            )));
        }
        let spec = &specs.body["kernelspecs"][&kernel]["spec"];
        let kernel_display_name = spec["display_name"].as_str().map(str::to_string);
        let retrace_launcher = spec["metadata"]["retrace"]["launcher"].as_str()
            == Some(crate::pyenv::RETRACE_LAUNCHER);
        // Kernel Gateway answers `/api` with its version; a server that does
        // not is still usable.
        let version = match rest.call(Method::GET, "/api", None).await {
            Ok(a) => a
                .body
                .get("version")
                .and_then(Value::as_str)
                .map(str::to_string),
            Err(_) => None,
        };
        let concurrency = config.concurrency.max(1);
        Ok(Arc::new(Gateway {
            info: GatewayInfo {
                url: public_url(&config.url),
                kernel,
                kernel_display_name,
                version,
                concurrency,
                retrace_launcher,
                hosts: BTreeMap::new(),
            },
            rest,
            slots: Arc::new(Semaphore::new(concurrency)),
            hosts: Arc::default(),
        }))
    }

    pub fn info(&self) -> &GatewayInfo {
        &self.info
    }

    /// Kernel processes this session started on each host, from the
    /// readings of retrace's launcher (empty for other kernelspecs).
    pub fn hosts(&self) -> BTreeMap<String, u64> {
        self.hosts.counts()
    }

    /// Whether the gateway still lists kernel `id`.
    pub async fn has_kernel(&self, id: &str) -> Result<bool, KernelError> {
        let answer = self
            .rest
            .call(Method::GET, &format!("/api/kernels/{id}"), None)
            .await?;
        Ok(answer.status != StatusCode::NOT_FOUND)
    }

    /// Starts a kernel (waiting for a slot), puts `files` in its own
    /// working directory and installs retrace's probe.
    pub async fn start(
        self: &Arc<Self>,
        files: &[PathBuf],
        max_file_bytes: u64,
        options: KernelOptions,
    ) -> Result<GatewayKernel, KernelError> {
        GatewayBackend::start(self.clone(), files, max_file_bytes, options)
            .await
            .map(Kernel::new)
    }
}

/// `url` without user, password, query or fragment: what may be recorded.
fn public_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.as_str().trim_end_matches('/').to_string()
        }
        Err(_) => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_urls_carry_no_credentials() {
        assert_eq!(
            public_url("http://me:secret@gw.example:8888/base/?token=abc"),
            "http://gw.example:8888/base"
        );
        assert_eq!(public_url("http://127.0.0.1:8888"), "http://127.0.0.1:8888");
    }
}
