//! A real Jupyter Enterprise Gateway serving retrace's own kernelspec
//! (`retrace image kernelspec fat --enterprise-gateway`): its
//! DistributedProcessProxy runs `retrace launch` over SSH on two hosts
//! made of network namespaces (`common::enterprise_gateway`), and each
//! kernel is confined by retrace on the host it lands on. Checked from the
//! hosts' side (the kernel's uid, its memory cgroup), with retrace's
//! gateway client driving the kernels: state across cells, interrupt, wall
//! timeout, restart, limits from the client's request, and nothing left.
//! Needs root.

use crate::common;
use common::eventually;

use std::time::Duration;

use common::confinement::{of_kernel_under, Confinement};
use common::enterprise_gateway::{EnterpriseGateway, Options};
use retrace::kernel::gateway::{Gateway, GatewayConfig, REQUEST_TIMEOUT};
use retrace::kernel::{AnyKernel, ExecOptions, KernelOptions};
use retrace::pyenv::ImageName;
use retrace::sandbox::{SandboxLimits, Verdict};
use retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

/// The kernelspec name the tests serve.
const KERNEL: &str = "retrace-fat";

/// A gateway on two hosts serving retrace's kernelspec for the fat image
/// with a 300 MiB memory limit (the directory holding it must outlive the
/// gateway), or `None` when the test is skipped for want of root (a
/// failure in strict runs).
fn start() -> Option<(EnterpriseGateway, tempfile::TempDir)> {
    if common::lacks_root() {
        return None;
    }
    let specs = tempfile::tempdir().unwrap();
    let dir = specs.path().to_str().unwrap();
    let ran = common::retrace([
        "image",
        "kernelspec",
        "fat",
        "--enterprise-gateway",
        "--dir",
        dir,
        "--name",
        KERNEL,
        "--",
        "--memory",
        "300M",
    ])
    .image(ImageName::Fat)
    .run();
    assert!(ran.success(), "{ran}");
    let mut options = Options::new(specs.path());
    options.default_kernel = Some(KERNEL.to_string());
    Some((EnterpriseGateway::start(options), specs))
}

/// The launcher of kernel `id` (the process EG started over SSH; its
/// environment names the kernel) and the host it runs on.
fn launcher_of(eg: &EnterpriseGateway, id: &str) -> (usize, u32) {
    let found = eg.kernel_processes(id);
    let launcher = found.iter().find(|(_, pid)| {
        std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split('\0').any(|a| a == "launch"))
    });
    match launcher {
        Some(&(host, pid)) => (host, pid as u32),
        None => panic!(
            "no `retrace launch` of kernel {id} on a host: {found:?}\n--- kernel log ---\n{}",
            eg.kernel_log(id)
        ),
    }
}

/// The confinement of kernel `id`, from its host.
fn confinement(eg: &EnterpriseGateway, id: &str) -> (usize, Confinement) {
    let (host, launcher) = launcher_of(eg, id);
    (host, of_kernel_under(launcher))
}

/// Creates a kernel through the REST API alone (no `env`: the kernelspec's
/// limits hold); its id. A refusal shows the gateway's and the kernel's logs.
fn create(eg: &EnterpriseGateway) -> String {
    let body = serde_json::json!({ "name": KERNEL }).to_string();
    let created = eg.request("POST", "/api/kernels", Some(&body));
    if created.status != 201 {
        let id = created
            .body
            .split("KernelID: '")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_default();
        panic!(
            "no kernel: {} {}\n--- kernel log ---\n{}\n--- gateway log ---\n{}",
            created.status,
            created.body,
            eg.kernel_log(id),
            eg.log_tail()
        );
    }
    created.json()["id"].as_str().unwrap().to_string()
}

async fn client(eg: &EnterpriseGateway, concurrency: usize) -> std::sync::Arc<Gateway> {
    Gateway::connect(GatewayConfig {
        url: eg.url.clone(),
        token: Some(eg.token.clone()),
        kernel: Some(KERNEL.to_string()),
        concurrency,
        request_timeout: REQUEST_TIMEOUT,
    })
    .await
    .expect("retrace accepts the gateway and its kernelspec")
}

/// A kernel asking for `memory` (sent as `KERNEL_MEMORY`).
async fn kernel(gateway: &std::sync::Arc<Gateway>, memory: u64) -> AnyKernel {
    let limits = SandboxLimits {
        memory_bytes: memory,
        ..SandboxLimits::default()
    };
    let options = KernelOptions::enforcing(&limits, false);
    gateway
        .start(&[], DEFAULT_MAX_TASK_FILE_BYTES, options)
        .await
        .map(AnyKernel::from)
        .expect("a kernel starts on a host")
}

fn exec(timeout_secs: u64) -> ExecOptions {
    ExecOptions {
        timeout: Duration::from_secs(timeout_secs),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernels_land_on_both_hosts_confined_by_retrace_there() {
    let Some((eg, _specs)) = start() else { return };
    let gateway = client(&eg, 2).await;
    // Without KERNEL_MEMORY from the client the kernelspec's flag holds.
    let plain = create(&eg);
    let mut asked = kernel(&gateway, 200 << 20).await;

    let (plain_host, plain_jail) = confinement(&eg, &plain);
    let (asked_host, asked_jail) = confinement(&eg, asked.id());
    assert_ne!(plain_host, asked_host, "round-robin over both hosts");
    for jail in [&plain_jail, &asked_jail] {
        assert_ne!(jail.uid, 0, "a kernel runs as a uid of its own: {jail:?}");
    }
    assert_ne!(plain_jail.uid, asked_jail.uid);
    assert_eq!(plain_jail.memory_limit, 300 << 20, "the kernelspec's limit");
    assert_eq!(
        asked_jail.memory_limit,
        200 << 20,
        "the client's KERNEL_MEMORY"
    );

    // The kernel has no network of its own: not even its host's address.
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('{}', 22), timeout=2)\n    print('reached')\n\
         except OSError as e:\n    print('refused', type(e).__name__)",
        eg.hosts().hosts()[asked_host].address
    );
    let seen = asked.execute(&code, &exec(30)).await;
    assert!(seen.stdout.starts_with("refused"), "{seen:?}");

    let id = asked.id().to_string();
    asked.shutdown().await;
    let gone = eg.request("DELETE", &format!("/api/kernels/{plain}"), None);
    assert_eq!(gone.status, 204, "{}", gone.body);
    for (id, jail) in [(&id, &asked_jail), (&plain, &plain_jail)] {
        assert!(
            eventually(30, || eg.kernel_processes(id).is_empty()),
            "kernel {id} still runs: {:?}",
            eg.kernel_processes(id)
        );
        assert!(
            eventually(10, || !jail.memory_cgroup.exists()),
            "kernel {id}'s cgroup is left: {}",
            jail.memory_cgroup.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_state_is_interrupted_and_restarts_through_the_gateway() {
    let Some((eg, _specs)) = start() else { return };
    let gateway = client(&eg, 1).await;
    let mut k = kernel(&gateway, 300 << 20).await;
    let first = k.execute("x = 41", &exec(30)).await;
    assert_eq!(first.verdict, Verdict::Ok, "{first:?}");
    let second = k.execute("print(x + 1)", &exec(30)).await;
    assert_eq!(second.stdout, "42\n", "state across cells: {second:?}");

    // The wall timeout interrupts through the gateway: EG's SIGINT reaches
    // the launcher's port, the launcher interrupts the kernel; state stays.
    let slow = k.execute("import time\ntime.sleep(60)", &exec(3)).await;
    assert_eq!(slow.verdict, Verdict::TimeoutWall, "{slow:?}");
    assert!(!slow.state_lost, "{slow:?}");
    let after = k.execute("print(x)", &exec(30)).await;
    assert_eq!(after.stdout, "41\n", "{after:?}");

    // A restart is a new launch (on the next host): a fresh, confined
    // kernel, its predecessor gone from its host.
    let (_, before) = launcher_of(&eg, k.id());
    k.restart().await.expect("the gateway restarts the kernel");
    assert!(
        eventually(30, || !std::path::Path::new(&format!("/proc/{before}"))
            .exists()),
        "the first launcher is still running"
    );
    let fresh = k.execute("print('x' in globals())", &exec(30)).await;
    assert_eq!(fresh.stdout, "False\n", "{fresh:?}");
    let (_, jail) = confinement(&eg, k.id());
    assert_ne!(jail.uid, 0);
    let id = k.id().to_string();
    k.shutdown().await;
    assert!(
        eventually(30, || eg.kernel_processes(&id).is_empty()),
        "the kernel still runs after shutdown"
    );
}

#[test]
fn nothing_is_left_after_the_gateway_and_its_hosts_go() {
    let Some((eg, specs)) = start() else { return };
    let mut jails = Vec::new();
    for _ in 0..2 {
        let id = create(&eg);
        jails.push(confinement(&eg, &id).1);
    }
    let footprint = eg.footprint();
    // Dropped with its kernels running: the hosts' processes are killed,
    // launchers included, and retrace's init takes each kernel with it.
    drop(eg);
    drop(specs);
    assert_eq!(footprint.remaining(), Vec::<String>::new());
    for jail in &jails {
        assert!(
            eventually(10, || !std::path::Path::new(&format!("/proc/{}", jail.pid))
                .exists()),
            "kernel process {} outlived its host",
            jail.pid
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_on_a_remote_host_is_classified_from_that_hosts_counters() {
    let Some((eg, _specs)) = start() else { return };
    let gateway = client(&eg, 1).await;
    let mut k = kernel(&gateway, 200 << 20).await;
    let before = k.execute("x = 1", &exec(30)).await;
    assert_eq!(before.verdict, Verdict::Ok, "{before:?}");
    // Bytes written: every page touched, past the 200 MiB the client asked.
    let oom = k.execute("y = b'x' * (1 << 30)", &exec(60)).await;
    assert_eq!(
        oom.verdict,
        Verdict::OomKilled,
        "the host's OOM kill, not the gateway's word: {oom:?}"
    );
    assert!(oom.state_lost, "{oom:?}");
    let enforced = &oom.enforcement.as_ref().expect("an enforcement").enforced;
    assert!(
        enforced.iter().any(|e| e == "memory"),
        "memory is enforced on the host: {enforced:?}"
    );
    // The gateway starts the kernel again (on the next host); it runs on.
    let after = k.execute("print('x' in globals())", &exec(60)).await;
    assert_eq!(after.stdout, "False\n", "{after:?}");
    k.shutdown().await;
}

/// The whole shipped corpus through the gateway where the kernelspec is
/// retrace's: the cases whose effect leaves the kernel run too, judged from
/// the hosts' readings, and those ending by an output flood or a forged
/// end, which the launcher stops or checks on its host; left out: a case
/// that reaches beyond its kernel (`local_only`) and the `timeout_cpu`
/// cases (see `remote_reason`).
#[test]
fn the_sandbox_check_passes_through_the_gateway_with_retraces_kernelspec() {
    let Some((eg, specs)) = start() else { return };
    let report = specs.path().join("check.json");
    let corpus = specs.path().join("corpus");
    let chosen = common::corpus_sample(&corpus);
    let check = common::retrace([
        "sandbox",
        "check",
        "--corpus",
        corpus.to_str().unwrap(),
        "--executor",
        "gateway",
        "--gateway-url",
        &eg.url,
        "--gateway-token",
        &eg.token,
        "--gateway-kernel",
        KERNEL,
        "--jobs",
        "2",
        "--json",
        report.to_str().unwrap(),
    ])
    .run();
    assert_eq!(check.code, 0, "{check}");
    let text = &check.stdout;
    let report = json_file(&report);
    let results = report["results"].as_array().unwrap();
    let skipped = report["not_applicable"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ran = |prefix: &str| {
        results
            .iter()
            .filter(|r| r["id"].as_str().unwrap().starts_with(prefix))
            .count()
    };
    // Memory, escape, network, disk and crash cases leave the kernel's own
    // process: they run only because the host reports what happened.
    for category in ["mem_", "esc_", "net_", "disk_", "crash_"] {
        assert!(ran(category) > 0, "no {category} case ran: {skipped:?}");
    }
    for category in ["cpu_", "out_", "jp_forged", "proc_"] {
        assert!(ran(category) > 0, "no {category} case ran: {skipped:?}");
    }
    for case in &skipped {
        let reason = case["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("local only"), "{case}");
    }
    assert_eq!(
        results.len() + skipped.len(),
        chosen,
        "every chosen case ran or was left out: {skipped:?}"
    );
    assert!(
        results.len() * 10 >= chosen * 9,
        "{} ran, {} left out: {skipped:?}",
        results.len(),
        skipped.len()
    );
    assert_eq!(report["summary"]["failed"], 0, "{text}");
}

/// A suite of `tasks` tasks (`t<i>`: the answer is i) and a replay model
/// whose code holds each kernel busy 1.5 s before answering, in `dir`:
/// the `--suite` and `--model` of a run whose kernels are mostly busy.
fn slow_suite(dir: &std::path::Path, tasks: usize) -> (String, String) {
    let (mut questions, mut replies) = (String::new(), String::new());
    for i in 0..tasks {
        let id = format!("t{i}");
        let task = serde_json::json!({
            "id": id, "question": format!("What is {i} plus zero?"),
            "expected": {"type": "number", "value": i},
        });
        let code = format!("```python\nimport time\ntime.sleep(1.5)\nanswer = {i}\n```");
        let reply = serde_json::json!({"task_id": id, "round": 0, "reply": code});
        questions += &format!("{task}\n");
        replies += &format!("{reply}\n");
    }
    let (suite, model) = (dir.join("slow.jsonl"), dir.join("replies.jsonl"));
    std::fs::write(&suite, questions).unwrap();
    std::fs::write(&model, replies).unwrap();
    (
        suite.display().to_string(),
        format!("replay:{}", model.display()),
    )
}

fn json_file(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The kernels each host started, as run.json records them.
fn kernels_by_host(out: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let config = json_file(&out.join("run.json"));
    serde_json::from_value(config["provenance"]["executor"]["hosts"].clone())
        .unwrap_or_else(|e| panic!("no kernels by host in run.json: {e}\n{config:#}"))
}

/// A host lost mid-run (its sshd and every process on it killed): the
/// tasks whose kernels were there end as infrastructure errors naming the
/// host, never as the kernel's own exit; the run goes on on the other
/// host; `--resume` redoes exactly those tasks there. run.json and the
/// report count the kernels each host started.
#[test]
fn a_host_lost_mid_run_becomes_infrastructure_errors_that_resume_redoes() {
    const TASKS: usize = 24;
    let Some((mut eg, specs)) = start() else {
        return;
    };
    let (suite, model) = slow_suite(specs.path(), TASKS);
    let out = specs.path().join("run");
    let session = {
        let args = [
            "run",
            "--suite",
            &suite,
            "--model",
            &model,
            "--rounds",
            "1",
            "--concurrency",
            "4",
            "--executor",
            "gateway",
            "--gateway-kernel",
            KERNEL,
            "--gateway-url",
            &eg.url,
            "--gateway-token",
            &eg.token,
            "--out",
            out.to_str().unwrap(),
        ]
        .map(str::to_string);
        std::thread::spawn(move || common::retrace(args).run())
    };
    let journal = out.join("results.jsonl");
    let lines = || {
        std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    assert!(
        eventually(300, || lines() >= 6 || session.is_finished()),
        "the run did not get going\n--- gateway log ---\n{}",
        eg.log_tail()
    );
    let dead = 0;
    // Killed while one of its kernels runs a cell (each sleeps 1.5 s): a
    // host lost between two tasks loses none.
    assert!(
        eventually(60, || eg.kernels_sleeping_on(dead) > 0
            || session.is_finished()),
        "no kernel ever ran a cell on host {dead}"
    );
    assert!(lines() < TASKS, "the run ended before the host was lost");
    let dead_address = eg.hosts().hosts()[dead].address.to_string();
    eg.kill_host(dead);
    let ran = session.join().unwrap();

    // Lost tasks are the infrastructure's: exit 3, and their records say
    // which host went.
    assert_eq!(ran.code, 3, "{ran}");
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lost: std::collections::BTreeSet<&str> = records
        .iter()
        .filter(|r| !r["infra_error"].is_null())
        .map(|r| r["task_id"].as_str().unwrap())
        .collect();
    let host_named = format!("lost with its host {dead_address}");
    assert!(
        records.iter().any(|r| r["infra_error"]
            .as_str()
            .is_some_and(|e| e.contains(&host_named))),
        "no task says it was lost with host {dead_address}: {ran}"
    );
    let kernel_exits: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["outcome"]["verdict"] == "kernel_exit")
        .collect();
    assert!(
        kernel_exits.is_empty(),
        "the host's death was blamed on the kernels: {kernel_exits:#?}"
    );
    let before = kernels_by_host(&out);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.contains_key(&dead_address), "{before:?}");

    // Resumed: exactly the lost tasks run again, all on the live host.
    let resumed = common::retrace(["run", "--resume", out.to_str().unwrap()])
        .env("JUPYTER_GATEWAY_AUTH_TOKEN", &eg.token)
        .run();
    assert_eq!(resumed.code, 0, "{resumed}");
    let summary = json_file(&out.join("summary.json"));
    assert_eq!(summary["infra_error_rate"]["successes"], 0, "{summary:#}");
    assert_eq!(summary["tasks"], TASKS as u64);
    assert_eq!(summary["accuracy_by_round"][0]["successes"], TASKS as u64);
    let after = kernels_by_host(&out);
    assert_eq!(after[&dead_address], before[&dead_address], "{after:?}");
    let (live, was) = before
        .iter()
        .find(|(host, _)| **host != dead_address)
        .unwrap();
    assert_eq!(
        after[live],
        was + lost.len() as u64,
        "one new kernel per lost task, all on the live host: {after:?}"
    );
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    let counted = format!("{live} {}", after[live]);
    assert!(
        report.contains(&counted),
        "no `{counted}` (kernels by host) in the report"
    );
}
