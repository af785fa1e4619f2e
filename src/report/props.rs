//! Properties of the reports over hostile strings: a task id, a model
//! name, an exception name or a skipped record's reason holding markup,
//! table pipes, backticks or line breaks must not change the document's
//! structure. Each document is rendered twice, once with the hostile
//! strings and once with plain names in their places, and the two must
//! have the same shape.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::html::HtmlExporter;
use super::markdown::MarkdownExporter;
use super::task_cases;
use super::testing::{config, render, task, R};
use crate::record::{AttemptRecord, RunConfig, StopOn};
use crate::task::load::Skipped;
use crate::util::props::hostile_text;

/// The strings a run's documents show that come from outside retrace.
#[derive(Debug, Clone)]
struct Names {
    run_id: String,
    model: String,
    ids: Vec<String>,
    /// Exception names, one per task.
    enames: Vec<String>,
    reason: String,
}

fn names() -> impl Strategy<Value = Names> {
    let text = || hostile_text(8).prop_filter("not blank", |t| !t.trim().is_empty());
    (
        text(),
        text(),
        proptest::collection::btree_set(text(), 1..4),
        proptest::collection::vec(text(), 3),
        text(),
    )
        .prop_map(|(run_id, model, ids, enames, reason)| Names {
            run_id,
            model,
            ids: ids.into_iter().collect(),
            enames,
            reason,
        })
}

/// The same shape with plain names: distinct stay distinct.
fn plain(n: &Names) -> Names {
    let mut seen: BTreeMap<&str, String> = BTreeMap::new();
    let mut enames = Vec::new();
    for e in &n.enames {
        let next = format!("E{}", seen.len());
        enames.push(seen.entry(e.as_str()).or_insert(next).clone());
    }
    Names {
        run_id: "run".into(),
        model: "model".into(),
        ids: (0..n.ids.len()).map(|i| format!("t{i}")).collect(),
        enames,
        reason: "reason".into(),
    }
}

fn journal(n: &Names) -> (RunConfig, Vec<AttemptRecord>) {
    let ids: Vec<&str> = n.ids.iter().map(String::as_str).collect();
    let mut cfg = config(&ids, 1, StopOn::Clean);
    cfg.provenance.run_id = n.run_id.clone();
    cfg.provenance.model = n.model.clone();
    cfg.provenance.skipped = vec![Skipped {
        id: Some(n.ids[0].clone()),
        file: "set.jsonl".into(),
        line: 3,
        reason: n.reason.clone(),
    }];
    let mut records = Vec::new();
    for (i, id) in n.ids.iter().enumerate() {
        let mut rounds = task(id, &[R::Raised("E"), R::Wrong], StopOn::Clean, 1);
        let error = rounds[0].outcome.as_mut().unwrap().error.as_mut().unwrap();
        error.ename = n.enames[i % n.enames.len()].clone();
        error.evalue = n.reason.clone();
        rounds[0].reply = Some(n.reason.clone());
        records.extend(rounds);
    }
    (cfg, records)
}

/// Lines as Markdown reads them (`\r` ends a line too).
fn md_lines(text: &str) -> Vec<&str> {
    text.split("\r\n")
        .flat_map(|l| l.split(['\n', '\r']))
        .collect()
}

/// What each Markdown line is: blank, heading, list item, quote, table
/// row with its cell count, or text; and whether a paragraph's line leaves
/// a code span open.
fn md_shape(text: &str) -> Vec<String> {
    md_lines(text)
        .into_iter()
        .map(|line| {
            let t = line.trim_start();
            let kind = if t.is_empty() {
                "blank".to_string()
            } else if t.starts_with('#') {
                format!("h{}", t.chars().take_while(|&c| c == '#').count())
            } else if t.starts_with('|') {
                format!("row{}", t.matches('|').count() - t.matches("\\|").count())
            } else if t.starts_with("- ") || t.starts_with("> ") || t.starts_with("![") {
                t[..2].to_string()
            } else {
                "text".to_string()
            };
            // Only a paragraph's line can leave a code span open into the
            // next one; elsewhere an unmatched tick is a literal tick.
            let open = kind == "text" && unclosed_code_span(t);
            format!("{kind}/{open}")
        })
        .collect()
}

/// Whether a code span is left open at the end of the line: a run of n
/// backticks opens one, the next run of exactly n closes it (CommonMark).
fn unclosed_code_span(line: &str) -> bool {
    let mut open: Option<usize> = None;
    let mut run = 0;
    for c in line.chars().chain(std::iter::once('\n')) {
        if c == '`' {
            run += 1;
            continue;
        }
        if run > 0 {
            open = match open {
                None => Some(run),
                Some(n) if n == run => None,
                keep => keep,
            };
            run = 0;
        }
    }
    open.is_some()
}

/// The element tags of an HTML or XML document in order, outside the
/// script and style elements; an unescaped `<` in text shows as a tag.
fn tags(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').unwrap_or(rest.len());
        let name: String = rest[..end]
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '>')
            .collect();
        for raw in ["script", "style"] {
            if name == raw {
                let close = format!("</{raw}>");
                let at = rest.find(&close).unwrap_or(rest.len());
                rest = &rest[at..];
            }
        }
        out.push(name);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn markdown_keeps_its_shape_whatever_the_names(n in names()) {
        let (cfg, records) = journal(&n);
        let hostile = render(&MarkdownExporter, &cfg, &records).unwrap();
        let (cfg, records) = journal(&plain(&n));
        let benign = render(&MarkdownExporter, &cfg, &records).unwrap();
        prop_assert_eq!(md_shape(&hostile), md_shape(&benign), "\n{}", hostile);
    }

    #[test]
    fn html_keeps_its_tags_whatever_the_names(n in names()) {
        let (cfg, records) = journal(&n);
        let hostile = render(&HtmlExporter, &cfg, &records).unwrap();
        let (cfg, records) = journal(&plain(&n));
        let benign = render(&HtmlExporter, &cfg, &records).unwrap();
        prop_assert_eq!(tags(&hostile), tags(&benign));
    }

    #[test]
    fn junit_keeps_its_tags_whatever_the_names(n in names()) {
        let (cfg, records) = journal(&n);
        let hostile = task_cases::render(&cfg, &records, &[]);
        let (cfg, records) = journal(&plain(&n));
        let benign = task_cases::render(&cfg, &records, &[]);
        prop_assert_eq!(tags(&hostile), tags(&benign));
        // XML 1.0 cannot carry most control characters at all.
        prop_assert!(!hostile.chars().any(|c| (c as u32) < 0x20 && !"\n\t\r".contains(c)));
    }
}

#[test]
fn ticks_pipes_and_line_breaks_stay_inside_their_span_or_cell() {
    // Found by the Markdown property: a backtick in a model name closed its
    // code span, a pipe or a line break in an exception name split a row.
    let n = Names {
        run_id: "r\n# not a heading".into(),
        model: "`m`".into(),
        ids: vec!["a".into()],
        enames: vec!["E|x\n| y".into(), "F".into(), "F".into()],
        reason: "why".into(),
    };
    let (cfg, records) = journal(&n);
    let md = render(&MarkdownExporter, &cfg, &records).unwrap();
    assert!(
        md.starts_with("# retrace run `r # not a heading`\n"),
        "{md}"
    );
    assert!(md.contains("model `` `m` ``,"), "{md}");
    assert!(md.contains("| E\\|x \\| y |"), "{md}");
    let (cfg, records) = journal(&plain(&n));
    let benign = render(&MarkdownExporter, &cfg, &records).unwrap();
    assert_eq!(md_shape(&md), md_shape(&benign));
}
