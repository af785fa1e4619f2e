//! The false-alarm control's one message, `prompts/false_alarm.md`: fixed
//! (`--prompts` does not override it, and it is not in the prompts hash),
//! so that the harm rates of two runs answer the same words.

const TEMPLATE: &str = include_str!("../../prompts/false_alarm.md");

/// The message for a round whose answer was `answer` (one pass: text in
/// the answer is never read as a placeholder).
pub fn message(answer: &str) -> String {
    TEMPLATE.replacen("{{answer}}", answer, 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_says_the_answer_is_wrong_and_nothing_about_an_error() {
        let m = super::message("42 {{answer}}");
        assert!(m.starts_with("Your answer is wrong"), "{m}");
        assert!(m.contains("\n42 {{answer}}\n"), "{m}");
        for word in ["Traceback", "Error", "line"] {
            assert!(!m.contains(word), "{m}");
        }
    }
}
