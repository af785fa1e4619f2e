//! `compare.md` and `compare.html`: the comparisons as one [`Document`],
//! rendered by both backends.

use std::path::Path;

use super::comparison::Comparison;
use super::decision::Judged;
use crate::report::document::{self, Block, Document, Figure, Table, Text};
use crate::report::labels::{id_list as ids, percent, power_sentence};
use crate::report::plots::Plot;
use crate::report::stats::Percentiles;

/// The comparisons as Markdown; the charts are the SVG files under `dir`.
pub fn markdown(judged: &[Judged], plots: &[Plot], dir: &Path) -> String {
    document::markdown::render(&build(judged, plots, dir))
}

/// The comparisons as one self-contained page, charts inlined.
pub fn html(judged: &[Judged], plots: &[Plot]) -> String {
    let body = document::html::render(&build(judged, plots, Path::new("")));
    format!("{HEAD}{body}</body></html>\n")
}

const HEAD: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
     <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
     <title>retrace compare</title><style>\
     :root{color-scheme:light dark}body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}\
     table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #8888;padding:.3em .6em;text-align:right}\
     th:first-child,td:first-child{text-align:left}.fail{color:#c0392b;font-weight:bold}\
     .pass{color:#1e8449}figure svg{max-width:100%;height:auto;background:#fff}\
     </style></head><body>\n";

/// The document: a warning when more differs than was declared, the
/// charts, then each comparison.
pub fn build(judged: &[Judged], plots: &[Plot], dir: &Path) -> Document {
    let mut doc = Document::default();
    doc.heading(1, "retrace compare");
    let mut names: Vec<&str> = (judged.iter())
        .flat_map(|j| &j.comparison.undeclared_differences)
        .map(|d| d.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    if !names.is_empty() {
        // Written only with `--allow-differences`.
        let banner = format!(
            "UNDECLARED PROTOCOL DIFFERENCES (--allow-differences): the runs also differ in {}, \
             which --vary did not name; the numbers below compare those too.",
            names.join(", ")
        );
        doc.push(Block::Callout("fail", banner.into()));
    }
    let figures: Vec<Figure> = (plots.iter())
        .flat_map(|p| {
            let svgs = p
                .files
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "svg"));
            svgs.map(|f| Figure {
                id: None,
                title: p.title.clone(),
                src: f.strip_prefix(dir).unwrap_or(f).display().to_string(),
                svg: p.svg.clone(),
            })
        })
        .collect();
    if !figures.is_empty() {
        doc.push(Block::Figures(figures));
    }
    for j in judged {
        comparison(&mut doc, j);
    }
    doc
}

/// One BASE → NEW comparison.
fn comparison(doc: &mut Document, j: &Judged) {
    let c = &j.comparison;
    doc.heading(2, format!("{} → {}", c.base, c.new));
    doc.paragraph(
        Text::from("Models ")
            .code(&c.base_model)
            .text(" → ")
            .code(&c.new_model)
            .text(format!(
                "; {} shared tasks ({} unpaired).",
                c.shared_tasks.len(),
                c.unpaired_tasks
            )),
    );
    // Where the kernels ran, when either side's were not local.
    if !(c.base_executor.is_local() && c.new_executor.is_local()) {
        let (b, n) = (c.base_executor.describe(), c.new_executor.describe());
        doc.paragraph(format!("Executors: {b} → {n}."));
    }
    protocol(doc, c);
    if j.regressions.is_empty() {
        let verdict = Text::default()
            .strong("Verdict: pass")
            .text(" (NEW is not worse beyond the thresholds)");
        doc.push(Block::Paragraph(Some("pass"), verdict));
    } else {
        let verdict = Text::default().strong("Verdict: FAIL");
        doc.push(Block::Paragraph(Some("fail"), verdict));
        doc.list(j.regressions.iter().map(ToString::to_string));
    }
    let head = [
        "round",
        "BASE Acc@r",
        "NEW Acc@r",
        "Δ (points)",
        "95% CI of Δ (paired bootstrap)",
        "McNemar b / c",
        "p",
    ];
    let pp = |x: f64| format!("{:+.1}", 100.0 * x);
    let rows = (c.rounds.iter())
        .map(|r| {
            vec![
                r.round.to_string(),
                percent(Some(&r.base)),
                percent(Some(&r.new)),
                pp(r.difference),
                format!("[{}, {}]", pp(r.difference_ci.0), pp(r.difference_ci.1)),
                format!("{} / {}", r.mcnemar.b, r.mcnemar.c),
                format!("{:.4}", r.mcnemar.p_value),
            ]
        })
        .collect();
    doc.table(Table::plain(&head, rows));
    let last = c.last();
    let line = power_sentence(last.min_detectable_difference, c.shared_tasks.len() as u64);
    doc.paragraph(format!("Power (Acc@{}): {line}.", last.round));
    let rate = |name: &str, b, n| vec![name.to_string(), percent(b), percent(n)];
    let (bk, nk) = (&c.base_kill_rate, &c.new_kill_rate);
    let mut rows = vec![
        rate(
            "recovery rate",
            c.base_recovery.as_ref(),
            c.new_recovery.as_ref(),
        ),
        rate("kill rate", bk.total.as_ref(), nk.total.as_ref()),
    ];
    let mut reasons: Vec<&String> = bk.counts.keys().chain(nk.counts.keys()).collect();
    reasons.sort();
    reasons.dedup();
    for r in reasons {
        let count = |k: &crate::report::metrics::KillRate| k.counts.get(r).copied().unwrap_or(0);
        rows.push(vec![
            format!("kills: {r}"),
            count(bk).to_string(),
            count(nk).to_string(),
        ]);
    }
    let (b, n) = (&c.base_latency_total, &c.new_latency_total);
    rows.push(vec![
        "round time p50 / p95 (ms)".into(),
        format!("{:.0} / {:.0}", b.p50, b.p95),
        format!("{:.0} / {:.0}", n.p50, n.p95),
    ]);
    doc.table(Table::plain(&["metric", "BASE", "NEW"], rows));
    let head = [
        "round",
        "model p50 / p95 BASE (ms)",
        "NEW",
        "exec p50 / p95 BASE (ms)",
        "NEW",
    ];
    let rows = (c.latency_by_round.iter())
        .map(|l| {
            // A dash when the round had no such time.
            let p50_p95 = |p: &Percentiles| match p.n {
                0 => "–".to_string(),
                _ => format!("{:.0} / {:.0}", p.p50, p.p95),
            };
            let times = [&l.base_model, &l.new_model, &l.base_exec, &l.new_exec].map(p50_p95);
            [vec![l.round.to_string()], times.to_vec()].concat()
        })
        .collect();
    doc.table(Table::plain(&head, rows));
    doc.paragraph(format!(
        "Right in BASE, wrong in NEW: {}",
        ids(&c.now_wrong)
    ));
    doc.paragraph(format!(
        "Wrong in BASE, right in NEW: {}",
        ids(&c.now_right)
    ));
    doc.push(Block::Gap);
}

/// The protocol fields the runs differ in, or that they do not.
fn protocol(doc: &mut Document, c: &Comparison) {
    let rows: Vec<Vec<String>> = (c.protocol_differences.iter())
        .map(|d| {
            let declared = !c.undeclared_differences.iter().any(|u| u.name == d.name);
            let declared = if declared { "yes" } else { "NO" }.to_string();
            vec![d.name.clone(), d.left.clone(), d.right.clone(), declared]
        })
        .collect();
    if rows.is_empty() {
        doc.paragraph("Protocols: identical fingerprints.");
        return;
    }
    doc.paragraph("Protocols differ in:");
    doc.table(Table::plain(&["field", "BASE", "NEW", "declared"], rows));
}
