//! One cell's outputs from a confined and an unconfined run, normalised,
//! and the comparison of the two.

use serde::Serialize;

use super::normalise::{normalise, KernelPaths};
use crate::conformance::expectation::shorten;
use crate::kernel::{Bundle, Outcome};
use crate::sandbox::Verdict;

/// What a cell showed, normalised: the part of an outcome that must be the
/// same confined and unconfined.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Surface {
    pub stdout: String,
    pub stderr: String,
    /// The `text/plain` of each `execute_result`.
    pub results: Vec<String>,
    /// The MIME types of each `execute_result`, then of each display.
    pub result_kinds: Vec<String>,
    pub display_kinds: Vec<String>,
}

/// One cell of one run.
#[derive(Debug, Clone)]
pub struct CellRun {
    pub verdict: Verdict,
    pub surface: Surface,
    /// `ename: evalue` of the cell's error, shortened.
    pub error: Option<String>,
    /// Wall time of the execution.
    pub ms: f64,
}

impl CellRun {
    pub fn of(outcome: &Outcome, paths: &KernelPaths) -> CellRun {
        let kinds = |b: &Bundle| {
            let mut k: Vec<&str> = b.data.keys().map(String::as_str).collect();
            k.sort_unstable();
            k.join("+")
        };
        CellRun {
            verdict: outcome.verdict,
            surface: Surface {
                stdout: normalise(&outcome.stdout, paths),
                stderr: normalise(&outcome.stderr, paths),
                results: outcome
                    .results
                    .iter()
                    .map(|b| normalise(b.text().unwrap_or(""), paths))
                    .collect(),
                result_kinds: outcome.results.iter().map(kinds).collect(),
                display_kinds: outcome.displays.iter().map(kinds).collect(),
            },
            error: outcome
                .error
                .as_ref()
                .map(|e| shorten(&format!("{}: {}", e.ename, e.evalue), 200)),
            ms: outcome.timings_ms.total,
        }
    }

    fn ok(&self) -> bool {
        self.verdict == Verdict::Ok
    }
}

/// How a cell compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Ok in both runs, the same output.
    Same,
    /// Ok in both runs; its text differs between two unconfined runs as
    /// well (unseeded randomness), or the notebook lists it as varying, so
    /// only the kinds of its outputs are compared, and they are the same.
    Varies,
    /// Failed unconfined: not a false positive.
    FailsUnconfined,
    /// Ok unconfined, but failed or showed something else confined: a
    /// false positive.
    Differs,
}

/// The comparison of one cell.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// 0-based, among the notebook's cells in the corpus.
    pub index: usize,
    pub status: CellStatus,
    pub unconfined: Verdict,
    pub confined: Verdict,
    /// Wall time of each side's execution, in milliseconds (not compared).
    pub unconfined_ms: f64,
    pub confined_ms: f64,
    /// What differs, with an excerpt of each side; or why the cell failed
    /// unconfined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether the two runs of a cell were ok and showed different text: the
/// case where a second unconfined run tells variance from confinement.
pub fn text_differs(unconfined: &CellRun, confined: &CellRun) -> bool {
    unconfined.ok() && confined.ok() && unconfined.surface != confined.surface
}

/// Compares cell `index` of the unconfined run (`second`: another
/// unconfined run, when one was made) with the confined one; `declared`:
/// the notebook lists the cell's text as varying.
pub fn compare(
    index: usize,
    unconfined: &CellRun,
    confined: &CellRun,
    second: Option<&CellRun>,
    declared: bool,
) -> CellReport {
    let report = |status, reason| CellReport {
        index,
        status,
        unconfined: unconfined.verdict,
        confined: confined.verdict,
        unconfined_ms: unconfined.ms,
        confined_ms: confined.ms,
        reason,
    };
    if !unconfined.ok() {
        let why = format!(
            "fails unconfined too: {}{}",
            unconfined.verdict,
            unconfined
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        return report(CellStatus::FailsUnconfined, Some(why));
    }
    if !confined.ok() {
        let why = format!(
            "unconfined ok, confined {}{}",
            confined.verdict,
            confined
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
        return report(CellStatus::Differs, Some(why));
    }
    if unconfined.surface == confined.surface {
        return report(CellStatus::Same, None);
    }
    let varies = declared || second.is_some_and(|s| s.surface != unconfined.surface);
    if varies && same_kinds(&unconfined.surface, &confined.surface) {
        return report(CellStatus::Varies, None);
    }
    let what = if varies {
        "the kinds of its outputs differ (its text varies from run to run)".to_string()
    } else {
        first_difference(&unconfined.surface, &confined.surface)
    };
    report(CellStatus::Differs, Some(what))
}

/// Equal in everything but text: which outputs there were, of which types.
fn same_kinds(a: &Surface, b: &Surface) -> bool {
    a.result_kinds == b.result_kinds
        && a.display_kinds == b.display_kinds
        && a.stdout.is_empty() == b.stdout.is_empty()
        && a.stderr.is_empty() == b.stderr.is_empty()
}

/// The first field that differs, with an excerpt of each side from just
/// before where they part.
fn first_difference(u: &Surface, c: &Surface) -> String {
    let fields: [(&str, String, String); 5] = [
        ("stdout", u.stdout.clone(), c.stdout.clone()),
        ("stderr", u.stderr.clone(), c.stderr.clone()),
        ("result", u.results.join("\n"), c.results.join("\n")),
        (
            "result kinds",
            u.result_kinds.join(", "),
            c.result_kinds.join(", "),
        ),
        (
            "display kinds",
            u.display_kinds.join(", "),
            c.display_kinds.join(", "),
        ),
    ];
    for (name, a, b) in fields {
        if a != b {
            let at = a
                .char_indices()
                .zip(b.chars())
                .find(|((_, x), y)| x != y)
                .map(|((i, _), _)| i)
                .unwrap_or_else(|| a.len().min(b.len()));
            let from = a[..at].char_indices().rev().nth(40).map_or(0, |(i, _)| i);
            let excerpt = |s: &str| shorten(s.get(from..).unwrap_or(s), 160);
            return format!(
                "{name} differs: unconfined {:?} vs confined {:?}",
                excerpt(&a),
                excerpt(&b)
            );
        }
    }
    "outputs differ".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(verdict: Verdict, stdout: &str) -> CellRun {
        CellRun {
            verdict,
            surface: Surface {
                stdout: stdout.into(),
                stderr: String::new(),
                results: vec![],
                result_kinds: vec![],
                display_kinds: vec!["image/png+text/plain".into()],
            },
            error: (verdict != Verdict::Ok).then(|| "OSError: out of pty devices".into()),
            ms: 1.0,
        }
    }

    #[test]
    fn a_confined_failure_or_other_text_differs_and_variance_does_not() {
        let ok = run(Verdict::Ok, "a\n");
        assert_eq!(compare(0, &ok, &ok, None, false).status, CellStatus::Same);
        let failed = run(Verdict::Error, "");
        let r = compare(1, &ok, &failed, None, false);
        assert_eq!(r.status, CellStatus::Differs);
        assert!(r.reason.unwrap().contains("out of pty devices"));
        assert_eq!(
            compare(2, &failed, &ok, None, false).status,
            CellStatus::FailsUnconfined
        );
        let other = run(Verdict::Ok, "b\n");
        let r = compare(3, &ok, &other, None, false);
        assert_eq!(r.status, CellStatus::Differs);
        assert!(r.reason.unwrap().contains("stdout differs"));
        assert!(text_differs(&ok, &other));
        // The same text twice unconfined: the difference is confinement's.
        assert_eq!(
            compare(4, &ok, &other, Some(&ok), false).status,
            CellStatus::Differs
        );
        let third = run(Verdict::Ok, "c\n");
        assert_eq!(
            compare(5, &ok, &other, Some(&third), false).status,
            CellStatus::Varies
        );
        // Varying text does not excuse a missing output.
        let silent = run(Verdict::Ok, "");
        assert_eq!(
            compare(6, &ok, &silent, Some(&third), false).status,
            CellStatus::Differs
        );
        // Declared as varying: no second run needed, kinds still compared.
        assert_eq!(
            compare(7, &ok, &other, None, true).status,
            CellStatus::Varies
        );
        assert_eq!(
            compare(8, &ok, &silent, None, true).status,
            CellStatus::Differs
        );
    }
}
