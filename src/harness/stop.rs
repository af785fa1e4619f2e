//! The stop rule: after a round, whether the task stops, and if it does
//! not, which message follows.

use crate::kernel::Outcome;
use crate::record::{FeedbackKind, LoopPolicy, StopOn, StopReason};

use super::answer::RoundAnswer;
use super::round::{Decision, Executed, Scored};

/// Stops on a clean answer (`clean`), a correct one (`correct`, oracle)
/// or the last round; otherwise names the next message.
pub(super) fn decide(
    policy: &LoopPolicy,
    round: u32,
    kept_answer: bool,
    executed: &Executed,
    scored: &Scored,
) -> Decision {
    let clean = executed.clean() && scored.answered;
    let stop = match policy.stop_on {
        StopOn::Clean if clean => Some(StopReason::Clean),
        StopOn::Correct if scored.correct() => Some(StopReason::Correct),
        _ if round == policy.rounds => Some(StopReason::RoundsExhausted),
        _ => None,
    };
    let feedback = stop.is_none().then(|| {
        next_feedback(
            policy.stop_on,
            kept_answer,
            executed.outcome.as_ref(),
            &executed.answer(),
        )
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

    #[test]
    fn the_last_round_stops_whatever_happened() {
        let policy = LoopPolicy {
            rounds: 1,
            stop_on: StopOn::Never,
            feedback: Default::default(),
            feedback_budget: 100,
            prompts: None,
        };
        let executed = Executed {
            outcome: Some(outcome(Verdict::Error)),
            ..Executed::default()
        };
        let scored = Scored {
            check: None,
            answered: false,
        };
        let first = decide(&policy, 0, false, &executed, &scored);
        assert_eq!(
            (first.stop, first.feedback),
            (None, Some(FeedbackKind::Error))
        );
        let last = decide(&policy, 1, false, &executed, &scored);
        assert_eq!(
            (last.stop, last.feedback),
            (Some(StopReason::RoundsExhausted), None)
        );
    }
}
