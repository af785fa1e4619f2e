//! Where a run's time went: the rounds' time split into model requests,
//! executions (installs apart) and the harness itself (kernel starts, the
//! masking check, scoring: the rest of a round's time); where the model
//! time went on a server that reports it (queue wait, prompt evaluation,
//! generation, prompt tokens from cache); and the *model floor*, the time
//! the run's own token counts need at the server's idle speeds one request
//! at a time, beside the run's wall time.

use serde::{Deserialize, Serialize};

use crate::record::{AttemptRecord, RunConfig};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimeSpent {
    /// Sum over every round of its time (model + execution + harness).
    pub rounds_ms: f64,
    /// Shares of `rounds_ms`, summing to 1.
    pub model_share: f64,
    pub exec_share: f64,
    pub install_share: f64,
    pub harness_share: f64,
    /// Requests whose server reported its timings.
    pub requests_with_timings: u64,
    /// Of the model time of those requests: waiting (for a slot, HTTP).
    pub queue_ms: f64,
    pub prompt_ms: f64,
    pub generation_ms: f64,
    /// Prompt tokens evaluated and taken from the server's cache.
    pub prompt_tokens_evaluated: u64,
    pub prompt_tokens_cached: u64,
    /// The run's wall time over all its sessions, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
    /// The run's evaluated prompt and generated tokens at the server's idle
    /// speeds, one request at a time; absent without those speeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_floor_ms: Option<f64>,
}

/// Folded from +0.0: an empty f64 `sum` is -0.0, which summary.json would
/// print.
fn add(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

/// Idle speeds of the model server in tokens per second, as recorded in
/// `model_info` (`idle_prompt_tps`, `idle_generation_tps`).
fn idle_speeds(config: &RunConfig) -> Option<(f64, f64)> {
    let info = &config.provenance.model_info;
    let speed = |key: &str| info.get(key)?.as_f64().filter(|v| *v > 0.0);
    Some((speed("idle_prompt_tps")?, speed("idle_generation_tps")?))
}

impl TimeSpent {
    /// None for a run without rounds.
    pub fn of(config: &RunConfig, records: &[AttemptRecord]) -> Option<TimeSpent> {
        let sum = |f: &dyn Fn(&AttemptRecord) -> f64| add(records.iter().map(f));
        let rounds_ms = sum(&|r| r.timings_ms.total);
        if records.is_empty() || rounds_ms <= 0.0 {
            return None;
        }
        let model = sum(&|r| r.timings_ms.model);
        let install = sum(&|r| r.timings_ms.install.unwrap_or(0.0));
        let exec = sum(&|r| r.timings_ms.exec) - install;
        let harness = (rounds_ms - model - exec - install).max(0.0);
        let whole = model + exec + install + harness;
        let timed: Vec<_> = records.iter().filter_map(|r| r.server_timings).collect();
        let evaluated: u64 = timed.iter().map(|t| t.prompt_tokens).sum();
        // Replies without server timings count their usage: every prompt
        // token evaluated, none cached.
        let untimed = records.iter().filter(|r| r.server_timings.is_none());
        let (prompt, generated) = untimed.fold(
            (
                evaluated,
                timed.iter().map(|t| t.generated_tokens).sum::<u64>(),
            ),
            |(p, g), r| {
                (
                    p.saturating_add(r.tokens.prompt()),
                    g.saturating_add(r.tokens.completion()),
                )
            },
        );
        let model_floor_ms = idle_speeds(config)
            .map(|(p_tps, g_tps)| 1e3 * (prompt as f64 / p_tps + generated as f64 / g_tps));
        Some(TimeSpent {
            rounds_ms,
            model_share: model / whole,
            exec_share: exec / whole,
            install_share: install / whole,
            harness_share: harness / whole,
            requests_with_timings: timed.len() as u64,
            queue_ms: add(timed.iter().map(|t| t.queue_ms)),
            prompt_ms: add(timed.iter().map(|t| t.prompt_ms)),
            generation_ms: add(timed.iter().map(|t| t.generation_ms)),
            prompt_tokens_evaluated: evaluated,
            prompt_tokens_cached: timed.iter().map(|t| t.cached_tokens).sum(),
            wall_ms: (config.provenance.wall_ms > 0.0).then_some(config.provenance.wall_ms),
            model_floor_ms,
        })
    }

    /// `model 91 %, exec 6 %, harness 3 %; wall 1.2× the model floor`: the
    /// line the terminal and report.md print.
    pub fn line(&self) -> String {
        let pct = |v: f64| format!("{:.0} %", 100.0 * v);
        let mut parts = vec![
            format!("model {}", pct(self.model_share)),
            format!("exec {}", pct(self.exec_share)),
        ];
        if self.install_share > 0.0 {
            parts.push(format!("installs {}", pct(self.install_share)));
        }
        parts.push(format!("harness {}", pct(self.harness_share)));
        let mut line = parts.join(", ");
        match (self.wall_ms, self.model_floor_ms) {
            (Some(wall), Some(floor)) if floor > 0.0 => {
                line += &format!("; wall {:.1}× the model floor", wall / floor);
            }
            (Some(wall), _) => line += &format!("; wall {:.0} s", wall / 1e3),
            _ => {}
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServerTimings;
    use crate::report::testing::two_arms;

    #[test]
    fn shares_split_the_rounds_time_and_the_floor_uses_the_idle_speeds() {
        let (mut cfg, mut records) = two_arms();
        for r in &mut records {
            r.timings_ms.model = 60.0;
            r.timings_ms.exec = 30.0;
            r.timings_ms.install = None;
            r.timings_ms.total = 100.0;
            r.tokens.prompt_tokens = Some(100);
            r.tokens.completion_tokens = Some(10);
            r.server_timings = None;
        }
        records[0].timings_ms.install = Some(10.0);
        records[0].server_timings = Some(ServerTimings {
            queue_ms: 5.0,
            prompt_tokens: 20,
            cached_tokens: 80,
            prompt_ms: 15.0,
            generated_tokens: 10,
            generation_ms: 40.0,
            ..ServerTimings::default()
        });
        let n = records.len() as f64;
        let t = TimeSpent::of(&cfg, &records).unwrap();
        assert!((t.model_share - 0.6).abs() < 1e-9, "{t:?}");
        assert!((t.install_share - 10.0 / (100.0 * n)).abs() < 1e-9, "{t:?}");
        assert!((t.exec_share + t.install_share - 0.3).abs() < 1e-9, "{t:?}");
        assert!((t.harness_share - 0.1).abs() < 1e-9, "{t:?}");
        assert_eq!(
            (t.prompt_tokens_evaluated, t.prompt_tokens_cached),
            (20, 80)
        );
        assert_eq!(t.model_floor_ms, None, "no idle speeds recorded");
        assert!(!t.line().contains("floor"), "{}", t.line());

        cfg.provenance.model_info = serde_json::json!({
            "idle_prompt_tps": 100.0, "idle_generation_tps": 10.0
        });
        cfg.provenance.wall_ms = 40_000.0;
        let t = TimeSpent::of(&cfg, &records).unwrap();
        // The timed request evaluated 20 prompt tokens; the rest 100 each.
        let prompt = 20.0 + 100.0 * (n - 1.0);
        let floor = 1e3 * (prompt / 100.0 + 10.0 * n / 10.0);
        assert!((t.model_floor_ms.unwrap() - floor).abs() < 1e-6, "{t:?}");
        let line = t.line();
        assert!(line.starts_with("model 60 %, exec "), "{line}");
        assert!(line.contains("installs "), "{line}");
        assert!(
            line.ends_with(&format!("; wall {:.1}× the model floor", 40_000.0 / floor)),
            "{line}"
        );
    }
}
