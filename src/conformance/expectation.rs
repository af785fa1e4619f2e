//! What a corpus case expects of an execution besides its verdict, and the
//! check of an outcome against it. Assertions on text and errno let a case
//! tell the attack it is about from an unrelated failure with the same
//! verdict (a lost read-only bind fails `esc_write_etc` with the wrong
//! errno, not a pass on "some error").

use serde::Serialize;

use super::rss::{HarnessMemory, MIB};
use crate::kernel::Outcome;
use crate::sandbox::{Flag, Verdict};

/// The harness's RSS growth a case may cause, in MiB, unless the case says
/// otherwise (`max_harness_mb`): 2.5 to 3 times the largest growth measured
/// over the shipped corpus without a bound of its own (9 to 12.8 MiB over
/// whole-corpus runs on zygote and cold kernels at `--jobs 2`;
/// docs/sandbox.md).
pub const DEFAULT_MAX_HARNESS_MB: u64 = 32;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Expectation {
    /// Flags that must be present.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
    /// Limits that must all be in the outcome's `fired` list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fired: Vec<Verdict>,
    /// Limits that must not be in the outcome's `fired` list (legitimate
    /// work a limit's evidence must not mistake for an attack).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_fired: Vec<Verdict>,
    /// The error's exception name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// The error's errno: its text starts with `[Errno N]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stdout_contains: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stdout_lacks: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stderr_contains: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stderr_lacks: Vec<String>,
    /// The answer the outcome must carry (its checker text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// At most this many artifact files (images the harness saved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_artifacts: Option<usize>,
    /// At most this many MiB of growth of the harness's resident memory
    /// while the case runs ([`DEFAULT_MAX_HARNESS_MB`] when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_harness_mb: Option<u64>,
}

impl Expectation {
    /// Why `outcome` does not meet the expectation; empty when it does.
    pub fn failures(&self, outcome: &Outcome) -> Vec<String> {
        let mut failures = Vec::new();
        for flag in &self.flags {
            if !outcome.flags.iter().any(|f| f == flag.as_str()) {
                failures.push(format!(
                    "expected flag {} (flags: [{}])",
                    flag.as_str(),
                    outcome.flags.join(", ")
                ));
            }
        }
        for limit in &self.fired {
            if !outcome.fired.contains(limit) {
                let fired: Vec<&str> = outcome.fired.iter().map(|v| v.as_str()).collect();
                failures.push(format!(
                    "expected {limit} among the limits that fired (fired: [{}])",
                    fired.join(", ")
                ));
            }
        }
        for limit in self.not_fired.iter().filter(|l| outcome.fired.contains(l)) {
            failures.push(format!("{limit} fired, though the case expects it not to"));
        }
        let error = outcome.error.as_ref();
        if let Some(want) = &self.exception {
            let got = error.map(|e| e.ename.as_str());
            if got != Some(want.as_str()) {
                failures.push(format!(
                    "expected exception {want} but got {}",
                    got.unwrap_or("no error")
                ));
            }
        }
        if let Some(errno) = self.errno {
            let prefix = format!("[Errno {errno}]");
            let got = error.map(|e| e.evalue.as_str()).unwrap_or("");
            if !got.starts_with(&prefix) {
                failures.push(format!(
                    "expected an error starting with {prefix} but got {:?}",
                    head(got, 200)
                ));
            }
        }
        text_checks(
            &mut failures,
            "stdout",
            &outcome.stdout,
            &self.stdout_contains,
            &self.stdout_lacks,
        );
        text_checks(
            &mut failures,
            "stderr",
            &outcome.stderr,
            &self.stderr_contains,
            &self.stderr_lacks,
        );
        if let Some(want) = &self.answer {
            let got = outcome.answer.as_ref().map(|a| a.value.as_str());
            if got != Some(want.as_str()) {
                failures.push(format!(
                    "expected answer {want:?} but got {}",
                    got.map(|g| format!("{g:?}"))
                        .unwrap_or_else(|| "none".into())
                ));
            }
        }
        if let Some(max) = self.max_artifacts {
            if outcome.artifacts.len() > max {
                failures.push(format!(
                    "expected at most {max} artifacts but the harness saved {}",
                    outcome.artifacts.len()
                ));
            }
        }
        failures
    }

    /// The bound on the harness's RSS growth during the case, in MiB.
    pub fn harness_bound_mb(&self) -> u64 {
        self.max_harness_mb.unwrap_or(DEFAULT_MAX_HARNESS_MB)
    }

    /// Whether the case may grow the harness more than the default: such a
    /// case runs alone, so that neither its figure nor its neighbours' is
    /// the other's.
    pub fn harness_heavy(&self) -> bool {
        self.harness_bound_mb() > DEFAULT_MAX_HARNESS_MB
    }

    /// Why the harness's memory during the case breaks the bound, if it
    /// does.
    pub fn harness_failure(&self, memory: &HarnessMemory) -> Option<String> {
        let bound = self.harness_bound_mb();
        (memory.growth_bytes > bound.saturating_mul(MIB)).then(|| {
            format!(
                "the harness's resident memory grew by {:.1} MiB during the case (to {:.1} MiB), over its bound of {bound} MiB{}{}",
                memory.growth_mib(),
                memory.peak_mib(),
                if self.max_harness_mb.is_some() {
                    " (max_harness_mb)"
                } else {
                    " (the default)"
                },
                if memory.alongside.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; running alongside, so the growth is theirs too: {}",
                        memory.alongside.join(", ")
                    )
                }
            )
        })
    }
}

fn text_checks(
    failures: &mut Vec<String>,
    stream: &str,
    text: &str,
    contains: &[String],
    lacks: &[String],
) {
    for want in contains {
        if !text.contains(want.as_str()) {
            failures.push(format!(
                "expected {stream} to contain {want:?} ({stream}: {:?})",
                head(text, 400)
            ));
        }
    }
    for unwanted in lacks {
        if text.contains(unwanted.as_str()) {
            failures.push(format!(
                "expected {stream} not to contain {unwanted:?} ({stream}: {:?})",
                head(text, 400)
            ));
        }
    }
}

/// The first `max` bytes of `text`, on a character boundary.
pub fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        text.to_string()
    } else {
        format!("{}…", &text[..text.floor_char_boundary(max)])
    }
}

/// The first line of `text`, cut like [`head`].
pub fn shorten(text: &str, max: usize) -> String {
    head(text.lines().next().unwrap_or(""), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ErrorInfo;

    fn failed_with(ename: &str, evalue: &str, stdout: &str) -> Outcome {
        let mut o = Outcome::not_run(Verdict::Error, ename, evalue.into());
        o.stdout = stdout.into();
        o
    }

    #[test]
    fn exception_errno_and_text() {
        let want = Expectation {
            exception: Some("PermissionError".into()),
            errno: Some(1),
            stdout_contains: vec!["tried".into()],
            stdout_lacks: vec!["escaped".into()],
            ..Default::default()
        };
        let good = failed_with(
            "PermissionError",
            "[Errno 1] Operation not permitted",
            "tried\n",
        );
        assert!(want.failures(&good).is_empty());

        let wrong_errno = failed_with("PermissionError", "[Errno 13] Permission denied", "tried\n");
        let f = want.failures(&wrong_errno);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("[Errno 1]"), "{f:?}");

        let escaped = failed_with("OSError", "[Errno 1] x", "tried escaped\n");
        let f = want.failures(&escaped);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f
            .iter()
            .any(|m| m.contains("expected exception PermissionError but got OSError")));
        assert!(f.iter().any(|m| m.contains("not to contain \"escaped\"")));
    }

    #[test]
    fn fired_flags_and_answer() {
        let want = Expectation {
            flags: vec![Flag::Restarted],
            fired: vec![Verdict::OomKilled],
            answer: Some("42".into()),
            stderr_contains: vec!["warn".into()],
            ..Default::default()
        };
        let mut o = failed_with("X", "y", "");
        let f = want.failures(&o);
        assert_eq!(f.len(), 4, "{f:?}");
        o.flags = vec!["restarted".into()];
        o.fired = vec![Verdict::OomKilled, Verdict::TimeoutWall];
        o.stderr = "a warning\n".into();
        o.error = None::<ErrorInfo>;
        o.answer = Some(crate::kernel::Answer {
            value: "42".into(),
            rule: crate::kernel::AnswerRule::LastStdoutLine,
            json: None,
            type_name: None,
            unsupported: None,
        });
        assert!(want.failures(&o).is_empty(), "{:?}", want.failures(&o));
    }

    #[test]
    fn a_limit_that_must_not_fire_fails_when_it_did() {
        let want = Expectation {
            not_fired: vec![Verdict::NetworkBlocked],
            ..Default::default()
        };
        let mut o = failed_with("X", "y", "");
        o.fired = vec![Verdict::TimeoutWall];
        assert!(want.failures(&o).is_empty());
        o.fired.push(Verdict::NetworkBlocked);
        let f = want.failures(&o);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("network_blocked fired"), "{f:?}");
    }

    #[test]
    fn harness_growth_over_the_bound_fails_naming_both() {
        let default = Expectation::default();
        assert_eq!(default.harness_bound_mb(), DEFAULT_MAX_HARNESS_MB);
        assert!(!default.harness_heavy());
        let at_bound = HarnessMemory::new(50 * MIB, (50 + DEFAULT_MAX_HARNESS_MB) * MIB);
        assert_eq!(default.harness_failure(&at_bound), None);
        let over = HarnessMemory::new(50 * MIB, (51 + DEFAULT_MAX_HARNESS_MB) * MIB);
        let why = default.harness_failure(&over).expect("over the default");
        let growth = format!("grew by {:.1} MiB", (DEFAULT_MAX_HARNESS_MB + 1) as f64);
        assert!(why.contains(&growth), "{why}");
        assert!(
            why.contains(&format!(
                "bound of {DEFAULT_MAX_HARNESS_MB} MiB (the default)"
            )),
            "{why}"
        );

        let tight = Expectation {
            max_harness_mb: Some(8),
            ..Default::default()
        };
        assert!(!tight.harness_heavy());
        let roomy = Expectation {
            max_harness_mb: Some(DEFAULT_MAX_HARNESS_MB + 1),
            ..Default::default()
        };
        assert!(roomy.harness_heavy());
        let small = HarnessMemory::new(50 * MIB, 58 * MIB);
        assert_eq!(tight.harness_failure(&small), None);
        let why = tight
            .harness_failure(&HarnessMemory::new(50 * MIB, 70 * MIB))
            .expect("over the case's own bound");
        assert!(why.contains("grew by 20.0 MiB"), "{why}");
        assert!(why.contains("to 70.0 MiB"), "{why}");
        assert!(why.contains("bound of 8 MiB (max_harness_mb)"), "{why}");
        let crowded = HarnessMemory {
            alongside: vec!["heavy".into()],
            ..HarnessMemory::new(50 * MIB, 70 * MIB)
        };
        let why = tight.harness_failure(&crowded).expect("over the bound");
        assert!(why.ends_with("the growth is theirs too: heavy"), "{why}");
        // A shrinking harness is no growth at all.
        let shrunk = HarnessMemory::new(80 * MIB, 60 * MIB);
        assert_eq!(tight.harness_failure(&shrunk), None);
    }
}
