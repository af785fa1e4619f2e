//! The top of `report.html`: labels, what ran, and the headline numbers
//! with their intervals (the same numbers as `report.md`).

use std::fmt::Write;

use super::super::cells::{counted, denials, strategy_rows};
use super::super::labels::{labels, percent};
use super::super::metrics::Summary;
use super::super::repair_tables;
use super::super::stats::Rate;
use super::super::view::RunView;
use crate::report::markup::html as escape;

/// The header and the summary sections, as HTML.
pub fn render(run: &RunView) -> String {
    let s = run.summary;
    let mut h = String::new();
    let w = &mut h;
    let _ = writeln!(
        w,
        "<header>\n<h1>retrace run <code>{}</code></h1>",
        escape(&s.header.run_id)
    );
    for label in labels(s) {
        let _ = writeln!(w, "<p class=\"label\">{}</p>", escape(label));
    }
    let strategy = if s.arms.is_empty() {
        format!("strategy <code>{}</code>", escape(&s.header.strategy))
    } else {
        let names: Vec<String> = s
            .arms
            .iter()
            .map(|a| format!("<code>{}</code>", escape(&a.header.strategy)))
            .collect();
        format!(
            "arms {} (baseline <code>{}</code>)",
            names.join(", "),
            escape(&s.header.strategy)
        )
    };
    let _ = writeln!(
        w,
        "<p class=\"meta\">Suite <code>{}</code>, model <code>{}</code>, {strategy}, {} tasks \
         ({} finished), rounds 0..={}, stop rule <code>{}</code>, feedback <code>{}</code>. \
         Limits: {}.</p>\n</header>",
        escape(&s.header.suite),
        escape(&s.header.model),
        s.header.tasks,
        s.header.tasks_finished,
        s.header.rounds,
        escape(&s.header.stop_on),
        escape(&s.header.feedback),
        escape(&crate::report::labels::limits_line(s))
    );
    let _ = writeln!(w, "<section id=\"headline\">");
    cards(w, s);
    if s.arms.len() > 1 {
        strategies(w, s);
    }
    accuracy(w, s);
    self_repair(w, s);
    executions(w, s);
    let _ = writeln!(w, "</section>");
    skipped(w, &run.config.provenance.skipped);
    h
}

/// The dataset records `--skip-invalid` left out (not in any rate), each
/// with its file:line and reason, as in `report.md`.
fn skipped(w: &mut String, skipped: &[crate::task::load::Skipped]) {
    if skipped.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "<section id=\"skipped\">\n<h2>Skipped records</h2>\n<p>{} invalid dataset record(s) \
         left out by <code>--skip-invalid</code>; not counted in any rate.</p>\n<ul>",
        skipped.len()
    );
    for s in skipped {
        let _ = writeln!(w, "<li>{}</li>", escape(&s.to_string()));
    }
    let _ = writeln!(w, "</ul>\n</section>");
}

/// The few numbers people look for first.
fn cards(w: &mut String, s: &Summary) {
    let _ = writeln!(w, "<div class=\"cards\">");
    let mut card = |name: &str, value: String| {
        let _ = writeln!(
            w,
            "<div class=\"card\"><div class=\"name\">{}</div><div class=\"value\">{}</div></div>",
            escape(name),
            escape(&value)
        );
    };
    if let Some(a) = s.answers.accuracy_by_round.first() {
        card("Acc@0", percent(Some(a)));
    }
    if let Some(a) = s.answers.accuracy_by_round.last() {
        card(&format!("Acc@{}", s.header.rounds), percent(Some(a)));
    }
    card("recovery rate", percent(s.answers.recovery_rate.as_ref()));
    card(
        "regression rate",
        percent(s.answers.regression_rate.as_ref()),
    );
    card("kill rate", percent(s.execution.kill_rate.total.as_ref()));
    card(
        "infra-error tasks",
        percent(s.execution.infra_error_rate.as_ref()),
    );
    let _ = writeln!(w, "</div>");
}

/// Every arm side by side, and the paired test of each against the baseline.
fn strategies(w: &mut String, s: &Summary) {
    let _ = writeln!(
        w,
        "<h2>Strategies</h2>\n<table class=\"strategies\">\n<thead><tr><th></th>"
    );
    let baseline = s.comparison.as_ref().map(|c| c.baseline.as_str());
    for a in &s.arms {
        let mark = if Some(a.header.strategy.as_str()) == baseline {
            " (baseline)"
        } else {
            ""
        };
        let _ = write!(w, "<th>{}{mark}</th>", escape(&a.header.strategy));
    }
    let _ = writeln!(w, "</tr></thead>\n<tbody>");
    for (name, cells) in strategy_rows(s) {
        let _ = write!(w, "<tr><th>{}</th>", escape(&name));
        for cell in cells {
            let _ = write!(w, "<td>{}</td>", escape(&cell));
        }
        let _ = writeln!(w, "</tr>");
    }
    let _ = writeln!(w, "</tbody>\n</table>");
    if let Some(c) = &s.comparison {
        let _ = writeln!(
            w,
            "<p>Paired on the tasks both arms finished, final round (McNemar, exact; b = baseline \
             right and arm wrong, c = baseline wrong and arm right):</p>\n<ul>"
        );
        for a in &c.arms {
            let _ = writeln!(
                w,
                "<li><code>{}</code> vs <code>{}</code>: {} shared tasks, Acc@{} {} vs {}; \
                 b = {}, c = {}, p = {:.4}; {}</li>",
                escape(&a.strategy),
                escape(&c.baseline),
                a.shared_tasks,
                s.header.rounds,
                escape(&percent(a.accuracy.as_ref())),
                escape(&percent(a.baseline_accuracy.as_ref())),
                a.mcnemar.b,
                a.mcnemar.c,
                a.mcnemar.p_value,
                escape(&a.paired_line())
            );
        }
        let _ = writeln!(
            w,
            "</ul>\n<p>The numbers below are the baseline's (<code>{}</code>).</p>",
            escape(&c.baseline)
        );
    }
}

fn accuracy(w: &mut String, s: &Summary) {
    let _ = writeln!(
        w,
        "<h2>Accuracy by round</h2>\n<table class=\"accuracy\">\n<thead><tr><th>round</th>\
         <th>Acc@r (95% CI)</th><th>Δ</th><th>solved ≤ r</th><th>exec-success</th><th>parse</th>\
         </tr></thead>\n<tbody>"
    );
    for (r, acc) in s.answers.accuracy_by_round.iter().enumerate() {
        let _ = writeln!(
            w,
            "<tr><td>{r}</td><td>{}</td><td>{:+.1}</td><td>{:.1}%</td><td>{}</td><td>{}</td></tr>",
            percent(Some(acc)),
            100.0 * s.answers.delta_by_round.get(r).copied().unwrap_or(0.0),
            100.0 * s.answers.solved_by_round.get(r).copied().unwrap_or(0.0),
            percent(s.answers.exec_success_by_round.get(r)),
            percent(s.answers.parse_by_round.get(r)),
        );
    }
    let _ = writeln!(w, "</tbody>\n</table>\n<ul class=\"facts\">");
    let mut item = |name: &str, r: Option<&Rate>| {
        let _ = writeln!(w, "<li>{}: {}</li>", escape(name), escape(&counted(r)));
    };
    item(
        "recovery rate (over tasks wrong at round 0)",
        s.answers.recovery_rate.as_ref(),
    );
    item(
        "recovery rate (over tasks wrong at round 0 that got a repair round)",
        s.answers.recovery_rate_repaired.as_ref(),
    );
    item(
        "regression rate (over tasks right at round 0)",
        s.answers.regression_rate.as_ref(),
    );
    if s.repairs.repeated_error.is_some() {
        item(
            "repair rounds that raised the previous round's error at the same line",
            s.repairs.repeated_error.as_ref(),
        );
    }
    if s.repairs.resent_code.is_some() {
        item(
            "repair rounds that resent the previous code unchanged",
            s.repairs.resent_code.as_ref(),
        );
    }
    let _ = writeln!(
        w,
        "<li>rounds used per task: {:.2}</li>\n</ul>",
        s.cost.rounds_used_mean
    );
    if !s.answers.round0_failures.is_empty() {
        let _ = writeln!(
            w,
            "<h3>Round-0 failures and their fate by round {}</h3>\n<table>\n<thead><tr>\
             <th>round-0 failure</th><th>tasks</th><th>correct at K</th><th>ran cleanly later</th>\
             </tr></thead>\n<tbody>",
            s.header.rounds
        );
        for (kind, f) in &s.answers.round0_failures {
            let _ = writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(kind),
                f.tasks,
                f.fixed,
                f.ran_clean_later
            );
        }
        let _ = writeln!(w, "</tbody>\n</table>");
    }
    if !s.answers.final_answers_read.is_empty() {
        let _ = writeln!(
            w,
            "<h3>How the final answers were read</h3>\n<table>\n<thead><tr>\
             <th>reading</th><th>answers</th><th>correct</th></tr></thead>\n<tbody>"
        );
        for (reading, n) in &s.answers.final_answers_read {
            let _ = writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(reading),
                n.answers,
                n.correct
            );
        }
        let _ = writeln!(w, "</tbody>\n</table>");
    }
    if !s.answers.accuracy_by_fault.is_empty() {
        let _ = writeln!(
            w,
            "<h3>Accuracy by injected fault (synthetic)</h3>\n<table>\n<thead><tr><th>fault</th>\
             <th>tasks</th><th>Acc@0</th><th>Acc@K</th></tr></thead>\n<tbody>"
        );
        for (fault, a) in &s.answers.accuracy_by_fault {
            let _ = writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(fault),
                a.tasks,
                percent(a.round0.as_ref()),
                percent(a.final_round.as_ref())
            );
        }
        let _ = writeln!(w, "</tbody>\n</table>");
    }
}

/// The self-repair views, every arm in one table each (as in `report.md`).
fn self_repair(w: &mut String, s: &Summary) {
    let tables = repair_tables::tables(s);
    if tables.is_empty() {
        return;
    }
    let _ = writeln!(w, "<h2>Self-repair</h2>");
    for t in tables {
        let _ = writeln!(
            w,
            "<h3>{}</h3>\n<p>{}</p>\n<table class=\"self-repair\">\n<thead><tr>",
            escape(&t.title),
            escape(t.note)
        );
        for h in &t.head {
            let _ = write!(w, "<th>{}</th>", escape(h));
        }
        let _ = writeln!(w, "</tr></thead>\n<tbody>");
        for row in &t.rows {
            let _ = write!(w, "<tr>");
            for cell in row {
                let _ = write!(w, "<td>{}</td>", escape(cell));
            }
            let _ = writeln!(w, "</tr>");
        }
        let _ = writeln!(w, "</tbody>\n</table>");
    }
}

fn executions(w: &mut String, s: &Summary) {
    let _ = writeln!(
        w,
        "<h2>Executions</h2>\n<ul class=\"facts\">\n<li>{} executions, kill rate {}",
        s.execution.executions,
        escape(&counted(s.execution.kill_rate.total.as_ref()))
    );
    if !s.execution.kill_rate.counts.is_empty() {
        let reasons: Vec<String> = s
            .execution
            .kill_rate
            .counts
            .iter()
            .map(|(k, n)| format!("{} {n}", escape(k)))
            .collect();
        let _ = write!(w, " ({})", reasons.join(", "));
    }
    let verdicts: Vec<String> = s
        .execution
        .verdicts
        .iter()
        .map(|(k, v)| format!("{} {v}", escape(k)))
        .collect();
    let _ = writeln!(w, "</li>\n<li>verdicts: {}</li>", verdicts.join(", "));
    let _ = writeln!(
        w,
        "<li>infrastructure errors (tasks): {}</li>",
        escape(&counted(s.execution.infra_error_rate.as_ref()))
    );
    if let Some(m) = &s.environment.installs {
        let _ = writeln!(
            w,
            "<li>installs: {} steps, {:.2} per task, store hits {}, downloads {}, failures {}, \
             denials {}</li>",
            m.steps,
            m.installs_per_task,
            m.store_hits,
            m.downloads,
            m.failures,
            escape(&denials(m))
        );
    }
    let _ = writeln!(
        w,
        "</ul>\n<table class=\"latency\">\n<thead><tr><th>latency (ms)</th><th>p50</th>\
         <th>p95</th></tr></thead>\n<tbody>"
    );
    for (name, p) in [
        ("model", &s.cost.latency_ms.model),
        ("exec", &s.cost.latency_ms.exec),
        ("total", &s.cost.latency_ms.total),
    ] {
        let _ = writeln!(
            w,
            "<tr><td>{name}</td><td>{:.1}</td><td>{:.1}</td></tr>",
            p.p50, p.p95
        );
    }
    let _ = writeln!(
        w,
        "</tbody>\n</table>\n<p>Tokens: {} prompt, {} completion, {:.0} per task, {:.1} \
         completion tokens/s (p50).</p>",
        s.cost.tokens.prompt,
        s.cost.tokens.completion,
        s.cost.tokens.per_task_mean,
        s.cost.tokens.per_second.p50
    );
}
