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
//! kernel config are, so the Python side can start the same kernel.
//!
//! ```text
//! cargo run --release --example roundtrip -- --n 500 --warmup 50
//! ```

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use retrace::kernel::{default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::Unconfined;
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
    /// Tokio worker threads (0: tokio's default, one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if args.workers > 0 {
        builder.worker_threads(args.workers);
    }
    let runtime = builder.build().context("starting the tokio runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> Result<()> {
    let image =
        tokio::task::spawn_blocking(|| ImageStore::from_env().ensure(ImageName::Slim, true))
            .await?
            .context("building the slim image")?;
    if args.print_image {
        let info = json!({
            "python": image.python(),
            "kernel_config": image.kernel_config(),
            "image_dir": image.dir,
        });
        println!("{info}");
        return Ok(());
    }

    let spec = Arc::new(KernelSpec::new(image, default_kernel_root()));
    let start = Instant::now();
    let mut kernel = Kernel::start(spec, &Unconfined, KernelOptions::default())
        .await
        .context("starting the kernel")?;
    let start_ms = start.elapsed().as_secs_f64() * 1e3;
    let result = measure(&mut kernel, &args).await;
    kernel.shutdown().await;
    let (roundtrip, outcome_total, busy, overhead) = result?;

    let mut report = json!({
        "client": "retrace",
        "code": args.code,
        "n": args.n,
        "warmup": args.warmup,
        "kernel_start_ms": start_ms,
        "roundtrip_ms": Stats::of(&roundtrip),
        "outcome_total_ms": Stats::of(&outcome_total),
        "kernel_busy_ms": Stats::of(&busy),
        "overhead_ms": Stats::of(&overhead),
    });
    if args.raw {
        report["raw"] = json!({
            "roundtrip_ms": roundtrip,
            "kernel_busy_ms": busy,
        });
    }
    println!("{report}");
    Ok(())
}

type Samples = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

async fn measure(kernel: &mut Kernel, args: &Args) -> Result<Samples> {
    let exec = ExecOptions::default();
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
    for _ in 0..args.n {
        let t = Instant::now();
        let outcome = kernel.execute(&args.code, &exec).await;
        let ms = t.elapsed().as_secs_f64() * 1e3;
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
    Ok((roundtrip, outcome_total, busy, overhead))
}

/// Nearest-rank percentiles (the Python side uses the same definition).
#[derive(serde::Serialize)]
struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    mean: f64,
    min: f64,
    max: f64,
}

impl Stats {
    fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let pct = |p: f64| {
            if n == 0 {
                return f64::NAN;
            }
            let rank = ((p / 100.0) * n as f64).ceil() as usize;
            sorted[rank.clamp(1, n) - 1]
        };
        Stats {
            n,
            p50: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            mean: sorted.iter().sum::<f64>() / n.max(1) as f64,
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }
}
