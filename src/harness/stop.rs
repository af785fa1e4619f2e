//! The stop rule: after a round, whether the task stops, and if it does
//! not, which message follows.

use crate::kernel::Outcome;
use crate::record::{AfterFailure, FeedbackKind, LoopPolicy, StopOn, StopReason};

use super::answer::RoundAnswer;
use super::round::{Decision, Executed, Scored};

/// Where a task is when the stop rule looks at it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Turn {
    pub round: u32,
    /// The reply kept the previous answer after a review prompt.
    pub kept_answer: bool,
    /// The task's cumulative tokens, this round's included.
    pub spent: u64,
}

/// Stops on a clean answer (`clean`), a correct one (`correct`, oracle),
/// the last round or the task's token budget; otherwise names the next
/// message (`resample` after every round that does not stop).
pub(super) fn decide(
    policy: &LoopPolicy,
    turn: Turn,
    executed: &Executed,
    answer: &RoundAnswer,
    scored: &Scored,
) -> Decision {
    let clean = executed.clean() && scored.answered;
    let over_budget = policy.max_task_tokens.is_some_and(|max| turn.spent > max);
    let stop = match policy.stop_on {
        StopOn::Clean if clean => Some(StopReason::Clean),
        StopOn::Correct if scored.correct() => Some(StopReason::Correct),
        _ if turn.round == policy.rounds => Some(StopReason::RoundsExhausted),
        _ if over_budget => Some(StopReason::TokenBudget),
        _ => None,
    };
    let feedback = stop.is_none().then(|| match policy.after_failure {
        AfterFailure::Resample => FeedbackKind::Resample,
        AfterFailure::Repair => next_feedback(
            policy.stop_on,
            turn.kept_answer,
            executed.outcome.as_ref(),
            answer,
        ),
    });
    Decision { stop, feedback }
}

/// Which message follows a round that did not stop the task.
fn next_feedback(
    stop_on: StopOn,
    kept_answer: bool,
    outcome: Option<&Outcome>,
    answer: &RoundAnswer,
) -> FeedbackKind {
    if kept_answer {
        return FeedbackKind::Review;
    }
    let Some(outcome) = outcome else {
        return FeedbackKind::NoCode;
    };
    if !outcome.succeeded() {
        return FeedbackKind::Error;
    }
    match answer {
        RoundAnswer::None => FeedbackKind::NoAnswer,
        RoundAnswer::Formless { multi: true, .. } => FeedbackKind::MissingParts,
        RoundAnswer::Formless { multi: false, .. } => FeedbackKind::NoAnswer,
        RoundAnswer::Unsupported { .. } => FeedbackKind::Unsupported,
        RoundAnswer::Value { .. } => match stop_on {
            StopOn::Correct => FeedbackKind::Wrong,
            // `clean` stops on a value; `never` asks for a review.
            StopOn::Clean | StopOn::Never => FeedbackKind::Review,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Verdict;

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome::ended(verdict, 1.0)
    }

    #[test]
    fn the_repair_template_follows_what_happened() {
        let value = RoundAnswer::Value { text: "1".into() };
        let unsupported = RoundAnswer::Unsupported {
            description: "DataFrame".into(),
        };
        let ok = outcome(Verdict::Ok);
        let next = |stop, o: Option<&Outcome>, a: &RoundAnswer| next_feedback(stop, false, o, a);
        use FeedbackKind as F;
        assert_eq!(next(StopOn::Clean, None, &RoundAnswer::None), F::NoCode);
        let raised = outcome(Verdict::Error);
        assert_eq!(
            next(StopOn::Clean, Some(&raised), &RoundAnswer::None),
            F::Error
        );
        let killed = outcome(Verdict::OomKilled);
        assert_eq!(
            next(StopOn::Never, Some(&killed), &RoundAnswer::None),
            F::Error
        );
        assert_eq!(
            next(StopOn::Clean, Some(&ok), &RoundAnswer::None),
            F::NoAnswer
        );
        assert_eq!(next(StopOn::Clean, Some(&ok), &unsupported), F::Unsupported);
        assert_eq!(next(StopOn::Never, Some(&ok), &unsupported), F::Unsupported);
        assert_eq!(next(StopOn::Never, Some(&ok), &value), F::Review);
        assert_eq!(next(StopOn::Correct, Some(&ok), &value), F::Wrong);
        // A kept answer is reviewed again (it ran nothing).
        assert_eq!(
            next_feedback(StopOn::Never, true, None, &RoundAnswer::None),
            F::Review
        );
    }

    fn policy(rounds: u32) -> LoopPolicy {
        LoopPolicy {
            rounds,
            stop_on: StopOn::Never,
            feedback: Default::default(),
            feedback_budget: 100,
            prompts: None,
            after_failure: AfterFailure::Repair,
            max_task_tokens: None,
            round0_from: None,
            execution: Default::default(),
        }
    }

    fn turn(round: u32, spent: u64) -> Turn {
        Turn {
            round,
            kept_answer: false,
            spent,
        }
    }

    fn failed() -> (Executed, Scored) {
        let executed = Executed {
            outcome: Some(outcome(Verdict::Error)),
            ..Executed::default()
        };
        let scored = Scored {
            check: None,
            answered: false,
            masking: None,
            masking_unchecked: None,
        };
        (executed, scored)
    }

    #[test]
    fn the_last_round_stops_whatever_happened() {
        let policy = policy(1);
        let (executed, scored) = failed();
        let none = RoundAnswer::None;
        let first = decide(&policy, turn(0, 0), &executed, &none, &scored);
        assert_eq!(
            (first.stop, first.feedback),
            (None, Some(FeedbackKind::Error))
        );
        let last = decide(&policy, turn(1, 0), &executed, &none, &scored);
        assert_eq!(
            (last.stop, last.feedback),
            (Some(StopReason::RoundsExhausted), None)
        );
    }

    #[test]
    fn a_task_past_its_token_budget_stops_and_resampling_starts_over() {
        let (executed, scored) = failed();
        let none = RoundAnswer::None;
        let budget = LoopPolicy {
            max_task_tokens: Some(100),
            ..policy(3)
        };
        let within = decide(&budget, turn(0, 100), &executed, &none, &scored);
        assert_eq!(within.stop, None);
        let over = decide(&budget, turn(1, 101), &executed, &none, &scored);
        assert_eq!(
            (over.stop, over.feedback),
            (Some(StopReason::TokenBudget), None)
        );
        let resample = LoopPolicy {
            after_failure: AfterFailure::Resample,
            ..policy(3)
        };
        let next = decide(&resample, turn(0, 0), &executed, &none, &scored);
        assert_eq!(next.feedback, Some(FeedbackKind::Resample));
    }

    #[test]
    fn a_value_without_the_named_parts_asks_for_them() {
        let ok = outcome(Verdict::Ok);
        let formless = RoundAnswer::Formless {
            text: "The column does not exist.".into(),
            multi: true,
        };
        assert_eq!(
            next_feedback(StopOn::Clean, false, Some(&ok), &formless),
            FeedbackKind::MissingParts
        );
    }
}
