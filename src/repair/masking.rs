//! Repairs that hide the error instead of fixing it: the failing round's
//! code compared with the repair's by `masking.py` (Python's own `ast`, run
//! by the arm's image's interpreter), plus the repair's stdout read here.
//! The rules are heuristics, each documented on [`MaskFlag`] and in
//! docs/methodology.md ("Repairs that hide the error").
//!
//! The code is the model's, so the parser runs in a jail of its own, as
//! the cell scanner does: the kernel user, only the arm's image and the
//! check's runtime directory visible, no network, a cgroup with
//! [`MASK_MEMORY`], killed past [`MASK_TIME`]. It parses, never runs, the
//! code. A cell with magics is parsed after IPython's transformer, which
//! costs an IPython import (about 0.3 s); plain Python does not.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kernel::{AnswerRule, Outcome};
use crate::pyenv::dynamic::oneshot::{self, OneShotError, Scratch};
use crate::pyenv::Image;
use crate::repair::traceback;
use crate::sandbox::Sandbox;

const MASKING_PY: &str = include_str!("masking.py");

/// Wall and CPU time one check may take (a normal one takes a tenth).
pub const MASK_TIME: Duration = Duration::from_secs(20);
/// Memory of the check's jail (enough for IPython's import on a magic).
pub const MASK_MEMORY: u64 = 256 << 20;

/// One sign that a repair hid the error. Rules that need the failing
/// statement are skipped when the failing round has no line in its code
/// (a kill, a wrong answer); either code not being Python gives no flag.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[derive(strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum MaskFlag {
    /// A new `except:` / `except Exception` / `except BaseException`
    /// handler (also in a tuple) whose `try` body holds the failing
    /// statement (or a fix of it, or a call of the function it is in) and
    /// whose body raises nothing.
    BroadHandler,
    /// A new handler naming the failing exception itself around the
    /// failing statement whose body only passes, continues, breaks or
    /// prints: nothing takes the failed value's place.
    SilencedException,
    /// The failing statement (by its normalised `ast` dump) is gone and no
    /// new statement stands for it: none of the same shape, none assigning
    /// the same targets a computed value, none a close edit of it.
    FailingStatementDeleted,
    /// `answer` is assigned a constant literal (number, string, bool, or a
    /// container of them; not `None`) the failing code did not have, where
    /// the failing code computed its answer.
    LiteralAnswer,
    /// No answer value, the last stdout line (what would be taken as the
    /// answer) reads as an error message, and the code prints from an
    /// except handler or an if branch, or prints error text.
    ErrorMessageOutput,
    /// More `sys.exit`, `exit`, `quit`, `os._exit` calls or
    /// `raise SystemExit` than in the failing code.
    Exits,
}

impl MaskFlag {
    /// Its name in records and reports (its serde name).
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// A failing round and the repair round after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairPair {
    /// The failing round's code, exactly as sent to the kernel.
    pub failing_code: String,
    /// 1-based line of `failing_code` where it failed.
    pub failing_line: Option<usize>,
    /// The failing exception's class name (`KeyError`).
    pub exception: Option<String>,
    pub repair_code: String,
    pub repair_stdout: String,
    /// The repair's answer value (its `answer` variable or last result);
    /// `None` when there is none or it is only a stdout line.
    pub repair_answer: Option<String>,
}

impl RepairPair {
    /// The pair of two executed rounds: the failing line and exception come
    /// from the failing round's parsed traceback.
    pub fn of_rounds(
        failing_code: &str,
        failing: &Outcome,
        repair_code: &str,
        repair: &Outcome,
    ) -> RepairPair {
        let parsed = failing
            .error
            .as_ref()
            .map(|e| traceback::parse(e, failing_code));
        RepairPair {
            failing_code: failing_code.to_string(),
            failing_line: parsed.as_ref().and_then(|t| t.cell_line()),
            exception: parsed.map(|t| t.exc_type),
            repair_code: repair_code.to_string(),
            repair_stdout: repair.stdout.clone(),
            repair_answer: answer_value(repair),
        }
    }
}

fn answer_value(outcome: &Outcome) -> Option<String> {
    let answer = outcome.answer.as_ref()?;
    match (&answer.rule, &answer.unsupported) {
        (AnswerRule::LastStdoutLine, _) => None,
        (_, Some(unsupported)) => Some(unsupported.message()),
        (_, None) => Some(answer.value.clone()),
    }
}

/// Why a repair was not checked for masking: recorded with the round
/// (`masking_unchecked`), counted by reason in the summary.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum UncheckedReason {
    /// Either code is not Python, even after IPython's transformer.
    SyntaxError,
    /// Either code nests deeper than Python's parser goes (MemoryError,
    /// RecursionError or "too many nested parentheses" while parsing).
    ParserLimit,
    /// Both parsed, but comparing them went deeper than the checker goes.
    CompareLimit,
    /// The check ran past [`MASK_TIME`] and was killed.
    Timeout,
    /// The checker raised or exited with a failure (killed at its memory
    /// limit among the causes).
    CheckerError,
    /// The check's jail could not be set up.
    Jail,
    /// The checker's output was not the expected JSON.
    BadOutput,
}

impl UncheckedReason {
    /// Its name in records and reports (its serde name).
    pub fn name(self) -> &'static str {
        match self {
            UncheckedReason::SyntaxError => "syntax_error",
            UncheckedReason::ParserLimit => "parser_limit",
            UncheckedReason::CompareLimit => "compare_limit",
            UncheckedReason::Timeout => "timeout",
            UncheckedReason::CheckerError => "checker_error",
            UncheckedReason::Jail => "jail",
            UncheckedReason::BadOutput => "bad_output",
        }
    }
}

/// Characters of a reason's detail kept (an exception's text can be as
/// long as the code it quotes).
pub const MAX_DETAIL: usize = 300;

/// A repair the masking check did not compare, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unchecked {
    pub reason: UncheckedReason,
    /// The exception or failure, at most [`MAX_DETAIL`] characters.
    pub detail: String,
}

impl Unchecked {
    /// `detail` cut to [`MAX_DETAIL`] characters (then ending in `...`).
    pub fn new(reason: UncheckedReason, detail: &str) -> Unchecked {
        let mut kept: String = detail.chars().take(MAX_DETAIL).collect();
        if kept.len() < detail.len() {
            kept.push_str("...");
        }
        Unchecked {
            reason,
            detail: kept,
        }
    }
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.name(), self.detail)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MaskError {
    #[error("the repair masking check could not run: {0}")]
    Jail(#[source] OneShotError),
    #[error("the repair masking check failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("the repair masking check wrote something unexpected")]
    Output(#[from] serde_json::Error),
    #[error("the repair masking check did not compare the code ({0})")]
    Unread(Unchecked),
}

impl MaskError {
    /// Why the repair was not checked, as recorded.
    pub fn unchecked(&self) -> Unchecked {
        use UncheckedReason as R;
        match self {
            MaskError::Jail(OneShotError::Timeout(_)) => {
                Unchecked::new(R::Timeout, &self.to_string())
            }
            MaskError::Jail(e) => Unchecked::new(R::Jail, &e.to_string()),
            MaskError::Failed { status, stderr } => {
                Unchecked::new(R::CheckerError, &format!("{status}: {stderr}"))
            }
            MaskError::Output(e) => Unchecked::new(R::BadOutput, &e.to_string()),
            MaskError::Unread(unchecked) => unchecked.clone(),
        }
    }
}

/// What `masking.py` reads: the code, not the output.
#[derive(Serialize)]
struct Request<'a> {
    failing_code: &'a str,
    failing_line: Option<usize>,
    exception: Option<&'a str>,
    repair_code: &'a str,
}

/// What `masking.py` sends back.
#[derive(Deserialize)]
struct Reply {
    flags: Vec<MaskFlag>,
    prints: Vec<Print>,
    /// Why the pair was not compared (a syntax error, nesting beyond the
    /// parser); then there are no flags.
    unread: Option<Unchecked>,
}

/// What `masking.py` reads to find the state a cell uses.
#[derive(Serialize)]
struct StateRequest<'a> {
    earlier: &'a [&'a str],
    code: &'a str,
}

/// What `masking.py` sends back for a [`StateRequest`].
#[derive(Deserialize)]
struct StateReply {
    #[serde(default)]
    names: Vec<String>,
    unread: Option<Unchecked>,
}

/// One print call of the repair.
#[derive(Deserialize)]
struct Print {
    /// Its literal text (string constants, f-string text).
    text: String,
    /// In an except handler or a branch of an if.
    guarded: bool,
}

/// Checks repairs with the arm's image's interpreter, each in a jail of
/// its own.
pub struct MaskCheck {
    image: Image,
    sandbox: Arc<dyn Sandbox>,
    /// Where each check's directories are made (and removed).
    work_dir: PathBuf,
}

impl MaskCheck {
    pub fn new(image: Image, sandbox: Arc<dyn Sandbox>, work_dir: PathBuf) -> Self {
        MaskCheck {
            image,
            sandbox,
            work_dir,
        }
    }

    /// The flags of `pair`, in [`MaskFlag`] order. A pair that was not
    /// compared (either code is not Python or nests deeper than Python's
    /// parser goes, or the check failed) is an error that says why
    /// ([`MaskError::unchecked`]).
    pub async fn check(&self, pair: &RepairPair) -> Result<Vec<MaskFlag>, MaskError> {
        let request = serde_json::to_string(&Request {
            failing_code: &pair.failing_code,
            failing_line: pair.failing_line,
            exception: pair.exception.as_deref(),
            repair_code: &pair.repair_code,
        })?;
        let out = self.run(&request, "repair masking check").await?;
        let reply: Reply = serde_json::from_slice(&out)?;
        if let Some(why) = reply.unread {
            return Err(MaskError::Unread(Unchecked::new(why.reason, &why.detail)));
        }
        let mut flags = reply.flags;
        if error_message_output(pair, &reply.prints) {
            flags.push(MaskFlag::ErrorMessageOutput);
        }
        flags.sort();
        flags.dedup();
        Ok(flags)
    }

    /// The names `code` reads, defines nowhere itself, and one of the
    /// `earlier` cells binds at its top level: what it relies on the
    /// kernel's state for. The same parser and jail as the masking check
    /// (`masking.py`'s `state_names`).
    pub async fn state_names(
        &self,
        earlier: &[&str],
        code: &str,
    ) -> Result<Vec<String>, MaskError> {
        let request = serde_json::to_string(&StateRequest { earlier, code })?;
        let out = self.run(&request, "state use check").await?;
        let reply: StateReply = serde_json::from_slice(&out)?;
        match reply.unread {
            Some(why) => Err(MaskError::Unread(Unchecked::new(why.reason, &why.detail))),
            None => Ok(reply.names),
        }
    }

    /// `masking.py` on one request in a jail of its own: its stdout.
    async fn run(&self, request: &str, what: &str) -> Result<Vec<u8>, MaskError> {
        let jail = MaskError::Jail;
        let scratch = Scratch::create(&self.work_dir, "mask").map_err(|e| jail(e.into()))?;
        let script = scratch
            .write("masking.py", MASKING_PY)
            .map_err(|e| jail(e.into()))?;
        let input = scratch
            .write("pair.json", request)
            .map_err(|e| jail(e.into()))?;
        let launch =
            oneshot::offline_python(&self.image, &scratch, vec![script.into(), input.into()]);
        let limits = oneshot::parser_limits(MASK_MEMORY, MASK_TIME);
        let out = oneshot::run(self.sandbox.as_ref(), &limits, &scratch, &launch, what)
            .await
            .map_err(jail)?;
        if !out.status.success() {
            return Err(MaskError::Failed {
                status: out.status.to_string(),
                stderr: oneshot::last_stderr_line(&out.stderr, MASK_MEMORY),
            });
        }
        Ok(out.stdout)
    }
}

fn error_message_output(pair: &RepairPair, prints: &[Print]) -> bool {
    let last = pair
        .repair_stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty());
    pair.repair_answer.is_none()
        && last.is_some_and(is_error_prose)
        && prints.iter().any(|p| p.guarded || is_error_prose(&p.text))
}

/// Phrases of error messages, lower case.
const ERROR_PHRASES: [&str; 10] = [
    "does not exist",
    "doesn't exist",
    "not found",
    "failed",
    "invalid",
    "could not",
    "couldn't",
    "cannot",
    "unable to",
    "no such",
];

/// Whether a line reads as an error message: it has an error phrase, the
/// word error / exception or an exception's name (`KeyError`), and is not
/// a `label: number` line (`Mean squared error: 0.65`).
pub fn is_error_prose(line: &str) -> bool {
    let lower = line.to_lowercase();
    let phrase = ERROR_PHRASES.iter().any(|p| lower.contains(p))
        || line
            .split(|c: char| !c.is_alphanumeric())
            .any(is_error_word);
    phrase && !is_metric(&lower)
}

fn is_error_word(word: &str) -> bool {
    matches!(
        word.to_lowercase().as_str(),
        "error" | "errors" | "exception" | "exceptions"
    ) || word.len() > "Error".len() && (word.ends_with("Error") || word.ends_with("Exception"))
}

fn is_metric(line: &str) -> bool {
    line.rsplit_once([':', '='])
        .map(|(_, value)| value.trim().trim_end_matches(['%', '.']))
        .is_some_and(|v| !v.is_empty() && v.parse::<f64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_told_from_results() {
        for line in [
            "The column 'category' does not exist in the dataset.",
            "Error: could not convert string to float",
            "File not found: data.csv",
            "Failed to compute the mean",
            "KeyError: 'price'",
            "An exception occurred: division by zero",
            "Invalid input",
            "Unable to parse the date column",
        ] {
            assert!(is_error_prose(line), "{line}");
        }
        for line in [
            "42",
            "Mean squared error: 0.653",
            "RMSE error = 1.2%",
            "The average price is 12.5",
            "Terrorism cases: high",
            "",
        ] {
            assert!(!is_error_prose(line), "{line}");
        }
    }

    fn pair(stdout: &str, answer: Option<&str>) -> RepairPair {
        RepairPair {
            failing_code: String::new(),
            failing_line: None,
            exception: None,
            repair_code: String::new(),
            repair_stdout: stdout.into(),
            repair_answer: answer.map(str::to_string),
        }
    }

    #[test]
    fn an_error_line_is_masking_only_without_an_answer_and_with_a_print_of_it() {
        let guarded = [Print {
            text: String::new(),
            guarded: true,
        }];
        let plain = [Print {
            text: "total:".into(),
            guarded: false,
        }];
        let erring = [Print {
            text: "The column does not exist".into(),
            guarded: false,
        }];
        let line = "cols: a, b\nThe column 'x' does not exist.\n\n";
        assert!(error_message_output(&pair(line, None), &guarded));
        assert!(error_message_output(&pair(line, None), &erring));
        assert!(!error_message_output(&pair(line, None), &plain));
        assert!(!error_message_output(&pair(line, Some("3")), &guarded));
        assert!(!error_message_output(&pair("total: 3\n", None), &guarded));
        assert!(!error_message_output(&pair("", None), &guarded));
    }

    #[test]
    fn a_printed_line_is_not_an_answer_value() {
        use crate::kernel::{Answer, Unsupported};
        use crate::sandbox::Verdict;
        let with = |rule, unsupported| {
            let mut o = Outcome::ended(Verdict::Ok, 1.0);
            o.answer = Some(Answer {
                value: "x".into(),
                rule,
                json: None,
                type_name: None,
                unsupported,
            });
            answer_value(&o)
        };
        assert_eq!(with(AnswerRule::AnswerVariable, None).as_deref(), Some("x"));
        assert_eq!(with(AnswerRule::LastResult, None).as_deref(), Some("x"));
        assert_eq!(with(AnswerRule::LastStdoutLine, None), None);
        let frame = Unsupported {
            type_name: "pandas.DataFrame".into(),
            reason: "not a plain value".into(),
        };
        let got = with(AnswerRule::AnswerVariable, Some(frame.clone()));
        assert_eq!(got, Some(frame.message()));
        assert_eq!(answer_value(&Outcome::ended(Verdict::Ok, 1.0)), None);
    }

    #[test]
    fn every_way_a_check_fails_names_its_reason() {
        use std::time::Duration;
        use UncheckedReason as R;
        let unread = |json: &str| {
            let reply: Reply = serde_json::from_str(json).unwrap();
            reply.unread.map(|u| u.reason)
        };
        let from_python = [
            ("syntax_error", R::SyntaxError),
            ("parser_limit", R::ParserLimit),
            ("compare_limit", R::CompareLimit),
            ("checker_error", R::CheckerError),
        ];
        for (name, reason) in from_python {
            let json = format!(
                r#"{{"flags":[],"prints":[],"unread":{{"reason":"{name}","detail":"MemoryError"}}}}"#
            );
            assert_eq!(unread(&json), Some(reason));
            assert_eq!(reason.name(), name);
        }
        assert_eq!(unread(r#"{"flags":[],"prints":[],"unread":null}"#), None);
        let reason = |e: MaskError| e.unchecked().reason;
        assert_eq!(
            reason(MaskError::Jail(OneShotError::Timeout(Duration::from_secs(
                20
            )))),
            R::Timeout
        );
        let failed = MaskError::Failed {
            status: "signal: 9 (SIGKILL)".into(),
            stderr: "no message (its jail holds 256 MiB)".into(),
        };
        let why = failed.unchecked();
        assert_eq!(why.reason, R::CheckerError);
        assert!(why.detail.contains("SIGKILL"), "{why}");
        let garbled = serde_json::from_str::<serde_json::Value>("not json").unwrap_err();
        assert_eq!(reason(MaskError::Output(garbled)), R::BadOutput);
        let io = crate::util::IoError::new("x", std::io::ErrorKind::Other.into());
        assert_eq!(reason(MaskError::Jail(OneShotError::Io(io))), R::Jail);
    }

    #[test]
    fn a_reason_keeps_a_bounded_detail() {
        let long = "é".repeat(MAX_DETAIL * 10);
        let why = Unchecked::new(UncheckedReason::ParserLimit, &long);
        assert_eq!(why.detail.chars().count(), MAX_DETAIL + 3);
        assert!(why.detail.ends_with("..."));
        let short = Unchecked::new(UncheckedReason::ParserLimit, "MemoryError");
        assert_eq!(short.to_string(), "parser_limit: MemoryError");
        let json = serde_json::to_value(&short).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"reason": "parser_limit", "detail": "MemoryError"})
        );
    }

    #[test]
    fn flag_names_are_their_serde_names() {
        use strum::IntoEnumIterator;
        for flag in MaskFlag::iter() {
            let json = serde_json::to_string(&flag).unwrap();
            assert_eq!(json, format!("\"{}\"", flag.name()));
        }
    }
}
