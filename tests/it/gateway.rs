//! The `gateway` executor against a real jupyter-kernel-gateway on
//! 127.0.0.1 serving retrace's fat image (tests/common/gateway.rs): the
//! same outcomes as local kernels, limits enforced from retrace's side of
//! the socket, a kernel that dies, a gateway that goes away mid-run, and an
//! oracle run with the accuracy of a local one.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::gateway::Gateway as TestGateway;
use common::run::execute as run;
use retrace::harness::{Run, RunContext, RunResult};
use retrace::kernel::gateway::{Gateway, GatewayConfig, GatewayKernel, REQUEST_TIMEOUT};
use retrace::kernel::{ExecOptions, ExecutorInfo, KernelOptions, Outcome};
use retrace::model::Generation;
use retrace::record::{ExecutorSpec, GatewaySpec, RecordKind};
use retrace::sandbox::{SandboxLimits, Verdict};
use retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

fn config(gw: &TestGateway) -> GatewayConfig {
    GatewayConfig {
        url: gw.url.clone(),
        token: Some(gw.token.clone()),
        kernel: Some(gw.kernel.clone()),
        concurrency: 2,
        request_timeout: REQUEST_TIMEOUT,
    }
}

async fn kernel(gw: &TestGateway, limits: &SandboxLimits) -> GatewayKernel {
    let gateway = Gateway::connect(config(gw))
        .await
        .expect("gateway accepted");
    let options = KernelOptions::enforcing(limits, false);
    gateway
        .start(&[], DEFAULT_MAX_TASK_FILE_BYTES, options)
        .await
        .expect("gateway kernel starts")
}

fn exec(timeout: Duration, artifacts: Option<&Path>) -> ExecOptions {
    ExecOptions {
        timeout,
        artifact_dir: artifacts.map(Path::to_path_buf),
        artifact_prefix: "cell".into(),
    }
}

fn stdout_of(o: &Outcome) -> &str {
    o.stdout.as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_keep_state_and_give_tracebacks_plots_and_answers() {
    let gw = TestGateway::start();
    let mut k = kernel(&gw, &SandboxLimits::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = exec(Duration::from_secs(30), Some(dir.path()));

    let first = k.execute("x = 41\nprint('hi')", &opts).await;
    assert_eq!(first.verdict, Verdict::Ok, "{:?}", first.error);
    assert_eq!(stdout_of(&first), "hi\n");
    let enforcement = first
        .enforcement
        .as_ref()
        .expect("outcomes say who enforced what");
    assert_eq!(enforcement.executor, "gateway");
    assert_eq!(enforcement.enforced, ["timeout_wall", "output"]);
    assert!(enforcement.requested.contains(&"memory".to_string()));

    let second = k.execute("answer = x + 1", &opts).await;
    assert_eq!(second.verdict, Verdict::Ok);
    assert_eq!(second.answer.as_ref().unwrap().value, "42");

    let failing = k.execute("def f():\n    return 1 / 0\nf()", &opts).await;
    assert_eq!(failing.verdict, Verdict::Error);
    let error = failing.error.as_ref().unwrap();
    assert_eq!(error.ename, "ZeroDivisionError");
    assert!(
        error.traceback.iter().any(|l| l.contains("return 1 / 0")),
        "{:?}",
        error.traceback
    );
    assert!(failing.answer.is_none());

    let plot = k
        .execute(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
            &opts,
        )
        .await;
    assert_eq!(plot.verdict, Verdict::Ok, "{:?}", plot.error);
    assert_eq!(plot.artifacts.len(), 1, "{:?}", plot.displays);
    let png = std::fs::read(dir.path().join(&plot.artifacts[0].path)).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "the artifact is a PNG");

    // The kernel works in a directory of its own, not the gateway's.
    let cwd = k.execute("import os\nprint(os.getcwd())", &opts).await;
    assert!(cwd.stdout.contains("retrace-"), "{}", cwd.stdout);
    k.shutdown().await;
}

/// What a cell produces comes from the kernel's side (`outputs.py`), so a
/// gateway's kernel gives the same: saved files, chart data, `Image.show()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_files_charts_and_shown_images_come_through_the_gateway() {
    let gw = TestGateway::start();
    let mut k = kernel(&gw, &SandboxLimits::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let opts = exec(Duration::from_secs(30), Some(dir.path()));
    let o = k
        .execute(
            "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5])\nplt.savefig('p.png')\nplt.show()\n\
             from PIL import Image\nImage.new('RGB', (4, 4)).show()",
            &opts,
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{:?}", o.error);
    let names: Vec<_> = o.artifacts.iter().map(|a| a.name.as_deref()).collect();
    assert_eq!(names, [None, None, Some("p.png")], "{:?}", o.displays);
    let png = std::fs::read(dir.path().join(&o.artifacts[2].path)).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "the saved file is a PNG");
    let chart = o
        .displays
        .iter()
        .find_map(|b| b.data.get("e2b/chart"))
        .expect("the figure's chart data");
    assert_eq!(
        chart["elements"],
        serde_json::json!([
            {"label": "a", "group": "Group 0", "value": 3.0},
            {"label": "b", "group": "Group 0", "value": 5.0}
        ])
    );
    let again = k.execute("x = 1", &opts).await;
    assert!(again.artifacts.is_empty(), "{:?}", again.artifacts);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_interrupts_through_the_gateway_and_the_state_survives() {
    let gw = TestGateway::start();
    let mut k = kernel(&gw, &SandboxLimits::default()).await;
    let opts = exec(Duration::from_secs(2), None);
    k.execute("kept = 7", &opts).await;
    let spin = k.execute("while True:\n    pass", &opts).await;
    assert_eq!(spin.verdict, Verdict::TimeoutWall);
    assert_eq!(spin.error.as_ref().unwrap().ename, "KeyboardInterrupt");
    assert!(!spin.state_lost, "an interrupt keeps the kernel");
    let after = k.execute("print(kept)", &opts).await;
    assert_eq!(after.stdout, "7\n");

    // A cell that ignores the interrupt is ended by a restart through the
    // gateway; the next cell runs in the fresh kernel.
    let stubborn = k
        .execute(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)",
            &opts,
        )
        .await;
    assert_eq!(stubborn.verdict, Verdict::TimeoutWall);
    assert!(stubborn.state_lost);
    assert!(
        stubborn.flags.contains(&"interrupt_ignored".to_string()),
        "{:?}",
        stubborn.flags
    );
    let fresh = k.execute("print(globals().get('kept'))", &opts).await;
    assert_eq!(fresh.verdict, Verdict::Ok, "{:?}", fresh.error);
    assert_eq!(fresh.stdout, "None\n");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_killed_from_inside_is_reported_and_the_next_cell_runs() {
    let gw = TestGateway::start();
    let mut k = kernel(&gw, &SandboxLimits::default()).await;
    let opts = exec(Duration::from_secs(30), None);
    let cwd = "import os\nprint(os.getcwd())";
    let mut workdirs = vec![k.execute(cwd, &opts).await.stdout];
    k.execute("kept = 1", &opts).await;
    let died = k.execute("import os\nos.kill(os.getpid(), 9)", &opts).await;
    assert_eq!(died.verdict, Verdict::KernelExit, "{:?}", died.error);
    assert!(died.state_lost);
    assert!(
        died.flags.contains(&"restarted".to_string()),
        "{:?}",
        died.flags
    );
    let next = k
        .execute("print(globals().get('kept'))\nanswer = 5", &opts)
        .await;
    assert_eq!(next.verdict, Verdict::Ok, "{:?}", next.error);
    assert_eq!(next.stdout, "None\n");
    assert_eq!(
        next.answer.unwrap().value,
        "5",
        "the probe is back after the restart"
    );
    workdirs.push(k.execute(cwd, &opts).await.stdout);
    k.shutdown().await;
    // The gateway runs on this machine: its kernels' directories are ours to see.
    for dir in workdirs {
        let dir = dir.trim();
        assert!(dir.contains("retrace-"), "{dir}");
        assert!(
            !std::path::Path::new(dir).exists(),
            "a working directory left on the gateway's host: {dir}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_past_the_cap_is_stopped_from_retraces_side() {
    let gw = TestGateway::start();
    let limits = SandboxLimits {
        output_cap_bytes: 64 * 1024,
        ..SandboxLimits::default()
    };
    let mut k = kernel(&gw, &limits).await;
    let opts = exec(Duration::from_secs(30), None);
    let flood = k.execute("while True:\n    print('x' * 100)", &opts).await;
    assert_eq!(flood.verdict, Verdict::OutputLimit);
    assert!(flood.truncated);
    assert!(flood.stdout.len() <= 80 * 1024, "{}", flood.stdout.len());
    let next = k.execute("print('ok')", &opts).await;
    assert_eq!(next.stdout, "ok\n");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_is_not_unicode_crosses_the_gateway_as_replacements() {
    // The server re-encodes what the kernel sent: a lone surrogate reaches
    // the websocket as an escape, read as U+FFFD like a local kernel's.
    let gw = TestGateway::start();
    let mut k = kernel(&gw, &SandboxLimits::default()).await;
    let opts = exec(Duration::from_secs(30), None);
    let o = k.execute("print('42'); print('ok\\ud800')", &opts).await;
    assert_eq!(o.verdict, Verdict::Ok, "{:?}", o.error);
    assert_eq!(stdout_of(&o), "42\nok\u{FFFD}\n");
    assert_eq!(o.answer.as_ref().unwrap().value, "ok\u{FFFD}");
    assert!(o.text_replacements >= 1, "{o:?}");
    let o = k.execute("answer = 'x\\udcff'", &opts).await;
    assert_eq!(o.answer.as_ref().unwrap().value, "'x\u{FFFD}'", "{o:?}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_or_kernelspec_is_refused_with_what_to_do() {
    let gw = TestGateway::start();
    let wrong = GatewayConfig {
        token: Some("not-the-token".into()),
        ..config(&gw)
    };
    let e = Gateway::connect(wrong).await.err().unwrap().to_string();
    assert!(e.contains("401") && e.contains("--gateway-token"), "{e}");
    let unknown = GatewayConfig {
        kernel: Some("no-such-kernel".into()),
        ..config(&gw)
    };
    let e = Gateway::connect(unknown).await.err().unwrap().to_string();
    assert!(
        e.contains("no-such-kernel") && e.contains(&gw.kernel),
        "{e}"
    );
    let gateway = Gateway::connect(config(&gw)).await.unwrap();
    assert_eq!(gateway.info().url, gw.url);
    assert_eq!(gateway.info().kernel, gw.kernel);
}

fn run_options(suite: &str, out: &Path, gateway: Option<GatewayConfig>) -> common::run::TestRun {
    let mut opts = common::run::options(suite, "oracle", out);
    opts.spec.tasks.selection.limit_tasks = Some(12);
    opts.spec.model.generation = Generation::default();
    if let Some(gateway) = gateway {
        opts.ctx.gateway_token = gateway.token.clone();
        opts.spec.execution.executor = ExecutorSpec::Gateway(GatewaySpec::of(&gateway));
    }
    opts
}

/// The oracle's accuracy through the gateway is the local executor's, on
/// a suite with task files (tabular: CSVs copied to each kernel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oracle_run_through_the_gateway_scores_as_a_local_run() {
    if common::lacks_root() {
        return;
    }
    let gw = TestGateway::start();
    for suite in ["math", "tabular"] {
        let out = tempfile::tempdir().unwrap();
        let remote = run(run_options(
            suite,
            &out.path().join("gw"),
            Some(config(&gw)),
        ))
        .await;
        let local = run(run_options(suite, &out.path().join("local"), None)).await;
        assert_eq!(remote.infra_tasks, 0, "{suite}");
        let acc = |r: &RunResult| {
            r.summary
                .answers
                .accuracy_by_round
                .iter()
                .map(|a| a.value)
                .collect::<Vec<_>>()
        };
        assert_eq!(acc(&remote), acc(&local), "{suite}");
        assert!(acc(&remote)[0] > 0.9, "{suite}: {:?}", acc(&remote));
        let whole = std::fs::read_to_string(out.path().join("gw/run.json")).unwrap();
        let config: serde_json::Value = serde_json::from_str(&whole).unwrap();
        assert_eq!(
            config["spec"]["execution"]["executor"]["url"],
            gw.url.as_str()
        );
        let config = &config["provenance"];
        assert_eq!(config["executor"]["kind"], "gateway");
        assert_eq!(config["executor"]["url"], gw.url.as_str());
        assert!(
            !whole.contains(&gw.token),
            "the token is never written down"
        );
        let report = std::fs::read_to_string(out.path().join("gw/report.md")).unwrap();
        assert!(report.contains("GATEWAY EXECUTOR"), "{report}");
    }
}

/// The gateway goes away in the middle of a run: the tasks it took down
/// are infrastructure errors (not model failures, not a crash), and a
/// resume once it is back redoes exactly those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_lost_mid_run_gives_infra_errors_and_the_run_resumes() {
    let gw = Arc::new(Mutex::new(TestGateway::start()));
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let cfg = config(&gw.lock().unwrap());
    let mut opts = run_options("math", &dir, Some(cfg.clone()));
    opts.spec.execution.concurrency = 1;
    let journal = dir.join("results.jsonl");
    let stopper = {
        let gw = gw.clone();
        std::thread::spawn(move || {
            // Stop once a few tasks are done.
            let deadline = std::time::Instant::now() + Duration::from_secs(300);
            while std::time::Instant::now() < deadline {
                let done = std::fs::read_to_string(&journal)
                    .map(|t| t.lines().count())
                    .unwrap_or(0);
                if done >= 3 {
                    gw.lock().unwrap().stop();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        })
    };
    let first = run(opts).await;
    assert!(stopper.join().unwrap(), "the run never got 3 records in");
    let records = retrace::harness::journal::read(&dir.join("results.jsonl")).unwrap();
    let lost: Vec<_> = records
        .iter()
        .filter(|r| r.kind == RecordKind::InfraError)
        .collect();
    assert!(
        !lost.is_empty(),
        "tasks after the stop are infrastructure errors"
    );
    assert_eq!(first.infra_tasks, lost.len());
    assert!(
        lost.iter().all(|r| r
            .infra_error
            .as_deref()
            .is_some_and(|e| e.contains("gateway"))),
        "{:?}",
        lost.iter().map(|r| &r.infra_error).collect::<Vec<_>>()
    );
    assert!(
        records.iter().any(|r| r.correct),
        "tasks before the stop were scored"
    );

    gw.lock().unwrap().start_again();
    let resume = RunContext {
        gateway_token: cfg.token.clone(),
        kernel_start: Some(Default::default()),
        ..common::run::context("math")
    };
    let run = Run::resume(&dir, resume).await.expect("resumed");
    assert!(matches!(
        run.config().provenance.executor,
        ExecutorInfo::Gateway(_)
    ));
    let (todo, finished) = run.counts();
    assert_eq!(todo, lost.len(), "exactly the lost tasks are redone");
    assert_eq!(finished + todo, 12);
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let second = run.execute(rx).await.unwrap();
    assert_eq!(second.infra_tasks, 0);
    assert_eq!(second.summary.answers.accuracy_by_round[0].value, 1.0);
}

/// `--env` on a gateway: a variable the gateway allows reaches the kernel
/// by name, one it does not is dropped by the gateway, and both travel
/// together in `KERNEL_RETRACE_ENV` for retrace's launcher.
#[test]
fn the_users_variables_go_to_the_gateway_in_the_start_request() {
    let gw = TestGateway::start();
    let src = "import os, json\n\
               print('allowed', os.environ.get('RT_GATEWAY_COLOR'))\n\
               print('other', os.environ.get('RT_OTHER'))\n\
               print('carried', sorted(json.loads(os.environ['KERNEL_RETRACE_ENV'])))\n";
    let allowed = format!("{}=green", common::gateway::ALLOWED_ENV);
    let out = common::retrace([
        "exec",
        "-",
        "--executor",
        "gateway",
        "--env",
        &allowed,
        "--env",
        "RT_OTHER=x",
    ])
    .env("JUPYTER_GATEWAY_URL", &gw.url)
    .env("JUPYTER_GATEWAY_AUTH_TOKEN", &gw.token)
    .stdin(src)
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("allowed green"), "{}", out.stdout);
    assert!(out.stdout.contains("other None"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("carried ['RT_GATEWAY_COLOR', 'RT_OTHER']"),
        "{}",
        out.stdout
    );
}

/// `retrace exec` and `retrace sandbox check` on a gateway, from the
/// command line, with the token from the environment as Jupyter has it.
#[test]
fn the_cli_runs_exec_and_the_sandbox_check_on_a_gateway() {
    let gw = TestGateway::start();
    let dir = tempfile::tempdir().unwrap();
    let cells = dir.path().join("cells.py");
    std::fs::write(&cells, "x = 2\n# %%\nprint(x * 21)\n# %%\n1/0\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "exec",
            cells.to_str().unwrap(),
            "--json",
            "--executor",
            "gateway",
        ])
        .env("JUPYTER_GATEWAY_URL", &gw.url)
        .env("JUPYTER_GATEWAY_AUTH_TOKEN", &gw.token)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let outcomes: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(outcomes[1]["stdout"], "42\n");
    assert_eq!(outcomes[2]["error"]["ename"], "ZeroDivisionError");
    assert_eq!(outcomes[2]["enforcement"]["executor"], "gateway");

    // A few cases of the shipped corpus: two that run on a gateway, three
    // that must not (one would kill every process of the host it runs on).
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/hostile");
    for id in [
        "out_line_flood",
        "jp_forged_reply",
        "mem_numpy_ones",
        "jp_in_kernel_pip",
        "sig_kill_everything",
    ] {
        let file = format!("{id}.toml");
        std::fs::copy(shipped.join(&file), corpus.join(&file)).unwrap();
    }
    let report = dir.path().join("check.json");
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "sandbox",
            "check",
            "--executor",
            "gateway",
            "--gateway-url",
            &gw.url,
        ])
        .args(["--gateway-token", &gw.token, "--jobs", "2", "--json"])
        .arg(&report)
        .arg("--corpus")
        .arg(&corpus)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(report["executor"]["kind"], "gateway");
    let mut ran: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    ran.sort();
    assert_eq!(ran, ["jp_forged_reply", "out_line_flood"]);
    let skipped = report["not_applicable"].as_array().unwrap();
    let reason_of = |id: &str| {
        skipped
            .iter()
            .find(|n| n["id"] == id)
            .and_then(|n| n["reason"].as_str())
            .unwrap_or_else(|| panic!("{id} is not listed as not applicable: {skipped:?}"))
            .to_string()
    };
    assert!(reason_of("mem_numpy_ones").contains("memory"));
    assert!(reason_of("sig_kill_everything").contains("signals"));
    assert!(reason_of("jp_in_kernel_pip").contains("local only"));
    assert!(text.contains("do not apply on a gateway"), "{text}");
}

/// A TCP proxy in front of the gateway whose connections can be cut (as a
/// load balancer or a flaky network would) and which can refuse new ones.
struct Proxy {
    url: String,
    cut: tokio::sync::watch::Sender<u64>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    async fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let refusing = refuse.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if refusing.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the connection is reset
                }
                let upstream = upstream.clone();
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Proxy { url, cut, refuse }
    }

    /// Cuts every open connection.
    fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

/// A websocket cut in the middle of a cell is reopened with the same
/// session: the server's buffer gives back what was said meanwhile, and the
/// cell's outcome is whole. A gateway that stays unreachable ends the cell
/// as an infrastructure error, and the kernel is usable once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_websocket_is_reopened_and_a_lost_one_is_an_infra_error() {
    let gw = TestGateway::start();
    let proxy = Proxy::start(&gw.url).await;
    let via_proxy = GatewayConfig {
        url: proxy.url.clone(),
        ..config(&gw)
    };
    let gateway = Gateway::connect(via_proxy).await.unwrap();
    let options = KernelOptions::enforcing(&SandboxLimits::default(), false);
    let mut k = gateway
        .start(&[], DEFAULT_MAX_TASK_FILE_BYTES, options)
        .await
        .unwrap();
    let opts = exec(Duration::from_secs(30), None);
    k.execute("kept = 3", &opts).await;

    let cell =
        "import time\nprint('before', flush=True)\ntime.sleep(1.5)\nprint('after')\nanswer = kept";
    let cutter = {
        let cut = proxy.cut.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cut.send_modify(|n| *n += 1);
        })
    };
    let outcome = k.execute(cell, &opts).await;
    cutter.await.unwrap();
    assert_eq!(outcome.infra_error, None);
    assert_eq!(outcome.verdict, Verdict::Ok, "{:?}", outcome.error);
    assert_eq!(outcome.stdout, "before\nafter\n");
    assert_eq!(outcome.answer.unwrap().value, "3");

    proxy
        .refuse
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let cutter = {
        let cut = proxy.cut.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cut.send_modify(|n| *n += 1);
        })
    };
    let lost = k
        .execute("import time\ntime.sleep(1)\nprint('x')", &opts)
        .await;
    cutter.await.unwrap();
    let why = lost
        .infra_error
        .as_deref()
        .expect("an infrastructure error");
    assert!(why.contains("dropped mid-execution"), "{why}");
    assert_eq!(lost.verdict, Verdict::InternalError);

    proxy
        .refuse
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let back = k.execute("print(kept)", &opts).await;
    assert_eq!(
        back.verdict,
        Verdict::Ok,
        "{:?} {:?}",
        back.error,
        back.infra_error
    );
    assert_eq!(back.stdout, "3\n", "the kernel kept its state");
    proxy.cut();
    k.shutdown().await;
}
