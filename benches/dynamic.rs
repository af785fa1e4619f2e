//! Benchmarks of the `dynamic` strategy, confined as users run it (needs
//! root, like the integration tests; the sandbox's init is the `retrace`
//! binary that `cargo bench` builds alongside):
//!
//! - `dynamic/store_hit_scipy`: what a task pays when its first cell needs
//!   scipy and the store has it: `Packages::run_cell` of a cell importing
//!   `scipy.stats` in a fresh slim kernel (the missing import, the store-hit
//!   install step, the path added to the live kernel, the re-run). The
//!   kernel is started and shut down outside the measured part. The step's
//!   own `ms` (decision → the kernel sees the package; goal ≤ 1 s p50) is
//!   collected beside it and printed with the task's p50/p95 at the end.
//! - `dynamic/kernel_start_fat`, `dynamic/kernel_start_slim`: confined
//!   `Kernel::start` with each arm's spec (the slim one carries the
//!   store's read-only bind); shutdown not measured.
//!
//! One iteration per sample, 10 samples: a few minutes on 2 cores.
//! Criterion warns that it cannot complete the samples in their tiny
//! target time: expected. Cold installs (store miss) are measured by
//! `benches/install_tools.sh` and the `install_cold` example.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode};
use retrace::harness::packages::{Activated, Packages};
use retrace::harness::ArmKernels;
use retrace::kernel::{AnyKernel, ExecOptions, Kernel, KernelOptions};
use retrace::pyenv::{ImageStore, Strategy};
use retrace::record::InstallOn;
use retrace::sandbox::{Confined, Sandbox, SandboxLimits};
use tokio::runtime::Runtime;

const CELL: &str = "import scipy\nimport scipy.stats\nanswer = 1";

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn sandbox() -> Arc<dyn Sandbox> {
    let init = std::path::PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    match Confined::open(init) {
        Ok(sandbox) => Arc::new(sandbox),
        Err(e) => panic!("the dynamic benchmarks run confined kernels and need root: {e}"),
    }
}

fn arm(strategy: Strategy, sandbox: &Arc<dyn Sandbox>) -> ArmKernels {
    let image = ImageStore::from_env()
        .ensure(strategy.image(), false)
        .unwrap_or_else(|e| panic!("building the {} image: {e}", strategy.image()));
    ArmKernels::new(strategy, image, 1, InstallOn::Both, sandbox)
        .unwrap_or_else(|e| panic!("the {strategy} arm: {e}"))
}

fn options() -> KernelOptions {
    KernelOptions::enforcing(&SandboxLimits::default(), true)
}

async fn start(arm: &ArmKernels, sandbox: &dyn Sandbox) -> AnyKernel {
    let kernel = Kernel::start(arm.kernel.clone(), sandbox, options())
        .await
        .expect("a confined kernel starts");
    kernel.into_any()
}

fn slow_group<'a>(c: &'a mut Criterion) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group("dynamic");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_nanos(1))
        .measurement_time(Duration::from_nanos(1));
    group
}

/// One task's first cell in a fresh kernel: (task wall time, step ms).
async fn scipy_cell(
    packages: &Packages,
    kernel: &mut AnyKernel,
    exec: &ExecOptions,
) -> (Duration, f64) {
    let mut activated = Activated::default();
    let t = Instant::now();
    let run = packages.run_cell(kernel, &mut activated, CELL, exec).await;
    let took = t.elapsed();
    assert!(run.outcome.succeeded(), "{:?}", run.outcome.error);
    assert_eq!(run.steps.len(), 1, "{:?}", run.steps);
    let step = &run.steps[0];
    assert!(
        step.store_hit && step.installer_ms == 0.0 && step.rerun,
        "{step:?}"
    );
    (took, step.ms)
}

fn store_hit_scipy(c: &mut Criterion, rt: &Runtime, sandbox: &Arc<dyn Sandbox>) {
    let arm = arm(Strategy::Dynamic, sandbox);
    let packages = arm.packages.clone().expect("a dynamic arm installs");
    let exec = ExecOptions {
        timeout: Duration::from_secs(120),
        ..Default::default()
    };
    // Warm the store (a cold install if it lacks scipy) and the page
    // cache, outside the measurement.
    rt.block_on(async {
        let closure = packages
            .allowlist
            .closure("scipy")
            .expect("scipy is allowed");
        packages
            .installer
            .install(&closure)
            .await
            .unwrap_or_else(|e| panic!("warming the store with scipy: {e}"));
        let mut kernel = start(&arm, sandbox.as_ref()).await;
        scipy_cell(&packages, &mut kernel, &exec).await;
        kernel.shutdown().await;
    });

    let mut tasks = Vec::new();
    let mut steps = Vec::new();
    let mut group = slow_group(c);
    group.bench_function("store_hit_scipy", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut kernel = start(&arm, sandbox.as_ref()).await;
                    let (took, step_ms) = scipy_cell(&packages, &mut kernel, &exec).await;
                    kernel.shutdown().await;
                    total += took;
                    tasks.push(took.as_secs_f64() * 1e3);
                    steps.push(step_ms);
                }
                total
            })
        })
    });
    group.finish();
    eprintln!(
        "dynamic/store_hit_scipy over {} runs (criterion's warm-up included), ms: \
         task p50 {:.0} p95 {:.0}; install step p50 {:.0} p95 {:.0} (goal: step p50 <= 1000)",
        tasks.len(),
        percentile(&mut tasks, 50.0),
        percentile(&mut tasks, 95.0),
        percentile(&mut steps, 50.0),
        percentile(&mut steps, 95.0),
    );
}

fn kernel_start(c: &mut Criterion, rt: &Runtime, sandbox: &Arc<dyn Sandbox>) {
    let arms = [
        ("kernel_start_fat", arm(Strategy::Fat, sandbox)),
        ("kernel_start_slim", arm(Strategy::Dynamic, sandbox)),
    ];
    let mut group = slow_group(c);
    for (name, arm) in &arms {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let t = Instant::now();
                        let kernel = start(arm, sandbox.as_ref()).await;
                        total += t.elapsed();
                        kernel.shutdown().await;
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

/// Nearest-rank percentile.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn dynamic_benches(c: &mut Criterion) {
    let rt = runtime();
    let sandbox = sandbox();
    store_hit_scipy(c, &rt, &sandbox);
    kernel_start(c, &rt, &sandbox);
}

criterion_group!(benches, dynamic_benches);
criterion_main!(benches);
