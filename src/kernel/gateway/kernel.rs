//! The gateway backend: one kernel on a gateway, with the gateway's REST
//! API where a local kernel has its process and jail (interrupt, restart,
//! delete, the kernel's status) and its websocket where a local kernel has
//! ZMQ. Its death is learned from the server's status messages; its stop
//! is a restart through the gateway (no kill latency to report).

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::OwnedSemaphorePermit;

use super::super::backend::{Backend, Baseline, Ending, Failure, Marks, Stopped, Witness};
use super::super::cell_watch::Back;
use super::super::client::{is_server_status, Channels};
use super::super::execution::ms;
use super::super::host_evidence::Moment;
use super::super::options::{KernelBanner, KernelOptions};
use super::super::outcome::{Enforcement, Outcome};
use super::super::probe::probe_inline;
use super::super::requests::{handshake, install_probe, silent_ok};
use super::super::KernelError;
use super::evidence::EvidenceLog;
use super::socket;
use super::start_env::start_env;
use super::workdir::{upload, workdir_cell, CLEANUP_CELL};
use super::Gateway;
use crate::sandbox::{Counters, Evidence, ExitInfo, Flag, Verdict};

/// How long each setup step may take (a chunk of a file, the probe).
pub(super) const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts to reopen a dropped websocket, and the first wait between them.
const RECONNECTS: u32 = 3;
const RECONNECT_BACKOFF: Duration = Duration::from_millis(500);
/// How long a kernel may take to answer after the gateway replaced its
/// process (it died or was restarted).
const REVIVE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a revived kernel may take to answer on the websocket that was
/// open before a new one is tried.
const SAME_SOCKET_WAIT: Duration = Duration::from_secs(10);

/// How long the launcher's reading of a kernel's death may take behind the
/// gateway's word of it before the host counts as lost (generous: a
/// wrong call turns a cell's verdict into an infrastructure error).
const HOST_LOST_WAIT: Duration = Duration::from_secs(10);

/// What a Jupyter server writes to the cell's stderr when it dropped
/// output past its `iopub_data_rate_limit`.
const RATE_LIMITED: &str = "IOPub data rate exceeded.";
/// How long the gateway may take to notice a kernel that ended itself
/// (`quit()`); Jupyter's restarter polls every 3 s.
const QUIT_SETTLE: Duration = Duration::from_secs(10);

pub struct GatewayBackend {
    gateway: Arc<Gateway>,
    /// The gateway's id of the kernel.
    id: String,
    /// This client's session: a reconnection with it gets what the server
    /// buffered meanwhile.
    session: String,
    channels: Channels,
    banner: KernelBanner,
    options: KernelOptions,
    files: Vec<PathBuf>,
    /// `--max-task-file-bytes`.
    max_file_bytes: u64,
    restarts: u32,
    /// The kernel's process was replaced (it died, it was restarted):
    /// retrace's setup must run in the new one before the next cell.
    needs_setup: bool,
    /// What retrace's launcher reported from the kernel's host; the
    /// verdicts' evidence when the kernelspec is retrace's.
    host: Arc<EvidenceLog>,
    closed: bool,
    _slot: OwnedSemaphorePermit,
}

impl GatewayBackend {
    pub(super) async fn start(
        gateway: Arc<Gateway>,
        files: &[PathBuf],
        max_file_bytes: u64,
        options: KernelOptions,
    ) -> Result<GatewayBackend, KernelError> {
        let slot = gateway
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| KernelError::GatewayClosed)?;
        let started = Instant::now();
        let id = create(&gateway, &options).await?;
        let created = started.elapsed();
        let session = uuid::Uuid::new_v4().to_string();
        let host = Arc::new(EvidenceLog::new(gateway.hosts.clone()));
        let prepared = async {
            let mut channels = socket::connect(
                &gateway.rest,
                &id,
                &session,
                max_message(&options),
                host.clone(),
            )
            .await?;
            let connected = started.elapsed();
            let banner = handshake(&mut channels).await?;
            // Where a start spends its time, for `-vv` and the benchmark.
            tracing::debug!(
                kernel = %id,
                create_ms = ms(created),
                websocket_ms = ms(connected - created),
                kernel_info_ms = ms(started.elapsed() - connected),
                "gateway kernel answering"
            );
            Ok::<_, KernelError>((channels, banner))
        };
        let timeout = options.startup_timeout;
        let (channels, banner) = match tokio::time::timeout(timeout, prepared).await {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => {
                delete(&gateway, &id).await;
                return Err(e);
            }
            Err(_) => {
                delete(&gateway, &id).await;
                return Err(KernelError::GatewayTimeout {
                    url: gateway.info.url.clone(),
                    id,
                    waited: timeout,
                });
            }
        };
        let mut kernel = GatewayBackend {
            gateway,
            id,
            session,
            channels,
            banner,
            options,
            files: files.to_vec(),
            max_file_bytes,
            restarts: 0,
            needs_setup: true,
            host,
            closed: false,
            _slot: slot,
        };
        if let Err(e) = kernel.setup().await {
            kernel.close_within(Duration::from_millis(500)).await;
            return Err(e);
        }
        tracing::info!(
            kernel = %kernel.id,
            gateway = %kernel.gateway.info.url,
            ms = started.elapsed().as_millis() as u64,
            "gateway kernel started"
        );
        Ok(kernel)
    }

    /// A private working directory, the task's files in it, retrace's probe.
    async fn setup(&mut self) -> Result<(), KernelError> {
        let channels = &mut self.channels;
        silent_ok(
            channels,
            &workdir_cell(&self.id),
            SETUP_TIMEOUT,
            "making the working directory",
        )
        .await?;
        for file in &self.files {
            upload(channels, file, self.max_file_bytes).await?;
        }
        install_probe(channels, &probe_inline()).await?;
        self.needs_setup = false;
        Ok(())
    }

    /// Waits up to `wait` for the server's word that the kernel's process
    /// is restarting or dead.
    async fn wait_for_server_status(&mut self, wait: Duration) -> bool {
        let channels = &mut self.channels;
        let seen = async {
            while let Some(msg) = channels.iopub_rx.recv().await {
                if is_server_status(&msg) {
                    return true;
                }
            }
            false
        };
        tokio::time::timeout(wait, seen).await.unwrap_or(false)
    }

    /// Reopens the websocket with the same session, watching what the lost
    /// one watched.
    async fn reconnect(&mut self, watched: &str, requests: &[&str]) -> Result<(), KernelError> {
        let mut wait = RECONNECT_BACKOFF;
        let mut last = None;
        for attempt in 1..=RECONNECTS {
            tracing::info!(kernel = %self.id, attempt, "opening the kernel's websocket again");
            match socket::connect(
                &self.gateway.rest,
                &self.id,
                &self.session,
                max_message(&self.options),
                self.host.clone(),
            )
            .await
            {
                Ok(channels) => {
                    channels.resume(watched, requests);
                    self.channels = channels;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        Err(last.unwrap_or_else(|| KernelError::Gateway("reconnecting failed".into())))
    }

    /// Before a cell: a kernel whose process was replaced gets retrace's
    /// setup again, a kernel the gateway lost is replaced by a new one, a
    /// dropped websocket is reopened. `Ok(true)` when the state was lost.
    async fn make_ready(&mut self) -> Result<bool, KernelError> {
        if !self.needs_setup && self.channels.is_open() {
            return Ok(false);
        }
        let known = self
            .gateway
            .rest
            .call(Method::GET, &kernel_path(&self.id), None)
            .await?;
        if known.status == StatusCode::NOT_FOUND {
            tracing::info!(kernel = %self.id, "the gateway no longer has the kernel; starting a new one");
            self.replace().await?;
            return Ok(true);
        }
        if known.body.get("execution_state").and_then(Value::as_str) == Some("dead") {
            self.rest_restart().await?;
            return Ok(true);
        }
        if !self.channels.is_open() {
            self.reconnect("", &[]).await?;
            self.channels.unwatch_iopub();
        }
        if !self.needs_setup {
            return Ok(false);
        }
        self.revive().await?;
        Ok(true)
    }

    /// Waits for the kernel's new process to answer, then sets it up. A
    /// kernel Enterprise Gateway restarted may run on another host with
    /// other ports, which the open websocket's streams never reach: when it
    /// does not answer there soon, a new websocket is opened.
    async fn revive(&mut self) -> Result<(), KernelError> {
        let answered = if self.channels.is_open() {
            tokio::time::timeout(SAME_SOCKET_WAIT, handshake(&mut self.channels))
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            None
        };
        let banner = match answered {
            Some(banner) => banner,
            None => {
                self.reconnect("", &[]).await?;
                self.channels.unwatch_iopub();
                tokio::time::timeout(REVIVE_TIMEOUT, handshake(&mut self.channels))
                    .await
                    .map_err(|_| KernelError::GatewayTimeout {
                        id: self.id.clone(),
                        url: self.gateway.info.url.clone(),
                        waited: REVIVE_TIMEOUT,
                    })??
            }
        };
        self.banner = banner;
        self.needs_setup = true;
        self.setup().await
    }

    /// A new kernel in place of one the gateway no longer has.
    async fn replace(&mut self) -> Result<(), KernelError> {
        let id = create(&self.gateway, &self.options).await?;
        self.id = id;
        self.channels = socket::connect(
            &self.gateway.rest,
            &self.id,
            &self.session,
            max_message(&self.options),
            self.host.clone(),
        )
        .await?;
        self.restarts += 1;
        self.revive().await
    }

    /// The host's latest reading, from retrace's launcher only.
    fn host_reading(&self) -> Option<crate::kernel::host_evidence::HostEvidence> {
        self.gateway
            .info
            .retrace_launcher
            .then(|| self.host.latest())
            .flatten()
    }

    /// Whether the gateway's model of the kernel says it was OOM-killed
    /// (Enterprise Gateway on Kubernetes can pass the pod's reason on).
    async fn oom_reported(&self) -> bool {
        match self
            .gateway
            .rest
            .call(Method::GET, &kernel_path(&self.id), None)
            .await
        {
            Ok(answer) => answer.body.to_string().contains("OOMKilled"),
            Err(_) => false,
        }
    }

    /// Asks the gateway to interrupt the running execution.
    async fn rest_interrupt(&mut self) -> Result<(), KernelError> {
        let path = format!("{}/interrupt", kernel_path(&self.id));
        self.gateway
            .rest
            .call(Method::POST, &path, Some(&json!({})))
            .await
            .map(|_| ())
    }

    /// Restarts the kernel through the gateway (its variables are lost),
    /// then sets the new process up as at the start.
    async fn rest_restart(&mut self) -> Result<(), KernelError> {
        tracing::info!(kernel = %self.id, restarts = self.restarts, "restarting the gateway kernel");
        let path = format!("{}/restart", kernel_path(&self.id));
        let answer = self
            .gateway
            .rest
            .call(Method::POST, &path, Some(&json!({})))
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return self.replace().await;
        }
        self.restarts += 1;
        self.needs_setup = true;
        if !self.channels.is_open() {
            self.reconnect("", &[]).await?;
        }
        self.revive().await
    }

    /// Removes the kernel's working directory (given `cleanup` to do so),
    /// then deletes the kernel.
    async fn close_within(&mut self, cleanup: Duration) {
        if self.closed {
            return;
        }
        self.closed = true;
        if !self.needs_setup && self.channels.is_open() {
            let _ = silent_ok(&mut self.channels, CLEANUP_CELL, cleanup, "cleaning up").await;
        }
        delete(&self.gateway, &self.id).await;
    }
}

#[async_trait::async_trait]
impl Backend for GatewayBackend {
    fn id(&self) -> &str {
        &self.id
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

    async fn ready(&mut self) -> Result<bool, KernelError> {
        self.make_ready().await
    }

    /// A kernel of retrace's launcher: its host's reading of its death,
    /// which comes at once (the gateway notices a launcher's end only at
    /// its next poll, seconds later).
    fn death(&self) -> BoxFuture<'static, ()> {
        if !self.gateway.info.retrace_launcher {
            return Box::pin(std::future::pending());
        }
        let host = self.host.clone();
        let since = host.count();
        Box::pin(async move { host.death_after(since).await })
    }

    async fn interrupt(&mut self) -> Result<(), KernelError> {
        self.rest_interrupt().await
    }

    /// The websocket dropped: reopened with the same session, watching
    /// what the lost one watched.
    async fn reopen(&mut self, watched: &str, requests: &[&str]) -> Result<bool, KernelError> {
        self.reconnect(watched, requests).await.map(|()| true)
    }

    /// `quit()`: the process ends after its reply; the gateway says so
    /// when its restarter notices.
    async fn requested_exit(&mut self) -> bool {
        self.wait_for_server_status(QUIT_SETTLE).await
    }

    /// A restart through the gateway.
    async fn stop(&mut self, _decided: Option<Instant>) -> Stopped {
        Stopped {
            report: None,
            error: self.rest_restart().await.err(),
        }
    }

    /// The gateway replaced a dead kernel's process itself: retrace's
    /// setup runs in the new one before the next cell.
    async fn replace_after_loss(&mut self, ending: &Ending) -> Option<KernelError> {
        if ending.died {
            self.needs_setup = true;
        }
        None
    }

    async fn restart(&mut self) -> Result<(), KernelError> {
        self.rest_restart().await
    }

    /// `polite` gives the clean-up of the working directory 5 s, else a
    /// moment.
    async fn close(&mut self, polite: bool) {
        let cleanup = if polite {
            Duration::from_secs(5)
        } else {
            Duration::from_millis(500)
        };
        self.close_within(cleanup).await;
    }
}

#[async_trait::async_trait]
impl Witness for GatewayBackend {
    /// The host's latest reading, when retrace's launcher reports one: the
    /// start of a cell whose own first reading does not arrive.
    fn baseline(&self) -> Baseline {
        let host_readings = self.host.count();
        match self.host_reading() {
            Some(reading) => Baseline {
                counters: reading.counters,
                traces: reading.traces,
                stops: reading.stops,
                host_readings,
                ..Baseline::default()
            },
            None => Baseline {
                host_readings,
                ..Baseline::default()
            },
        }
    }

    /// As the host of a kernel of retrace's launcher sees it: the host
    /// held the cell's `idle` until the end settled there, so a main thread
    /// it saw back needs no second settling here.
    fn main_thread_back(&self, request: &str, _since: &Baseline) -> Option<Back> {
        if !self.gateway.info.retrace_launcher {
            return None;
        }
        let back = self.host.main_thread_back(request)?;
        Some(if back { Back::Idle } else { Back::No })
    }

    /// An execution the infrastructure lost: `infra_error` says so.
    fn not_run(&self, failure: Failure) -> Outcome {
        let why = match failure {
            Failure::NotReady(e) => format!("the kernel is not usable: {}", e.full()),
            Failure::NotSent(e) => e.full(),
            Failure::HostLost(e) => e.full(),
            Failure::Dropped(e) => format!(
                "the websocket to kernel {} dropped mid-execution and did not come back: {}",
                self.id,
                e.full()
            ),
        };
        tracing::warn!(kernel = %self.id, gateway = %self.gateway.info.url, error = %why, "gateway failure");
        let mut outcome = Outcome::not_run(Verdict::InternalError, "GatewayError", why.clone());
        outcome.infra_error = Some(why);
        outcome.state_lost = true;
        outcome.enforcement = Some(Enforcement::gateway());
        outcome
    }

    /// A status saying the kernel is going: the gateway replaces its
    /// process itself.
    fn announced_end(&self, ending: &mut Ending) {
        ending.died = true;
    }

    /// The server's notice that it dropped output past its rate limit.
    fn output_dropped(&self, msg: &jupyter_protocol::JupyterMessage) -> bool {
        rate_limit_notice(msg)
    }

    /// The gateway tells no exit status: only that the process ended.
    async fn evidence_after(&mut self, evidence: &mut Evidence, since: &Baseline, ending: &Ending) {
        if ending.state_lost() {
            evidence.exit = (ending.died || ending.asked_exit).then_some(ExitInfo {
                code: None,
                signal: None,
                signal_name: None,
            });
        }
        if self.gateway.info.retrace_launcher && self.host.fill(evidence, since, ending).await {
            return;
        }
        if ending.died && self.oom_reported().await {
            evidence.delta = Counters {
                oom_kills: 1,
                ..Counters::default()
            };
        }
    }

    /// retrace's launcher reports every end of its kernel before it exits
    /// itself (the kernel cannot reach it: another user, outside its
    /// namespaces); a death it never reported took the launcher too.
    async fn host_lost(&mut self, ending: &Ending, since: &Baseline) -> Option<KernelError> {
        if !self.gateway.info.retrace_launcher {
            return None;
        }
        let around = self
            .host
            .around(&ending.request, since.host_readings, true, HOST_LOST_WAIT)
            .await;
        if around.end.is_some_and(|end| end.moment == Moment::Dead) {
            return None;
        }
        let host = self
            .host
            .latest()
            .and_then(|r| r.host)
            .unwrap_or_else(|| "(unnamed)".into());
        // Its process is gone and the gateway may be restarting it on a
        // host that is no more: the next cell gets a new kernel.
        self.needs_setup = true;
        Some(KernelError::HostLost {
            id: self.id.clone(),
            url: self.gateway.info.url.clone(),
            host,
        })
    }

    /// A launcher that reports no uid did not confine the kernel.
    fn marks(&self) -> Marks {
        let reading = self.host_reading();
        let kernel_uid = reading.as_ref().and_then(|r| r.kernel_uid);
        Marks {
            flags: match reading {
                Some(_) if kernel_uid.is_none() => vec![Flag::Unconfined],
                _ => Vec::new(),
            },
            kernel_uid,
            enforcement: match kernel_uid {
                Some(_) => Enforcement::gateway_confined(),
                None => Enforcement::gateway(),
            },
        }
    }

    fn inspectable(&self) -> Result<(), KernelError> {
        if self.needs_setup || !self.channels.is_open() {
            return Err(KernelError::Protocol(
                "the kernel was replaced; there is no state to inspect".into(),
            ));
        }
        Ok(())
    }
}

impl Drop for GatewayBackend {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // Not closed (a cancelled task): the kernel must not outlive us on
        // the gateway.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (gateway, id) = (self.gateway.clone(), self.id.clone());
            handle.spawn(async move { delete(&gateway, &id).await });
        }
    }
}

fn kernel_path(id: &str) -> String {
    format!("/api/kernels/{id}")
}

/// Largest message the websocket takes: as a local kernel's relay, room
/// for the output cap, at least 16 MiB (a plot travels as base64).
fn max_message(options: &KernelOptions) -> usize {
    let cap = options
        .output_cap
        .bytes
        .saturating_mul(2)
        .saturating_add(1 << 20);
    usize::try_from(cap.max(16 << 20)).unwrap_or(usize::MAX)
}

/// Asks the gateway for a new kernel of its kernelspec; its id.
async fn create(gateway: &Gateway, options: &KernelOptions) -> Result<String, KernelError> {
    let body = json!({ "name": gateway.info.kernel, "env": start_env(options) });
    let answer = gateway
        .rest
        .call(Method::POST, "/api/kernels", Some(&body))
        .await?;
    answer
        .body
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            KernelError::Gateway(format!(
                "{} did not start a `{}` kernel: {}",
                gateway.info.url, gateway.info.kernel, answer.body
            ))
        })
}

/// The server's notice that it dropped output past its rate limit.
fn rate_limit_notice(msg: &jupyter_protocol::JupyterMessage) -> bool {
    matches!(
        &msg.content,
        jupyter_protocol::JupyterMessageContent::StreamContent(s) if s.text.contains(RATE_LIMITED)
    )
}

/// Deletes the kernel; a gateway that cannot be reached is only logged.
async fn delete(gateway: &Gateway, id: &str) {
    if let Err(e) = gateway
        .rest
        .call(Method::DELETE, &kernel_path(id), None)
        .await
    {
        tracing::warn!(kernel = %id, error = %e, "could not delete the kernel on the gateway");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_rate_limit_notice_counts() {
        use jupyter_protocol::{JupyterMessage, StreamContent};
        let notice =
            JupyterMessage::new(StreamContent::stderr("IOPub data rate exceeded.\n"), None);
        let other = JupyterMessage::new(StreamContent::stdout("hello\n"), None);
        assert!(rate_limit_notice(&notice));
        assert!(!rate_limit_notice(&other));
    }
}
