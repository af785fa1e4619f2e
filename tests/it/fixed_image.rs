//! Install lines in kernels of a fixed image (`fat`, `slim`, `exec`):
//! `%pip install`, `!pip install`, `pip3`, `python -m pip` are answered
//! with a notice that names the strategy that installs, instead of a raw
//! pip failing on the missing network; code that only mentions pip runs
//! as written; a failing cell's repair message carries the notice.

use crate::common::{self, retrace, Ran};

use retrace::pyenv::ImageName;

#[test]
fn exec_answers_install_lines_with_a_notice_and_leaves_strings_alone() {
    if common::lacks_root() {
        return;
    }
    let src = "%pip install -q tabulate\n\
               print('after')\n\
               # %%\n\
               s = 'pip install requests'  # pip install in a comment\n\
               print(s)\n\
               # %%\n\
               import numpy\n\
               !pip3 install numpy\n\
               !python -m pip install tabulate\n\
               import tabulate\n";
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace(["exec", "--image", "fat", "--json", "-"])
        .stdin(src)
        .image(ImageName::Fat)
        .run();
    assert_eq!(code, 1, "the last cell fails on its import: {stderr}");
    let cells: serde_json::Value = serde_json::from_str(&stdout).expect("JSON array");
    let cell = |i: usize, field: &str| cells[i][field].as_str().unwrap_or_default().to_string();

    let notice = cell(0, "stderr");
    assert!(
        notice.contains("`pip install -q tabulate` was not run"),
        "{notice}"
    );
    assert!(
        notice.contains("strategy `fat`") && notice.contains("`dynamic`"),
        "{notice}"
    );
    assert_eq!(cell(0, "stdout"), "after\n");
    assert_eq!(cells[0]["verdict"], "ok");

    // Only mentioned: run as written, no notice.
    assert_eq!(cell(1, "stdout"), "pip install requests\n");
    assert_eq!(cell(1, "stderr"), "");

    let last = cell(2, "stderr");
    assert!(last.contains("`pip3 install numpy` was not run"), "{last}");
    assert!(
        last.contains("`pip install tabulate` was not run"),
        "{last}"
    );
    assert_eq!(cells[2]["error"]["ename"], "ModuleNotFoundError");
    assert!(
        !last.to_lowercase().contains("network is unreachable") && !last.contains("pty"),
        "pip never ran: {last}"
    );
}

#[test]
fn a_fat_arms_repair_message_says_the_image_is_fixed() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (suite, model) = common::run::replayed_task(
        dir.path(),
        &[
            (
                0,
                "```python\n!pip install tabulate\nimport tabulate\nanswer = 42\n```",
            ),
            (1, "```python\nanswer = 6 * 7\n```"),
        ],
    );
    let out = dir.path().join("run");
    let Ran { code, stderr, .. } = retrace([
        "run",
        "--suite",
        &suite,
        "--model",
        &model,
        "--rounds",
        "1",
        "--out",
        &out.display().to_string(),
    ])
    .image(ImageName::Fat)
    .run();
    assert_eq!(code, 0, "{stderr}");
    let records: Vec<serde_json::Value> = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let r0 = &records[0];
    assert_eq!(
        r0["outcome"]["error"]["ename"], "ModuleNotFoundError",
        "{r0}"
    );
    let policy = r0["outcome"]["policy"].as_str().unwrap_or_default();
    assert!(
        policy.contains("`pip install tabulate` was not run"),
        "{r0}"
    );
    let repair = records[1]["prompt"].to_string();
    assert!(
        repair.contains("pip install tabulate` was not run"),
        "{repair}"
    );
    assert!(repair.contains("strategy `fat`"), "{repair}");
    assert_eq!(records[1]["correct"], true);
}
