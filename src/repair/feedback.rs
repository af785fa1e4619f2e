//! What a repair message says about a failed execution, by feedback mode:
//! so the value of feedback itself can be measured by comparing runs that
//! differ only in `--feedback`.

use serde::{Deserialize, Serialize};

use crate::kernel::Outcome;
use crate::sandbox::{SandboxLimits, Verdict};

use super::prompt::feedback_parts;
use super::traceback::{fit_keep_tail, kill_message, scrub_paths};

/// What a repair message tells the model about a failed execution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackMode {
    /// The parsed traceback: exception, failing line with context, frames.
    #[default]
    Parsed,
    /// As `parsed`, plus a compact view of the live kernel's state around
    /// the failure (types and shapes of the names on the failing line,
    /// DataFrame columns behind a KeyError, close matches of a misspelt name).
    #[value(name = "parsed+state")]
    #[serde(rename = "parsed+state")]
    ParsedState,
    /// The kernel's traceback as it came (ANSI stripped), same budget.
    Raw,
    /// Only "your code failed with <ExceptionName>" or the kill reason.
    Minimal,
    /// Only "that did not work, try again".
    None,
}

impl FeedbackMode {
    pub fn name(self) -> &'static str {
        match self {
            FeedbackMode::Parsed => "parsed",
            FeedbackMode::ParsedState => "parsed+state",
            FeedbackMode::Raw => "raw",
            FeedbackMode::Minimal => "minimal",
            FeedbackMode::None => "none",
        }
    }
}

/// The text of a repair message after a failed execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFeedback {
    /// For `{{feedback}}`.
    pub error: String,
    /// For `{{stdout}}`; `None` in the bare modes (`minimal`, `none`),
    /// which use `repair_bare.md`.
    pub stdout: Option<String>,
}

/// The feedback on a failed or killed execution in at most `budget`
/// characters. `parsed+state` gives the `parsed` text here; the harness
/// appends the kernel's state view, which needs the live kernel.
pub fn error_feedback(
    mode: FeedbackMode,
    outcome: &Outcome,
    code: &str,
    limits: &SandboxLimits,
    budget: usize,
) -> ErrorFeedback {
    match mode {
        FeedbackMode::Parsed | FeedbackMode::ParsedState => {
            let parts = feedback_parts(outcome, code, limits, budget);
            ErrorFeedback {
                error: parts.error,
                stdout: Some(parts.stdout),
            }
        }
        FeedbackMode::Raw => {
            let parts = feedback_parts(outcome, code, limits, budget);
            let error_budget = budget.saturating_sub(parts.stdout.chars().count());
            ErrorFeedback {
                error: raw_text(outcome, limits, error_budget),
                stdout: Some(parts.stdout),
            }
        }
        FeedbackMode::Minimal => ErrorFeedback {
            error: fit_keep_tail(&minimal_text(outcome), budget),
            stdout: None,
        },
        FeedbackMode::None => ErrorFeedback {
            error: fit_keep_tail(NONE_TEXT, budget),
            stdout: None,
        },
    }
}

/// All that `--feedback none` says.
pub const NONE_TEXT: &str = "That did not work. Try again.";

/// The traceback as the kernel sent it (ANSI already stripped), else the
/// end of stderr; a kill adds its reason first, as the model would see a
/// kernel dying in any notebook.
fn raw_text(outcome: &Outcome, limits: &SandboxLimits, budget: usize) -> String {
    let mut out = String::new();
    if let Some(kill) = kill_message(outcome, limits) {
        out.push_str(&kill);
    }
    let traceback = outcome
        .error
        .as_ref()
        .map(|e| {
            if e.traceback.is_empty() {
                format!("{}: {}", e.ename, e.evalue)
            } else {
                e.traceback.join("\n")
            }
        })
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| outcome.stderr.trim_end().to_string());
    if !traceback.is_empty() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&scrub_paths(&traceback));
    }
    if out.is_empty() {
        out = format!("The execution ended with verdict `{}`.", outcome.verdict);
    }
    fit_keep_tail(&out, budget)
}

/// "Your code failed with <ExceptionName>." or the kill reason, one line.
fn minimal_text(outcome: &Outcome) -> String {
    match (outcome.verdict, &outcome.error) {
        (Verdict::Error, Some(e)) if !e.ename.is_empty() => {
            format!("Your code failed with {}.", e.ename)
        }
        (Verdict::Error, _) => "Your code failed.".into(),
        (verdict, _) => format!("Your code was stopped: {verdict}."),
    }
}
