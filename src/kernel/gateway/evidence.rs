//! The host evidence a gateway kernel's launcher sends (retrace's own
//! launcher: `kernel::host_evidence`), taken out of the kernel's IOPub as
//! it arrives, whatever request is being watched, and kept by the request
//! it answers until the backend judges that request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jupyter_protocol::{JupyterMessage, JupyterMessageContent};
use tokio::sync::Notify;

use super::super::backend::{Baseline, Ending};
use super::super::client::parent_id;
use super::super::host_evidence::{fill_cell, HostEvidence, Moment, MSG_TYPE};
use super::super::recent::Recent;
use crate::sandbox::Evidence;

/// Readings kept: a cell's two and those of the silent requests around it.
const KEPT: usize = 64;
/// How long the reading after a cell may take behind the message that
/// ended it: it follows the kernel's `idle` at once; after a death, the
/// launcher first lets the kernel's last output through.
const END_READING: Duration = Duration::from_secs(2);
const DEATH_READING: Duration = Duration::from_secs(3);
/// A kernel retrace stopped itself (restarted through the gateway) may
/// have reached `idle` before.
const STOPPED_READING: Duration = Duration::from_millis(300);

/// The readings of one kernel, newest last.
#[derive(Default)]
pub struct EvidenceLog {
    readings: Mutex<Readings>,
    arrived: Notify,
    /// Where the gateway's kernels ran, shared by its kernels.
    hosts: Arc<HostTally>,
}

/// The launchers seen on each host: one per kernel process.
#[derive(Default)]
pub struct HostTally {
    launchers: Mutex<BTreeMap<String, BTreeSet<u32>>>,
}

impl HostTally {
    fn saw(&self, evidence: &HostEvidence) {
        if let Some(host) = &evidence.host {
            let mut launchers = self.launchers.lock().unwrap();
            launchers
                .entry(host.clone())
                .or_default()
                .insert(evidence.launcher_pid);
        }
    }

    pub fn counts(&self) -> BTreeMap<String, u64> {
        let launchers = self.launchers.lock().unwrap();
        launchers
            .iter()
            .map(|(host, pids)| (host.clone(), pids.len() as u64))
            .collect()
    }
}

/// Readings by the msg_id of the request they answer (empty for none).
#[derive(Default)]
struct Readings {
    kept: Recent<Reading, KEPT>,
    /// Readings that arrived so far.
    count: u64,
}

struct Reading {
    /// Readings that had arrived before it.
    seq: u64,
    evidence: HostEvidence,
}

/// What the host read around one request.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Around {
    /// The first reading after the kernel said it is busy with it.
    pub start: Option<HostEvidence>,
    /// The latest reading after it was idle again, or after its death.
    pub end: Option<HostEvidence>,
}

impl EvidenceLog {
    /// A log whose readings also count the hosts in `hosts`.
    pub fn new(hosts: Arc<HostTally>) -> EvidenceLog {
        EvidenceLog {
            hosts,
            ..EvidenceLog::default()
        }
    }

    /// Keeps `msg` when it is a host evidence message (one that does not
    /// parse is dropped); whether it was one.
    pub fn take(&self, msg: &JupyterMessage) -> bool {
        if msg.header.msg_type != MSG_TYPE {
            return false;
        }
        let JupyterMessageContent::UnknownMessage(unknown) = &msg.content else {
            return true;
        };
        match serde_json::from_value::<HostEvidence>(unknown.content.clone()) {
            Ok(evidence) => {
                self.hosts.saw(&evidence);
                let mut readings = self.readings.lock().unwrap();
                let seq = readings.count;
                readings.count += 1;
                let parent = parent_id(msg).unwrap_or_default().to_string();
                readings.kept.push(parent, Reading { seq, evidence });
                drop(readings);
                self.arrived.notify_waiters();
            }
            Err(e) => tracing::warn!(error = %e, "a host evidence message that does not parse"),
        }
        true
    }

    /// The newest reading, whatever it answers.
    pub fn latest(&self) -> Option<HostEvidence> {
        let readings = self.readings.lock().unwrap();
        readings.kept.last().map(|r| r.evidence.clone())
    }

    /// Whether the host saw the kernel's main thread back in its loop after
    /// it said `request` ended: `None` when the host does not see the main
    /// thread, `Some(false)` until its reading after the end arrives.
    pub fn main_thread_back(&self, request: &str) -> Option<bool> {
        let readings = self.readings.lock().unwrap();
        if !readings.kept.last()?.evidence.sees_main_thread {
            return None;
        }
        let end = readings
            .kept
            .iter()
            .rev()
            .find(|(parent, r)| r.evidence.moment == Moment::Idle && *parent == request);
        Some(end.is_some_and(|(_, r)| r.evidence.main_thread_back != Some(false)))
    }

    /// Resolves once a reading of the kernel's death arrives among those
    /// after the first `since`.
    pub async fn death_after(&self, since: u64) {
        loop {
            // Registered before the look, so nothing arriving between is missed.
            let arrived = self.arrived.notified();
            let dead = (self.readings.lock().unwrap().kept.iter())
                .any(|(_, r)| r.seq >= since && r.evidence.moment == Moment::Dead);
            if dead {
                return;
            }
            arrived.await;
        }
    }

    /// How many readings arrived so far.
    pub fn count(&self) -> u64 {
        self.readings.lock().unwrap().count
    }

    /// The readings around `request`, sent after the first `since`
    /// readings had arrived, waiting up to `wait` for its end (its death
    /// when `died`).
    pub async fn around(&self, request: &str, since: u64, died: bool, wait: Duration) -> Around {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the look, so nothing arriving between is missed.
            let arrived = self.arrived.notified();
            let around = self.look(request, since, died);
            let ended = around
                .end
                .as_ref()
                .is_some_and(|end| !died || end.moment == Moment::Dead);
            if ended || tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return around;
            }
        }
    }

    /// Fills `evidence` of the cell that `ending` ended from the host's
    /// readings around it: the counters' and traces' change between them
    /// (from `since` when the reading at its start is missing), and how the
    /// kernel's process ended. `false` when no reading after the cell came.
    pub async fn fill(&self, evidence: &mut Evidence, since: &Baseline, ending: &Ending) -> bool {
        let wait = if ending.died {
            DEATH_READING
        } else if ending.kill_needed {
            STOPPED_READING
        } else {
            END_READING
        };
        let around = self
            .around(&ending.request, since.host_readings, ending.died, wait)
            .await;
        let Some(end) = around.end else {
            tracing::warn!(request = %ending.request, "no host evidence after the cell");
            return false;
        };
        let start = around.start.unwrap_or_else(|| HostEvidence {
            counters: since.counters,
            traces: since.traces,
            stops: since.stops,
            ..end.clone()
        });
        evidence.traces = end.traces.since(&start.traces);
        let start = (&start.counters, &start.stops);
        fill_cell(evidence, start, (&end.counters, &end.stops));
        // Threads an interrupted cell left behind make the kernel
        // untrustworthy, as on a local kernel.
        if !ending.state_lost() {
            evidence.leftover_threads = end.extra_threads as usize;
        }
        if end.exit.is_some() {
            evidence.exit = end.exit;
        }
        true
    }

    fn look(&self, request: &str, since: u64, died: bool) -> Around {
        let readings = self.readings.lock().unwrap();
        let mut around = Around::default();
        let mut death = None;
        for (parent, r) in readings.kept.iter().filter(|(_, r)| r.seq >= since) {
            let answers = parent == request;
            match r.evidence.moment {
                Moment::Busy if answers => {
                    around.start.get_or_insert_with(|| r.evidence.clone());
                }
                // The latest: code that holds the key can make the kernel
                // say `idle` early, never take back a later reading.
                Moment::Idle | Moment::Dead if answers => around.end = Some(r.evidence.clone()),
                // A kernel killed before its `busy` went out dies answering
                // an earlier request; the only death since this one was sent.
                Moment::Dead => death = Some(r.evidence.clone()),
                _ => {}
            }
        }
        if died && around.end.as_ref().is_none_or(|e| e.moment != Moment::Dead) {
            around.end = death.or(around.end);
        }
        around
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{Counters, HarnessReason};
    use serde_json::json;

    /// A reading as a gateway's websocket carries it.
    fn reading(moment: Moment, parent: &str, oom_kills: u64) -> JupyterMessage {
        let mut evidence = evidence(moment);
        evidence.counters.oom_kills = oom_kills;
        message(&evidence, parent)
    }

    fn evidence(moment: Moment) -> HostEvidence {
        HostEvidence {
            moment,
            counters: Counters::default(),
            traces: Default::default(),
            exit: None,
            kernel_uid: Some(1000),
            launcher_pid: 7,
            launcher: HostEvidence::launcher_name(),
            host: Some("10.0.0.2".into()),
            stops: Default::default(),
            sees_main_thread: false,
            main_thread_back: None,
            extra_threads: 0,
        }
    }

    /// A reading as a gateway's websocket carries it.
    fn message(evidence: &HostEvidence, parent: &str) -> JupyterMessage {
        let header = |id: &str, msg_type: &str| {
            json!({"msg_id": id, "session": "s", "username": "retrace",
                   "date": "2024-01-01T00:00:00.000000Z", "msg_type": msg_type, "version": "5.3"})
        };
        JupyterMessage::from_value(json!({
            "header": header(&uuid::Uuid::new_v4().to_string(), MSG_TYPE),
            "parent_header": header(parent, "execute_request"),
            "metadata": {},
            "content": evidence,
            "channel": "iopub",
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_request_is_measured_between_its_own_readings() {
        let log = EvidenceLog::default();
        for msg in [
            reading(Moment::Idle, "earlier", 0),
            reading(Moment::Busy, "cell", 1),
            // A busy the kernel claims again later does not move the start.
            reading(Moment::Busy, "cell", 2),
            reading(Moment::Idle, "cell", 3),
        ] {
            assert!(log.take(&msg));
        }
        let around = log.around("cell", 0, false, Duration::ZERO).await;
        assert_eq!(around.start.unwrap().counters.oom_kills, 1);
        assert_eq!(around.end.unwrap().counters.oom_kills, 3);
        assert_eq!(log.latest().unwrap().counters.oom_kills, 3);
        // One launcher, one kernel process, on the host it named.
        let hosts = log.hosts.counts();
        assert_eq!(
            hosts.into_iter().collect::<Vec<_>>(),
            [("10.0.0.2".to_string(), 1)]
        );
        let other = JupyterMessage::new(jupyter_protocol::Status::idle(), None);
        assert!(!log.take(&other), "other messages go their way");
    }

    #[tokio::test]
    async fn a_death_waits_for_the_reading_after_it() {
        let log = std::sync::Arc::new(EvidenceLog::default());
        log.take(&reading(Moment::Busy, "cell", 0));
        log.take(&reading(Moment::Idle, "cell", 0));
        let late = log.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            late.take(&reading(Moment::Dead, "cell", 1));
        });
        let around = log.around("cell", 0, true, Duration::from_secs(5)).await;
        let end = around.end.unwrap();
        assert_eq!((end.moment, end.counters.oom_kills), (Moment::Dead, 1));
        // None comes: the wait ends with what there is.
        let none = log
            .around("another", 0, false, Duration::from_millis(20))
            .await;
        assert_eq!(none, Around::default());
        // Killed before it said `busy`: the death since the cell was sent is its.
        let sent = log.count();
        log.take(&reading(Moment::Dead, "cell", 2));
        let early = log.around("next", sent, true, Duration::ZERO).await;
        assert_eq!(early.end.unwrap().counters.oom_kills, 2);
        // An older death is not.
        let later = log.around("later", log.count(), true, Duration::ZERO).await;
        assert_eq!(later.end, None);
    }

    #[tokio::test]
    async fn the_hosts_own_kills_and_emptied_messages_decide_the_reason() {
        let log = EvidenceLog::default();
        let mut busy = evidence(Moment::Busy);
        busy.stops.oversize_messages = 1;
        log.take(&message(&busy, "cell"));
        let mut dead = evidence(Moment::Dead);
        dead.stops.lock_kills = 1;
        dead.stops.oversize_messages = 2;
        dead.stops.cpu_stops = 1;
        dead.stops.stop_kills = 1;
        log.take(&message(&dead, "cell"));
        let ending = Ending {
            died: true,
            request: "cell".into(),
            ..Ending::default()
        };
        let mut judged = Evidence::default();
        assert!(log.fill(&mut judged, &Baseline::default(), &ending).await);
        // Both happened; the first the host saw is the reason, as locally.
        assert_eq!(judged.harness_reason, Some(HarnessReason::LockLimit));
        assert!(judged.truncated, "a message past the cap was emptied");
        assert!(judged.killed_by_harness, "the host killed a stopped cell");
    }

    #[tokio::test]
    async fn a_cells_end_is_believed_once_the_host_saw_the_main_thread_back() {
        let log = EvidenceLog::default();
        let seeing = |moment, back| {
            let mut e = evidence(moment);
            e.sees_main_thread = true;
            e.main_thread_back = back;
            e
        };
        // A launcher that does not see the main thread: the kernel's word.
        log.take(&message(&evidence(Moment::Busy), "blind"));
        assert_eq!(log.main_thread_back("blind"), None);
        log.take(&message(&seeing(Moment::Busy, None), "cell"));
        assert_eq!(log.main_thread_back("cell"), Some(false), "no end yet");
        // Another request's end, a control request's idle, say nothing of it.
        log.take(&message(&seeing(Moment::Idle, Some(true)), "other"));
        assert_eq!(log.main_thread_back("cell"), Some(false));
        log.take(&message(&seeing(Moment::Idle, Some(false)), "cell"));
        assert_eq!(log.main_thread_back("cell"), Some(false), "a forged end");
        // The cell's real end, later.
        log.take(&message(&seeing(Moment::Idle, Some(true)), "cell"));
        assert_eq!(log.main_thread_back("cell"), Some(true));
    }

    #[tokio::test]
    async fn a_death_is_learned_from_the_hosts_reading() {
        let log = std::sync::Arc::new(EvidenceLog::default());
        log.take(&reading(Moment::Dead, "earlier", 0));
        let since = log.count();
        let waiting = log.clone();
        let death = tokio::spawn(async move { waiting.death_after(since).await });
        log.take(&reading(Moment::Idle, "cell", 0));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!death.is_finished(), "an older death is not this one");
        log.take(&reading(Moment::Dead, "cell", 0));
        tokio::time::timeout(Duration::from_secs(5), death)
            .await
            .expect("the death was learned")
            .unwrap();
    }
}
