//! `report.md`: the run for people.

use std::fmt::Write;

use super::cells::{counted, denials, p50_p95, size, strategy_rows};
use super::error::RenderError;
use super::export::Exporter;
use super::installs::InstallMetrics;
use super::labels::{labels, percent};
use super::markup::{md_cell, md_code, md_text};
use super::metrics::Summary;
use super::repair_tables;
use super::strategies::StrategyComparison;
use super::view::RunView;

pub struct MarkdownExporter;

impl<'a> Exporter<RunView<'a>> for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, run: &RunView<'a>) -> Result<String, RenderError> {
        let mut md = String::new();
        for section in SECTIONS {
            section(&mut md, run);
        }
        Ok(md)
    }
}

/// The report's sections, in order; each writes its own heading.
const SECTIONS: &[fn(&mut String, &RunView)] = &[
    heading,
    strategies_section,
    accuracy,
    self_correction,
    self_repair,
    executions,
    latency,
    plots,
];

/// The title, the labels, what ran and under which limits.
fn heading(w: &mut String, run: &RunView) {
    let s = run.summary;
    let _ = writeln!(w, "# retrace run {}\n", code(&s.header.run_id));
    for label in labels(s) {
        let _ = writeln!(w, "> **{label}**\n");
    }
    let strategy = if s.arms.is_empty() {
        format!("strategy {}", code(&s.header.strategy))
    } else {
        let names: Vec<String> = s.arms.iter().map(|a| code(&a.header.strategy)).collect();
        format!(
            "arms {} (baseline {})",
            names.join(", "),
            code(&s.header.strategy)
        )
    };
    let _ = writeln!(
        w,
        "Suite {}, model {}, {strategy}, {} tasks ({} finished), rounds 0..={}, \
         stop rule {}, feedback {}.\n",
        code(&s.header.suite),
        code(&s.header.model),
        s.header.tasks,
        s.header.tasks_finished,
        s.header.rounds,
        code(&s.header.stop_on),
        code(&s.header.feedback)
    );
    if !s.header.model_info.is_null() {
        let _ = writeln!(w, "Model details: {}\n", code(&s.header.model_info));
    }
    let _ = writeln!(w, "Limits: {}.\n", crate::report::labels::limits_line(s));
    skipped(w, &run.config.provenance.skipped);
}

/// Every arm side by side, when the run has several.
fn strategies_section(w: &mut String, run: &RunView) {
    let s = run.summary;
    if let Some(c) = &s.comparison {
        strategies(w, s, c);
    }
}

/// Acc@r, its change, solved ≤ r, exec-success and parse by round.
fn accuracy(w: &mut String, run: &RunView) {
    let s = run.summary;
    let _ = writeln!(w, "## Accuracy by round\n");
    let _ = writeln!(
        w,
        "| round | Acc@r (95% CI) | Δ | solved ≤ r | exec-success | parse |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    for (r, acc) in s.answers.accuracy_by_round.iter().enumerate() {
        let _ = writeln!(
            w,
            "| {r} | {} | {:+.1} | {:.1}% | {} | {} |",
            percent(Some(acc)),
            100.0 * s.answers.delta_by_round[r],
            100.0 * s.answers.solved_by_round[r],
            percent(Some(&s.answers.exec_success_by_round[r])),
            percent(Some(&s.answers.parse_by_round[r])),
        );
    }
}

/// Recovery, regression, reviews, resent code, round-0 failures and injected faults.
fn self_correction(w: &mut String, run: &RunView) {
    let s = run.summary;
    let _ = writeln!(w, "\n## Self-correction\n");
    let _ = writeln!(
        w,
        "- recovery rate (over tasks wrong at round 0): {}",
        percent(s.answers.recovery_rate.as_ref())
    );
    let _ = writeln!(
        w,
        "- recovery rate (over tasks wrong at round 0 that got a repair round): {}",
        percent(s.answers.recovery_rate_repaired.as_ref())
    );
    let _ = writeln!(
        w,
        "- regression rate (over tasks right at round 0): {}",
        percent(s.answers.regression_rate.as_ref())
    );
    let _ = writeln!(w, "- rounds used per task: {:.2}", s.cost.rounds_used_mean);
    if let Some(rate) = &s.repairs.resent_code {
        let _ = writeln!(
            w,
            "- repair rounds that resent the previous code unchanged: {} ({} of {})",
            percent(Some(rate)),
            rate.successes,
            rate.n
        );
    }
    if let Some(rate) = &s.repairs.repeated_error {
        let _ = writeln!(
            w,
            "- repair rounds that raised the previous round's error at the same line: {} ({} of {})",
            percent(Some(rate)),
            rate.successes,
            rate.n
        );
    }
    if s.repairs.reviews.prompts > 0 {
        let r = &s.repairs.reviews;
        let _ = writeln!(
            w,
            "- reviews: {} prompts, {} kept, {} revised ({} wrong→right, {} right→wrong)",
            r.prompts, r.kept, r.revised, r.wrong_to_right, r.right_to_wrong
        );
    }
    if let Some(last) = s.answers.multi_part_accuracy_by_round.last() {
        let _ = writeln!(
            w,
            "- multi-answer parts correct at round {}: {}",
            s.header.rounds,
            percent(Some(last))
        );
    }
    if !s.answers.round0_failures.is_empty() {
        let _ = writeln!(
            w,
            "\n### Round-0 failures and their fate by round {}\n",
            s.header.rounds
        );
        let _ = writeln!(
            w,
            "| round-0 failure | tasks | correct at K | ran cleanly later |"
        );
        let _ = writeln!(w, "|---|---|---|---|");
        for (kind, f) in &s.answers.round0_failures {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} |",
                cell(kind),
                f.tasks,
                f.fixed,
                f.ran_clean_later
            );
        }
    }
    if !s.answers.final_answers_read.is_empty() {
        let _ = writeln!(
            w,
            "\n### How the final answers were read\n\n| reading | answers | correct |\n|---|---|---|"
        );
        for (reading, n) in &s.answers.final_answers_read {
            let _ = writeln!(w, "| {} | {} | {} |", cell(reading), n.answers, n.correct);
        }
    }
    if !s.answers.accuracy_by_fault.is_empty() {
        let _ = writeln!(w, "\n### Accuracy by injected fault (synthetic)\n");
        let _ = writeln!(w, "| fault | tasks | Acc@0 | Acc@K |\n|---|---|---|---|");
        for (fault, a) in &s.answers.accuracy_by_fault {
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} |",
                cell(fault),
                a.tasks,
                percent(a.round0.as_ref()),
                percent(a.final_round.as_ref())
            );
        }
    }
}

/// The self-repair views, every arm in one table each.
fn self_repair(w: &mut String, run: &RunView) {
    let tables = repair_tables::tables(run.summary);
    if tables.is_empty() {
        return;
    }
    let _ = writeln!(w, "\n## Self-repair\n");
    for t in tables {
        let _ = writeln!(w, "### {}\n\n{}\n", t.title, t.note);
        let _ = writeln!(w, "| {} |", cells(&t.head));
        let _ = writeln!(w, "|{}", "---|".repeat(t.head.len()));
        for row in &t.rows {
            let _ = writeln!(w, "| {} |", cells(row));
        }
        let _ = writeln!(w);
    }
}

/// Verdicts, kills, infrastructure errors, the environment and installs.
fn executions(w: &mut String, run: &RunView) {
    let s = run.summary;
    let _ = writeln!(w, "\n## Executions\n");
    let _ = writeln!(
        w,
        "- {} executions, kill rate {}",
        s.execution.executions,
        percent(s.execution.kill_rate.total.as_ref())
    );
    for (reason, count) in &s.execution.kill_rate.counts {
        let _ = writeln!(w, "  - {}: {count}", md_text(reason));
    }
    let verdicts: Vec<String> = s
        .execution
        .verdicts
        .iter()
        .map(|(k, v)| format!("{} {v}", md_text(k)))
        .collect();
    let _ = writeln!(w, "- verdicts: {}", verdicts.join(", "));
    let _ = writeln!(
        w,
        "- infrastructure errors (tasks): {}",
        percent(s.execution.infra_error_rate.as_ref())
    );
    environment(w, s);
    if let (Some(m), true) = (&s.environment.installs, s.arms.is_empty()) {
        let _ = writeln!(w, "\n## Installs\n");
        installs(w, m);
    }
}

/// Latency by phase and tokens.
fn latency(w: &mut String, run: &RunView) {
    let s = run.summary;
    let _ = writeln!(w, "\n## Latency (ms) and tokens\n");
    let _ = writeln!(w, "| | p50 | p95 |\n|---|---|---|");
    for (name, p) in [
        ("model", &s.cost.latency_ms.model),
        ("exec", &s.cost.latency_ms.exec),
        ("total", &s.cost.latency_ms.total),
    ] {
        let _ = writeln!(w, "| {name} | {:.1} | {:.1} |", p.p50, p.p95);
    }
    let _ = writeln!(
        w,
        "\nTokens: {} prompt, {} completion, {:.0} per task, {:.1} completion tokens/s (p50).",
        s.cost.tokens.prompt,
        s.cost.tokens.completion,
        s.cost.tokens.per_task_mean,
        s.cost.tokens.per_second.p50
    );
    if let Some(t) = &s.time {
        let _ = writeln!(w, "\nTime: {}.", t.line());
        if t.requests_with_timings > 0 {
            let _ = writeln!(
                w,
                "Of {} requests the server timed: {:.0} s waiting, {:.0} s reading prompts \
                 ({} tokens evaluated, {} from its cache), {:.0} s generating.",
                t.requests_with_timings,
                t.queue_ms / 1e3,
                t.prompt_ms / 1e3,
                t.prompt_tokens_evaluated,
                t.prompt_tokens_cached,
                t.generation_ms / 1e3
            );
        }
    }
}

/// Links to the charts beside the file.
fn plots(w: &mut String, run: &RunView) {
    if !run.plots.is_empty() {
        let _ = writeln!(w, "\n## Plots\n");
        for p in run.plots {
            // The SVG beside this file (`plots/`); the PNG has the same stem.
            let _ = writeln!(w, "![{}](plots/{}.svg)\n", p.title, p.name);
        }
    }
}

/// Plain text cells (the writer's or from outside) as one table row.
fn cells(texts: &[String]) -> String {
    let safe: Vec<String> = texts.iter().map(|t| cell(t)).collect();
    safe.join(" | ")
}

/// Plain text as a table cell.
fn cell(text: &str) -> String {
    md_cell(&md_text(text))
}

/// Text as an inline code span.
fn code(text: &impl std::fmt::Display) -> String {
    md_code(&text.to_string())
}

/// The side-by-side table of every arm and the paired tests.
fn strategies(w: &mut String, s: &Summary, c: &StrategyComparison) {
    let _ = writeln!(w, "## Strategies\n");
    let head: Vec<String> = s
        .arms
        .iter()
        .map(|a| {
            if a.header.strategy == c.baseline {
                format!("{} (baseline)", md_cell(&code(&a.header.strategy)))
            } else {
                md_cell(&code(&a.header.strategy))
            }
        })
        .collect();
    let _ = writeln!(w, "| | {} |", head.join(" | "));
    let _ = writeln!(w, "|---|{}", "---|".repeat(s.arms.len()));
    for (name, cells) in strategy_rows(s) {
        let _ = writeln!(w, "| {name} | {} |", self::cells(&cells));
    }
    let _ = writeln!(
        w,
        "\nPaired on the tasks both arms finished, final round (McNemar, exact; \
         b = baseline right and arm wrong, c = baseline wrong and arm right):\n"
    );
    for a in &c.arms {
        let _ = writeln!(
            w,
            "- {} vs {}: {} shared tasks, Acc@{} {} vs {}; b = {}, c = {}, p = {:.4}; {}",
            code(&a.strategy),
            code(&c.baseline),
            a.shared_tasks,
            s.header.rounds,
            percent(a.accuracy.as_ref()),
            percent(a.baseline_accuracy.as_ref()),
            a.mcnemar.b,
            a.mcnemar.c,
            a.mcnemar.p_value,
            md_text(&a.paired_line())
        );
    }
    for a in &s.arms {
        if let Some(m) = &a.environment.installs {
            let _ = writeln!(w, "\n### Installs ({})\n", code(&a.header.strategy));
            installs(w, m);
        }
    }
    let _ = writeln!(
        w,
        "\nThe sections below are the baseline's ({}).\n",
        code(&c.baseline)
    );
}

/// The dataset records `--skip-invalid` left out: not in any rate.
fn skipped(w: &mut String, skipped: &[crate::task::load::Skipped]) {
    if skipped.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "Skipped {} invalid dataset record(s) (`--skip-invalid`; not counted in any rate):\n",
        skipped.len()
    );
    for s in skipped {
        let id = s.id.as_ref().map(|id| format!("{}: ", code(id)));
        let _ = writeln!(
            w,
            "- {}:{}: {}{}",
            md_text(&s.file.display().to_string()),
            s.line,
            id.unwrap_or_default(),
            md_text(&s.reason)
        );
    }
    let _ = writeln!(w);
}

/// Environment costs of one arm, as list items (each only when known).
fn environment(w: &mut String, s: &Summary) {
    if let Some(r) = &s.environment.environment_error_rounds {
        let _ = writeln!(
            w,
            "- environment-error rounds (missing module, refused install): {}",
            counted(Some(r))
        );
    }
    if let Some(p) = &s.environment.kernel_start_ms {
        let _ = writeln!(w, "- kernel start (ms): p50 {:.0}, p95 {:.0}", p.p50, p.p95);
    }
    if let Some(m) = &s.environment.memory_peak_bytes {
        let _ = writeln!(
            w,
            "- memory peak per kernel: p50 {}, max {} ({} kernels)",
            size(m.p50),
            size(m.max),
            m.n
        );
    }
    if let Some(bytes) = s.environment.image_bytes {
        let _ = writeln!(w, "- image size on disk: {}", size(bytes));
    }
}

fn installs(w: &mut String, m: &InstallMetrics) {
    let _ = writeln!(
        w,
        "- {} install steps; {:.2} installs per task ({} tasks installed something)",
        m.steps, m.installs_per_task, m.tasks_with_installs
    );
    let _ = writeln!(
        w,
        "- store hits {}: p50 / p95 {} ms; downloads {}: p50 / p95 {} ms",
        m.store_hits,
        p50_p95(&m.latency_ms_store_hit),
        m.downloads,
        p50_p95(&m.latency_ms_download)
    );
    let _ = writeln!(w, "- failures: {}", m.failures);
    let _ = writeln!(w, "- denials: {}", md_text(&denials(m)));
    let _ = writeln!(w, "- package store used: {}", size(m.store_bytes));
}

#[cfg(test)]
mod tests {
    use super::super::testing::render;
    use super::super::testing::{allowed, config, step, task, two_arms, wheel, R};
    use super::*;
    use crate::record::StopOn;

    #[test]
    fn two_arms_get_the_strategies_table_and_the_paired_test() {
        let (cfg, records) = two_arms();
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(
            md.contains("arms `fat`, `dynamic` (baseline `fat`)"),
            "{md}"
        );
        let table = md
            .split("## Strategies\n")
            .nth(1)
            .expect("a Strategies section");
        let lines: Vec<&str> = table.lines().skip(1).take(3).collect();
        assert_eq!(lines[0], "| | `fat` (baseline) | `dynamic` |");
        assert_eq!(lines[1], "|---|---|---|");
        assert!(lines[2].starts_with("| Acc@0 | 50.0% ["), "{}", lines[2]);
        for row in [
            "| Acc@1 | 66.7% [",
            "| recovery rate |",
            "| environment-error rounds | 0.0% [0.0, 35.4] (0 of 7) | 33.3% [",
            "| installs per task | — | 0.00 |",
            "| install p50 / p95, store hit (ms) | — | n/a |",
            "| install p50 / p95, download (ms) | — | n/a |",
            "| install failures | — | 0 |",
            "| denials | — | 0 |",
            "| kernel start p50 (ms) | n/a | n/a |",
            "| memory peak per kernel p50 | n/a | n/a |",
            "| image size | 3.0 GiB | 200.0 MiB |",
        ] {
            assert!(table.contains(row), "no `{row}` in\n{table}");
        }
        assert!(
            table.contains("- `dynamic` vs `fat`: 5 shared tasks, Acc@1 80.0% ["),
            "{table}"
        );
        assert!(table.contains("b = 1, c = 2, p = 1.0000"), "{table}");
        assert!(table.contains("### Installs (`dynamic`)"));
        // The baseline's own sections follow, once.
        assert_eq!(md.matches("## Accuracy by round").count(), 1);
    }

    #[test]
    fn the_self_repair_section_has_one_table_per_view_with_an_arm_column() {
        let (mut cfg, records) = two_arms();
        let repairing = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(
            !repairing.contains("pass@k"),
            "pass@k is for resampling arms"
        );
        cfg.spec.policy.after_failure = crate::record::AfterFailure::Resample;
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        let section = md
            .split("\n## Self-repair\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a Self-repair section");
        for line in [
            "### Accuracy against cumulative budget",
            "| arm | round r | tokens | model ms | exec ms | wall ms | Acc@r |",
            "| fat | 1 | 140 | 12 | 6 | 19 | 66.7% |",
            "| dynamic | 1 | 180 | 15 | 8 | 24 | 83.3% |",
            "| budget (round r) | tokens | fat | dynamic |",
            "| 0 | 120 | 50.0% | 50.0% |",
            "| 1 | 160 | 66.7% | 72.2% |",
            "| arm | k | pass@k | Acc@(k−1) | tasks with &lt; k attempts |",
            "| dynamic | 2 | 83.3% | 83.3% | 3 |",
            "| arm | rounds | C→C | C→I | I→C | I→I |",
            "| fat | 0 → 1 | 3 | 0 | 1 | 2 |",
            "### Failure classes: round 0 against round 1",
            "| arm | round-0 class | tasks | correct at 1 | ModuleNotFoundError at 1 | \
             wrong_answer at 1 | repair rate (correct at 1) |",
            "| fat | correct | 3 | 3 | 0 | 0 | 100.0% [43.9, 100.0] (3 of 3) |",
            "| fat | wrong_answer | 2 | 0 | 0 | 2 | 0.0% [0.0, 65.8] (0 of 2) |",
            "| dynamic | ImportError | 1 | 1 | 0 | 0 |",
            "| dynamic | ModuleNotFoundError | 1 | 0 | 1 | 0 | 0.0% [",
            "| dynamic | 0.0% [0.0, 56.1] (0 of 3) | 100.0% [43.9, 100.0] (3 of 3) |",
        ] {
            assert!(section.contains(line), "no `{line}` in\n{section}");
        }
    }

    #[test]
    fn plots_are_embedded_last_and_only_when_drawn() {
        let (k, s) = (0, StopOn::Clean);
        let cfg = config(&["a"], k, s);
        let records = task("a", &[R::Right], s, k);
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(!md.contains("## Plots"), "{md}");
        let summary = crate::report::summarize(&cfg, &records);
        let plot = |name: &str, title: &str| crate::report::Plot {
            name: name.into(),
            title: title.into(),
            svg: String::new(),
            files: Vec::new(),
        };
        let plots = [plot("recovery", "Recovery"), plot("latency", "Latency")];
        let view = RunView {
            dir: std::path::Path::new("."),
            config: &cfg,
            records: &records,
            summary: &summary,
            plots: &plots,
        };
        let md = MarkdownExporter.render(&view).unwrap();
        let section = md.split("\n## Plots\n").nth(1).expect("a Plots section");
        assert_eq!(
            section.trim(),
            "![Recovery](plots/recovery.svg)\n\n![Latency](plots/latency.svg)"
        );
    }

    #[test]
    fn skipped_records_are_listed_only_when_there_are_some() {
        let (k, s) = (0, StopOn::Clean);
        let mut cfg = config(&["a"], k, s);
        let records = task("a", &[R::Right], s, k);
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(!md.contains("Skipped"), "{md}");
        cfg.spec.tasks.skip_invalid = true;
        cfg.provenance.skipped = vec![crate::task::load::Skipped {
            id: Some("5".into()),
            file: "da-dev-labels.jsonl".into(),
            line: 2,
            reason: "labels for `5`: answer `max_fare` is given twice".into(),
        }];
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(
            md.contains("Skipped 1 invalid dataset record(s) (`--skip-invalid`"),
            "{md}"
        );
        assert!(
            md.contains("- da-dev-labels.jsonl:2: `5`: labels for \\`5\\`: answer \\`max_fare\\`"),
            "{md}"
        );
    }

    #[test]
    fn one_dynamic_arm_gets_an_installs_section_and_no_strategies() {
        let (k, s) = (0, StopOn::Clean);
        let mut cfg = config(&["a"], k, s);
        cfg.spec.packages.strategies = vec![crate::pyenv::Strategy::Dynamic];
        let mut records = task("a", &[R::Right], s, k);
        records[0].installs = vec![step(
            vec![allowed("scipy")],
            vec![wheel("scipy", false, 3 << 20)],
            812.0,
            None,
        )];
        let md = render(&MarkdownExporter, &cfg, &records).unwrap();
        assert!(!md.contains("## Strategies"));
        assert!(md.contains("strategy `dynamic`"));
        let installs = md
            .split("## Installs\n")
            .nth(1)
            .expect("an Installs section");
        assert!(
            installs.contains("downloads 1: p50 / p95 812 / 812 ms"),
            "{installs}"
        );
        assert!(
            installs.contains("package store used: 3.0 MiB"),
            "{installs}"
        );
    }
}
