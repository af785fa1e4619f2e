//! The rows and cells the Markdown and HTML reports share: the
//! side-by-side strategies table, rates with their counts, install
//! denials, sizes.

use super::installs::InstallMetrics;
use super::labels::percent;
use super::metrics::ArmSummary;
use super::stats::{Percentiles, Rate};
use super::Summary;

/// The rows of the side-by-side strategies table (name, one cell per
/// arm), shared by the Markdown and HTML reports.
pub(super) fn strategy_rows(s: &Summary) -> Vec<(String, Vec<String>)> {
    let mut rows = Vec::new();
    let mut row = |name: &str, cell: &dyn Fn(&ArmSummary) -> String| {
        rows.push((name.to_string(), s.arms.iter().map(cell).collect()));
    };
    for r in 0..=s.header.rounds as usize {
        row(&format!("Acc@{r}"), &|a| {
            percent(a.answers.accuracy_by_round.get(r))
        });
    }
    row("recovery rate", &|a| {
        percent(a.answers.recovery_rate.as_ref())
    });
    row("regression rate", &|a| {
        percent(a.answers.regression_rate.as_ref())
    });
    row("kill rate", &|a| {
        percent(a.execution.kill_rate.total.as_ref())
    });
    row("environment-error rounds", &|a| {
        counted(a.environment.environment_error_rounds.as_ref())
    });
    row("installs per task", &|a| {
        installed(a, |m| format!("{:.2}", m.installs_per_task))
    });
    row("install p50 / p95, store hit (ms)", &|a| {
        installed(a, |m| p50_p95(&m.latency_ms_store_hit))
    });
    row("install p50 / p95, download (ms)", &|a| {
        installed(a, |m| p50_p95(&m.latency_ms_download))
    });
    row("install failures", &|a| {
        installed(a, |m| m.failures.to_string())
    });
    row("denials", &|a| installed(a, denials));
    row("kernel start p50 (ms)", &|a| {
        a.environment
            .kernel_start_ms
            .map_or_else(|| "n/a".into(), |p| format!("{:.0}", p.p50))
    });
    row("memory peak per kernel p50", &|a| {
        a.environment
            .memory_peak_bytes
            .map_or_else(|| "n/a".into(), |m| size(m.p50))
    });
    row("image size", &|a| {
        a.environment.image_bytes.map_or_else(|| "n/a".into(), size)
    });
    rows
}

/// An install metric of an arm, `—` for an arm that does not install.
fn installed(a: &ArmSummary, f: impl Fn(&InstallMetrics) -> String) -> String {
    a.environment
        .installs
        .as_ref()
        .map_or_else(|| "—".into(), f)
}

/// A rate with its counts: `12.5% [..] (1 of 8)`.
pub(super) fn counted(r: Option<&Rate>) -> String {
    match r {
        Some(r) => format!("{} ({} of {})", percent(Some(r)), r.successes, r.n),
        None => "n/a".into(),
    }
}

pub(super) fn p50_p95(p: &Percentiles) -> String {
    if p.n == 0 {
        "n/a".into()
    } else {
        format!("{:.0} / {:.0}", p.p50, p.p95)
    }
}

pub(super) fn denials(m: &InstallMetrics) -> String {
    if m.denials_by_reason.is_empty() {
        return m.denials.to_string();
    }
    let reasons: Vec<String> = m
        .denials_by_reason
        .iter()
        .map(|(reason, n)| format!("{reason} {n}"))
        .collect();
    format!("{} ({})", m.denials, reasons.join(", "))
}

/// Bytes for people, in binary units.
pub(super) fn size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            return format!("{:.1} {unit}", bytes as f64 / scale as f64);
        }
    }
    format!("{bytes} B")
}
