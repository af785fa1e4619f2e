//! One kernel session over any [`Backend`]: execute (state persists),
//! inspect, interrupt, restart, shutdown. An execution is complete when
//! both its `execute_reply` and the IOPub `idle` for its msg_id have
//! arrived; a deadline, an output cap or a dead kernel ends it earlier,
//! through the backend's stop: interrupt, grace, stop (the local kill
//! ladder, a gateway's restart), replace, report state lost.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::backend::{Backend, Drain, Ending, Failure};
use super::cell_watch::{Action, CellWatch, End, EndClaim, Event, Limits, CPU_POLL, END_POLL};
use super::client::{is_server_status, parent_id};
use super::execution::{send_cell, Run, Sent};
use super::gateway::GatewayBackend;
use super::local::LocalBackend;
use super::options::{ExecOptions, KernelBanner, KernelOptions};
use super::outcome::{ErrorInfo, Outcome};
use super::requests::{inspect, silent_request};
use super::spec::KernelSpec;
use super::state::{StateQuery, StateView};
use super::KernelError;
use crate::sandbox::{classify, Classification, ExitInfo, Flag, KillReport, Sandbox, Verdict};

/// A running kernel; `Kernel` alone is a local one, [`AnyKernel`] one of
/// either executor.
pub struct Kernel<B: ?Sized = LocalBackend> {
    artifact_seq: u32,
    backend: Box<B>,
}

/// A kernel of whichever executor started it.
pub type AnyKernel = Kernel<dyn Backend>;

/// What became of an execution, before its outcome is assembled.
struct Judgement {
    verdict: Verdict,
    flags: Vec<Flag>,
    exit: Option<ExitInfo>,
    /// The harness's kill, if there was one.
    kill: Option<KillReport>,
    /// A stop that was a restart and failed.
    stop_error: Option<KernelError>,
    /// From the same counter read as the verdict's deltas.
    memory_peak_bytes: Option<u64>,
    /// CPU microseconds used by the cell, from the same read.
    cpu_usec: u64,
    fired: Vec<Verdict>,
    suggested: Option<Verdict>,
    /// Output was lost on the way: past the cap, dropped by a server, or
    /// emptied on a gateway kernel's host.
    truncated: bool,
}

impl Kernel<LocalBackend> {
    /// Starts a confined kernel and waits until it answers.
    pub async fn start(
        spec: Arc<KernelSpec>,
        sandbox: &dyn Sandbox,
        options: KernelOptions,
    ) -> Result<Kernel, KernelError> {
        LocalBackend::start(spec, sandbox, options)
            .await
            .map(Kernel::new)
    }

    /// Resolves when the kernel's process has exited.
    pub fn died(&self) -> futures_util::future::BoxFuture<'static, ()> {
        self.backend.death()
    }
}

/// What only a local kernel has (its process, its jail, how it started)
/// is its backend's.
impl std::ops::Deref for Kernel<LocalBackend> {
    type Target = LocalBackend;

    fn deref(&self) -> &LocalBackend {
        &self.backend
    }
}

impl<B: Backend + 'static> Kernel<B> {
    pub(super) fn new(backend: B) -> Self {
        Kernel {
            artifact_seq: 0,
            backend: Box::new(backend),
        }
    }

    /// The same kernel as an [`AnyKernel`].
    pub fn into_any(self) -> AnyKernel {
        Kernel {
            artifact_seq: self.artifact_seq,
            backend: self.backend,
        }
    }
}

impl From<Kernel<LocalBackend>> for AnyKernel {
    fn from(kernel: Kernel<LocalBackend>) -> Self {
        kernel.into_any()
    }
}

impl From<Kernel<GatewayBackend>> for AnyKernel {
    fn from(kernel: Kernel<GatewayBackend>) -> Self {
        kernel.into_any()
    }
}

impl<B: Backend + ?Sized> Kernel<B> {
    /// The kernel's id: retrace's own, or the gateway's.
    pub fn id(&self) -> &str {
        self.backend.id()
    }

    pub fn banner(&self) -> &KernelBanner {
        self.backend.banner()
    }

    pub fn restarts(&self) -> u32 {
        self.backend.restarts()
    }

    /// The local kernel's backend, for what only it has (processes, its
    /// jail, how it started).
    pub fn as_local(&self) -> Option<&LocalBackend> {
        self.backend.as_local()
    }

    /// Runs one cell. Never fails: every way an execution can end is an
    /// outcome with a verdict (a lost gateway's says so in `infra_error`).
    pub async fn execute(&mut self, code: &str, exec: &ExecOptions) -> Outcome {
        if let Some(refused) = super::code_size::refusal(code) {
            return refused;
        }
        let started = Instant::now();
        let lost_before = match self.backend.ready().await {
            Ok(lost) => lost,
            Err(e) => return self.backend.not_run(Failure::NotReady(e)),
        };
        let before = self.backend.baseline();
        let verify = self.backend.options().verify_completion;
        let cap = self.backend.options().output_cap;
        let mut sent = match send_cell(self.backend.channels(), code, verify, cap).await {
            Ok(sent) => sent,
            Err(e) => return self.backend.not_run(Failure::NotSent(e)),
        };
        let mut run = Run::new(self.backend.options().output_cap);
        let mut ending = self
            .collect(&mut run, &mut sent, exec.timeout, &before)
            .await;
        if let Some(e) = ending.lost.take() {
            // The kernel may still be there; the next cell finds out.
            return self.backend.not_run(Failure::Dropped(e));
        }
        self.settle_requested_exit(&run, &mut ending).await;
        self.settle_after_stop(&run, &mut ending).await;
        if ending.died {
            if let Some(e) = self.backend.host_lost(&ending, &before).await {
                return self.backend.not_run(Failure::HostLost(e));
            }
        }
        if !ending.state_lost() {
            run.settle_error();
        }
        let mut judged = self.judge(&run, &mut ending, &before).await;
        if lost_before {
            judged.flags.push(Flag::Restarted);
        }
        let replace_error = self.backend.replace_after_loss(&ending).await;
        let restart_error = judged.stop_error.take().or(replace_error);
        let state_lost = lost_before || ending.state_lost();
        self.finish(
            run,
            exec,
            judged,
            &ending,
            state_lost,
            restart_error,
            started,
        )
    }

    /// Collects the cell's messages until its reply, its IOPub idle and the
    /// probe's reply have all arrived, or the kernel dies. The wall-time,
    /// CPU-time and output limits interrupt the cell; a cell still running
    /// `interrupt_grace` after its interrupt, or a kernel that announced its
    /// end, is to be stopped. A dropped transport is reopened when the
    /// backend can.
    async fn collect(
        &mut self,
        run: &mut Run,
        sent: &mut Sent,
        timeout: Duration,
        before: &super::backend::Baseline,
    ) -> Ending {
        let counts_cpu = self.backend.cpu_used_usec(before).is_some();
        let mut watch = CellWatch::new(Limits::client(self.backend.options(), timeout, counts_cpu));
        // The CPU time is counted from `before`.
        watch.on(Event::Requested(sent.msg_id.clone()), Instant::now(), &|| 0);
        let mut death = self.backend.death();
        let mut ending = Ending {
            request: sent.msg_id.clone(),
            ..Ending::default()
        };
        let mut cpu_tick = tokio::time::interval(CPU_POLL);
        cpu_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let (mut iopub_open, mut shell_open) = (true, true);
        let mut main_tick = tokio::time::interval(END_POLL);
        main_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut end = EndClaim::default();

        'cell: loop {
            // `quit()` ends the loop instead: its exit is waited for.
            if sent.complete(run)
                && (run.ask_exit || {
                    let back = self.backend.main_thread_back(&sent.msg_id, before);
                    end.look(back, Instant::now()) == End::Believed
                })
            {
                break;
            }
            let mut dropped = false;
            let mut event = None;
            let wake = watch.next_wake().map(tokio::time::Instant::from_std);
            let channels = self.backend.channels();
            // Biased, timers before messages: a flood of output must not
            // starve the deadline.
            tokio::select! {
                biased;
                _ = &mut death => {
                    ending.died = true;
                    break;
                }
                _ = cpu_tick.tick(), if watch.watches_cpu() => event = Some(Event::CpuTick),
                _ = sleep_until(wake.unwrap_or_else(tokio::time::Instant::now)), if wake.is_some() => {
                    event = Some(Event::Tick);
                }
                // Before IOPub: a dropped message's report must not lose
                // to the idle behind it.
                Some(big) = channels.oversize_rx.recv() => {
                    // A message whose parent header could not be read is
                    // counted against the cell that is running.
                    let ours = big.parent.as_deref().is_none_or(|p| p == sent.msg_id);
                    if ours && big.is_output() {
                        run.capture.drop_oversize(big.bytes);
                    }
                }
                msg = channels.iopub_rx.recv(), if iopub_open => match msg {
                    Some(msg) if parent_id(&msg) == Some(sent.msg_id.as_str()) => {
                        ending.output_dropped |= self.backend.output_dropped(&msg);
                        run.on_iopub(msg);
                        if run.kernel_gone {
                            self.backend.announced_end(&mut ending);
                            break;
                        }
                    }
                    Some(msg) if is_server_status(&msg) => {
                        ending.died = true;
                        break;
                    }
                    Some(_) => {}
                    None => {
                        dropped = true;
                        iopub_open = false;
                    }
                },
                msg = channels.shell_rx.recv(), if shell_open => match msg {
                    Some(msg) => sent.on_shell(run, msg),
                    None => {
                        dropped = true;
                        shell_open = false;
                    }
                },
                _ = main_tick.tick(), if end.claimed() => {}
            }
            if dropped {
                let mut requests = vec![sent.msg_id.as_str()];
                requests.extend(sent.probe_id.as_deref());
                match self.backend.reopen(&sent.msg_id, &requests).await {
                    Ok(true) => (iopub_open, shell_open) = (true, true),
                    Ok(false) => {}
                    Err(e) => {
                        ending.lost = Some(e);
                        break;
                    }
                }
            }
            // Output a server dropped went past the output it lets
            // through: the same limit as retrace's own cap.
            let over =
                (run.capture.exceeded() || ending.output_dropped).then_some(Event::OverCap(None));
            for event in event.into_iter().chain(over) {
                let backend = &self.backend;
                let actions = watch.on(event, Instant::now(), &|| {
                    backend.cpu_used_usec(before).unwrap_or_default()
                });
                if self.carry_out(actions, run).await {
                    ending.decide_kill();
                    break 'cell;
                }
            }
        }
        ending.end_forged = end.forged(Instant::now());
        // Output the cell's threads print from now on is not this cell's
        // (nor any later cell's): the reader drops it as it arrives.
        self.backend.channels().unwatch_iopub();
        run.replaced_text = self.backend.channels().replaced_text();
        ending
    }

    /// What the watch decided: a limit's interrupt (the first limit is the
    /// cell's reason), or, for a cell that outlived it, `true`: the kernel
    /// is to be stopped.
    async fn carry_out(&mut self, actions: Vec<Action>, run: &mut Run) -> bool {
        for action in actions {
            match action {
                Action::Interrupt { limit, .. } => {
                    run.reason.get_or_insert(limit.reason());
                    tracing::info!(kernel = %self.backend.id(), "limit reached; interrupting the cell");
                    if let Err(e) = self.backend.interrupt().await {
                        tracing::warn!(kernel = %self.backend.id(), error = %e, "the interrupt did not go out");
                    }
                }
                Action::Kill { .. } => {
                    tracing::info!(
                        kernel = %self.backend.id(),
                        grace_ms = self.backend.options().interrupt_grace.as_millis() as u64,
                        "the cell outlived its interrupt; stopping the kernel"
                    );
                    return true;
                }
            }
        }
        false
    }

    /// `quit()` / `exit()`: the kernel stops its loop just after the reply;
    /// wait for its end so this cell, not the next, owns it.
    async fn settle_requested_exit(&mut self, run: &Run, ending: &mut Ending) {
        if !run.ask_exit || ending.died {
            return;
        }
        ending.died = self.backend.requested_exit().await;
        if !ending.died {
            ending.decide_kill();
        }
    }

    /// After a limit stopped a cell, what it wrote still on its way is
    /// drained (see the backend); a kernel that does not get there is
    /// stopped, so the next cell runs promptly in a fresh kernel.
    async fn settle_after_stop(&mut self, run: &Run, ending: &mut Ending) {
        if run.reason.is_none() || ending.state_lost() {
            return;
        }
        match self.backend.drain_after_stop().await {
            Drain::Done => {}
            Drain::Died => ending.died = true,
            Drain::Stuck => ending.decide_kill(),
        }
    }

    /// Stops the kernel if it has to go, gathers the evidence and
    /// classifies it. A kernel left with processes it must not keep is
    /// stopped afterwards too (`ending.kill_needed` is then set).
    async fn judge(
        &mut self,
        run: &Run,
        ending: &mut Ending,
        before: &super::backend::Baseline,
    ) -> Judgement {
        let (mut evidence, mut kill) = self.backend.before_stop(before);
        let mut stop_error = None;
        if ending.kill_needed {
            let stopped = self.backend.stop(ending.kill_decided).await;
            evidence.killed_by_harness = run.reason.is_some();
            if let Some(report) = &stopped.report {
                evidence.leftover_procs = report.survivors;
                evidence.harness_failure = report.survivors > 0;
            }
            kill = stopped.report;
            stop_error = stopped.error;
        }
        ending.asked_exit = run.ask_exit;
        evidence.harness_reason = run.reason;
        self.backend
            .evidence_after(&mut evidence, before, ending)
            .await;
        evidence.truncated |= run.capture.truncation().truncated || ending.output_dropped;
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
        // sockets), a cell interrupted for a limit may leave threads that
        // go on reading the kernel's own queues (the next cell's request
        // among them), and a kernel whose messages lied about the end of a
        // cell has code in its own message handling: only a fresh kernel
        // is trustworthy after any of them.
        let interrupted_with_children =
            run.reason.is_some() && (evidence.leftover_procs > 0 || evidence.leftover_threads > 0);
        let untrusted =
            verdict == Verdict::PidsLimit || interrupted_with_children || ending.end_forged;
        if untrusted && !ending.state_lost() {
            let stopped = self.backend.stop(None).await;
            kill = stopped.report.or(kill);
            stop_error = stopped.error.or(stop_error);
            ending.decide_kill();
            flags.push(Flag::Restarted);
        }
        Judgement {
            verdict,
            flags,
            exit: evidence.exit,
            kill,
            stop_error,
            memory_peak_bytes: evidence.delta.memory_peak_bytes,
            cpu_usec: evidence.delta.cpu_usage_usec,
            fired,
            suggested,
            truncated: evidence.truncated,
        }
    }

    /// The outcome: what the messages said, with the kill, the exit and the
    /// backend's readings; a failed restart reported as the error.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        run: Run,
        exec: &ExecOptions,
        judged: Judgement,
        ending: &Ending,
        state_lost: bool,
        restart_error: Option<KernelError>,
        started: Instant,
    ) -> Outcome {
        let Judgement {
            verdict,
            mut flags,
            exit,
            kill,
            memory_peak_bytes,
            cpu_usec,
            fired,
            suggested,
            truncated,
            ..
        } = judged;
        let marks = self.backend.marks();
        flags.extend(marks.flags);
        if ending.end_forged {
            flags.push(Flag::ForgedEnd);
        }
        let mut outcome = run.into_outcome(exec, &mut self.artifact_seq, verdict, flags, started);
        if let Some(e) = restart_error {
            outcome.error.get_or_insert(ErrorInfo {
                ename: "KernelRestartFailed".into(),
                evalue: e.full(),
                traceback: Vec::new(),
            });
        }
        if truncated {
            outcome.truncated = true;
            outcome.truncation.truncated = true;
        }
        outcome.state_lost = state_lost;
        outcome.timings_ms.kill = kill.as_ref().map(|k| k.kill_ms);
        outcome.kill_ms = outcome.timings_ms.kill;
        outcome.kill_method = kill.map(|k| k.method);
        outcome.exit = exit;
        outcome.memory_peak_bytes = memory_peak_bytes;
        // Counters read zero where nothing watched them: no reading then.
        let cpu_watched = marks
            .enforcement
            .enforced
            .iter()
            .any(|l| l == "timeout_cpu");
        outcome.timings_ms.cpu = cpu_watched.then(|| cpu_usec as f64 / 1e3);
        outcome.kernel_uid = marks.kernel_uid;
        outcome.fired = fired;
        outcome.suggested = suggested;
        outcome.enforcement = Some(marks.enforcement);
        outcome
    }

    /// A compact, bounded view of the state the last failure involved,
    /// computed in the kernel by retrace's own code (never by code the task
    /// defined). Silent: the namespace and the execution count are as
    /// before. Past `query.timeout` the kernel is interrupted and this
    /// returns `KernelError::StateTimeout`; the next `execute` then runs
    /// as usual (its own deadline covers a kernel that ignored the interrupt).
    pub async fn inspect_state(&mut self, query: &StateQuery) -> Result<StateView, KernelError> {
        self.backend.inspectable()?;
        match inspect(self.backend.channels(), query).await? {
            Some(view) => Ok(view),
            None => {
                let _ = self.backend.interrupt().await;
                Err(KernelError::StateTimeout(query.timeout))
            }
        }
    }

    /// Makes packages in `dirs` importable in the running kernel: appended
    /// to `sys.path` (after the image's own packages, which they never
    /// shadow) and the import system's caches invalidated, so the next
    /// `import` finds them without a restart. Silent, like `inspect_state`.
    /// Local kernels only: a gateway's cannot see this machine's package
    /// store.
    pub async fn add_import_paths(&mut self, dirs: &[PathBuf]) -> Result<(), KernelError> {
        // Only a local kernel sees this machine's directories.
        if self.backend.as_local().is_none() {
            return Err(KernelError::LocalOnly(
                "a gateway's kernels cannot import from this machine's package store",
            ));
        }
        if dirs.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let literal = serde_json::to_string(&list).map_err(|source| KernelError::Encode {
            what: "import paths",
            source,
        })?;
        // One expression statement: nothing is left in the user's namespace.
        let code = format!(
            "(lambda s, i: (s.path.extend(p for p in {literal} if p not in s.path), \
             i.invalidate_caches()))(__import__('sys'), __import__('importlib'))"
        );
        let timeout = Duration::from_secs(10);
        match silent_request(self.backend.channels(), &code, None, timeout).await? {
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

    /// Runs harness code that sets a kernel up (the symbolic checker's):
    /// silent, as retrace's own requests are (no execution count, no
    /// history, no output kept); an error or `timeout` is an error naming
    /// `what`.
    pub async fn set_up(
        &mut self,
        code: &str,
        timeout: Duration,
        what: &str,
    ) -> Result<(), KernelError> {
        super::requests::silent_ok(self.backend.channels(), code, timeout, what).await
    }

    /// Asks the kernel to interrupt the running execution.
    pub async fn interrupt(&mut self) -> Result<(), KernelError> {
        self.backend.interrupt().await
    }

    /// A fresh kernel process in place of this one, with nothing the old
    /// one wrote; all variables are lost.
    pub async fn restart(&mut self) -> Result<(), KernelError> {
        self.backend.restart().await
    }

    /// Clean shutdown, forced if the kernel does not go in time; leaves
    /// nothing behind.
    pub async fn shutdown(mut self) {
        self.backend.close(true).await;
    }

    /// Ends a kernel whose state nobody needs any more (a finished task):
    /// no polite request, which can take a second to be answered and acted
    /// on. Leaves nothing behind, as `shutdown` does.
    pub async fn discard(mut self) {
        self.backend.close(false).await;
    }
}
