//! The check's table, closing line and JUnit XML.

use std::fmt::Write as _;

use super::{CaseResult, CheckReport, MIB};
use crate::report::junit::{render as render_junit, TestCase};

/// The results as a fixed-width table, failures listed under their row.
pub fn table(results: &[CaseResult]) -> String {
    let width = results.iter().map(|r| r.id.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:<16}  {:<16}  {:<16}  {:>8}  {:>8}  {:>10}  result",
        "case", "category", "expected", "got", "kill ms", "time s", "harness MB"
    );
    for r in results {
        let _ = writeln!(out, "{}", row(r, width));
        for f in &r.failures {
            let _ = writeln!(out, "{:<width$}    - {f}", "");
        }
        // A benign notebook's cells that fail without confinement too: not
        // false positives, but listed.
        let unconfined_failures = r
            .benign
            .iter()
            .flat_map(|b| &b.cells)
            .filter(|c| c.status == super::benign::CellStatus::FailsUnconfined);
        for c in unconfined_failures {
            let why = c.reason.as_deref().unwrap_or("");
            let _ = writeln!(out, "{:<width$}    ~ cell {}: {why}", "", c.index);
        }
    }
    out
}

/// One table row (also printed as results come in).
pub fn row(r: &CaseResult, width: usize) -> String {
    let got = r.got.map(|v| v.as_str()).unwrap_or("-");
    let kill = r
        .kill_ms
        .map(|k| format!("{k:.1}"))
        .unwrap_or_else(|| "-".into());
    // Growth over the harness's RSS when the case started.
    let harness = r
        .harness
        .as_ref()
        .map(|m| format!("+{:.1}", m.growth_mib()))
        .unwrap_or_else(|| "-".into());
    format!(
        "{:<width$}  {:<16}  {:<16}  {:<16}  {:>8}  {:>8.1}  {:>10}  {}",
        r.id,
        r.category.as_str(),
        r.expected.as_str(),
        got,
        kill,
        r.duration_ms / 1e3,
        harness,
        if r.pass { "pass" } else { "FAIL" }
    )
}

/// The closing line: counts, kill latency (goal: p99 ≤ 100 ms) and the
/// harness's memory.
pub fn summary_line(report: &CheckReport) -> String {
    let s = &report.summary;
    let ms = |v: Option<f64>| {
        v.map(|v| format!("{v:.1} ms"))
            .unwrap_or_else(|| "-".into())
    };
    let fallbacks = report
        .results
        .iter()
        .filter(|r| {
            r.start
                .as_deref()
                .is_some_and(|s| s.starts_with("fallback"))
        })
        .count();
    let fallbacks = if fallbacks > 0 {
        format!("; {fallbacks} kernel(s) started cold: the zygote could not serve")
    } else {
        String::new()
    };
    let mib = |v: Option<u64>| {
        v.map(|v| format!("{:.1} MiB", v as f64 / MIB as f64))
            .unwrap_or_else(|| "-".into())
    };
    let growth_case = s
        .harness_growth_max_case
        .as_deref()
        .map(|id| format!(" ({id})"))
        .unwrap_or_default();
    let cells = s
        .cells
        .map(|c| {
            format!(
                "; cells: {} compared, {} same, {} varied between unconfined runs too, {} failed unconfined too, {} differ",
                c.cells, c.same, c.varies, c.fails_unconfined, c.differs
            )
        })
        .unwrap_or_default();
    format!(
        "{} passed, {} failed{cells}; kill latency over {} killed case(s): p50 {}, p99 {}, max {}; harness memory: largest growth during a case {}{growth_case}, peak {}; {:.1} s with {} job(s){fallbacks}",
        s.passed,
        s.failed,
        s.killed,
        ms(s.kill_ms_p50),
        ms(s.kill_ms_p99),
        ms(s.kill_ms_max),
        mib(s.harness_growth_max_bytes),
        mib(s.harness_peak_max_bytes),
        report.duration_ms / 1e3,
        report.jobs
    )
}

/// The report as JUnit XML: one `<testcase classname="<category>"
/// name="<id>">` per case.
pub fn junit(report: &CheckReport) -> String {
    let cases: Vec<TestCase> = report
        .results
        .iter()
        .map(|r| {
            let got = r.got.map(|v| v.as_str()).unwrap_or("-");
            let mut out = format!("expected {} got {}", r.expected, got);
            if !r.flags.is_empty() {
                let _ = write!(out, " flags [{}]", r.flags.join(", "));
            }
            if let Some(k) = r.kill_ms {
                let _ = write!(out, " kill {k:.1} ms");
            }
            if let Some(b) = &r.benign {
                let c = b.counts;
                let _ = write!(
                    out,
                    " cells {} same {} varied {} failed unconfined {} differ {}",
                    c.cells, c.same, c.varies, c.fails_unconfined, c.differs
                );
            }
            if let Some(m) = &r.harness {
                let _ = write!(
                    out,
                    " harness +{:.1} MiB (peak {:.1} MiB)",
                    m.growth_mib(),
                    m.peak_mib()
                );
            }
            TestCase {
                classname: r.category.as_str().to_string(),
                name: r.id.clone(),
                time_secs: r.duration_ms / 1e3,
                failure: (!r.pass).then(|| {
                    (
                        r.failures
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "failed".into()),
                        r.failures.join("\n"),
                    )
                }),
                system_out: Some(out),
            }
        })
        .collect();
    render_junit(JUNIT_SUITE, &cases)
}

/// The `<testsuite name>` of sandbox checks.
pub const JUNIT_SUITE: &str = "retrace-sandbox";

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::conformance::check::{HarnessMemory, Summary};
    use crate::conformance::corpus::Case;
    use crate::sandbox::{SandboxLimits, Verdict};

    #[test]
    fn table_lists_failures() {
        let case = Case::parse(
            "id = \"x\"\ncategory = \"memory\"\ndescription = \"d\"\ncode = \"1\"\nexpect = \"ok\"",
            Path::new("x.toml"),
        )
        .unwrap();
        let mut r = CaseResult::new(&case, &SandboxLimits::default());
        r.got = Some(Verdict::OomKilled);
        r.kill_ms = Some(12.5);
        r.harness = Some(HarnessMemory::new(40 * MIB, 43 * MIB + MIB / 2));
        r.fail("expected verdict ok but got oom_killed".into());
        let text = table(&[r.clone()]);
        assert!(text.contains("FAIL"), "{text}");
        assert!(text.contains("12.5"), "{text}");
        assert!(text.contains("harness MB"), "{text}");
        assert!(text.contains("+3.5"), "{text}");
        assert!(text.contains("- expected verdict ok"), "{text}");
        let s = Summary::of(&[r]);
        assert_eq!((s.total, s.failed, s.killed), (1, 1, 1));
        assert_eq!(s.harness_growth_max_bytes, Some(3 * MIB + MIB / 2));
        assert_eq!(s.harness_growth_max_case.as_deref(), Some("x"));
        assert_eq!(s.harness_peak_max_bytes, Some(43 * MIB + MIB / 2));
    }
}
