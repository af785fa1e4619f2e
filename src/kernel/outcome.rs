//! What one execution produced: streams, rich results, error, answer value,
//! artifacts, caps and timings. Serialised as-is by `retrace exec --json` and
//! by the journal, so field names are part of the output format.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::sandbox::{ExitInfo, Verdict};

/// How the kernel reported the execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// `execute_reply` with status ok.
    Ok,
    /// The code raised, or the execution was ended by a limit or a dead kernel.
    Error,
}

/// A Python exception as the kernel reported it, ANSI escapes removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

/// One `execute_result` or `display_data` message: MIME type to payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub data: Map<String, Value>,
}

impl Bundle {
    pub fn text(&self) -> Option<&str> {
        self.data.get("text/plain").and_then(Value::as_str)
    }
}

/// An image written to the caller's artifact directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// Path relative to the artifact directory: the artifact's URI.
    pub path: String,
    pub mime: String,
    pub bytes: u64,
    /// Base64 payload, kept so vision models can be shown the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

/// Which rule produced the answer value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerRule {
    /// `repr` of a variable named `answer`, read through `user_expressions`.
    AnswerVariable,
    /// `text/plain` of the last `execute_result`.
    LastResult,
    /// The last non-empty line of stdout.
    LastStdoutLine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub value: String,
    pub rule: AnswerRule,
}

/// What was cut when an execution's output passed its cap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    pub truncated: bool,
    pub dropped_bytes: u64,
    pub dropped_messages: u64,
}

/// Milliseconds spent in each part of one execution.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// From sending `execute_request` to having both reply and idle.
    pub total: f64,
    /// The kernel's own busy→idle span from its status message timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_busy: Option<f64>,
    /// Time spent killing and restarting after a limit, if that happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub status: ExecStatus,
    pub verdict: Verdict,
    pub flags: Vec<String>,
    pub execution_count: Option<u64>,
    pub stdout: String,
    pub stderr: String,
    /// `execute_result` bundles.
    pub results: Vec<Bundle>,
    /// `display_data` / `update_display_data` bundles (images are also in `artifacts`).
    pub displays: Vec<Bundle>,
    pub error: Option<ErrorInfo>,
    pub answer: Option<Answer>,
    pub artifacts: Vec<Artifact>,
    pub truncated: bool,
    pub truncation: Truncation,
    pub timings_ms: Timings,
    /// Milliseconds from the kill decision to every process of the kernel gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_ms: Option<f64>,
    /// Which mechanism killed the kernel (`cgroup.kill`, `freezer`, `killpg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_method: Option<String>,
    /// How the kernel process ended, when it died during this execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitInfo>,
    /// The kernel was restarted after this execution; its variables are gone.
    pub state_lost: bool,
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.status == ExecStatus::Ok
    }
}

/// Removes ANSI escape sequences (colour codes) from kernel text.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            // CSI: ESC [ params final-byte(0x40..=0x7e)
            Some('[') => {
                chars.next();
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: ESC ] ... BEL or ESC \
            Some(']') => {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '\u{07}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            Some(_) => {
                chars.next();
            }
            None => {}
        }
    }
    out
}

/// Picks the answer value: the `answer` variable, else the last result,
/// else the last non-empty stdout line.
pub fn choose_answer(
    answer_variable: Option<String>,
    results: &[Bundle],
    stdout: &str,
) -> Option<Answer> {
    if let Some(value) = answer_variable {
        return Some(Answer {
            value,
            rule: AnswerRule::AnswerVariable,
        });
    }
    if let Some(value) = results.iter().rev().find_map(Bundle::text) {
        return Some(Answer {
            value: value.to_string(),
            rule: AnswerRule::LastResult,
        });
    }
    stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| Answer {
            value: l.to_string(),
            rule: AnswerRule::LastStdoutLine,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_colour_codes() {
        let red = "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero";
        assert_eq!(strip_ansi(red), "ZeroDivisionError: division by zero");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{07}x"), "x");
        assert_eq!(strip_ansi("plain"), "plain");
    }

    fn bundle(text: &str) -> Bundle {
        let mut data = Map::new();
        data.insert("text/plain".into(), Value::String(text.into()));
        Bundle { data }
    }

    #[test]
    fn answer_rule_order() {
        let results = vec![bundle("1"), bundle("2")];
        let a = choose_answer(Some("42".into()), &results, "x\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("42", AnswerRule::AnswerVariable)
        );
        let a = choose_answer(None, &results, "x\n").unwrap();
        assert_eq!((a.value.as_str(), a.rule), ("2", AnswerRule::LastResult));
        let a = choose_answer(None, &[], "first\n last \n\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("last", AnswerRule::LastStdoutLine)
        );
        assert!(choose_answer(None, &[], " \n").is_none());
    }
}
