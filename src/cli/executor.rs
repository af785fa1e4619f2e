//! `--executor` and the gateway flags shared by `run`, `exec`,
//! `tasks validate` and `sandbox check`. The gateway's address and token
//! also come from the environment variables Jupyter's own gateway client
//! reads.

use std::time::Duration;

use clap::{Args, ValueEnum};
use retrace::kernel::gateway::{Gateway, GatewayConfig, REQUEST_TIMEOUT};
use retrace::kernel::Executor;

use super::limits::LimitArgs;
use super::Failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExecutorKind {
    /// retrace's own confined kernels on this machine.
    Local,
    /// Kernels on a Jupyter Kernel Gateway or Enterprise Gateway.
    Gateway,
}

#[derive(Args, Clone, Debug)]
pub struct ExecutorArgs {
    /// Where kernels run: `local` (retrace launches and confines them) or
    /// `gateway` (a Jupyter Kernel Gateway or Enterprise Gateway; see
    /// --gateway-url).
    #[arg(long, value_enum, env = "RETRACE_EXECUTOR", default_value = "local")]
    pub executor: ExecutorKind,
    /// The gateway's base URL (`http(s)://host:port[/base]`).
    #[arg(long, env = "JUPYTER_GATEWAY_URL")]
    pub gateway_url: Option<String>,
    /// The gateway's token (sent as `Authorization: token ...`).
    #[arg(long, env = "JUPYTER_GATEWAY_AUTH_TOKEN", hide_env_values = true)]
    pub gateway_token: Option<String>,
    /// The kernelspec to run [default: the gateway's default kernel].
    #[arg(long, env = "RETRACE_GATEWAY_KERNEL")]
    pub gateway_kernel: Option<String>,
    /// Kernels alive on the gateway at once [default: the run's
    /// --concurrency; 1 for `exec`].
    #[arg(long)]
    pub gateway_concurrency: Option<usize>,
    /// Timeout of one call to the gateway's REST API, in seconds (a kernel
    /// start on Enterprise Gateway waits for its pod).
    #[arg(long, env = "JUPYTER_GATEWAY_REQUEST_TIMEOUT", value_parser = parse_seconds)]
    pub gateway_request_timeout: Option<Duration>,
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| format!("`{text}`: {e}"))
}

impl ExecutorArgs {
    /// The gateway these flags name, or `None` for the local executor.
    pub fn gateway(&self, default_concurrency: usize) -> Result<Option<GatewayConfig>, Failure> {
        if self.executor == ExecutorKind::Local {
            return Ok(None);
        }
        let url = self.gateway_url.clone().ok_or_else(|| {
            Failure::usage(anyhow::anyhow!(
                "--executor gateway needs --gateway-url (or JUPYTER_GATEWAY_URL)"
            ))
        })?;
        Ok(Some(GatewayConfig {
            url,
            token: self.gateway_token.clone(),
            kernel: self.gateway_kernel.clone(),
            concurrency: self
                .gateway_concurrency
                .unwrap_or(default_concurrency)
                .max(1),
            request_timeout: self.gateway_request_timeout.unwrap_or(REQUEST_TIMEOUT),
        }))
    }

    /// The executor for `exec`, `tasks validate` and `sandbox check`: the
    /// gateway (checked now) or the local sandbox of `limits`.
    pub async fn open(
        &self,
        limits: &LimitArgs,
        default_concurrency: usize,
    ) -> Result<Executor, Failure> {
        match self.gateway(default_concurrency)? {
            None => Ok(Executor::Local(limits.sandbox()?)),
            Some(config) => {
                let gateway = Gateway::connect(config).await.map_err(Failure::infra)?;
                Ok(Executor::Gateway(gateway))
            }
        }
    }
}

/// One line naming where kernels run, for human output.
pub fn describe(executor: &Executor) -> Option<String> {
    match executor {
        Executor::Local(_) => None,
        Executor::Gateway(_) => Some(format!(
            "executor: {} — retrace enforces the wall timeout and output caps; memory, CPU, \
             processes, disk and network are the gateway's (its kernelspec)",
            executor.info().describe()
        )),
    }
}
