//! Kernels on a Jupyter Kernel Gateway against retrace's own local kernels,
//! on the same image (the fat one): what the `gateway` executor costs.
//! `benches/peer/gateway.sh` starts the gateway and runs this; see there and
//! in `benches/README.md` ("Gateway executor").
//!
//! - kernel start: from asking for a kernel until its first cell (`pass`)
//!   is done, for a gateway kernel, a local confined kernel forked from the
//!   zygote and a local confined cold kernel; each kernel is shut down
//!   after (not timed);
//! - per-cell round trip of `pass` on a warm kernel (after `--warmup`
//!   untimed cells), gateway against local zygote, and the kernel's own
//!   busy→idle span, so that overhead = round trip − span per cell.
//!
//! Rounds interleave the contenders, reversing their order from one round
//! (and, for starts, one start) to the next, so drift on a shared machine
//! hits all alike; the statistics pool all rounds. One untimed start of
//! each contender comes first (page cache warm, the zygote up).
//!
//! Prints one line per figure with the ratio gateway/local, then every
//! number as `key=value`; `--json FILE` also writes them with the samples.
//! Local kernels are confined: run as root.
//!
//! ```text
//! cargo run --release --example gateway -- --gateway-url http://127.0.0.1:PORT \
//!     --gateway-token T --starts 5 --cells 500 --rounds 3
//! ```

#[path = "stats.rs"]
mod stats;

use stats::Stats;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use retrace::kernel::gateway::{Gateway, GatewayConfig, REQUEST_TIMEOUT};
use retrace::kernel::{
    default_kernel_root, AnyKernel, ExecOptions, Executor, KernelOptions, KernelSpec, KernelStart,
    Outcome, StartPath,
};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, SandboxLimits};
use serde::Serialize;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Kernel start and per-cell round trip: Jupyter gateway against local kernels")]
struct Args {
    /// The gateway's base URL.
    #[arg(long, env = "JUPYTER_GATEWAY_URL")]
    gateway_url: String,
    /// The gateway's token.
    #[arg(long, env = "JUPYTER_GATEWAY_AUTH_TOKEN", hide_env_values = true)]
    gateway_token: Option<String>,
    /// The gateway's kernelspec to start [default: the gateway's default];
    /// it should run this machine's fat image (`retrace image kernelspec fat`).
    #[arg(long)]
    kernel: Option<String>,
    /// Timed starts per contender and round.
    #[arg(long, default_value_t = 5)]
    starts: usize,
    /// Timed `pass` cells per round-trip kernel and round.
    #[arg(long, default_value_t = 500)]
    cells: usize,
    /// Untimed cells on each round-trip kernel before the timed ones.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// retrace's binary (the confined kernels' init) [default: `retrace`
    /// in the directory above this example's, as cargo lays them out].
    #[arg(long)]
    retrace: Option<PathBuf>,
    /// Also write every figure and sample there.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Who starts a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Gateway,
    Zygote,
    Cold,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Gateway => "gateway",
            Contender::Zygote => "zygote",
            Contender::Cold => "cold",
        }
    }
}

const TRIVIAL_CELL: &str = "pass";

fn main() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(run(args));
    // The zygote outlives its kernels: it must not outlive the benchmark.
    retrace::kernel::zygote::shutdown_all();
    result
}

async fn run(args: Args) -> Result<()> {
    if args.starts == 0 || args.cells == 0 || args.rounds == 0 {
        bail!("--starts, --cells and --rounds must be at least 1");
    }
    let bench = Bench::open(&args).await?;
    let load_start = loadavg();

    eprintln!("== one untimed start of each contender (page cache, zygote)");
    for who in [Contender::Gateway, Contender::Zygote, Contender::Cold] {
        bench.start_once(who).await?;
    }
    let mut starts: [(Contender, Vec<f64>); 3] = [
        (Contender::Gateway, Vec::new()),
        (Contender::Zygote, Vec::new()),
        (Contender::Cold, Vec::new()),
    ];
    let mut cells = [
        (Contender::Gateway, Cells::default()),
        (Contender::Zygote, Cells::default()),
    ];
    for round in 1..=args.rounds {
        eprintln!(
            "== round {round}/{}: {} starts each",
            args.rounds, args.starts
        );
        for s in 1..=args.starts {
            for i in order(round + s, starts.len()) {
                let who = starts[i].0;
                let ms = bench.start_once(who).await?;
                starts[i].1.push(ms);
            }
        }
        eprintln!(
            "== round {round}/{}: {} warm-up + {} timed cells each",
            args.rounds, args.warmup, args.cells
        );
        for i in order(round, cells.len()) {
            let who = cells[i].0;
            bench
                .cells_once(who, args.warmup, args.cells, &mut cells[i].1)
                .await?;
        }
    }
    let load_end = loadavg();

    let start_stats: Vec<(Contender, Stats)> =
        starts.iter().map(|(w, s)| (*w, Stats::of(s))).collect();
    let start_of = |who: Contender| &start_stats.iter().find(|(w, _)| *w == who).unwrap().1;
    let (gw_cells, local_cells) = (&cells[0].1, &cells[1].1);
    let figures = [
        Figure::new(
            "start_zygote",
            "kernel start (start + first `pass` done), gateway vs local confined zygote",
            start_of(Contender::Gateway),
            start_of(Contender::Zygote),
            0,
        ),
        Figure::new(
            "start_cold",
            "kernel start (start + first `pass` done), gateway vs local confined cold",
            start_of(Contender::Gateway),
            start_of(Contender::Cold),
            0,
        ),
        Figure::new(
            "roundtrip",
            "per-cell round trip (`pass`), gateway vs local zygote",
            &Stats::of(&gw_cells.roundtrip),
            &Stats::of(&local_cells.roundtrip),
            2,
        ),
        Figure::new(
            "overhead",
            "per-cell overhead (round trip - kernel busy span), gateway vs local zygote",
            &Stats::of(&gw_cells.overhead()),
            &Stats::of(&local_cells.overhead()),
            2,
        ),
        Figure::new(
            "busy",
            "kernel busy span (`pass`, inside the kernel), gateway vs local zygote",
            &Stats::of(&gw_cells.busy),
            &Stats::of(&local_cells.busy),
            2,
        ),
    ];

    let info = bench.gateway.info();
    println!();
    println!(
        "machine: {} CPUs; load average (1/5/15 min) at start {load_start}, at end {load_end}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "gateway: {} (GET /api: version {}), kernel {} ({}){}",
        info.url,
        info.version.as_deref().unwrap_or("?"),
        info.kernel,
        info.kernel_display_name.as_deref().unwrap_or("?"),
        if bench.same_image {
            ""
        } else {
            "; NOT this machine's fat image"
        }
    );
    println!(
        "local: fat image {}, confined; rounds {}, {} starts per contender and round, \
         {} warm-up + {} timed cells per kernel and round",
        bench.spec.image.lock_hash, args.rounds, args.starts, args.warmup, args.cells
    );
    println!();
    for f in &figures {
        println!("{}", f.line());
    }
    println!();
    for (who, s) in &start_stats {
        println!("start_{}_p50_ms={:.4}", who.name(), s.p50);
        println!("start_{}_p95_ms={:.4}", who.name(), s.p95);
        println!("start_{}_n={}", who.name(), s.n);
    }
    for f in &figures {
        for (key, value) in f.pairs() {
            println!("{key}={value:.4}");
        }
    }
    println!("same_image={}", bench.same_image);

    if let Some(path) = &args.json {
        let report = json!({
            "gateway": info,
            "local_image": bench.spec.image.lock_hash,
            "same_image": bench.same_image,
            "rounds": args.rounds,
            "starts": args.starts,
            "cells": args.cells,
            "warmup": args.warmup,
            "load_start": load_start,
            "load_end": load_end,
            "start_ms": start_stats.iter().map(|(w, s)| (w.name(), s)).collect::<std::collections::BTreeMap<_, _>>(),
            "figures": figures,
            "samples": {
                "start_ms": starts.iter().map(|(w, s)| (w.name(), s)).collect::<std::collections::BTreeMap<_, _>>(),
                "cells": cells.iter().map(|(w, c)| (w.name(), c)).collect::<std::collections::BTreeMap<_, _>>(),
            },
        });
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Indices `0..n`, reversed when `turn` is even.
fn order(turn: usize, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    if turn.is_multiple_of(2) {
        v.reverse();
    }
    v
}

/// The two executors and what local kernels run.
struct Bench {
    gateway: Arc<Gateway>,
    gateway_executor: Executor,
    local_executor: Executor,
    spec: Arc<KernelSpec>,
    /// The gateway's kernelspec names this machine's fat image.
    same_image: bool,
}

impl Bench {
    async fn open(args: &Args) -> Result<Bench> {
        let image =
            tokio::task::spawn_blocking(|| ImageStore::from_env().ensure(ImageName::Fat, true))
                .await?
                .context("building the fat image")?;
        let init = match &args.retrace {
            Some(path) => path.clone(),
            None => default_retrace()?,
        };
        if !init.is_file() {
            bail!(
                "no retrace binary at {} (build it, or pass --retrace)",
                init.display()
            );
        }
        let sandbox = Confined::open(init.clone()).with_context(|| {
            format!(
                "local kernels are measured confined (init {})",
                init.display()
            )
        })?;
        let gateway = Gateway::connect(GatewayConfig {
            url: args.gateway_url.clone(),
            token: args.gateway_token.clone(),
            kernel: args.kernel.clone(),
            concurrency: 1,
            request_timeout: REQUEST_TIMEOUT,
        })
        .await
        .with_context(|| format!("connecting to the gateway at {}", args.gateway_url))?;
        // `retrace image kernelspec` names the image's hash in the display name.
        let same_image = gateway
            .info()
            .kernel_display_name
            .as_deref()
            .is_some_and(|n| n.contains(&image.lock_hash));
        if !same_image {
            eprintln!(
                "warning: the gateway's kernel {} ({}) does not name this machine's fat image {}: \
                 the figures compare different images",
                gateway.info().kernel,
                gateway.info().kernel_display_name.as_deref().unwrap_or("?"),
                image.lock_hash
            );
        }
        Ok(Bench {
            gateway_executor: Executor::Gateway(gateway.clone()),
            gateway,
            local_executor: Executor::Local(Arc::new(sandbox)),
            spec: Arc::new(KernelSpec::new(image, default_kernel_root())),
            same_image,
        })
    }

    /// A started kernel of `who` (the local ones checked to have started
    /// the way asked, not by a fallback).
    async fn start(&self, who: Contender) -> Result<AnyKernel> {
        let limits = SandboxLimits::default();
        let (executor, start) = match who {
            Contender::Gateway => (&self.gateway_executor, KernelStart::Cold),
            Contender::Zygote => (&self.local_executor, KernelStart::Zygote),
            Contender::Cold => (&self.local_executor, KernelStart::Cold),
        };
        let options = KernelOptions {
            start,
            ..KernelOptions::enforcing(&limits, true)
        };
        let kernel = executor
            .start(self.spec.clone(), options)
            .await
            .with_context(|| self.describe(who, "starting"))?;
        if who == Contender::Zygote {
            let path = kernel.as_local().map(|k| k.start_path().clone());
            if path != Some(StartPath::Zygote) {
                kernel.discard().await;
                bail!("a zygote kernel was asked for and started as {path:?}");
            }
        }
        Ok(kernel)
    }

    /// Milliseconds from asking for a kernel until its first `pass` is done.
    async fn start_once(&self, who: Contender) -> Result<f64> {
        let t = Instant::now();
        let mut kernel = self.start(who).await?;
        let outcome = kernel.execute(TRIVIAL_CELL, &ExecOptions::default()).await;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let ok = check(&outcome).with_context(|| self.describe(who, "the first cell of"));
        kernel.shutdown().await;
        ok.map(|_| ms)
    }

    /// One fresh kernel of `who`: `warmup` untimed cells, then `n` timed.
    async fn cells_once(
        &self,
        who: Contender,
        warmup: usize,
        n: usize,
        into: &mut Cells,
    ) -> Result<()> {
        let mut kernel = self.start(who).await?;
        let result = async {
            let exec = ExecOptions::default();
            for _ in 0..warmup {
                check(&kernel.execute(TRIVIAL_CELL, &exec).await)?;
            }
            for _ in 0..n {
                let t = Instant::now();
                let outcome = kernel.execute(TRIVIAL_CELL, &exec).await;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                check(&outcome)?;
                let busy = outcome
                    .timings_ms
                    .kernel_busy
                    .context("the kernel's busy→idle span is missing")?;
                into.roundtrip.push(ms);
                into.outcome_total.push(outcome.timings_ms.total);
                into.busy.push(busy);
            }
            Ok::<_, anyhow::Error>(())
        }
        .await
        .with_context(|| self.describe(who, "a cell of"));
        kernel.shutdown().await;
        result
    }

    fn describe(&self, who: Contender, what: &str) -> String {
        match who {
            Contender::Gateway => format!(
                "{what} a kernel `{}` on the gateway {}",
                self.gateway.info().kernel,
                self.gateway.info().url
            ),
            local => format!(
                "{what} a local confined {} kernel of the fat image {}",
                local.name(),
                self.spec.image.lock_hash
            ),
        }
    }
}

/// `target/<profile>/retrace` for `target/<profile>/examples/gateway`.
fn default_retrace() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this example's path")?;
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("retrace"))
        .with_context(|| format!("no directory above {}", exe.display()))
}

fn check(outcome: &Outcome) -> Result<()> {
    if outcome.succeeded() {
        return Ok(());
    }
    match &outcome.infra_error {
        Some(why) => bail!("the cell failed: {why}"),
        None => bail!("the cell failed: {:?}", outcome.error),
    }
}

/// The timed cells of one contender, all rounds (milliseconds).
#[derive(Default, Serialize)]
struct Cells {
    /// `execute` as the caller sees it.
    roundtrip: Vec<f64>,
    /// The outcome's own `timings_ms.total`.
    outcome_total: Vec<f64>,
    /// The kernel's busy→idle span.
    busy: Vec<f64>,
}

impl Cells {
    fn overhead(&self) -> Vec<f64> {
        self.roundtrip
            .iter()
            .zip(&self.busy)
            .map(|(rt, busy)| rt - busy)
            .collect()
    }
}

/// One comparison: the gateway's statistics against the local ones.
#[derive(Serialize)]
struct Figure {
    key: &'static str,
    name: &'static str,
    gateway: Stats,
    local: Stats,
    ratio_p50: f64,
    ratio_p95: f64,
    /// Decimals in the printed line.
    #[serde(skip)]
    decimals: usize,
    /// Whether `pairs` prints both sides' values too.
    #[serde(skip)]
    values: bool,
}

impl Figure {
    fn new(
        key: &'static str,
        name: &'static str,
        gateway: &Stats,
        local: &Stats,
        decimals: usize,
    ) -> Figure {
        Figure {
            key,
            name,
            ratio_p50: gateway.p50 / local.p50,
            ratio_p95: gateway.p95 / local.p95,
            gateway: gateway.clone(),
            local: local.clone(),
            decimals,
            // Starts are printed per contender (`start_<who>_p50_ms`).
            values: !key.starts_with("start_"),
        }
    }

    fn line(&self) -> String {
        let d = self.decimals;
        format!(
            "{}: p50/p95 {:.d$}/{:.d$} ms vs {:.d$}/{:.d$} ms: ratio gateway/local p50 {:.2}, p95 {:.2}",
            self.name,
            self.gateway.p50,
            self.gateway.p95,
            self.local.p50,
            self.local.p95,
            self.ratio_p50,
            self.ratio_p95
        )
    }

    /// `key=value` pairs of the printed summary: both sides' values
    /// (unless printed per contender already) and the ratios.
    fn pairs(&self) -> Vec<(String, f64)> {
        let mut pairs = Vec::new();
        if self.values {
            for (side, s) in [("gateway", &self.gateway), ("local", &self.local)] {
                pairs.push((format!("{}_{side}_p50_ms", self.key), s.p50));
                pairs.push((format!("{}_{side}_p95_ms", self.key), s.p95));
            }
        }
        pairs.push((format!("{}_ratio_p50", self.key), self.ratio_p50));
        pairs.push((format!("{}_ratio_p95", self.key), self.ratio_p95));
        pairs
    }
}

/// The 1/5/15 min load averages, or `?`.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}
