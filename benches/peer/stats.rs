//! Nearest-rank percentiles of a benchmark's samples (the definition every
//! retrace report and the Python side use), shared by the peer examples.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(samples: &[f64]) -> Stats {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let pct = |p: f64| retrace::util::stats::percentile(&sorted, p).unwrap_or(f64::NAN);
        Stats {
            n: sorted.len(),
            p50: pct(50.0),
            p90: pct(90.0),
            p95: pct(95.0),
            p99: pct(99.0),
            mean: sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
            min: sorted.first().copied().unwrap_or(f64::NAN),
            max: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }
}
