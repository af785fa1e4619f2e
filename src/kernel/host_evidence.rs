//! What retrace's launcher (`retrace launch`) reports about a kernel from
//! its host: the content of an IOPub message of retrace's own,
//! [`MSG_TYPE`], that the launcher's relay writes after each of the
//! kernel's `busy` and `idle` statuses and once more when the kernel's
//! process has ended, signed with the kernel's key. The kernel knows the
//! key too, so the relay spoils any message of this type the kernel sends
//! (see `launcher::evidence`): a client through the gateway, which checks
//! signatures, only ever sees the launcher's.

use serde::{Deserialize, Serialize};

use crate::sandbox::{Counters, Evidence, ExitInfo, HarnessReason, Traces};

/// The message type; its parent is the request the kernel was busy with.
pub const MSG_TYPE: &str = "retrace_host_evidence";

/// When the reading was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    /// Just after the kernel said it is busy with the parent request.
    Busy,
    /// Just after it said it is idle again.
    Idle,
    /// The kernel's process ended (while busy with the parent request).
    Dead,
}

/// One reading of the kernel's jail on its host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEvidence {
    pub moment: Moment,
    /// The jail's counters so far (they start at zero with the launcher).
    pub counters: Counters,
    /// What the kernel's namespaces show (network refusals, full mounts
    /// and descriptor tables).
    #[serde(default)]
    pub traces: Traces,
    /// How the kernel's process ended, once it has.
    pub exit: Option<ExitInfo>,
    /// The uid the kernel runs as; `None` when it is not confined (an
    /// `--unsafe-no-sandbox` launcher, whose zeros are no evidence).
    pub kernel_uid: Option<u32>,
    /// The launcher's pid: another one is another kernel process, whose
    /// counters started from zero.
    pub launcher_pid: u32,
    /// `retrace <version>` of the launcher.
    pub launcher: String,
    /// The host, as the gateway reached it ([`this_host`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What the host decided itself about the kernel so far.
    #[serde(flatten)]
    pub stops: HostStops,
    /// Whether the launcher sees the kernel's main thread: its reading
    /// after a cell's `idle` then says whether the main thread was back.
    #[serde(default)]
    pub sees_main_thread: bool,
    /// In the reading after a cell's `idle`: whether the kernel's main
    /// thread was back in its loop's wait, having run since the cell's
    /// request went in (`false`: the end was forged, the cell runs on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_thread_back: Option<bool>,
    /// Threads of the kernel beyond those it started with.
    #[serde(default)]
    pub extra_threads: u64,
}

/// The host's own decisions about a kernel, counted from its start: where
/// a local kernel's harness stops a cell, the launcher on the kernel's
/// host does, and these counts tell the client which cell it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStops {
    /// Kills by the lock watchdog (it kills the kernel past its share of
    /// file locks).
    #[serde(default)]
    pub lock_kills: u64,
    /// Cells stopped for using more than their CPU time.
    #[serde(default)]
    pub cpu_stops: u64,
    /// Cells stopped for writing more than their output cap.
    #[serde(default)]
    pub output_stops: u64,
    /// Stopped cells that outlived their interrupt: the kernel's processes
    /// were killed.
    #[serde(default)]
    pub stop_kills: u64,
    /// Messages the wire cap emptied for being larger than the output cap
    /// (a gateway drops such a message without a word).
    #[serde(default)]
    pub oversize_messages: u64,
}

impl HostStops {
    /// The reason the host's decisions since `before` give a cell, the
    /// first in the order a host takes them (a kill ends everything after
    /// it); and whether output of it was dropped.
    pub fn since(&self, before: &HostStops) -> (Option<HarnessReason>, bool) {
        let reason = if self.lock_kills > before.lock_kills {
            Some(HarnessReason::LockLimit)
        } else if self.cpu_stops > before.cpu_stops {
            Some(HarnessReason::TimeoutCpu)
        } else if self.output_stops > before.output_stops
            || self.oversize_messages > before.oversize_messages
        {
            Some(HarnessReason::OutputLimit)
        } else {
            None
        };
        let dropped = self.oversize_messages > before.oversize_messages
            || self.output_stops > before.output_stops;
        (reason, dropped)
    }
}

impl HostEvidence {
    /// What a launcher of this build calls itself.
    pub fn launcher_name() -> String {
        format!("retrace {}", env!("CARGO_PKG_VERSION"))
    }
}

/// Fills a cell's `evidence` from the jail's counters and the host's own
/// decisions at its `start` and its `end`: the one rule for a local
/// kernel, whose harness decides, and a gateway kernel, whose host does.
/// The decisions are the lock watchdog's kill, a cell stopped for its CPU
/// time or its output, a message past the cap emptied on the host's wire
/// (a gateway drops what is left of it silently), a stop that needed a
/// kill.
pub fn fill_cell(
    evidence: &mut Evidence,
    start: (&Counters, &HostStops),
    end: (&Counters, &HostStops),
) {
    evidence.delta = end.0.since(start.0);
    let (reason, dropped) = end.1.since(start.1);
    if let Some(reason) = reason {
        evidence.harness_reason.get_or_insert(reason);
    }
    evidence.truncated |= dropped;
    evidence.killed_by_harness |= end.1.stop_kills > start.1.stop_kills;
}

/// The host a launcher runs on, as the gateway reached it: the address
/// the gateway's SSH connection came in on (`SSH_CONNECTION`'s third
/// field), else the host name. The address tells apart hosts that share
/// a name (containers, network namespaces).
pub fn this_host() -> Option<String> {
    let ssh = std::env::var("SSH_CONNECTION").ok();
    ssh.as_deref()
        .and_then(|c| c.split_whitespace().nth(2))
        .map(str::to_string)
        .or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .map(|h| h.to_string_lossy().into_owned())
        })
        .filter(|h| !h.is_empty())
}
