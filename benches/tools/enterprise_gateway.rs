//! Runs a command against a real Jupyter Enterprise Gateway serving
//! retrace's fat image through retrace's own launcher, on two hosts made of
//! network namespaces reached over SSH: the test fixture
//! (`tests/common/enterprise_gateway.rs`), so the benchmark and the tests
//! share one setup. `benches/peer/gateway.sh --enterprise` uses it:
//!
//! ```text
//! cargo bench --bench enterprise_gateway -- [--hosts N] CMD ARGS...
//! ```
//!
//! CMD runs with `JUPYTER_GATEWAY_URL`, `JUPYTER_GATEWAY_AUTH_TOKEN` and
//! `RETRACE_GATEWAY_KERNEL` (`retrace-fat`) set; then the gateway, its
//! hosts and every kernel go. Exits with CMD's status. Needs root.

#[path = "../../tests/common/mod.rs"]
#[allow(unused_imports)]
mod common;

use std::process::Command;

use common::enterprise_gateway::{EnterpriseGateway, Options};
use retrace::pyenv::ImageName;

/// The kernelspec the gateway serves.
const KERNEL: &str = "retrace-fat";

fn main() {
    // `cargo bench` passes `--bench` to every benchmark binary.
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut hosts = 2;
    if args.first().map(String::as_str) == Some("--hosts") && args.len() > 1 {
        hosts = args[1].parse().expect("--hosts takes a number");
        args.drain(..2);
    }
    let Some((program, rest)) = args.split_first() else {
        eprintln!("usage: cargo bench --bench enterprise_gateway -- [--hosts N] CMD ARGS...");
        std::process::exit(2);
    };
    let specs = tempfile::tempdir().expect("a temporary directory");
    let dir = specs.path().to_str().expect("a UTF-8 path");
    let args = ["image", "kernelspec", "fat", "--enterprise-gateway"];
    let written = common::retrace(args.iter().chain(&["--dir", dir, "--name", KERNEL]))
        .image(ImageName::Fat)
        .run();
    assert!(written.success(), "{written}");
    let mut options = Options::new(specs.path());
    options.hosts = hosts;
    options.default_kernel = Some(KERNEL.to_string());
    let gateway = EnterpriseGateway::start(options);
    eprintln!(
        "== Enterprise Gateway at {} with {hosts} hosts over SSH, kernelspec {KERNEL}",
        gateway.url
    );
    let status = Command::new(program)
        .args(rest)
        .env("JUPYTER_GATEWAY_URL", &gateway.url)
        .env("JUPYTER_GATEWAY_AUTH_TOKEN", &gateway.token)
        .env("RETRACE_GATEWAY_KERNEL", KERNEL)
        .status()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    drop(gateway);
    std::process::exit(status.code().unwrap_or(1));
}
