//! `retrace exec` as scripts use it: JSON outcomes and exit codes.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use retrace::pyenv::ImageName;

fn retrace(args: &[&str], stdin: &str) -> (i32, String, String) {
    // Build the image through the shared helper so parallel tests don't race.
    common::image(ImageName::Slim);
    let mut child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_has_one_outcome_per_cell() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().to_string_lossy().to_string();
    let src = "x = 2\nprint('hi')\n# %%\nx * 21\n# %%\nundefined_name\n";
    let (code, stdout, stderr) = retrace(
        &[
            "exec",
            "--image",
            "slim",
            "--json",
            "--artifacts",
            &art,
            "-",
        ],
        src,
    );
    assert_eq!(code, 1, "a cell failed: {stderr}");
    let cells: serde_json::Value = serde_json::from_str(&stdout).expect("JSON array");
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for field in [
        "status",
        "stdout",
        "stderr",
        "results",
        "error",
        "artifacts",
        "answer",
        "truncated",
        "timings_ms",
        "verdict",
        "flags",
    ] {
        assert!(cells[0].get(field).is_some(), "missing {field}");
    }
    assert_eq!(cells[0]["status"], "ok");
    assert_eq!(cells[0]["stdout"], "hi\n");
    assert_eq!(cells[1]["answer"]["value"], "42");
    assert_eq!(cells[1]["answer"]["rule"], "last_result");
    assert_eq!(cells[2]["status"], "error");
    assert_eq!(cells[2]["error"]["ename"], "NameError");
    assert!(cells[2]["error"]["traceback"].as_array().unwrap().len() > 1);
}

#[test]
fn exit_codes() {
    if common::lacks_root() {
        return;
    }
    let (code, stdout, _) = retrace(&["exec", "--image", "slim", "-"], "print(6 * 7)\n");
    assert_eq!(code, 0);
    assert!(stdout.contains("42"), "{stdout}");
    let (code, _, stderr) = retrace(&["exec", "--image", "slim", "/nonexistent/file.py"], "");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/file.py"));
    let (code, _, _) = retrace(&["exec", "--bogus-flag", "-"], "");
    assert_eq!(code, 2);
}

/// Logs go to stderr only: stdout stays the JSON that scripts parse.
#[test]
fn logs_go_to_stderr_and_stdout_stays_clean() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Slim);
    let run = |env: Option<&str>, flag: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_retrace"));
        cmd.env_remove("RETRACE_LOG");
        if let Some(env) = env {
            cmd.env("RETRACE_LOG", env);
        }
        cmd.args(flag)
            .args(["exec", "--image", "slim", "--json", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"print('hi')\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let cells: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not only JSON ({e}):\n{stdout}"));
        assert_eq!(cells[0]["stdout"], "hi\n");
        assert!(!stdout.contains("kernel started"), "{stdout}");
        stderr
    };

    let debug = run(Some("retrace=debug"), None);
    assert!(
        debug.contains("INFO") && debug.contains("kernel started"),
        "{debug}"
    );
    assert!(debug.contains("DEBUG"), "{debug}");

    let verbose = run(None, Some("-v"));
    assert!(verbose.contains("kernel started"), "{verbose}");
    assert!(!verbose.contains("DEBUG"), "{verbose}");

    let quiet = run(None, None);
    assert!(!quiet.contains("kernel started"), "{quiet}");
}
