//! Models: anything that answers a chat. `openai:<model>` talks to any
//! OpenAI-compatible endpoint; `oracle`, `oracle:faults` and `oracle:wrong`
//! are deterministic stand-ins built from the tasks' reference solutions
//! (labelled as such everywhere); `replay:<file>` replays recorded replies.
//!
//! A request carries the conversation and the round only: no task id, no
//! reference, no expected value. Synthetic models are given the tasks when
//! they are built and recognise the task from the conversation
//! ([`task_index::TaskIndex`]), so ground truth never travels with a request.

pub mod local;
pub mod openai;
pub mod oracle;
pub mod replay;
pub mod spec;
pub mod task_index;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One part of a message: text, or a PNG for vision models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// Base64 PNG, sent as a data URL.
    ImagePng {
        base64: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// Its name in chat formats (`system`, `user`, `assistant`).
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

impl Message {
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::Text { text: text.into() }],
        }
    }

    /// The text parts joined, for logs and for models without vision.
    pub fn joined_text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                Part::ImagePng { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The text that begins the review prompt (`prompts/review.md`), shown
/// after a clean round under the `never` stop rule. Synthetic models
/// recognise a review by it.
pub const REVIEW_MARKER: &str = "Review your answer";

/// The token a model puts in its reply to a review prompt to keep its
/// answer instead of sending new code.
pub const KEEP_TOKEN: &str = "KEEP_ANSWER";

/// What the harness asks: the conversation so far, the round number (0
/// for the first attempt) and the temperature to sample at (the arm's for
/// that round: temperature is an arm variable, so it travels with the
/// request, not with the client). Nothing else: the model is a solver and
/// gets no ground truth.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub round: u32,
    pub temperature: f32,
}

impl ChatRequest {
    /// A sampling seed fixed by the conversation so far: the same request
    /// samples the same reply whatever the order or concurrency of a run,
    /// and two tasks or rounds never share a seed by construction.
    pub fn seed(&self) -> i64 {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(self.round.to_le_bytes());
        for m in &self.messages {
            hash.update(format!("{:?}", m.role).as_bytes());
            hash.update(m.joined_text().as_bytes());
            hash.update([0]);
        }
        let digest = hash.finalize();
        // Positive and below 2^31: servers differ in the seed types they take.
        i64::from(u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]) >> 1)
    }

    /// The text of the first user message (the task prompt).
    pub fn first_user_text(&self) -> Option<String> {
        self.messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(Message::joined_text)
    }

    /// The text of the last user message (the feedback or review prompt).
    pub fn last_user_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(Message::joined_text)
    }

    /// The text of the last assistant message (the previous reply).
    pub fn last_assistant_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::joined_text)
    }

    /// Whether the last user message is a review prompt.
    pub fn is_review(&self) -> bool {
        self.round > 0
            && self
                .last_user_text()
                .is_some_and(|t| t.trim_start().starts_with(REVIEW_MARKER))
    }
}

/// The tokens of one request as the model's server counted them. A count
/// is `None` (`null` in records) when unknown: the server did not say, or
/// said something that is no count (negative, fractional, text, absurdly
/// large). Sums take an unknown count as nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

impl Usage {
    /// Nothing spent: a round that sent no request, or a model that
    /// charges nothing.
    pub const ZERO: Usage = Usage::counted(0, 0);
    /// Neither count known.
    pub const UNKNOWN: Usage = Usage {
        prompt_tokens: None,
        completion_tokens: None,
    };

    pub const fn counted(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens: Some(prompt_tokens),
            completion_tokens: Some(completion_tokens),
        }
    }

    /// The prompt tokens known (an unknown count adds nothing).
    pub fn prompt(&self) -> u64 {
        self.prompt_tokens.unwrap_or(0)
    }

    /// The completion tokens known.
    pub fn completion(&self) -> u64 {
        self.completion_tokens.unwrap_or(0)
    }

    /// Prompt and completion tokens known.
    pub fn tokens(&self) -> u64 {
        self.prompt().saturating_add(self.completion())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub text: String,
    pub usage: Usage,
    /// Requests sent, including retries.
    pub attempts: u32,
    pub latency_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The kind of fault in this reply's code, from a synthetic model
    /// (`oracle:faults`: injected at round 0, resent while the feedback
    /// lacks what a repair needs), e.g. `undefined_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// What a synthetic model did this round, in words (e.g. "repaired: the
    /// feedback names NameError and the failing line").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where the request's time went, from the server's own `timings`
    /// (llama.cpp's servers report them; others do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerTimings>,
}

/// Where one request's time went on a server that says so (llama.cpp's
/// `timings`): prompt tokens evaluated against those taken from its prompt
/// cache, and the milliseconds of each phase. The rest of the request's
/// latency is `queue_ms`: waiting for a slot, and HTTP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerTimings {
    /// Latency of the successful attempt less prompt and generation time.
    pub queue_ms: f64,
    /// Prompt tokens the server evaluated.
    pub prompt_tokens: u64,
    /// Prompt tokens reused from its cache (a slot's prefix or the RAM
    /// cache) instead of evaluated.
    pub cached_tokens: u64,
    pub prompt_ms: f64,
    pub generated_tokens: u64,
    pub generation_ms: f64,
    /// Tokens a draft model proposed (speculative decoding; 0 without).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_tokens: u64,
    /// Of those, the ones the model accepted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_accepted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why no reply could be had. Always an infrastructure failure, never a
/// model error: the round is recorded as such and the task is not dropped.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize)]
pub enum ModelError {
    #[error("model endpoint failed after {attempts} attempts: {message}")]
    Endpoint { attempts: u32, message: String },
    #[error("model reply was not valid: {0}")]
    InvalidReply(String),
    #[error("no recorded reply for task {task_id} round {round}")]
    NoRecording { task_id: String, round: u32 },
    /// A synthetic model could not tell which task a conversation is about.
    #[error("{0}")]
    UnknownTask(String),
    #[error("{0}")]
    Config(String),
    /// The harness could not provide the model (the local model failed to
    /// prepare or its server to start): infrastructure, not usage.
    #[error("{0}")]
    Unavailable(String),
}

/// Generation settings recorded with every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Generation {
    /// Sampling temperature of round 0.
    pub temperature: f32,
    /// Sampling temperature of repair rounds; `None`: `temperature`.
    /// Greedy decoding makes small models resend the code that just failed
    /// (measured: Qwen2.5-Coder-1.5B resent it unchanged on most repairs at
    /// 0 and changed it at 0.7), so a repair study may want to sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_temperature: Option<f32>,
    pub max_tokens: u32,
    /// The whole of one request, the reply's body included.
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
    pub max_retries: u32,
    /// The most bytes of a reply's body (`--max-reply-bytes`): reading
    /// stops there and the request fails, not retried.
    #[serde(default = "default_max_reply_bytes")]
    pub max_reply_bytes: u64,
}

/// The default of `--max-reply-bytes`: thousands of times a reply of the
/// largest `--max-tokens` anyone uses, and little memory per request in
/// flight.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 << 20;

fn default_max_reply_bytes() -> u64 {
    DEFAULT_MAX_REPLY_BYTES
}

impl Default for Generation {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            repair_temperature: None,
            max_tokens: 1024,
            request_timeout: Duration::from_secs(120),
            max_retries: 4,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
        }
    }
}

impl Generation {
    /// The temperature of a request in `round`.
    pub fn temperature_at(&self, round: u32) -> f32 {
        match (round, self.repair_temperature) {
            (0, _) | (_, None) => self.temperature,
            (_, Some(t)) => t,
        }
    }
}

/// A model the harness can ask.
#[async_trait::async_trait]
pub trait ModelClient: Send + Sync {
    /// The name recorded in outputs, e.g. `openai:gpt-4o-mini`, `oracle:faults`.
    fn name(&self) -> String;
    /// Deterministic stand-ins (oracle, replay) say so in every output.
    fn is_synthetic(&self) -> bool;
    /// Whether failing rounds' plots are sent as images.
    fn vision(&self) -> bool {
        false
    }
    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError>;
    /// What the run records about the model (file hash, server version...).
    fn info(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
