//! `retrace doctor` on this host: every check reported, exit 0 when a
//! confined run can work, 1 with a fix when it cannot.

use crate::common;

use std::process::Command;

use common::host::{lacks, Need};
use serde_json::Value;

const CHECKS: [&str; 13] = [
    "root",
    "cgroups",
    "swap-accounting",
    "namespaces",
    "user-namespaces",
    "seccomp",
    "python",
    "venv",
    "compiler",
    "package-index",
    "disk",
    "images",
    "local-model",
];

fn doctor(cmd: &mut Command) -> (i32, Value) {
    let out = cmd.args(["doctor", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

fn check<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` check in {json:#}"))
}

#[test]
fn this_host_can_run_confined_kernels() {
    if lacks(&[Need::Root]) {
        return;
    }
    let (code, json) = doctor(&mut Command::new(env!("CARGO_BIN_EXE_retrace")));
    for name in CHECKS {
        let c = check(&json, name);
        assert!(
            ["ok", "info", "warn", "error"].contains(&c["status"].as_str().unwrap()),
            "{c}"
        );
        assert!(!c["detail"].as_str().unwrap().is_empty(), "{c}");
    }
    assert_eq!(json["checks"].as_array().unwrap().len(), CHECKS.len());
    for name in ["root", "cgroups", "namespaces", "seccomp", "python", "venv"] {
        assert_eq!(check(&json, name)["status"], "ok", "{json:#}");
    }
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["can_run"], true);
}

#[test]
fn without_python_it_fails_and_says_how_to_get_one() {
    let empty = tempfile::tempdir().unwrap();
    let (code, json) = doctor(
        Command::new(env!("CARGO_BIN_EXE_retrace"))
            .env("PATH", empty.path())
            .env("RETRACE_PYTHON", empty.path().join("no-such-python3")),
    );
    assert_eq!(code, 1, "{json:#}");
    assert_eq!(json["can_run"], false);
    let python = check(&json, "python");
    assert_eq!(python["status"], "error", "{python}");
    assert!(
        python["detail"]
            .as_str()
            .unwrap()
            .contains("RETRACE_PYTHON"),
        "{python}"
    );
    let fix = python["fix"].as_str().unwrap();
    assert!(
        fix.contains("apt-get install python3") && fix.contains("RETRACE_PYTHON"),
        "{fix}"
    );
    // What needs an interpreter is not checked rather than failed twice.
    assert_eq!(check(&json, "venv")["status"], "info");
    assert_eq!(check(&json, "package-index")["status"], "info");
    // No compiler on that PATH either: a warning, explained.
    let compiler = check(&json, "compiler");
    assert_ne!(compiler["status"], "ok", "{compiler}");
    assert!(
        compiler["detail"]
            .as_str()
            .unwrap()
            .contains("--model local"),
        "{compiler}"
    );
}
