//! The scoring rule of a round, in one place: used live by the episode,
//! offline by `report --rescore`, and by `tasks validate`.

use std::collections::HashMap;

use super::check::math::{unchecked, MathVerdict};
use super::check::{check, published, Check};
use super::{Expected, Task};

/// The symbolic checker's verdicts, by expected LaTeX and answer text:
/// what an offline re-score asked the checker before scoring.
pub type Symbolic = HashMap<(String, String), MathVerdict>;

/// The check in force after a round. A round whose code left an answer
/// value is checked afresh (against the value, with its stdout for
/// checkers that read printed output); a round that left none carries the
/// check in force before it, so Acc@r is about the answer available after
/// round r. A LaTeX answer ([`Expected::Math`]) takes the symbolic
/// checker's verdict on the value (`symbolic`; without one it is
/// `math:unchecked`). The dataset's published rules are judged beside
/// retrace's on the same value ([`Check::published`]).
pub fn score(
    task: &Task,
    previous: Option<&Check>,
    answer: Option<&str>,
    stdout: &str,
    symbolic: Option<&MathVerdict>,
) -> Option<Check> {
    let Some(value) = answer else {
        return previous.cloned();
    };
    let mut c = match (&task.expected, symbolic) {
        (Expected::Math { .. }, Some(verdict)) => verdict.clone().into_check(),
        (Expected::Math { .. }, None) => unchecked(),
        (expected, _) => check(expected, Some(value), stdout),
    };
    c.published
        .extend(published::judge(task, Some(value), stdout));
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        serde_json::from_value(serde_json::json!({
            "id": "t", "question": "q", "expected": {"type": "number", "value": 42.0},
        }))
        .unwrap()
    }

    #[test]
    fn an_answer_is_checked_and_no_answer_carries_the_previous_check() {
        let task = task();
        let right = score(&task, None, Some("42"), "", None).unwrap();
        assert!(right.correct && right.parsed);
        let wrong = score(&task, Some(&right), Some("41"), "", None).unwrap();
        assert!(!wrong.correct);
        assert_eq!(score(&task, Some(&wrong), None, "42", None), Some(wrong));
        assert_eq!(score(&task, None, None, "42", None), None);
    }

    #[test]
    fn published_rules_are_judged_beside_retraces() {
        let mut task = task();
        task.published = Some(crate::task::Published::Gsm8k {
            answer: "42".into(),
        });
        let float = score(&task, None, Some("42.0"), "", None).unwrap();
        assert!(float.correct, "retrace reads 42.0 as 42");
        assert!(!float.published["gsm8k"], "lm-eval's exact match does not");
        let exact = score(&task, None, Some("42"), "", None).unwrap();
        assert!(exact.published["gsm8k"]);
    }

    #[test]
    fn a_latex_answer_takes_the_checkers_verdict() {
        let mut task = task();
        task.expected = Expected::Math { latex: "42".into() };
        let unchecked = score(&task, None, Some("42"), "", None).unwrap();
        assert!(!unchecked.correct && unchecked.rule == "math:unchecked");
        let timed_out = MathVerdict::undecided("math:checker_timeout", "slow");
        let c = score(&task, None, Some("42"), "", Some(&timed_out)).unwrap();
        assert_eq!(c.rule, "math:checker_timeout");
        assert_eq!(c.published.len(), 2, "{c:?}");
    }
}
