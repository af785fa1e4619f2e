//! `summary.csv`: one row per metric (and round), for spreadsheets and
//! data frames: `metric,round,value,ci_low,ci_high,n,stop_on,feedback`. The
//! last two columns repeat the run's stop rule and feedback mode on every
//! row, so a row pasted elsewhere still says whether ground truth steered
//! the run (`stop_on` = `correct`).

use super::metrics::Rate;
use super::{Exporter, RenderError, Summary};

pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn file_name(&self) -> &'static str {
        "summary.csv"
    }

    fn render(&self, s: &Summary) -> Result<String, RenderError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let err = RenderError::from;
        w.write_record([
            "metric", "round", "value", "ci_low", "ci_high", "n", "stop_on", "feedback",
        ])
        .map_err(err)?;
        let (stop_on, feedback) = (s.stop_on.as_str(), s.feedback.as_str());
        let mut rate = |metric: &str, round: Option<usize>, r: Option<&Rate>| {
            let round = round.map(|r| r.to_string()).unwrap_or_default();
            match r {
                Some(r) => w.write_record([
                    metric,
                    &round,
                    &format!("{:.6}", r.value),
                    &format!("{:.6}", r.ci_low),
                    &format!("{:.6}", r.ci_high),
                    &r.n.to_string(),
                    stop_on,
                    feedback,
                ]),
                None => w.write_record([metric, &round, "", "", "", "0", stop_on, feedback]),
            }
        };
        for (i, r) in s.accuracy_by_round.iter().enumerate() {
            rate("accuracy", Some(i), Some(r)).map_err(err)?;
        }
        for (i, r) in s.exec_success_by_round.iter().enumerate() {
            rate("exec_success", Some(i), Some(r)).map_err(err)?;
        }
        for (i, r) in s.parse_by_round.iter().enumerate() {
            rate("parse", Some(i), Some(r)).map_err(err)?;
        }
        for (i, r) in s.multi_part_accuracy_by_round.iter().enumerate() {
            rate("multi_part_accuracy", Some(i), Some(r)).map_err(err)?;
        }
        rate("recovery_rate", None, s.recovery_rate.as_ref()).map_err(err)?;
        rate(
            "recovery_rate_repaired",
            None,
            s.recovery_rate_repaired.as_ref(),
        )
        .map_err(err)?;
        rate("regression_rate", None, s.regression_rate.as_ref()).map_err(err)?;
        rate("resent_code", None, s.resent_code.as_ref()).map_err(err)?;
        rate("kill_rate", None, s.kill_rate.total.as_ref()).map_err(err)?;
        rate("infra_error_rate", None, s.infra_error_rate.as_ref()).map_err(err)?;
        for (fault, a) in &s.accuracy_by_fault {
            rate(
                &format!("accuracy_by_fault:{fault}"),
                Some(0),
                a.round0.as_ref(),
            )
            .map_err(err)?;
            let last = Some(s.rounds as usize);
            rate(
                &format!("accuracy_by_fault:{fault}"),
                last,
                a.final_round.as_ref(),
            )
            .map_err(err)?;
        }
        let mut plain = |metric: String, value: f64| {
            w.write_record([
                metric.as_str(),
                "",
                &format!("{value:.6}"),
                "",
                "",
                "",
                stop_on,
                feedback,
            ])
        };
        for (kind, fate) in &s.round0_failures {
            plain(format!("round0_failures:{kind}"), fate.tasks as f64).map_err(err)?;
            plain(format!("round0_failures_fixed:{kind}"), fate.fixed as f64).map_err(err)?;
        }
        plain("review_prompts".into(), s.reviews.prompts as f64).map_err(err)?;
        plain("review_kept".into(), s.reviews.kept as f64).map_err(err)?;
        plain("review_revised".into(), s.reviews.revised as f64).map_err(err)?;
        for (reason, v) in &s.kill_rate.by_reason {
            plain(format!("kill_rate:{reason}"), *v).map_err(err)?;
        }
        for (name, p) in [
            ("model", &s.latency_ms.model),
            ("exec", &s.latency_ms.exec),
            ("total", &s.latency_ms.total),
        ] {
            plain(format!("latency_ms_p50:{name}"), p.p50).map_err(err)?;
            plain(format!("latency_ms_p95:{name}"), p.p95).map_err(err)?;
        }
        plain("tokens_prompt".into(), s.tokens.prompt as f64).map_err(err)?;
        plain("tokens_completion".into(), s.tokens.completion as f64).map_err(err)?;
        plain("tokens_per_task".into(), s.tokens.per_task_mean).map_err(err)?;
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8(bytes)?)
    }
}
