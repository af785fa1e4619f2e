//! Limits that refuse nonsense: every limit flag of every command that
//! takes them, at zero or below the floor a kernel needs, is a usage error
//! (exit 2) naming the flag and its minimum, before anything starts; so is
//! an empty draft model.

use std::process::Command;

/// (flag, a value below its floor, its minimum as the message says it).
const BELOW: [(&str, &str, &str); 12] = [
    ("--memory", "0", "128M"),
    ("--memory", "64M", "128M"),
    ("--pids", "0", "16"),
    ("--cpus", "0", "0.05"),
    ("--cpus", "-1", "0.05"),
    ("--timeout", "0", "100ms"),
    ("--timeout", "0s", "100ms"),
    ("--cpu-time", "0", "100ms"),
    ("--output-cap", "0", "1K"),
    ("--output-messages", "0", "10"),
    ("--disk", "0", "16M"),
    ("--disk", "1M", "16M"),
];

fn retrace(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(args)
        .env(
            "RETRACE_HOME",
            std::env::temp_dir().join("retrace-cli-limits-unused"),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr)
}

#[test]
fn a_limit_below_its_floor_is_a_usage_error_naming_the_flag() {
    for command in [
        vec!["exec", "-"],
        vec!["run", "--suite", "math", "--model", "oracle"],
        vec!["sandbox", "check"],
        vec!["tasks", "validate", "math"],
    ] {
        for (flag, value, minimum) in BELOW {
            let mut args = command.clone();
            let assigned = format!("{flag}={value}");
            args.push(&assigned);
            let (code, stderr) = retrace(&args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert!(stderr.contains(flag), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("minimum {minimum}")),
                "{args:?}: {stderr}"
            );
        }
    }
}

#[test]
fn a_limit_at_its_floor_is_accepted() {
    // `--help` after the flags: parsed, then nothing runs.
    let (code, stderr) = retrace(&[
        "exec",
        "--memory",
        "128M",
        "--pids",
        "16",
        "--cpus",
        "0.05",
        "--timeout",
        "100ms",
        "--cpu-time",
        "100ms",
        "--output-cap",
        "1K",
        "--output-messages",
        "10",
        "--disk",
        "16M",
        "--help",
    ]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn an_empty_draft_model_is_a_usage_error() {
    for args in [
        vec!["run", "--model", "oracle", "--model-draft", ""],
        vec!["model", "bench", "--draft", ""],
    ] {
        let (code, stderr) = retrace(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains("draft"), "{args:?}: {stderr}");
    }
}
