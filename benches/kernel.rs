//! Kernel benchmarks against a real ipykernel of the slim image (built under
//! `$RETRACE_HOME` on first use), unconfined so only the client is measured:
//!
//! - `kernel/execute_trivial`: round trip of `pass` on a warm kernel
//!   (`Kernel::execute` as the caller sees it: until reply and idle);
//! - `kernel/pool_acquire_warm`: `KernelPool::acquire` with a ready kernel in
//!   a pool of 2, called from a spawned task (the acquired kernel is shut
//!   down, and the pool given time to refill, outside the measured part);
//!   `kernel/pool_acquire_warm_block_on`: the same, called from the future
//!   given to `Runtime::block_on`;
//! - `kernel/cold_start`: `Kernel::start` until the kernel answers, for
//!   reference (shutdown not measured).
//!
//! `cargo bench --bench kernel` takes a few minutes on a 2-core machine. The
//! two slow benchmarks take one iteration per sample on purpose; criterion
//! warns that it "cannot complete the samples in" their tiny target time,
//! which is expected.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use retrace::kernel::{
    default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelPool, KernelSpec,
};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox, Unconfined};
use tokio::runtime::Runtime;

/// An acquire slower than this did not find a ready kernel.
const WARM_LIMIT: Duration = Duration::from_millis(50);

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn spec() -> Arc<KernelSpec> {
    let image = ImageStore::from_env()
        .ensure(ImageName::Slim, false)
        .expect("building the slim image");
    Arc::new(KernelSpec::new(image, default_kernel_root()))
}

async fn start(spec: &Arc<KernelSpec>) -> Kernel {
    Kernel::start(spec.clone(), &Unconfined, KernelOptions::default())
        .await
        .expect("starting a kernel")
}

fn execute_trivial(c: &mut Criterion, rt: &Runtime, spec: &Arc<KernelSpec>) {
    let mut kernel = rt.block_on(start(spec));
    let exec = ExecOptions::default();
    rt.block_on(async {
        for _ in 0..20 {
            assert!(kernel.execute("pass", &exec).await.succeeded());
        }
    });
    let mut group = c.benchmark_group("kernel");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6));
    group.bench_function("execute_trivial", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    let outcome = kernel.execute("pass", &exec).await;
                    total += t.elapsed();
                    assert!(outcome.succeeded(), "{:?}", outcome.error);
                }
                total
            })
        })
    });
    group.finish();
    rt.block_on(kernel.shutdown());
}

/// `iters` acquires from a warm pool; returns their summed time and how
/// many found no ready kernel. Each kernel is shut down, and the pool given
/// `refill` to replace it, outside the measured part.
async fn acquire_loop(pool: Arc<KernelPool>, iters: u64, refill: Duration) -> (Duration, u32) {
    let mut total = Duration::ZERO;
    let mut cold = 0;
    for _ in 0..iters {
        let t = Instant::now();
        let kernel = pool.acquire().await.expect("acquiring a kernel");
        let took = t.elapsed();
        total += took;
        if took > WARM_LIMIT {
            cold += 1;
        }
        kernel.shutdown().await;
        tokio::time::sleep(refill).await;
    }
    (total, cold)
}

/// `pool_acquire_warm`: the caller is a spawned task (on a worker thread),
/// as harness code usually is. `pool_acquire_warm_block_on`: the caller is
/// the future given to `Runtime::block_on` (not a worker).
fn pool_acquire_warm(c: &mut Criterion, rt: &Runtime, spec: &Arc<KernelSpec>) {
    // Refill time: one cold start (measured here), with margin for the
    // shutdown that runs at the same time on a small machine.
    let t = Instant::now();
    rt.block_on(async { start(spec).await.shutdown().await });
    let refill = t.elapsed() * 2 + Duration::from_millis(300);

    let sandbox: Arc<dyn Sandbox> = Arc::new(Unconfined);
    let pool =
        Arc::new(rt.block_on(async {
            KernelPool::start(spec.clone(), sandbox, KernelOptions::default(), 2)
        }));
    rt.block_on(async { tokio::time::sleep(refill).await });
    let mut cold = 0u32;
    let mut group = c.benchmark_group("kernel");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_nanos(1))
        .measurement_time(Duration::from_nanos(1));
    group.bench_function("pool_acquire_warm", |b| {
        b.iter_custom(|iters| {
            let job = acquire_loop(pool.clone(), iters, refill);
            let (total, slow) =
                rt.block_on(async { tokio::spawn(job).await.expect("the measuring task") });
            cold += slow;
            total
        })
    });
    group.bench_function("pool_acquire_warm_block_on", |b| {
        b.iter_custom(|iters| {
            let (total, slow) = rt.block_on(acquire_loop(pool.clone(), iters, refill));
            cold += slow;
            total
        })
    });
    group.finish();
    rt.block_on(pool.shutdown());
    if cold > 0 {
        eprintln!(
            "warning: {cold} acquire(s) took over {WARM_LIMIT:?}: the pool was not warm; \
             the result includes cold starts"
        );
    }
}

fn cold_start(c: &mut Criterion, rt: &Runtime, spec: &Arc<KernelSpec>) {
    let mut group = c.benchmark_group("kernel");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_nanos(1))
        .measurement_time(Duration::from_nanos(1));
    let unconfined: Arc<dyn Sandbox> = Arc::new(Unconfined);
    let mut sandboxes = vec![("cold_start", unconfined)];
    // The confined start (cgroup, namespaces, init, private filesystem view)
    // against the same image; goal: at most 20% over the unconfined start.
    // The init is the retrace binary, built by `cargo bench` alongside.
    let init = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/retrace");
    match Confined::open(init.clone()) {
        Ok(confined) if init.exists() => {
            sandboxes.push(("cold_start_confined", Arc::new(confined)))
        }
        Ok(_) => eprintln!(
            "skipping cold_start_confined: build {} first",
            init.display()
        ),
        Err(e) => eprintln!("skipping cold_start_confined: {e}"),
    }
    for (name, sandbox) in sandboxes {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let t = Instant::now();
                        let kernel =
                            Kernel::start(spec.clone(), sandbox.as_ref(), KernelOptions::default())
                                .await
                                .expect("kernel starts");
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

fn kernel_benches(c: &mut Criterion) {
    let rt = runtime();
    let spec = spec();
    execute_trivial(c, &rt, &spec);
    pool_acquire_warm(c, &rt, &spec);
    cold_start(c, &rt, &spec);
}

criterion_group!(benches, kernel_benches);
criterion_main!(benches);
