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
use tokio::sync::mpsc;

use super::super::cell_watch::{Back, Event as CellEvent};
use super::super::host_evidence::{this_host, HostEvidence, HostStops, Moment, MSG_TYPE};
use super::super::local::ExitWatch;
use super::super::main_thread::MainThread;
use super::super::recent::{Recent, RecentIds, SEEN_KEPT};
use super::super::wire_tap::{Seen, Tap};
use super::super::zmtp::{zmtp_message, DELIMITER};
use super::LauncherError;
use crate::sandbox::{Counters, Traces};

/// The only scheme the launcher signs with (every Jupyter client's default).
const SCHEME: &str = "hmac-sha256";
/// The PUB topic of the launcher's messages (clients subscribe to all).
const TOPIC: &[u8] = b"retrace_host_evidence";
/// The Jupyter message protocol version of the launcher's messages.
const PROTOCOL: &str = "5.3";
/// What the kernel's jail shows now.
#[derive(Clone)]
pub struct JailReading {
    pub counters: Counters,
    pub traces: Traces,
    pub kernel_uid: Option<u32>,
    /// What the host decided itself so far.
    pub stops: HostStops,
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
    /// Where the kernel's cells are told to the host's guard.
    cells: Option<mpsc::UnboundedSender<CellEvent>>,
    /// What the host saw as execute requests went into the kernel, newest
    /// last, by msg_id.
    requests_in: Mutex<Recent<RequestIn, REQUESTS_KEPT>>,
    /// The kernel's main thread, when it can be seen: a cell's end is
    /// checked against it.
    main: Option<MainThread>,
    /// Messages already told to the guard (once, by the first of the
    /// gateway's connections that passes it).
    told: Mutex<RecentIds<SEEN_KEPT>>,
}

/// What the host saw as an execute request went into the kernel.
struct RequestIn {
    /// The cell's first reading: it must come before any of its code ran,
    /// and the kernel says `busy` only once it may have.
    reading: JailReading,
    /// How often the main thread had run, which the cell's end is checked
    /// against (when it can be seen).
    main_runs: Option<u64>,
}

/// Requests kept until their end (a few may be pipelined).
const REQUESTS_KEPT: usize = 16;

/// The shell channel's side of the host evidence: the jail is read as each
/// execute request goes into the kernel ([`EvidenceTap::request_in`]).
/// It only watches: it adds nothing and never ends.
pub struct RequestTap(pub Arc<EvidenceTap>);

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    msg_id: String,
    msg_type: String,
}

/// What the tap reads of a request's header (a reply's parent header).
#[derive(Deserialize)]
struct RequestHeader {
    msg_id: String,
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
            cells: None,
            requests_in: Mutex::default(),
            main: None,
            told: Mutex::default(),
        })
    }

    /// Also checks each cell's end against the kernel's `main` thread.
    pub fn checking_ends(mut self, main: Option<MainThread>) -> EvidenceTap {
        self.main = main;
        self
    }

    /// Execute request `msg_id` is going into the kernel: the jail as it is
    /// now is the start of its cell.
    fn request_in(&self, msg_id: String) {
        let main_runs = self.main.as_ref().and_then(MainThread::runs);
        if let Some(cells) = &self.cells {
            let _ = cells.send(CellEvent::Requested(msg_id.clone()));
        }
        let reading = (self.read)();
        let request = RequestIn { reading, main_runs };
        self.requests_in.lock().unwrap().push(msg_id, request);
    }

    /// `what` of the request `msg_id` as it went in (asked for each of the
    /// gateway's connections to IOPub).
    fn at_request<T>(&self, msg_id: &str, what: impl FnOnce(&RequestIn) -> T) -> Option<T> {
        self.requests_in.lock().unwrap().get(msg_id).map(what)
    }

    /// How often the main thread had run as cell `request` went in.
    fn main_runs_at(&self, request: &str) -> Option<u64> {
        self.at_request(request, |r| r.main_runs).flatten()
    }

    /// Also tells `cells` of the kernel's cells: their start and end, and
    /// their output.
    pub fn telling(mut self, cells: mpsc::UnboundedSender<CellEvent>) -> EvidenceTap {
        self.cells = Some(cells);
        self
    }

    /// Tells the guard what `seen` says of a cell, once per message (the
    /// gateway may pass it on several connections): only execute requests
    /// are cells.
    fn tell(&self, seen: &Seen<'_>, header: &Header, moment: Option<Moment>) {
        let Some(cells) = &self.cells else { return };
        if !self.told.lock().unwrap().first(&header.msg_id) {
            return;
        }
        let Some(request) = cell_of(seen.parent) else {
            return;
        };
        let event = match moment {
            Some(Moment::Busy) => CellEvent::Busy(request),
            Some(_) => CellEvent::Idle(request),
            None if header.msg_type == "status" => return,
            None => CellEvent::Output {
                request,
                bytes: seen.bytes,
            },
        };
        let _ = cells.send(event);
    }

    /// The message of one reading answering `parent`: taken now, or for a
    /// `busy`, as its request went in when the shell's tap saw it; at a
    /// cell's end, whether the main thread was `back` in its loop.
    fn message(&self, moment: Moment, parent: &[u8], back: Option<bool>) -> Vec<u8> {
        let taken = (moment == Moment::Busy)
            .then(|| serde_json::from_slice::<RequestHeader>(parent).ok())
            .flatten()
            .and_then(|request| self.at_request(&request.msg_id, |r| r.reading.clone()));
        let JailReading {
            counters,
            traces,
            kernel_uid,
            stops,
        } = taken.unwrap_or_else(|| (self.read)());
        let evidence = HostEvidence {
            moment,
            counters,
            traces,
            exit: self.exit.borrow().clone(),
            kernel_uid,
            launcher_pid: std::process::id(),
            launcher: HostEvidence::launcher_name(),
            host: self.host.clone(),
            stops,
            sees_main_thread: self.main.is_some(),
            main_thread_back: back,
            extra_threads: self.main.as_ref().map_or(0, |m| m.extra_threads() as u64),
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

    /// A cell's `idle` waits for the main thread to be back in its loop
    /// (or long enough to call the end forged): code in a kernel can make
    /// it say `idle` while its main thread still runs the cell, and the
    /// client through a gateway cannot see the main thread itself.
    fn hold_after(&self, seen: &Seen<'_>) -> Option<BoxFuture<'static, ()>> {
        let main = self.main.as_ref()?;
        let (_, moment) = status_of(seen)?;
        (moment? == Moment::Idle)
            .then(|| cell_of(seen.parent))
            .flatten()
            .map(|request| main.settled(self.main_runs_at(&request)))
    }

    fn after(&self, seen: &Seen<'_>) -> Option<Vec<u8>> {
        let (header, moment) = status_of(seen)?;
        // Told before the reading is taken: a stop the guard makes from
        // here on is in a later reading.
        self.tell(seen, &header, moment);
        let moment = moment?;
        if moment == Moment::Busy {
            *self.busy_parent.lock().unwrap() = Some(seen.parent.to_vec());
        }
        let back = match (&self.main, moment) {
            (Some(main), Moment::Idle) => {
                cell_of(seen.parent).map(|r| main.back_since(self.main_runs_at(&r)) != Back::No)
            }
            _ => None,
        };
        Some(self.message(moment, seen.parent, back))
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
        self.message(Moment::Dead, parent.as_deref().unwrap_or(b"{}"), None)
    }
}

impl Tap for RequestTap {
    fn claims_ours(&self, _header: &[u8]) -> bool {
        false
    }

    fn after(&self, seen: &Seen<'_>) -> Option<Vec<u8>> {
        // Called before the request is flushed on to the kernel.
        let request: RequestHeader = serde_json::from_slice(seen.header).ok()?;
        if request.msg_type == "execute_request" {
            self.0.request_in(request.msg_id);
        }
        None
    }

    fn ended(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    fn last(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// A message's type, and the moment it marks when it is a `busy` or
/// `idle` status; `None` for a header that does not parse.
fn status_of(seen: &Seen<'_>) -> Option<(Header, Option<Moment>)> {
    let header: Header = serde_json::from_slice(seen.header).ok()?;
    let moment = (header.msg_type == "status")
        .then(|| serde_json::from_slice::<Status>(seen.content).ok())
        .flatten()
        .and_then(|status| match status.execution_state.as_str() {
            "busy" => Some(Moment::Busy),
            "idle" => Some(Moment::Idle),
            _ => None,
        });
    Some((header, moment))
}

/// msg_id of the execute request `parent` is the header of: only those
/// are cells.
fn cell_of(parent: &[u8]) -> Option<String> {
    let parent: RequestHeader = serde_json::from_slice(parent).ok()?;
    (parent.msg_type == "execute_request").then_some(parent.msg_id)
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
