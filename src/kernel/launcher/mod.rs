//! The host side of a kernel that Jupyter Enterprise Gateway starts with
//! retrace's kernelspec (`retrace image kernelspec --enterprise-gateway`).
//!
//! EG's `DistributedProcessProxy` runs `retrace launch ...` on the host it
//! chose, over SSH. retrace starts the kernel there in its own confinement,
//! exactly as a local kernel (cgroups, namespaces, seccomp, its own uid,
//! ipc sockets in a network namespace of its own), then serves the
//! kernel's five sockets on TCP ports through the wire cap, sends their
//! description to the gateway's response address ([`payload`]), and takes
//! the gateway's signals on a communication port ([`request`]). It ends
//! when the kernel exits or the gateway says so, and leaves nothing: what
//! the host saw of the kernel is returned as a [`HostReport`].

mod cell_guard;
mod evidence;
mod payload;
mod ports;
mod request;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::cell_watch::{Event as CellEvent, Limits};
use super::host_evidence::HostStops;
use super::local::HostWatch;
use super::options::KernelOptions;
use super::recent::{RecentIds, SEEN_KEPT};
use super::wire_cap::{Oversize, Relay, Taps};
use super::wire_tap::Tap;
use super::{Kernel, KernelError};
use crate::sandbox::{Counters, ExitInfo};
use cell_guard::{CellGuard, GuardCounts};
use evidence::{EvidenceTap, JailReading, RequestTap};
pub use ports::PortRange;
use request::Request;

/// How long the gateway's response address may take to accept.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the gateway's IOPub connections may take to get the last host
/// evidence after the kernel died, before the launcher ends.
const LAST_EVIDENCE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error(
        "the gateway's public key: {0} (the kernelspec passes EG's `{{public_key}}` unchanged)"
    )]
    PublicKey(String),
    #[error("{0} failed")]
    Crypto(&'static str),
    #[error(
        "the kernel's messages are signed with {0}; retrace's host evidence needs hmac-sha256 \
         with a key"
    )]
    Signature(String),
    #[error("port range `{0}`: expected LOWER..UPPER (EG's `{{port_range}}`), e.g. 40000..41000")]
    PortRange(String),
    #[error("no free port in {range} after {tries} tries; widen the gateway's port range")]
    NoPort { range: PortRange, tries: u32 },
    #[error("binding a port in {range}: {source}")]
    Bind {
        range: PortRange,
        source: std::io::Error,
    },
    #[error(
        "sending the connection to the gateway's response address {address}: {reason}; \
         the host must reach EG's response address (EG_RESPONSE_IP, EG_RESPONSE_PORT)"
    )]
    Response { address: String, reason: String },
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

/// What EG substitutes into the kernelspec's argv for this kernel.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub kernel_id: String,
    /// `IP:PORT` of the gateway's response socket.
    pub response_address: String,
    /// The gateway's RSA public key, base64 DER.
    pub public_key: String,
    pub port_range: PortRange,
}

/// What the host saw of one kernel, from its jail, not from the kernel.
#[derive(Debug, Clone, Serialize)]
pub struct HostReport {
    pub kernel_id: String,
    /// The launcher's pid (what the gateway signals) and the kernel's.
    pub launcher_pid: u32,
    pub kernel_pid: i32,
    /// The uid the kernel ran as; `None` unconfined.
    pub uid: Option<u32>,
    /// Why it ended: the kernel exited, or what the gateway asked.
    pub ended: String,
    /// How the kernel process ended, when it did by itself.
    pub exit: Option<ExitInfo>,
    /// The jail's counters over the kernel's life (OOM kills, memory
    /// limit hits, pids limit events, CPU time).
    pub counters: Counters,
    /// Messages the wire cap emptied for being larger than the cap.
    pub oversize_messages: u64,
}

/// The five kernel channels, in the order their ports are bound.
const CHANNELS: [&str; 5] = ["shell", "iopub", "stdin", "control", "hb"];

/// Serves `kernel`, started with `options`, to the gateway of `request`
/// until it ends; the kernel is gone when this returns.
pub async fn serve(
    mut kernel: Kernel,
    options: &KernelOptions,
    request: &LaunchRequest,
) -> Result<HostReport, LauncherError> {
    let served = Served::open(&kernel, Limits::host(options), request).await;
    let served = match served {
        Ok(served) => served,
        Err(e) => {
            kernel.discard().await;
            return Err(e);
        }
    };
    let (ended, oversize) = served.run(&mut kernel).await;
    let (counters, exit) = kernel.host_evidence();
    let report = HostReport {
        kernel_id: request.kernel_id.clone(),
        launcher_pid: std::process::id(),
        kernel_pid: kernel.pid(),
        uid: kernel.uid(),
        ended,
        exit,
        counters,
        oversize_messages: oversize,
    };
    kernel.discard().await;
    Ok(report)
}

/// A kernel's sockets on TCP and the gateway's communication port.
struct Served {
    /// In the order of [`CHANNELS`].
    relays: Vec<Relay>,
    comm: TcpListener,
    /// Messages the wire cap emptied so far.
    oversize: Arc<AtomicU64>,
    /// The host's guard asking for the kernel's interrupt.
    interrupts: mpsc::Receiver<()>,
}

impl Served {
    /// Binds the ports, starts the relays and tells the gateway.
    async fn open(
        kernel: &Kernel,
        limits: Limits,
        request: &LaunchRequest,
    ) -> Result<Served, LauncherError> {
        let info = kernel.connection();
        let kernel_ports = [
            info.shell_port,
            info.iopub_port,
            info.stdin_port,
            info.control_port,
            info.hb_port,
        ];
        let HostWatch {
            jail,
            exit,
            lock_kills,
            main_thread,
        } = kernel.host_watch();
        let (cells, cell_events) = mpsc::unbounded_channel();
        let (oversize_tx, oversize_rx) = mpsc::channel(64);
        let oversize = count_oversize(oversize_rx, cells.clone());
        let (interrupt, interrupts) = mpsc::channel(4);
        let counts = Arc::new(GuardCounts::default());
        let guard = CellGuard {
            limits,
            jail: jail.clone(),
            interrupt,
            counts: counts.clone(),
        };
        tokio::spawn(guard.run(cell_events));
        let emptied = oversize.clone();
        let read = Arc::new(move || JailReading {
            counters: jail.counters(),
            traces: jail.traces(),
            kernel_uid: jail.uid(),
            stops: HostStops {
                lock_kills: lock_kills.as_ref().map_or(0, |k| k.load(Ordering::SeqCst)),
                cpu_stops: counts.cpu_stops.load(Ordering::SeqCst),
                output_stops: counts.output_stops.load(Ordering::SeqCst),
                stop_kills: counts.kills.load(Ordering::SeqCst),
                oversize_messages: emptied.load(Ordering::SeqCst),
            },
        });
        let tap = EvidenceTap::new(&info.key, &info.signature_scheme, read, exit)?
            .telling(cells)
            .checking_ends(main_thread);
        let tap = Arc::new(tap);
        let requests: Arc<dyn Tap> = Arc::new(RequestTap(tap.clone()));
        let evidence: Arc<dyn Tap> = tap;
        let mut relays = Vec::new();
        let mut ports = serde_json::Map::new();
        for (name, kernel_port) in CHANNELS.iter().zip(kernel_ports) {
            let listener = request.port_range.bind().await?;
            let port = listener
                .local_addr()
                .map_err(|source| LauncherError::Bind {
                    range: request.port_range,
                    source,
                })?;
            ports.insert(format!("{name}_port"), port.port().into());
            let socket = std::path::PathBuf::from(format!("{}-{kernel_port}", info.ip));
            // The host evidence goes where a client reads the kernel's
            // status; it is read as requests go in where they do.
            let taps = match *name {
                "iopub" => Taps {
                    from_kernel: Some(evidence.clone()),
                    to_kernel: None,
                },
                "shell" => Taps {
                    from_kernel: None,
                    to_kernel: Some(requests.clone()),
                },
                _ => Taps::default(),
            };
            relays.push(Relay::start_tcp(
                listener,
                &socket,
                kernel.max_message(),
                oversize_tx.clone(),
                taps,
            ));
        }
        let comm = request.port_range.bind().await?;
        let comm_port = comm.local_addr().map_err(|source| LauncherError::Bind {
            range: request.port_range,
            source,
        })?;

        let pid = std::process::id();
        let mut connection = ports;
        for (key, value) in [
            ("ip", serde_json::json!("0.0.0.0")),
            ("transport", serde_json::json!("tcp")),
            ("key", serde_json::json!(info.key)),
            ("signature_scheme", serde_json::json!(info.signature_scheme)),
            ("kernel_name", serde_json::json!(info.kernel_name)),
            ("pid", serde_json::json!(pid)),
            ("pgid", serde_json::json!(nix::unistd::getpgrp().as_raw())),
            ("comm_port", serde_json::json!(comm_port.port())),
            ("kernel_id", serde_json::json!(request.kernel_id)),
        ] {
            connection.insert(key.into(), value);
        }
        let text = serde_json::Value::Object(connection).to_string();
        let sealed = payload::seal(text.as_bytes(), &request.public_key)?;
        send_response(&request.response_address, sealed.as_bytes()).await?;
        tracing::info!(
            kernel_id = %request.kernel_id,
            kernel = %kernel.id(),
            pid = kernel.pid(),
            comm_port = comm_port.port(),
            "kernel served to the gateway"
        );
        Ok(Served {
            relays,
            comm,
            oversize,
            interrupts,
        })
    }

    fn iopub(&self) -> &Relay {
        let at = CHANNELS.iter().position(|c| *c == "iopub");
        &self.relays[at.expect("IOPub is a channel")]
    }

    /// Takes the gateway's requests until the kernel or the gateway ends
    /// it; returns why, and the messages the wire cap emptied.
    async fn run(mut self, kernel: &mut Kernel) -> (String, u64) {
        let died = kernel.died();
        tokio::pin!(died);
        let mut terminate = signal(tokio::signal::unix::SignalKind::terminate());
        let mut hangup = signal(tokio::signal::unix::SignalKind::hangup());
        let ended = loop {
            tokio::select! {
                () = &mut died => {
                    // The gateway forwards the last host evidence before it
                    // learns that the launcher is gone.
                    self.iopub().settle(LAST_EVIDENCE).await;
                    break "the kernel exited".to_string();
                }
                _ = terminate.recv() => break "SIGTERM to the launcher".to_string(),
                _ = hangup.recv() => break "SIGHUP to the launcher".to_string(),
                Some(()) = self.interrupts.recv() => {
                    if let Err(e) = kernel.interrupt().await {
                        tracing::warn!(error = %e, "interrupting the kernel for a limit");
                    }
                }
                accepted = self.comm.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    match Request::read(stream).await {
                        None | Some(Request::Poll) => {}
                        Some(Request::Interrupt) => {
                            if let Err(e) = kernel.interrupt().await {
                                tracing::warn!(error = %e, "interrupting the kernel");
                            }
                        }
                        // The kernel runs under retrace's own init in its
                        // namespace; other signals mean nothing to it.
                        Some(Request::Signal(n)) => {
                            tracing::info!(signal = n, "a signal from the gateway, ignored");
                        }
                        Some(Request::Kill(n)) => break format!("signal {n} from the gateway"),
                        Some(Request::Shutdown) => break "shutdown by the gateway".to_string(),
                    }
                }
            }
        };
        (ended, self.oversize.load(Ordering::SeqCst))
    }
}

/// Counts the messages the wire cap empties as they are reported, each
/// once (the host's readings carry the count), and tells the guard of each.
fn count_oversize(
    mut reports: mpsc::Receiver<Oversize>,
    cells: mpsc::UnboundedSender<CellEvent>,
) -> Arc<AtomicU64> {
    let count = Arc::new(AtomicU64::new(0));
    let counting = count.clone();
    tokio::spawn(async move {
        // Each of the gateway's IOPub connections reports the same message.
        let mut reported = RecentIds::<SEEN_KEPT>::default();
        while let Some(report) = reports.recv().await {
            // The kernel's echo of a cell's code is not its output.
            if !report.is_output() {
                continue;
            }
            if !reported.first(report.msg_id.as_deref().unwrap_or_default()) {
                continue;
            }
            counting.fetch_add(1, Ordering::SeqCst);
            let _ = cells.send(CellEvent::OverCap(report.parent));
        }
    });
    count
}

fn signal(kind: tokio::signal::unix::SignalKind) -> tokio::signal::unix::Signal {
    tokio::signal::unix::signal(kind).expect("a signal handler can be installed")
}

/// Sends the sealed connection to the gateway and closes the connection
/// (the gateway reads to the end).
async fn send_response(address: &str, payload: &[u8]) -> Result<(), LauncherError> {
    let failed = |reason: String| LauncherError::Response {
        address: address.to_string(),
        reason,
    };
    let send = async {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(payload).await?;
        stream.shutdown().await
    };
    match tokio::time::timeout(RESPONSE_TIMEOUT, send).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(failed(e.to_string())),
        Err(_) => Err(failed(format!("no answer in {RESPONSE_TIMEOUT:?}"))),
    }
}
