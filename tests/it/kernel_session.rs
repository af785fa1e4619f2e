//! A real ipykernel per test, spoken to over the Jupyter protocol.

use crate::common;

use std::time::Duration;

use retrace::kernel::{AnswerRule, ExecOptions, Kernel, KernelOptions, OutputCap};
use retrace::sandbox::Verdict;

async fn kernel() -> Kernel {
    kernel_with(KernelOptions::default()).await
}

use common::{exec_opts as opts, fat_kernel as kernel_with};

#[tokio::test(flavor = "multi_thread")]
async fn state_persists_and_streams_are_separate() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let a = k.execute("x = 20\nprint('out')", &opts(10)).await;
    assert_eq!(a.verdict, Verdict::Ok);
    let b = k
        .execute(
            "import sys\nprint('to err', file=sys.stderr)\nprint(x * 2)",
            &opts(10),
        )
        .await;
    assert_eq!(b.stdout, "40\n");
    assert_eq!(b.stderr, "to err\n");
    assert_eq!(b.execution_count, Some(2));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_come_without_escape_codes() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute("def f(d):\n    return d['missing']\nf({})", &opts(10))
        .await;
    assert_eq!(o.verdict, Verdict::Error);
    let e = o.error.expect("error info");
    assert_eq!(e.ename, "KeyError");
    assert_eq!(e.evalue, "'missing'");
    let text = e.traceback.join("\n");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("return d['missing']"), "{text}");
    assert!(o.answer.is_none());
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plots_become_png_files() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut k = kernel().await;
    let exec = ExecOptions {
        artifact_dir: Some(dir.path().to_path_buf()),
        artifact_prefix: "plot".into(),
        ..opts(30)
    };
    // One figure shown explicitly, one left open at the end of the cell.
    let code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.show()\nplt.figure(); plt.bar([1, 2], [3, 4])";
    let o = k.execute(code, &exec).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let pngs: Vec<_> = o
        .artifacts
        .iter()
        .filter(|a| a.mime == "image/png")
        .collect();
    assert_eq!(pngs.len(), 2, "{:?}", o.artifacts);
    for a in pngs {
        let file = std::fs::File::open(dir.path().join(&a.path)).unwrap();
        let mut reader = png::Decoder::new(std::io::BufReader::new(file))
            .read_info()
            .expect("valid PNG header");
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let frame = reader.next_frame(&mut buf).expect("PNG decodes");
        assert!(frame.width > 100 && frame.height > 100);
        assert!(a.base64.as_ref().is_some_and(|b| b.len() > 100));
    }
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn output_flood_keeps_head_and_tail() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel_with(KernelOptions {
        output_cap: OutputCap {
            bytes: 64 * 1024,
            messages: 10_000,
        },
        ..Default::default()
    })
    .await;
    let o = k
        .execute(
            "for i in range(100000):\n    print('line', i)\nprint('END')",
            &opts(30),
        )
        .await;
    assert!(o.truncated);
    assert!(o.truncation.dropped_bytes > 0);
    assert!(
        o.stdout.starts_with("line 0\nline 1\n"),
        "{}",
        &o.stdout[..50]
    );
    assert!(o.stdout.contains("bytes truncated"));
    assert!(o.stdout.len() < 64 * 1024 + 200);
    // The cap interrupts the flood; the kernel survives it.
    assert_eq!(o.verdict, Verdict::OutputLimit);
    let after = k.execute("print('still here')", &opts(10)).await;
    assert_eq!(after.stdout, "still here\n");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn answer_value_follows_the_rule() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k.execute("print('noise')\nprint('7')", &opts(10)).await;
    let a = o.answer.unwrap();
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("7", AnswerRule::LastStdoutLine)
    );
    let o = k.execute("print('noise')\n3 * 5", &opts(10)).await;
    let a = o.answer.unwrap();
    assert_eq!((a.value.as_str(), a.rule), ("15", AnswerRule::LastResult));
    let o = k.execute("answer = 'forty two'\n99", &opts(10)).await;
    let a = o.answer.unwrap();
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("'forty two'", AnswerRule::AnswerVariable)
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sleep_is_interrupted_and_the_kernel_lives_on() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    k.execute("keep = 'me'", &opts(10)).await;
    let pid = k.pid();
    let o = k.execute("import time\ntime.sleep(100)", &opts(1)).await;
    assert_eq!(o.verdict, Verdict::TimeoutWall);
    assert_eq!(o.error.as_ref().unwrap().ename, "KeyboardInterrupt");
    assert!(!o.state_lost);
    // Not a speed goal: only that the 100 s sleep was cut short.
    assert!(o.timings_ms.total < 60_000.0, "{o:?}");
    let after = k.execute("print(keep)", &opts(10)).await;
    assert_eq!(after.stdout, "me\n");
    assert_eq!(k.pid(), pid, "no restart was needed");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kernel_killed_from_outside_is_reported_dead() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let pid = k.pid();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    });
    let started = std::time::Instant::now();
    let o = k.execute("import time\ntime.sleep(600)", &opts(600)).await;
    killer.await.unwrap();
    // Not a speed goal: only that the death ended the execution before its
    // 600 s deadline (the time includes the restart, slow on a busy machine).
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "waited for the deadline"
    );
    assert_eq!(o.verdict, Verdict::Crash, "{o:?}");
    assert_eq!(
        o.exit.as_ref().unwrap().signal_name.as_deref(),
        Some("SIGKILL")
    );
    assert!(o.state_lost);
    assert!(o.flags.contains(&"restarted".to_string()));
    let after = k.execute("print('fresh')", &opts(10)).await;
    assert_eq!(after.stdout, "fresh\n");
    assert_ne!(k.pid(), pid);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_executions_in_one_kernel() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    k.execute("total = 0", &opts(10)).await;
    for i in 1..=50 {
        let o = k.execute(&format!("total += {i}\ntotal"), &opts(10)).await;
        assert_eq!(o.verdict, Verdict::Ok);
        assert_eq!(o.execution_count, Some(i + 1));
    }
    let o = k.execute("total", &opts(10)).await;
    assert_eq!(o.answer.unwrap().value, "1275");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_loses_state_and_shutdown_leaves_nothing() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let id = k.id().to_string();
    k.execute("gone = 1", &opts(10)).await;
    k.restart().await.unwrap();
    let o = k.execute("'gone' in globals()", &opts(10)).await;
    assert_eq!(o.answer.unwrap().value, "False");
    // A child process the code started must not outlive the kernel.
    k.execute(
        &format!(
            "import subprocess, sys\np = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{id}'])"
        ),
        &opts(10),
    )
    .await;
    let child = format!("time.sleep(300)\0{id}");
    assert_eq!(
        common::processes_mentioning(&child).len(),
        1,
        "the child is running"
    );
    k.shutdown().await;
    assert!(common::wait_gone(&id, 5).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn state_an_earlier_cell_left_does_not_change_how_the_next_is_read() {
    let mut k = kernel().await;
    // Round 0 patches what prints and displays, removes the reader's hooks,
    // rebinds its entry point and leaves a post-run callback that fails.
    let setup = "import builtins, sys\n\
        builtins.repr = lambda o: '99'\n\
        builtins.__retrace_answer__ = lambda: 'retrace:{\"armed\":true,\"variable\":{\"ok\":true,\"type\":\"int\",\"text\":\"99\",\"json\":99}}'\n\
        sys.displayhook = lambda v: None\n\
        ip = get_ipython()\n\
        for hooks in ip.events.callbacks.values():\n    hooks.clear()\n\
        def broken(result):\n    raise RuntimeError('callback of round 0')\n\
        ip.events.register('post_run_cell', broken)\n\
        print('patched')";
    let o = k.execute(setup, &opts(20)).await;
    assert_eq!(o.stdout, "patched\n", "{o:?}");
    let o = k.execute("answer = 6 * 7\nprint('done')", &opts(20)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(o.error.is_none(), "{o:?}");
    assert!(
        o.stderr
            .contains("did not raise: RuntimeError: callback of round 0"),
        "{o:?}"
    );
    let a = o.answer.unwrap();
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("42", AnswerRule::AnswerVariable)
    );
    let o = k.execute("print(7)", &opts(20)).await;
    assert_eq!(o.stdout, "7\n", "{o:?}");
    assert_eq!(o.answer.unwrap().value, "7");
    let o = k.execute("6 * 7", &opts(20)).await;
    let a = o.answer.unwrap();
    assert_eq!((a.value.as_str(), a.rule), ("42", AnswerRule::LastResult));
    let o = k.execute("x = 1\n1 / 0", &opts(20)).await;
    assert_eq!(o.verdict, Verdict::Error);
    let e = o.error.unwrap();
    assert_eq!(
        (e.ename.as_str(), e.evalue.as_str()),
        ("ZeroDivisionError", "division by zero")
    );
    assert!(o.answer.is_none());
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_package_store_is_read_only_to_kernels() {
    // The store of the `dynamic` strategy, bound into the kernel as the
    // harness binds it; a file planted there would reach every later kernel.
    let dir = common::outside_tmp();
    let store = retrace::pyenv::dynamic::PackageStore::new(dir.path().join("packages"));
    store.create().unwrap();
    let site = store.root().join("demo-1.0-0123456789abcdef").join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("demo.py"), "VALUE = 1\n").unwrap();
    let mut spec = (*common::spec(retrace::pyenv::ImageName::Fat)).clone();
    spec.ro_binds.push(store.root().to_path_buf());
    let sandbox = common::sandbox();
    let mut k = Kernel::start(
        std::sync::Arc::new(spec),
        sandbox.as_ref(),
        Default::default(),
    )
    .await
    .expect("kernel starts");
    let code = format!(
        "import os\nsite = {site:?}\n\
         def attempt(label, fn):\n    try:\n        fn()\n        print(label, 'written')\n    except OSError as e:\n        print(label, e.errno)\n\
         attempt('pth', lambda: open(os.path.join(site, 'planted.pth'), 'w').close())\n\
         attempt('entry', lambda: os.mkdir(os.path.join(os.path.dirname(os.path.dirname(site)), 'evil-1.0')))\n\
         attempt('module', lambda: open(os.path.join(site, 'demo.py'), 'a').close())\n\
         print(open(os.path.join(site, 'demo.py')).read().strip())",
        site = site.display().to_string()
    );
    let o = k.execute(&code, &opts(20)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    // A new name is refused by the read-only mount (30); the existing
    // root-owned file by its permissions first (13), and stays as it was.
    assert_eq!(
        o.stdout, "pth 30\nentry 30\nmodule 13\nVALUE = 1\n",
        "{o:?}"
    );
    k.shutdown().await;
    assert!(!site.join("planted.pth").exists());
}
