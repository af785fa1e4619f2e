//! Trivial-cell round trip of retrace's kernel client, for the comparison
//! with Python's `jupyter_client` (`benches/peer/compare.sh`).
//!
//! Starts one kernel of the slim image (built on first use under
//! `$RETRACE_HOME`), runs `--warmup` untimed executions, then `--n` timed
//! ones, and prints one JSON object with the statistics:
//!
//! - `roundtrip_ms`: wall time of `Kernel::execute` as the caller sees it;
//! - `kernel_busy_ms`: the kernel's own busy→idle span (status headers);
//! - `overhead_ms`: per execution, round trip minus the kernel's span.
//!
//! `--print-image` only ensures the image and prints where its Python and
//! kernel config are (`key=path` lines), so the Python side can start the
//! same kernel.
//!
//! ```text
//! cargo run --release --example roundtrip -- --n 500 --warmup 50
//! ```

#[path = "stats.rs"]
mod stats;

use stats::Stats;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use retrace::kernel::{default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox, Unconfined};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Trivial-cell round trip of retrace's kernel client")]
struct Args {
    /// Timed executions.
    #[arg(long, default_value_t = 500)]
    n: usize,
    /// Untimed executions first.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// The cell to run.
    #[arg(long, default_value = "pass")]
    code: String,
    /// Only ensure the slim image and print its python and kernel config.
    #[arg(long)]
    print_image: bool,
    /// Also print every sample (milliseconds) in the JSON.
    #[arg(long)]
    raw: bool,
    /// Also stamp the request's way through the kernel (hooks installed by
    /// `kernel_trace.py`, which cost the kernel a little) and report where
    /// the round trip goes, in `trace`.
    #[arg(long)]
    kernel_trace: bool,
    /// Start the kernel with this config file instead of the image's
    /// `kernel_config.py` (for experiments; the image is not touched).
    #[arg(long)]
    kernel_config: Option<std::path::PathBuf>,
    /// Tokio worker threads (0: tokio's default, one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Run the client in a spawned task (on a worker thread) instead of in
    /// `block_on` on the main thread.
    #[arg(long, conflicts_with = "current_thread")]
    spawned: bool,
    /// Use tokio's current-thread runtime (client, readers and IO on one
    /// thread).
    #[arg(long)]
    current_thread: bool,
    /// Skip the completion probe (a pipelined comm_info request that code
    /// in the kernel cannot forge): measures the bare protocol.
    #[arg(long)]
    no_probe: bool,
    /// Run the kernel confined as `retrace run` does (cgroup, namespaces,
    /// seccomp, its own user, the lock watchdog; needs root), with the
    /// `retrace` binary beside this example's directory as its init.
    #[arg(long)]
    confined: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.current_thread {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")?
            .block_on(run(args));
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if args.workers > 0 {
        builder.worker_threads(args.workers);
    }
    let runtime = builder.build().context("starting the tokio runtime")?;
    if args.spawned {
        return runtime.block_on(async { tokio::spawn(run(args)).await })?;
    }
    runtime.block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let image =
        tokio::task::spawn_blocking(|| ImageStore::from_env().ensure(ImageName::Slim, true))
            .await?
            .context("building the slim image")?;
    if args.print_image {
        println!("python={}", image.python().display());
        println!("kernel_config={}", image.kernel_config().display());
        println!("image_dir={}", image.dir.display());
        return Ok(());
    }

    // An experiment's kernel config: an image directory of our own whose
    // venv is the real image's (a symlink) and whose config is the given one.
    let mut _scratch = None;
    let image = match &args.kernel_config {
        Some(config) => {
            let dir = tempfile::Builder::new().prefix("rtcfg").tempdir()?;
            std::os::unix::fs::symlink(image.dir.join("venv"), dir.path().join("venv"))?;
            std::fs::copy(config, dir.path().join("kernel_config.py"))
                .with_context(|| format!("copying {}", config.display()))?;
            let image = retrace::pyenv::Image {
                dir: dir.path().to_path_buf(),
                ..image
            };
            _scratch = Some(dir);
            image
        }
        None => image,
    };
    let spec = Arc::new(KernelSpec::new(image, default_kernel_root()));
    let start = Instant::now();
    let options = KernelOptions {
        verify_completion: !args.no_probe,
        ..KernelOptions::default()
    };
    let sandbox: Box<dyn Sandbox> = if args.confined {
        // target/release/examples/roundtrip -> target/release/retrace
        let init = std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .map(|dir| dir.join("retrace"))
            .context("locating the retrace binary")?;
        Box::new(Confined::open(init).context("opening the confined sandbox")?)
    } else {
        Box::new(Unconfined)
    };
    let mut kernel = Kernel::start(spec, &*sandbox, options)
        .await
        .context("starting the kernel")?;
    let start_ms = start.elapsed().as_secs_f64() * 1e3;
    let result = measure(&mut kernel, &args).await;
    if args.current_thread {
        // `Kernel::shutdown` needs `block_in_place` (multi-thread runtime
        // only); dropping the kernel kills it and removes its directories.
        drop(kernel);
    } else {
        kernel.shutdown().await;
    }
    let Measured {
        roundtrip,
        outcome_total,
        busy,
        overhead,
        trace,
    } = result?;

    let mut report = json!({
        "client": "retrace",
        "confined": args.confined,
        "code": args.code,
        "n": args.n,
        "warmup": args.warmup,
        "kernel_start_ms": start_ms,
        "roundtrip_ms": Stats::of(&roundtrip),
        "outcome_total_ms": Stats::of(&outcome_total),
        "kernel_busy_ms": Stats::of(&busy),
        "overhead_ms": Stats::of(&overhead),
    });
    if let Some(trace) = trace {
        report["trace"] = trace;
    }
    if args.raw {
        report["raw"] = json!({
            "roundtrip_ms": roundtrip,
            "kernel_busy_ms": busy,
        });
    }
    println!("{report}");
    Ok(())
}

struct Measured {
    roundtrip: Vec<f64>,
    outcome_total: Vec<f64>,
    busy: Vec<f64>,
    overhead: Vec<f64>,
    trace: Option<serde_json::Value>,
}

const KERNEL_TRACE: &str = include_str!("kernel_trace.py");

async fn measure(kernel: &mut Kernel, args: &Args) -> Result<Measured> {
    let exec = ExecOptions::default();
    if args.kernel_trace {
        let outcome = kernel.execute(KERNEL_TRACE, &exec).await;
        if !outcome.succeeded() {
            bail!("installing the kernel trace failed: {:?}", outcome.error);
        }
    }
    for _ in 0..args.warmup {
        let outcome = kernel.execute(&args.code, &exec).await;
        if !outcome.succeeded() {
            bail!("warm-up execution failed: {:?}", outcome.error);
        }
    }
    let mut roundtrip = Vec::with_capacity(args.n);
    let mut outcome_total = Vec::with_capacity(args.n);
    let mut busy = Vec::with_capacity(args.n);
    let mut overhead = Vec::with_capacity(args.n);
    let mut wall = Vec::with_capacity(args.n);
    for _ in 0..args.n {
        let called = wall_now();
        let t = Instant::now();
        let outcome = kernel.execute(&args.code, &exec).await;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        wall.push((called, wall_now()));
        if !outcome.succeeded() {
            bail!("execution failed: {:?}", outcome.error);
        }
        let span = outcome
            .timings_ms
            .kernel_busy
            .context("the kernel's busy→idle span is missing")?;
        roundtrip.push(ms);
        outcome_total.push(outcome.timings_ms.total);
        busy.push(span);
        overhead.push(ms - span);
    }
    let trace = if args.kernel_trace {
        let outcome = kernel.execute(KERNEL_TRACE, &exec).await;
        if !outcome.succeeded() {
            bail!("reading the kernel trace failed: {:?}", outcome.error);
        }
        let entries: Vec<TraceEntry> =
            serde_json::from_str(outcome.stdout.trim()).context("parsing the kernel trace")?;
        Some(trace_segments(&entries, &wall)?)
    } else {
        None
    };
    Ok(Measured {
        roundtrip,
        outcome_total,
        busy,
        overhead,
        trace,
    })
}

/// Seconds since the epoch, the clock of the kernel's timestamps.
fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(f64::NAN, |d| d.as_secs_f64())
}

/// One execute_request as the kernel saw it (`kernel_trace.py`); seconds.
#[derive(serde::Deserialize)]
struct TraceEntry {
    recv: f64,
    busy: Option<f64>,
    idle: Option<f64>,
    iopub_idle: Option<f64>,
    reply: Option<f64>,
}

/// Splits each timed round trip at the kernel's stamps (milliseconds):
/// `send_leg` call → the kernel's shell thread has the request;
/// `kernel_in` → status busy; `span` busy → idle; `kernel_out` idle → the
/// IOPub thread writes it; `recv_leg` → the call returns. `reply_after_idle`
/// is when the reply was handed to the shell stream, relative to that write.
fn trace_segments(entries: &[TraceEntry], wall: &[(f64, f64)]) -> Result<serde_json::Value> {
    // The last entry is the dump cell itself (still running); before the
    // timed executions come the warm-up ones.
    let complete: Vec<&TraceEntry> = entries
        .iter()
        .filter(|e| e.busy.is_some() && e.idle.is_some() && e.iopub_idle.is_some())
        .collect();
    if complete.len() < wall.len() {
        bail!(
            "the kernel trace has {} complete entries for {} executions",
            complete.len(),
            wall.len()
        );
    }
    let timed = &complete[complete.len() - wall.len()..];
    let mut columns: [(&str, Vec<f64>); 6] = [
        ("send_leg", Vec::new()),
        ("kernel_in", Vec::new()),
        ("span", Vec::new()),
        ("kernel_out", Vec::new()),
        ("recv_leg", Vec::new()),
        ("reply_after_idle", Vec::new()),
    ];
    for (e, (called, done)) in timed.iter().zip(wall) {
        let (busy, idle, out) = (e.busy.unwrap(), e.idle.unwrap(), e.iopub_idle.unwrap());
        let values = [
            e.recv - called,
            busy - e.recv,
            idle - busy,
            out - idle,
            done - out,
            e.reply.map_or(f64::NAN, |r| r - out),
        ];
        for ((_, column), v) in columns.iter_mut().zip(values) {
            column.push(v * 1e3);
        }
    }
    let mut out = serde_json::Map::new();
    for (name, column) in columns {
        out.insert(name.to_string(), serde_json::to_value(Stats::of(&column))?);
    }
    Ok(serde_json::Value::Object(out))
}
