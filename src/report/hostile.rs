//! Every document made from a run whose records carry markup: task ids,
//! exception names, a model name, skipped records and tags as a hostile
//! dataset, kernel or run directory would write them. Each format shows
//! them as text: no raw HTML, no broken code span or table row.

use std::path::Path;

use super::compare::{self, Judged, Side, Thresholds};
use super::testing::{config, in_arm, render, task, R};
use super::{html::HtmlExporter, markdown::MarkdownExporter};
use crate::record::{AttemptRecord, RunConfig, StopOn};
use crate::task::load::Skipped;

const IMG: &str = "<img src=x onerror=alert(1)>";
const SCRIPT: &str = "<script>alert(2)</script>";
const TICK: &str = "`tick`";
const IDS: [&str; 6] = [
    IMG,
    TICK,
    "a|b",
    "[l](javascript:alert(3))",
    "x\ny\u{1b}]0;t\u{7}",
    "ok",
];

/// Two arms over the hostile ids: every task right in `fat`, each hostile
/// one raising [`SCRIPT`] then wrong in `dynamic` (so they are flips).
fn hostile_run() -> (RunConfig, Vec<AttemptRecord>) {
    let (k, s) = (1, StopOn::Clean);
    let mut cfg = config(&IDS, k, s);
    cfg.spec.packages.strategies =
        vec![crate::pyenv::Strategy::Fat, crate::pyenv::Strategy::Dynamic];
    cfg.provenance.model = format!("openai:{IMG}`|");
    cfg.spec.tasks.skip_invalid = true;
    cfg.provenance.skipped = vec![Skipped {
        id: Some(format!("{TICK}{SCRIPT}")),
        file: format!("{IMG}.jsonl").into(),
        line: 3,
        reason: format!("duplicate task id `{TICK}|{IMG}`\nnext"),
    }];
    for id in IDS {
        cfg.provenance
            .task_tags
            .insert(id.into(), vec![SCRIPT.into(), "a|b".into()]);
    }
    let mut records = Vec::new();
    for id in IDS {
        records.extend(in_arm(task(id, &[R::Right], s, k), "fat"));
        let how: &[R] = if id == "ok" {
            &[R::Right]
        } else {
            &[R::Raised(SCRIPT), R::Wrong]
        };
        records.extend(in_arm(task(id, how, s, k), "dynamic"));
    }
    (cfg, records)
}

/// The unescaped `|` of a Markdown line (a table splits its row on them).
fn pipes(line: &str) -> usize {
    let mut n = 0;
    let mut backslashes = 0;
    for c in line.chars() {
        if c == '|' && backslashes % 2 == 0 {
            n += 1;
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
    }
    n
}

/// A Markdown line without its code spans (whose text is never markup).
fn outside_code(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let escaped = i > 0 && b[i - 1] == b'\\';
        if b[i] != b'`' || escaped {
            out.push(b[i] as char);
            i += 1;
            continue;
        }
        let run = b[i..].iter().take_while(|&&c| c == b'`').count();
        let fence = "`".repeat(run);
        let rest = &line[i + run..];
        // The closing fence: `run` backticks with none right after.
        let close = (0..rest.len()).find(|&j| {
            rest[j..].starts_with(&fence)
                && !rest[j + run..].starts_with('`')
                && (j == 0 || !rest[..j].ends_with('`'))
        });
        match close {
            Some(j) => i += run + j + run,
            None => panic!("an unclosed code span in: {line}"),
        }
    }
    out
}

/// No raw HTML or link outside code spans, no control character, and every
/// table row as wide as its table's head.
fn assert_safe_markdown(md: &str) {
    for line in md.lines() {
        let text = outside_code(line);
        for raw in ["<img", "<script", "</script", "<b", "[l](javascript"] {
            assert!(!text.contains(raw), "raw `{raw}` in: {line}");
        }
    }
    for raw in ["\u{1b}", "\u{7}"] {
        assert!(!md.contains(raw), "raw {raw:?} in\n{md}");
    }
    let mut head: Option<usize> = None;
    for line in md.lines() {
        match (line.starts_with('|'), head) {
            (true, None) => head = Some(pipes(line)),
            (true, Some(n)) => assert_eq!(pipes(line), n, "a row split apart: {line}"),
            (false, _) => head = None,
        }
    }
}

#[test]
fn report_md_shows_hostile_names_as_text() {
    let (cfg, records) = hostile_run();
    let md = render(&MarkdownExporter, &cfg, &records).unwrap();
    assert_safe_markdown(&md);
    // The class name in the failure tables, as text.
    assert!(
        md.contains("| dynamic | &lt;script&gt;alert(2)&lt;/script&gt; |"),
        "{md}"
    );
    // Code spans hold what they were given.
    assert!(
        md.contains("model ``openai:<img src=x onerror=alert(1)>`|``"),
        "{md}"
    );
    assert!(
        md.contains("- &lt;img src=x onerror=alert(1)&gt;.jsonl:3: `` `tick`<script>alert(2)</script> ``: duplicate task id"),
        "{md}"
    );
    // The flips, by id, as text.
    assert!(
        md.contains("now wrong: &lt;img src=x onerror=alert(1)&gt;, \\`tick\\`, a|b, [l\\](javascript:alert(3)), x y\\\\x1b]0;t\\\\x07"),
        "{md}"
    );
}

#[test]
fn compare_md_shows_hostile_names_as_text() {
    let (cfg, records) = hostile_run();
    let base = Side::new("BASE", &cfg, &records, "fat");
    let new = Side::new("NEW", &cfg, &records, "dynamic");
    let (c, summaries) = compare::compare(&base, &new).unwrap();
    let judged = [Judged {
        regressions: compare::regressions(&c, &Thresholds::default()),
        comparison: c,
        summaries,
    }];
    let md = compare::markdown(&judged, &[], Path::new("out"));
    assert_safe_markdown(&md);
    assert!(
        md.contains("Models ``openai:<img src=x onerror=alert(1)>`|`` →"),
        "{md}"
    );
    assert!(
        md.contains("Right in BASE, wrong in NEW: &lt;img src=x onerror=alert(1)&gt;, \\`tick\\`"),
        "{md}"
    );
    let page = compare::html(&judged, &[]);
    for raw in ["<img", "<script", "alert(1)>"] {
        assert!(!page.contains(raw), "raw `{raw}` in\n{page}");
    }
}

#[test]
fn report_html_carries_hostile_names_only_as_escaped_data() {
    let (cfg, records) = hostile_run();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    // One script element, the page's own; the names are in its JSON with
    // `<` escaped, so none can end it.
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert_eq!(page.matches("</script").count(), 1, "{page}");
    let markup = page.split("<script>").next().unwrap();
    for raw in ["<img", "<script>alert"] {
        assert!(!markup.contains(raw), "raw `{raw}` in the page's markup");
    }
    let blob = page.split("const DATA = ").nth(1).unwrap();
    let blob = &blob[..blob.find(";\n").unwrap()];
    assert!(blob.contains("\\u003cimg src=x onerror=alert(1)\\u003e"));
    assert!(!blob.contains('<'), "raw `<` in the data");
}
