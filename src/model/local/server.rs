//! The local model's server on 127.0.0.1: llama.cpp's own `llama-server`,
//! several slots decoded together (continuous batching).
//!
//! Lifetime: the server is a child of a dedicated "keeper" thread that
//! spawns it and then blocks in `wait()` until it exits. That thread matters
//! for `PR_SET_PDEATHSIG`, which fires when the *thread* that forked the
//! child ends, not the process: spawned from a tokio worker or a
//! `spawn_blocking` thread (retired after 10 s idle) the server could be
//! killed mid-run. The keeper lives exactly as long as the server, so the
//! death signal fires only when retrace itself dies (crash, SIGKILL), and
//! it also reaps the child, so no zombie and no pid reuse surprises. Drop
//! kills the server's process group and joins the keeper.
//! (tokio's `kill_on_drop` would add nothing: the child is not a tokio
//! process, and drop already kills it synchronously.)
//!
//! Access: each server gets a random API key (passed in its environment,
//! not on its command line, which other local users can read), so only
//! this retrace process can use it, and a foreign server that grabbed the
//! port between our probe and the server's bind answers 401 instead of
//! being mistaken for ours.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::Client;

use crate::pyenv::step::{describe, tail, TAIL_LINES};
use crate::pyenv::LogTail;

use super::LocalError;
use crate::model::openai::{plain_client, with_status};
use crate::pyenv::llm::{Prepared, DEFAULT_N_CTX};
use crate::util::IoContext;

use super::cpus::{
    available_cpus, clamp_slots, default_slots, default_threads, with_nice, DEFAULT_NICE,
};

/// How a run asked for its local model to be served (`--model-slots`,
/// `--model-threads`, `--model-draft`); what is unset takes the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Serving {
    pub slots: Option<usize>,
    pub threads: Option<usize>,
    /// `--model-draft`: a catalogued name, a GGUF path or `none`; unset,
    /// the catalogue entry's own draft.
    pub draft: Option<String>,
}

impl Serving {
    /// Requests the server decodes together: its slots.
    pub fn parallel(&self) -> usize {
        self.slots.map_or_else(default_slots, clamp_slots)
    }

    /// The server's options for a model whose context is `n_ctx`.
    pub fn options(&self, n_ctx: u32) -> ServerOptions {
        let defaults = ServerOptions::default();
        ServerOptions {
            slots: self.parallel(),
            threads: self.threads.map_or(defaults.threads, |n| n.clamp(1, 64)),
            n_ctx,
            ..defaults
        }
    }
}

/// How the server runs. Recorded in run.json through `LocalModel::info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// Requests decoded together. Each slot holds a context of `n_ctx`.
    pub slots: usize,
    /// Context window in tokens per conversation (the catalogue's value
    /// for the model by default): repair conversations (system, task,
    /// replies, tracebacks) outgrow 4096 by round 2.
    pub n_ctx: u32,
    /// llama.cpp threads for generation (see `default_threads`).
    pub threads: usize,
    /// llama.cpp threads for prompt processing: short compute-bound
    /// bursts, so every available CPU (at most 8).
    pub batch_threads: usize,
    /// Capacity of the RAM prompt cache, beyond what the slots hold: with
    /// more conversations in flight than slots, a repair round whose slot
    /// was taken by another conversation finds its prefix there instead of
    /// reading the whole conversation again.
    pub prompt_cache_bytes: u64,
    /// Require the random per-server API key (see the module docs). Off
    /// only for tests that play an arbitrary OpenAI client.
    pub require_key: bool,
    pub startup_timeout: Duration,
    /// The server's nice value ([`DEFAULT_NICE`]); one it may not take
    /// (without root) leaves it at its parent's.
    pub nice: i32,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            slots: default_slots(),
            n_ctx: DEFAULT_N_CTX,
            threads: default_threads(),
            batch_threads: available_cpus().min(8),
            prompt_cache_bytes: 1 << 30,
            require_key: true,
            startup_timeout: Duration::from_secs(120),
            nice: DEFAULT_NICE,
        }
    }
}

/// The alias the server reports in `/v1/models`; also the `model` sent.
/// The same for every model: what was served is in `LocalModel::info`.
pub const SERVED_MODEL: &str = "retrace-local";
/// Server log names in `$RETRACE_HOME/logs`.
const LOG_PREFIX: &str = "model-server-";
/// Server logs kept in `$RETRACE_HOME/logs` (older ones are removed).
const KEEP_LOGS: usize = 10;
const PORT_ATTEMPTS: usize = 3;

pub struct LocalServer {
    port: u16,
    pid: u32,
    base_url: String,
    api_key: Option<String>,
    log: PathBuf,
    options: ServerOptions,
    exit: Arc<Mutex<Option<ExitStatus>>>,
    keeper: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LocalServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalServer")
            .field("base_url", &self.base_url)
            .field("pid", &self.pid)
            .field("log", &self.log)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why a started server did not become ready.
enum NotReady {
    /// Someone else has the port: try another.
    PortTaken(String),
    Failed(String),
}

impl LocalServer {
    /// Starts a server for `env` on a free port of 127.0.0.1 and waits
    /// until `/v1/models` answers. Its output goes to a log file in
    /// `logs_dir`, quoted in any error.
    pub async fn start(
        env: &Prepared,
        logs_dir: &Path,
        options: ServerOptions,
    ) -> Result<LocalServer, LocalError> {
        prune_logs(logs_dir);
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            let server = Self::spawn(env, logs_dir, port, options.clone())?;
            match server.wait_ready().await {
                Ok(()) => return Ok(server),
                // Only a race lost between our probe and the server's bind:
                // a new port is worth a try.
                Err(NotReady::PortTaken(detail)) => last = Some(server.stop_with(detail)),
                Err(NotReady::Failed(detail)) => return Err(server.stop_with(detail)),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn spawn(
        prepared: &Prepared,
        logs_dir: &Path,
        port: u16,
        options: ServerOptions,
    ) -> Result<LocalServer, LocalError> {
        fs::create_dir_all(logs_dir).at("creating", logs_dir)?;
        let env = &prepared.env;
        let log_path = logs_dir.join(format!("{LOG_PREFIX}{}-{port}.log", std::process::id()));
        let log = File::create(&log_path).at("creating", &log_path)?;
        let stdio = || log.try_clone().map(Stdio::from).at("sharing", &log_path);
        let api_key = options
            .require_key
            .then(|| uuid::Uuid::new_v4().simple().to_string());

        let mut cmd = llama_server_command(prepared, port, &options);
        let _ = writeln!(
            &log,
            "# {} (sha256 {})",
            prepared.model.spec, prepared.model.sha256
        );
        if let Some(draft) = &prepared.draft {
            let _ = writeln!(&log, "# draft {} (sha256 {})", draft.spec, draft.sha256);
        }
        let _ = writeln!(&log, "$ {}", describe(&cmd));
        let _ = writeln!(
            &log,
            "# options: {options:?}; api key: {}",
            if api_key.is_some() {
                "required"
            } else {
                "none"
            }
        );
        isolate_environment(&mut cmd, api_key.as_deref());
        cmd.current_dir(&env.dir)
            .stdin(Stdio::null())
            .stdout(stdio()?)
            .stderr(stdio()?)
            // Its own group, so stopping it reaches anything it started.
            .process_group(0);
        stop_with_parent(&mut cmd);
        with_nice(&mut cmd, options.nice);
        let exit = Arc::new(Mutex::new(None));
        let (pid, keeper) = match keep(cmd, port, exit.clone())? {
            Ok(started) => started,
            Err(not_started) => {
                let detail = match not_started {
                    NotStarted::Exec(e) => {
                        format!("cannot run {}: {e}", env.llama_server().display())
                    }
                    NotStarted::KeeperGone => "its keeper thread ended without a word".into(),
                };
                return Err(LocalError::ServerFailed {
                    detail,
                    log: LogTail::of(&log_path),
                });
            }
        };
        Ok(LocalServer {
            port,
            pid,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            api_key,
            log: log_path,
            options,
            exit,
            keeper: Some(keeper),
        })
    }

    async fn wait_ready(&self) -> Result<(), NotReady> {
        let deadline = Instant::now()
            .checked_add(self.options.startup_timeout)
            .unwrap_or_else(|| Instant::now() + crate::util::units::MAX_DURATION);
        let client = plain_client(&self.base_url, self.api_key.as_deref().unwrap_or("none"));
        loop {
            if let Some(status) = self.exit_status() {
                let tail = tail(&self.log, TAIL_LINES);
                let detail = format!("the server exited during startup ({status})");
                return Err(if tail.contains("address already in use") {
                    NotReady::PortTaken(detail)
                } else {
                    NotReady::Failed(detail)
                });
            }
            match probe(&client).await {
                Some(200) => return Ok(()),
                Some(401 | 403) => {
                    return Err(NotReady::PortTaken(format!(
                        "another server answers on port {} (it refused our key)",
                        self.port
                    )))
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(NotReady::Failed(format!(
                    "/v1/models did not answer within {} s",
                    self.options.startup_timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the server and describes why it had to be.
    fn stop_with(mut self, detail: String) -> LocalError {
        self.kill();
        LocalError::ServerFailed {
            detail,
            log: LogTail::of(&self.log),
        }
    }

    /// The server's nice value as the kernel reports it, `None` once it is
    /// gone.
    pub fn nice(&self) -> Option<i32> {
        crate::util::proc::stat(self.pid as i32)?.nice
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The key requests must carry (`None` when started without one).
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn options(&self) -> &ServerOptions {
        &self.options
    }

    /// How the server ended, if it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_running(&self) -> bool {
        self.exit_status().is_none()
    }

    /// Whether the server has exited, or does so within `wait` (its
    /// waiter may not have reaped it yet when a request fails).
    pub async fn died_within(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while self.is_running() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        true
    }

    /// Stops the server now (dropping it does the same).
    pub fn stop(mut self) {
        self.kill();
    }

    /// SIGKILL to the whole group: the server holds no state worth a
    /// graceful shutdown. Then the
    /// keeper reaps it and ends.
    fn kill(&mut self) {
        let Some(keeper) = self.keeper.take() else {
            return;
        };
        // Not reaped yet, so the pid (= group id) is still ours.
        if self.is_running() {
            let group = nix::unistd::Pid::from_raw(self.pid as libc::pid_t);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
        let _ = keeper.join();
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port the kernel just handed out on 127.0.0.1 (closed again at once;
/// losing it to someone else before the server binds is handled by the
/// caller).
fn free_port() -> Result<u16, LocalError> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .io_context(|| "finding a free port on 127.0.0.1".into())?;
    let addr = listener
        .local_addr()
        .io_context(|| "finding a free port on 127.0.0.1".into())?;
    Ok(addr.port())
}

/// The HTTP status of `GET /v1/models` (async-openai's `models().list()`),
/// or `None` if nothing usable answered (not listening yet, still loading).
async fn probe(client: &Client<OpenAIConfig>) -> Option<u16> {
    let models = client.models();
    let attempt = with_status(models.list_byot::<ModelList>());
    let (listed, status) = tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()?;
    let ids = listed
        .ok()
        .map(|list| list.data.into_iter().map(|m| m.id).collect::<Vec<_>>());
    readiness(status, ids.as_deref())
}

/// The part of a model list the probe reads. async-openai's own
/// `ListModelResponse` requires `created`, which not every server sends.
#[derive(serde::Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(serde::Deserialize)]
struct ListedModel {
    id: String,
}

/// The readiness decision from a response's status and, if its body was a
/// model list, the ids it lists: a 200 counts only when it lists our model
/// (anything can answer 200 on a port); another status is returned as is
/// (401/403: a foreign server refusing our key).
fn readiness(status: Option<u16>, ids: Option<&[String]>) -> Option<u16> {
    match status? {
        200 => ids?.iter().any(|id| id == SERVED_MODEL).then_some(200),
        other => Some(other),
    }
}

/// Keeps the newest server logs; every run writes one.
fn prune_logs(dir: &Path) {
    let prefix = LOG_PREFIX;
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut logs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    logs.sort();
    let excess = logs.len().saturating_sub(KEEP_LOGS - 1);
    for (_, path) in logs.into_iter().take(excess) {
        let _ = fs::remove_file(path);
    }
}

/// `llama-server` for `prepared` on `port`: `slots` slots of `n_ctx`
/// tokens each, continuous batching, prompts cached per slot (a repair
/// round goes to the slot whose prompt shares the most with its own, i.e.
/// its conversation's, and reuses that prefix) and in RAM beyond.
fn llama_server_command(prepared: &Prepared, port: u16, options: &ServerOptions) -> Command {
    let slots = options.slots.max(1);
    let mut cmd = Command::new(prepared.env.llama_server());
    cmd.arg("--model")
        .arg(&prepared.model.path)
        .args(["--alias", SERVED_MODEL])
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        // The context is split evenly between the slots.
        .args(["--ctx-size", &(options.n_ctx as usize * slots).to_string()])
        .args(["--parallel", &slots.to_string()])
        .arg("--no-kv-unified")
        .arg("--cont-batching")
        .args(["--threads", &options.threads.to_string()])
        .args(["--threads-batch", &options.batch_threads.to_string()])
        .args([
            "--cache-ram",
            &(options.prompt_cache_bytes >> 20).to_string(),
        ])
        // A request goes to the idle slot whose cached prompt shares the
        // largest part with its own; 0.5 keeps a slot holding half of a
        // repair conversation's prefix for that conversation.
        .args(["--slot-prompt-similarity", "0.5"])
        .args(["--seed", "0"])
        .arg("--no-webui")
        .arg("--jinja");
    if let Some(draft) = &prepared.draft {
        // Speculative decoding: the draft proposes tokens, the model checks
        // them in one batch; the draft's threads are the model's (they
        // take turns, never run together).
        cmd.arg("--model-draft")
            .arg(&draft.path)
            // This llama.cpp loads a draft model without using it unless
            // told which kind of speculation to run.
            .args(["--spec-type", "draft-simple"])
            .args(["--threads-draft", &options.threads.to_string()])
            .args(["--threads-batch-draft", &options.batch_threads.to_string()]);
    }
    cmd
}

/// Clears the server's environment but for what it needs.
fn isolate_environment(cmd: &mut Command, api_key: Option<&str>) {
    // llama-server reads every option it was not given as `LLAMA_ARG_*`
    // (and the key as `LLAMA_API_KEY`): nothing of the caller's environment
    // may reach it unintentionally.
    cmd.env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("LANG", "C.UTF-8");
    if let Some(home) = std::env::var_os("HOME") {
        cmd.env("HOME", home);
    }
    if let Some(key) = api_key {
        cmd.env("LLAMA_API_KEY", key);
    }
}

/// The server gets SIGTERM when retrace dies, and never starts after that.
// pre_exec (between fork and exec) is unsafe by nature; the block says why it is sound.
#[allow(unsafe_code)]
fn stop_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls:
    // prctl and getppid, no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // retrace died before prctl: nobody would stop the server.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Why the server's process could not be started.
enum NotStarted {
    Exec(std::io::Error),
    KeeperGone,
}

/// Spawns `cmd` on a keeper thread that waits for it and records its exit
/// status in `exit`; gives its pid and the thread.
fn keep(
    mut cmd: Command,
    port: u16,
    exit: Arc<Mutex<Option<std::process::ExitStatus>>>,
) -> Result<Result<(u32, std::thread::JoinHandle<()>), NotStarted>, LocalError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let keeper = std::thread::Builder::new()
        .name(format!("llama-server-{port}"))
        .spawn(move || match cmd.spawn() {
            Ok(mut child) => {
                let _ = tx.send(Ok(child.id()));
                let status = child.wait();
                *exit.lock().unwrap_or_else(|p| p.into_inner()) = status.ok();
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        })
        .io_context(|| "starting the server's keeper thread".into())?;
    let started = match rx.recv() {
        Ok(Ok(pid)) => Ok((pid, keeper)),
        Ok(Err(e)) => {
            let _ = keeper.join();
            Err(NotStarted::Exec(e))
        }
        Err(_) => {
            let _ = keeper.join();
            Err(NotStarted::KeeperGone)
        }
    };
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_needs_our_model_in_a_200_list() {
        let ours = [SERVED_MODEL.to_string()];
        let other = ["gpt-4o".to_string()];
        assert_eq!(readiness(Some(200), Some(&ours)), Some(200));
        // A 200 from something else: not ready, keep waiting.
        assert_eq!(readiness(Some(200), Some(&other)), None);
        assert_eq!(readiness(Some(200), Some(&[])), None);
        assert_eq!(readiness(Some(200), None), None);
        // A foreign server that refuses our key.
        assert_eq!(readiness(Some(401), None), Some(401));
        assert_eq!(readiness(Some(403), Some(&ours)), Some(403));
        assert_eq!(readiness(Some(503), None), Some(503));
        // Nothing answered yet.
        assert_eq!(readiness(None, None), None);
    }

    #[test]
    fn free_ports_are_free() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    #[test]
    fn old_server_logs_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(KEEP_LOGS + 3) {
            let path = dir.path().join(format!("{LOG_PREFIX}1-{i}.log"));
            fs::write(&path, "x").unwrap();
            let t = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1000 + i as u64);
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        fs::write(dir.path().join("other.log"), "x").unwrap();
        prune_logs(dir.path());
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        // Room for the one about to be written.
        assert_eq!(left.len(), KEEP_LOGS);
        assert!(left.contains(&"other.log".to_string()));
        assert!(!left.contains(&format!("{LOG_PREFIX}1-0.log")));
        assert!(left.contains(&format!("{LOG_PREFIX}1-12.log")));
    }
}
