//! Where a kernel runs, as the one execution state machine
//! ([`Kernel`](super::Kernel)) sees it: how a cell is interrupted, how the
//! kernel's death is learned, how it is stopped and replaced, and which
//! evidence there is. The local backend has a process, a jail and the kill
//! ladder; a gateway backend has the gateway's REST API and its status
//! messages. A backend whose launcher reports host evidence (Enterprise
//! Gateway's remote hosts) fills it in through [`Witness::evidence_after`].

use std::time::Instant;

use futures_util::future::BoxFuture;
use jupyter_protocol::JupyterMessage;

use super::cell_watch::Back;
use super::client::Channels;
use super::host_evidence::HostStops;
use super::options::{KernelBanner, KernelOptions};
use super::outcome::{Enforcement, Outcome};
use super::KernelError;
use crate::sandbox::{Counters, Evidence, Flag, KillReport, Traces};

/// The kernel's own backend: what only a local kernel has (its process,
/// its jail) is reached through it.
pub use super::local::LocalBackend;

/// Read before a cell runs: what its evidence is measured from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Baseline {
    pub counters: Counters,
    pub traces: Traces,
    /// How often the kernel's main thread had been scheduled, when the
    /// backend sees it.
    pub main_thread_runs: Option<u64>,
    /// What the host decided itself so far: the lock watchdog's kills (on
    /// this machine, or on a gateway kernel's host), and a gateway kernel
    /// host's stops of cells.
    pub stops: HostStops,
    /// Readings of the kernel's host that had arrived (a gateway kernel
    /// retrace's launcher reports on).
    pub host_readings: u64,
}

/// Why an execution has no outcome of its own.
#[derive(Debug)]
pub enum Failure {
    /// The kernel could not be made usable before the cell.
    NotReady(KernelError),
    /// The cell could not be sent.
    NotSent(KernelError),
    /// The transport went mid-cell and did not come back.
    Dropped(KernelError),
    /// The kernel went with the host it ran on.
    HostLost(KernelError),
}

/// How draining a stopped cell's output ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    Done,
    /// The kernel's process ended meanwhile.
    Died,
    /// The kernel did not get there in time: it is to be killed.
    Stuck,
}

/// How collecting an execution's messages ended.
#[derive(Debug, Default)]
pub struct Ending {
    /// The kernel's process ended (the local process exited, the gateway
    /// said the kernel is restarting or dead).
    pub died: bool,
    /// The kernel must be stopped (killed, or restarted by the gateway).
    pub kill_needed: bool,
    /// When the kill was decided: its latency counts from here, so the
    /// evidence read before the kill is part of it.
    pub kill_decided: Option<Instant>,
    /// A server between retrace and the kernel dropped output (a Jupyter
    /// server's IOPub rate limit).
    pub output_dropped: bool,
    /// The transport went and did not come back.
    pub lost: Option<KernelError>,
    /// The kernel's messages said the cell ended while its main thread was
    /// still running it.
    pub end_forged: bool,
    /// msg_id of the cell's execute request: what a gateway kernel's host
    /// evidence answers.
    pub request: String,
    /// The cell called `quit()`.
    pub asked_exit: bool,
}

/// What every outcome of a kernel says of it.
#[derive(Debug)]
pub struct Marks {
    /// Flags every outcome carries.
    pub flags: Vec<Flag>,
    /// The kernel's uid, when retrace chose it.
    pub kernel_uid: Option<u32>,
    pub enforcement: Enforcement,
}

impl Ending {
    pub fn decide_kill(&mut self) {
        self.kill_needed = true;
        self.kill_decided.get_or_insert_with(Instant::now);
    }

    /// The kernel's state is gone: it died or is stopped.
    pub fn state_lost(&self) -> bool {
        self.died || self.kill_needed
    }
}

/// What stopping a kernel did.
#[derive(Debug, Default)]
pub struct Stopped {
    /// The kill of every process, when the backend kills them itself.
    pub report: Option<KillReport>,
    /// The stop was a restart and that failed.
    pub error: Option<KernelError>,
}

/// One place kernels run: its transport and its lifecycle. Every method
/// is one real difference between backends; the state machine around them
/// is written once. What a backend reads of its kernel around each cell is
/// its [`Witness`].
#[async_trait::async_trait]
pub trait Backend: Witness + Send {
    /// The kernel's id: retrace's own, or the gateway's.
    fn id(&self) -> &str;
    fn banner(&self) -> &KernelBanner;
    fn restarts(&self) -> u32;
    fn options(&self) -> &KernelOptions;
    fn channels(&mut self) -> &mut Channels;

    /// The local backend, for what only it has.
    fn as_local(&self) -> Option<&LocalBackend> {
        None
    }

    /// Before a cell: a kernel that died or was replaced is made usable
    /// again. `Ok(true)` when its state was lost on the way.
    async fn ready(&mut self) -> Result<bool, KernelError>;

    /// Resolves when the kernel's process has ended, as far as this
    /// backend sees it itself (a gateway's says so on IOPub instead).
    /// Owned, so the collecting loop can wait on it beside the channels.
    fn death(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    async fn interrupt(&mut self) -> Result<(), KernelError>;

    /// A channel's queue closed mid-cell. `Ok(true)`: reopened, passing
    /// `watched`'s IOPub and the replies to `requests`; `Ok(false)`: not
    /// reopened (the kernel's end will tell).
    async fn reopen(&mut self, watched: &str, requests: &[&str]) -> Result<bool, KernelError>;

    /// After `quit()`: whether the kernel's process ended in time.
    async fn requested_exit(&mut self) -> bool;

    /// After a limit stopped a cell: the output still on its way drained
    /// before the next cell.
    async fn drain_after_stop(&mut self) -> Drain {
        Drain::Done
    }

    /// Stops a kernel that must go; `decided` is when that was decided.
    async fn stop(&mut self, decided: Option<Instant>) -> Stopped;

    /// A kernel whose state is gone is replaced (now or before the next
    /// cell); the error if that failed.
    async fn replace_after_loss(&mut self, ending: &Ending) -> Option<KernelError>;

    /// A fresh kernel process in place of this one; all variables are lost.
    async fn restart(&mut self) -> Result<(), KernelError>;

    /// Ends the kernel and leaves nothing behind; `polite` asks it first.
    async fn close(&mut self, polite: bool);
}

/// What a backend reads of its kernel around each cell (its evidence), and
/// what every outcome of it says: the local backend from its process and
/// jail, a gateway backend from its launcher's host evidence. The state
/// machine asks the same questions of either, on one path.
#[async_trait::async_trait]
pub trait Witness: Send {
    /// The outcome of an execution that did not run, or whose transport
    /// was lost.
    fn not_run(&self, failure: Failure) -> Outcome;

    /// Read before the cell.
    fn baseline(&self) -> Baseline {
        Baseline::default()
    }

    /// Whether the kernel's main thread is back in its event loop's wait,
    /// having run since `since` (the cell `request` went in), as seen from
    /// outside the kernel; `None` when this backend cannot see it (the
    /// kernel's word is then all there is).
    fn main_thread_back(&self, _request: &str, _since: &Baseline) -> Option<Back> {
        None
    }

    /// CPU time used since `since`, in microseconds, when this backend
    /// counts it as the cell runs (its limit is the options' `cpu_time`).
    fn cpu_used_usec(&self, _since: &Baseline) -> Option<u64> {
        None
    }

    /// One of the cell's status messages says the kernel is going.
    fn announced_end(&self, ending: &mut Ending);

    /// Whether one of the cell's messages says a server on the way
    /// dropped output.
    fn output_dropped(&self, _msg: &JupyterMessage) -> bool {
        false
    }

    /// Read before any stop: evidence that goes with the processes (their
    /// namespaces), and a kill the backend decided itself during the
    /// execution (a watchdog's), for the outcome's kill latency.
    fn before_stop(&self, _since: &Baseline) -> (Evidence, Option<KillReport>) {
        (Evidence::default(), None)
    }

    /// Evidence read after any stop: how the kernel's process ended (for
    /// an execution that lost it), the confinement's counters, processes
    /// left behind, what the host or the gateway reports.
    async fn evidence_after(&mut self, evidence: &mut Evidence, since: &Baseline, ending: &Ending);

    /// A kernel that died (`ending.died`) went with its host rather than
    /// by itself: the infrastructure's failure, not the cell's.
    async fn host_lost(&mut self, _ending: &Ending, _since: &Baseline) -> Option<KernelError> {
        None
    }

    /// What every outcome of this kernel says of it.
    fn marks(&self) -> Marks;

    /// Whether the kernel can be inspected now.
    fn inspectable(&self) -> Result<(), KernelError>;
}
