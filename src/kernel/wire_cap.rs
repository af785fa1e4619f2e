//! A size cap on every message a kernel sends, applied on the wire.
//!
//! The ZMQ client (the `zeromq` crate) has no ZMQ_MAXMSGSIZE: it reads a
//! message whole, whatever length its frame headers claim, before anything
//! of retrace sees it. So the client talks to the kernel through a relay on
//! a Unix socket only the harness can reach; the relay reads the ZMTP frame
//! headers coming from the kernel and replaces every frame of a message
//! past the cap by an empty one without ever holding its body. The message
//! then fails its signature check and is dropped by the client; the relay
//! reports it (with the request it answered, read from its parent header)
//! so the execution it belongs to ends as `output_limit`.
//!
//! A relay may also carry [`Taps`] (a kernel served to a gateway: the
//! launcher's host evidence): one on what the kernel sends adds messages
//! of its own and spoils the kernel's messages that pretend to be them;
//! one on what the client sends watches the requests go in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::wire_tap::{Seen, Tap};
use super::zmtp::{frame_header, read_frame_header, Framed, COMMAND, DELIMITER, GREETING, MORE};
/// Frames up to this size are read whole (to find the delimiter and the
/// parent header); larger ones are streamed through.
const SMALL_FRAME: u64 = 64 * 1024;

/// Frames one message may have. A Jupyter message has its identities, the
/// delimiter, the signature, four JSON parts and its binary buffers: a few
/// dozen at most in practice. Each frame costs the client an allocation
/// whatever its size, so their number is capped as well as their bytes.
pub const MAX_FRAMES: u64 = 1024;

/// How long the kernel's socket may refuse connections after it appeared.
const CONNECT_PATIENCE: Duration = Duration::from_secs(10);
/// After the kernel's process ended, how long what it sent before may
/// still take to arrive (its socket ends when its last holder exits), and
/// how long a tap may take to learn of the end once its socket did.
const LAST_WORDS: Duration = Duration::from_millis(500);
const END_NOTICE: Duration = Duration::from_secs(3);

/// A message the relay emptied because it was larger than the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversize {
    /// msg_id of the request it answered, when its parent header said so.
    pub parent: Option<String>,
    /// Its own msg_id, when its header could be read.
    pub msg_id: Option<String>,
    /// Bytes of the message's frames that were dropped.
    pub bytes: u64,
    /// Its `msg_type`, when its header could be read.
    pub msg_type: Option<String>,
}

impl Oversize {
    /// Whether the dropped message counts as the cell's output. The
    /// kernel's echo of the code (`execute_input`) does not: the harness
    /// never reads it, and the code's size has its own bound
    /// (`code_size.rs`), so a cell is never stopped for output it did not
    /// print.
    pub fn is_output(&self) -> bool {
        self.msg_type.as_deref() != Some("execute_input")
    }
}

/// A relay in front of one kernel socket; it stops when dropped.
pub struct Relay {
    /// The Unix socket it listens on, removed with it (none on TCP).
    path: Option<PathBuf>,
    task: JoinHandle<()>,
    /// Clients connected now.
    clients: watch::Receiver<usize>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Relay {
    /// Listens on `path` and relays each connection to the kernel's socket
    /// `kernel`, capping what the kernel sends at `max` bytes per message.
    pub fn start(
        path: &Path,
        kernel: &Path,
        max: u64,
        report: mpsc::Sender<Oversize>,
    ) -> std::io::Result<Relay> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        let (count, clients) = watch::channel(0);
        let cap = Cap { max, report };
        let task = tokio::spawn(accept_loop(
            listener,
            kernel.to_path_buf(),
            cap,
            Taps::default(),
            count,
        ));
        Ok(Relay {
            path: Some(path.to_path_buf()),
            task,
            clients,
        })
    }

    /// The same relay behind a TCP listener: a kernel served to a remote
    /// gateway, whose clients speak ZMTP over TCP as they would over ipc;
    /// `taps` watch and add to what passes.
    pub fn start_tcp(
        listener: TcpListener,
        kernel: &Path,
        max: u64,
        report: mpsc::Sender<Oversize>,
        taps: Taps,
    ) -> Relay {
        let (count, clients) = watch::channel(0);
        let cap = Cap { max, report };
        let task = tokio::spawn(accept_loop(
            listener,
            kernel.to_path_buf(),
            cap,
            taps,
            count,
        ));
        Relay {
            path: None,
            task,
            clients,
        }
    }

    /// Waits up to `within` until no client is connected: after the
    /// kernel's end, each got the tap's last message and was closed.
    pub async fn settle(&self, within: Duration) {
        let mut clients = self.clients.clone();
        let _ = tokio::time::timeout(within, clients.wait_for(|n| *n == 0)).await;
    }
}

/// The taps of a relay, on each direction.
#[derive(Clone, Default)]
pub struct Taps {
    /// On what the kernel sends.
    pub from_kernel: Option<Arc<dyn Tap>>,
    /// On what the client sends: it sees each message before the kernel
    /// does (its `after` runs before the message is flushed on).
    pub to_kernel: Option<Arc<dyn Tap>>,
}

/// The cap on what the kernel sends, and where emptied messages go.
#[derive(Clone)]
struct Cap {
    max: u64,
    report: mpsc::Sender<Oversize>,
}

/// Counts a client as connected while it lives.
struct Connected(watch::Sender<usize>);

impl Connected {
    fn new(count: &watch::Sender<usize>) -> Connected {
        count.send_modify(|n| *n += 1);
        Connected(count.clone())
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A listener the relay accepts clients on.
trait Accept: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Send + 'static;
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Accept for UnixListener {
    type Stream = UnixStream;
    async fn next(&self) -> std::io::Result<UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    async fn next(&self) -> std::io::Result<TcpStream> {
        let (stream, _) = self.accept().await?;
        // Small messages (heartbeats, status) go out at once.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

/// Accepts clients until the listener fails and relays each to the
/// kernel's socket; the relays end with the loop.
async fn accept_loop<L: Accept>(
    listener: L,
    kernel: PathBuf,
    cap: Cap,
    taps: Taps,
    count: watch::Sender<usize>,
) {
    let mut connections = Vec::new();
    while let Ok(client) = listener.next().await {
        let kernel = kernel.clone();
        let cap = cap.clone();
        let taps = taps.clone();
        let connected = Connected::new(&count);
        connections.push(tokio::spawn(async move {
            let _connected = connected;
            if let Some(upstream) = connect(&kernel).await {
                relay(client, upstream, cap, taps).await;
            }
        }));
        connections.retain(|c: &JoinHandle<()>| !c.is_finished());
    }
    for c in connections {
        c.abort();
    }
}

/// Connects to the kernel's socket. Its file exists from `bind`, a moment
/// before the kernel listens: refusals are retried for a while, as the ZMQ
/// client itself would.
async fn connect(kernel: &Path) -> Option<UnixStream> {
    let deadline = tokio::time::Instant::now() + CONNECT_PATIENCE;
    loop {
        match UnixStream::connect(kernel).await {
            Ok(stream) => return Some(stream),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => {
                // Gone: the kernel exited, the client reconnects in vain.
                tracing::debug!(socket = %kernel.display(), error = %e, "cannot reach the kernel's socket");
                return None;
            }
        }
    }
}

/// Copies client → kernel as is and kernel → client through the cap; when
/// either direction ends, both do. With a tap, the kernel's end is
/// followed by the tap's last message: what the kernel sent before it
/// still goes first, a message it left unfinished is closed.
async fn relay<S>(client: S, kernel: UnixStream, cap: Cap, taps: Taps)
where
    S: AsyncRead + AsyncWrite,
{
    let (mut client_read, client_write) = tokio::io::split(client);
    let (mut kernel_read, mut kernel_write) = kernel.into_split();
    let mut to = Framed::new(client_write);
    let tap = taps.from_kernel;
    let ended = async {
        match &tap {
            Some(tap) => tap.ended().await,
            None => std::future::pending().await,
        }
    };
    // Client to kernel, uncapped: through the tap when there is one. The
    // client's end is not the kernel's.
    let to_kernel = async {
        match &taps.to_kernel {
            None => tokio::io::copy(&mut client_read, &mut kernel_write)
                .await
                .is_err(),
            Some(watching) => {
                let uncapped = Cap {
                    max: u64::MAX,
                    report: cap.report.clone(),
                };
                let copied = capped_copy(
                    &mut client_read,
                    &mut kernel_write,
                    &uncapped,
                    Some(&**watching),
                );
                match copied.await {
                    Err(e) => e.kind() != std::io::ErrorKind::UnexpectedEof,
                    Ok(()) => false,
                }
            }
        }
    };
    let kernel_ended = {
        let copy = capped_copy(&mut kernel_read, &mut to, &cap, tap.as_deref());
        tokio::pin!(copy);
        tokio::select! {
            sent = to_kernel => sent,
            _ = &mut copy => true,
            () = ended => {
                let _ = tokio::time::timeout(LAST_WORDS, &mut copy).await;
                true
            }
        }
    };
    let Some(tap) = tap.filter(|_| kernel_ended) else {
        return;
    };
    if tokio::time::timeout(END_NOTICE, tap.ended()).await.is_err() {
        return;
    }
    let Some(mut last) = to.closing() else {
        return;
    };
    last.extend_from_slice(&tap.last());
    if to.write_all(&last).await.is_ok() {
        let _ = to.flush().await;
        let _ = to.shutdown().await;
    }
}

/// Where a message's frames are: before or after the delimiter, and the
/// parent header once seen.
#[derive(Debug, Default)]
struct MessageScan {
    bytes: u64,
    frames: u64,
    /// Past the cap (bytes or frames): nothing more of it is forwarded.
    over: bool,
    /// A frame of it went on spoiled.
    spoiled: bool,
    dropped: u64,
    /// Frames seen since the delimiter (1 = signature, 2 = header,
    /// 3 = parent header, 4 = metadata, 5 = content).
    after_delimiter: Option<u32>,
    /// The parent header as it came, parsed only for a report (most
    /// messages have none) or by a tap.
    parent_header: Option<Vec<u8>>,
    /// The header and the content, for a tap.
    header: Option<Vec<u8>>,
    content: Option<Vec<u8>>,
}

impl MessageScan {
    /// Notes one message frame of `len` bytes whose body is `body` when it
    /// was read whole.
    fn observe(&mut self, body: Option<Vec<u8>>) {
        match self.after_delimiter.as_mut() {
            None => {
                if body.as_deref() == Some(DELIMITER) {
                    self.after_delimiter = Some(0);
                }
            }
            Some(n) => {
                *n += 1;
                match *n {
                    2 => self.header = body,
                    3 => self.parent_header = body,
                    5 => self.content = body,
                    _ => {}
                }
            }
        }
    }

    /// Whether the next frame is the message's header.
    fn header_next(&self) -> bool {
        self.after_delimiter == Some(1)
    }

    /// The message's Jupyter parts, when its headers were read whole (a
    /// content too large to hold is seen empty, its size in `bytes`).
    fn seen(&self) -> Option<Seen<'_>> {
        Some(Seen {
            header: self.header.as_deref()?,
            parent: self.parent_header.as_deref()?,
            content: self.content.as_deref().unwrap_or_default(),
            bytes: self.bytes,
        })
    }

    /// msg_id of the request the message answered.
    fn parent(&self) -> Option<String> {
        msg_id_in(self.parent_header.as_deref()?)
    }

    /// The message's own msg_id.
    fn msg_id(&self) -> Option<String> {
        msg_id_in(self.header.as_deref()?)
    }

    /// The message's type.
    fn msg_type(&self) -> Option<String> {
        field_of(self.header.as_deref()?, "msg_type")
    }
}

/// The `msg_id` of a header (or parent header) frame.
fn msg_id_in(header: &[u8]) -> Option<String> {
    field_of(header, "msg_id")
}

/// A string field of a header frame.
fn field_of(header: &[u8], field: &str) -> Option<String> {
    let v = serde_json::from_slice::<serde_json::Value>(header).ok()?;
    v.get(field)?.as_str().map(str::to_string)
}

/// Copies a ZMTP 3 stream, emptying the frames of any message past the
/// cap; every emptied message is reported once it ends. A tap spoils the
/// kernel's messages that claim to be its own and adds its own after
/// others.
async fn capped_copy<R, W>(
    from: R,
    to: &mut W,
    cap: &Cap,
    tap: Option<&dyn Tap>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Written whole messages at a time: frame by frame, a message of seven
    // frames cost fourteen writes here and as many wakeups of the reader.
    let mut to = BufWriter::with_capacity(64 * 1024, to);
    let copied = capped_copy_buffered(from, &mut to, cap, tap).await;
    let flushed = to.flush().await;
    copied.and(flushed)
}

async fn capped_copy_buffered<R, W>(
    from: R,
    to: &mut BufWriter<W>,
    cap: &Cap,
    tap: Option<&dyn Tap>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from = BufReader::with_capacity(64 * 1024, from);
    // The 64-byte greeting goes on as it comes: libzmq sends its signature
    // and waits for the peer's before it sends the rest, and a libzmq
    // client (a gateway's) waits likewise.
    let mut greeting = [0u8; GREETING as usize];
    let mut passed = 0;
    while passed < greeting.len() {
        let n = from.read(&mut greeting[passed..]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        to.write_all(&greeting[passed..passed + n]).await?;
        to.flush().await?;
        passed += n;
    }
    let mut scan = MessageScan::default();
    // With a tap (a gateway's client at the other end), a message goes on
    // whole or not at all: a gateway's server fails on a message whose
    // signature does not match (Jupyter Server's activity tracking raises,
    // and the kernel's IOPub stream stops for good), so a message past the
    // cap or spoiled is dropped before any of it is written.
    let whole = tap.is_some();
    let mut held: Vec<u8> = Vec::new();
    loop {
        let (flags, len) = read_frame_header(&mut from).await?;
        let command = flags & COMMAND != 0;
        if command {
            if len > SMALL_FRAME {
                // ZMTP commands are a few bytes, outside any message's cap,
                // and the client reads each whole: a long one ends the
                // connection.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a ZMTP command frame of {len} bytes"),
                ));
            }
            let mut body = vec![0u8; len as usize];
            from.read_exact(&mut body).await?;
            to.write_all(&frame_header(flags, len)).await?;
            to.write_all(&body).await?;
            to.flush().await?;
            continue;
        }
        scan.bytes = scan.bytes.saturating_add(len);
        scan.frames += 1;
        scan.over |= scan.bytes > cap.max || scan.frames > MAX_FRAMES;
        if scan.over {
            // Of a message past the cap only its end goes on, as one empty
            // frame: the client gets a malformed message it drops, and holds
            // nothing per frame of it, however many the kernel sent.
            if flags & MORE == 0 && !whole {
                to.write_all(&[0, 0]).await?;
            }
            let skipped =
                tokio::io::copy(&mut (&mut from).take(len), &mut tokio::io::sink()).await?;
            if skipped < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            scan.dropped += len;
            scan.observe(None);
        } else {
            let check = tap.is_some() && scan.header_next();
            let frame = if whole {
                copy_frame(&mut from, &mut held, flags, len, check, tap).await?
            } else {
                copy_frame(&mut from, to, flags, len, check, tap).await?
            };
            scan.spoiled |= frame.spoiled;
            scan.observe(frame.body);
        }
        if flags & MORE == 0 {
            let done = std::mem::take(&mut scan);
            if whole && !done.over && !done.spoiled {
                to.write_all(&held).await?;
            }
            held.clear();
            if let Some((tap, seen)) = tap.zip(done.seen()) {
                if let Some(hold) = tap.hold_after(&seen) {
                    to.flush().await?;
                    hold.await;
                }
                if let Some(added) = tap.after(&seen) {
                    to.write_all(&added).await?;
                }
            }
            // The message is whole: the client gets it now.
            to.flush().await?;
            if done.over {
                tracing::info!(
                    bytes = done.bytes,
                    cap = cap.max,
                    "a kernel message larger than the cap was dropped on the wire"
                );
                let _ = cap.report.try_send(Oversize {
                    parent: done.parent(),
                    msg_id: done.msg_id(),
                    bytes: done.dropped,
                    msg_type: done.msg_type(),
                });
            }
        }
    }
}

/// One frame of a message as [`copy_frame`] passed it on.
struct Frame {
    /// Its body, when it was small enough to read whole.
    body: Option<Vec<u8>>,
    /// It went on spoiled.
    spoiled: bool,
}

/// Copies one frame of a message within the cap. A header frame a tap is
/// to check (`check`) claiming to be the tap's, or too large to check,
/// goes on spoiled: its first byte changed, so its signature no longer
/// matches.
async fn copy_frame<R, W>(
    from: &mut BufReader<R>,
    to: &mut W,
    flags: u8,
    len: u64,
    check: bool,
    tap: Option<&dyn Tap>,
) -> std::io::Result<Frame>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    const SPOILED: u8 = b'!';
    if len <= SMALL_FRAME {
        let mut body = vec![0u8; len as usize];
        from.read_exact(&mut body).await?;
        let spoiled = check && tap.is_some_and(|t| t.claims_ours(&body));
        if spoiled {
            if let Some(first) = body.first_mut() {
                *first = SPOILED;
            }
        }
        to.write_all(&frame_header(flags, len)).await?;
        to.write_all(&body).await?;
        return Ok(Frame {
            body: Some(body),
            spoiled,
        });
    }
    to.write_all(&frame_header(flags, len)).await?;
    let mut rest = len;
    if check {
        from.read_u8().await?;
        to.write_all(&[SPOILED]).await?;
        rest -= 1;
    }
    let copied = tokio::io::copy(&mut from.take(rest), to).await?;
    if copied < rest {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Frame {
        body: None,
        spoiled: check,
    })
}

#[cfg(test)]
#[path = "wire_cap_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "wire_cap_props.rs"]
mod props;
