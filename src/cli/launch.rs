//! `retrace launch`: the kernel launcher Enterprise Gateway runs on a host
//! through retrace's kernelspec (`retrace image kernelspec
//! --enterprise-gateway`). Not for people: EG fills in the kernel id, its
//! response address, its public key and the port range.

use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use retrace::kernel::env::GATEWAY_VAR;
use retrace::kernel::launcher::{self, LaunchRequest, PortRange};
use retrace::kernel::{default_kernel_root, Kernel, KernelEnv, KernelSpec, KernelStart};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::util::units::{parse_bytes, parse_duration};

use super::kernel_env::EnvArgs;
use super::limits::LimitArgs;
use super::Failure;

#[derive(Args, Clone, Debug)]
pub struct LaunchArgs {
    /// Image the kernel runs in (built on this host beforehand).
    #[arg(long, default_value = "fat")]
    pub image: ImageName,
    /// BLAS/OpenMP threads of the kernel.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub env: EnvArgs,
    /// EG's `{kernel_id}`.
    #[arg(long)]
    pub kernel_id: String,
    /// EG's `{response_address}`: where the connection is sent.
    #[arg(long)]
    pub response_address: String,
    /// EG's `{public_key}`: seals the connection.
    #[arg(long)]
    pub public_key: String,
    /// EG's `{port_range}`: `LOWER..UPPER`, or `0..0` for any port.
    #[arg(long, default_value = "0..0")]
    pub port_range: String,
}

pub async fn run(mut args: LaunchArgs) -> Result<i32, Failure> {
    detach();
    let port_range: PortRange = args.port_range.parse().map_err(Failure::usage)?;
    override_from_env(&mut args.limits).map_err(Failure::usage)?;
    if let Some(why) = args.limits.limits().below_floor() {
        return Err(Failure::usage(why));
    }
    let request = LaunchRequest {
        kernel_id: args.kernel_id.clone(),
        response_address: args.response_address.clone(),
        public_key: args.public_key.clone(),
        port_range,
    };
    let sandbox = args.limits.sandbox()?;
    eprintln!(
        "retrace launch: kernel {} | {}",
        args.kernel_id,
        super::limits::describe(&sandbox.info(), &args.limits.limits())
    );
    // A launch must answer within EG's launch timeout: no build here.
    let image = ImageStore::from_env()
        .image(args.image)
        .with_context(|| format!("image `{}` on this host", args.image))
        .map_err(Failure::infra)?;
    let spec = Arc::new(KernelSpec {
        threads: args.threads.max(1),
        ..KernelSpec::new(image, default_kernel_root())
    });
    let options = retrace::kernel::KernelOptions {
        start: args.limits.kernel_start.unwrap_or(KernelStart::Cold),
        env: args.env.with(client_env().map_err(Failure::usage)?)?,
        ..args.limits.kernel_options()
    };
    let kernel = Kernel::start(spec, sandbox.as_ref(), options.clone())
        .await
        .with_context(|| format!("starting kernel {}", args.kernel_id))
        .map_err(Failure::infra)?;
    let report = launcher::serve(kernel, &options, &request)
        .await
        .with_context(|| format!("serving kernel {} to the gateway", args.kernel_id))
        .map_err(Failure::infra)?;
    // One line for the host's kernel log (EG keeps the launcher's output).
    println!(
        "{}",
        serde_json::to_string(&report).map_err(Failure::infra)?
    );
    Ok(0)
}

/// Refuses flags `retrace launch` would refuse, before they go into a
/// kernelspec where only a failed kernel start would tell.
pub fn check_limit_flags(flags: &[String]) -> anyhow::Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    struct Launch {
        #[command(flatten)]
        args: LaunchArgs,
    }
    let filled = [
        "--kernel-id",
        "k",
        "--response-address",
        "a",
        "--public-key",
        "p",
    ];
    let argv = std::iter::once("retrace-launch")
        .chain(flags.iter().map(String::as_str))
        .chain(filled);
    Launch::try_parse_from(argv)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("flags for `retrace launch`: {e}"))
}

/// EG starts the launcher with `nohup ... &` from an SSH session: a session
/// of its own makes its pid its process group (EG may signal the group),
/// and nothing is read from the SSH channel.
fn detach() {
    let _ = nix::unistd::setsid();
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(null);
    }
}

/// The client's `KERNEL_MEMORY` / `KERNEL_CPUS` (EG passes the start
/// request's `KERNEL_*` variables to the launch), or their `_LIMIT` forms,
/// and retrace's `KERNEL_PIDS_LIMIT`, `KERNEL_DISK_LIMIT`,
/// `KERNEL_CPU_TIME_LIMIT`, `KERNEL_OUTPUT_LIMIT` and
/// `KERNEL_OUTPUT_MESSAGES_LIMIT` override the kernelspec's flags.
fn override_from_env(limits: &mut LimitArgs) -> anyhow::Result<()> {
    fn var(names: [&'static str; 2]) -> Option<(&'static str, String)> {
        names
            .into_iter()
            .find_map(|n| std::env::var(n).ok().map(|v| (n, v)))
    }
    if let Some((name, value)) = var(["KERNEL_MEMORY_LIMIT", "KERNEL_MEMORY"]) {
        // Kubernetes writes binary units as `512Mi`.
        let text = value.trim();
        let text = text
            .strip_suffix('i')
            .filter(|t| t.ends_with(['K', 'M', 'G', 'T']))
            .unwrap_or(text);
        limits.memory = parse_bytes(text).with_context(|| format!("{name}={value}"))?;
    }
    if let Some((name, value)) = var(["KERNEL_CPUS_LIMIT", "KERNEL_CPUS"]) {
        limits.cpus = positive(name, &value, "cores")?;
    }
    if let Some((name, value)) = var(["KERNEL_PIDS_LIMIT", "KERNEL_PIDS"]) {
        limits.pids = positive(name, &value, "processes")?;
    }
    if let Some((name, value)) = var(["KERNEL_DISK_LIMIT", "KERNEL_DISK"]) {
        limits.disk = parse_bytes(&value).with_context(|| format!("{name}={value}"))?;
    }
    // Per cell, enforced on this host (a gateway's client cannot watch
    // them in time).
    if let Some((name, value)) = var(["KERNEL_CPU_TIME_LIMIT", "KERNEL_CPU_TIME"]) {
        limits.cpu_time = parse_duration(&value).with_context(|| format!("{name}={value}"))?;
    }
    if let Some((name, value)) = var(["KERNEL_OUTPUT_LIMIT", "KERNEL_OUTPUT"]) {
        limits.output_cap = parse_bytes(&value).with_context(|| format!("{name}={value}"))?;
    }
    if let Some((name, value)) = var(["KERNEL_OUTPUT_MESSAGES_LIMIT", "KERNEL_OUTPUT_MESSAGES"]) {
        limits.output_messages = positive(name, &value, "messages")?;
    }
    Ok(())
}

/// The variables the client's start request gave the kernel
/// ([`GATEWAY_VAR`]; EG passes `KERNEL_*` variables on to the launch).
fn client_env() -> anyhow::Result<Vec<(String, String)>> {
    let Ok(text) = std::env::var(GATEWAY_VAR) else {
        return Ok(Vec::new());
    };
    let env = KernelEnv::from_gateway_var(&text)?;
    Ok(env.pairs().map(|(k, v)| (k.into(), v.into())).collect())
}

/// A positive number of `what` from variable `name`.
fn positive<T>(name: &str, value: &str, what: &str) -> anyhow::Result<T>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    value
        .trim()
        .parse::<T>()
        .ok()
        .filter(|n| *n > T::default())
        .with_context(|| format!("{name}={value}: expected a number of {what}"))
}
