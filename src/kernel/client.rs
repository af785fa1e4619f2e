//! The Jupyter channels of one kernel: shell and control requests, IOPub and
//! shell replies delivered through queues by reader tasks (a queue receive is
//! cancel-safe, a socket read inside `select!` might not be).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jupyter_protocol::connection_info::ConnectionInfo;
use jupyter_protocol::{Channel, JupyterMessage, JupyterMessageContent};
use jupyter_zmq_client::{
    create_client_control_connection, create_client_iopub_connection,
    create_client_shell_connection_with_identity, peer_identity_for_session, Connection,
    DealerSendConnection,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::inbox::{inbox, Inbox, Outbox};
use super::recent::RecentIds;
use super::wire_cap::{Oversize, Relay};
use super::zmq_message;
use super::KernelError;
use crate::util::IoContext;

/// Oversize reports queued; more are dropped (one is enough to end a cell).
const OVERSIZE_QUEUE: usize = 16;

/// Where the relays that cap a kernel's messages listen, and the cap.
#[derive(Debug, Clone)]
pub struct WireCap {
    /// A directory only the harness can reach.
    pub dir: PathBuf,
    /// Largest message the kernel may send, in bytes.
    pub max_message: u64,
}

/// IOPub messages of the watched request queued for the session, and their
/// bytes; past either the reader waits, stops reading the socket, and the
/// kernel's PUB socket drops at its high-water mark: the harness never
/// holds more.
const IOPUB_QUEUE: usize = 256;
const IOPUB_BYTES: u32 = 16 << 20;
/// Shell replies queued (only replies to requests this client sent).
const SHELL_QUEUE: usize = 64;
const SHELL_BYTES: u32 = 8 << 20;
/// Control replies queued; they are read lazily, so the surplus is dropped.
const CONTROL_QUEUE: usize = 16;
const CONTROL_BYTES: u32 = 4 << 20;

/// Which IOPub messages the reader passes on. Everything else is dropped
/// (and counted) as it arrives, so output a kernel produces between cells,
/// or for another request, costs no memory and never reaches a cell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum IopubWatch {
    /// Every message (the handshake only checks that IOPub is live).
    All,
    /// Messages whose parent is this request.
    Only(String),
    /// No message: no request is being watched.
    Nothing,
}

impl IopubWatch {
    fn admits(&self, msg: &JupyterMessage) -> bool {
        match self {
            IopubWatch::All => true,
            IopubWatch::Only(id) => parent_id(msg) == Some(id.as_str()),
            IopubWatch::Nothing => false,
        }
    }
}

/// The ids of the latest requests sent on a channel: the reader passes on
/// only messages answering one of them, so code that holds the key cannot
/// flood the harness with replies to nothing. Every reply to a recent
/// request passes (a forged one must not hide the genuine one after it);
/// the oldest ids are forgotten past [`PENDING_KEPT`].
#[derive(Debug, Default, Clone)]
struct Pending(Arc<Mutex<RecentIds<PENDING_KEPT>>>);

/// Requests remembered per channel (a cell sends two).
const PENDING_KEPT: usize = 256;

impl Pending {
    fn add(&self, id: &str) {
        self.0.lock().unwrap().insert(id);
    }

    /// Whether `msg` answers a recent request.
    fn admits(&self, msg: &JupyterMessage) -> bool {
        parent_id(msg).is_some_and(|parent| self.0.lock().unwrap().contains(parent))
    }
}

/// Where requests go: the kernel's own ZMQ sockets (local kernels) or a
/// gateway's websocket (`gateway::socket`).
#[async_trait::async_trait]
pub(super) trait Outbound: Send + Sync {
    async fn send(&mut self, channel: Channel, msg: JupyterMessage) -> Result<(), KernelError>;
}

/// The shell and control sockets of a local kernel.
struct ZmqOutbound {
    shell: DealerSendConnection,
    control: DealerSendConnection,
}

#[async_trait::async_trait]
impl Outbound for ZmqOutbound {
    async fn send(&mut self, channel: Channel, msg: JupyterMessage) -> Result<(), KernelError> {
        let socket = match channel {
            Channel::Control => &mut self.control,
            _ => &mut self.shell,
        };
        socket.send(msg).await.map_err(|source| KernelError::Wire {
            what: format!("sending on {channel:?}"),
            source,
        })
    }
}

/// The receiving half shared by the readers of one kernel's channels: each
/// message is filtered (only the watched request's IOPub, only replies to
/// our own recent requests) and queued for the session.
/// The queues end when every reader (every clone) is gone.
#[derive(Clone)]
pub(super) struct Router {
    iopub: Outbox,
    shell: Outbox,
    control: Outbox,
    filters: Filters,
    /// Also pass the server's own word that the kernel is restarting or
    /// dead (a gateway's status without a parent).
    server_status: bool,
}

/// What the session tells its readers to let through.
#[derive(Clone)]
struct Filters {
    iopub_watch: Arc<Mutex<IopubWatch>>,
    /// IOPub messages dropped because no request was watching them.
    iopub_dropped: Arc<AtomicU64>,
    /// Invalid text sequences replaced in the messages passed on since the
    /// watched request was sent.
    replaced: Arc<AtomicU64>,
    shell_pending: Pending,
    control_pending: Pending,
}

impl Router {
    /// A router that also passes the server's kernel status (see
    /// [`is_server_status`]).
    pub(super) fn with_server_status(mut self) -> Router {
        self.server_status = true;
        self
    }

    /// Queues `msg` if it is wanted; `false` once the session is gone.
    /// `replaced` is how many invalid text sequences the decoder replaced
    /// in it: counted for the execution when the message is passed on.
    pub(super) async fn route(&self, channel: Channel, msg: JupyterMessage, replaced: u64) -> bool {
        let count = || {
            if replaced > 0 {
                self.filters.replaced.fetch_add(replaced, Ordering::Relaxed);
            }
        };
        match channel {
            Channel::IOPub => {
                let admitted = self.filters.iopub_watch.lock().unwrap().admits(&msg)
                    || (self.server_status && is_server_status(&msg));
                if !admitted {
                    self.filters.iopub_dropped.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                count();
                self.iopub.send(msg).await
            }
            Channel::Shell => {
                if !self.filters.shell_pending.admits(&msg) {
                    return true;
                }
                count();
                self.shell.send(msg).await
            }
            Channel::Control => {
                if self.filters.control_pending.admits(&msg) {
                    // Read lazily: a full queue drops the surplus.
                    self.control.try_send(msg);
                }
                !self.control.is_closed()
            }
            _ => true,
        }
    }
}

/// Open channels to one kernel.
pub struct Channels {
    outbound: Box<dyn Outbound>,
    pub iopub_rx: Inbox,
    pub shell_rx: Inbox,
    /// Replies on control (interrupt, shutdown).
    pub control_rx: Inbox,
    filters: Filters,
    /// Messages the relays dropped for being larger than the cap.
    pub oversize_rx: mpsc::Receiver<Oversize>,
    readers: Vec<JoinHandle<()>>,
    _relays: Vec<Relay>,
    /// The kernel's own sockets and key (local kernels only).
    kernel: Option<ConnectionInfo>,
}

impl Drop for Channels {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// Waits until the kernel has bound its sockets (the files exist).
pub async fn wait_for_sockets(paths: &[PathBuf]) {
    while !paths.iter().all(|p| p.exists()) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

impl Channels {
    /// Connects to the kernel of `info` through relays in `wire.dir` that
    /// drop any message larger than `wire.max_message`.
    pub async fn connect(info: &ConnectionInfo, wire: &WireCap) -> Result<Self, KernelError> {
        let kernel = info.clone();
        let (oversize_send, oversize_rx) = mpsc::channel(OVERSIZE_QUEUE);
        let relayed = ConnectionInfo {
            // Fresh names per connection: the relays of a kernel being
            // replaced still own (and remove) theirs.
            ip: wire
                .dir
                .join(&uuid::Uuid::new_v4().simple().to_string()[..8])
                .to_string_lossy()
                .into_owned(),
            ..info.clone()
        };
        let mut relays = Vec::new();
        for port in [info.iopub_port, info.shell_port, info.control_port] {
            let kernel = PathBuf::from(format!("{}-{port}", info.ip));
            let listen = PathBuf::from(format!("{}-{port}", relayed.ip));
            let relay = Relay::start(&listen, &kernel, wire.max_message, oversize_send.clone())
                .at("relaying", &kernel)?;
            relays.push(relay);
        }
        let info = &relayed;
        let session = uuid::Uuid::new_v4().to_string();
        let zmq = |source| KernelError::Wire {
            what: "connecting".into(),
            source,
        };
        let identity = peer_identity_for_session(&session).map_err(zmq)?;
        let iopub = create_client_iopub_connection(info, "", &session)
            .await
            .map_err(zmq)?;
        let shell = create_client_shell_connection_with_identity(info, &session, identity)
            .await
            .map_err(zmq)?;
        let control = create_client_control_connection(info, &session)
            .await
            .map_err(zmq)?;
        let (shell_tx, shell_rx) = shell.split();
        let (control_tx, control_rx) = control.split();
        let (router, mut channels) = Channels::open(Box::new(ZmqOutbound {
            shell: shell_tx,
            control: control_tx,
        }));
        let control_reader = tokio::spawn(reader(control_rx, Channel::Control, router.clone()));
        let iopub_reader = tokio::spawn(reader(iopub, Channel::IOPub, router.clone()));
        let shell_reader = tokio::spawn(reader(shell_rx, Channel::Shell, router));
        channels.readers = vec![iopub_reader, shell_reader, control_reader];
        channels.oversize_rx = oversize_rx;
        channels._relays = relays;
        channels.kernel = Some(kernel);
        Ok(channels)
    }

    /// Channels sending through `outbound`, with the router their readers
    /// queue what arrives through (the readers are added by the caller,
    /// which also keeps them: see [`Channels::keep_reader`]).
    pub(super) fn open(outbound: Box<dyn Outbound>) -> (Router, Channels) {
        let (iopub, iopub_rx) = inbox(IOPUB_QUEUE, IOPUB_BYTES);
        let (shell, shell_rx) = inbox(SHELL_QUEUE, SHELL_BYTES);
        let (control, control_rx) = inbox(CONTROL_QUEUE, CONTROL_BYTES);
        let (_, oversize_rx) = mpsc::channel(1);
        let filters = Filters {
            iopub_watch: Arc::new(Mutex::new(IopubWatch::All)),
            iopub_dropped: Arc::new(AtomicU64::new(0)),
            replaced: Arc::new(AtomicU64::new(0)),
            shell_pending: Pending::default(),
            control_pending: Pending::default(),
        };
        let router = Router {
            iopub,
            shell,
            control,
            filters: filters.clone(),
            server_status: false,
        };
        let channels = Channels {
            outbound,
            iopub_rx,
            shell_rx,
            control_rx,
            filters,
            oversize_rx,
            readers: Vec::new(),
            _relays: Vec::new(),
            kernel: None,
        };
        (router, channels)
    }

    /// The kernel's own connection description, when these channels reach
    /// a local kernel's sockets (through relays).
    pub(super) fn kernel_connection(&self) -> Option<&ConnectionInfo> {
        self.kernel.as_ref()
    }

    /// A reader task that ends with these channels.
    pub(super) fn keep_reader(&mut self, reader: JoinHandle<()>) {
        self.readers.push(reader);
    }

    /// Passes every IOPub message again (the handshake checks that IOPub
    /// is live, on new channels or after the kernel's process was replaced).
    pub(super) fn watch_all_iopub(&self) {
        *self.filters.iopub_watch.lock().unwrap() = IopubWatch::All;
    }

    /// Whether the transport is still up (its readers still queue).
    pub(super) fn is_open(&self) -> bool {
        !self.shell_rx.is_closed()
    }

    /// On channels that replace lost ones in the middle of a request: pass
    /// `watched`'s IOPub messages and replies to `requests`, as the lost
    /// channels did.
    pub(super) fn resume(&self, watched: &str, requests: &[&str]) {
        *self.filters.iopub_watch.lock().unwrap() = IopubWatch::Only(watched.to_string());
        for id in requests {
            self.filters.shell_pending.add(id);
        }
    }

    /// Sends a request on shell; returns its msg_id.
    pub async fn send_shell(
        &mut self,
        content: JupyterMessageContent,
    ) -> Result<String, KernelError> {
        self.send_on_shell(JupyterMessage::new(content, None)).await
    }

    /// Invalid text sequences the decoder replaced (by U+FFFD) in the
    /// messages passed on since the last watched request was sent.
    pub(super) fn replaced_text(&self) -> u64 {
        self.filters.replaced.load(Ordering::Relaxed)
    }

    /// Sends a request on shell whose IOPub messages are to be read: from
    /// now on the IOPub queue holds only messages whose parent is this
    /// request. Whatever was queued before (output of an earlier request,
    /// of a thread still printing after its cell) is discarded first, and
    /// so are stale shell replies.
    pub async fn send_shell_watched(
        &mut self,
        content: JupyterMessageContent,
    ) -> Result<String, KernelError> {
        let msg = JupyterMessage::new(content, None);
        let id = msg.header.msg_id.clone();
        self.filters.replaced.store(0, Ordering::Relaxed);
        *self.filters.iopub_watch.lock().unwrap() = IopubWatch::Only(id.clone());
        let mut stale = 0u64;
        while self.iopub_rx.try_recv().is_ok() {
            stale += 1;
        }
        while self.shell_rx.try_recv().is_ok() {
            stale += 1;
        }
        while self.oversize_rx.try_recv().is_ok() {
            stale += 1;
        }
        let dropped = self.filters.iopub_dropped.swap(0, Ordering::Relaxed);
        if stale + dropped > 0 {
            tracing::debug!(
                stale,
                dropped,
                "discarded messages from before this request"
            );
        }
        self.send_on_shell(msg).await
    }

    /// Sends `msg` on shell, its reply expected; returns its msg_id.
    async fn send_on_shell(&mut self, msg: JupyterMessage) -> Result<String, KernelError> {
        let id = msg.header.msg_id.clone();
        self.filters.shell_pending.add(&id);
        self.outbound.send(Channel::Shell, msg).await?;
        Ok(id)
    }

    /// Stops passing IOPub messages on: nothing is watched until the next
    /// [`Channels::send_shell_watched`].
    pub fn unwatch_iopub(&self) {
        *self.filters.iopub_watch.lock().unwrap() = IopubWatch::Nothing;
    }

    /// Sends a request on control; the reply is not awaited (control replies
    /// are read lazily because a dying kernel may never send them).
    pub async fn send_control(
        &mut self,
        content: JupyterMessageContent,
    ) -> Result<(), KernelError> {
        // Replies to earlier requests are never read now: room for this one's.
        while self.control_rx.try_recv().is_ok() {}
        let msg = JupyterMessage::new(content, None);
        self.filters.control_pending.add(&msg.header.msg_id);
        self.outbound.send(Channel::Control, msg).await
    }
}

/// Reads one channel of a local kernel into the router until the session
/// is gone or the transport fails. A message that fails to verify or parse
/// is dropped, not fatal: code in the kernel can write garbage to its own
/// sockets. Text that is not valid Unicode does not make a message fail
/// (see `zmq_message`).
async fn reader<S: zeromq::SocketRecv>(mut conn: Connection<S>, channel: Channel, router: Router) {
    loop {
        match zmq_message::read(&mut conn).await {
            Ok(received) => {
                if !router
                    .route(channel.clone(), received.msg, received.replaced)
                    .await
                {
                    break;
                }
            }
            Err(e) if is_fatal(&e) => break,
            Err(_) => continue,
        }
    }
}

fn is_fatal(e: &jupyter_zmq_client::RuntimeError) -> bool {
    // Transport errors end the stream; a bad message (parse, signature,
    // framing) is only that message's problem.
    use jupyter_zmq_client::RuntimeError as E;
    matches!(e, E::ZmqError(_) | E::IoError(_))
}

/// A Jupyter server's notice that the kernel process is restarting or
/// dead: a status message answering no request.
pub fn is_server_status(msg: &JupyterMessage) -> bool {
    use jupyter_protocol::ExecutionState as S;
    parent_id(msg).is_none()
        && matches!(
            &msg.content,
            JupyterMessageContent::Status(s)
                if matches!(s.execution_state, S::Restarting | S::AutoRestarting | S::Dead)
        )
}

/// The parent msg_id of a message, if it has one.
pub fn parent_id(msg: &JupyterMessage) -> Option<&str> {
    msg.parent_header.as_ref().map(|h| h.msg_id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_protocol::{ExecuteRequest, InterruptReply, KernelInfoRequest, Status};

    fn reply_to(parent: &JupyterMessage) -> JupyterMessage {
        JupyterMessage::new(Status::idle(), Some(parent))
    }

    #[test]
    fn iopub_watch_passes_only_the_watched_request() {
        let cell = JupyterMessage::new(KernelInfoRequest {}, None);
        let other = JupyterMessage::new(KernelInfoRequest {}, None);
        let watch = IopubWatch::Only(cell.header.msg_id.clone());
        assert!(watch.admits(&reply_to(&cell)));
        assert!(!watch.admits(&reply_to(&other)));
        assert!(!watch.admits(&JupyterMessage::new(Status::busy(), None)));
        assert!(!IopubWatch::Nothing.admits(&reply_to(&cell)));
        assert!(IopubWatch::All.admits(&reply_to(&other)));
    }

    #[test]
    fn pending_passes_replies_to_recent_own_requests_only() {
        let pending = Pending::default();
        let sent = JupyterMessage::new(KernelInfoRequest {}, None);
        let never = JupyterMessage::new(ExecuteRequest::new("1".into()), None);
        pending.add(&sent.header.msg_id);
        let reply = JupyterMessage::new(InterruptReply::default(), Some(&sent));
        assert!(!pending.admits(&JupyterMessage::new(
            InterruptReply::default(),
            Some(&never)
        )));
        assert!(!pending.admits(&JupyterMessage::new(InterruptReply::default(), None)));
        // A forged reply and the genuine one after it both pass.
        assert!(pending.admits(&reply));
        assert!(pending.admits(&reply));
        // Old requests are forgotten: the set stays bounded.
        for _ in 0..PENDING_KEPT {
            pending.add(&uuid::Uuid::new_v4().to_string());
        }
        assert!(!pending.admits(&reply));
        assert_eq!(pending.0.lock().unwrap().len(), PENDING_KEPT);
    }
}
