//! The real jupyter-kernel-gateway fixture (`common::gateway`): it serves
//! retrace's fat image behind its token, starts and deletes kernels, comes
//! back after a loss at the same address, and leaves nothing running.

use crate::common;
use common::eventually;

use common::gateway::Gateway;
use retrace::pyenv::ImageName;

#[test]
fn serves_the_fat_image_behind_its_token() {
    let gw = Gateway::start();
    let specs = gw.request("GET", "/api/kernelspecs", None);
    assert_eq!(specs.status, 200, "{}", specs.body);
    let specs = specs.json();
    assert_eq!(specs["default"], gw.kernel.as_str());
    let names: Vec<&String> = specs["kernelspecs"].as_object().unwrap().keys().collect();
    assert_eq!(names, [&gw.kernel], "only retrace's kernelspec is served");
    let spec = &specs["kernelspecs"][gw.kernel.as_str()]["spec"];
    let image = common::image(ImageName::Fat);
    assert_eq!(spec["argv"][0], image.python().to_str().unwrap());
    assert_eq!(spec["metadata"]["retrace"]["image"], "fat");
    assert_eq!(
        spec["metadata"]["retrace"]["image_hash"],
        image.lock_hash.as_str()
    );

    // The token also works as a query parameter; without it, or with
    // another, the API refuses.
    let query = format!("/api/kernelspecs?token={}", gw.token);
    assert_eq!(gw.request_as("GET", &query, None, None).status, 200);
    for authorization in [None, Some("token wrong"), Some("Bearer wrong")] {
        let r = gw.request_as("GET", "/api/kernelspecs", authorization, None);
        assert_eq!(r.status, 401, "{authorization:?}: {}", r.body);
    }
    let bearer = format!("Bearer {}", gw.token);
    let r = gw.request_as("GET", "/api/kernelspecs", Some(&bearer), None);
    assert_eq!(r.status, 401, "the gateway takes `token T`, not `Bearer T`");
    let r = gw.request_as("POST", "/api/kernels", None, Some("{}"));
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(gw.kernel_processes().is_empty());
}

#[test]
fn creates_and_deletes_a_kernel_of_the_image() {
    let gw = Gateway::start();
    let body = serde_json::json!({ "name": gw.kernel }).to_string();
    let created = gw.request("POST", "/api/kernels", Some(&body));
    assert_eq!(created.status, 201, "{}", created.body);
    let kernel = created.json();
    assert_eq!(kernel["name"], gw.kernel.as_str());
    let id = kernel["id"].as_str().unwrap().to_string();

    // A kernel process of the image, started by this gateway, named by
    // its connection file.
    let python = common::image(ImageName::Fat).python();
    let pids = gw.kernel_processes();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pids[0])).unwrap();
    let argv: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(argv[0], python.to_str().unwrap());
    assert!(argv.iter().any(|a| a.contains(&id)), "{argv:?}");

    let listed = gw.request("GET", "/api/kernels", None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json().as_array().unwrap().len(), 1);
    let one = gw.request("GET", &format!("/api/kernels/{id}"), None);
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["id"], id.as_str());

    let deleted = gw.request("DELETE", &format!("/api/kernels/{id}"), None);
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let gone = gw.request("GET", &format!("/api/kernels/{id}"), None);
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert_eq!(
        gw.request("GET", "/api/kernels", None).json(),
        serde_json::json!([])
    );
    assert!(
        eventually(30, || gw.kernel_processes().is_empty()),
        "the deleted kernel still runs: {:?}",
        gw.kernel_processes()
    );
}

#[test]
fn a_stopped_gateway_comes_back_at_the_same_address_without_its_kernels() {
    let mut gw = Gateway::start();
    let created = gw.request("POST", "/api/kernels", Some("{}"));
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        created.json()["name"],
        gw.kernel.as_str(),
        "the default kernel"
    );
    let (url, token) = (gw.url.clone(), gw.token.clone());

    gw.stop();
    assert!(gw.pid().is_none());
    assert!(gw.kernel_processes().is_empty());
    let address = url.trim_start_matches("http://");
    assert!(
        std::net::TcpStream::connect(address).is_err(),
        "a stopped gateway still accepts connections at {address}"
    );

    gw.start_again();
    assert_eq!(
        (gw.url.as_str(), gw.token.as_str()),
        (url.as_str(), token.as_str())
    );
    let lost = gw.request("GET", &format!("/api/kernels/{id}"), None);
    assert_eq!(lost.status, 404, "{}", lost.body);
    let again = gw.request("POST", "/api/kernels", Some("{}"));
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(gw.kernel_processes().len(), 1);
}

#[test]
fn dropping_the_gateway_leaves_nothing_running() {
    let gw = Gateway::start();
    for _ in 0..2 {
        let created = gw.request("POST", "/api/kernels", Some("{}"));
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let runtime = gw.runtime_dir();
    let pid = gw.pid().expect("the gateway runs");
    assert_eq!(gw.kernel_processes().len(), 2);
    drop(gw);
    assert!(
        common::processes_mentioning(&runtime.to_string_lossy()).is_empty(),
        "kernels left after drop"
    );
    // The pid was the fixture's child and is reaped: nothing with it, or a
    // newer process that reused it, but not the gateway.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        !String::from_utf8_lossy(&cmdline).contains("jupyter-kernelgateway"),
        "the gateway (pid {pid}) still runs"
    );
    assert!(!runtime.exists(), "its directories are removed");
}
