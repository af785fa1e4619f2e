//! The launcher's host evidence on the kernel's IOPub (the message is
//! described in `kernel::host_evidence`): a [`Tap`] on the IOPub relay
//! that writes a `retrace_host_evidence` message signed with the kernel's
//! key after each of the kernel's `busy` and `idle` statuses, with the
//! same parent, and a last one once the kernel's process has ended. A
//! reading after `busy` as well as after `idle` lets the client measure a
//! cell from two readings that both answer it, never from one it took
//! before the previous request's reading had arrived.
//!
//! The kernel holds the key too: a message of that type coming from the
//! kernel is spoiled on the way (see [`Tap::claims_ours`]), so a gateway,
//! which checks signatures, drops it.

use std::sync::{Arc, Mutex};

use aws_lc_rs::hmac;
use chrono::{SecondsFormat, Utc};
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::json;

use super::super::host_evidence::{this_host, HostEvidence, Moment, MSG_TYPE};
use super::super::local::ExitWatch;
use super::super::wire_tap::{zmtp_message, Seen, Tap, DELIMITER};
use super::LauncherError;
use crate::sandbox::{Counters, Traces};

/// The only scheme the launcher signs with (every Jupyter client's default).
const SCHEME: &str = "hmac-sha256";
/// The PUB topic of the launcher's messages (clients subscribe to all).
const TOPIC: &[u8] = b"retrace_host_evidence";
/// The Jupyter message protocol version of the launcher's messages.
const PROTOCOL: &str = "5.3";
/// What the kernel's jail shows now.
pub struct JailReading {
    pub counters: Counters,
    pub traces: Traces,
    pub kernel_uid: Option<u32>,
    /// The lock watchdog's kills so far.
    pub lock_kills: u64,
    /// Messages the wire cap emptied so far.
    pub oversize_messages: u64,
}

/// Reads the kernel's jail.
pub type ReadJail = Arc<dyn Fn() -> JailReading + Send + Sync>;

pub struct EvidenceTap {
    key: hmac::Key,
    /// The launcher's own Jupyter session.
    session: String,
    read: ReadJail,
    exit: ExitWatch,
    /// Parent header of the kernel's last `busy`: what it was doing when
    /// it ended.
    busy_parent: Mutex<Option<Vec<u8>>>,
    /// This host, as the gateway reached it.
    host: Option<String>,
}

#[derive(Deserialize)]
struct Header {
    msg_type: String,
}

#[derive(Deserialize)]
struct Status {
    execution_state: String,
}

impl EvidenceTap {
    /// A tap signing with the kernel's `key` under `scheme`, reading the
    /// kernel's jail with `read` and its end from `exit`.
    pub fn new(
        key: &str,
        scheme: &str,
        read: ReadJail,
        exit: ExitWatch,
    ) -> Result<EvidenceTap, LauncherError> {
        if scheme != SCHEME || key.is_empty() {
            return Err(LauncherError::Signature(format!(
                "`{scheme}` with {} key",
                if key.is_empty() { "an empty" } else { "a" }
            )));
        }
        Ok(EvidenceTap {
            key: hmac::Key::new(hmac::HMAC_SHA256, key.as_bytes()),
            session: uuid::Uuid::new_v4().to_string(),
            read,
            exit,
            busy_parent: Mutex::new(None),
            host: this_host(),
        })
    }

    /// The message of one reading taken now, answering `parent`.
    fn message(&self, moment: Moment, parent: &[u8]) -> Vec<u8> {
        let JailReading {
            counters,
            traces,
            kernel_uid,
            lock_kills,
            oversize_messages,
        } = (self.read)();
        let evidence = HostEvidence {
            moment,
            counters,
            traces,
            exit: self.exit.borrow().clone(),
            kernel_uid,
            launcher_pid: std::process::id(),
            launcher: HostEvidence::launcher_name(),
            host: self.host.clone(),
            lock_kills,
            oversize_messages,
        };
        let header = json!({
            "msg_id": uuid::Uuid::new_v4().to_string(),
            "session": self.session,
            "username": "retrace",
            "date": Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true),
            "msg_type": MSG_TYPE,
            "version": PROTOCOL,
        })
        .to_string();
        let metadata = b"{}";
        let content = serde_json::to_vec(&evidence).expect("host evidence serializes");
        let mut signing = hmac::Context::with_key(&self.key);
        for part in [header.as_bytes(), parent, &metadata[..], &content[..]] {
            signing.update(part);
        }
        let signature = hex::encode(signing.sign().as_ref());
        zmtp_message(&[
            TOPIC,
            DELIMITER,
            signature.as_bytes(),
            header.as_bytes(),
            parent,
            metadata,
            &content,
        ])
    }
}

impl Tap for EvidenceTap {
    /// Any header naming the type, or one that is not plain JSON (what
    /// another parser might read in it cannot be known), claims it.
    fn claims_ours(&self, header: &[u8]) -> bool {
        let named = header
            .windows(MSG_TYPE.len())
            .any(|w| w == MSG_TYPE.as_bytes());
        named
            || match serde_json::from_slice::<serde_json::Value>(header) {
                Ok(v) => v.get("msg_type").and_then(|t| t.as_str()) == Some(MSG_TYPE),
                Err(_) => true,
            }
    }

    fn after(&self, seen: &Seen<'_>) -> Option<Vec<u8>> {
        let header: Header = serde_json::from_slice(seen.header).ok()?;
        if header.msg_type != "status" {
            return None;
        }
        let status: Status = serde_json::from_slice(seen.content).ok()?;
        let moment = match status.execution_state.as_str() {
            "busy" => Moment::Busy,
            "idle" => Moment::Idle,
            _ => return None,
        };
        if moment == Moment::Busy {
            *self.busy_parent.lock().unwrap() = Some(seen.parent.to_vec());
        }
        Some(self.message(moment, seen.parent))
    }

    fn ended(&self) -> BoxFuture<'static, ()> {
        let mut exit = self.exit.clone();
        Box::pin(async move {
            // A dropped sender: the process watcher is gone with the kernel.
            let _ = exit.wait_for(Option::is_some).await;
        })
    }

    fn last(&self) -> Vec<u8> {
        let parent = self.busy_parent.lock().unwrap().clone();
        self.message(Moment::Dead, parent.as_deref().unwrap_or(b"{}"))
    }
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
