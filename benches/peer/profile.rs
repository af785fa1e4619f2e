//! Where a client's time goes in a trivial-cell round trip: a diagnostic
//! companion of `roundtrip.rs`, not part of the comparison.
//!
//! Runs the same execute_request (`pass`, retrace's `user_expressions`) in
//! several client designs, each against a fresh kernel of the slim image:
//!
//! - `retrace`: the library's `Kernel::execute` (round trip and span only);
//! - `tasks`: a replica of `src/kernel/client.rs` built on the same crates:
//!   one reader task per socket feeding unbounded mpsc queues, the caller
//!   selecting on the queues;
//! - `direct`: no reader tasks, the caller selects on the two socket reads.
//!
//! and runtime flavours: `mt` (multi-thread, one worker per core), `mt1`
//! (multi-thread, one worker), `ct` (current-thread); with an `s` suffix
//! (`mts`, `mt1s`) the client runs in a spawned task on a worker thread
//! instead of in `block_on` on the main thread.
//!
//! For the replicas every message is stamped with the wall clock where it
//! was read from the socket and where the caller got it, and compared with
//! the kernel's own header dates (same host clock), which splits the
//! overhead into: building+sending the request, request→kernel busy,
//! kernel idle→read off the socket, reader→caller hop, and the rest.
//!
//! ```text
//! cargo run --release --example roundtrip_profile -- --n 500 --warmup 50
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::{DateTime, Utc};
use clap::Parser;
use jupyter_protocol::connection_info::{ConnectionInfo, Transport};
use jupyter_protocol::{
    ExecuteRequest, ExecutionState, JupyterMessage, JupyterMessageContent, KernelInfoRequest,
    ReplyStatus,
};
use jupyter_zmq_client::{
    create_client_iopub_connection, create_client_shell_connection_with_identity,
    peer_identity_for_session, ClientIoPubConnection, DealerRecvConnection, DealerSendConnection,
};
use retrace::kernel::{default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::{Image, ImageName, ImageStore};
use retrace::sandbox::Unconfined;
use tokio::sync::mpsc;

#[derive(Parser, Debug, Clone)]
#[command(about = "Where the client time of a trivial-cell round trip goes")]
struct Args {
    #[arg(long, default_value_t = 500)]
    n: usize,
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Comma-separated `<client>-<runtime>` pairs, client in retrace, tasks,
    /// direct; runtime in mt, mt1, ct; `mts`/`mt1s` run the client in a
    /// spawned task (on a worker) instead of in `block_on`.
    #[arg(
        long,
        default_value = "retrace-mt,retrace-mts,tasks-mt,tasks-mts,direct-mts,tasks-ct,direct-ct"
    )]
    variants: String,
    /// Repeat the variant list this many times, pooling the samples.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let image = ImageStore::from_env()
        .ensure(ImageName::Slim, true)
        .context("building the slim image")?;
    let variants: Vec<String> = args
        .variants
        .split(',')
        .map(|v| v.trim().to_string())
        .collect();
    let mut rows: Vec<Vec<Sample>> = vec![Vec::new(); variants.len()];
    // Rounds interleave the variants so drift on a shared machine hits all.
    for round in 0..args.rounds {
        eprintln!("round {}/{}", round + 1, args.rounds);
        for (variant, rows) in variants.iter().zip(rows.iter_mut()) {
            rows.extend(run_variant(variant, &image, &args)?);
        }
    }
    println!(
        "{:<12} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>6}",
        "variant",
        "rt_p50",
        "rt_p99",
        "busy",
        "ovh",
        "send",
        "to_busy",
        "idl>rd",
        "rd>call",
        "idl>end",
        "rpl_lst"
    );
    for (variant, rows) in variants.iter().zip(&rows) {
        print_row(variant, rows);
    }
    Ok(())
}

fn run_variant(variant: &str, image: &Image, args: &Args) -> Result<Vec<Sample>> {
    let (client, flavour) = variant
        .split_once('-')
        .with_context(|| format!("variant `{variant}`: expected <client>-<runtime>"))?;
    let (runtime, spawned) = match flavour {
        "mt" | "mts" => (
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?,
            flavour == "mts",
        ),
        "mt1" | "mt1s" => (
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()?,
            flavour == "mt1s",
        ),
        "ct" => (
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            false,
        ),
        other => bail!("unknown runtime `{other}`"),
    };
    let (client, image, args) = (client.to_string(), image.clone(), args.clone());
    let job = async move {
        match client.as_str() {
            "retrace" => run_retrace(&image, &args).await,
            "tasks" => run_replica(&image, &args, true).await,
            "direct" => run_replica(&image, &args, false).await,
            other => bail!("unknown client `{other}`"),
        }
    };
    let rows = if spawned {
        runtime.block_on(async { tokio::spawn(job).await })?
    } else {
        runtime.block_on(job)
    }?;
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(rows)
}

/// One execution; wall-clock fields are `None` where a client cannot see them.
#[derive(Default, Clone)]
struct Sample {
    roundtrip: f64,
    busy: f64,
    send: Option<f64>,
    to_busy: Option<f64>,
    idle_to_read: Option<f64>,
    read_to_caller: Option<f64>,
    idle_to_end: Option<f64>,
    reply_last: Option<bool>,
}

fn p(samples: &[Sample], f: impl Fn(&Sample) -> Option<f64>, pct: f64) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().filter_map(f).collect();
    v.sort_by(f64::total_cmp);
    retrace::util::stats::percentile(&v, pct)
}

fn print_row(variant: &str, rows: &[Sample]) {
    let cell = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
    let reply_last = {
        let known: Vec<bool> = rows.iter().filter_map(|s| s.reply_last).collect();
        if known.is_empty() {
            "-".to_string()
        } else {
            let n = known.iter().filter(|b| **b).count();
            format!("{:.0}%", 100.0 * n as f64 / known.len() as f64)
        }
    };
    println!(
        "{:<12} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} {:>7} {:>7} {:>6}",
        variant,
        cell(p(rows, |s| Some(s.roundtrip), 50.0)),
        cell(p(rows, |s| Some(s.roundtrip), 99.0)),
        cell(p(rows, |s| Some(s.busy), 50.0)),
        cell(p(rows, |s| Some(s.roundtrip - s.busy), 50.0)),
        cell(p(rows, |s| s.send, 50.0)),
        cell(p(rows, |s| s.to_busy, 50.0)),
        cell(p(rows, |s| s.idle_to_read, 50.0)),
        cell(p(rows, |s| s.read_to_caller, 50.0)),
        cell(p(rows, |s| s.idle_to_end, 50.0)),
        reply_last,
    );
}

async fn run_retrace(image: &Image, args: &Args) -> Result<Vec<Sample>> {
    let spec = Arc::new(KernelSpec::new(image.clone(), default_kernel_root()));
    let mut kernel = Kernel::start(spec, &Unconfined, KernelOptions::default()).await?;
    let exec = ExecOptions::default();
    let mut rows = Vec::with_capacity(args.n);
    for i in 0..args.warmup + args.n {
        let t = Instant::now();
        let outcome = kernel.execute("pass", &exec).await;
        let roundtrip = ms(t.elapsed());
        if !outcome.succeeded() {
            kernel.shutdown().await;
            bail!("execution failed: {:?}", outcome.error);
        }
        if i >= args.warmup {
            rows.push(Sample {
                roundtrip,
                busy: outcome.timings_ms.kernel_busy.unwrap_or(f64::NAN),
                ..Default::default()
            });
        }
    }
    kernel.shutdown().await;
    Ok(rows)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn wall_ms(later: DateTime<Utc>, earlier: DateTime<Utc>) -> f64 {
    (later - earlier)
        .num_nanoseconds()
        .map_or(f64::NAN, |ns| ns as f64 / 1e6)
}

/// A kernel process of the image, started like retrace starts one
/// (unconfined): clean environment, own process group, ipc sockets.
struct RawKernel {
    child: std::process::Child,
    dir: PathBuf,
    info: ConnectionInfo,
}

impl RawKernel {
    fn start(image: &Image) -> Result<RawKernel> {
        let dir = default_kernel_root().join(format!(
            "p{}",
            &uuid::Uuid::new_v4().simple().to_string()[..11]
        ));
        for sub in ["rt", "work", "home"] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir.join(sub))?;
        }
        let info = ConnectionInfo {
            transport: Transport::IPC,
            ip: dir.join("rt").join("k").to_string_lossy().into_owned(),
            stdin_port: 1,
            control_port: 2,
            hb_port: 3,
            shell_port: 4,
            iopub_port: 5,
            signature_scheme: "hmac-sha256".into(),
            key: uuid::Uuid::new_v4().simple().to_string(),
            kernel_name: None,
        };
        let conn = dir.join("rt").join("kernel.json");
        std::fs::write(&conn, serde_json::to_string(&info)?)?;
        let python = image.python();
        let home = dir.join("home");
        let bin = python
            .parent()
            .unwrap_or(Path::new("/"))
            .display()
            .to_string();
        let env: Vec<(OsString, OsString)> = vec![
            (
                "PATH".into(),
                format!("{bin}:/usr/local/bin:/usr/bin:/bin").into(),
            ),
            ("HOME".into(), home.clone().into()),
            ("IPYTHONDIR".into(), home.join(".ipython").into()),
            ("MPLCONFIGDIR".into(), home.join(".mplconfig").into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("PYTHONNOUSERSITE".into(), "1".into()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYDEVD_DISABLE_FILE_VALIDATION".into(), "1".into()),
            ("OPENBLAS_NUM_THREADS".into(), "1".into()),
            ("OMP_NUM_THREADS".into(), "1".into()),
        ];
        let child = std::process::Command::new(&python)
            .arg("-m")
            .arg("ipykernel_launcher")
            .arg("-f")
            .arg(&conn)
            .arg(format!("--config={}", image.kernel_config().display()))
            .env_clear()
            .envs(env)
            .current_dir(dir.join("work"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .context("starting the kernel")?;
        Ok(RawKernel { child, dir, info })
    }
}

impl Drop for RawKernel {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A message and the wall clock when it was read off its socket.
type Stamped = (JupyterMessage, DateTime<Utc>);

enum Incoming {
    /// Reader tasks feed queues (the design of src/kernel/client.rs).
    Tasks {
        iopub: mpsc::UnboundedReceiver<Stamped>,
        shell: mpsc::UnboundedReceiver<Stamped>,
        readers: Vec<tokio::task::JoinHandle<()>>,
    },
    /// The caller reads the sockets itself.
    Direct {
        iopub: Box<ClientIoPubConnection>,
        shell: DealerRecvConnection,
    },
}

enum From {
    Iopub,
    Shell,
}

impl Incoming {
    /// The next message of either socket, with where it came from, when it
    /// was read and when the caller got it.
    async fn next(&mut self) -> Result<(From, JupyterMessage, DateTime<Utc>, DateTime<Utc>)> {
        match self {
            Incoming::Tasks { iopub, shell, .. } => {
                let (from, (msg, read)) = tokio::select! {
                    Some(m) = iopub.recv() => (From::Iopub, m),
                    Some(m) = shell.recv() => (From::Shell, m),
                    else => bail!("the reader tasks ended"),
                };
                Ok((from, msg, read, Utc::now()))
            }
            Incoming::Direct { iopub, shell } => {
                let (from, msg) = tokio::select! {
                    m = iopub.read() => (From::Iopub, m?),
                    m = shell.read() => (From::Shell, m?),
                };
                let now = Utc::now();
                Ok((from, msg, now, now))
            }
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Incoming::Tasks { readers, .. } = self {
            for r in readers {
                r.abort();
            }
        }
    }
}

async fn connect(info: &ConnectionInfo, tasks: bool) -> Result<(DealerSendConnection, Incoming)> {
    let session = uuid::Uuid::new_v4().to_string();
    let identity = peer_identity_for_session(&session)?;
    let iopub = create_client_iopub_connection(info, "", &session).await?;
    let shell = create_client_shell_connection_with_identity(info, &session, identity).await?;
    let (shell_tx, shell_rx) = shell.split();
    if !tasks {
        return Ok((
            shell_tx,
            Incoming::Direct {
                iopub: Box::new(iopub),
                shell: shell_rx,
            },
        ));
    }
    let (iopub_send, iopub_q) = mpsc::unbounded_channel();
    let (shell_send, shell_q) = mpsc::unbounded_channel();
    let mut iopub = iopub;
    let iopub_reader = tokio::spawn(async move {
        while let Ok(msg) = iopub.read().await {
            if iopub_send.send((msg, Utc::now())).is_err() {
                break;
            }
        }
    });
    let mut shell_rx = shell_rx;
    let shell_reader = tokio::spawn(async move {
        while let Ok(msg) = shell_rx.read().await {
            if shell_send.send((msg, Utc::now())).is_err() {
                break;
            }
        }
    });
    Ok((
        shell_tx,
        Incoming::Tasks {
            iopub: iopub_q,
            shell: shell_q,
            readers: vec![iopub_reader, shell_reader],
        },
    ))
}

async fn run_replica(image: &Image, args: &Args, tasks: bool) -> Result<Vec<Sample>> {
    let kernel = RawKernel::start(image)?;
    let sockets: Vec<PathBuf> = [kernel.info.shell_port, kernel.info.iopub_port]
        .iter()
        .map(|port| PathBuf::from(format!("{}-{}", kernel.info.ip, port)))
        .collect();
    let ready = async {
        while !sockets.iter().all(|p| p.exists()) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let (mut tx, mut rx) = connect(&kernel.info, tasks).await?;
        handshake(&mut tx, &mut rx).await?;
        Ok::<_, anyhow::Error>((tx, rx))
    };
    let (mut tx, mut rx) = tokio::time::timeout(Duration::from_secs(60), ready)
        .await
        .context("the kernel did not answer within 60 s")??;

    let mut rows = Vec::with_capacity(args.n);
    for i in 0..args.warmup + args.n {
        let sample = execute(&mut tx, &mut rx).await?;
        if i >= args.warmup {
            rows.push(sample);
        }
    }
    drop(kernel);
    Ok(rows)
}

async fn handshake(tx: &mut DealerSendConnection, rx: &mut Incoming) -> Result<()> {
    let (mut reply, mut iopub) = (false, false);
    while !(reply && iopub) {
        tx.send(JupyterMessage::new(KernelInfoRequest {}, None))
            .await?;
        let resend = tokio::time::Instant::now() + Duration::from_millis(250);
        while !(reply && iopub) {
            tokio::select! {
                m = rx.next() => match m?.0 {
                    From::Iopub => iopub = true,
                    From::Shell => reply = true,
                },
                _ = tokio::time::sleep_until(resend) => break,
            }
        }
    }
    // Let the status messages of the handshake pass.
    while let Ok(m) = tokio::time::timeout(Duration::from_millis(50), rx.next()).await {
        m?;
    }
    Ok(())
}

async fn execute(tx: &mut DealerSendConnection, rx: &mut Incoming) -> Result<Sample> {
    let started = Instant::now();
    let t_call = Utc::now();
    let request = ExecuteRequest {
        code: "pass".into(),
        silent: false,
        store_history: true,
        user_expressions: Some(HashMap::from([("answer".into(), "answer".into())])),
        allow_stdin: false,
        stop_on_error: true,
    };
    let msg = JupyterMessage::new(request, None);
    let msg_id = msg.header.msg_id.clone();
    tx.send(msg).await?;
    let t_sent = Utc::now();

    let mut busy_at = None;
    let mut idle: Option<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)> = None;
    let mut reply_at: Option<DateTime<Utc>> = None;
    while !(idle.is_some() && reply_at.is_some()) {
        let (_, msg, read, got) = rx.next().await?;
        if msg.parent_header.as_ref().map(|h| h.msg_id.as_str()) != Some(msg_id.as_str()) {
            continue;
        }
        match &msg.content {
            JupyterMessageContent::Status(s) => match s.execution_state {
                ExecutionState::Busy => busy_at = Some(msg.header.date),
                ExecutionState::Idle => idle = Some((msg.header.date, read, got)),
                _ => {}
            },
            JupyterMessageContent::ExecuteReply(r) => {
                if r.status != ReplyStatus::Ok {
                    bail!("execution failed: {:?}", r.status);
                }
                reply_at = Some(got);
            }
            _ => {}
        }
    }
    let roundtrip = ms(started.elapsed());
    let t_done = Utc::now();
    let busy_at = busy_at.context("no busy status")?;
    let (idle_date, idle_read, idle_got) = idle.context("no idle status")?;
    let reply_at = reply_at.context("no reply")?;
    Ok(Sample {
        roundtrip,
        busy: wall_ms(idle_date, busy_at),
        send: Some(wall_ms(t_sent, t_call)),
        to_busy: Some(wall_ms(busy_at, t_call)),
        idle_to_read: Some(wall_ms(idle_read, idle_date)),
        read_to_caller: Some(wall_ms(idle_got, idle_read)),
        idle_to_end: Some(wall_ms(t_done, idle_date)),
        reply_last: Some(reply_at > idle_got),
    })
}
