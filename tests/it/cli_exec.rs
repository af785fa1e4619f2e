//! `retrace exec` as scripts use it: JSON outcomes and exit codes.

use crate::common::{self, retrace, Ran};

use std::io::Write;
use std::process::{Command, Stdio};

use retrace::pyenv::ImageName;

#[test]
fn json_has_one_outcome_per_cell() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().to_string_lossy().to_string();
    let src = "x = 2\nprint('hi')\n# %%\nx * 21\n# %%\nundefined_name\n";
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace([
        "exec",
        "--image",
        "slim",
        "--json",
        "--artifacts",
        &art,
        "-",
    ])
    .stdin(src)
    .image(ImageName::Slim)
    .run();
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
    let Ran { code, stdout, .. } = retrace(["exec", "--image", "slim", "-"])
        .stdin("print(6 * 7)\n")
        .image(ImageName::Slim)
        .run();
    assert_eq!(code, 0);
    assert!(stdout.contains("42"), "{stdout}");
    let Ran { code, stderr, .. } = retrace(["exec", "--image", "slim", "/nonexistent/file.py"])
        .stdin("")
        .image(ImageName::Slim)
        .run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/file.py"));
    let Ran { code, .. } = retrace(["exec", "--bogus-flag", "-"])
        .stdin("")
        .image(ImageName::Slim)
        .run();
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

/// Terminal escapes printed by kernel code (OSC 52 clipboard, title, cursor
/// moves, CSI via C1) and invalid UTF-8 on fd 1 never reach the user's
/// terminal raw: no ESC, BEL, C1 or other control byte but `\n` and `\t`.
#[test]
fn exec_passes_no_terminal_escape_through() {
    let src = concat!(
        "import os, sys\n",
        "print('\\x1b]52;c;aGVsbG8=\\x07clip')\n",
        "print('\\x1b]0;owned\\x1b\\\\title')\n",
        "print('\\x1b[2J\\x1b[H\\x1b[31mred\\x9b1A\\r\\x00end')\n",
        "sys.stdout.flush()\n",
        "os.write(1, b'raw\\xff\\xfe\\x1b[6n\\n')\n",
        "sys.stderr.write('\\x1b]8;;http://x\\x1b\\\\link\\n')\n",
        "# %%\n",
        "raise ValueError('\\x1b[5mblink')\n",
        "# %%\n",
        "'\\x1b[1mresult'\n",
    );
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace(["exec", "--image", "slim", "-"])
        .stdin(src)
        .image(ImageName::Slim)
        .run();
    assert_eq!(code, 1, "the second cell fails: {stderr}");
    let bad: Vec<char> = stdout
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(bad.is_empty(), "control characters {bad:?} in:\n{stdout}");
    // The text around the escapes is still shown.
    for shown in [
        "clip",
        "title",
        "red",
        "end",
        "ValueError",
        "blink",
        "result",
    ] {
        assert!(stdout.contains(shown), "{shown} missing from:\n{stdout}");
    }
}

/// `retrace … | head`: a reader that has gone ends retrace quietly, the way
/// other Unix tools end (SIGPIPE), never with a panic.
#[test]
fn closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    // Closed before the child starts: its first write meets EPIPE.
    drop(read_end);
    let out = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(["tasks", "list", "math"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "not quiet: {stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

/// `--json` gives each artifact a `path` that opens from where the command
/// ran (here a relative `--artifacts` under the command's directory), with
/// the file name the artifact was written under.
#[test]
fn json_artifact_paths_open_from_the_working_directory() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Slim);
    let cwd = tempfile::tempdir().unwrap();
    let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="2" height="2"/>"#;
    let src = format!("from IPython.display import SVG, display\ndisplay(SVG('{svg}'))\n");
    let args = [
        "exec",
        "--image",
        "slim",
        "--json",
        "--artifacts",
        "out/plots",
        "-",
    ];
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace(args).stdin(&src).cwd(cwd.path()).run();
    assert_eq!(code, 0, "{stderr}");
    let cells: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let arts = cells[0]["artifacts"].as_array().unwrap();
    assert_eq!(arts.len(), 1, "{cells}");
    let path = std::path::Path::new(arts[0]["path"].as_str().unwrap());
    assert_eq!(path, std::path::Path::new("out/plots/cell1-000.svg"));
    // IPython re-serialises the SVG: its element, not its exact text.
    let written = std::fs::read_to_string(cwd.path().join(path)).unwrap();
    assert!(written.starts_with("<svg"), "{written}");
}

/// A descriptor left open by whoever started retrace (a shell's, a CI
/// runner's) never reaches the kernel, cold or forked from a zygote.
// dup2(2) and close(2) on raw descriptor numbers have no safe wrapper.
#[allow(unsafe_code)]
#[test]
fn descriptors_of_the_caller_do_not_reach_the_kernel() {
    use std::os::fd::AsRawFd;
    if common::lacks_root() {
        return;
    }
    const LEAKED: i32 = 77;
    let file = std::fs::File::open("/etc/hostname").unwrap();
    // dup2 leaves the copy without close-on-exec: every child inherits it.
    // SAFETY: LEAKED is a free descriptor number this test owns until the end.
    assert_eq!(unsafe { libc::dup2(file.as_raw_fd(), LEAKED) }, LEAKED);
    let cell = format!(
        "import os\ntry:\n    os.fstat({LEAKED})\n    print('inherited')\nexcept OSError:\n    print('absent')\n"
    );
    for start in ["cold", "zygote"] {
        let Ran {
            code,
            stdout,
            stderr,
            ..
        } = retrace(["exec", "--image", "slim", "--kernel-start", start, "-"])
            .stdin(&cell)
            .image(ImageName::Slim)
            .run();
        assert_eq!(code, 0, "{start}: {stderr}");
        assert!(stdout.contains("absent"), "{start}: {stdout}");
    }
    // SAFETY: closing the descriptor this test made.
    unsafe { libc::close(LEAKED) };
}

#[test]
fn a_cell_over_the_code_bound_is_refused_and_the_next_cell_runs() {
    // The bound is the kernel session's: `retrace exec` refuses what a run
    // refuses, and the kernel keeps running the cells after it.
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().to_string_lossy().to_string();
    let big = format!("print('ran')\n{}\n", "#".repeat(1 << 20));
    let src = format!("{big}# %%\nprint('after')\n");
    let ran = retrace(["exec", "--image", "slim", "--artifacts", &art, "-"])
        .stdin(&src)
        .image(ImageName::Slim)
        .run();
    assert_eq!(ran.code, 1, "{ran}");
    assert!(
        ran.stdout.starts_with("── cell 1 ── code_too_large"),
        "{}",
        ran.stdout
    );
    let refused = format!(
        "not run: the cell is {} bytes, over the limit of 1048576 bytes",
        big.len()
    );
    assert!(ran.stdout.contains(&refused), "{}", ran.stdout);
    assert!(!ran.stdout.contains("ran\n"), "{}", ran.stdout);
    assert!(ran.stdout.contains("after\n"), "{}", ran.stdout);
}
