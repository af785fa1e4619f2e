//! `replay:<file>`: replies recorded earlier, looked up by (task, round).
//!
//! The file is JSON Lines, one reply per line:
//! `{"task_id": "t1", "round": 0, "reply": "..."}`. `text` is accepted for
//! `reply`, and `reply` may also be an object with a `text` field (a
//! recorded [`Reply`]); other fields are ignored. Blank lines are skipped; a
//! later line for the same (task, round) replaces an earlier one.
//!
//! Requests carry no task id: the task is recognised from the conversation
//! by its question ([`TaskIndex`]), among the tasks the replay is built with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;

use super::task_index::TaskIndex;
use super::{ChatRequest, ModelClient, ModelError, Reply, Usage};
use crate::task::Task;

#[derive(Debug, Clone)]
pub struct Replay {
    path: PathBuf,
    replies: HashMap<(String, u32), String>,
    index: TaskIndex,
}

#[derive(Deserialize)]
struct Line {
    task_id: String,
    round: u32,
    #[serde(default)]
    reply: Option<Recorded>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Recorded {
    Text(String),
    Reply { text: String },
}

impl Replay {
    /// Recordings from `path`, answering for `tasks`.
    pub fn load(path: impl AsRef<Path>, tasks: &[Task]) -> Result<Self, ModelError> {
        let path = path.as_ref();
        let content = std::fs::read_to_string(path).map_err(|e| {
            ModelError::Config(format!("replay: cannot read {}: {e}", path.display()))
        })?;
        Self::parse(path, &content, tasks)
    }

    /// Parse recordings; `path` is only used in messages and the name. Two
    /// tasks with the same question must have the same recordings (or be
    /// told apart by their input files).
    pub fn parse(
        path: impl AsRef<Path>,
        content: &str,
        tasks: &[Task],
    ) -> Result<Self, ModelError> {
        let path = path.as_ref();
        let mut replies = HashMap::new();
        for (index, raw) in content.lines().enumerate() {
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let bad = |message: String| {
                ModelError::Config(format!(
                    "replay: {}:{}: {message}",
                    path.display(),
                    index + 1
                ))
            };
            let line: Line = serde_json::from_str(raw).map_err(|e| bad(e.to_string()))?;
            let text = match (line.reply, line.text) {
                (Some(Recorded::Text(t)), _) | (Some(Recorded::Reply { text: t }), _) => t,
                (None, Some(t)) => t,
                (None, None) => return Err(bad("no `reply` (or `text`) field".into())),
            };
            replies.insert((line.task_id, line.round), text);
        }
        let recorded = |id: &str| {
            let mut r: Vec<(u32, &String)> = replies
                .iter()
                .filter(|((t, _), _)| t == id)
                .map(|((_, round), text)| (*round, text))
                .collect();
            r.sort();
            r
        };
        let name = format!("replay:{}", file_label(path));
        let index = TaskIndex::new(&name, tasks, |a, b| recorded(&a.id) == recorded(&b.id))?;
        Ok(Replay {
            path: path.to_path_buf(),
            replies,
            index,
        })
    }

    pub fn len(&self) -> usize {
        self.replies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }
}

#[async_trait::async_trait]
impl ModelClient for Replay {
    fn name(&self) -> String {
        format!("replay:{}", file_label(&self.path))
    }

    fn is_synthetic(&self) -> bool {
        true
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        let started = Instant::now();
        let task_id = self.index.identify(&self.name(), request)?;
        let text = self
            .replies
            .get(&(task_id.to_string(), request.round))
            .ok_or_else(|| ModelError::NoRecording {
                task_id: task_id.to_string(),
                round: request.round,
            })?;
        Ok(Reply {
            text: text.clone(),
            usage: Usage::ZERO,
            attempts: 1,
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            finish_reason: None,
            fault: None,
            note: None,
            server: None,
        })
    }
}

fn file_label(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, Role};
    use crate::task::Expected;

    fn task(id: &str, question: &str) -> Task {
        Task {
            id: id.into(),
            question: question.into(),
            files: vec![],
            expected: Expected::Text {
                value: "x".into(),
                case_sensitive: false,
            },
            reference: None,
            packages: vec![],
            tags: vec![],
            published: None,
        }
    }

    /// Tasks `a` and `b`, and `b`'s question extended as `ab`.
    fn tasks() -> Vec<Task> {
        vec![
            task("a", "Question A: how many?"),
            task("b", "Question B"),
            task("ab", "Question B, and then some"),
        ]
    }

    /// The conversation of `task` at `round`, as the harness builds it.
    fn request(task: &str, round: u32) -> ChatRequest {
        let question = tasks()
            .into_iter()
            .find(|t| t.id == task)
            .map(|t| t.question)
            .unwrap();
        let mut messages = vec![
            Message::text(Role::System, "You write Python."),
            Message::text(Role::User, format!("{question}\n\nFiles: (none)")),
        ];
        for _ in 0..round {
            messages.push(Message::text(Role::Assistant, "```python\nx\n```"));
            messages.push(Message::text(Role::User, "Question A: how many? failed"));
        }
        ChatRequest {
            messages,
            round,
            temperature: 0.0,
        }
    }

    #[tokio::test]
    async fn replays_by_task_and_round() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recorded.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"task_id": "a", "round": 0, "reply": "first"}"#,
                "\n\n",
                r#"{"task_id": "a", "round": 1, "text": "second", "extra": 1}"#,
                "\n",
                r#"{"task_id": "b", "round": 0, "reply": {"text": "obj", "attempts": 2}}"#,
                "\n",
                r#"{"task_id": "a", "round": 0, "reply": "first, again"}"#,
                "\n",
            ),
        )
        .unwrap();
        let replay = Replay::load(&path, &tasks()).unwrap();
        assert_eq!(replay.name(), "replay:recorded.jsonl");
        assert!(replay.is_synthetic());
        assert_eq!(replay.len(), 3);
        assert_eq!(
            replay.chat(&request("a", 0)).await.unwrap().text,
            "first, again"
        );
        assert_eq!(replay.chat(&request("a", 1)).await.unwrap().text, "second");
        assert_eq!(replay.chat(&request("b", 0)).await.unwrap().text, "obj");
        match replay.chat(&request("b", 1)).await {
            Err(ModelError::NoRecording { task_id, round }) => {
                assert_eq!((task_id.as_str(), round), ("b", 1))
            }
            other => panic!("{other:?}"),
        }
        // `ab` contains `b`'s question: the longer question is the task.
        match replay.chat(&request("ab", 0)).await {
            Err(ModelError::NoRecording { task_id, round }) => {
                assert_eq!((task_id.as_str(), round), ("ab", 0))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn same_question_needs_the_same_recordings() {
        let twins = [task("x1", "Same question"), task("x2", "Same question")];
        let same = "{\"task_id\": \"x1\", \"round\": 0, \"reply\": \"r\"}\n\
                    {\"task_id\": \"x2\", \"round\": 0, \"reply\": \"r\"}\n";
        let replay = Replay::parse("twins.jsonl", same, &twins).unwrap();
        assert_eq!(replay.len(), 2);
        let differ = same.replace("\"r\"}\n{", "\"s\"}\n{");
        match Replay::parse("twins.jsonl", &differ, &twins) {
            Err(ModelError::Config(m)) => {
                assert!(
                    m.contains("x1") && m.contains("x2") && m.contains("twins.jsonl"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let err = Replay::parse(
            "rec.jsonl",
            "{\"task_id\": \"a\", \"round\": 0, \"reply\": \"x\"}\n{not json\n",
            &[],
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("rec.jsonl:2"), "{message}");
        let err =
            Replay::parse("rec.jsonl", "{\"task_id\": \"a\", \"round\": 0}\n", &[]).unwrap_err();
        assert!(err.to_string().contains("rec.jsonl:1"), "{err}");
        let err = Replay::parse(
            "rec.jsonl",
            "{\"task_id\": \"a\", \"round\": -1, \"reply\": \"\"}",
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("rec.jsonl:1"), "{err}");
        assert!(matches!(
            Replay::load("/nonexistent/replay.jsonl", &[]),
            Err(ModelError::Config(_))
        ));
    }
}
