//! Names from a dataset in the places they end up: task ids as file names
//! (class 8), in the Markdown and HTML reports (class 10) and on the
//! terminal (class 11). The ids are the ones a hostile or careless
//! benchmark has: `a/b` beside `a_b`, `..`, an HTML element, backticks,
//! terminal escapes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use retrace::pyenv::ImageName;

use super::{files_under, run_case, write_suite};
use crate::common::{self, retrace, Ran};

/// Ids that share a file, climb out of a folder, or are markup or escapes.
fn ids() -> Vec<String> {
    [
        "a/b",
        "a_b",
        "..",
        ".",
        "<img src=x onerror=\"document.body.dataset.pwned=1\">",
        TICK,
        ESCAPES,
    ]
    .map(String::from)
    .into_iter()
    // Longer than a file name may be.
    .chain(["L".repeat(300)])
    .collect()
}

/// The id whose task raises [`CLASS`].
const TICK: &str = "`tick`";

/// An id that would set the terminal's title, return to the line's start,
/// clear the screen and reverse what follows.
const ESCAPES: &str = "esc\u{1b}]0;pwned\u{7}\r\u{1b}[2Jx\u{202e}y";

/// An exception class named like an element that would run script.
const CLASS: &str = "<script>document.title='pwned'</script>";

/// A record `--skip-invalid` leaves out (no `expected`), named to rewrite
/// the terminal and to break Markdown.
const SKIPPED: &str =
    "skip\u{1b}]0;pwned\u{7}\r`tick`<img src=x onerror=\"document.body.dataset.pwned=1\">";

/// Task `i`'s reference: shows an SVG that names `i`, then answers (or
/// raises [`CLASS`] when `raises`).
fn reference(i: usize, raises: bool) -> String {
    let end = if raises {
        format!("raise type({CLASS:?}, (Exception,), {{}})('<b>boom</b>')\n")
    } else {
        "answer = 42\n".into()
    };
    format!(
        "from IPython.display import SVG, display\n\
         display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\">\
         <desc>MARK-{i}</desc></svg>'))\n{end}"
    )
}

/// The suite: one task per id of [`ids`] (the backtick one raises), and the
/// skipped record.
fn suite(dir: &Path) -> PathBuf {
    let mut lines: Vec<Value> = ids()
        .iter()
        .enumerate()
        .map(|(i, id)| {
            json!({
                "id": id,
                "question": format!("What is 6 * 7? (task {i})"),
                "expected": {"type": "number", "value": 42.0},
                "reference": reference(i, id == TICK),
            })
        })
        .collect();
    lines.push(json!({"id": SKIPPED, "question": "?"}));
    write_suite(dir, "tasks.jsonl", &lines)
}

/// An oracle run of [`suite`] into `<dir>/run`.
fn oracle_run(case: &str, dir: &Path) -> (PathBuf, Ran) {
    let suite = suite(dir);
    let out = dir.join("run");
    let ran = run_case(
        case,
        retrace([
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--model",
            "oracle",
            "--rounds",
            "1",
            "--skip-invalid",
            "--out",
            out.to_str().unwrap(),
        ])
        .image(ImageName::Fat),
    );
    assert!(ran.success(), "{ran}");
    (out, ran)
}

/// No byte a terminal acts on: ESC, BEL, CR, C1 CSI, a bidi override.
fn assert_no_terminal_controls(what: &str, text: &str) {
    for (name, bytes) in [
        ("ESC", &b"\x1b"[..]),
        ("BEL", b"\x07"),
        ("CR", b"\x0d"),
        ("CSI", "\u{9b}".as_bytes()),
        ("RLO", "\u{202e}".as_bytes()),
    ] {
        assert!(
            !text.as_bytes().windows(bytes.len()).any(|w| w == bytes),
            "raw {name} on {what}:\n{text:?}"
        );
    }
}

#[test]
fn task_ids_as_file_names_never_share_or_leave_their_folder() {
    if common::lacks_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (out, _) = oracle_run("names/task_ids_as_file_names", tmp.path());

    // Nothing beside the suite and the run directory.
    let beside: BTreeSet<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, BTreeSet::from(["run".into(), "tasks.jsonl".into()]));

    // One directory per task, named in the index, each holding its own image.
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("artifacts/index.json")).unwrap())
            .unwrap();
    let ids = ids();
    assert_eq!(index.len(), ids.len(), "{index:#?}");
    let mut dirs = BTreeSet::new();
    for (i, id) in ids.iter().enumerate() {
        let entry = index
            .iter()
            .find(|e| e["task"] == id.as_str())
            .unwrap_or_else(|| panic!("{id:?} not in the index: {index:#?}"));
        let dir = Path::new(entry["dir"].as_str().unwrap());
        let parts: Vec<_> = dir.components().collect();
        assert_eq!(parts.len(), 2, "{dir:?}");
        assert!(dir.starts_with("artifacts"), "{dir:?}");
        assert!(
            matches!(parts[1], std::path::Component::Normal(_)),
            "{dir:?}"
        );
        assert!(
            dir.to_string_lossy().len() <= "artifacts/".len() + 80,
            "{dir:?}"
        );
        assert!(dirs.insert(dir.to_path_buf()), "{dir:?} is shared");
        let svg = std::fs::read_to_string(out.join(dir).join("r0-000.svg"))
            .unwrap_or_else(|e| panic!("{id:?}: {dir:?}: {e}"));
        assert!(
            svg.contains(&format!("MARK-{i}<")),
            "{id:?} shows another's image: {svg}"
        );
    }
    // Plain ids keep the directory they always had.
    assert!(dirs.contains(Path::new("artifacts/a_b")), "{dirs:?}");

    // Every file of the run is a report, a plot, the index or a task's image.
    for f in files_under(&out) {
        let rel = f.strip_prefix(&out).unwrap();
        let top = rel.components().count() == 1;
        let plot = rel.starts_with("plots");
        let image = dirs.iter().any(|d| rel.parent() == Some(d.as_path()));
        assert!(
            top && !rel.to_string_lossy().ends_with(".svg")
                || plot
                || image
                || rel == Path::new("artifacts/index.json"),
            "{rel:?} is not where the run keeps anything"
        );
    }
}

#[test]
fn reports_show_ids_and_exception_names_as_text() {
    if common::lacks_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (out, ran) = oracle_run("names/markup_in_reports", tmp.path());

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    // The skipped record's id in an intact code span (the only place the
    // `<img` of it may be), and the raised class as text in the tables.
    // (A line break in a code span is a space.)
    let span =
        "``skip\\x1b]0;pwned\\x07 `tick`<img src=x onerror=\"document.body.dataset.pwned=1\">``";
    assert!(md.contains(span), "{md}");
    let outside = md.replace(span, "");
    for raw in [
        "<img", "<script", "</script", "<b>", "\u{1b}", "\u{7}", "\r",
    ] {
        assert!(!outside.contains(raw), "raw {raw:?} in report.md:\n{md}");
    }
    assert!(
        md.contains("| &lt;script&gt;document.title='pwned'&lt;/script&gt; | 1 |"),
        "{md}"
    );

    // In a browser: the task list and the raising task opened run nothing.
    let page = out.join("report.html");
    let all = crate::report_html::load(&page, "");
    all.assert_clean();
    assert_eq!(all.rows(), ids().len());
    let opened = crate::report_html::load(&page, "#open=%60tick%60");
    opened.assert_clean();
    assert!(opened.rounds() > 0, "the task did not open");
    assert!(opened
        .dom
        .contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"));
    for load in [&all, &opened] {
        assert!(!load.dom.contains("data-pwned"), "script ran");
        assert!(!load.dom.contains("<title>pwned"), "script ran");
        assert_eq!(load.dom.matches("<script").count(), 1);
        assert!(
            !load.markup().contains("<img src=\"x\""),
            "an injected element"
        );
    }
    // The run's own stderr listed the skipped record (class 11's rule).
    assert_no_terminal_controls("stderr", &ran.stderr);
}

#[test]
fn ids_on_the_terminal_show_their_control_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = suite(tmp.path());
    let listed = run_case(
        "names/terminal_list_and_skipped",
        retrace(["tasks", "list", suite.to_str().unwrap(), "--skip-invalid"]),
    );
    assert!(listed.success(), "{listed}");
    assert_no_terminal_controls("stdout", &listed.stdout);
    assert_no_terminal_controls("stderr", &listed.stderr);
    assert!(
        listed
            .stdout
            .contains("esc\\x1b]0;pwned\\x07\\x0d\\x1b[2Jx\\u{202e}y"),
        "{listed}"
    );
    assert!(listed.stderr.contains("skipped "), "{listed}");
    assert!(
        listed.stderr.contains("skip\\x1b]0;pwned\\x07\\x0d"),
        "{listed}"
    );

    // A duplicate id stops the load; the error names it, escaped.
    let twice = write_suite(
        tmp.path(),
        "twice.jsonl",
        &[0, 1].map(|_| {
            json!({
                "id": ESCAPES,
                "question": "?",
                "expected": {"type": "number", "value": 1.0},
            })
        }),
    );
    let refused = run_case(
        "names/terminal_duplicate_id",
        retrace(["tasks", "list", twice.to_str().unwrap()]),
    );
    assert_eq!(refused.code, 2, "{refused}");
    assert!(refused.stderr.contains("duplicate task id"), "{refused}");
    assert_no_terminal_controls("stderr", &refused.stderr);
}
