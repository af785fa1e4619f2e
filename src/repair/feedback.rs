//! What a repair message says about a failed execution, by feedback mode:
//! so the value of feedback itself can be measured by comparing runs that
//! differ only in `--feedback`.

use serde::{Deserialize, Serialize};

use crate::kernel::{names_in_line, Outcome, StateQuery};
use crate::sandbox::{SandboxLimits, Verdict};

use super::prompt::feedback_parts;
use super::traceback::{fit_keep_tail, kill_message, parse, scrub_paths};

/// What a repair message tells the model about a failed execution.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackMode {
    /// The parsed traceback: exception, failing line with context, frames.
    #[default]
    Parsed,
    /// As `parsed`, plus a compact view of the live kernel's state around
    /// the failure (types and shapes of the names on the failing line,
    /// DataFrame columns behind a KeyError, close matches of a misspelt name)
    /// and of what the cell's figures, tables and written files show.
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

/// The message the model was sent after a round (none once the task stops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackKind {
    /// The execution failed or was killed: `repair.md` (or
    /// `repair_with_images.md`), filled according to the feedback mode.
    Error,
    /// The reply had no code: `repair_no_code.md`.
    NoCode,
    /// The code ran cleanly but left no answer: `repair_no_answer.md`.
    NoAnswer,
    /// A multi-answer task's value carried none of its named parts:
    /// `repair_missing_parts.md`, naming the parts.
    MissingParts,
    /// The answer is not a plain value: `repair_unsupported.md`.
    Unsupported,
    /// `--stop-on never`: a clean answer, to review: `review.md`.
    Review,
    /// `--stop-on correct`: a clean answer that is wrong (ground truth):
    /// `repair_wrong.md`.
    Wrong,
    /// `--after-failure resample`: no message; the next round starts over
    /// from the task's opening messages in a fresh kernel.
    Resample,
    /// `--false-alarm`'s control: a correct round 0 told it is wrong:
    /// `false_alarm.md`.
    FalseAlarm,
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

/// What to ask the live kernel about after a failure (`parsed+state`): the
/// names on the failing line of the submitted code, and the misspelt name,
/// attribute or key the exception names. `None` when the execution did not
/// raise in a kernel that still holds its state.
pub fn state_query(outcome: &Outcome, code: &str) -> Option<StateQuery> {
    let error = outcome.error.as_ref()?;
    if outcome.verdict != Verdict::Error || outcome.state_lost {
        return None;
    }
    let tb = parse(error, code);
    let line = tb
        .frames
        .iter()
        .rev()
        .find(|f| f.in_cell)
        .and_then(|f| f.source.clone())
        .unwrap_or_default();
    let mut query = StateQuery {
        names: names_in_line(&line),
        ..Default::default()
    };
    let quoted = quoted_parts(&tb.message);
    match tb.exc_type.as_str() {
        "NameError" | "UnboundLocalError" => query.missing_name = quoted.first().cloned(),
        "AttributeError" => {
            // "'DataFrame' object has no attribute 'colum'"
            let attr = quoted.last().cloned();
            query.owner = attr.as_ref().and_then(|a| owner_of(&line, a));
            query.missing_attribute = attr;
        }
        "KeyError" => {
            let key = tb.message.trim();
            let key = key
                .strip_prefix(['\'', '"'])
                .and_then(|k| k.strip_suffix(['\'', '"']))
                .unwrap_or(key);
            query.missing_key = (!key.is_empty()).then(|| key.to_string());
        }
        _ => {}
    }
    let asks = !query.names.is_empty()
        || query.missing_name.is_some()
        || query.missing_attribute.is_some()
        || query.missing_key.is_some();
    asks.then_some(query)
}

/// The '…'-quoted parts of an exception message, in order.
fn quoted_parts(message: &str) -> Vec<String> {
    message
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `df` in `x = df.colum + 1` when looking for `colum`.
fn owner_of(line: &str, attribute: &str) -> Option<String> {
    let at = line.find(&format!(".{attribute}"))?;
    let before: String = line[..at]
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let owner: String = before.chars().rev().collect();
    (!owner.is_empty() && !owner.starts_with(|c: char| c.is_ascii_digit())).then_some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ErrorInfo;

    fn raised(ename: &str, evalue: &str, code: &str, line: usize) -> Outcome {
        let mut o = Outcome::ended(crate::sandbox::Verdict::Error, 1.0);
        let source = code.lines().nth(line - 1).unwrap();
        o.error = Some(ErrorInfo {
            ename: ename.into(),
            evalue: evalue.into(),
            traceback: vec![
                "---------------------------------------------------------------------------"
                    .into(),
                format!(
                    "{ename}                                  Traceback (most recent call last)"
                ),
                format!("Cell In[1], line {line}\n----> {line} {source}\n"),
                format!("{ename}: {evalue}"),
            ],
        });
        o
    }

    #[test]
    fn the_state_query_follows_the_exception() {
        let code = "import pandas as pd\ndf = pd.read_csv('x.csv')\ntotal = df['GDP'].sum()";
        let q = state_query(&raised("KeyError", "'GDP'", code, 3), code).unwrap();
        assert_eq!(q.missing_key.as_deref(), Some("GDP"));
        assert!(q.names.contains(&"df".to_string()), "{:?}", q.names);

        let code = "total = 3\nprint(totl)";
        let q = state_query(
            &raised("NameError", "name 'totl' is not defined", code, 2),
            code,
        )
        .unwrap();
        assert_eq!(q.missing_name.as_deref(), Some("totl"));

        let code = "x = df.colum.sum()";
        let e = raised(
            "AttributeError",
            "'DataFrame' object has no attribute 'colum'",
            code,
            1,
        );
        let q = state_query(&e, code).unwrap();
        assert_eq!(q.missing_attribute.as_deref(), Some("colum"));
        assert_eq!(q.owner.as_deref(), Some("df"));

        // A kill, or a kernel that lost its state, has nothing to ask.
        let mut killed = raised("KeyError", "'GDP'", "x = 1", 1);
        killed.verdict = Verdict::OomKilled;
        assert!(state_query(&killed, "x = 1").is_none());
        let mut lost = raised("KeyError", "'GDP'", "x = 1", 1);
        lost.state_lost = true;
        assert!(state_query(&lost, "x = 1").is_none());
    }

    #[test]
    fn each_mode_says_what_it_promises() {
        let code = "total = 3\nprint(totl)";
        let o = raised("NameError", "name 'totl' is not defined", code, 2);
        let limits = SandboxLimits::default();
        let parsed = error_feedback(FeedbackMode::Parsed, &o, code, &limits, 2000);
        assert!(parsed.error.contains("print(totl)") && parsed.stdout.is_some());
        let raw = error_feedback(FeedbackMode::Raw, &o, code, &limits, 2000);
        assert!(
            raw.error.contains("Traceback (most recent call last)"),
            "{}",
            raw.error
        );
        let minimal = error_feedback(FeedbackMode::Minimal, &o, code, &limits, 2000);
        assert_eq!(minimal.error, "Your code failed with NameError.");
        assert!(minimal.stdout.is_none());
        let none = error_feedback(FeedbackMode::None, &o, code, &limits, 2000);
        assert_eq!(none.error, NONE_TEXT);
        // The budget holds in every mode.
        for mode in [
            FeedbackMode::Parsed,
            FeedbackMode::Raw,
            FeedbackMode::Minimal,
        ] {
            assert!(
                error_feedback(mode, &o, code, &limits, 10)
                    .error
                    .chars()
                    .count()
                    <= 10
            );
        }
    }
}
