//! Fresh confined kernels of the fat image, cold against zygote (see
//! `src/kernel/zygote.rs`), and the memory each one costs:
//!
//! - `kernel_start/{cold,zygote}`: `Kernel::start` until the kernel answers
//!   (probe installed), then the first cell
//!   `import numpy, pandas, matplotlib.pyplot; print(1)`: request to first
//!   cell done, as `retrace exec` sees it (shutdown not measured);
//! - after the timings, one kernel of each kind is measured: PSS and
//!   private bytes of its Python process (`/proc/<pid>/smaps_rollup`) and
//!   its cgroup's memory peak, printed as `memory …` lines.
//!
//! Confined: needs root. The zygote is started (and warmed by one fork)
//! before the measured part. `cargo bench --bench kernel_start` (about 2
//! minutes on 2 cores); `-- --quick` is not needed, each sample is one start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use retrace::kernel::{
    default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec, KernelStart, StartPath,
};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox, SandboxLimits};
use tokio::runtime::Runtime;

const FIRST_CELL: &str = "import numpy, pandas, matplotlib.pyplot\nprint(1)";

fn options(start: KernelStart) -> KernelOptions {
    KernelOptions {
        start,
        ..KernelOptions::enforcing(&SandboxLimits::default(), true)
    }
}

/// A fresh kernel with its first cell run: (kernel, until it answered,
/// until the first cell was done).
async fn fresh(
    spec: &Arc<KernelSpec>,
    sandbox: &dyn Sandbox,
    start: KernelStart,
) -> (Kernel, Duration, Duration) {
    let t = Instant::now();
    let mut kernel = Kernel::start(spec.clone(), sandbox, options(start))
        .await
        .expect("kernel starts");
    let ready = t.elapsed();
    let outcome = kernel.execute(FIRST_CELL, &ExecOptions::default()).await;
    let took = t.elapsed();
    assert!(outcome.succeeded(), "{:?}", outcome.error);
    if start == KernelStart::Zygote {
        assert_eq!(kernel.start_path(), &StartPath::Zygote);
    }
    (kernel, ready, took)
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The kernel's Python process: the one of its processes that is neither
/// the relay (no namespace of its own) nor PID 1.
fn kernel_process(kernel: &Kernel) -> Option<i32> {
    kernel.live_processes().into_iter().find(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .is_some_and(|ids| {
                    let ids: Vec<&str> = ids.split_whitespace().collect();
                    ids.len() > 1 && ids.last() != Some(&"1")
                })
        })
    })
}

/// (PSS, private) bytes of a process.
fn smaps(pid: i32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let kb = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        kb("Pss:") * 1024,
        (kb("Private_Clean:") + kb("Private_Dirty:")) * 1024,
    )
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn kernel_start(c: &mut Criterion) {
    let rt: Runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let image = ImageStore::from_env()
        .ensure(ImageName::Fat, false)
        .expect("building the fat image");
    let spec = Arc::new(KernelSpec::new(image, default_kernel_root()));
    let init = std::path::PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    let sandbox = match Confined::open(init) {
        Ok(s) => s,
        Err(e) => panic!("kernel_start measures confined kernels: {e}"),
    };
    // Warm: the zygote started and one kernel forked; the page cache holds the image.
    for start in [KernelStart::Cold, KernelStart::Zygote] {
        rt.block_on(async {
            let (k, _, _) = fresh(&spec, &sandbox, start).await;
            k.shutdown().await;
        });
    }
    let mut seen: Vec<(KernelStart, Vec<Duration>, Vec<Duration>)> = Vec::new();
    let mut group = c.benchmark_group("kernel_start");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_nanos(1))
        .measurement_time(Duration::from_nanos(1));
    for start in [KernelStart::Cold, KernelStart::Zygote] {
        let (mut readies, mut firsts) = (Vec::new(), Vec::new());
        group.bench_function(start.as_str(), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (k, ready, took) = fresh(&spec, &sandbox, start).await;
                        total += took;
                        readies.push(ready);
                        firsts.push(took);
                        k.shutdown().await;
                    }
                    total
                })
            })
        });
        seen.push((start, readies, firsts));
    }
    group.finish();
    for (start, readies, firsts) in seen {
        eprintln!(
            "start {start}: {} starts, p50 ready {:.0} ms, p50 first cell done {:.0} ms",
            readies.len(),
            p50(readies),
            p50(firsts)
        );
    }
    for start in [KernelStart::Cold, KernelStart::Zygote] {
        rt.block_on(async {
            let (mut k, _, _) = fresh(&spec, &sandbox, start).await;
            let o = k.execute("pass", &ExecOptions::default()).await;
            let (pss, private) = kernel_process(&k).map(smaps).unwrap_or_default();
            eprintln!(
                "memory {start}: pss {:.1} MiB, private {:.1} MiB, cgroup peak {:.1} MiB",
                mib(pss),
                mib(private),
                mib(o.memory_peak_bytes.unwrap_or(0))
            );
            k.shutdown().await;
        });
    }
    retrace::kernel::zygote::shutdown_all();
}

criterion_group!(benches, kernel_start);
criterion_main!(benches);
