//! What the repair rounds did: replies to review prompts, repairs that
//! resent the previous code unchanged, and repairs that raised the same
//! error at the same line again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::arm::Arm;
use super::code_text::{normalise, same_code};
use crate::record::{AttemptRecord, FeedbackKind};
use crate::repair::traceback;
use crate::report::stats::Rate;
use crate::sandbox::Verdict;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Repairs {
    pub reviews: Reviews,
    /// Repair rounds whose code is the previous round's code unchanged
    /// (comments, whitespace runs and blank lines aside), over repair
    /// rounds that followed a round with code and sent code.
    #[serde(default)]
    pub resent_code: Option<Rate>,
    /// Rounds r ≥ 2 whose code (normalised as for resent code) is that of
    /// a round ≤ r−2 and not round r−1's, over rounds r ≥ 2 that sent code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oscillating: Option<Rate>,
    /// Tasks with at least one oscillating round, over tasks with a round
    /// r ≥ 2 that sent code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycling_tasks: Option<Rate>,
    /// The ids of those tasks, in the run's task order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycling_task_ids: Vec<String>,
    /// Rounds r ≥ 1 that raised the exception of round r−1 (same name)
    /// at a failing line of the same text, over rounds r ≥ 1 that ran
    /// code after a round that raised.
    #[serde(default)]
    pub repeated_error: Option<Rate>,
    /// Repairs flagged as hiding the error (any masking rule), over the
    /// repairs checked: rounds that ran code after a round whose failure
    /// the model was told, when the check ran (docs/methodology.md,
    /// "Repairs that hide the error"); none in journals without checks.
    #[serde(default)]
    pub masked: Option<Rate>,
    /// Flagged repairs per rule (a repair may break several).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub masked_by_rule: BTreeMap<String, u64>,
    /// Repairs due a check that were not checked, per reason (a record's
    /// `masking_unchecked`): not in `masked`'s denominator.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub masking_unchecked: BTreeMap<String, u64>,
}

/// What happened after review prompts (`--stop-on never`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Reviews {
    /// Review prompts sent.
    pub prompts: u64,
    /// Replies that kept the answer (the keep token).
    pub kept: u64,
    /// Replies that sent code instead.
    pub revised: u64,
    /// Revisions that turned a right answer wrong / a wrong answer right.
    pub right_to_wrong: u64,
    pub wrong_to_right: u64,
}

impl Repairs {
    pub(super) fn of(arm: &Arm) -> Repairs {
        let cycles = Oscillation::of(arm);
        Repairs {
            reviews: Reviews::of(arm),
            resent_code: resent_code(arm),
            oscillating: Rate::new(cycles.returned, cycles.rounds),
            cycling_tasks: Rate::new(cycles.cycling.len() as u64, cycles.tasks),
            cycling_task_ids: cycles.cycling,
            repeated_error: repeated_error(arm),
            masked: masked(arm).0,
            masked_by_rule: masked(arm).1,
            masking_unchecked: masking_unchecked(arm),
        }
    }
}

impl Reviews {
    fn of(arm: &Arm) -> Reviews {
        let mut reviews = Reviews::default();
        for t in arm.tasks {
            for pair in t.records.windows(2) {
                let (before, reply) = (pair[0], pair[1]);
                if before.feedback_kind != Some(FeedbackKind::Review) {
                    continue;
                }
                reviews.prompts += 1;
                if reply.kept_answer {
                    reviews.kept += 1;
                } else if reply.code.is_some() {
                    reviews.revised += 1;
                    reviews.right_to_wrong += (before.correct && !reply.correct) as u64;
                    reviews.wrong_to_right += (!before.correct && reply.correct) as u64;
                }
            }
        }
        reviews
    }
}

/// Repairs with code after a round with code that resent it unchanged.
fn resent_code(arm: &Arm) -> Option<Rate> {
    let (mut resent, mut repairs) = (0, 0);
    for t in arm.tasks {
        for pair in t.records.windows(2) {
            if let (Some(before), Some(now)) = (&pair[0].code, &pair[1].code) {
                repairs += 1;
                resent += u64::from(same_code(before, now));
            }
        }
    }
    Rate::new(resent, repairs)
}

/// Code that returns to an earlier version: A → B → A.
#[derive(Default)]
struct Oscillation {
    /// Rounds r ≥ 2 that sent code.
    rounds: u64,
    /// Those whose code is a round ≤ r−2's and not round r−1's.
    returned: u64,
    /// Tasks with a round r ≥ 2 that sent code.
    tasks: u64,
    /// Tasks with a returning round.
    cycling: Vec<String>,
}

impl Oscillation {
    fn of(arm: &Arm) -> Oscillation {
        let mut o = Oscillation::default();
        for t in arm.tasks {
            // Each record's round and normalised code, in round order.
            let codes: Vec<(u32, Option<String>)> = (t.records.iter())
                .map(|r| (r.round, r.code.as_deref().map(normalise)))
                .collect();
            let (mut eligible, mut cycles) = (false, false);
            for (i, (round, code)) in codes.iter().enumerate() {
                let Some(code) = code.as_ref().filter(|_| *round >= 2) else {
                    continue;
                };
                eligible = true;
                o.rounds += 1;
                // Equal to the round just before is resent code, not a cycle.
                let previous = i.checked_sub(1).and_then(|p| codes[p].1.as_ref());
                let returned = previous != Some(code)
                    && codes[..i]
                        .iter()
                        .any(|(r, c)| *r + 2 <= *round && c.as_ref() == Some(code));
                o.returned += u64::from(returned);
                cycles |= returned;
            }
            o.tasks += u64::from(eligible);
            if cycles {
                let id = t.records.first().map(|r| r.task_id.clone());
                o.cycling.extend(id);
            }
        }
        o
    }
}

/// Repairs checked for masking, those flagged, and the flags by rule.
fn masked(arm: &Arm) -> (Option<Rate>, BTreeMap<String, u64>) {
    let (mut flagged, mut checked) = (0, 0);
    let mut by_rule = BTreeMap::new();
    for t in arm.tasks {
        for pair in t.records.windows(2) {
            let Some(flags) = &pair[1].masking else {
                continue;
            };
            checked += 1;
            flagged += u64::from(!flags.is_empty());
            for flag in flags {
                *by_rule.entry(flag.name().to_string()).or_insert(0) += 1;
            }
        }
    }
    (Rate::new(flagged, checked), by_rule)
}

/// Repairs not checked for masking, by reason.
fn masking_unchecked(arm: &Arm) -> BTreeMap<String, u64> {
    let mut by_reason = BTreeMap::new();
    for r in arm.records {
        if let Some(why) = &r.masking_unchecked {
            *by_reason.entry(why.reason.name().to_string()).or_insert(0) += 1;
        }
    }
    by_reason
}

/// Rounds that ran code after a round that raised, and those of them
/// that raised the same error at the same line.
fn repeated_error(arm: &Arm) -> Option<Rate> {
    let (mut repeated, mut after_error) = (0, 0);
    for t in arm.tasks {
        for pair in t.records.windows(2) {
            let Some(before) = raised(pair[0]) else {
                continue;
            };
            if !pair[1].executed() {
                continue;
            }
            after_error += 1;
            // An unknown line is never the same line.
            let same = raised(pair[1]).is_some_and(|now| before.1.is_some() && now == before);
            repeated += u64::from(same);
        }
    }
    Rate::new(repeated, after_error)
}

/// The exception a round raised and the text of the line of its code
/// where it failed (trimmed; `None` when no line of the code is named).
fn raised(r: &AttemptRecord) -> Option<(&str, Option<String>)> {
    let o = r.outcome.as_ref().filter(|o| o.verdict == Verdict::Error)?;
    let error = o.error.as_ref()?;
    let code = r.code.as_deref().unwrap_or("");
    let line = traceback::parse(error, code)
        .cell_line()
        .and_then(|l| code.lines().nth(l.checked_sub(1)?))
        .map(|l| l.trim().to_owned());
    Some((error.ename.as_str(), line))
}
