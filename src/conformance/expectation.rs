//! What a corpus case expects of an execution besides its verdict, and the
//! check of an outcome against it. Assertions on text and errno let a case
//! tell the attack it is about from an unrelated failure with the same
//! verdict (a lost read-only bind fails `esc_write_etc` with the wrong
//! errno, not a pass on "some error").

use serde::Serialize;

use crate::kernel::Outcome;
use crate::sandbox::{Flag, Verdict};

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Expectation {
    /// Flags that must be present.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
    /// Limits that must all be in the outcome's `fired` list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fired: Vec<Verdict>,
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
}
