//! `report.md`: the run for people, the Markdown of the run's document.

use super::document::markdown;
use super::error::RenderError;
use super::export::Exporter;
use super::run_document;
use super::view::RunView;

pub struct MarkdownExporter;

impl<'a> Exporter<RunView<'a>> for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, run: &RunView<'a>) -> Result<String, RenderError> {
        Ok(markdown::render(&run_document::build(run)))
    }
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
