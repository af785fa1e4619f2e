//! Confinement for real: a leaf cgroup per kernel, created and limited
//! before the process exists and joined by the child before it execs; new
//! mount, PID, network, IPC, UTS and cgroup namespaces; each kernel as its
//! own unprivileged uid (see `identity.rs`) with its own filesystem view and
//! a syscall filter (see `isolate.rs`, `seccomp.rs` and `init.rs`).

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::cgroup::{CgroupHost, CgroupLimits, KernelCgroup, Probe};
use super::identity::{IdRange, Identity};
use super::init::INIT_ARG;
use super::isolate::{IsolateSpec, PrivateDir, Rlimits};
use super::{
    fdtable, netns, tmpfs, Adoption, Counters, ForkPlan, Jail, KernelLayout, KillReport,
    LaunchCommand, Sandbox, SandboxError, SandboxInfo, SandboxLimits, Traces,
};

/// RLIMIT_NOFILE of every kernel process.
const NOFILE: u64 = 1024;
/// How long a kill waits for the namespace to end from its PID 1 before
/// the cgroup kill takes over (a fork bomb's namespace ends in milliseconds).
const TOP_DOWN_BUDGET: Duration = Duration::from_secs(2);

/// Polls `done` every millisecond until it holds (true) or `budget` ends.
fn wait_until(done: impl Fn() -> bool, budget: Duration) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= budget {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Nice value of the harness thread while it kills: the kill is waited for
/// by polling, and beside CPU-bound processes a nice-0 poller wakes late.
const KILLER_NICE: libc::c_int = -10;

/// Runs `f` with the calling thread's nice value at [`KILLER_NICE`], then
/// puts the old value back. Best effort: without the right to raise it,
/// `f` runs as it would have.
// setpriority(2)/getpriority(2) have no safe wrapper in nix; each block says why it is sound.
#[allow(unsafe_code)]
fn with_killer_priority<T>(f: impl FnOnce() -> T) -> T {
    // nix's gettid is the raw syscall: glibc's own wrapper needs glibc 2.30,
    // the released binary runs on 2.17 (docs/install.md).
    let tid = nix::unistd::gettid().as_raw() as libc::id_t;
    // SAFETY: plain syscalls with integer arguments; -1 from getpriority is
    // a valid nice value, so errno is cleared first and checked after.
    let old = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        (*libc::__errno_location() == 0).then_some(n)
    };
    let raised = old.is_some_and(|n| n > KILLER_NICE)
        // SAFETY: as above.
        && unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, KILLER_NICE) } == 0;
    let out = f();
    if let (true, Some(n)) = (raised, old) {
        // SAFETY: as above.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, tid, n);
        }
    }
    out
}

const FIX_ROOT: &str = "run retrace as root (e.g. `sudo retrace ...`, or in a delegated scope: \
     `sudo systemd-run --scope -p Delegate=yes retrace ...`), or pass --unsafe-no-sandbox to run \
     untrusted code without confinement (every output then says so)";

/// The confining sandbox: one per process is enough (it hands out a jail
/// with its own limits per kernel); more share the same host directory.
pub struct Confined {
    host: CgroupHost,
    probe: Probe,
    init_exe: PathBuf,
    ids: IdRange,
}

impl Confined {
    /// Probes the host and sets up confinement, in this order: root check,
    /// cgroup detection and probe, reclaiming groups left by a retrace that
    /// crashed, the harness's own OOM score, and the range of kernel ids. Fails closed with a message that says why and how to
    /// fix it. `init_exe` is the retrace binary (re-executed as the
    /// kernel's init).
    pub fn open(init_exe: PathBuf) -> Result<Self, SandboxError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(SandboxError::Unavailable {
                reason: "creating namespaces and switching the kernel to its own user needs root"
                    .into(),
                fix: FIX_ROOT.into(),
            });
        }
        let host = CgroupHost::detect()?;
        let probe = host.probe();
        if !probe.writable || !probe.problems.is_empty() {
            return Err(SandboxError::Unavailable {
                reason: format!(
                    "{} cgroups are not usable: {}",
                    probe.mode,
                    probe.problems.join("; ")
                ),
                fix: FIX_ROOT.into(),
            });
        }
        // Groups left by a retrace that crashed: kill and remove them.
        host.reclaim_stale();
        // The harness must never be the OOM victim; kernels get 1000.
        let _ = fs::write("/proc/self/oom_score_adj", "-500");
        let ids = IdRange::from_env()?;
        Ok(Self {
            host,
            probe,
            init_exe,
            ids,
        })
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        self.host.remove_harness_dir();
    }
}

impl Sandbox for Confined {
    fn jail(
        &self,
        layout: &KernelLayout,
        limits: &SandboxLimits,
    ) -> Result<Box<dyn Jail>, SandboxError> {
        let identity = self.ids.claim()?;
        let (uid, gid) = (identity.uid, identity.gid);
        let cgroup = self.host.create(
            &layout.id,
            &CgroupLimits {
                memory_bytes: limits.memory_bytes,
                pids: limits.pids,
                cpus: limits.cpus,
            },
        )?;
        let jail = ConfinedJail {
            cgroup,
            mounts: private_mounts(layout),
            limits: *limits,
            init_exe: self.init_exe.clone(),
            uid,
            gid,
            identity: std::sync::Mutex::new(Some(identity)),
        };
        // The kernel user creates its sockets here; the harness (root) still
        // reaches them.
        let chown = |p: &Path| {
            nix::unistd::chown(
                p,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(|e| SandboxError::io(format!("chown {}", p.display()), e.into()))
        };
        if let Err(e) = chown(&layout.runtime_dir) {
            let _ = jail.cgroup.remove();
            return Err(e);
        }
        Ok(Box::new(jail))
    }

    fn helper_group(&self, id: &str) -> Result<Option<KernelCgroup>, SandboxError> {
        // Generous: the zygote holds one interpreter with the image's
        // libraries imported; a runaway one is killed and replaced.
        let limits = CgroupLimits {
            memory_bytes: 2 << 30,
            pids: 64,
            cpus: 0.0,
        };
        Ok(Some(self.host.create(id, &limits)?))
    }

    fn info(&self) -> SandboxInfo {
        let mut notes = vec![
            format!(
                "kill: {}",
                if self.probe.cgroup_kill {
                    "cgroup.kill"
                } else {
                    "freezer"
                }
            ),
            format!("controllers: {}", self.probe.controllers.join(",")),
            format!(
                "kernel uids: range {}, one per live kernel",
                self.ids.describe()
            ),
            format!(
                "syscall filter: seccomp deny list of {} entries, EPERM (clone3: ENOSYS)",
                super::seccomp::denied_names().len()
            ),
        ];
        if !self.probe.host_has_swap {
            notes.push("host has no swap".into());
        }
        SandboxInfo {
            confined: true,
            mode: self.probe.mode.to_string(),
            notes,
        }
    }
}

struct ConfinedJail {
    cgroup: KernelCgroup,
    /// The private tmpfs mounts, as paths in the kernel's view.
    mounts: Vec<PathBuf>,
    limits: SandboxLimits,
    init_exe: PathBuf,
    uid: u32,
    gid: u32,
    /// The claim on `uid`; dropped when the jail is released.
    identity: std::sync::Mutex<Option<Identity>>,
}

impl ConfinedJail {
    fn spec(&self, launch: &LaunchCommand, layout: &KernelLayout) -> IsolateSpec {
        let base = layout
            .runtime_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| layout.runtime_dir.clone());
        let disk = self.limits.disk_bytes;
        let mut ro_binds = vec![launch.image_dir.clone()];
        ro_binds.extend(interpreter_prefix(&launch.image_dir));
        ro_binds.extend(launch.ro_binds.iter().cloned());
        let private = |path: &Path, mode: u32, seed: Option<&Path>| PrivateDir {
            path: path.to_path_buf(),
            size_bytes: disk,
            mode,
            seed: seed.map(Path::to_path_buf),
        };
        IsolateSpec {
            program: launch.program.clone(),
            args: launch
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            env: launch
                .env
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect(),
            uid: self.uid,
            gid: self.gid,
            new_root: base.join("root"),
            ro_binds,
            rw_binds: vec![layout.runtime_dir.clone()],
            private_dirs: vec![
                private(&layout.work_dir, 0o700, Some(&layout.work_dir)),
                private(&layout.home_dir, 0o700, Some(&layout.home_dir)),
                private(Path::new("/tmp"), 0o1777, None),
                private(Path::new("/dev/shm"), 0o1777, None),
            ],
            cwd: layout.work_dir.clone(),
            rlimits: Rlimits {
                nofile: NOFILE,
                // A kernel writes only to its private tmpfs mounts, each
                // bounded by its real usage; a file-size rlimit would refuse
                // sparse files (np.memmap) for their apparent size. The
                // installer also writes wheels into its runtime directory
                // on the host's disk: one file of it stays below `disk`.
                fsize: launch.network.then_some(disk),
                cpu_secs: self.limits.cpu_backstop_secs(),
            },
            oom_score_adj: 1000,
            harness_pid: std::process::id(),
            mask_host_files: !launch.network,
            adopt: false,
            private_network: !launch.network,
        }
    }

    // pre_exec (between fork and exec) is unsafe by nature; the block says why it is sound.
    #[allow(unsafe_code)]
    fn spawn_command(
        &self,
        spec: &IsolateSpec,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<tokio::process::Command, SandboxError> {
        // The kernel binds its sockets here; the harness took the directory
        // back after the last start (see `lock_runtime_dir`).
        std::os::unix::fs::lchown(&layout.runtime_dir, Some(self.uid), Some(self.gid))
            .map_err(|e| SandboxError::io(format!("chown {}", layout.runtime_dir.display()), e))?;
        // The connection file is written after the jail exists; the kernel
        // user must be able to read it. `lchown`: a link the kernel planted
        // here must not hand it the file the link points to.
        for entry in fs::read_dir(&layout.runtime_dir)
            .map_err(|e| SandboxError::io(format!("reading {}", layout.runtime_dir.display()), e))?
            .flatten()
        {
            let _ = std::os::unix::fs::lchown(entry.path(), Some(self.uid), Some(self.gid));
        }
        let spec_path = layout
            .runtime_dir
            .parent()
            .unwrap_or(&layout.runtime_dir)
            .join("jail.json");
        let text = serde_json::to_vec(spec)
            .map_err(|e| SandboxError::io("encoding the jail spec", e.into()))?;
        fs::write(&spec_path, text)
            .map_err(|e| SandboxError::io(format!("writing {}", spec_path.display()), e))?;
        fs::set_permissions(&spec_path, fs::Permissions::from_mode(0o600))
            .map_err(|e| SandboxError::io(format!("chmod {}", spec_path.display()), e))?;

        // Opened here, written in the child: only write(2) runs after fork.
        let procs: Vec<fs::File> = self
            .cgroup
            .procs_files()
            .iter()
            .map(|p| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .map_err(|e| SandboxError::io(format!("opening {}", p.display()), e))
            })
            .collect::<Result<_, _>>()?;

        let mut cmd = tokio::process::Command::new(&self.init_exe);
        cmd.arg(INIT_ARG)
            .arg(&spec_path)
            .env_clear()
            .current_dir("/");
        let network = if launch.network {
            0
        } else {
            libc::CLONE_NEWNET
        };
        // The cgroup namespace is created after the cgroup is joined, so the
        // kernel's `/proc/self/cgroup` shows `/`, not the host's path.
        let flags = libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | network
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWCGROUP;
        // SAFETY: the closure runs between fork and exec and only makes the
        // async-signal-safe calls write(2) and unshare(2).
        unsafe {
            cmd.pre_exec(move || {
                for file in &procs {
                    let fd = file.as_raw_fd();
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::unshare(flags) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(cmd)
    }

    /// PID 1 first: the namespace dies with it and the relay reaps it,
    /// so nothing is left for the host's init. Every other process of the
    /// namespace gets its SIGKILL right away too, rather than when PID 1
    /// gets to run its exit, and the group's CPU quota is lifted while they
    /// exit (see `with_cpu_unleashed`). The cgroup kill then ends whatever
    /// is left (everything, if the relay is gone or stuck).
    ///
    /// `kill_ms` runs until no process of the kernel is alive, the relay
    /// included (a zombie waiting for the harness to reap it is not alive).
    fn kill_tree(&self, pid: Option<i32>) -> KillReport {
        let start = Instant::now();
        let members = self.cgroup.pids();
        let Some((relay, pid1)) =
            pid.and_then(|relay| Some((relay, super::init::pid1_of(relay, &members)?)))
        else {
            return self.cgroup.kill_all(pid);
        };
        let _ = kill(Pid::from_raw(pid1), Signal::SIGKILL);
        let own = std::process::id() as i32;
        for &member in members
            .iter()
            .filter(|&&p| p > 1 && p != relay && p != pid1 && p != own)
        {
            let _ = kill(Pid::from_raw(member), Signal::SIGKILL);
        }
        let relay_done = || crate::util::proc::stat(relay).is_none_or(|p| p.state == 'Z');
        let relay_exited = self.cgroup.with_cpu_unleashed(|| {
            // Reaping is done by PID 1, under the kernel's cgroup; the relay
            // exits once PID 1 is reaped.
            let only_relay = || self.cgroup.pids().iter().all(|&p| p == relay);
            wait_until(only_relay, TOP_DOWN_BUDGET) && wait_until(relay_done, TOP_DOWN_BUDGET)
        });
        let kill_ms = start.elapsed().as_secs_f64() * 1e3;
        // An exited relay may be reaped (and its pid reused) at any moment:
        // no signal goes to that pid any more.
        let mut report = self.cgroup.kill_all(if relay_exited { None } else { pid });
        if relay_exited && report.survivors == 0 {
            report.method = "pid-namespace".into();
            report.kill_ms = kill_ms;
        } else {
            report.kill_ms = start.elapsed().as_secs_f64() * 1e3;
        }
        report
    }
}

/// The kernel's private tmpfs mounts (the order of `IsolateSpec::private_dirs`).
fn private_mounts(layout: &KernelLayout) -> Vec<PathBuf> {
    vec![
        layout.work_dir.clone(),
        layout.home_dir.clone(),
        PathBuf::from("/tmp"),
        PathBuf::from("/dev/shm"),
    ]
}

/// The base interpreter's prefix when it lives outside the system
/// directories (e.g. a pyenv build): the venv's python links into it.
fn interpreter_prefix(image_dir: &Path) -> Option<PathBuf> {
    let cfg = fs::read_to_string(image_dir.join("venv").join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    let prefix = home.parent()?.to_path_buf();
    let system = super::isolate::SYSTEM_DIRS
        .iter()
        .any(|d| prefix.starts_with(d));
    (!system).then_some(prefix)
}

impl Jail for ConfinedJail {
    fn command(
        &self,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<tokio::process::Command, SandboxError> {
        let spec = self.spec(launch, layout);
        self.spawn_command(&spec, launch, layout)
    }

    fn adopt(
        &self,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<Option<Adoption>, SandboxError> {
        // The installer keeps the host's network and files: cold only.
        if launch.network {
            return Ok(None);
        }
        let mut spec = self.spec(launch, layout);
        spec.adopt = true;
        let seccomp = super::seccomp::program_bytes()
            .map_err(|e| SandboxError::io("building the syscall filter", std::io::Error::other(e)))?
            .iter()
            .map(hex::encode)
            .collect();
        let mut argv = vec![spec.program.to_string_lossy().into_owned()];
        argv.extend(spec.args.iter().cloned());
        let plan = ForkPlan {
            procs: self.cgroup.procs_files(),
            uid: spec.uid,
            gid: spec.gid,
            rlimits: spec.rlimits,
            oom_score_adj: spec.oom_score_adj,
            cwd: spec.cwd.clone(),
            env: spec.env.clone(),
            argv,
            seccomp,
        };
        let command = self.spawn_command(&spec, launch, layout)?;
        Ok(Some(Adoption { command, plan }))
    }

    fn counters(&self) -> Counters {
        self.cgroup.counters()
    }

    /// Read through the kernel's own processes: every one of them is in its
    /// namespaces (the relay too for the network; only those below the
    /// init see its root).
    fn traces(&self) -> Traces {
        let pids = self.cgroup.members();
        let full_fd_tables = pids
            .iter()
            .filter(|&&pid| fdtable::size(pid).is_some_and(|n| n >= NOFILE))
            .count() as u64;
        Traces {
            net_refusals: pids
                .iter()
                .find_map(|&pid| netns::refusals(pid))
                .unwrap_or(0),
            full_fd_tables,
            full_mounts: pids
                .iter()
                .find_map(|&pid| tmpfs::full_mounts(pid, &self.mounts))
                .unwrap_or(0),
            filled_mounts: 0,
        }
    }

    fn kill_all(&self, pid: Option<i32>) -> KillReport {
        with_killer_priority(|| self.kill_tree(pid))
    }

    fn favour_start(&self) -> Box<dyn Send> {
        Box::new(self.cgroup.favour())
    }

    fn live_processes(&self) -> Vec<i32> {
        self.cgroup.members()
    }

    fn release(&self) -> Result<(), SandboxError> {
        let removed = self.cgroup.remove();
        // Nothing of the kernel is alive: its ids may go to the next one.
        if let Ok(mut identity) = self.identity.lock() {
            identity.take();
        }
        removed
    }

    fn uid(&self) -> Option<u32> {
        Some(self.uid)
    }

    fn gid(&self) -> Option<u32> {
        Some(self.gid)
    }
}
