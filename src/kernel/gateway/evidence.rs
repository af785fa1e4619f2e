//! The host evidence a gateway kernel's launcher sends (retrace's own
//! launcher: `kernel::host_evidence`), taken out of the kernel's IOPub as
//! it arrives, whatever request is being watched, and kept by the request
//! it answers until the backend judges that request.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use jupyter_protocol::{JupyterMessage, JupyterMessageContent};
use tokio::sync::Notify;

use super::super::backend::{Baseline, Ending};
use super::super::client::parent_id;
use super::super::host_evidence::{HostEvidence, Moment, MSG_TYPE};
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
}

#[derive(Default)]
struct Readings {
    kept: VecDeque<Reading>,
    /// Readings that arrived so far.
    count: u64,
}

struct Reading {
    /// Readings that had arrived before it.
    seq: u64,
    /// msg_id of the request it answers.
    parent: Option<String>,
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
                let mut readings = self.readings.lock().unwrap();
                if readings.kept.len() == KEPT {
                    readings.kept.pop_front();
                }
                let seq = readings.count;
                readings.count += 1;
                readings.kept.push_back(Reading {
                    seq,
                    parent: parent_id(msg).map(str::to_string),
                    evidence,
                });
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
        readings.kept.back().map(|r| r.evidence.clone())
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
        let (counters, traces) = around
            .start
            .map_or((since.counters, since.traces), |s| (s.counters, s.traces));
        evidence.delta = end.counters.since(&counters);
        evidence.traces = end.traces.since(&traces);
        if end.exit.is_some() {
            evidence.exit = end.exit;
        }
        true
    }

    fn look(&self, request: &str, since: u64, died: bool) -> Around {
        let readings = self.readings.lock().unwrap();
        let mut around = Around::default();
        let mut death = None;
        for r in readings.kept.iter().filter(|r| r.seq >= since) {
            let answers = r.parent.as_deref() == Some(request);
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
    use crate::sandbox::Counters;
    use serde_json::json;

    /// A reading as a gateway's websocket carries it.
    fn reading(moment: Moment, parent: &str, oom_kills: u64) -> JupyterMessage {
        let evidence = HostEvidence {
            moment,
            counters: Counters {
                oom_kills,
                ..Counters::default()
            },
            traces: Default::default(),
            exit: None,
            kernel_uid: Some(1000),
            launcher_pid: 7,
            launcher: HostEvidence::launcher_name(),
        };
        let header = |id: &str, msg_type: &str| {
            json!({"msg_id": id, "session": "s", "username": "retrace",
                   "date": "2024-01-01T00:00:00.000000Z", "msg_type": msg_type, "version": "5.3"})
        };
        JupyterMessage::from_value(json!({
            "header": header(&format!("{parent}-{moment:?}-{oom_kills}"), MSG_TYPE),
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
}
