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
}

impl TemplateName {
    pub const ALL: [TemplateName; 11] = [
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
    ];

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
        }
    }

    fn default_text(self) -> &'static str {
        match self {
            TemplateName::System => include_str!("../../prompts/system.md"),
            TemplateName::Task => include_str!("../../prompts/task.md"),
            TemplateName::Repair => include_str!("../../prompts/repair.md"),
            TemplateName::RepairNoCode => include_str!("../../prompts/repair_no_code.md"),
            TemplateName::RepairNoAnswer => include_str!("../../prompts/repair_no_answer.md"),
            TemplateName::RepairWithImages => include_str!("../../prompts/repair_with_images.md"),
            TemplateName::RepairBare => include_str!("../../prompts/repair_bare.md"),
            TemplateName::RepairUnsupported => include_str!("../../prompts/repair_unsupported.md"),
            TemplateName::Review => include_str!("../../prompts/review.md"),
            TemplateName::RepairWrong => include_str!("../../prompts/repair_wrong.md"),
            TemplateName::RepairMissingParts => {
                include_str!("../../prompts/repair_missing_parts.md")
            }
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
    texts: [String; 11],
    /// Where each template came from (`builtin` or a file path).
    sources: [String; 11],
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

    /// sha256 over every template's file name and text, recorded in
    /// `run.json` so two runs can be told apart by their prompts.
    pub fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for name in TemplateName::ALL {
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
mod tests {
    use super::*;
    use crate::kernel::ErrorInfo;

    #[test]
    fn defaults_render_with_their_placeholders() {
        let t = Templates::default();
        for name in TemplateName::ALL {
            let vars: Vec<(&str, &str)> =
                name.placeholders().iter().map(|p| (*p, "VALUE")).collect();
            let text = t.render(name, &vars).unwrap();
            assert!(!text.contains("{{"), "{name}: {text}");
            // Every known placeholder is used by the default template.
            assert!(
                text.matches("VALUE").count() >= name.placeholders().len(),
                "{name}"
            );
        }
        let system = t
            .render(TemplateName::System, &[("packages_policy", "POLICY")])
            .unwrap();
        assert!(system.contains("POLICY"));
        assert!(system.contains("```python") && system.contains("`answer`"));
        // Answer formats belong to the tasks that need them.
        assert!(!system.contains("@name[value]"));
        // The review prompt is what the synthetic models and the keep rule
        // recognise.
        let review = t.text(TemplateName::Review);
        assert!(review.starts_with(crate::model::REVIEW_MARKER), "{review}");
        assert!(review.contains(crate::model::KEEP_TOKEN), "{review}");
    }

    #[test]
    fn template_errors_name_template_and_placeholder() {
        let t = Templates::default();
        let e = t
            .render(TemplateName::Repair, &[("feedback", "x"), ("stdout", "y")])
            .unwrap_err();
        assert!(matches!(e, PromptError::Unfilled { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("repair.md") && msg.contains("{{rounds_left}}"),
            "{msg}"
        );

        let e = t
            .render(
                TemplateName::RepairNoCode,
                &[("rounds_left", "2"), ("feedback", "x")],
            )
            .unwrap_err();
        assert!(matches!(e, PromptError::UnknownVariable { .. }));
        assert!(e.to_string().contains("feedback"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("task.md"),
            "Q: {{ question }}\n{{question_id}}",
        )
        .unwrap();
        let e = Templates::from_dir(dir.path()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, PromptError::UnknownPlaceholder { .. }));
        assert!(
            msg.contains("task.md") && msg.contains("{{question_id}}"),
            "{msg}"
        );
    }

    #[test]
    fn overrides_and_single_pass() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("repair_no_code.md"),
            "No code. {{ rounds_left }} left. {{ not a placeholder }} {{}}",
        )
        .unwrap();
        let t = Templates::from_dir(dir.path()).unwrap();
        assert_ne!(t.source(TemplateName::RepairNoCode), "builtin");
        assert_eq!(t.source(TemplateName::Repair), "builtin");
        assert_eq!(
            t.render(
                TemplateName::RepairNoCode,
                &[("rounds_left", "{{rounds_left}}")]
            )
            .unwrap(),
            "No code. {{rounds_left}} left. {{ not a placeholder }} {{}}"
        );
        assert_eq!(
            t.text(TemplateName::System),
            Templates::default().text(TemplateName::System)
        );
        assert!(Templates::from_dir(Path::new("/nonexistent/prompts")).is_ok());
    }

    fn outcome(verdict: &str, stdout: &str, error: Option<ErrorInfo>) -> Outcome {
        let mut o = Outcome::ended(verdict.parse().unwrap(), 1.0);
        o.status = crate::kernel::ExecStatus::Error;
        o.stdout = stdout.into();
        o.error = error;
        o
    }

    #[test]
    fn feedback_picks_the_right_parts() {
        let limits = SandboxLimits::default();
        let code = "import time\nprint(\"waiting\")\ntime.sleep(100)\n";
        let ki = ErrorInfo {
            ename: "KeyboardInterrupt".into(),
            evalue: String::new(),
            traceback: vec![
                "KeyboardInterrupt                         Traceback (most recent call last)".into(),
                "Cell In[1], line 3\n      1 import time\n      2 print(\"waiting\")\n----> 3 time.sleep(100)\n".into(),
                "KeyboardInterrupt: ".into(),
            ],
        };
        let o = outcome("timeout_wall", "waiting\n", Some(ki));
        let f = feedback(&o, code, &limits, 2000);
        assert!(f.starts_with("Your code did not finish within 10s"), "{f}");
        assert!(
            f.contains("Where your code was when it was stopped:"),
            "{f}"
        );
        assert!(f.contains("--> 3 | time.sleep(100)"), "{f}");
        assert!(f.ends_with("Output (stdout):\nwaiting"), "{f}");
        let parts = feedback_parts(&o, code, &limits, 2000);
        assert_eq!(parts.stdout, "waiting");
        assert!(!parts.error.contains("Output (stdout)"));

        // Huge stdout: at most a quarter of the budget, head and tail kept.
        let big: String = (0..5000).map(|i| format!("row {i}\n")).collect();
        let o = outcome("ok", &big, None);
        let f = feedback(&o, "print(1)\n", &limits, 1000);
        assert!(f.chars().count() <= 1000);
        assert!(f.starts_with("Your code ran without errors."));
        assert!(f.contains("row 0\n") && f.ends_with("row 4999"), "{f}");
        let parts = feedback_parts(&o, "", &limits, 1000);
        assert!(parts.stdout.chars().count() <= 250);
        assert_eq!(
            feedback_parts(&outcome("ok", "", None), "", &limits, 100).stdout,
            NO_OUTPUT
        );

        // Kill without an exception; the restart sentence is appended.
        let mut o = outcome("oom_killed", "", None);
        o.state_lost = true;
        let f = feedback(&o, "x = 1\n", &limits, 500);
        assert!(
            f.contains("512M") && f.ends_with("redefine everything you need."),
            "{f}"
        );

        // No traceback from IPython (ExceptionGroup): stderr carries it.
        let mut o = outcome(
            "error",
            "",
            Some(ErrorInfo {
                ename: "ExceptionGroup".into(),
                evalue: "two problems (2 sub-exceptions)".into(),
                traceback: vec![],
            }),
        );
        o.stderr = "  |   File \"/tmp/ipykernel_2/3893537743.py\", line 2, in <module>\n  | ExceptionGroup: two problems\n    | ValueError: bad a\n".into();
        let f = feedback(&o, "", &limits, 1000);
        assert!(
            f.starts_with("ExceptionGroup: two problems (2 sub-exceptions)"),
            "{f}"
        );
        assert!(
            f.contains("<cell>\", line 2") && f.contains("ValueError: bad a"),
            "{f}"
        );
        assert!(!f.contains("/tmp/"), "{f}");

        for budget in [50, 120, 300, 3000] {
            assert!(feedback(&o, "", &limits, budget).chars().count() <= budget);
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(describe_files(&[]), "(none)");
        assert_eq!(
            describe_files(&[
                ("sales.csv", 2048),
                ("notes.txt", 10),
                ("big.bin", 1_500_000)
            ]),
            "- sales.csv (2K)\n- notes.txt (10 bytes)\n- big.bin (1.4M)"
        );
        let art = |p: &str, m: &str| Artifact {
            path: p.into(),
            mime: m.into(),
            bytes: 1,
            base64: None,
            name: None,
        };
        assert_eq!(describe_images(&[]), "no images");
        assert_eq!(
            describe_images(&[
                art("run/cell1-1.png", "image/png"),
                art("x.svg", "image/svg+xml")
            ]),
            "2 images: cell1-1.png, x.svg"
        );
    }
}
