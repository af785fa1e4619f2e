//! `compare.html`: the same as `compare.md`, one file with no outside
//! reference.

use std::fmt::Write as _;

use super::cells::{
    executors, ids, metric_rows, p50_p95, power, protocol_rows, round_cells, undeclared_banner,
};
use super::decision::Judged;
use crate::report::plots::Plot;
use crate::report::stats::Percentiles;

/// `compare.html`: the same, one file with no outside reference.
pub fn html(judged: &[Judged], plots: &[Plot]) -> String {
    // XML escaping, as this page always had (`&apos;`, `&#10;`).
    use crate::report::markup::xml as escape;
    let mut w = String::new();
    w.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>retrace compare</title><style>\
         :root{color-scheme:light dark}body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #8888;padding:.3em .6em;text-align:right}\
         th:first-child,td:first-child{text-align:left}.fail{color:#c0392b}.pass{color:#1e8449}\
         figure svg{max-width:100%;height:auto;background:#fff}\
         </style></head><body>\n<h1>retrace compare</h1>\n",
    );
    if let Some(banner) = undeclared_banner(judged) {
        let _ = writeln!(
            w,
            "<p class=\"fail\"><strong>{}</strong></p>",
            escape(&banner)
        );
    }
    for p in plots {
        let _ = writeln!(
            w,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            p.svg,
            escape(&p.title)
        );
    }
    for j in judged {
        let c = &j.comparison;
        let _ = writeln!(
            w,
            "<h2>{} → {}</h2>\n<p>Models <code>{}</code> → <code>{}</code>; {} shared tasks ({} unpaired).</p>",
            escape(&c.base),
            escape(&c.new),
            escape(&c.base_model),
            escape(&c.new_model),
            c.shared_tasks.len(),
            c.unpaired_tasks
        );
        if let Some(line) = executors(c) {
            let _ = writeln!(w, "<p>{}</p>", escape(&line));
        }
        protocol(&mut w, c);
        if j.regressions.is_empty() {
            w.push_str("<p class=\"pass\"><strong>Verdict: pass</strong></p>\n");
        } else {
            w.push_str("<p class=\"fail\"><strong>Verdict: FAIL</strong></p><ul>\n");
            for r in &j.regressions {
                let _ = writeln!(w, "<li>{}</li>", escape(r));
            }
            w.push_str("</ul>\n");
        }
        w.push_str(
            "<table><tr><th>round</th><th>BASE Acc@r</th><th>NEW Acc@r</th><th>Δ (points)</th>\
             <th>95% CI of Δ</th><th>McNemar b / c</th><th>p</th></tr>\n",
        );
        for r in &c.rounds {
            let _ = writeln!(w, "<tr><td>{}</td></tr>", round_cells(r).join("</td><td>"));
        }
        let _ = writeln!(w, "</table>\n<p>{}</p>", escape(&power(c)));
        w.push_str("<table><tr><th>metric</th><th>BASE</th><th>NEW</th></tr>\n");
        let row = |w: &mut String, m: &str, b: String, n: String| {
            let _ = writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(m),
                escape(&b),
                escape(&n)
            );
        };
        for (m, b, n) in metric_rows(c) {
            row(&mut w, &m, b, n);
        }
        for l in &c.latency_by_round {
            let f = |p: &Percentiles| p50_p95(p, " ms");
            row(
                &mut w,
                &format!("round {} model p50 / p95", l.round),
                f(&l.base_model),
                f(&l.new_model),
            );
            row(
                &mut w,
                &format!("round {} exec p50 / p95", l.round),
                f(&l.base_exec),
                f(&l.new_exec),
            );
        }
        w.push_str("</table>\n");
        let _ = writeln!(
            w,
            "<p>Right in BASE, wrong in NEW: {}</p>\n<p>Wrong in BASE, right in NEW: {}</p>",
            escape(&ids(&c.now_wrong)),
            escape(&ids(&c.now_right))
        );
    }
    w.push_str("</body></html>\n");
    w
}

/// The protocol fingerprint fields that differ, or that none does.
fn protocol(w: &mut String, c: &super::Comparison) {
    use crate::report::markup::xml as escape;
    let rows = protocol_rows(c);
    if rows.is_empty() {
        w.push_str("<p>Protocols: identical fingerprints.</p>\n");
        return;
    }
    w.push_str(
        "<p>Protocols differ in:</p>\n<table><tr><th>field</th><th>BASE</th><th>NEW</th>\
         <th>declared</th></tr>\n",
    );
    for r in rows {
        let cells: Vec<String> = r.iter().map(|x| escape(x)).collect();
        let _ = writeln!(w, "<tr><td>{}</td></tr>", cells.join("</td><td>"));
    }
    w.push_str("</table>\n");
}
