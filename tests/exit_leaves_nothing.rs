//! When a retrace command exits, nothing of it is left running or waiting
//! to be reaped. This test process makes itself a child subreaper, so any
//! process retrace leaves behind (an orphan, or a zombie nobody reaped)
//! becomes its child and is seen. One test per binary: the subreaper flag
//! is process-wide.
//!
//! A separate test binary, not a module of `tests/it`: as a subreaper this
//! process would adopt what other tests leave behind, and they would count.

mod common;

use retrace::pyenv::ImageName;

/// Processes whose parent is this test process, with their state.
fn our_children() -> Vec<(i32, String)> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if fields.get(1) == Some(&me.as_str()) {
            found.push((pid, stat[..close + 1].to_string() + " " + fields[0]));
        }
    }
    found
}

fn exec(file: &str, extra: &[&str]) -> (i32, String) {
    let args: Vec<&str> = ["exec", "--image", "slim"]
        .into_iter()
        .chain(extra.iter().copied())
        .chain(["-"])
        .collect();
    let common::Ran {
        code,
        stdout,
        stderr,
        ..
    } = common::retrace(&args).stdin(file).run();
    (code, stdout + &stderr)
}

#[test]
fn exec_leaves_no_process_behind() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Slim);
    nix::sys::prctl::set_child_subreaper(true).expect("PR_SET_CHILD_SUBREAPER");
    assert!(our_children().is_empty(), "{:?}", our_children());

    // A kernel that leaves children of its own: a plain child, a daemon
    // (double fork, new session), then ends normally.
    let spawner = "import subprocess, os\n\
                   subprocess.Popen(['sleep', '1000'])\n\
                   if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        import time; time.sleep(1000)\n    os._exit(0)\n\
                   print('spawned')\n";
    let (code, out) = exec(spawner, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("spawned"), "{out}");
    let left = our_children();
    assert!(left.is_empty(), "left behind after a normal exit: {left:?}");

    // A kernel killed by its wall limit, with the same children around.
    let killed = format!("{spawner}# %%\nwhile True:\n    pass\n");
    let (code, out) = exec(&killed, &["--timeout", "2s"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("timeout_wall"), "{out}");
    let left = our_children();
    assert!(left.is_empty(), "left behind after a kill: {left:?}");

    // A kernel forked from a zygote: the zygote and its helpers end too.
    let (code, out) = exec(spawner, &["--kernel-start", "zygote", "-v"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("spawned"), "{out}");
    assert!(!out.contains("starting cold"), "the zygote served: {out}");
    let left = our_children();
    assert!(left.is_empty(), "left behind by a zygote start: {left:?}");
}
