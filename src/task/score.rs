//! The scoring rule of a round, in one place: used live by the episode,
//! offline by `report --rescore`, and by `tasks validate`.

use super::check::{check, Check};
use super::Expected;

/// The check in force after a round. A round whose code left an answer
/// value is checked afresh (against the value, with its stdout for
/// checkers that read printed output); a round that left none carries the
/// check in force before it, so Acc@r is about the answer available after
/// round r.
pub fn score(
    expected: &Expected,
    previous: Option<&Check>,
    answer: Option<&str>,
    stdout: &str,
) -> Option<Check> {
    match answer {
        Some(value) => Some(check(expected, Some(value), stdout)),
        None => previous.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected() -> Expected {
        serde_json::from_value(serde_json::json!({"type": "number", "value": 42.0})).unwrap()
    }

    #[test]
    fn an_answer_is_checked_and_no_answer_carries_the_previous_check() {
        let right = score(&expected(), None, Some("42"), "").unwrap();
        assert!(right.correct && right.parsed);
        let wrong = score(&expected(), Some(&right), Some("41"), "").unwrap();
        assert!(!wrong.correct);
        assert_eq!(score(&expected(), Some(&wrong), None, "42"), Some(wrong));
        assert_eq!(score(&expected(), None, None, "42"), None);
    }
}
