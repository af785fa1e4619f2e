//! `summary.csv`: one row per metric (and round), for spreadsheets and
//! data frames: `metric,round,value,ci_low,ci_high,n,stop_on,feedback,arm`.
//! `stop_on` and `feedback` repeat the run's stop rule and feedback mode on
//! every row, so a row pasted elsewhere still says whether ground truth
//! steered the run (`stop_on` = `correct`). `arm` is the package strategy
//! the row describes: the baseline's rows come first (the only rows of a
//! one-strategy run), then every other arm's, then the comparison rows
//! (`paired_accuracy*`, `shared_tasks`, `mcnemar_*`,
//! `min_detectable_difference`) under the compared arm, then the
//! comparable budgets (`comparable_budget_tokens` under the baseline,
//! `accuracy_at_budget` under each arm measured there).

use super::error::RenderError;
use super::export::Exporter;
use super::metrics::ArmSummary;
use super::metrics::{self, Value};
use super::stats::Rate;
use super::view::RunView;

pub struct CsvExporter;

type Writer = csv::Writer<Vec<u8>>;

impl<'a> Exporter<RunView<'a>> for CsvExporter {
    fn file_name(&self) -> &'static str {
        "summary.csv"
    }

    fn render(&self, run: &RunView<'a>) -> Result<String, RenderError> {
        let s = run.summary;
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "metric", "round", "value", "ci_low", "ci_high", "n", "stop_on", "feedback", "arm",
        ])?;
        let mut rows = Rows {
            w: &mut w,
            stop_on: &s.header.stop_on,
            feedback: &s.header.feedback,
            arm: &s.header.strategy,
        };
        rows.summary(s)?;
        for arm in s.arms.iter().skip(1) {
            rows.arm = &arm.header.strategy;
            rows.summary(arm)?;
        }
        for c in &s.comparisons {
            let last = c.last();
            rows.arm = &c.new;
            rows.plain("shared_tasks".into(), None, c.shared_tasks.len() as f64)?;
            for r in &c.rounds {
                let round = Some(r.round as usize);
                rows.rate("paired_accuracy_baseline", round, Some(&r.base))?;
                rows.rate("paired_accuracy", round, Some(&r.new))?;
            }
            rows.plain("mcnemar_b".into(), None, last.mcnemar.b as f64)?;
            rows.plain("mcnemar_c".into(), None, last.mcnemar.c as f64)?;
            rows.plain("mcnemar_p".into(), None, last.mcnemar.p_value)?;
            if let Some(mdd) = last.min_detectable_difference {
                rows.plain("min_detectable_difference".into(), None, mdd)?;
            }
        }
        for b in &s.accuracy_at_budget {
            let round = Some(b.round);
            rows.arm = &s.header.strategy;
            rows.plain("comparable_budget_tokens".into(), round, b.tokens)?;
            for a in &b.accuracy {
                if let Some(acc) = a.accuracy {
                    rows.arm = &a.arm;
                    rows.plain("accuracy_at_budget".into(), round, acc)?;
                }
            }
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8(bytes)?)
    }
}

/// The rows of one arm, each carrying the run's labels and the arm.
struct Rows<'a> {
    w: &'a mut Writer,
    stop_on: &'a str,
    feedback: &'a str,
    arm: &'a str,
}

impl Rows<'_> {
    fn rate(&mut self, metric: &str, round: Option<usize>, r: Option<&Rate>) -> csv::Result<()> {
        let round = round.map(|r| r.to_string()).unwrap_or_default();
        let (stop_on, feedback, arm) = (self.stop_on, self.feedback, self.arm);
        match r {
            Some(r) => self.w.write_record([
                metric,
                &round,
                &format!("{:.6}", r.value),
                &format!("{:.6}", r.ci_low),
                &format!("{:.6}", r.ci_high),
                &r.n.to_string(),
                stop_on,
                feedback,
                arm,
            ]),
            None => self
                .w
                .write_record([metric, &round, "", "", "", "0", stop_on, feedback, arm]),
        }
    }

    fn plain(&mut self, metric: String, round: Option<usize>, value: f64) -> csv::Result<()> {
        let (stop_on, feedback, arm) = (self.stop_on, self.feedback, self.arm);
        let round = round.map(|r| r.to_string()).unwrap_or_default();
        self.w.write_record([
            metric.as_str(),
            &round,
            &format!("{value:.6}"),
            "",
            "",
            "",
            stop_on,
            feedback,
            arm,
        ])
    }

    /// Every metric of one arm's summary, as the registry lists them.
    fn summary(&mut self, s: &ArmSummary) -> csv::Result<()> {
        for m in metrics::values(s) {
            match m.value {
                Value::Rate(r) => self.rate(&m.name, m.round, r.as_ref())?,
                Value::Plain(v) => self.plain(m.name, m.round, v)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::render;
    use super::super::testing::{config, task, two_arms, R};
    use super::*;
    use crate::record::StopOn;

    fn rows(text: &str) -> Vec<Vec<String>> {
        let mut r = csv::Reader::from_reader(text.as_bytes());
        r.records()
            .map(|row| row.unwrap().iter().map(str::to_owned).collect())
            .collect()
    }

    #[test]
    fn one_arm_rows_name_their_arm() {
        let (k, s) = (0, StopOn::Clean);
        let records = task("a", &[R::Right], s, k);
        let text = render(&CsvExporter, &config(&["a"], k, s), &records).unwrap();
        assert!(text.starts_with("metric,round,value,ci_low,ci_high,n,stop_on,feedback,arm\n"));
        let rows = rows(&text);
        assert!(rows.iter().all(|r| r[8] == "fat"));
        assert_eq!(rows[0][..3], ["accuracy", "0", "1.000000"]);
    }

    #[test]
    fn every_arm_has_its_rows_and_the_comparison_follows() {
        let (cfg, records) = two_arms();
        let rows = rows(&render(&CsvExporter, &cfg, &records).unwrap());
        let find = |metric: &str, round: &str, arm: &str| -> String {
            rows.iter()
                .find(|r| r[0] == metric && r[1] == round && r[8] == arm)
                .unwrap_or_else(|| panic!("no {metric}@{round} for {arm}"))[2]
                .clone()
        };
        assert_eq!(find("accuracy", "1", "fat"), "0.666667");
        assert_eq!(find("accuracy", "1", "dynamic"), "0.833333");
        assert_eq!(find("environment_error_rounds", "", "dynamic"), "0.333333");
        assert_eq!(
            find("image_bytes", "", "dynamic"),
            (200u64 << 20).to_string() + ".000000"
        );
        assert_eq!(find("installs_per_task", "", "dynamic"), "0.000000");
        assert_eq!(find("paired_accuracy_baseline", "1", "dynamic"), "0.600000");
        assert_eq!(find("paired_accuracy", "1", "dynamic"), "0.800000");
        assert_eq!(find("shared_tasks", "", "dynamic"), "5.000000");
        assert_eq!(find("mcnemar_b", "", "dynamic"), "1.000000");
        assert_eq!(find("mcnemar_c", "", "dynamic"), "2.000000");
        assert_eq!(find("mcnemar_p", "", "dynamic"), "1.000000");
        // Self-repair rows: by round where they have one.
        assert_eq!(find("budget_tokens", "1", "fat"), "140.000000");
        assert_eq!(find("correct_to_correct", "1", "fat"), "3.000000");
        assert_eq!(find("incorrect_to_correct", "1", "fat"), "1.000000");
        assert_eq!(find("repair_rate:KeyError", "", "dynamic"), "1.000000");
        assert_eq!(find("comparable_budget_tokens", "1", "fat"), "160.000000");
        assert_eq!(find("accuracy_at_budget", "0", "dynamic"), "0.500000");
        assert_eq!(find("accuracy_at_budget", "1", "dynamic"), "0.722222");
        // fat had stopped by the round-1 budget: its final accuracy.
        assert_eq!(find("accuracy_at_budget", "1", "fat"), "0.666667");
        // 5 pairs, 3 discordant (see stats::min_detectable_difference).
        assert_eq!(find("min_detectable_difference", "", "dynamic"), "0.939362");
        // The baseline's rows come first.
        assert_eq!(rows[0][8], "fat");
        assert!(!rows
            .iter()
            .any(|r| r[0] == "installs_per_task" && r[8] == "fat"));
    }
}
