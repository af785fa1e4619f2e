//! One task of one arm, told from start to end: its records in round
//! order, the conversation the model saw, what the task ended with, and
//! what it cost. The files that show a run task by task (the JUnit
//! document, Inspect logs, Every Eval Ever records) all read a run through
//! [`episodes`], so each tells the same story.

use std::collections::HashMap;

use super::task_rounds::{self, TaskRounds};
use crate::model::{Part, Role};
use crate::record::{AttemptRecord, RunConfig};
use crate::repair::traceback::kill_message;
use crate::sandbox::Verdict;
use crate::task::{Expected, Task};

/// One task of one arm.
pub struct Episode<'a> {
    pub arm: String,
    pub task_id: &'a str,
    /// The task's records of the arm in round order (none when the run
    /// stopped before the task started).
    pub records: Vec<&'a AttemptRecord>,
    /// The expected answer, when the suite could still be read.
    pub expected: Option<&'a Expected>,
}

/// One message of an episode's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn<'a> {
    /// The round that sent (user, system) or produced (assistant) it.
    pub round: u32,
    pub role: Role,
    pub text: String,
    /// Base64 PNGs sent with it (vision models shown a plot).
    pub images: Vec<&'a str>,
    /// The record it comes from.
    pub record: &'a AttemptRecord,
}

/// What an episode spent, summed over its rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EpisodeCost {
    /// `None` when a round's count is unknown (the endpoint did not say).
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the server reused from its cache; `None` when no
    /// round's server reported it.
    pub cached_tokens: Option<u64>,
    /// Wall time of the rounds, the kernel's start included.
    pub total_ms: f64,
    /// Time spent generating and executing (model + exec).
    pub working_ms: f64,
}

/// Every task of every arm: arms in run order, tasks in `task_ids` order.
/// `tasks` give the expected answers (a task missing from them has none).
pub fn episodes<'a>(
    config: &'a RunConfig,
    records: &'a [AttemptRecord],
    tasks: &'a [Task],
) -> Vec<Episode<'a>> {
    let expected: HashMap<&str, &Expected> =
        tasks.iter().map(|t| (t.id.as_str(), &t.expected)).collect();
    let mut out = Vec::new();
    for (arm, mine) in task_rounds::by_arm(config, records) {
        let rounds = task_rounds::by_task(config, &mine);
        for (id, TaskRounds { records }) in config.provenance.task_ids.iter().zip(rounds) {
            out.push(Episode {
                arm: arm.clone(),
                task_id: id,
                records,
                expected: expected.get(id.as_str()).copied(),
            });
        }
    }
    out
}

impl<'a> Episode<'a> {
    pub fn last(&self) -> Option<&'a AttemptRecord> {
        self.records.last().copied()
    }

    /// The task ran to its last round (the run was not interrupted in it).
    pub fn finished(&self) -> bool {
        self.last().is_some_and(|r| r.is_final())
    }

    /// Correct at the episode's last round (what Acc@K counts).
    pub fn correct(&self) -> bool {
        self.last().is_some_and(|r| r.correct)
    }

    /// Rounds the task used (round 0 included).
    pub fn rounds_used(&self) -> u32 {
        self.last().map_or(0, |r| r.round + 1)
    }

    /// The first round whose answer was correct, when one was.
    pub fn first_correct_round(&self) -> Option<u32> {
        self.records.iter().find(|r| r.correct).map(|r| r.round)
    }

    /// The conversation in order: each round's new messages (system and
    /// task on round 0, the feedback on the round before later), then the
    /// model's reply.
    pub fn conversation(&self) -> Vec<Turn<'a>> {
        let mut turns = Vec::new();
        for r in &self.records {
            for m in &r.prompt {
                let images = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::ImagePng { base64 } => Some(base64.as_str()),
                        Part::Text { .. } => None,
                    })
                    .collect();
                turns.push(Turn {
                    round: r.round,
                    role: m.role,
                    text: m.joined_text(),
                    images,
                    record: r,
                });
            }
            if let Some(reply) = &r.reply {
                turns.push(Turn {
                    round: r.round,
                    role: Role::Assistant,
                    text: reply.clone(),
                    images: Vec::new(),
                    record: r,
                });
            }
        }
        turns
    }

    /// The task's opening messages (round 0's prompt).
    pub fn opening(&self) -> Vec<Turn<'a>> {
        self.conversation()
            .into_iter()
            .filter(|t| t.round == 0 && t.role != Role::Assistant)
            .collect()
    }

    /// The answer as read at the last round, before normalisation.
    pub fn answer(&self) -> Option<&'a str> {
        self.last()?.check.as_ref()?.extracted.as_deref()
    }

    /// The rule that decided the last round's answer (`number:abs_tol`…).
    pub fn check_rule(&self) -> Option<&'a str> {
        Some(self.last()?.check.as_ref()?.rule.as_str())
    }

    /// The expected answer as people write it.
    pub fn target(&self) -> Option<String> {
        self.expected.map(expected_text)
    }

    pub fn cost(&self) -> EpisodeCost {
        let sum = |count: fn(&AttemptRecord) -> Option<u64>| {
            self.records
                .iter()
                .try_fold(0u64, |acc, r| Some(acc.saturating_add(count(r)?)))
        };
        let cached: Vec<u64> = self
            .records
            .iter()
            .filter_map(|r| r.server_timings.as_ref().map(|t| t.cached_tokens))
            .collect();
        EpisodeCost {
            prompt_tokens: sum(|r| r.tokens.prompt_tokens),
            completion_tokens: sum(|r| r.tokens.completion_tokens),
            cached_tokens: (!cached.is_empty()).then(|| cached.iter().sum()),
            total_ms: self.records.iter().map(|r| r.timings_ms.total).sum(),
            working_ms: self
                .records
                .iter()
                .map(|r| r.timings_ms.model + r.timings_ms.exec)
                .sum(),
        }
    }

    /// Why the task ended wrong; `None` when it ended right.
    pub fn why_wrong(&self, config: &RunConfig) -> Option<String> {
        let Some(last) = self.last() else {
            return Some("not run: the run was interrupted before this task started".into());
        };
        if !last.is_final() {
            return Some("unfinished: the run was interrupted during this task".into());
        }
        if last.correct {
            return None;
        }
        if let Some(why) = &last.infra_error {
            return Some(format!("infrastructure error: {why}"));
        }
        let wrong = || {
            let got = self.answer().unwrap_or("nothing readable");
            match self.target() {
                Some(e) => format!("wrong answer: got {got}, expected {e}"),
                None => format!("wrong answer: got {got}"),
            }
        };
        let Some(outcome) = &last.outcome else {
            return Some(if last.kept_answer {
                wrong()
            } else {
                "no code in the final reply".into()
            });
        };
        match outcome.verdict {
            Verdict::Ok if last.check.is_some() => Some(wrong()),
            Verdict::Ok => Some("the code ran but left no answer value".into()),
            Verdict::Error => Some(match &outcome.error {
                Some(e) if e.evalue.is_empty() => e.ename.clone(),
                Some(e) => format!("{}: {}", e.ename, e.evalue),
                None => "error".into(),
            }),
            other => Some(
                kill_message(outcome, &config.spec.execution.limits)
                    .map(|m| format!("{other}: {m}"))
                    .unwrap_or_else(|| other.to_string()),
            ),
        }
    }
}

/// The expected answer as people write it.
pub fn expected_text(e: &Expected) -> String {
    match e {
        Expected::Number { exact: Some(x), .. } => x.clone(),
        Expected::Number { value, .. } => format!("{value}"),
        Expected::Text { value, .. } => format!("{value:?}"),
        Expected::Math { latex } => latex.clone(),
        Expected::List {
            values, ordered, ..
        } => {
            let list = serde_json::to_string(values).unwrap_or_default();
            if *ordered {
                list
            } else {
                format!("{list} (any order)")
            }
        }
        Expected::Multi { answers } => answers
            .iter()
            .map(|(name, e)| format!("@{name}[{}]", expected_text(e)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}
