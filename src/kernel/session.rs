//! One kernel session: start, execute (state persists), interrupt, restart,
//! shutdown. An execution is complete when both its `execute_reply` and the
//! IOPub `idle` for its msg_id have arrived; a deadline, an output cap or a
//! dead process ends it earlier, through the kill ladder: interrupt, grace,
//! kill every process of the kernel, confirm, restart, report state lost.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use console::strip_ansi_codes;
use jupyter_protocol::{
    CommInfoRequest, ExecuteRequest, ExecutionState, ExpressionResult, InterruptRequest,
    JupyterMessage, JupyterMessageContent, KernelInfoRequest, Media, ReplyStatus, ShutdownRequest,
    Stdio,
};
use serde_json::{Map, Value};
use tokio::time::sleep_until;

use super::artifact;
use super::capture::{Capture, OutputCap, Stream};
use super::client::{parent_id, wait_for_sockets, Channels, WireCap};
use super::launch::{
    connection_info, create_layout, launch_command, lock_runtime_dir, renew_layout, socket_paths,
    write_connection_file, AdoptError, KernelProcess, KernelSpec, PROBE_FILE, PROBE_MARKER,
};
use super::outcome::{
    choose_answer, Artifact, Bundle, ErrorInfo, ExecStatus, Outcome, ProbeReport, Timings,
};
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
    /// holds the HMAC key) cannot end it early. Costs about 0.5 ms per
    /// execution; only benchmarks of the bare protocol turn it off.
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

/// Reads this cell's answer after every cell with retrace's own serializer
/// (`probe.py`, installed at kernel start): never a custom `__repr__`, never
/// an `answer` left by an earlier cell.
const ANSWER_EXPRESSION: &str = "__retrace_answer__()";
/// The key of that expression in `user_expressions`.
const ANSWER_KEY: &str = "retrace";
/// The comm target the completion probe asks about: none is registered
/// under it, so the reply is empty.
const PROBE_COMM_TARGET: &str = "retrace.completion";

/// How long installing `probe.py` into a fresh kernel may take.
const PROBE_INSTALL_TIMEOUT: Duration = Duration::from_secs(20);

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
        let sent = match self.send_cell(code).await {
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

    /// Sends the cell, then the completion probe behind it.
    async fn send_cell(&mut self, code: &str) -> Result<Sent, KernelError> {
        let request = ExecuteRequest {
            code: code.to_string(),
            silent: false,
            store_history: true,
            user_expressions: Some(HashMap::from([(
                ANSWER_KEY.into(),
                ANSWER_EXPRESSION.into(),
            )])),
            allow_stdin: false,
            // One request at a time: nothing queued may be aborted after an error.
            stop_on_error: false,
        };
        // Watched: from here on only this cell's IOPub messages are queued;
        // anything left from before (a thread still printing) is dropped.
        let msg_id = self.channels.send_shell_watched(request.into()).await?;

        // The shell handles requests one at a time, so the reply to this
        // probe cannot come before the cell has really finished: code in the
        // kernel holds the HMAC key and can forge its own reply and idle.
        // `comm_info` for a target nobody registers: of the requests that
        // wait for the cell (comm messages do not), the one whose reply is
        // cheapest to build.
        let probe_id = if self.options.verify_completion {
            let probe = CommInfoRequest {
                target_name: Some(PROBE_COMM_TARGET.into()),
            };
            Some(self.channels.send_shell(probe.into()).await?)
        } else {
            None
        };
        Ok(Sent { msg_id, probe_id })
    }

    /// Collects the cell's messages until its reply, its IOPub idle and the
    /// probe's reply have all arrived, or the kernel dies. The wall-time,
    /// CPU-time and output limits interrupt the cell; a cell still running
    /// `interrupt_grace` after its interrupt, or a kernel that announced its
    /// end, is to be killed.
    async fn collect(
        &mut self,
        run: &mut Run,
        sent: Sent,
        timeout: Duration,
        before: &Counters,
    ) -> Ending {
        let Sent {
            msg_id,
            mut probe_id,
        } = sent;
        let mut deadline = Deadline {
            at: deadline_after(timeout),
            interrupted: false,
        };
        let mut exit = self.process.exit.clone();
        let mut ending = Ending::default();
        let cpu_limit_usec = self.options.cpu_time.map(|d| d.as_micros() as u64);
        let mut cpu_tick = tokio::time::interval(CPU_POLL);
        cpu_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

        while !(run.reply.is_some() && run.idle && probe_id.is_none()) {
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
                    if parent_id(&msg) == Some(msg_id.as_str()) {
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
                    if big.parent.as_deref().is_none_or(|p| p == msg_id) {
                        run.capture.drop_oversize(big.bytes);
                    }
                }
                Some(msg) = self.channels.shell_rx.recv() => {
                    match parent_id(&msg) {
                        Some(id) if id == msg_id => run.on_shell(msg),
                        Some(id) if probe_id.as_deref() == Some(id) => probe_id = None,
                        _ => {}
                    }
                }
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

    /// The outcome: artifacts saved, the answer read (from a cell that
    /// succeeded only), a failed restart reported as the error.
    fn finish(
        &mut self,
        mut run: Run,
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
        let artifacts = self.save_artifacts(&mut run, exec);
        let status = if verdict == crate::sandbox::Verdict::Ok {
            ExecStatus::Ok
        } else {
            ExecStatus::Error
        };
        let stdout = run.capture.stdout();
        let answer = if status == ExecStatus::Ok {
            let report = run.probe.take().and_then(|t| ProbeReport::parse(&t));
            choose_answer(report, &run.results, &stdout)
        } else {
            None
        };
        let truncation = run.capture.truncation();
        let kernel_busy = run.busy_span_ms();
        let mut error = run.error.take();
        if let Some(message) = restart_error {
            error.get_or_insert(ErrorInfo {
                ename: "KernelRestartFailed".into(),
                evalue: message,
                traceback: Vec::new(),
            });
        }
        let kill_ms = kill.as_ref().map(|k| k.kill_ms);
        let kill_method = kill.map(|k| k.method);
        Outcome {
            status,
            verdict,
            flags: {
                if !self.confined {
                    flags.push(crate::sandbox::Flag::Unconfined);
                }
                flags.sort();
                flags.dedup();
                flags.iter().map(|f| f.as_str().to_string()).collect()
            },
            execution_count: run.execution_count,
            stdout,
            stderr: run.capture.stderr(),
            results: run.results,
            displays: run.displays,
            error,
            answer,
            artifacts,
            truncated: truncation.truncated,
            truncation,
            timings_ms: Timings {
                total: started.elapsed().as_secs_f64() * 1e3,
                kernel_busy,
                kill: kill_ms,
            },
            kill_ms,
            kill_method,
            exit,
            state_lost,
            memory_peak_bytes,
            kernel_uid: self.jail.uid(),
            policy: None,
            fired,
            suggested,
        }
    }

    fn save_artifacts(&mut self, run: &mut Run, exec: &ExecOptions) -> Vec<Artifact> {
        let mut saved = Vec::new();
        for (mime, payload) in run.images.drain(..) {
            let stem = format!("{}-{:03}", exec.artifact_prefix, self.artifact_seq);
            self.artifact_seq += 1;
            let result = match &exec.artifact_dir {
                Some(dir) => artifact::save(dir, &stem, &mime, &payload),
                None => Ok(Artifact {
                    path: String::new(),
                    mime: mime.clone(),
                    bytes: payload.len() as u64,
                    base64: Some(payload),
                }),
            };
            match result {
                Ok(a) => saved.push(a),
                Err(e) => run
                    .capture
                    .push_stream(Stream::Stderr, &format!("[retrace] {e}\n")),
            }
        }
        saved
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
        let body = serde_json::to_string(query)
            .map_err(|e| KernelError::Protocol(format!("state query: {e}")))?;
        let expression = format!("__retrace_inspect__('{}')", hex::encode(body));
        let expressions = HashMap::from([(ANSWER_KEY.to_string(), expression)]);
        let reply =
            match silent_request(&mut self.channels, "", Some(expressions), query.timeout).await? {
                Some(reply) => reply,
                None => {
                    let _ = self.channels.send_control(InterruptRequest {}.into()).await;
                    return Err(KernelError::StateTimeout(query.timeout));
                }
            };
        let text = match reply
            .user_expressions
            .as_ref()
            .and_then(|e| e.get(ANSWER_KEY))
        {
            Some(ExpressionResult::Ok { data, .. }) => data.content.iter().find_map(|m| match m {
                jupyter_protocol::MediaType::Plain(text) => Some(text.clone()),
                _ => None,
            }),
            Some(ExpressionResult::Error { ename, evalue, .. }) => {
                return Err(KernelError::Protocol(format!(
                    "state inspection failed: {ename}: {}",
                    strip_ansi_codes(evalue)
                )))
            }
            None => None,
        };
        text.as_deref()
            .and_then(|t| t.strip_prefix(super::outcome::ENVELOPE_PREFIX))
            .and_then(|t| serde_json::from_str(t).ok())
            .ok_or_else(|| KernelError::Protocol("state inspection returned no view".into()))
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

/// A MIME bundle as the JSON object it is on the wire.
fn media_map(data: &Media) -> Map<String, Value> {
    match serde_json::to_value(data) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// `now + d`, saturated: a huge timeout from a caller must not overflow.
fn deadline_after(d: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + crate::util::units::MAX_DURATION)
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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
            install_probe(&mut channels).await?;
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

/// Sends `kernel_info_request` until the reply and an IOPub message have both
/// arrived, so the IOPub subscription is known to be live.
async fn handshake(channels: &mut Channels) -> Result<KernelBanner, KernelError> {
    let mut banner = None;
    let mut iopub_live = false;
    loop {
        channels.send_shell(KernelInfoRequest {}.into()).await?;
        let resend = tokio::time::Instant::now() + Duration::from_millis(250);
        loop {
            tokio::select! {
                Some(msg) = channels.shell_rx.recv() => {
                    if let JupyterMessageContent::KernelInfoReply(reply) = msg.content {
                        banner = Some(KernelBanner {
                            implementation: format!("{} {}", reply.implementation, reply.implementation_version),
                            language_version: reply.language_info.version.clone(),
                            probe_preinstalled: false,
                        });
                    }
                }
                Some(_) = channels.iopub_rx.recv() => iopub_live = true,
                _ = sleep_until(resend) => break,
            }
            if iopub_live {
                if let Some(b) = banner.take() {
                    // The handshake's own status messages: from now on the
                    // reader drops them, and what is queued goes now (each
                    // cell's watched send discards stale ones anyway). No
                    // wait for the quiet after them: 5 ms of every start.
                    channels.unwatch_iopub();
                    while channels.iopub_rx.try_recv().is_ok() {}
                    return Ok(b);
                }
            }
        }
    }
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

/// Installs retrace's kernel-side code (`probe.py`) before any task code
/// runs, so it captures pristine builtins. Silent: no execution count, no
/// history, no names in the user's namespace.
/// The source comes from a file in the kernel's HOME (written there with the
/// layout, removed by this cell): ipykernel hashes and tokenizes every cell
/// in pure Python, which took longer for the source sent inline than
/// running it. A zygote kernel finds that source already compiled by its
/// zygote (`sys._retrace_probe`, source → code, taken away here).
async fn install_probe(channels: &mut Channels) -> Result<(), KernelError> {
    let code = format!(
        "exec((lambda os, sys: (lambda src: sys.__dict__.pop('_retrace_probe', {{}}).get(src) \
         or compile(src, '<retrace>', 'exec'))((lambda p: (open(p, encoding='utf-8').read(), os.remove(p))[0])\
         (os.path.join(os.environ['HOME'], '{PROBE_FILE}'))))(__import__('os'), __import__('sys')), \
         {{'__name__': '_retrace', '__builtins__': dict(__import__('builtins').__dict__)}})"
    );
    let reply = silent_request(channels, &code, None, PROBE_INSTALL_TIMEOUT)
        .await?
        .ok_or_else(|| KernelError::Protocol("installing the answer reader timed out".into()))?;
    if reply.status != ReplyStatus::Ok {
        let detail = reply
            .error
            .map(|e| format!("{}: {}", e.ename, strip_ansi_codes(&e.evalue).into_owned()))
            .unwrap_or_default();
        return Err(KernelError::Protocol(format!(
            "installing the answer reader failed: {detail}"
        )));
    }
    Ok(())
}

/// Sends a silent `execute_request` (no history, no execution count) and
/// waits for its reply; `Ok(None)` when `timeout` passes first.
async fn silent_request(
    channels: &mut Channels,
    code: &str,
    expressions: Option<HashMap<String, String>>,
    timeout: Duration,
) -> Result<Option<jupyter_protocol::ExecuteReply>, KernelError> {
    let request = ExecuteRequest {
        code: code.to_string(),
        silent: true,
        store_history: false,
        user_expressions: expressions,
        allow_stdin: false,
        stop_on_error: false,
    };
    let msg_id = channels.send_shell(request.into()).await?;
    let wait = async {
        while let Some(msg) = channels.shell_rx.recv().await {
            if parent_id(&msg) == Some(msg_id.as_str()) {
                if let JupyterMessageContent::ExecuteReply(reply) = msg.content {
                    return Some(reply);
                }
            }
        }
        None
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Some(reply)) => Ok(Some(reply)),
        Ok(None) => Err(KernelError::Protocol("the shell channel closed".into())),
        Err(_) => Ok(None),
    }
}

/// The requests of one execution.
struct Sent {
    msg_id: String,
    /// The completion probe's msg_id until its reply arrives; `None` when
    /// completion is not verified.
    probe_id: Option<String>,
}

/// The end of one execution's wall time, then, once a limit interrupted
/// the cell, the end of its grace.
struct Deadline {
    at: tokio::time::Instant,
    interrupted: bool,
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

/// The state of one execution while its messages arrive.
struct Run {
    capture: Capture,
    reply: Option<ReplyStatus>,
    idle: bool,
    busy_at: Option<chrono::DateTime<chrono::Utc>>,
    idle_at: Option<chrono::DateTime<chrono::Utc>>,
    execution_count: Option<u64>,
    results: Vec<Bundle>,
    displays: Vec<Bundle>,
    images: Vec<(String, String)>,
    error: Option<ErrorInfo>,
    /// `text/plain` of the answer reader's envelope.
    probe: Option<String>,
    reason: Option<HarnessReason>,
    kernel_gone: bool,
    /// The reply asked the frontend to exit (`quit()`).
    ask_exit: bool,
}

impl Run {
    fn new(cap: OutputCap) -> Self {
        Self {
            capture: Capture::new(cap),
            reply: None,
            idle: false,
            busy_at: None,
            idle_at: None,
            execution_count: None,
            results: Vec::new(),
            displays: Vec::new(),
            images: Vec::new(),
            error: None,
            probe: None,
            reason: None,
            kernel_gone: false,
            ask_exit: false,
        }
    }

    /// A cell the kernel replied `ok` to raised nothing of its own: an
    /// `error` message on IOPub then came from elsewhere (a failing event
    /// callback an earlier cell registered, or code publishing one) and is
    /// kept as a line of stderr, not as the cell's error.
    fn settle_error(&mut self) {
        if self.reply != Some(ReplyStatus::Ok) || self.reason.is_some() {
            return;
        }
        if let Some(e) = self.error.take() {
            let line = format!(
                "[retrace] error output the cell did not raise: {}: {}\n",
                e.ename, e.evalue
            );
            self.capture.push_stream(Stream::Stderr, &line);
        }
    }

    fn busy_span_ms(&self) -> Option<f64> {
        let span = self.idle_at? - self.busy_at?;
        span.num_microseconds().map(|us| us as f64 / 1e3)
    }

    fn on_iopub(&mut self, msg: JupyterMessage) {
        match msg.content {
            JupyterMessageContent::Status(status) => match status.execution_state {
                ExecutionState::Busy => self.busy_at = Some(msg.header.date),
                ExecutionState::Idle => {
                    self.idle = true;
                    self.idle_at = Some(msg.header.date);
                }
                ExecutionState::Dead
                | ExecutionState::Restarting
                | ExecutionState::AutoRestarting
                | ExecutionState::Terminating => self.kernel_gone = true,
                _ => {}
            },
            JupyterMessageContent::StreamContent(stream) => {
                let which = match stream.name {
                    Stdio::Stdout => Stream::Stdout,
                    Stdio::Stderr => Stream::Stderr,
                };
                self.capture.push_stream(which, &stream.text);
            }
            JupyterMessageContent::DisplayData(display) => self.on_display(display.data),
            JupyterMessageContent::UpdateDisplayData(display) => self.on_display(display.data),
            JupyterMessageContent::ExecuteResult(result) => {
                self.execution_count = Some(result.execution_count.0 as u64);
                let bundle = self.take_images(media_map(&result.data));
                self.results.push(bundle);
            }
            // The first one: the cell's own traceback comes before anything
            // a post-run callback of an earlier cell shows.
            JupyterMessageContent::ErrorOutput(error) if self.error.is_none() => {
                self.error = Some(ErrorInfo {
                    ename: error.ename,
                    evalue: strip_ansi_codes(&error.evalue).into_owned(),
                    traceback: error
                        .traceback
                        .iter()
                        .map(|l| strip_ansi_codes(l).into_owned())
                        .collect(),
                });
            }
            _ => {}
        }
    }

    fn on_display(&mut self, data: Media) {
        let map = media_map(&data);
        // Payload bytes (base64 images included), without re-encoding.
        let size = map
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or_else(|| v.to_string().len(), str::len))
            .sum();
        if self.capture.admit_display(size) {
            let bundle = self.take_images(map);
            self.displays.push(bundle);
        }
    }

    /// Moves image payloads out of a bundle into the artifact queue; the
    /// bundle keeps a placeholder so the display is still visible.
    fn take_images(&mut self, mut map: Map<String, Value>) -> Bundle {
        for (mime, _) in artifact::IMAGE_TYPES {
            if let Some(Value::String(payload)) = map.remove(mime) {
                self.images.push((mime.to_string(), payload));
                map.insert(mime.to_string(), Value::String("<artifact>".into()));
            }
        }
        Bundle { data: map }
    }

    fn on_shell(&mut self, msg: JupyterMessage) {
        if let JupyterMessageContent::ExecuteReply(reply) = msg.content {
            self.execution_count = Some(reply.execution_count.0 as u64);
            self.ask_exit = reply
                .payload
                .iter()
                .any(|p| matches!(p, jupyter_protocol::Payload::AskExit { .. }));
            if let Some(expressions) = &reply.user_expressions {
                if let Some(ExpressionResult::Ok { data, .. }) = expressions.get(ANSWER_KEY) {
                    self.probe = data.content.iter().find_map(|m| match m {
                        jupyter_protocol::MediaType::Plain(text) => Some(text.clone()),
                        _ => None,
                    });
                }
            }
            if reply.status != ReplyStatus::Ok {
                if let Some(e) = reply.error {
                    // The reply names the exception the cell raised; an
                    // error message on IOPub may be another one's.
                    let evalue = strip_ansi_codes(&e.evalue).into_owned();
                    let same = self
                        .error
                        .as_ref()
                        .is_some_and(|have| have.ename == e.ename && have.evalue == evalue);
                    if !same {
                        self.error = Some(ErrorInfo {
                            ename: e.ename,
                            evalue,
                            traceback: e
                                .traceback
                                .iter()
                                .map(|l| strip_ansi_codes(l).into_owned())
                                .collect(),
                        });
                    }
                } else if reply.status == ReplyStatus::Aborted && self.error.is_none() {
                    self.error = Some(ErrorInfo {
                        ename: "Aborted".into(),
                        evalue: "the kernel aborted the execution".into(),
                        traceback: Vec::new(),
                    });
                }
            }
            self.reply = Some(reply.status);
        }
    }
}
