//! Which task a conversation is about, for the synthetic models: requests
//! carry no task id, so `oracle*` and `replay:` find the task whose question
//! appears in the first user message (the task prompt, which every template
//! builds from `{{question}}`). The longest matching question wins, so a
//! question that is part of another one is no trap.
//!
//! Two tasks with the same question are told apart by their input files'
//! names (listed in the task prompt); tasks a model would answer alike
//! (same reference and expected answer for the oracles, same recordings for
//! replay) need no telling apart. Anything else is refused when the model
//! is built, naming both tasks.

use std::collections::BTreeMap;

use super::{ChatRequest, ModelError};
use crate::task::Task;

#[derive(Debug, Clone, Default)]
pub struct TaskIndex {
    /// Distinct questions, longest first, each with the tasks that ask it.
    questions: Vec<(String, Vec<Candidate>)>,
}

#[derive(Debug, Clone)]
struct Candidate {
    id: String,
    /// Input file names, sorted.
    files: Vec<String>,
}

impl TaskIndex {
    /// Index `tasks`; `alike(a, b)` says whether the model would answer two
    /// tasks identically (then either may stand for both). `model` names the
    /// model in errors.
    pub fn new(
        model: &str,
        tasks: &[Task],
        alike: impl Fn(&Task, &Task) -> bool,
    ) -> Result<Self, ModelError> {
        let mut by_question: BTreeMap<&str, Vec<&Task>> = BTreeMap::new();
        for task in tasks {
            by_question
                .entry(task.question.trim())
                .or_default()
                .push(task);
        }
        let mut questions = Vec::with_capacity(by_question.len());
        for (question, group) in by_question {
            let mut kept: Vec<&Task> = Vec::new();
            for task in group {
                if !kept.iter().any(|k| alike(k, task)) {
                    kept.push(task);
                }
            }
            let candidates: Vec<Candidate> = kept
                .iter()
                .map(|t| Candidate {
                    id: t.id.clone(),
                    files: file_names(t),
                })
                .collect();
            for (i, a) in candidates.iter().enumerate() {
                if let Some(b) = candidates[i + 1..].iter().find(|b| b.files == a.files) {
                    return Err(ModelError::Config(format!(
                        "{model}: tasks `{}` and `{}` ask the same question with the same \
                         input files but differ in their answers; a synthetic model cannot \
                         tell them apart from the conversation (remove one, or reword its \
                         question)",
                        a.id, b.id
                    )));
                }
            }
            questions.push((question.to_string(), candidates));
        }
        // Longest first; ties in a stable order.
        questions.sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        Ok(TaskIndex { questions })
    }

    pub fn len(&self) -> usize {
        self.questions.iter().map(|(_, c)| c.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.questions.is_empty()
    }

    /// The id of the task `request` is about.
    pub fn identify(&self, model: &str, request: &ChatRequest) -> Result<&str, ModelError> {
        let unknown = |why: String| ModelError::UnknownTask(format!("{model}: {why}"));
        let prompt = request
            .first_user_text()
            .ok_or_else(|| unknown("the conversation has no user message".into()))?;
        let (question, candidates) = self
            .questions
            .iter()
            .find(|(q, _)| prompt.contains(q.as_str()))
            .ok_or_else(|| {
                unknown(
                    "no task's question appears in the first user message (the task \
                     template must include {{question}})"
                        .into(),
                )
            })?;
        if let [only] = candidates.as_slice() {
            return Ok(&only.id);
        }
        // Same question: the task whose files the prompt lists (most files
        // first, so a task with no files is the last resort).
        let listed = |c: &&Candidate| c.files.iter().all(|f| prompt.contains(f.as_str()));
        let best = candidates
            .iter()
            .filter(listed)
            .map(|c| c.files.len())
            .max();
        let matching: Vec<&Candidate> = candidates
            .iter()
            .filter(listed)
            .filter(|c| Some(c.files.len()) == best)
            .collect();
        match matching.as_slice() {
            [one] => Ok(&one.id),
            _ => {
                let ids: Vec<&str> = candidates.iter().map(|c| c.id.as_str()).collect();
                Err(unknown(format!(
                    "tasks {} ask the question {:?} and the prompt's file list does not \
                     tell which one this is",
                    ids.join(", "),
                    cut(question, 60)
                )))
            }
        }
    }
}

fn file_names(task: &Task) -> Vec<String> {
    let mut names: Vec<String> = task
        .files
        .iter()
        .map(|f| {
            f.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| f.display().to_string())
        })
        .collect();
    names.sort();
    names
}

fn cut(s: &str, chars: usize) -> String {
    if s.chars().count() <= chars {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(chars).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::model::{Message, Role};
    use crate::task::Expected;

    fn task(id: &str, question: &str, files: &[&str], reference: &str) -> Task {
        Task {
            id: id.into(),
            question: question.into(),
            files: files
                .iter()
                .map(|f| PathBuf::from("/data").join(f))
                .collect(),
            expected: Expected::Text {
                value: reference.into(),
                case_sensitive: false,
            },
            reference: Some(reference.into()),
            packages: vec![],
            tags: vec![],
            published: None,
        }
    }

    fn same_reference(a: &Task, b: &Task) -> bool {
        a.reference == b.reference && a.expected == b.expected
    }

    fn request(prompt: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![
                Message::text(Role::System, "You write Python."),
                Message::text(Role::User, prompt),
                Message::text(Role::Assistant, "```python\nanswer = 1\n```"),
                Message::text(Role::User, "Your code failed."),
            ],
            round: 1,
            temperature: 0.0,
        }
    }

    #[test]
    fn longest_contained_question_wins() {
        let tasks = [
            task("short", "What is 2 + 2?", &[], "a"),
            task("long", "What is 2 + 2? Then double it.", &[], "b"),
            task("other", "Name a colour.", &[], "c"),
        ];
        let index = TaskIndex::new("oracle", &tasks, same_reference).unwrap();
        assert_eq!(index.len(), 3);
        let prompt = "What is 2 + 2? Then double it.\n\nFiles in the working directory:\n(none)";
        assert_eq!(index.identify("oracle", &request(prompt)).unwrap(), "long");
        // A custom template around {{question}}.
        let custom = "Task:\n<<What is 2 + 2?>>\nAnswer in Python.";
        assert_eq!(index.identify("oracle", &request(custom)).unwrap(), "short");
        // Only the first user message counts, not the feedback.
        let mut r = request("Name a colour.");
        r.messages
            .push(Message::text(Role::User, "What is 2 + 2? Then double it."));
        assert_eq!(index.identify("oracle", &r).unwrap(), "other");
        match index.identify("oracle", &request("Something else entirely")) {
            Err(ModelError::UnknownTask(m)) => {
                assert!(m.contains("oracle") && m.contains("{{question}}"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn same_question_different_answers_is_refused_naming_both() {
        let tasks = [
            task("gsm-1", "How many apples?", &[], "answer = 3"),
            task("gsm-2", "How many apples?", &[], "answer = 4"),
        ];
        match TaskIndex::new("oracle:faults", &tasks, same_reference) {
            Err(ModelError::Config(m)) => {
                assert!(
                    m.contains("gsm-1") && m.contains("gsm-2") && m.contains("oracle:faults"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn same_question_alike_tasks_are_one() {
        let tasks = [
            task("dup-1", "How many apples?", &[], "answer = 3"),
            task("dup-2", "  How many apples?\n", &[], "answer = 3"),
        ];
        let index = TaskIndex::new("oracle", &tasks, same_reference).unwrap();
        assert_eq!(index.len(), 1);
        let id = index
            .identify("oracle", &request("How many apples?"))
            .unwrap();
        assert_eq!(id, "dup-1");
    }

    #[test]
    fn same_question_told_apart_by_files() {
        let q = "What is the mean of the `price` column?";
        let tasks = [
            task("shop-a", q, &["a.csv"], "answer = 1"),
            task("shop-b", q, &["b.csv"], "answer = 2"),
            task("shop-ab", q, &["a.csv", "b.csv"], "answer = 3"),
        ];
        let index = TaskIndex::new("replay:x", &tasks, same_reference).unwrap();
        let prompt = |files: &str| format!("{q}\n\nFiles in the working directory:\n{files}");
        let id = |p: String| index.identify("replay:x", &request(&p)).map(str::to_string);
        assert_eq!(id(prompt("- b.csv (1.0 KB)")).unwrap(), "shop-b");
        assert_eq!(id(prompt("- a.csv (1.0 KB)")).unwrap(), "shop-a");
        assert_eq!(
            id(prompt("- a.csv (1.0 KB)\n- b.csv (2 B)")).unwrap(),
            "shop-ab"
        );
        // A template without {{files}} cannot tell them apart.
        match id(q.to_string()) {
            Err(ModelError::UnknownTask(m)) => {
                assert!(m.contains("shop-a") && m.contains("shop-b"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn builtin_suites_are_identifiable_through_the_default_template() {
        use crate::repair::prompt::{TemplateName, Templates};
        let datasets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets");
        let templates = Templates::default();
        for suite in ["math", "tabular", "packages"] {
            let tasks = crate::task::load::load_suite(suite, &datasets).unwrap();
            assert!(tasks.len() >= 20, "{suite}: {}", tasks.len());
            let index = TaskIndex::new("oracle", &tasks, same_reference).unwrap();
            for t in &tasks {
                let files: Vec<String> = file_names(t).iter().map(|f| format!("- {f}")).collect();
                let prompt = templates
                    .render(
                        TemplateName::Task,
                        &[
                            ("question", t.question.as_str()),
                            ("files", files.join("\n").as_str()),
                            ("packages", "numpy"),
                        ],
                    )
                    .unwrap();
                assert_eq!(index.identify("oracle", &request(&prompt)).unwrap(), t.id);
            }
        }
    }
}
