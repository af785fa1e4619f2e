//! Prompt templates and the feedback text that fills the repair prompts.
//!
//! Templates are Markdown files with named placeholders `{{name}}` (spaces
//! inside the braces allowed). The defaults in `prompts/` are compiled in;
//! [`Templates::from_dir`] overrides any of them from a directory (a missing
//! file keeps the default). Each template has a fixed set of placeholders
//! ([`TemplateName::placeholders`]); a template using any other, a render
//! call passing any other, or a placeholder left without a value is an error
//! naming the template and the placeholder. Substitution is a single pass:
//! text inside a value (code, output) is never scanned for placeholders.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::kernel::{Artifact, Outcome};
use crate::sandbox::{SandboxLimits, Verdict};
use crate::util::units::format_bytes;

use super::execution::ExecutionMode;

use super::traceback::{
    cut_middle, fit_keep_tail, head_tail, keep_tail, kill_message, parse,
    render as render_traceback, scrub_paths,
};

/// The templates, one file each in the prompts directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TemplateName {
    /// How to answer: one python block, stateful kernel, `answer`.
    System,
    /// The task: `question`, `files`, `packages`.
    Task,
    /// After a failed execution: `feedback`, `stdout`, `rounds_left`.
    Repair,
    /// The reply had no code: `rounds_left`.
    RepairNoCode,
    /// Ran cleanly, no answer: `stdout`, `rounds_left`.
    RepairNoAnswer,
    /// As `Repair`, with the plots attached: also `images`.
    RepairWithImages,
    /// Feedback modes `minimal` and `none`: only `feedback`, `rounds_left`.
    RepairBare,
    /// The answer is not a plain value: `answer_type`, `stdout`, `rounds_left`.
    RepairUnsupported,
    /// `--stop-on never`, after a clean round: `answer`, `stdout`, `rounds_left`.
    Review,
    /// `--stop-on correct`, a clean wrong answer: `answer`, `rounds_left`.
    RepairWrong,
    /// A multi-answer task's value without its named parts: `parts`,
    /// `answer`, `stdout`, `rounds_left`.
    RepairMissingParts,
    /// `--execution replay`: the sentence closing a repair round's message
    /// (what the next kernel holds); no placeholders.
    ExecutionReplay,
    /// `--execution fresh`: the same for a kernel with nothing carried.
    ExecutionFresh,
}

impl TemplateName {
    pub const ALL: [TemplateName; 13] = [
        TemplateName::System,
        TemplateName::Task,
        TemplateName::Repair,
        TemplateName::RepairNoCode,
        TemplateName::RepairNoAnswer,
        TemplateName::RepairWithImages,
        TemplateName::RepairBare,
        TemplateName::RepairUnsupported,
        TemplateName::Review,
        TemplateName::RepairWrong,
        TemplateName::RepairMissingParts,
        TemplateName::ExecutionReplay,
        TemplateName::ExecutionFresh,
    ];

    /// The template of a mode's sentence; `live` has none (its messages
    /// are as they were before modes existed).
    pub fn of_execution(mode: ExecutionMode) -> Option<TemplateName> {
        match mode {
            ExecutionMode::Live => None,
            ExecutionMode::Replay => Some(TemplateName::ExecutionReplay),
            ExecutionMode::Fresh => Some(TemplateName::ExecutionFresh),
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            TemplateName::System => "system.md",
            TemplateName::Task => "task.md",
            TemplateName::Repair => "repair.md",
            TemplateName::RepairNoCode => "repair_no_code.md",
            TemplateName::RepairNoAnswer => "repair_no_answer.md",
            TemplateName::RepairWithImages => "repair_with_images.md",
            TemplateName::RepairBare => "repair_bare.md",
            TemplateName::RepairUnsupported => "repair_unsupported.md",
            TemplateName::Review => "review.md",
            TemplateName::RepairWrong => "repair_wrong.md",
            TemplateName::RepairMissingParts => "repair_missing_parts.md",
            TemplateName::ExecutionReplay => "execution_replay.md",
            TemplateName::ExecutionFresh => "execution_fresh.md",
        }
    }

    /// The placeholders this template may use.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            TemplateName::System => &["packages_policy"],
            TemplateName::Task => &["question", "files", "packages"],
            TemplateName::Repair => &["feedback", "stdout", "rounds_left"],
            TemplateName::RepairNoCode => &["rounds_left"],
            TemplateName::RepairNoAnswer => &["stdout", "rounds_left"],
            TemplateName::RepairWithImages => &["feedback", "stdout", "rounds_left", "images"],
            TemplateName::RepairBare => &["feedback", "rounds_left"],
            TemplateName::RepairUnsupported => &["answer_type", "stdout", "rounds_left"],
            TemplateName::Review => &["answer", "stdout", "rounds_left"],
            TemplateName::RepairWrong => &["answer", "rounds_left"],
            TemplateName::RepairMissingParts => &["parts", "answer", "stdout", "rounds_left"],
            TemplateName::ExecutionReplay | TemplateName::ExecutionFresh => &[],
        }
    }

    fn default_text(self) -> &'static str {
        match self {
            TemplateName::System => include_str!("../../../prompts/system.md"),
            TemplateName::Task => include_str!("../../../prompts/task.md"),
            TemplateName::Repair => include_str!("../../../prompts/repair.md"),
            TemplateName::RepairNoCode => include_str!("../../../prompts/repair_no_code.md"),
            TemplateName::RepairNoAnswer => include_str!("../../../prompts/repair_no_answer.md"),
            TemplateName::RepairWithImages => {
                include_str!("../../../prompts/repair_with_images.md")
            }
            TemplateName::RepairBare => include_str!("../../../prompts/repair_bare.md"),
            TemplateName::RepairUnsupported => {
                include_str!("../../../prompts/repair_unsupported.md")
            }
            TemplateName::Review => include_str!("../../../prompts/review.md"),
            TemplateName::RepairWrong => include_str!("../../../prompts/repair_wrong.md"),
            TemplateName::RepairMissingParts => {
                include_str!("../../../prompts/repair_missing_parts.md")
            }
            TemplateName::ExecutionReplay => include_str!("../../../prompts/execution_replay.md"),
            TemplateName::ExecutionFresh => include_str!("../../../prompts/execution_fresh.md"),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for TemplateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.file_name())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error(
        "template {template} uses unknown placeholder {{{{{placeholder}}}}}; it may use: {known}"
    )]
    UnknownPlaceholder {
        template: String,
        placeholder: String,
        known: String,
    },
    #[error("template {template}: placeholder {{{{{placeholder}}}}} was given no value")]
    Unfilled {
        template: String,
        placeholder: String,
    },
    #[error("template {template} has no placeholder `{placeholder}`; it may use: {known}")]
    UnknownVariable {
        template: String,
        placeholder: String,
        known: String,
    },
    #[error("reading template {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// The prompt templates in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Templates {
    texts: [String; 13],
    /// Where each template came from (`builtin` or a file path).
    sources: [String; 13],
}

impl Default for Templates {
    fn default() -> Self {
        Self {
            texts: TemplateName::ALL.map(|n| n.default_text().to_string()),
            sources: TemplateName::ALL.map(|_| "builtin".to_string()),
        }
    }
}

impl Templates {
    /// The defaults, overridden by the files of `dir` that exist. Every
    /// template is checked for unknown placeholders.
    pub fn from_dir(dir: &Path) -> Result<Self, PromptError> {
        let mut t = Self::default();
        for name in TemplateName::ALL {
            let path = dir.join(name.file_name());
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    check_placeholders(name, &path.display().to_string(), &text)?;
                    t.texts[name.index()] = text;
                    t.sources[name.index()] = path.display().to_string();
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(cause) => return Err(PromptError::Read { path, cause }),
            }
        }
        Ok(t)
    }

    /// The raw text of a template.
    pub fn text(&self, name: TemplateName) -> &str {
        &self.texts[name.index()]
    }

    /// `builtin` or the file a template was read from.
    pub fn source(&self, name: TemplateName) -> &str {
        &self.sources[name.index()]
    }

    /// Fills a template's placeholders from `vars` (name, value).
    pub fn render(&self, name: TemplateName, vars: &[(&str, &str)]) -> Result<String, PromptError> {
        let label = self.label(name);
        let known = name.placeholders();
        if let Some((bad, _)) = vars.iter().find(|(k, _)| !known.contains(k)) {
            return Err(PromptError::UnknownVariable {
                template: label,
                placeholder: bad.to_string(),
                known: known_list(known),
            });
        }
        let text = self.text(name);
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (start, end, placeholder) in placeholders(text) {
            if !known.contains(&placeholder) {
                return Err(PromptError::UnknownPlaceholder {
                    template: label,
                    placeholder: placeholder.to_string(),
                    known: known_list(known),
                });
            }
            let Some((_, value)) = vars.iter().find(|(k, _)| *k == placeholder) else {
                return Err(PromptError::Unfilled {
                    template: label,
                    placeholder: placeholder.to_string(),
                });
            };
            out.push_str(&text[last..start]);
            out.push_str(value);
            last = end;
        }
        out.push_str(&text[last..]);
        Ok(out)
    }

    /// sha256 over the file name and text of every template a run with
    /// these execution modes uses, recorded in `run.json` so two runs can
    /// be told apart by their prompts. A mode's sentence counts only when
    /// an arm has that mode, so a `live` run's hash is what it was before
    /// modes existed.
    pub fn hash(&self, modes: &[ExecutionMode]) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        let used = TemplateName::ALL.into_iter().filter(|name| match name {
            TemplateName::ExecutionReplay | TemplateName::ExecutionFresh => modes
                .iter()
                .any(|&m| TemplateName::of_execution(m) == Some(*name)),
            _ => true,
        });
        for name in used {
            h.update(name.file_name().as_bytes());
            h.update([0]);
            h.update(self.text(name).as_bytes());
            h.update([0]);
        }
        format!("{:x}", h.finalize())
    }

    fn label(&self, name: TemplateName) -> String {
        let source = self.source(name);
        if source == "builtin" {
            format!("{name} (builtin)")
        } else {
            source.to_string()
        }
    }
}

fn known_list(known: &[&str]) -> String {
    if known.is_empty() {
        "none".into()
    } else {
        known.join(", ")
    }
}

fn check_placeholders(name: TemplateName, label: &str, text: &str) -> Result<(), PromptError> {
    let known = name.placeholders();
    match placeholders(text).find(|(_, _, p)| !known.contains(p)) {
        Some((_, _, p)) => Err(PromptError::UnknownPlaceholder {
            template: label.to_string(),
            placeholder: p.to_string(),
            known: known_list(known),
        }),
        None => Ok(()),
    }
}

/// `(start, end, name)` of every `{{ name }}` in `text`.
fn placeholders(text: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        while let Some(open) = text[pos..].find("{{").map(|i| pos + i) {
            let inner_start = open + 2;
            let Some(close) = text[inner_start..].find("}}").map(|i| inner_start + i) else {
                pos = text.len();
                return None;
            };
            let inner = text[inner_start..close].trim();
            let valid = !inner.is_empty()
                && inner
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if valid {
                pos = close + 2;
                return Some((open, close + 2, inner));
            }
            // Not a placeholder (e.g. a literal `{{` in an example): skip it.
            pos = open + 1;
        }
        None
    })
}

/// The two parts of the feedback after an execution, for the repair
/// templates' `{{feedback}}` and `{{stdout}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    /// Why it failed: the kill message, the rendered traceback, the end of
    /// stderr.
    pub error: String,
    /// Head and tail of stdout (`(no output)` when there was none).
    pub stdout: String,
}

/// Text for `{{stdout}}` when the code printed nothing.
pub const NO_OUTPUT: &str = "(no output)";

/// Splits `budget` characters: stdout gets at most a quarter, the error part
/// the rest.
pub fn feedback_parts(
    outcome: &Outcome,
    code: &str,
    limits: &SandboxLimits,
    budget: usize,
) -> Feedback {
    let stdout = stdout_excerpt(outcome, budget / 4).unwrap_or_else(|| NO_OUTPUT.to_string());
    let error_budget = budget.saturating_sub(stdout.chars().count());
    Feedback {
        error: error_text(outcome, code, limits, error_budget),
        stdout,
    }
}

/// The whole observation after an execution in at most `budget` characters:
/// what went wrong ([`kill_message`], the rendered traceback, or the end of
/// stderr, as appropriate), then a short head and tail of stdout (at most a
/// quarter of the budget).
pub fn feedback(outcome: &Outcome, code: &str, limits: &SandboxLimits, budget: usize) -> String {
    const LABEL: &str = "\n\nOutput (stdout):\n";
    let stdout = stdout_excerpt(outcome, (budget / 4).saturating_sub(LABEL.len()))
        .filter(|s| !s.is_empty())
        .map(|s| format!("{LABEL}{s}"))
        .unwrap_or_default();
    let error_budget = budget.saturating_sub(stdout.chars().count());
    let error = error_text(outcome, code, limits, error_budget);
    format!("{error}{stdout}")
}

/// Scrubbed head and tail of stdout; `None` when there was no output.
pub fn stdout_excerpt(outcome: &Outcome, budget: usize) -> Option<String> {
    let text = outcome.stdout.trim_end();
    if text.trim().is_empty() {
        return None;
    }
    let note = if outcome.truncated && outcome.verdict != Verdict::OutputLimit {
        "\n[output was cut at the output limit]"
    } else {
        ""
    };
    let room = budget.saturating_sub(note.len());
    Some(format!("{}{note}", head_tail(&scrub_paths(text), room)))
}

fn error_text(outcome: &Outcome, code: &str, limits: &SandboxLimits, budget: usize) -> String {
    let kill = kill_message(outcome, limits);
    let stderr = scrub_paths(outcome.stderr.trim_end());
    let error = outcome
        .error
        .as_ref()
        .filter(|e| !(e.ename.is_empty() && e.traceback.is_empty()));

    let mut out = String::new();
    if let Some(k) = &kill {
        out.push_str(k);
    }
    if outcome.verdict == Verdict::Ok && kill.is_none() {
        out.push_str("Your code ran without errors.");
    }
    let mut rest = budget.saturating_sub(out.chars().count() + 2);

    // Room for the end of stderr: all of it without a traceback, else a part.
    let stderr_room = if error.is_some_and(|e| !e.traceback.is_empty()) {
        (budget / 5).min(stderr.chars().count() + 40)
    } else {
        rest
    };

    if let Some(e) = error {
        let tb = parse(e, code);
        let label = match (kill.is_some(), tb.exc_type.as_str()) {
            (true, "KeyboardInterrupt") => "Where your code was when it was stopped:\n",
            (true, _) => "The exception it raised:\n",
            (false, _) => "",
        };
        let rendered = if e.traceback.is_empty() {
            // IPython sent no traceback (e.g. an ExceptionGroup); Python's own
            // is then on stderr, which gets the rest of the room.
            let mut head = tb.exc_type.clone();
            if !tb.message.is_empty() {
                head = format!("{head}: {}", tb.message);
            }
            cut_middle(&head, rest.saturating_sub(label.len()) / 2)
        } else {
            let room = rest
                .saturating_sub(label.len())
                .saturating_sub(if stderr.is_empty() { 0 } else { stderr_room });
            render_traceback(&tb, code, room)
        };
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(label);
        out.push_str(&rendered);
        rest = budget.saturating_sub(out.chars().count() + 2);
    }

    if !stderr.is_empty() {
        const LABEL: &str = "Error output (stderr, end):\n";
        let room = stderr_room.min(rest).saturating_sub(LABEL.len());
        if room > 40 {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(LABEL);
            out.push_str(&keep_tail(&stderr, room));
        }
    }
    if out.is_empty() {
        out = format!(
            "The execution ended with verdict `{}` and no error message.",
            outcome.verdict
        );
    }
    fit_keep_tail(&out, budget)
}

/// Text for `{{images}}`: `1 image: cell1-1.png`.
pub fn describe_images(artifacts: &[Artifact]) -> String {
    let names: Vec<&str> = artifacts
        .iter()
        .filter(|a| crate::kernel::is_image_artifact(&a.mime))
        .map(|a| a.path.rsplit('/').next().unwrap_or(&a.path))
        .collect();
    match names.len() {
        0 => "no images".into(),
        1 => format!("1 image: {}", names[0]),
        n => format!("{n} images: {}", names.join(", ")),
    }
}

/// Text for `{{files}}`: one `- name (size)` line per file, or `(none)`.
pub fn describe_files(files: &[(&str, u64)]) -> String {
    if files.is_empty() {
        return "(none)".into();
    }
    files
        .iter()
        .map(|(name, bytes)| format!("- {name} ({})", human_size(*bytes)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn human_size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let exact = format_bytes(bytes);
    if exact.ends_with(['K', 'M', 'G']) {
        return exact;
    }
    let (value, unit) = if bytes >= 1 << 30 {
        (bytes as f64 / (1u64 << 30) as f64, "G")
    } else if bytes >= 1 << 20 {
        (bytes as f64 / (1u64 << 20) as f64, "M")
    } else {
        (bytes as f64 / 1024.0, "K")
    };
    format!("{value:.1}{unit}")
}

#[cfg(test)]
mod tests;
