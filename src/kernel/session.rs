//! One kernel session: start, execute (state persists), interrupt, restart,
//! shutdown. An execution is complete when both its `execute_reply` and the
//! IOPub `idle` for its msg_id have arrived; a deadline, an output cap or a
//! dead process ends it earlier, through the kill ladder: interrupt, grace,
//! kill every process of the kernel, confirm, restart, report state lost.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jupyter_protocol::{
    ExecutionState, InterruptRequest, JupyterMessageContent, KernelInfoRequest, ShutdownRequest,
};
use tokio::time::sleep_until;

use super::capture::OutputCap;
use super::client::{parent_id, wait_for_sockets, Channels, WireCap};
use super::execution::{deadline_after, ms, send_cell, Deadline, Run, Sent};
use super::launch::{
    connection_info, create_layout, launch_command, lock_runtime_dir, renew_layout, socket_paths,
    write_connection_file, AdoptError, KernelProcess, KernelSpec, PROBE_MARKER,
};
use super::outcome::{Enforcement, ErrorInfo, Outcome};
use super::requests::{handshake, inspect, install_probe, probe_from_home, silent_request};
use super::state::{StateQuery, StateView};
use super::zygote::{self, KernelStart, StartPath, Zygote};
use super::KernelError;
use crate::sandbox::{
    classify, Classification, Counters, Evidence, HarnessReason, Jail, KernelLayout, Sandbox,
    SandboxLimits, Traces,
};
use crate::util::nofollow;

/// Session-wide settings.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// How long a kernel may take to answer `kernel_info_request`.
    pub startup_timeout: Duration,
    /// How long an interrupted execution may take to stop before the kill.
    pub interrupt_grace: Duration,
    pub output_cap: OutputCap,
    /// CPU time per execution, read from the jail's counters; `None` when
    /// the jail has no CPU accounting.
    pub cpu_time: Option<Duration>,
    /// Also wait for a pipelined `comm_info` probe before an execution
    /// counts as complete, so code that forges its own reply and idle (it
    /// holds the HMAC key) cannot end it early. The kernel answers it at
    /// its dispatcher without status messages (`probe.py`): about 0.3 ms
    /// per execution; only benchmarks of the bare protocol turn it off.
    pub verify_completion: bool,
    /// The limits of the kernel's jail (memory, processes, CPU share, disk,
    /// CPU-time backstop); ignored by an unconfined sandbox.
    pub limits: SandboxLimits,
    /// Cold (exec a new interpreter) or forked from the image's zygote.
    pub start: KernelStart,
}

impl KernelOptions {
    /// Options that enforce `limits`: the output caps always, CPU time only
    /// when the kernel is confined (it needs the cgroup's accounting).
    pub fn enforcing(limits: &SandboxLimits, confined: bool) -> Self {
        KernelOptions {
            limits: *limits,
            output_cap: OutputCap {
                bytes: limits.output_cap_bytes,
                messages: limits.output_cap_messages,
            },
            cpu_time: confined.then_some(limits.cpu_time),
            ..Default::default()
        }
    }
}

impl Default for KernelOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            interrupt_grace: Duration::from_secs(2),
            output_cap: OutputCap::default(),
            cpu_time: None,
            verify_completion: true,
            limits: SandboxLimits::default(),
            start: KernelStart::default(),
        }
    }
}

/// Per-execution settings.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Wall-clock limit of this execution.
    pub timeout: Duration,
    /// Where images are written; `None` keeps them only in the outcome.
    pub artifact_dir: Option<PathBuf>,
    /// File name prefix of this execution's artifacts.
    pub artifact_prefix: String,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            artifact_dir: None,
            artifact_prefix: "out".into(),
        }
    }
}

/// What a live kernel said about itself at startup.
#[derive(Debug, Clone, Default)]
pub struct KernelBanner {
    pub implementation: String,
    pub language_version: String,
    /// The kernel installed retrace's probe itself before it answered (a
    /// forked kernel), so no installing cell was sent.
    pub probe_preinstalled: bool,
}

pub struct Kernel {
    spec: Arc<KernelSpec>,
    options: KernelOptions,
    layout: KernelLayout,
    jail: Box<dyn Jail>,
    process: KernelProcess,
    channels: Channels,
    banner: KernelBanner,
    artifact_seq: u32,
    restarts: u32,
    /// Processes of a freshly started kernel (the kernel and its init):
    /// anything beyond that after an execution was left behind by the code.
    baseline_procs: usize,
    /// False under `--unsafe-no-sandbox`: every outcome then says so.
    confined: bool,
    closed: bool,
    /// The image's zygote when the zygote start was asked for and it serves.
    zygote: Option<Arc<Zygote>>,
    start_path: StartPath,
}

/// How long a kernel stopped by a limit may take to drain its output
/// before it is killed and replaced.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the CPU counter is read during an execution.
const CPU_POLL: Duration = Duration::from_millis(50);

impl Kernel {
    /// Starts a confined kernel and waits until it answers.
    pub async fn start(
        spec: Arc<KernelSpec>,
        sandbox: &dyn Sandbox,
        options: KernelOptions,
    ) -> Result<Kernel, KernelError> {
        let id = format!("k{}", &uuid::Uuid::new_v4().simple().to_string()[..11]);
        let layout = create_layout(&spec, &id)?;
        let jail = match sandbox.jail(&layout, &options.limits) {
            Ok(jail) => jail,
            Err(e) => {
                remove_layout(&spec, &layout);
                return Err(KernelError::Sandbox(e));
            }
        };
        let started = Instant::now();
        let (zygote, refused) = match options.start {
            KernelStart::Cold => (None, None),
            KernelStart::Zygote => match blocking(|| zygote::for_spec(&spec, sandbox)) {
                Ok(z) => (Some(z), None),
                Err(e) => {
                    // Expected for unconfined kernels (the default asks for
                    // the zygote): not worth a warning per kernel.
                    if sandbox.info().confined {
                        tracing::warn!(kernel = %id, error = %e, "the zygote cannot serve; starting cold");
                    } else {
                        tracing::debug!(kernel = %id, error = %e, "unconfined: starting cold");
                    }
                    (None, Some(e.to_string()))
                }
            },
        };
        match launch(&spec, &layout, jail.as_ref(), &options, zygote.as_deref()).await {
            Ok((process, channels, banner, path)) => {
                let start_path = match refused {
                    Some(reason) => StartPath::Fallback(reason),
                    None => path,
                };
                tracing::info!(
                    kernel = %id,
                    pid = process.pid,
                    ms = started.elapsed().as_millis() as u64,
                    start = ?start_path,
                    "kernel started"
                );
                Ok(Kernel {
                    baseline_procs: jail.live_processes().len(),
                    confined: sandbox.info().confined,
                    spec,
                    options,
                    layout,
                    jail,
                    process,
                    channels,
                    banner,
                    artifact_seq: 0,
                    restarts: 0,
                    closed: false,
                    zygote,
                    start_path,
                })
            }
            Err(e) => {
                tracing::warn!(kernel = %id, error = %e, "kernel did not start");
                jail.kill_all(None);
                let _ = jail.release();
                remove_layout(&spec, &layout);
                Err(e)
            }
        }
    }

    pub fn id(&self) -> &str {
        &self.layout.id
    }

    pub fn pid(&self) -> i32 {
        self.process.pid
    }

    pub fn layout(&self) -> &KernelLayout {
        &self.layout
    }

    pub fn banner(&self) -> &KernelBanner {
        &self.banner
    }

    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// How the running kernel process was started (the last restart's).
    pub fn start_path(&self) -> &StartPath {
        &self.start_path
    }

    /// Processes of this kernel that are alive right now.
    pub fn live_processes(&self) -> Vec<i32> {
        self.jail.live_processes()
    }

    pub fn is_alive(&self) -> bool {
        self.process.exited().is_none()
    }

    /// Runs one cell. Never fails: every way an execution can end is an
    /// outcome with a verdict.
    pub async fn execute(&mut self, code: &str, exec: &ExecOptions) -> Outcome {
        let started = Instant::now();
        let lost_before = match self.revive().await {
            Ok(lost) => lost,
            Err(message) => return internal_error(message),
        };
        let before = self.jail.counters();
        let traces_before = self.jail.traces();
        let sent = match send_cell(&mut self.channels, code, self.options.verify_completion).await {
            Ok(sent) => sent,
            Err(e) => return internal_error(e.to_string()),
        };
        let mut run = Run::new(self.options.output_cap);
        let mut ending = self.collect(&mut run, sent, exec.timeout, &before).await;
        self.settle_requested_exit(&run, &mut ending).await;
        self.settle_after_stop(&run, &mut ending).await;
        if !ending.lost() {
            run.settle_error();
        }
        let mut judged = self.judge(&run, &mut ending, &before, &traces_before).await;
        if lost_before {
            judged.flags.push(crate::sandbox::Flag::Restarted);
        }
        let restart_error = self.restart_after_kill(ending).await;
        let state_lost = lost_before || ending.lost();
        self.finish(run, exec, judged, state_lost, restart_error, started)
    }

    /// A kernel that died between executions is restarted first, so the
    /// cell starts in a fresh kernel: `Ok(true)` (its state is lost).
    async fn revive(&mut self) -> Result<bool, String> {
        if self.process.exited().is_none() {
            return Ok(false);
        }
        match self.restart().await {
            Ok(()) => Ok(true),
            Err(e) => Err(format!("the kernel is dead and did not restart: {e}")),
        }
    }

    /// Collects the cell's messages until its reply, its IOPub idle and the
    /// probe's reply have all arrived, or the kernel dies. The wall-time,
    /// CPU-time and output limits interrupt the cell; a cell still running
    /// `interrupt_grace` after its interrupt, or a kernel that announced its
    /// end, is to be killed.
    async fn collect(
        &mut self,
        run: &mut Run,
        mut sent: Sent,
        timeout: Duration,
        before: &Counters,
    ) -> Ending {
        let mut deadline = Deadline {
            at: deadline_after(timeout),
            interrupted: false,
        };
        let mut exit = self.process.exit.clone();
        let mut ending = Ending::default();
        let cpu_limit_usec = self.options.cpu_time.map(|d| d.as_micros() as u64);
        let mut cpu_tick = tokio::time::interval(CPU_POLL);
        cpu_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

        while !sent.complete(run) {
            // Biased, timers before messages: a flood of output must not
            // starve the deadline.
            tokio::select! {
                biased;
                changed = exit.changed() => {
                    if changed.is_err() || exit.borrow().is_some() {
                        ending.died = true;
                        break;
                    }
                }
                _ = cpu_tick.tick(), if cpu_limit_usec.is_some() && run.reason.is_none() => {
                    let used = self.jail.counters().since(before).cpu_usage_usec;
                    if cpu_limit_usec.is_some_and(|limit| used > limit) {
                        run.reason = Some(HarnessReason::TimeoutCpu);
                        self.interrupt_for_limit(&mut deadline).await;
                    }
                }
                _ = sleep_until(deadline.at) => {
                    if deadline.interrupted {
                        tracing::info!(
                            kernel = %self.layout.id,
                            grace_ms = self.options.interrupt_grace.as_millis() as u64,
                            "the cell outlived its interrupt; killing the kernel"
                        );
                        ending.decide_kill();
                        break;
                    }
                    run.reason.get_or_insert(HarnessReason::TimeoutWall);
                    self.interrupt_for_limit(&mut deadline).await;
                }
                Some(msg) = self.channels.iopub_rx.recv() => {
                    if parent_id(&msg) == Some(sent.msg_id.as_str()) {
                        run.on_iopub(msg);
                        if run.kernel_gone {
                            ending.decide_kill();
                            break;
                        }
                    }
                }
                Some(big) = self.channels.oversize_rx.recv() => {
                    // A message whose parent header could not be read is
                    // counted against the cell that is running.
                    if big.parent.as_deref().is_none_or(|p| p == sent.msg_id) {
                        run.capture.drop_oversize(big.bytes);
                    }
                }
                Some(msg) = self.channels.shell_rx.recv() => sent.on_shell(run, msg),
            }
            if run.capture.exceeded() && run.reason.is_none() {
                run.reason = Some(HarnessReason::OutputLimit);
                self.interrupt_for_limit(&mut deadline).await;
            }
        }
        // Output the cell's threads print from now on is not this cell's
        // (nor any later cell's): the reader drops it as it arrives.
        self.channels.unwatch_iopub();
        ending
    }

    /// After a limit stopped a cell, the kernel may still be pushing what
    /// the cell wrote (one 64 MiB write is one message) through IOPub, and
    /// the next cell would wait behind it. IOPub is ordered: once the idle
    /// of a marker request sent now has arrived, everything published
    /// before it has gone by. A kernel that does not get there within
    /// [`SETTLE_TIMEOUT`] is killed, so the next cell runs promptly in a
    /// fresh kernel and this outcome says the state was lost.
    async fn settle_after_stop(&mut self, run: &Run, ending: &mut Ending) {
        if run.reason.is_none() || ending.lost() {
            return;
        }
        let channels = &mut self.channels;
        let settled = async {
            // The limit's interrupt is sent by the kernel's control thread as
            // a SIGINT; its reply says the signal has gone out. A SIGINT
            // that lands later, inside the marker's or the next cell's
            // handler, would end that handler without a reply: the next
            // cell would hang until its own timeout.
            while let Some(msg) = channels.control_rx.recv().await {
                if matches!(msg.content, JupyterMessageContent::InterruptReply(_)) {
                    break;
                }
            }
            let marker = channels
                .send_shell_watched(KernelInfoRequest {}.into())
                .await
                .ok()?;
            while let Some(msg) = channels.iopub_rx.recv().await {
                let idle = matches!(
                    &msg.content,
                    JupyterMessageContent::Status(s) if s.execution_state == ExecutionState::Idle
                );
                if idle && parent_id(&msg) == Some(marker.as_str()) {
                    return Some(());
                }
            }
            None
        };
        let mut exit = self.process.exit.clone();
        let done = tokio::select! {
            r = tokio::time::timeout(SETTLE_TIMEOUT, settled) => matches!(r, Ok(Some(()))),
            _ = wait_exit(&mut exit) => false,
        };
        self.channels.unwatch_iopub();
        if !done {
            tracing::info!(
                kernel = %self.layout.id,
                "the kernel did not drain its output after the stop; killing it"
            );
            if self.process.exited().is_some() {
                ending.died = true;
            } else {
                ending.decide_kill();
            }
        }
    }

    /// A limit was hit: interrupt the cell and give it `interrupt_grace` to
    /// stop before the kill.
    async fn interrupt_for_limit(&mut self, deadline: &mut Deadline) {
        tracing::info!(kernel = %self.layout.id, "limit reached; interrupting the cell");
        deadline.interrupted = true;
        deadline.at = tokio::time::Instant::now() + self.options.interrupt_grace;
        let _ = self.channels.send_control(InterruptRequest {}.into()).await;
    }

    /// `quit()` / `exit()`: the kernel stops its loop just after the reply;
    /// wait for the exit so this cell, not the next, owns it.
    async fn settle_requested_exit(&mut self, run: &Run, ending: &mut Ending) {
        if !run.ask_exit || ending.died {
            return;
        }
        let mut exit = self.process.exit.clone();
        ending.died = tokio::time::timeout(Duration::from_secs(2), wait_exit(&mut exit))
            .await
            .is_ok();
        if !ending.died {
            ending.decide_kill();
        }
    }

    /// Kills the kernel if it has to go, gathers the evidence and
    /// classifies it. A kernel left with processes it must not keep is
    /// killed afterwards too (`ending.kill_needed` is then set).
    async fn judge(
        &mut self,
        run: &Run,
        ending: &mut Ending,
        before: &Counters,
        traces_before: &Traces,
    ) -> Judgement {
        let mut evidence = Evidence {
            // Read before any kill: the namespaces go with the processes.
            traces: self.jail.traces().since(traces_before),
            ..Evidence::default()
        };
        let mut kill = None;
        if ending.kill_needed {
            let report = self.kill_processes(ending.kill_decided).await;
            evidence.killed_by_harness = run.reason.is_some();
            evidence.leftover_procs = report.survivors;
            if report.survivors > 0 {
                evidence.harness_failure = true;
            }
            kill = Some(report);
        }
        if ending.lost() {
            evidence.exit = self.process.exited();
            if evidence.exit.is_none() {
                evidence.exit = Some(crate::sandbox::ExitInfo {
                    code: None,
                    signal: Some(libc::SIGKILL),
                    signal_name: Some("SIGKILL".into()),
                });
            }
        }
        evidence.harness_reason = run.reason;
        evidence.delta = self.jail.counters().since(before);
        if !ending.lost() {
            evidence.leftover_procs = self.leftover_processes().await;
        }
        evidence.truncated = run.capture.truncation().truncated;
        evidence.reply_error = run
            .error
            .as_ref()
            .map(|e| (e.ename.clone(), e.evalue.clone()));
        let Classification {
            verdict,
            mut flags,
            fired,
            suggested,
        } = classify(&evidence);
        // A fork bomb leaves copies of the kernel behind (they share its
        // sockets); only a fresh kernel is trustworthy after one.
        let interrupted_with_children = run.reason.is_some() && evidence.leftover_procs > 0;
        if (verdict == crate::sandbox::Verdict::PidsLimit || interrupted_with_children)
            && !ending.lost()
        {
            kill = Some(self.kill_processes(None).await);
            ending.decide_kill();
            flags.push(crate::sandbox::Flag::Restarted);
        }
        Judgement {
            verdict,
            flags,
            exit: evidence.exit,
            kill,
            memory_peak_bytes: evidence.delta.memory_peak_bytes,
            fired,
            suggested,
        }
    }

    /// A kernel that died or was killed is replaced at once, so the next
    /// cell finds one; the error if that failed.
    async fn restart_after_kill(&mut self, ending: Ending) -> Option<String> {
        if !ending.lost() {
            return None;
        }
        self.restart().await.err().map(|e| e.to_string())
    }

    /// The outcome: what the messages said, with the kill, the exit and the
    /// cgroup's readings; a failed restart reported as the error.
    fn finish(
        &mut self,
        run: Run,
        exec: &ExecOptions,
        judged: Judgement,
        state_lost: bool,
        restart_error: Option<String>,
        started: Instant,
    ) -> Outcome {
        let Judgement {
            verdict,
            mut flags,
            exit,
            kill,
            memory_peak_bytes,
            fired,
            suggested,
        } = judged;
        if !self.confined {
            flags.push(crate::sandbox::Flag::Unconfined);
        }
        let mut outcome = run.into_outcome(exec, &mut self.artifact_seq, verdict, flags, started);
        if let Some(message) = restart_error {
            outcome.error.get_or_insert(ErrorInfo {
                ename: "KernelRestartFailed".into(),
                evalue: message,
                traceback: Vec::new(),
            });
        }
        outcome.state_lost = state_lost;
        outcome.timings_ms.kill = kill.as_ref().map(|k| k.kill_ms);
        outcome.kill_ms = outcome.timings_ms.kill;
        outcome.kill_method = kill.map(|k| k.method);
        outcome.exit = exit;
        outcome.memory_peak_bytes = memory_peak_bytes;
        outcome.kernel_uid = self.jail.uid();
        outcome.fired = fired;
        outcome.suggested = suggested;
        outcome.enforcement = Some(Enforcement::local(self.confined));
        outcome
    }

    /// Processes beyond those of a fresh kernel. Children that are exiting
    /// get a moment to finish before they count.
    async fn leftover_processes(&self) -> usize {
        let mut extra = 0;
        for _ in 0..5 {
            extra = self
                .jail
                .live_processes()
                .len()
                .saturating_sub(self.baseline_procs);
            if extra == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        extra
    }

    /// A compact, bounded view of the state the last failure involved,
    /// computed in the kernel by retrace's own code (never by code the task
    /// defined). Silent: the namespace and the execution count are as
    /// before. Past `query.timeout` the kernel is interrupted and this
    /// returns `KernelError::StateTimeout`; the next `execute` then runs
    /// as usual (its own deadline covers a kernel that ignored the interrupt).
    pub async fn inspect_state(&mut self, query: &StateQuery) -> Result<StateView, KernelError> {
        if self.process.exited().is_some() {
            return Err(KernelError::Protocol(
                "the kernel is dead; there is no state to inspect".into(),
            ));
        }
        match inspect(&mut self.channels, query).await? {
            Some(view) => Ok(view),
            None => {
                let _ = self.channels.send_control(InterruptRequest {}.into()).await;
                Err(KernelError::StateTimeout(query.timeout))
            }
        }
    }

    /// Makes packages in `dirs` importable in the running kernel: appended
    /// to `sys.path` (after the image's own packages, which they never
    /// shadow) and the import system's caches invalidated, so the next
    /// `import` finds them without a restart. Silent, like `inspect_state`.
    pub async fn add_import_paths(&mut self, dirs: &[PathBuf]) -> Result<(), KernelError> {
        if dirs.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let literal = serde_json::to_string(&list)
            .map_err(|e| KernelError::Protocol(format!("import paths: {e}")))?;
        // One expression statement: nothing is left in the user's namespace.
        let code = format!(
            "(lambda s, i: (s.path.extend(p for p in {literal} if p not in s.path), \
             i.invalidate_caches()))(__import__('sys'), __import__('importlib'))"
        );
        let timeout = Duration::from_secs(10);
        match silent_request(&mut self.channels, &code, None, timeout).await? {
            Some(reply) if reply.status == jupyter_protocol::ReplyStatus::Ok => Ok(()),
            Some(reply) => Err(KernelError::Protocol(format!(
                "adding import paths failed: {:?}",
                reply.error
            ))),
            None => Err(KernelError::Protocol(
                "the kernel did not take the new import paths in time".into(),
            )),
        }
    }

    /// Asks the kernel to interrupt the running execution.
    pub async fn interrupt(&mut self) -> Result<(), KernelError> {
        self.channels.send_control(InterruptRequest {}.into()).await
    }

    /// Kills the kernel's processes and starts a fresh kernel in the same
    /// jail, with a layout as good as new (see `renew_layout`): nothing the
    /// old kernel wrote (startup files, configuration, changed task files,
    /// links in its runtime directory) reaches the new one. All variables
    /// are lost.
    pub async fn restart(&mut self) -> Result<(), KernelError> {
        tracing::info!(kernel = %self.layout.id, restarts = self.restarts, "restarting the kernel");
        if self.process.exited().is_none() {
            self.kill_processes(None).await;
        }
        renew_layout(&self.spec, &self.layout)?;
        let (process, channels, banner, path) = launch(
            &self.spec,
            &self.layout,
            self.jail.as_ref(),
            &self.options,
            self.zygote.as_deref(),
        )
        .await?;
        self.start_path = path;
        self.process = process;
        self.channels = channels;
        self.banner = banner;
        self.restarts += 1;
        self.baseline_procs = self.jail.live_processes().len();
        Ok(())
    }

    /// Kills every process of the kernel. The report's `kill_ms` counts from
    /// `decided` (the moment the kill was decided) when given, else from now.
    async fn kill_processes(&mut self, decided: Option<Instant>) -> crate::sandbox::KillReport {
        let pid = self.process.pid;
        let waited_ms = decided.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
        // kill_all blocks for a few milliseconds; keep other tasks moving on
        // a multi-threaded runtime (block_in_place panics on current-thread).
        let multi = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        let report = if multi {
            tokio::task::block_in_place(|| self.jail.kill_all(Some(pid)))
        } else {
            self.jail.kill_all(Some(pid))
        };
        let report = crate::sandbox::KillReport {
            kill_ms: waited_ms + report.kill_ms,
            ..report
        };
        tracing::info!(
            kernel = %self.layout.id,
            method = %report.method,
            kill_ms = report.kill_ms,
            survivors = report.survivors,
            "kernel killed"
        );
        // The waiter task reaps the process; give it a moment to do so.
        let mut exit = self.process.exit.clone();
        let _ = tokio::time::timeout(Duration::from_secs(2), wait_exit(&mut exit)).await;
        report
    }

    /// Clean shutdown (`shutdown_request`), then forced if the kernel does not
    /// exit in time. Removes the jail and the kernel's directories.
    pub async fn shutdown(mut self) {
        self.close(true).await;
    }

    /// Ends a kernel whose state nobody needs any more (a finished task):
    /// no `shutdown_request`, which ipykernel can take a second to answer
    /// and act on, but the kill, which takes milliseconds. Leaves nothing
    /// behind, as `shutdown` does.
    pub async fn discard(mut self) {
        self.close(false).await;
    }

    async fn close(&mut self, polite: bool) {
        if self.closed {
            return;
        }
        self.closed = true;
        if polite && self.process.exited().is_none() {
            let _ = self
                .channels
                .send_control(ShutdownRequest { restart: false }.into())
                .await;
            // Once shutdown_reply is in, the kernel has cleaned up; ipykernel
            // 7 can then stall for seconds flushing a stopped output thread,
            // so a short wait for the exit is all it gets before the kill.
            let replied = async {
                while let Some(msg) = self.channels.control_rx.recv().await {
                    if matches!(msg.content, JupyterMessageContent::ShutdownReply(_)) {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(1), replied).await;
            let mut exit = self.process.exit.clone();
            let _ = tokio::time::timeout(Duration::from_millis(100), wait_exit(&mut exit)).await;
        }
        // Children the kernel left behind die with it.
        self.kill_processes(None).await;
        let _ = self.jail.release();
        remove_layout(&self.spec, &self.layout);
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if !self.closed {
            // Not shut down properly (panic, cancelled task): still leave no
            // process and no cgroup behind.
            self.jail.kill_all(Some(self.process.pid));
            let _ = self.jail.release();
            remove_layout(&self.spec, &self.layout);
        }
    }
}

/// Resolves once the process has exited (or its waiter is gone).
async fn wait_exit(exit: &mut tokio::sync::watch::Receiver<Option<crate::sandbox::ExitInfo>>) {
    let _ = exit.wait_for(|e| e.is_some()).await;
}

/// Removes the kernel's directories; std's `remove_dir_all` removes a
/// symlink planted inside, never what it points to.
fn remove_layout(spec: &KernelSpec, layout: &KernelLayout) {
    let _ = std::fs::remove_dir_all(spec.root.join(&layout.id));
}

fn internal_error(message: String) -> Outcome {
    Outcome::not_run(
        crate::sandbox::Verdict::InternalError,
        "HarnessError",
        message,
    )
}

/// Runs blocking work (a zygote's answer) without stalling the other
/// tasks of a multi-threaded runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Starts the kernel process: forked by `zygote` when there is one and it
/// serves, else cold.
async fn start_process(
    jail: &dyn Jail,
    command: &crate::sandbox::LaunchCommand,
    layout: &KernelLayout,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, StartPath), KernelError> {
    let Some(zygote) = zygote else {
        return Ok((
            KernelProcess::spawn(jail, command, layout)?,
            StartPath::Cold,
        ));
    };
    let fork = |plan: &crate::sandbox::ForkPlan, pid1: i32| {
        blocking(|| zygote.fork(plan, pid1)).map_err(|e| e.to_string())
    };
    let reason =
        match KernelProcess::spawn_adopted(jail, command, layout, options.startup_timeout, fork)
            .await
        {
            Ok(Some(process)) => return Ok((process, StartPath::Zygote)),
            Ok(None) => "this sandbox cannot adopt a forked kernel".to_string(),
            Err(AdoptError::Jail(e)) => return Err(e),
            Err(AdoptError::Zygote(reason)) => {
                // Whatever the attempt started (the jail's init, half a kernel)
                // goes before the cold start in the same jail.
                blocking(|| jail.kill_all(None));
                reason
            }
        };
    tracing::warn!(kernel = %layout.id, reason = %reason, "the zygote cannot serve; starting cold");
    let process = KernelProcess::spawn(jail, command, layout)?;
    Ok((process, StartPath::Fallback(reason)))
}

/// Starts the kernel process in its jail and waits for `kernel_info_reply`.
async fn launch(
    spec: &KernelSpec,
    layout: &KernelLayout,
    jail: &dyn Jail,
    options: &KernelOptions,
    zygote: Option<&Zygote>,
) -> Result<(KernelProcess, Channels, KernelBanner, StartPath), KernelError> {
    let timeout = options.startup_timeout;
    let wire = wire_cap(spec, layout, &options.output_cap)?;
    let info = connection_info(layout);
    for path in socket_paths(&info) {
        let _ = std::fs::remove_file(path);
    }
    let conn_file = write_connection_file(layout, &info)?;
    let command = launch_command(spec, layout, &conn_file);
    let (process, path) = start_process(jail, &command, layout, options, zygote).await?;
    let mut exit = process.exit.clone();
    let handshake = async {
        // Where a start spends its time, for `-vv` and the start benchmarks.
        let began = Instant::now();
        wait_for_sockets(&socket_paths(&info)).await;
        let sockets = began.elapsed();
        let mut channels = Channels::connect(&info, &wire).await?;
        let mut banner = handshake(&mut channels).await?;
        let answered = began.elapsed();
        lock_runtime_dir(layout)?;
        // Taken away whatever the path: a forked kernel killed for a cold
        // fallback in the same jail may have left one.
        let marked = take_probe_marker(layout)?;
        banner.probe_preinstalled = path == StartPath::Zygote && marked;
        if !banner.probe_preinstalled {
            install_probe(&mut channels, &probe_from_home()).await?;
        }
        tracing::debug!(
            kernel = %layout.id,
            sockets_ms = ms(sockets),
            kernel_info_ms = ms(answered - sockets),
            probe_ms = ms(began.elapsed() - answered),
            probe_preinstalled = banner.probe_preinstalled,
            "kernel answering"
        );
        Ok::<_, KernelError>((channels, banner))
    };
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, handshake) => match r {
            Ok(r) => r,
            Err(_) => Err(KernelError::Startup {
                message: format!("no kernel_info_reply within {:?}", timeout),
                stderr: process.stderr_tail(),
            }),
        },
        _ = wait_exit(&mut exit) => {
            // Let the drain tasks collect the last words.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(KernelError::Startup {
                message: format!("the kernel process exited during startup ({:?})", process.exited()),
                stderr: process.stderr_tail(),
            })
        }
    };
    match result {
        Ok((channels, banner)) => Ok((process, channels, banner, path)),
        Err(e) => {
            jail.kill_all(Some(process.pid));
            Err(e)
        }
    }
}

/// The relays of a kernel listen in a directory of the harness beside the
/// kernel's own (which is not bound into the kernel's view), and let no
/// message through that is larger than the output cap (with room for the
/// envelope) or 4 MiB, whichever is more: anything larger would exceed the
/// cap anyway.
fn wire_cap(
    spec: &KernelSpec,
    layout: &KernelLayout,
    cap: &OutputCap,
) -> Result<WireCap, KernelError> {
    let dir = spec.root.join(&layout.id).join("wire");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| KernelError::io(format!("creating {}", dir.display()), e))?;
    Ok(WireCap {
        dir,
        max_message: cap.bytes.saturating_add(64 * 1024).max(4 << 20),
    })
}

/// Whether a forked kernel installed retrace's probe itself before it
/// answered (zygote.py's `install_probe`, the same steps as the installing
/// cell): it left [`PROBE_MARKER`] in its runtime directory, which only
/// retrace's code in the kernel could write (no task code has run, and the
/// directory is locked now). The marker is removed, so the kernel's view
/// ends as a cold kernel's. Without it, the cell installs the probe.
fn take_probe_marker(layout: &KernelLayout) -> Result<bool, KernelError> {
    let marker = layout.runtime_dir.join(PROBE_MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(_) => nofollow::remove_entry(&marker)
            .map(|()| true)
            .map_err(|e| KernelError::io(format!("removing {}", marker.display()), e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(KernelError::io(format!("reading {}", marker.display()), e)),
    }
}

/// How collecting an execution's messages ended.
#[derive(Debug, Clone, Copy, Default)]
struct Ending {
    /// The kernel process exited.
    died: bool,
    /// The kernel must be killed (and restarted).
    kill_needed: bool,
    /// When the kill was decided: its latency counts from here, so the
    /// evidence read before the kill is part of it.
    kill_decided: Option<Instant>,
}

impl Ending {
    fn decide_kill(&mut self) {
        self.kill_needed = true;
        self.kill_decided.get_or_insert_with(Instant::now);
    }

    /// The kernel's state is gone: it died or is killed.
    fn lost(self) -> bool {
        self.died || self.kill_needed
    }
}

/// What became of an execution, before its outcome is assembled.
struct Judgement {
    verdict: crate::sandbox::Verdict,
    flags: Vec<crate::sandbox::Flag>,
    exit: Option<crate::sandbox::ExitInfo>,
    /// The harness's kill, if there was one.
    kill: Option<crate::sandbox::KillReport>,
    /// From the same counter read as the verdict's deltas.
    memory_peak_bytes: Option<u64>,
    fired: Vec<crate::sandbox::Verdict>,
    suggested: Option<crate::sandbox::Verdict>,
}
