//! The local backend: retrace's own kernel process in its jail, spoken to
//! over ZMQ through the wire-capping relays. Its death is the process's
//! exit, its evidence the jail's counters and traces, its stop the kill
//! ladder (kill every process, confirm), its replacement a fresh process
//! in the same jail.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use jupyter_protocol::{
    ExecutionState, InterruptRequest, JupyterMessageContent, KernelInfoRequest, ShutdownRequest,
};

use super::backend::{Backend, Baseline, Drain, Ending, Failure, Marks, Stopped, Witness};
use super::cell_watch::Back;
use super::client::{parent_id, Channels};
use super::host_evidence::{fill_cell, HostStops};
use super::layout::{copy_task_files, create_layout, remove_layout, renew_layout};
use super::lock_watch::LockWatch;
use super::options::KernelStart;
use super::options::{KernelBanner, KernelOptions};
use super::outcome::{Enforcement, Outcome};
use super::process::KernelProcess;
use super::spec::KernelSpec;
use super::start::{blocking, launch, wait_exit};
use super::zygote::{self, StartPath, Zygote};
use super::KernelError;
use crate::sandbox::{
    Counters, Evidence, ExitInfo, Flag, Jail, KernelLayout, KillReport, Sandbox, Traces, Verdict,
};

/// Learns how the kernel's process ended, once it has.
pub(super) type ExitWatch = tokio::sync::watch::Receiver<Option<ExitInfo>>;

/// What the launcher's host evidence reads of a kernel while it runs.
pub(super) struct HostWatch {
    pub jail: Arc<dyn Jail>,
    pub exit: ExitWatch,
    /// The lock watchdog's kills so far.
    pub lock_kills: Option<Arc<AtomicU64>>,
    /// The kernel's main thread, when it can be seen.
    pub main_thread: Option<super::main_thread::MainThread>,
}

/// How long a kernel stopped by a limit may take to drain its output
/// before it is killed and replaced.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct LocalBackend {
    spec: Arc<KernelSpec>,
    options: KernelOptions,
    layout: KernelLayout,
    jail: Arc<dyn Jail>,
    /// Kills the kernel when its processes hold too many file locks;
    /// dropped (stopped) before the jail is released.
    lock_watch: Option<LockWatch>,
    process: KernelProcess,
    channels: Channels,
    banner: KernelBanner,
    restarts: u32,
    /// The jail as the last cell's evidence read it at its end, while the
    /// kernel lives on: the next cell's baseline when the kernel used no
    /// CPU since (nothing of it ran, so nothing changed), which takes the
    /// namespaces' reading off the next request's path.
    end_reading: Option<(Counters, Traces)>,
    /// The traces of that reading, taken before the counters.
    end_traces: std::sync::Mutex<Option<Traces>>,
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

impl LocalBackend {
    /// Lays the kernel out, jails it, starts its process (forked by the
    /// image's zygote when asked and it serves, else cold) and waits until
    /// it answers.
    pub(super) async fn start(
        spec: Arc<KernelSpec>,
        sandbox: &dyn Sandbox,
        options: KernelOptions,
    ) -> Result<LocalBackend, KernelError> {
        let id = format!("k{}", &uuid::Uuid::new_v4().simple().to_string()[..11]);
        let layout = create_layout(&spec, &id)?;
        let jail: Arc<dyn Jail> = match sandbox.jail(&layout, &options.limits) {
            Ok(jail) => jail.into(),
            Err(e) => {
                remove_layout(&spec, &layout);
                return Err(KernelError::Sandbox(e));
            }
        };
        // With the kernel's user known: its task files, read with its rights.
        if let Err(e) = copy_task_files(&spec, &layout, jail.as_ref()) {
            let _ = jail.release();
            remove_layout(&spec, &layout);
            return Err(e);
        }
        let started = Instant::now();
        let confined = sandbox.info().confined;
        let (zygote, refused) = match options.start {
            KernelStart::Cold => (None, None),
            KernelStart::Zygote => match blocking(|| zygote::for_spec(&spec, sandbox)) {
                Ok(z) => (Some(z), None),
                Err(e) => {
                    // Expected for unconfined kernels (the default asks for
                    // the zygote): not worth a warning per kernel.
                    if confined {
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
                Ok(LocalBackend {
                    baseline_procs: jail.live_processes().len(),
                    lock_watch: Some(LockWatch::start(jail.clone(), &id)),
                    confined,
                    spec,
                    options,
                    layout,
                    jail,
                    process,
                    channels,
                    banner,
                    restarts: 0,
                    end_reading: None,
                    end_traces: std::sync::Mutex::new(None),
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

    pub fn pid(&self) -> i32 {
        self.process.pid
    }

    pub fn layout(&self) -> &KernelLayout {
        &self.layout
    }

    /// How the running kernel process was started (the last restart's).
    pub fn start_path(&self) -> &StartPath {
        &self.start_path
    }

    /// Whether the end of a cell is checked against the kernel's main
    /// thread as the host sees it (see `main_thread.rs`), not only taken
    /// from the kernel's messages.
    pub fn sees_main_thread(&self) -> bool {
        self.process.main_thread.is_some()
    }

    /// Processes of this kernel that are alive right now.
    pub fn live_processes(&self) -> Vec<i32> {
        self.jail.live_processes()
    }

    pub fn is_alive(&self) -> bool {
        self.process.exited().is_none()
    }

    /// The kernel's own sockets and key (not the relays retrace's client
    /// reads through): what a remote gateway is given to reach it.
    pub fn connection(&self) -> &jupyter_protocol::connection_info::ConnectionInfo {
        self.channels
            .kernel_connection()
            .expect("a local kernel's channels reach its own sockets")
    }

    /// What the kernel's jail has counted so far (CPU, memory, processes,
    /// kills), and how its process ended if it has.
    pub fn host_evidence(&self) -> (crate::sandbox::Counters, Option<ExitInfo>) {
        (self.jail.counters(), self.process.exited())
    }

    /// What the launcher's host evidence reads as the kernel runs: its
    /// jail and its process's end.
    pub(super) fn host_watch(&self) -> HostWatch {
        HostWatch {
            jail: self.jail.clone(),
            exit: self.process.exit.clone(),
            lock_kills: self.lock_watch.as_ref().map(LockWatch::counter),
            main_thread: self.process.main_thread.clone(),
        }
    }

    /// The largest message the kernel may send (the relays' cap).
    pub fn max_message(&self) -> u64 {
        super::start::max_message(&self.options.output_cap)
    }

    /// The uid the kernel runs as (`None` unconfined).
    pub fn uid(&self) -> Option<u32> {
        self.jail.uid()
    }

    /// Kills every process of the kernel. The report's `kill_ms` counts from
    /// `decided` (the moment the kill was decided) when given, else from now.
    async fn kill_processes(&mut self, decided: Option<Instant>) -> KillReport {
        // The next kernel's baseline is read afresh.
        self.end_reading = None;
        let pid = self.process.pid;
        let waited_ms = decided.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
        // kill_all blocks for a few milliseconds; keep other tasks moving.
        let report = blocking(|| {
            let _held = self.lock_watch.as_ref().map(LockWatch::hold);
            self.jail.kill_all(Some(pid))
        });
        let report = KillReport {
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

    /// What the harness decided itself so far: the lock watchdog's kills.
    fn stops(&self) -> HostStops {
        HostStops {
            lock_kills: self.lock_watch.as_ref().map_or(0, LockWatch::kills),
            ..HostStops::default()
        }
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

    /// Threads of the kernel process beyond those it started with (any
    /// cell's, this one's or an earlier one's), given a little time to end:
    /// an interrupted cell's threads may be on their way out.
    async fn leftover_threads(&self) -> usize {
        let Some(main) = &self.process.main_thread else {
            return 0;
        };
        let mut extra = 0;
        for _ in 0..5 {
            extra = main.extra_threads();
            if extra == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        extra
    }
}

#[async_trait::async_trait]
impl Backend for LocalBackend {
    fn id(&self) -> &str {
        &self.layout.id
    }

    fn banner(&self) -> &KernelBanner {
        &self.banner
    }

    fn restarts(&self) -> u32 {
        self.restarts
    }

    fn options(&self) -> &KernelOptions {
        &self.options
    }

    fn channels(&mut self) -> &mut Channels {
        &mut self.channels
    }

    fn as_local(&self) -> Option<&LocalBackend> {
        Some(self)
    }

    /// A kernel that died between executions is restarted first, so the
    /// cell starts in a fresh kernel.
    async fn ready(&mut self) -> Result<bool, KernelError> {
        if self.process.exited().is_none() {
            return Ok(false);
        }
        self.restart().await.map(|()| true)
    }

    fn death(&self) -> BoxFuture<'static, ()> {
        let mut exit = self.process.exit.clone();
        Box::pin(async move {
            loop {
                if exit.changed().await.is_err() || exit.borrow().is_some() {
                    return;
                }
            }
        })
    }

    async fn interrupt(&mut self) -> Result<(), KernelError> {
        self.channels.send_control(InterruptRequest {}.into()).await
    }

    /// The relays' queues close with the process: its exit tells.
    async fn reopen(&mut self, _watched: &str, _requests: &[&str]) -> Result<bool, KernelError> {
        Ok(false)
    }

    async fn requested_exit(&mut self) -> bool {
        let mut exit = self.process.exit.clone();
        tokio::time::timeout(Duration::from_secs(2), wait_exit(&mut exit))
            .await
            .is_ok()
    }

    /// After a limit stopped a cell, the kernel may still be pushing what
    /// the cell wrote (one 64 MiB write is one message) through IOPub, and
    /// the next cell would wait behind it. IOPub is ordered: once the idle
    /// of a marker request sent now has arrived, everything published
    /// before it has gone by. A kernel that does not get there within
    /// [`SETTLE_TIMEOUT`] is killed.
    async fn drain_after_stop(&mut self) -> Drain {
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
        if done {
            return Drain::Done;
        }
        tracing::info!(
            kernel = %self.layout.id,
            "the kernel did not drain its output after the stop; killing it"
        );
        if self.process.exited().is_some() {
            Drain::Died
        } else {
            Drain::Stuck
        }
    }

    async fn stop(&mut self, decided: Option<Instant>) -> Stopped {
        Stopped {
            report: Some(self.kill_processes(decided).await),
            error: None,
        }
    }

    /// A kernel that died or was killed is replaced at once, so the next
    /// cell finds one.
    async fn replace_after_loss(&mut self, ending: &Ending) -> Option<KernelError> {
        if !ending.state_lost() {
            return None;
        }
        self.restart().await.err()
    }

    /// Kills the kernel's processes and starts a fresh kernel in the same
    /// jail, with a layout as good as new (see `renew_layout`): nothing the
    /// old kernel wrote (startup files, configuration, changed task files,
    /// links in its runtime directory) reaches the new one.
    async fn restart(&mut self) -> Result<(), KernelError> {
        tracing::info!(kernel = %self.layout.id, restarts = self.restarts, "restarting the kernel");
        self.end_reading = None;
        if self.process.exited().is_none() {
            self.kill_processes(None).await;
        }
        // A kill by the watchdog (that the old kernel died of) ends before
        // the fresh kernel joins the group.
        drop(self.lock_watch.as_ref().map(LockWatch::hold));
        renew_layout(&self.spec, &self.layout, self.jail.as_ref())?;
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

    /// `polite`: `shutdown_request`, then forced if the kernel does not
    /// exit in time; else the kill at once, which takes milliseconds.
    /// Removes the jail and the kernel's directories.
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
        self.lock_watch = None;
        self.kill_processes(None).await;
        let _ = self.jail.release();
        remove_layout(&self.spec, &self.layout);
    }
}

#[async_trait::async_trait]
impl Witness for LocalBackend {
    fn not_run(&self, failure: Failure) -> Outcome {
        let message = match failure {
            Failure::NotReady(e) => {
                format!("the kernel is dead and did not restart: {}", e.full())
            }
            Failure::NotSent(e) | Failure::Dropped(e) | Failure::HostLost(e) => e.full(),
        };
        Outcome::not_run(Verdict::InternalError, "HarnessError", message)
    }

    fn baseline(&self) -> Baseline {
        let counters = self.jail.counters();
        let traces = match self.end_reading {
            Some((end, traces)) if end.cpu_usage_usec == counters.cpu_usage_usec => traces,
            _ => self.jail.traces(),
        };
        Baseline {
            counters,
            traces,
            main_thread_runs: self.process.main_thread.as_ref().and_then(|m| m.runs()),
            stops: self.stops(),
            ..Baseline::default()
        }
    }

    fn main_thread_back(&self, _request: &str, since: &Baseline) -> Option<Back> {
        let main = self.process.main_thread.as_ref()?;
        Some(main.back_since(since.main_thread_runs))
    }

    fn cpu_used_usec(&self, since: &Baseline) -> Option<u64> {
        Some(self.jail.counters().since(&since.counters).cpu_usage_usec)
    }

    /// A status saying the kernel is going, with the cell's parent: the
    /// kernel is killed rather than trusted to go.
    fn announced_end(&self, ending: &mut Ending) {
        ending.decide_kill();
    }

    /// The traces, and the lock watchdog's kill, waited for: the kernel's
    /// death shows once the kill has begun, its report once it has ended.
    fn before_stop(&self, since: &Baseline) -> (Evidence, Option<KillReport>) {
        let traces = self.jail.traces();
        *self.end_traces.lock().unwrap_or_else(|p| p.into_inner()) = Some(traces);
        let evidence = Evidence {
            traces: traces.since(&since.traces),
            ..Evidence::default()
        };
        let kill = self.lock_watch.as_ref().and_then(|watch| {
            drop(blocking(|| watch.hold()));
            (watch.kills() > since.stops.lock_kills)
                .then(|| watch.last_kill())
                .flatten()
        });
        (evidence, kill)
    }

    async fn evidence_after(&mut self, evidence: &mut Evidence, since: &Baseline, ending: &Ending) {
        if ending.state_lost() {
            evidence.exit = Some(self.process.exited().unwrap_or_else(|| ExitInfo {
                code: None,
                signal: Some(libc::SIGKILL),
                signal_name: Some("SIGKILL".into()),
            }));
        }
        // The watchdog's kill is the harness's own decision; it ends the
        // cell through the kernel's death, after any reason already given.
        let counters = self.jail.counters();
        fill_cell(
            evidence,
            (&since.counters, &since.stops),
            (&counters, &self.stops()),
        );
        if !ending.state_lost() {
            evidence.leftover_procs = self.leftover_processes().await;
            evidence.leftover_threads = self.leftover_threads().await;
        }
        let traces = self
            .end_traces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.end_reading = traces
            .filter(|_| !ending.state_lost() && !ending.kill_needed)
            .map(|traces| (counters, traces));
    }

    fn marks(&self) -> Marks {
        Marks {
            flags: if self.confined {
                Vec::new()
            } else {
                vec![Flag::Unconfined]
            },
            kernel_uid: self.jail.uid(),
            enforcement: Enforcement::local(self.confined),
        }
    }

    fn inspectable(&self) -> Result<(), KernelError> {
        if self.process.exited().is_some() {
            return Err(KernelError::Protocol(
                "the kernel is dead; there is no state to inspect".into(),
            ));
        }
        Ok(())
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        if !self.closed {
            // Not shut down properly (panic, cancelled task): still leave no
            // process and no cgroup behind.
            self.lock_watch = None;
            self.jail.kill_all(Some(self.process.pid));
            let _ = self.jail.release();
            remove_layout(&self.spec, &self.layout);
        }
    }
}
