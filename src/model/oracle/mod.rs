//! `oracle`, `oracle:faults` and `oracle:wrong`: deterministic stand-ins
//! built from the tasks' reference solutions, which they receive when they
//! are built (requests carry none). They find the task from the
//! conversation ([`TaskIndex`]) and exercise the loop like a model would:
//!
//! - `oracle` sends the reference; asked to review a clean answer, it keeps
//!   it ([`KEEP_TOKEN`]).
//! - `oracle:faults` sends the reference with one injected fault at round 0
//!   ([`fault`]). Later it repairs only when the last feedback carries what a
//!   model needs: the fault's exception name and the failing line; otherwise
//!   it resends the faulty code, as a weak model would. So a feedback path
//!   that loses the traceback lowers its accuracy.
//!   A reference written as two cells (split at a `# %%` line) is sent a
//!   cell at a time instead ([`staged_turn`]): the first cell at round 0
//!   (it runs cleanly and leaves no answer; recorded as fault
//!   `needs_state`), then the second with one injected fault, then its
//!   repair, which uses what the first cell defined: it recovers where the
//!   kernel holds that state (`--execution live` or `replay`) and fails
//!   with a `NameError` where it does not (`fresh`).
//!   Asked afresh (a resampled round: the task alone, no earlier attempt),
//!   it draws the faulty code again with probability
//!   [`FAULTS_AGAIN_ON_RESAMPLE`], else the reference: so repairing from
//!   good feedback beats resampling.
//! - `oracle:flaky`: round 0 is faulty with probability
//!   [`FLAKY_ROUND0_FAULT`]; any fresh attempt (round 0 or a resampled
//!   round) is the reference with probability [`FLAKY_FRESH_SUCCESS`]; in a
//!   repair conversation it ignores the feedback and resends its code. So
//!   resampling beats repairing. Draws are seeded by task id and round.
//! - `oracle:wrong` sends code that runs cleanly but answers wrongly at
//!   round 0 ([`wrong`]), the reference afterwards: clean but wrong under
//!   each stop rule.

pub mod fault;
mod scanner;
pub mod wrong;

use std::collections::HashMap;
use std::time::Instant;

pub use fault::{apply_fault, fault_order, inject_fault, Fault, FaultKind, FAULT_KINDS};
pub use wrong::{wrong_answer, WrongAnswer};

use super::task_index::TaskIndex;
use super::{ChatRequest, ModelClient, ModelError, Reply, Usage, KEEP_TOKEN};
use crate::task::{Expected, Task};

/// Which stand-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OracleKind {
    /// `oracle`: the reference.
    Reference,
    /// `oracle:faults`: one fault at round 0, repaired from good feedback.
    Faults,
    /// `oracle:wrong`: a clean wrong answer at round 0, then the reference.
    Wrong,
    /// `oracle:flaky`: fails at random, succeeds at random when asked
    /// afresh, ignores feedback.
    Flaky,
}

/// `oracle:faults` asked afresh sends the faulty code again this often.
pub const FAULTS_AGAIN_ON_RESAMPLE: f64 = 0.8;
/// `oracle:flaky`'s round 0 is faulty this often (per task).
pub const FLAKY_ROUND0_FAULT: f64 = 0.5;
/// `oracle:flaky` asked afresh after round 0 sends the reference this often.
pub const FLAKY_FRESH_SUCCESS: f64 = 0.7;

impl OracleKind {
    pub fn label(self) -> &'static str {
        match self {
            OracleKind::Reference => "oracle",
            OracleKind::Faults => "oracle:faults",
            OracleKind::Wrong => "oracle:wrong",
            OracleKind::Flaky => "oracle:flaky",
        }
    }
}

/// What an oracle knows of a task.
#[derive(Debug, Clone)]
struct Known {
    reference: Option<String>,
    expected: Expected,
}

/// A deterministic reference-solution model.
#[derive(Debug, Clone)]
pub struct Oracle {
    kind: OracleKind,
    index: TaskIndex,
    tasks: HashMap<String, Known>,
}

/// One oracle reply before it becomes a [`Reply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The reply text: one fenced python block, or the keep token.
    pub text: String,
    /// The code sent, if any.
    pub code: Option<String>,
    /// The fault in `code` (`oracle:faults` only).
    pub fault: Option<FaultKind>,
    /// What the oracle did, in words.
    pub note: String,
}

impl Oracle {
    /// An oracle over `tasks`. Fails when two tasks ask the same question
    /// (with the same input files) but have different references or
    /// answers: the conversation would not tell which one is meant.
    pub fn new(kind: OracleKind, tasks: &[Task]) -> Result<Self, ModelError> {
        let index = TaskIndex::new(kind.label(), tasks, |a, b| {
            a.reference == b.reference && a.expected == b.expected
        })?;
        let tasks = tasks
            .iter()
            .map(|t| {
                let known = Known {
                    reference: t.reference.clone(),
                    expected: t.expected.clone(),
                };
                (t.id.clone(), known)
            })
            .collect();
        Ok(Oracle { kind, index, tasks })
    }

    pub fn kind(&self) -> OracleKind {
        self.kind
    }

    /// What this oracle replies to `request`.
    pub fn respond(&self, request: &ChatRequest) -> Result<Turn, ModelError> {
        let label = self.kind.label();
        let id = self.index.identify(label, request)?;
        let known = &self.tasks[id];
        let reference = known
            .reference
            .as_deref()
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| {
                ModelError::Config(format!("{label}: task {id} has no reference solution"))
            })?;
        match self.kind {
            OracleKind::Reference if request.is_review() => Ok(keep()),
            OracleKind::Reference => Ok(reference_turn(reference, "sent the reference")),
            OracleKind::Wrong if request.round == 0 => {
                let wrong = wrong_answer(reference, &known.expected).ok_or_else(|| {
                    ModelError::Config(format!(
                        "{label}: no wrong answer of the expected type for task {id}"
                    ))
                })?;
                Ok(send(wrong.code, None, wrong.note))
            }
            OracleKind::Wrong => Ok(reference_turn(reference, "sent the reference")),
            OracleKind::Faults => Ok(faults_turn(request, id, reference)),
            OracleKind::Flaky => Ok(flaky_turn(request, id, reference)),
        }
    }
}

fn send(code: String, fault: Option<FaultKind>, note: String) -> Turn {
    Turn {
        text: markdown(&code),
        code: Some(code),
        fault,
        note,
    }
}

fn reference_turn(reference: &str, note: &str) -> Turn {
    send(reference.to_string(), None, note.to_string())
}

fn keep() -> Turn {
    Turn {
        text: format!("The answer is right; I keep it.\n\n{KEEP_TOKEN}\n"),
        code: None,
        fault: None,
        note: "kept the answer on review".into(),
    }
}

fn faulty_turn(fault: Fault, note: String) -> Turn {
    send(fault.code, Some(fault.kind), note)
}

/// A request that starts over: a later round whose conversation holds no
/// earlier attempt (`--after-failure resample`).
fn is_fresh(request: &ChatRequest) -> bool {
    request.round > 0 && request.last_assistant_text().is_none()
}

/// A draw in [0, 1) fixed by the task, the round and what it is for.
fn draw(task_id: &str, round: u32, purpose: &str) -> f64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{purpose}\0{task_id}\0{round}").as_bytes());
    let bits = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

fn faults_turn(request: &ChatRequest, id: &str, reference: &str) -> Turn {
    if let Some((first, second)) = two_cells(reference) {
        return staged_turn(request, id, first, second);
    }
    let fault = inject_fault(reference, id);
    if request.round == 0 {
        let note = format!("injected {}: {}", fault.kind, fault.note);
        return faulty_turn(fault, note);
    }
    if is_fresh(request) {
        if draw(id, request.round, "faults") < FAULTS_AGAIN_ON_RESAMPLE {
            let note = format!("asked afresh, drew {} again", fault.kind);
            return faulty_turn(fault, note);
        }
        return reference_turn(reference, "asked afresh, drew the reference");
    }
    if request.is_review() {
        return keep();
    }
    // Already repaired (and failed for another reason): the reference
    // again, as `oracle` would.
    let previous = request.last_assistant_text().unwrap_or_default();
    if previous == markdown(reference) {
        return reference_turn(reference, "sent the reference again");
    }
    let feedback = request.last_user_text().unwrap_or_default();
    let raises = fault.kind.raises();
    if fault.explained_by(&feedback) {
        let note = format!(
            "repaired: the feedback shows {} and the failing line",
            raises.join(" or ")
        );
        reference_turn(reference, &note)
    } else {
        let note = format!(
            "resent the faulty code: the feedback lacks {} or the failing line",
            raises.join(" / ")
        );
        faulty_turn(fault, note)
    }
}

/// The line that starts a new cell in a reference (the percent format of
/// notebooks as scripts).
const CELL_MARKER: &str = "# %%";

/// A reference's two cells, split at its first `# %%` line; `None` for a
/// reference in one cell.
fn two_cells(reference: &str) -> Option<(&str, &str)> {
    let mut at = 0;
    for line in reference.split_inclusive('\n') {
        if line.trim_end() == CELL_MARKER {
            let (first, second) = (&reference[..at], &reference[at + line.len()..]);
            let filled = |c: &str| !c.trim().is_empty();
            return (filled(first) && filled(second)).then_some((first, second));
        }
        at += line.len();
    }
    None
}

/// `oracle:faults` on a two-cell reference: the first cell (round 0, or
/// asked afresh), then the second with one fault, then the second repaired
/// when the feedback explains the fault, resent faulty when it does not.
/// The second cell reads what the first defined, so only a kernel that
/// kept (or replayed) the first cell runs it.
fn staged_turn(request: &ChatRequest, id: &str, first: &str, second: &str) -> Turn {
    if request.round == 0 || is_fresh(request) {
        let note = "sent the first cell; the second will use what it defines".to_string();
        return send(first.to_string(), Some(FaultKind::NeedsState), note);
    }
    if request.is_review() {
        return keep();
    }
    let fault = inject_fault(second, id);
    let previous = request.last_assistant_text().unwrap_or_default();
    if previous == markdown(first) {
        let note = format!("sent the second cell with {}: {}", fault.kind, fault.note);
        return faulty_turn(fault, note);
    }
    if previous == markdown(second) {
        return reference_turn(second, "sent the second cell again");
    }
    let feedback = request.last_user_text().unwrap_or_default();
    if fault.explained_by(&feedback) {
        reference_turn(
            second,
            "repaired the second cell, which uses what the first defined",
        )
    } else {
        let note = format!(
            "resent the faulty second cell: the feedback lacks {} or the failing line",
            fault.kind.raises().join(" / ")
        );
        faulty_turn(fault, note)
    }
}

fn flaky_turn(request: &ChatRequest, id: &str, reference: &str) -> Turn {
    if request.is_review() {
        return keep();
    }
    let fault = || inject_fault(reference, id);
    if request.round == 0 {
        if draw(id, 0, "flaky") < FLAKY_ROUND0_FAULT {
            let fault = fault();
            let note = format!("failed at random: {}", fault.note);
            return faulty_turn(fault, note);
        }
        return reference_turn(reference, "sent the reference");
    }
    if is_fresh(request) {
        if draw(id, request.round, "flaky") < FLAKY_FRESH_SUCCESS {
            return reference_turn(reference, "asked afresh, sent the reference");
        }
        return faulty_turn(fault(), "asked afresh, failed at random again".into());
    }
    // Feedback is ignored: the same code again.
    let previous = request.last_assistant_text().unwrap_or_default();
    if previous == markdown(reference) {
        return reference_turn(reference, "ignored the feedback; resent the reference");
    }
    faulty_turn(fault(), "ignored the feedback; resent its code".into())
}

#[async_trait::async_trait]
impl ModelClient for Oracle {
    fn name(&self) -> String {
        self.kind.label().to_string()
    }

    fn is_synthetic(&self) -> bool {
        true
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        let started = Instant::now();
        let turn = self.respond(request)?;
        let usage = Usage::counted(
            request
                .messages
                .iter()
                .map(|m| tokens(&m.joined_text()))
                .sum(),
            tokens(&turn.text),
        );
        Ok(Reply {
            text: turn.text,
            usage,
            attempts: 1,
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            finish_reason: Some("stop".into()),
            fault: turn.fault.map(|k| k.to_string()),
            note: Some(turn.note),
            server: None,
        })
    }
}

/// What an oracle charges for a text: one token per 4 characters (about
/// what BPE tokenizers give for English and code), so budgets and their
/// plots work on synthetic runs; labelled synthetic like the rest.
fn tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

/// A reply with one fenced python block (a longer fence if the code itself
/// contains three backticks).
fn markdown(code: &str) -> String {
    let mut fence = "```".to_string();
    while code.contains(&fence) {
        fence.push('`');
    }
    let newline = if code.ends_with('\n') { "" } else { "\n" };
    format!("Here is the solution.\n\n{fence}python\n{code}{newline}{fence}\n")
}

#[cfg(test)]
mod tests;
