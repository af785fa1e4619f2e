//! Kernel benchmarks against a real ipykernel of the slim image (built under
//! `$RETRACE_HOME` on first use), unconfined so only the client is measured:
//!
//! - `kernel/execute_trivial`: round trip of `pass` on a warm kernel
//!   (`Kernel::execute` as the caller sees it: until reply and idle);
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
use retrace::kernel::{default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox, Unconfined};
use tokio::runtime::Runtime;

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
    cold_start(c, &rt, &spec);
}

criterion_group!(benches, kernel_benches);
criterion_main!(benches);
