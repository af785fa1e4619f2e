//! The warm pool hands out each kernel once, refills, and shuts down clean.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use retrace::kernel::{ExecOptions, KernelOptions, KernelPool};
use retrace::pyenv::ImageName;
use retrace::sandbox::Verdict;

#[tokio::test(flavor = "multi_thread")]
async fn acquire_refill_shutdown_leaves_no_process() {
    if common::lacks_root() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_name = root.path().to_string_lossy().to_string();
    let pool = KernelPool::start(
        common::spec_in(ImageName::Slim, root.path()),
        common::sandbox(),
        KernelOptions::default(),
        2,
    );
    let mut ids = HashSet::new();
    let mut kernels = Vec::new();
    // More acquisitions than the pool size: the pool must refill.
    for _ in 0..4 {
        let mut k = pool.acquire().await.expect("kernel");
        assert!(
            ids.insert(k.id().to_string()),
            "a kernel was handed out twice"
        );
        let o = k
            .execute(
                "print('ok')",
                &ExecOptions {
                    timeout: Duration::from_secs(10),
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(o.verdict, Verdict::Ok);
        kernels.push(k);
    }
    // Give the pool time to start replacements, then shut everything down.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for k in kernels {
        k.shutdown().await;
    }
    pool.shutdown().await;
    // The image's zygote outlives its kernels (the CLI ends it at exit).
    retrace::kernel::zygote::shutdown_all();
    for id in &ids {
        assert!(
            common::wait_gone(id, 5).is_empty(),
            "kernel {id} left a process"
        );
    }
    // Kernels the pool held but never handed out are gone too.
    assert!(common::wait_gone(&root_name, 5).is_empty());
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "kernel directories left: {left:?}");
}
