//! No confinement: the kernel runs as the caller in its own process group.
//! Only for `--unsafe-no-sandbox`, and every output of such a run says so.

use std::time::Instant;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::{
    Counters, Jail, KernelLayout, KillReport, LaunchCommand, Sandbox, SandboxError, SandboxInfo,
    SandboxLimits,
};

pub struct Unconfined;

impl Sandbox for Unconfined {
    fn jail(
        &self,
        _layout: &KernelLayout,
        _limits: &SandboxLimits,
    ) -> Result<Box<dyn Jail>, SandboxError> {
        Ok(Box::new(UnconfinedJail {
            pgid: std::sync::Mutex::new(None),
        }))
    }

    fn info(&self) -> SandboxInfo {
        SandboxInfo {
            confined: false,
            mode: "none".into(),
            notes: vec!["UNCONFINED: kernels ran without cgroups or namespaces".into()],
        }
    }
}

struct UnconfinedJail {
    pgid: std::sync::Mutex<Option<i32>>,
}

impl Jail for UnconfinedJail {
    fn command(
        &self,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<tokio::process::Command, SandboxError> {
        let mut cmd = tokio::process::Command::new(&launch.program);
        cmd.args(&launch.args)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&layout.work_dir)
            // Own process group: ipykernel's interrupt signals its whole group.
            .process_group(0);
        Ok(cmd)
    }

    fn counters(&self) -> Counters {
        Counters::default()
    }

    fn kill_all(&self, pid: Option<i32>) -> KillReport {
        let start = Instant::now();
        if let Some(pid) = pid {
            *self.pgid.lock().unwrap() = Some(pid);
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        KillReport {
            method: "killpg".into(),
            kill_ms: start.elapsed().as_secs_f64() * 1e3,
            survivors: self.live_processes().len(),
        }
    }

    fn live_processes(&self) -> Vec<i32> {
        // Without a cgroup, the process group is the best view we have.
        let Some(pgid) = *self.pgid.lock().unwrap() else {
            return Vec::new();
        };
        crate::util::proc::processes_in_group(pgid)
    }

    fn release(&self) -> Result<(), SandboxError> {
        Ok(())
    }

    fn uid(&self) -> Option<u32> {
        None
    }

    fn gid(&self) -> Option<u32> {
        None
    }
}
