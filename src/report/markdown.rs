//! `report.md`: the run for people.

use std::fmt::Write;

use super::{labels, percent, Exporter, RenderError, Summary};

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, s: &Summary) -> Result<String, RenderError> {
        let mut md = String::new();
        let w = &mut md;
        let _ = writeln!(w, "# retrace run `{}`\n", s.run_id);
        for label in labels(s) {
            let _ = writeln!(w, "> **{label}**\n");
        }
        let _ = writeln!(
            w,
            "Suite `{}`, model `{}`, strategy `{}`, {} tasks ({} finished), rounds 0..={}, \
             stop rule `{}`, feedback `{}`.\n",
            s.suite,
            s.model,
            s.strategy,
            s.tasks,
            s.tasks_finished,
            s.rounds,
            s.stop_on,
            s.feedback
        );
        if !s.model_info.is_null() {
            let _ = writeln!(w, "Model details: `{}`\n", s.model_info);
        }
        let _ = writeln!(w, "Limits: {}.\n", s.limits.describe());
        let _ = writeln!(w, "## Accuracy by round\n");
        let _ = writeln!(
            w,
            "| round | Acc@r (95% CI) | Δ | solved ≤ r | exec-success | parse |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|---|");
        for (r, acc) in s.accuracy_by_round.iter().enumerate() {
            let _ = writeln!(
                w,
                "| {r} | {} | {:+.1} | {:.1}% | {} | {} |",
                percent(Some(acc)),
                100.0 * s.delta_by_round[r],
                100.0 * s.solved_by_round[r],
                percent(Some(&s.exec_success_by_round[r])),
                percent(Some(&s.parse_by_round[r])),
            );
        }
        let _ = writeln!(w, "\n## Self-correction\n");
        let _ = writeln!(
            w,
            "- recovery rate (over tasks wrong at round 0): {}",
            percent(s.recovery_rate.as_ref())
        );
        let _ = writeln!(
            w,
            "- recovery rate (over tasks wrong at round 0 that got a repair round): {}",
            percent(s.recovery_rate_repaired.as_ref())
        );
        let _ = writeln!(
            w,
            "- regression rate (over tasks right at round 0): {}",
            percent(s.regression_rate.as_ref())
        );
        let _ = writeln!(w, "- rounds used per task: {:.2}", s.rounds_used_mean);
        if let Some(rate) = &s.resent_code {
            let _ = writeln!(
                w,
                "- repair rounds that resent the previous code unchanged: {} ({} of {})",
                percent(Some(rate)),
                rate.successes,
                rate.n
            );
        }
        if s.reviews.prompts > 0 {
            let r = &s.reviews;
            let _ = writeln!(
                w,
                "- reviews: {} prompts, {} kept, {} revised ({} wrong→right, {} right→wrong)",
                r.prompts, r.kept, r.revised, r.wrong_to_right, r.right_to_wrong
            );
        }
        if let Some(last) = s.multi_part_accuracy_by_round.last() {
            let _ = writeln!(
                w,
                "- multi-answer parts correct at round {}: {}",
                s.rounds,
                percent(Some(last))
            );
        }
        if !s.round0_failures.is_empty() {
            let _ = writeln!(
                w,
                "\n### Round-0 failures and their fate by round {}\n",
                s.rounds
            );
            let _ = writeln!(
                w,
                "| round-0 failure | tasks | correct at K | ran cleanly later |"
            );
            let _ = writeln!(w, "|---|---|---|---|");
            for (kind, f) in &s.round0_failures {
                let _ = writeln!(
                    w,
                    "| {kind} | {} | {} | {} |",
                    f.tasks, f.fixed, f.ran_clean_later
                );
            }
        }
        if !s.accuracy_by_fault.is_empty() {
            let _ = writeln!(w, "\n### Accuracy by injected fault (synthetic)\n");
            let _ = writeln!(w, "| fault | tasks | Acc@0 | Acc@K |\n|---|---|---|---|");
            for (fault, a) in &s.accuracy_by_fault {
                let _ = writeln!(
                    w,
                    "| {fault} | {} | {} | {} |",
                    a.tasks,
                    percent(a.round0.as_ref()),
                    percent(a.final_round.as_ref())
                );
            }
        }
        let _ = writeln!(w, "\n## Executions\n");
        let _ = writeln!(
            w,
            "- {} executions, kill rate {}",
            s.executions,
            percent(s.kill_rate.total.as_ref())
        );
        for (reason, count) in &s.kill_rate.counts {
            let _ = writeln!(w, "  - {reason}: {count}");
        }
        let verdicts: Vec<String> = s.verdicts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(w, "- verdicts: {}", verdicts.join(", "));
        let _ = writeln!(
            w,
            "- infrastructure errors (tasks): {}",
            percent(s.infra_error_rate.as_ref())
        );
        let _ = writeln!(w, "\n## Latency (ms) and tokens\n");
        let _ = writeln!(w, "| | p50 | p95 |\n|---|---|---|");
        for (name, p) in [
            ("model", &s.latency_ms.model),
            ("exec", &s.latency_ms.exec),
            ("total", &s.latency_ms.total),
        ] {
            let _ = writeln!(w, "| {name} | {:.1} | {:.1} |", p.p50, p.p95);
        }
        let _ = writeln!(
            w,
            "\nTokens: {} prompt, {} completion, {:.0} per task, {:.1} completion tokens/s (p50).",
            s.tokens.prompt, s.tokens.completion, s.tokens.per_task_mean, s.tokens.per_second.p50
        );
        Ok(md)
    }
}
