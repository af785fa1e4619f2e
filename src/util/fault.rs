//! Named fault points for the crash-consistency tests:
//! `RETRACE_TEST_FAULT=<point>[@<n>]` makes the process SIGKILL itself the
//! `n`-th time (default: the first) it reaches `<point>`, as a `kill -9`
//! at the worst moment would. Nothing is flushed or unwound on the way
//! out: what a real crash leaves is what the test then resumes from.
//! Unset (always, outside those tests) a point costs one load of a
//! `OnceLock`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms one point.
pub const ENV: &str = "RETRACE_TEST_FAULT";

/// The places a crash hurts most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// A round executed and judged, its record not yet written.
    AfterExecute,
    /// Half of a journal line written and flushed.
    MidJournalLine,
    /// Half of a report file (summary.json, report.md, …) written.
    DuringSummary,
    /// Half of run.json written.
    DuringRunJson,
    /// A dynamic install's wheels fetched, not yet published to the store.
    DuringInstall,
    /// An image or model environment half built, in its private directory.
    DuringBuild,
}

impl Point {
    pub const ALL: [Point; 6] = [
        Point::AfterExecute,
        Point::MidJournalLine,
        Point::DuringSummary,
        Point::DuringRunJson,
        Point::DuringInstall,
        Point::DuringBuild,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Point::AfterExecute => "after_execute",
            Point::MidJournalLine => "mid_journal_line",
            Point::DuringSummary => "during_summary",
            Point::DuringRunJson => "during_run_json",
            Point::DuringInstall => "during_install",
            Point::DuringBuild => "during_build",
        }
    }
}

/// The armed point and the hit that fires it.
fn armed() -> Option<&'static (String, u64)> {
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let value = std::env::var(ENV).ok()?;
            Some(parse(&value))
        })
        .as_ref()
}

/// `point@n` → (`point`, n); a missing or bad `n` is 1.
fn parse(value: &str) -> (String, u64) {
    match value.split_once('@') {
        Some((point, n)) => (
            point.trim().to_string(),
            n.trim().parse().unwrap_or(1).max(1),
        ),
        None => (value.trim().to_string(), 1),
    }
}

/// Whether `point` is the armed one (whatever its hit count).
pub fn is_armed(point: Point) -> bool {
    armed().is_some_and(|(name, _)| name == point.name())
}

/// Dies here if this point is armed and this is the hit it waits for.
pub fn reached(point: Point) {
    static HITS: AtomicU64 = AtomicU64::new(0);
    let Some((name, n)) = armed() else {
        return;
    };
    if name != point.name() {
        return;
    }
    if HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
        eprintln!(
            "{ENV}: process {} dying at {name} (hit {n})",
            std::process::id()
        );
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
        // SIGKILL cannot be caught; this only runs if it could not be sent.
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_with_and_without_a_hit_count() {
        assert_eq!(parse("after_execute"), ("after_execute".into(), 1));
        assert_eq!(parse("mid_journal_line@3"), ("mid_journal_line".into(), 3));
        assert_eq!(parse("during_summary@0"), ("during_summary".into(), 1));
        assert_eq!(parse("during_summary@x"), ("during_summary".into(), 1));
        let names: std::collections::BTreeSet<&str> = Point::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Point::ALL.len());
    }
}
