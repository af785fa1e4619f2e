//! `compare.md`: tables, flipped tasks, the decision, links to the chart;
//! every name and value read from the runs escaped (`markup`).

use std::fmt::Write as _;
use std::path::Path;

use super::cells::{
    executors, ids, metric_rows, p50_p95, power, protocol_rows, round_cells, undeclared_banner,
};
use super::decision::Judged;
use crate::report::markup::{md_cell, md_code, md_text};
use crate::report::plots::Plot;
use crate::report::stats::Percentiles;

/// `compare.md`: tables, flipped tasks, the decision, links to the chart.
pub fn markdown(judged: &[Judged], plots: &[Plot], dir: &Path) -> String {
    let mut w = String::new();
    let _ = writeln!(w, "# retrace compare\n");
    if let Some(banner) = undeclared_banner(judged) {
        let _ = writeln!(w, "> **{}**\n", md_text(&banner));
    }
    for p in plots {
        for f in p
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        {
            let rel = f.strip_prefix(dir).unwrap_or(f);
            let _ = writeln!(w, "![{}]({})\n", p.title, rel.display());
        }
    }
    for j in judged {
        let c = &j.comparison;
        let _ = writeln!(w, "## {} → {}\n", md_text(&c.base), md_text(&c.new));
        let _ = writeln!(
            w,
            "Models {} → {}; {} shared tasks ({} unpaired).\n",
            md_code(&c.base_model),
            md_code(&c.new_model),
            c.shared_tasks.len(),
            c.unpaired_tasks
        );
        if let Some(line) = executors(c) {
            let _ = writeln!(w, "{}\n", md_text(&line));
        }
        protocol(&mut w, c);
        match j.regressions.as_slice() {
            [] => {
                let _ = writeln!(
                    w,
                    "**Verdict: pass** (NEW is not worse beyond the thresholds)\n"
                );
            }
            why => {
                let _ = writeln!(w, "**Verdict: FAIL**\n");
                for r in why {
                    let _ = writeln!(w, "- {}", md_text(&r.to_string()));
                }
                let _ = writeln!(w);
            }
        }
        let _ = writeln!(
            w,
            "| round | BASE Acc@r | NEW Acc@r | Δ (points) | 95% CI of Δ (paired bootstrap) | McNemar b / c | p |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|---|---|");
        for r in &c.rounds {
            let _ = writeln!(w, "| {} |", round_cells(r).join(" | "));
        }
        let _ = writeln!(w, "\n{}", power(c));
        let _ = writeln!(w, "\n| metric | BASE | NEW |\n|---|---|---|");
        for (m, b, n) in metric_rows(c) {
            let _ = writeln!(w, "| {} | {b} | {n} |", md_cell(&md_text(&m)));
        }
        let _ = writeln!(
            w,
            "| round time p50 / p95 (ms) | {:.0} / {:.0} | {:.0} / {:.0} |",
            c.base_latency_total.p50,
            c.base_latency_total.p95,
            c.new_latency_total.p50,
            c.new_latency_total.p95
        );
        let _ = writeln!(
            w,
            "\n| round | model p50 / p95 BASE (ms) | NEW | exec p50 / p95 BASE (ms) | NEW |\n|---|---|---|---|---|"
        );
        for l in &c.latency_by_round {
            let f = |p: &Percentiles| p50_p95(p, "");
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} |",
                l.round,
                f(&l.base_model),
                f(&l.new_model),
                f(&l.base_exec),
                f(&l.new_exec)
            );
        }
        let _ = writeln!(
            w,
            "\nRight in BASE, wrong in NEW: {}\n",
            md_text(&ids(&c.now_wrong))
        );
        let _ = writeln!(
            w,
            "Wrong in BASE, right in NEW: {}\n",
            md_text(&ids(&c.now_right))
        );
    }
    w
}

/// The protocol fingerprint fields that differ, or that none does.
fn protocol(w: &mut String, c: &super::Comparison) {
    let rows = protocol_rows(c);
    if rows.is_empty() {
        let _ = writeln!(w, "Protocols: identical fingerprints.\n");
        return;
    }
    let _ = writeln!(
        w,
        "Protocols differ in:\n\n| field | BASE | NEW | declared |\n|---|---|---|---|"
    );
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| md_cell(&md_text(c))).collect();
        let _ = writeln!(w, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(w);
}
