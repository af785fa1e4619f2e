//! The answer one round produced, as the stop rule and the checker see it.

use super::math_checker::MathChecker;
use crate::kernel::Outcome;
use crate::task::check::math::MathVerdict;
use crate::task::{Expected, Task};

/// The symbolic checker's verdicts on `answer` when `task` expects LaTeX
/// (`None` for other tasks, no answer, or no checker).
pub async fn symbolic(
    checker: Option<&MathChecker>,
    task: &Task,
    answer: Option<&str>,
) -> Option<MathVerdict> {
    match (&task.expected, checker, answer) {
        (Expected::Math { latex }, Some(checker), Some(answer)) => {
            Some(checker.check(latex, Some(answer)).await)
        }
        _ => None,
    }
}

/// What a round's code left as its answer.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundAnswer {
    /// Nothing: no `answer`, no result, no output.
    None,
    /// A plain value, as text the checkers read.
    Value { text: String },
    /// A plain value not in the form the question asks for: a multi-answer
    /// task's value that carries none of its named parts (`multi`), or a
    /// masking repair's value the checker cannot read. No answer.
    Formless { text: String, multi: bool },
    /// A value retrace will not read (a DataFrame, a custom object, a huge
    /// list): the model is told so.
    Unsupported { description: String },
}

impl RoundAnswer {
    pub fn of(outcome: &Outcome) -> RoundAnswer {
        match &outcome.answer {
            Some(a) => match &a.unsupported {
                Some(u) => RoundAnswer::Unsupported {
                    description: format!("{} ({})", u.type_name, u.reason),
                },
                None => RoundAnswer::Value {
                    text: a.value.clone(),
                },
            },
            None => RoundAnswer::None,
        }
    }
}
