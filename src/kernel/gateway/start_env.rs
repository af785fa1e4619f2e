//! The environment a gateway kernel is started with: the run's limits as
//! the `KERNEL_*` variables gateways and retrace's launcher read, and the
//! user's variables (`--env`).

use serde_json::{json, Value};

use super::super::env::GATEWAY_VAR;
use super::super::options::KernelOptions;

/// The start request's environment: the limits, and the user's variables
/// twice: by name (a gateway passes on those it is configured to allow,
/// besides `KERNEL_*`) and together in [`GATEWAY_VAR`], which retrace's
/// launcher gives its kernel.
pub(super) fn start_env(options: &KernelOptions) -> Value {
    let mut env = requested_limits(options);
    if let Value::Object(map) = &mut env {
        if !options.env.is_empty() {
            for (k, v) in options.env.pairs() {
                map.insert(k.into(), v.into());
            }
            map.insert(GATEWAY_VAR.into(), options.env.to_gateway_var().into());
        }
    }
    env
}

/// The run's CPU and memory limits as the `KERNEL_*` variables Enterprise
/// Gateway's Kubernetes pod template makes the pod's requests and limits
/// of (Kernel Gateway passes them into the kernel's environment, where
/// nothing reads them); its process, disk, per-cell CPU time and output
/// limits as retrace's launcher reads them (EG passes every `KERNEL_*`
/// variable on to the launch; the launcher stops a cell past them on its
/// host).
fn requested_limits(options: &KernelOptions) -> Value {
    let cpus = options.limits.cpus.to_string();
    let memory = options.limits.memory_bytes.to_string();
    json!({
        "KERNEL_CPUS": cpus,
        "KERNEL_CPUS_LIMIT": cpus,
        "KERNEL_MEMORY": memory,
        "KERNEL_MEMORY_LIMIT": memory,
        "KERNEL_PIDS_LIMIT": options.limits.pids.to_string(),
        "KERNEL_DISK_LIMIT": options.limits.disk_bytes.to_string(),
        "KERNEL_CPU_TIME_LIMIT": format!("{}ms", options.limits.cpu_time.as_millis()),
        "KERNEL_OUTPUT_LIMIT": options.output_cap.bytes.to_string(),
        "KERNEL_OUTPUT_MESSAGES_LIMIT": options.output_cap.messages.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelEnv;
    use crate::sandbox::SandboxLimits;

    #[test]
    fn the_runs_limits_are_requested_as_enterprise_gateway_reads_them() {
        let limits = SandboxLimits {
            cpus: 0.5,
            memory_bytes: 512 << 20,
            ..SandboxLimits::default()
        };
        let env = requested_limits(&KernelOptions::enforcing(&limits, false));
        assert_eq!(env["KERNEL_CPUS"], "0.5");
        assert_eq!(env["KERNEL_CPUS_LIMIT"], "0.5");
        assert_eq!(env["KERNEL_MEMORY"], "536870912");
        assert_eq!(env["KERNEL_MEMORY_LIMIT"], "536870912");
        assert_eq!(env["KERNEL_PIDS_LIMIT"], limits.pids.to_string());
        assert_eq!(env["KERNEL_DISK_LIMIT"], limits.disk_bytes.to_string());
        assert_eq!(
            env["KERNEL_CPU_TIME_LIMIT"],
            format!("{}ms", limits.cpu_time.as_millis())
        );
        assert_eq!(
            env["KERNEL_OUTPUT_LIMIT"],
            limits.output_cap_bytes.to_string()
        );
    }

    #[test]
    fn the_users_variables_go_by_name_and_together_for_the_launcher() {
        let env = KernelEnv::from_pairs([("TZ".into(), "UTC".into())]).unwrap();
        let options = KernelOptions {
            env: env.clone(),
            ..KernelOptions::default()
        };
        let sent = start_env(&options);
        assert_eq!(sent["TZ"], "UTC");
        let carried = sent[GATEWAY_VAR].as_str().unwrap();
        assert_eq!(KernelEnv::from_gateway_var(carried).unwrap(), env);
        let none = start_env(&KernelOptions::default());
        assert!(none.get(GATEWAY_VAR).is_none());
    }
}
