//! The real Enterprise Gateway fixture (`common::enterprise_gateway`) with
//! the gateway's own stock `python_distributed` kernelspec: it serves the
//! test's kernelspec behind its token, spreads kernels over its two SSH
//! hosts (proved on the hosts' side, by the network namespace each kernel
//! process runs in), runs a cell through retrace's gateway client, deletes
//! kernels, survives a host's death, and leaves nothing on the machine.
//! Needs root (network namespaces, sshd).

use crate::common;
use common::eventually;

use std::time::Duration;

use common::enterprise_gateway::{EnterpriseGateway, Options};
use retrace::kernel::gateway::{Gateway, GatewayConfig, REQUEST_TIMEOUT};
use retrace::kernel::{ExecOptions, KernelOptions};
use retrace::sandbox::{SandboxLimits, Verdict};
use retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;

/// The kernelspec name the tests serve.
const KERNEL: &str = "eg-stock";

/// A gateway on two hosts serving the stock kernelspec (the directory
/// holding it must outlive the gateway), or `None` when the test is
/// skipped for want of root (a failure in strict runs).
fn start() -> Option<(EnterpriseGateway, tempfile::TempDir)> {
    if common::lacks_root() {
        return None;
    }
    let specs = tempfile::tempdir().unwrap();
    EnterpriseGateway::stock_kernelspec(specs.path(), KERNEL);
    let mut options = Options::new(specs.path());
    options.default_kernel = Some(KERNEL.to_string());
    Some((EnterpriseGateway::start(options), specs))
}

/// Creates a kernel of [`KERNEL`]; its id.
fn create(eg: &EnterpriseGateway) -> String {
    let body = serde_json::json!({ "name": KERNEL }).to_string();
    let created = eg.request("POST", "/api/kernels", Some(&body));
    assert_eq!(
        created.status,
        201,
        "{}\n--- gateway log ---\n{}",
        created.body,
        eg.log_tail()
    );
    created.json()["id"].as_str().unwrap().to_string()
}

/// The host kernel `id` runs on, from its processes on the hosts' side.
fn host_of(eg: &EnterpriseGateway, id: &str) -> usize {
    eg.host_of_kernel(id).unwrap_or_else(|| {
        panic!(
            "kernel {id} runs on no single host: processes {:?}\n--- kernel log ---\n{}",
            eg.kernel_processes(id),
            eg.kernel_log(id)
        )
    })
}

#[test]
fn serves_the_test_kernelspec_behind_its_token() {
    let Some((eg, _specs)) = start() else { return };
    let specs = eg.request("GET", "/api/kernelspecs", None);
    assert_eq!(specs.status, 200, "{}", specs.body);
    let specs = specs.json();
    assert_eq!(specs["default"], KERNEL);
    let names: Vec<&String> = specs["kernelspecs"].as_object().unwrap().keys().collect();
    assert_eq!(names, [KERNEL], "only the test's kernelspec is served");
    let spec = &specs["kernelspecs"][KERNEL]["spec"];
    assert_eq!(
        spec["metadata"]["process_proxy"]["class_name"],
        "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy"
    );
    let python = EnterpriseGateway::venv().join("bin").join("python");
    assert_eq!(spec["argv"][0], python.to_str().unwrap());
    assert!(spec["argv"][1]
        .as_str()
        .unwrap()
        .ends_with("launch_ipykernel.py"));
    for authorization in [None, Some("token wrong")] {
        let r = eg.request_as("GET", "/api/kernelspecs", authorization, None);
        assert_eq!(r.status, 401, "{authorization:?}: {}", r.body);
    }
    let r = eg.request_as("POST", "/api/kernels", None, Some("{}"));
    assert_eq!(r.status, 401, "{}", r.body);
    for i in 0..eg.hosts().hosts().len() {
        let left = eg.hosts().processes(i);
        assert_eq!(left.len(), 1, "only the sshd runs on host {i}: {left:?}");
    }
}

#[test]
fn kernels_are_spread_round_robin_over_both_hosts_and_deleted() {
    let Some((eg, _specs)) = start() else { return };
    let ids: Vec<String> = (0..4).map(|_| create(&eg)).collect();
    let hosts: Vec<usize> = ids.iter().map(|id| host_of(&eg, id)).collect();
    // Round-robin: the hosts in turn, whichever comes first.
    assert_ne!(hosts[0], hosts[1], "{hosts:?}");
    assert_eq!(hosts, [hosts[0], hosts[1], hosts[0], hosts[1]]);
    for (id, host) in ids.iter().zip(&hosts) {
        let host = &eg.hosts().hosts()[*host];
        assert!(
            eg.kernel_log(id).contains("launch_ipykernel"),
            "the kernel's log on {} names its launcher:\n{}",
            host.name,
            eg.kernel_log(id)
        );
    }

    for id in &ids {
        let deleted = eg.request("DELETE", &format!("/api/kernels/{id}"), None);
        assert_eq!(deleted.status, 204, "{}", deleted.body);
        let gone = eg.request("GET", &format!("/api/kernels/{id}"), None);
        assert_eq!(gone.status, 404, "{}", gone.body);
    }
    assert_eq!(
        eg.request("GET", "/api/kernels", None).json(),
        serde_json::json!([])
    );
    for id in &ids {
        assert!(
            eventually(30, || eg.kernel_processes(id).is_empty()),
            "deleted kernel {id} still runs: {:?}",
            eg.kernel_processes(id)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_on_a_host_runs_cells_through_retraces_gateway_client() {
    let Some((eg, _specs)) = start() else { return };
    let gateway = Gateway::connect(GatewayConfig {
        url: eg.url.clone(),
        token: Some(eg.token.clone()),
        kernel: Some(KERNEL.to_string()),
        concurrency: 2,
        request_timeout: REQUEST_TIMEOUT,
    })
    .await
    .expect("retrace accepts the gateway and its kernelspec");
    let options = KernelOptions::enforcing(&SandboxLimits::default(), false);
    let mut kernel = gateway
        .start(&[], DEFAULT_MAX_TASK_FILE_BYTES, options)
        .await
        .expect("a kernel starts on a host");
    let host = host_of(&eg, kernel.id());
    let exec = ExecOptions {
        timeout: Duration::from_secs(60),
        ..Default::default()
    };
    let first = kernel.execute("x = 6 * 7\nprint(x)", &exec).await;
    assert_eq!(first.verdict, Verdict::Ok, "{:?}", first.error);
    assert_eq!(first.stdout.as_str(), "42\n");
    let second = kernel.execute("answer = x", &exec).await;
    assert_eq!(second.verdict, Verdict::Ok, "{:?}", second.error);
    assert_eq!(second.answer.as_ref().expect("an answer").value, "42");
    // The kernel's own view of its network agrees with the host side: it
    // has the host's address.
    let code = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.connect(('{}', 9))\nprint(s.getsockname()[0])",
        eg.hosts().bridge_address()
    );
    let seen = kernel.execute(&code, &exec).await;
    let address = eg.hosts().hosts()[host].address.to_string();
    assert_eq!(seen.stdout.as_str().trim(), address, "{:?}", seen.error);

    let id = kernel.id().to_string();
    kernel.shutdown().await;
    assert!(
        eventually(30, || eg.kernel_processes(&id).is_empty()),
        "the shut-down kernel still runs: {:?}",
        eg.kernel_processes(&id)
    );
}

#[test]
fn a_killed_host_loses_its_kernels_while_the_other_serves_on() {
    let Some((mut eg, _specs)) = start() else {
        return;
    };
    let first = create(&eg);
    let second = create(&eg);
    let (dead, alive) = (host_of(&eg, &first), host_of(&eg, &second));
    assert_ne!(dead, alive);

    eg.kill_host(dead);
    assert!(eg.hosts().processes(dead).is_empty());
    assert!(eg.kernel_processes(&first).is_empty());
    // With no client connected, the gateway's restarter shuts a dead
    // remote kernel down instead of restarting it (its poll finds the
    // launcher's port refused).
    assert!(
        eventually(60, || eg
            .request("GET", &format!("/api/kernels/{first}"), None)
            .status
            == 404),
        "the gateway still lists the dead host's kernel\n--- gateway log ---\n{}",
        eg.log_tail()
    );
    assert_eq!(host_of(&eg, &second), alive);
    let listed = eg.request("GET", "/api/kernels", None).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    // Round-robin does not skip a dead host: the next start goes to it
    // and fails (its sshd is gone); the one after lands on the live host.
    let body = serde_json::json!({ "name": KERNEL }).to_string();
    let refused = eg.request("POST", "/api/kernels", Some(&body));
    assert!(
        refused.status >= 400,
        "a kernel started on the dead host: {}",
        refused.body
    );
    let third = create(&eg);
    assert_eq!(host_of(&eg, &third), alive);
}

#[test]
fn dropping_the_fixture_leaves_nothing_on_the_machine() {
    let Some((eg, specs)) = start() else { return };
    let ids = [create(&eg), create(&eg)];
    let footprint = eg.footprint();
    assert_eq!(footprint.netns.len(), 2);
    assert_eq!(footprint.links.len(), 3, "a bridge and two veths");
    assert!(footprint.remaining().len() >= 2 + 3 + 2, "{footprint:?}");
    let kernels: Vec<i32> = ids
        .iter()
        .flat_map(|id| eg.kernel_processes(id))
        .map(|(_, pid)| pid)
        .collect();
    assert!(kernels.len() >= 2, "{kernels:?}");
    assert!(kernels
        .iter()
        .all(|pid| footprint.processes.iter().any(|p| p.pid == *pid)));
    drop(eg);
    let left = footprint.remaining();
    assert!(left.is_empty(), "left after drop: {left:#?}");
    assert!(
        specs.path().exists(),
        "the test's own directory is not the fixture's"
    );
}
