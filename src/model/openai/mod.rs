//! `openai:<model>`: any OpenAI-compatible chat-completions endpoint, reached
//! through async-openai.
//!
//! Retries are ours alone. async-openai 0.43 wraps its default HTTP executor
//! in an internal retry layer (3 retries, 100 ms·2^n backoff); installing our
//! own tower service with `Client::with_http_service` replaces that executor,
//! so the loop in [`OpenAiClient::chat`] is the only retry loop and
//! `Reply::attempts` counts every request that was actually sent.
//!
//! The installed service also records the HTTP status and `Retry-After` of
//! each response (async-openai's errors keep neither reliably: a 4xx whose
//! body is not OpenAI's error shape becomes a deserialisation error), so a
//! 429 or 5xx is recognised whatever its body says. It reads each body
//! under a cap (`Generation::max_reply_bytes`): a larger reply is a failed
//! request, never read whole. The request timeout runs around the whole
//! attempt, the body's reading included, so a body that trickles in for
//! ever ends at the timeout too.

mod backoff;
mod step;
mod transport;
mod wire;

use std::cell::Cell;
use std::time::Instant;

use async_openai::config::{Config, OpenAIConfig};
use async_openai::types::chat::CreateChatCompletionRequest;
use async_openai::Client;

pub use backoff::Backoff;
use step::{classify, Step};
pub use transport::parse_retry_after;
use transport::SEEN;
pub(crate) use transport::{plain_client, with_status};
use wire::{to_wire, WireResponse};

use super::{ChatRequest, Generation, ModelClient, ModelError, Reply};

/// Where and what to ask. `None` means: from the environment
/// (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), else async-openai's default base
/// URL and an empty key (fine for local servers).
#[derive(Debug, Clone, Default)]
pub struct OpenAiSettings {
    pub model: String,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Send `Part::ImagePng` as `image_url` parts; otherwise images are dropped.
    pub vision: bool,
}

/// A chat model behind an OpenAI-compatible endpoint.
pub struct OpenAiClient {
    model: String,
    vision: bool,
    generation: Generation,
    backoff: Backoff,
    base_url: String,
    client: Client<OpenAIConfig>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("vision", &self.vision)
            .field("generation", &self.generation)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// async-openai `unwrap`s header values built from these; refuse what
/// would make it panic.
fn check_header_value(what: &str, value: &str) -> Result<(), ModelError> {
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(ModelError::Config(format!(
            "{what} contains control characters"
        )));
    }
    Ok(())
}

impl OpenAiClient {
    pub fn new(settings: OpenAiSettings, generation: Generation) -> Result<Self, ModelError> {
        let model = settings.model.trim().to_string();
        if model.is_empty() {
            return Err(ModelError::Config(
                "openai: empty model name (use openai:<model>)".into(),
            ));
        }
        // OpenAIConfig::new() reads OPENAI_BASE_URL, OPENAI_ORG_ID and
        // OPENAI_PROJECT_ID; the base URL and key are then set explicitly.
        let config = OpenAIConfig::new();
        let base_url = non_empty(settings.base_url)
            .or_else(|| non_empty(std::env::var("OPENAI_BASE_URL").ok()))
            .unwrap_or_else(|| config.api_base().to_string());
        let base_url = base_url.trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "openai: base URL `{base_url}` must start with http:// or https://"
            )));
        }
        // Only OPENAI_API_KEY: async-openai would also fall back to
        // OPENAI_ADMIN_KEY, which must not leak to an arbitrary endpoint.
        let api_key = non_empty(settings.api_key)
            .or_else(|| non_empty(std::env::var("OPENAI_API_KEY").ok()))
            .unwrap_or_default();
        check_header_value("the API key", &api_key)?;
        for var in ["OPENAI_ORG_ID", "OPENAI_PROJECT_ID"] {
            if let Ok(v) = std::env::var(var) {
                check_header_value(var, &v)?;
            }
        }
        let client = transport::client(config, &base_url, &api_key, generation.max_reply_bytes);
        Ok(OpenAiClient {
            model,
            vision: settings.vision,
            generation,
            backoff: Backoff::default(),
            base_url,
            client,
        })
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The request body sent for `request` (no streaming).
    #[allow(deprecated)] // `max_tokens`: what OpenAI-compatible servers all accept
    pub fn build_request(&self, request: &ChatRequest) -> CreateChatCompletionRequest {
        CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: request
                .messages
                .iter()
                .map(|m| to_wire(m, self.vision))
                .collect(),
            temperature: Some(request.temperature),
            max_tokens: Some(self.generation.max_tokens),
            seed: Some(request.seed()),
            ..Default::default()
        }
    }

    /// One request: send, classify.
    async fn attempt(&self, body: &CreateChatCompletionRequest) -> Step {
        let call = async {
            let result = tokio::time::timeout(
                self.generation.request_timeout,
                self.client.chat().create_byot::<_, WireResponse>(body),
            )
            .await;
            (result, SEEN.with(Cell::get))
        };
        let (result, seen) = SEEN.scope(Cell::new(None), call).await;
        match result {
            Err(_) => Step::Retry {
                message: format!(
                    "no reply within the request timeout of {:.3} s",
                    self.generation.request_timeout.as_secs_f64()
                ),
                retry_after: None,
            },
            Ok(Ok(wire)) => match wire.into_reply_parts() {
                Ok(parts) => Step::Done(parts),
                Err(e) => Step::Invalid(step::excerpt(&e.to_string())),
            },
            Ok(Err(e)) => classify(e, seen),
        }
    }
}

#[async_trait::async_trait]
impl ModelClient for OpenAiClient {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn is_synthetic(&self) -> bool {
        false
    }

    fn vision(&self) -> bool {
        self.vision
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        let body = self.build_request(request);
        let started = Instant::now();
        let mut attempts = 0u32;
        let mut step = 0u32;
        loop {
            attempts += 1;
            let attempt_started = Instant::now();
            match self.attempt(&body).await {
                Step::Done(parts) => {
                    tracing::debug!(
                        model = %self.model,
                        attempts,
                        ms = started.elapsed().as_millis() as u64,
                        "reply received"
                    );
                    return Ok(Reply {
                        text: parts.text,
                        usage: parts.usage,
                        attempts,
                        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                        finish_reason: parts.finish_reason,
                        fault: None,
                        note: None,
                        server: parts.timings.map(|t| t.within(ms(attempt_started))),
                    });
                }
                Step::Invalid(message) => {
                    tracing::warn!(model = %self.model, attempts, %message, "invalid reply");
                    return Err(ModelError::InvalidReply(format!(
                        "{message} (attempt {attempts})"
                    )));
                }
                Step::Fatal(message) => {
                    tracing::warn!(model = %self.model, attempts, %message, "request failed");
                    return Err(ModelError::Endpoint { attempts, message });
                }
                Step::Retry {
                    message,
                    retry_after,
                } => {
                    if attempts > self.generation.max_retries {
                        tracing::warn!(model = %self.model, attempts, %message, "retries exhausted");
                        return Err(ModelError::Endpoint { attempts, message });
                    }
                    let delay = match retry_after {
                        Some(d) => d.min(self.backoff.retry_after_cap),
                        None => {
                            let d = self.backoff.delay(step);
                            step += 1;
                            d
                        }
                    };
                    tracing::info!(
                        model = %self.model,
                        attempts,
                        delay_ms = delay.as_millis() as u64,
                        from_retry_after = retry_after.is_some(),
                        %message,
                        "retrying the request"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, Part, Role};

    #[test]
    fn rejects_bad_settings() {
        let gen = Generation::default();
        let bad = |s: OpenAiSettings| OpenAiClient::new(s, gen.clone()).unwrap_err();
        assert!(matches!(
            bad(OpenAiSettings {
                model: " ".into(),
                ..Default::default()
            }),
            ModelError::Config(_)
        ));
        assert!(matches!(
            bad(OpenAiSettings {
                model: "m".into(),
                base_url: Some("localhost:8080".into()),
                ..Default::default()
            }),
            ModelError::Config(_)
        ));
        assert!(matches!(
            bad(OpenAiSettings {
                model: "m".into(),
                base_url: Some("http://127.0.0.1:1/v1".into()),
                api_key: Some("sk-\u{1}x".into()),
                ..Default::default()
            }),
            ModelError::Config(_)
        ));
    }

    #[test]
    fn vision_parts_become_data_urls() {
        let gen = Generation::default();
        let settings = |vision| OpenAiSettings {
            model: "m".into(),
            base_url: Some("http://127.0.0.1:1/v1/".into()),
            api_key: Some("k".into()),
            vision,
        };
        let request = ChatRequest {
            messages: vec![
                Message::text(Role::System, "sys"),
                Message {
                    role: Role::User,
                    parts: vec![
                        Part::Text {
                            text: "look".into(),
                        },
                        Part::ImagePng {
                            base64: "AAAA".into(),
                        },
                    ],
                },
            ],
            round: 1,
            temperature: 0.0,
        };
        let with = OpenAiClient::new(settings(true), gen.clone()).unwrap();
        assert_eq!(with.base_url(), "http://127.0.0.1:1/v1");
        let body = serde_json::to_value(with.build_request(&request)).unwrap();
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["content"][0]["type"], "text");
        assert_eq!(body["messages"][1]["content"][1]["type"], "image_url");
        assert_eq!(
            body["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["temperature"], 0.0);
        assert!(body.get("stream").is_none());

        let without = OpenAiClient::new(settings(false), gen).unwrap();
        let body = serde_json::to_value(without.build_request(&request)).unwrap();
        assert_eq!(body["messages"][1]["content"], "look");
    }

    #[test]
    fn requests_sample_at_their_own_temperature_with_a_conversation_seed() {
        let gen = Generation::default();
        let settings = OpenAiSettings {
            model: "m".into(),
            base_url: Some("http://127.0.0.1:1/v1/".into()),
            api_key: Some("k".into()),
            vision: false,
        };
        let client = OpenAiClient::new(settings, gen).unwrap();
        let request = |round: u32, text: &str| ChatRequest {
            messages: vec![Message::text(Role::User, text)],
            round,
            temperature: if round == 0 { 0.0 } else { 0.7 },
        };
        let body = |r: &ChatRequest| serde_json::to_value(client.build_request(r)).unwrap();

        let first = body(&request(0, "task"));
        assert_eq!(first["temperature"], 0.0);
        let repair = body(&request(1, "task"));
        assert!((repair["temperature"].as_f64().unwrap() - 0.7).abs() < 1e-6);

        // Same conversation, same seed; another round or task, another seed.
        assert_eq!(body(&request(1, "task"))["seed"], repair["seed"]);
        assert_ne!(first["seed"], repair["seed"]);
        assert_ne!(body(&request(1, "other task"))["seed"], repair["seed"]);
        assert!(repair["seed"].as_i64().unwrap() >= 0);
    }
}
