//! The messages the model is sent: the opening pair (system rules and the
//! task) and, after a round that did not stop its task, the next message
//! by kind (a repair, a review, a request for code or for an answer). The
//! template chosen, its variables, the plots attached and the package
//! policy's wording are all decided here; the episode only says what
//! happened.

use crate::kernel::{Outcome, StateView};
use crate::model::{Message, Part, Role};
use crate::pyenv::{Strategy, FAT_PACKAGES};
use crate::sandbox::SandboxLimits;
use crate::task::check::math;
use crate::task::{Expected, Task};

use super::execution::ExecutionMode;
use super::feedback::{error_feedback, FeedbackKind, FeedbackMode};
use super::output_note::output_note;
use super::prompt::{
    describe_files, describe_images, stdout_excerpt, PromptError, TemplateName, Templates,
    NO_OUTPUT,
};

/// What an arm's kernels can import, as the prompts describe it.
#[derive(Debug, Clone, Copy)]
pub enum PackageOffer<'a> {
    /// The fat image: its packages, nothing to install.
    Fat,
    /// The slim image plus installs on request of these packages.
    Installable(&'a [&'a str]),
    /// The standard library only.
    StandardLibrary,
}

impl<'a> PackageOffer<'a> {
    pub fn of(strategy: Strategy, installable: Option<&'a [&'a str]>) -> PackageOffer<'a> {
        match (strategy, installable) {
            (Strategy::Dynamic, Some(list)) => PackageOffer::Installable(list),
            (Strategy::Fat, _) => PackageOffer::Fat,
            _ => PackageOffer::StandardLibrary,
        }
    }

    /// The system prompt's rule (`{{packages_policy}}`).
    fn policy(self) -> &'static str {
        match self {
            PackageOffer::Installable(_) => {
                "There is no network access, but the packages listed in the task as installable \
                 can be installed for you, each at one fixed version: import it, or write \
                 `%pip install NAME` on its own line in your code. Nothing else can be installed."
            }
            _ => {
                "There is no network access and you cannot install packages: \
                 use only the standard library and the packages listed in the task."
            }
        }
    }

    /// The task prompt's list (`{{packages}}`).
    fn list(self) -> String {
        match self {
            PackageOffer::Installable(list) => format!(
                "the Python standard library; installable on request: {}",
                list.join(", ")
            ),
            PackageOffer::Fat => {
                let (last, rest) = FAT_PACKAGES.split_last().expect("a list");
                format!("{}, {last} and the standard library", rest.join(", "))
            }
            PackageOffer::StandardLibrary => "the Python standard library only".into(),
        }
    }
}

/// The system and task messages that open a task's conversation.
pub fn opening(
    templates: &Templates,
    task: &Task,
    offer: PackageOffer,
) -> Result<[Message; 2], PromptError> {
    let system = templates.render(TemplateName::System, &[("packages_policy", offer.policy())])?;
    let question = match task.expected {
        Expected::Math { .. } => format!("{}\n\n{}", task.question, math::ANSWER_FORM),
        _ => task.question.clone(),
    };
    let user = templates.render(
        TemplateName::Task,
        &[
            ("question", question.as_str()),
            ("files", describe_task_files(task).as_str()),
            ("packages", offer.list().as_str()),
        ],
    )?;
    Ok([
        Message::text(Role::System, system),
        Message::text(Role::User, user),
    ])
}

/// How much feedback says and in how many characters.
#[derive(Debug, Clone, Copy)]
pub struct FeedbackPolicy<'a> {
    pub mode: FeedbackMode,
    /// Characters of feedback per message.
    pub budget: usize,
    /// The limits kill messages name.
    pub limits: &'a SandboxLimits,
    /// The model takes images: a failing round's plots are attached.
    pub vision: bool,
    /// What the next round's kernel holds: a mode other than `live` closes
    /// the message with its sentence (`execution_*.md`).
    pub execution: ExecutionMode,
}

/// What happened in the round the next message answers.
#[derive(Debug, Clone, Copy)]
pub struct RoundContext<'a> {
    pub kind: FeedbackKind,
    pub rounds_left: u32,
    /// The round's execution, when its reply had code.
    pub outcome: Option<&'a Outcome>,
    pub code: &'a str,
    /// The answer in force, as the model is shown it in a review.
    pub answer: &'a str,
    /// What the round's answer was, when retrace would not read it.
    pub unsupported: Option<&'a str>,
    /// `parsed+state`: the live kernel's view around the failure.
    pub state: Option<&'a StateView>,
    /// The named parts a multi-answer task asks for (empty otherwise).
    pub parts: &'a [String],
}

/// The message for the next round, closed by the execution mode's
/// sentence when the next round gets a new kernel.
pub fn next_message(
    templates: &Templates,
    policy: FeedbackPolicy,
    round: RoundContext,
) -> Result<Message, PromptError> {
    let mut message = round_message(templates, policy, round)?;
    if let Some(name) = TemplateName::of_execution(policy.execution) {
        let sentence = templates.render(name, &[])?;
        if let Some(Part::Text { text }) = message.parts.first_mut() {
            text.push('\n');
            text.push_str(sentence.trim_end());
            text.push('\n');
        }
    }
    Ok(message)
}

/// The message for the next round, by what happened in it.
fn round_message(
    templates: &Templates,
    policy: FeedbackPolicy,
    round: RoundContext,
) -> Result<Message, PromptError> {
    let rounds_left = round.rounds_left.to_string();
    let rounds_left = rounds_left.as_str();
    let stdout = round
        .outcome
        .and_then(|o| stdout_excerpt(o, policy.budget / 4))
        .unwrap_or_else(|| NO_OUTPUT.to_string());
    let render = |name, vars: &[(&str, &str)]| templates.render(name, vars);
    let text = match round.kind {
        FeedbackKind::NoCode => {
            render(TemplateName::RepairNoCode, &[("rounds_left", rounds_left)])?
        }
        FeedbackKind::NoAnswer => render(
            TemplateName::RepairNoAnswer,
            &[("stdout", &stdout), ("rounds_left", rounds_left)],
        )?,
        FeedbackKind::Unsupported => render(
            TemplateName::RepairUnsupported,
            &[
                (
                    "answer_type",
                    round.unsupported.unwrap_or("an unreadable value"),
                ),
                ("stdout", &stdout),
                ("rounds_left", rounds_left),
            ],
        )?,
        FeedbackKind::Review => render(
            TemplateName::Review,
            &[
                ("answer", round.answer),
                ("stdout", &stdout),
                ("rounds_left", rounds_left),
            ],
        )?,
        FeedbackKind::Wrong => render(
            TemplateName::RepairWrong,
            &[("answer", round.answer), ("rounds_left", rounds_left)],
        )?,
        FeedbackKind::MissingParts => {
            let parts: Vec<String> = round.parts.iter().map(|p| format!("`@{p}[...]`")).collect();
            render(
                TemplateName::RepairMissingParts,
                &[
                    ("parts", &parts.join(", ")),
                    ("answer", round.answer),
                    ("stdout", &stdout),
                    ("rounds_left", rounds_left),
                ],
            )?
        }
        FeedbackKind::FalseAlarm => super::false_alarm::message(round.answer),
        FeedbackKind::Resample => unreachable!("a resampled round gets the opening messages"),
        FeedbackKind::Error => {
            let outcome = round
                .outcome
                .expect("an error feedback follows an execution");
            return repair_message(templates, policy, &round, outcome, rounds_left);
        }
    };
    Ok(Message::text(Role::User, text))
}

/// The repair message after a failed or killed execution, filled according
/// to the feedback mode, with the plots when the model takes images.
fn repair_message(
    templates: &Templates,
    policy: FeedbackPolicy,
    round: &RoundContext,
    outcome: &Outcome,
    rounds_left: &str,
) -> Result<Message, PromptError> {
    // A new kernel follows in every mode but `live`, which the mode's
    // sentence says: the kill message's own "restarted" line would repeat
    // it (and, under `replay`, wrongly say everything is gone).
    let renewed;
    let outcome = if policy.execution.renews_kernel() && outcome.state_lost {
        renewed = Outcome {
            state_lost: false,
            ..outcome.clone()
        };
        &renewed
    } else {
        outcome
    };
    let fb = error_feedback(
        policy.mode,
        outcome,
        round.code,
        policy.limits,
        policy.budget,
    );
    let Some(stdout) = fb.stdout else {
        let text = templates.render(
            TemplateName::RepairBare,
            &[("feedback", &fb.error), ("rounds_left", rounds_left)],
        )?;
        return Ok(Message::text(Role::User, text));
    };
    let mut error = fb.error;
    if policy.mode == FeedbackMode::ParsedState {
        if let Some(view) = round.state.and_then(|v| state_note(v, policy.budget / 4)) {
            error.push_str("\n\n");
            error.push_str(&view);
        }
        if let Some(shown) = output_note(outcome, policy.budget / 4) {
            error.push_str(
                "\n\nWhat your code's figures, tables and files show (read by retrace):\n",
            );
            error.push_str(&shown);
        }
    }
    let vars = [
        ("feedback", error.as_str()),
        ("stdout", stdout.as_str()),
        ("rounds_left", rounds_left),
    ];
    let images: Vec<Part> = outcome
        .artifacts
        .iter()
        .filter(|a| a.mime == "image/png")
        .filter_map(|a| a.base64.clone())
        .map(|base64| Part::ImagePng { base64 })
        .collect();
    if policy.vision && !images.is_empty() {
        let described = describe_images(&outcome.artifacts);
        let mut with_images = vars.to_vec();
        with_images.push(("images", described.as_str()));
        let text = templates.render(TemplateName::RepairWithImages, &with_images)?;
        let mut message = Message::text(Role::User, text);
        message.parts.extend(images);
        return Ok(message);
    }
    let text = templates.render(TemplateName::Repair, &vars)?;
    Ok(Message::text(Role::User, text))
}

/// `--feedback parsed+state`: what the live kernel holds around the
/// failure, in at most `budget` characters; `None` when the view is empty.
fn state_note(view: &StateView, budget: usize) -> Option<String> {
    let text = view.render(budget);
    (!text.trim().is_empty())
        .then(|| format!("What your variables hold now (checked by retrace):\n{text}"))
}

fn describe_task_files(task: &Task) -> String {
    let sizes: Vec<(String, u64)> = task
        .files
        .iter()
        .map(|f| {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
            let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            (name.unwrap_or_default(), size)
        })
        .collect();
    let sizes: Vec<(&str, u64)> = sizes.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    describe_files(&sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_lists_read_as_before() {
        assert_eq!(
            PackageOffer::Fat.list(),
            "numpy, pandas, matplotlib, scipy, sympy, scikit-learn, statsmodels, networkx, \
             seaborn and the standard library"
        );
        let list = ["tabulate", "rich"];
        assert_eq!(
            PackageOffer::of(Strategy::Dynamic, Some(&list)).list(),
            "the Python standard library; installable on request: tabulate, rich"
        );
        assert_eq!(
            PackageOffer::of(Strategy::Slim, None).list(),
            "the Python standard library only"
        );
    }

    /// A killed round's repair message in each mode: `live` as it always
    /// was (the kill's "restarted" line), the others closed by their
    /// mode's sentence instead.
    #[test]
    fn the_mode_sentence_closes_the_message_and_live_adds_nothing() {
        use crate::repair::traceback::STATE_LOST;
        let templates = Templates::default();
        let limits = SandboxLimits::default();
        let mut outcome = Outcome::ended(crate::sandbox::Verdict::OomKilled, 1.0);
        outcome.state_lost = true;
        let text = |execution, kind| {
            let policy = FeedbackPolicy {
                mode: FeedbackMode::Parsed,
                budget: 4000,
                limits: &limits,
                vision: false,
                execution,
            };
            let round = RoundContext {
                kind,
                rounds_left: 2,
                outcome: Some(&outcome),
                code: "x = [0] * 10**12",
                answer: "",
                unsupported: None,
                state: None,
                parts: &[],
            };
            next_message(&templates, policy, round)
                .unwrap()
                .joined_text()
        };
        let replay = templates.text(TemplateName::ExecutionReplay).trim_end();
        let fresh = templates.text(TemplateName::ExecutionFresh).trim_end();
        for kind in [FeedbackKind::Error, FeedbackKind::NoAnswer] {
            let live = text(ExecutionMode::Live, kind);
            assert!(!live.contains(replay) && !live.contains(fresh), "{live}");
            for (mode, sentence) in [
                (ExecutionMode::Replay, replay),
                (ExecutionMode::Fresh, fresh),
            ] {
                let other = text(mode, kind);
                assert!(other.ends_with(&format!("\n\n{sentence}\n")), "{other}");
                assert!(!other.contains(STATE_LOST), "{other}");
            }
        }
        assert!(text(ExecutionMode::Live, FeedbackKind::Error).contains(STATE_LOST));
    }
}
