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
//! 429 or 5xx is recognised whatever its body says.

use std::cell::Cell;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_openai::config::{Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use async_openai::middleware::{HttpRequestFactory, ReqwestService};
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartImage,
    ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionRequestUserMessageContentPart,
    CreateChatCompletionRequest, ImageUrl,
};
use async_openai::Client;
use serde::Deserialize;

use crate::util::units::{saturating_secs, MAX_DURATION};

use super::{ChatRequest, Generation, Message, ModelClient, ModelError, Part, Reply, Role, Usage};

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

/// Delays between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry; doubles per retry.
    pub base: Duration,
    /// Upper bound of the exponential delay.
    pub cap: Duration,
    /// Upper bound on a server's `Retry-After`.
    pub retry_after_cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay before retry number `step` (0-based), with jitter: a
    /// uniformly random point in the upper half of `min(cap, base·2^step)`.
    pub fn delay(&self, step: u32) -> Duration {
        let full = self
            .base
            .saturating_mul(2u32.saturating_pow(step.min(30)))
            .min(self.cap);
        let half = full / 2;
        let nanos = half.as_nanos() as u64;
        let jitter = if nanos == 0 {
            0
        } else {
            random_u64() % (nanos + 1)
        };
        half + Duration::from_nanos(jitter)
    }
}

fn random_u64() -> u64 {
    // std's RandomState is seeded randomly per instance; enough for jitter.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
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
        let mut config = OpenAIConfig::new();
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
        config = config.with_api_base(&base_url).with_api_key(api_key);
        let client = Client::with_config(config).with_http_service(Recorder {
            inner: ReqwestService::default(),
        });
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
            temperature: Some(self.generation.temperature_at(request.round)),
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
                Err(message) => Step::Invalid(message),
            },
            Ok(Err(e)) => classify(e, seen),
        }
    }
}

fn to_wire(message: &Message, vision: bool) -> ChatCompletionRequestMessage {
    match message.role {
        Role::System => ChatCompletionRequestSystemMessage::from(
            ChatCompletionRequestSystemMessageContent::Text(message.joined_text()),
        )
        .into(),
        Role::Assistant => ChatCompletionRequestAssistantMessage::from(
            ChatCompletionRequestAssistantMessageContent::Text(message.joined_text()),
        )
        .into(),
        Role::User => {
            let has_image = message
                .parts
                .iter()
                .any(|p| matches!(p, Part::ImagePng { .. }));
            let content = if vision && has_image {
                ChatCompletionRequestUserMessageContent::Array(
                    message
                        .parts
                        .iter()
                        .map(|p| match p {
                            Part::Text { text } => {
                                ChatCompletionRequestUserMessageContentPart::Text(
                                    ChatCompletionRequestMessageContentPartText::from(
                                        text.as_str(),
                                    ),
                                )
                            }
                            Part::ImagePng { base64 } => {
                                ChatCompletionRequestUserMessageContentPart::ImageUrl(
                                    ChatCompletionRequestMessageContentPartImage {
                                        image_url: ImageUrl {
                                            url: format!("data:image/png;base64,{base64}"),
                                            detail: None,
                                        },
                                        prompt_cache_breakpoint: None,
                                    },
                                )
                            }
                        })
                        .collect(),
                )
            } else {
                ChatCompletionRequestUserMessageContent::Text(message.joined_text())
            };
            ChatCompletionRequestUserMessage::from(content).into()
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

/// What one request came to.
enum Step {
    Done(ReplyParts),
    /// A 2xx whose body is not a chat completion: not retried.
    Invalid(String),
    /// 429, 5xx, timeout, connection failure.
    Retry {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Any other failure (4xx, bad configuration): not retried.
    Fatal(String),
}

struct ReplyParts {
    text: String,
    usage: Usage,
    finish_reason: Option<String>,
}

fn classify(error: OpenAIError, seen: Option<Seen>) -> Step {
    let detail = describe(&error);
    match seen {
        Some(Seen { status: 429, .. }) if is_insufficient_quota(&error) => Step::Fatal(format!(
            "HTTP 429 (insufficient quota, not retried): {detail}"
        )),
        Some(Seen {
            status,
            retry_after,
        }) if status == 429 || status >= 500 => Step::Retry {
            message: format!("HTTP {status}: {detail}"),
            retry_after,
        },
        Some(Seen { status, .. }) if !(200..300).contains(&status) => {
            Step::Fatal(format!("HTTP {status}: {detail}"))
        }
        Some(Seen { status, .. }) => match error {
            // The body could not be read to the end: a transport failure.
            OpenAIError::Reqwest(_) => Step::Retry {
                message: format!("HTTP {status}, then: {detail}"),
                retry_after: None,
            },
            _ => Step::Invalid(format!(
                "HTTP {status} with a body that is not a chat completion: {detail}"
            )),
        },
        None => match error {
            OpenAIError::Reqwest(ref e) if e.is_builder() => {
                Step::Fatal(format!("could not build the request: {detail}"))
            }
            OpenAIError::Reqwest(_) => Step::Retry {
                message: format!("transport: {detail}"),
                retry_after: None,
            },
            _ => Step::Fatal(detail),
        },
    }
}

fn is_insufficient_quota(error: &OpenAIError) -> bool {
    match error {
        OpenAIError::ApiError(r) => {
            r.api_error.r#type.as_deref() == Some("insufficient_quota")
                || r.api_error.code.as_deref() == Some("insufficient_quota")
        }
        OpenAIError::JSONDeserialize(_, body) => body.contains("insufficient_quota"),
        _ => false,
    }
}

/// A one-line description with the error's sources (reqwest's own message
/// is only "error sending request for url").
fn describe(error: &OpenAIError) -> String {
    match error {
        OpenAIError::ApiError(r) => snippet(&r.api_error.to_string()),
        OpenAIError::JSONDeserialize(e, body) => {
            format!("{e}; body: {}", snippet(body))
        }
        other => {
            let mut s = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(e) = source {
                let text = e.to_string();
                if !s.contains(&text) {
                    s.push_str(": ");
                    s.push_str(&text);
                }
                source = e.source();
            }
            s
        }
    }
}

fn snippet(text: &str) -> String {
    const MAX: usize = 300;
    let text = text.trim();
    if text.chars().count() <= MAX {
        return text.to_string();
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}…")
}

// ---- the response, parsed leniently -------------------------------------
//
// async-openai's typed response insists on `id`, `created`, `object`, a
// known `finish_reason` and a `role`; servers that merely resemble OpenAI
// (llama.cpp, proxies) differ in exactly those. Only `choices` is required.

#[derive(Debug, Deserialize)]
struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<serde_json::Value>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireResponse {
    fn into_reply_parts(self) -> Result<ReplyParts, String> {
        let usage = self
            .usage
            .map(|u| Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0),
                completion_tokens: u.completion_tokens.unwrap_or(0),
            })
            .unwrap_or_default();
        let Some(choice) = self.choices.into_iter().next() else {
            return Err("the reply has no choices".into());
        };
        let Some(message) = choice.message else {
            return Err("the first choice has no message".into());
        };
        let text = match message.content {
            Some(serde_json::Value::String(s)) => Some(s),
            // Some servers send content as parts: [{"type":"text","text":...}].
            Some(serde_json::Value::Array(parts)) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join(""),
            ),
            Some(serde_json::Value::Null) | None => None,
            Some(other) => return Err(format!("message content is not text: {other}")),
        };
        Ok(ReplyParts {
            text: text.or(message.refusal).unwrap_or_default(),
            usage,
            finish_reason: choice.finish_reason,
        })
    }
}

// ---- the HTTP service: reqwest, plus what the response said -------------

/// A client for `base_url` on [`OpenAiClient`]'s transport (no retry layer),
/// for a one-off request such as the local server's readiness probe; no
/// organisation or project header, whatever the environment says.
pub(crate) fn plain_client(base_url: &str, api_key: &str) -> Client<OpenAIConfig> {
    let config = OpenAIConfig::new()
        .with_api_base(base_url)
        .with_api_key(api_key)
        .with_org_id("")
        .with_project_id("");
    Client::with_config(config).with_http_service(Recorder {
        inner: ReqwestService::default(),
    })
}

/// Runs one request and returns its result with the HTTP status of its
/// response (`None` when nothing answered). async-openai keeps no status
/// for a 4xx whose body is not OpenAI's error shape.
pub(crate) async fn with_status<T>(request: impl Future<Output = T>) -> (T, Option<u16>) {
    let call = async {
        let result = request.await;
        (result, SEEN.with(Cell::get).map(|s| s.status))
    };
    SEEN.scope(Cell::new(None), call).await
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    status: u16,
    retry_after: Option<Duration>,
}

tokio::task_local! {
    /// Status and Retry-After of the last response in this attempt. Each
    /// attempt runs inside its own scope, so concurrent chats do not mix.
    static SEEN: Cell<Option<Seen>>;
}

/// async-openai's plain reqwest transport (no retry layer) that notes each
/// response's status and `Retry-After` in [`SEEN`].
#[derive(Clone, Debug)]
struct Recorder {
    inner: ReqwestService,
}

type Inner = <ReqwestService as tower_service::Service<HttpRequestFactory>>::Response;

impl tower_service::Service<HttpRequestFactory> for Recorder {
    type Response = Inner;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<Inner, OpenAIError>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            let headers = response.headers();
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            let seen = Seen {
                status: response.status().as_u16(),
                retry_after: parse_retry_after(header("retry-after-ms"), header("retry-after")),
            };
            let _ = SEEN.try_with(|cell| cell.set(Some(seen)));
            Ok(response)
        })
    }
}

/// `retry-after-ms` (milliseconds, sent by OpenAI and Azure) wins over
/// `retry-after` (seconds or an HTTP date).
pub fn parse_retry_after(ms: Option<&str>, value: Option<&str>) -> Option<Duration> {
    if let Some(ms) = ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if !ms.is_nan() && ms >= 0.0 {
            return Some(saturating_secs(ms / 1000.0));
        }
    }
    let value = value?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (!secs.is_nan() && secs >= 0.0).then(|| saturating_secs(secs));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO).min(MAX_DURATION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let b = Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(800),
            retry_after_cap: Duration::from_secs(1),
        };
        for step in 0..10 {
            let full = Duration::from_millis(100 * 2u64.pow(step.min(3)));
            let d = b.delay(step);
            assert!(d >= full / 2 && d <= full, "step {step}: {d:?}");
        }
        assert!(b.delay(u32::MAX) <= b.cap);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(
            parse_retry_after(None, Some("2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(Some("250"), Some("2")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_retry_after(None, Some("soon")), None);
        assert_eq!(
            parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(None, None), None);
    }

    #[test]
    fn hostile_retry_after_saturates() {
        let max = crate::util::units::MAX_DURATION;
        assert_eq!(parse_retry_after(None, Some("1e300")), Some(max));
        assert_eq!(parse_retry_after(Some("1e300"), None), Some(max));
        assert_eq!(parse_retry_after(None, Some("inf")), Some(max));
        assert_eq!(parse_retry_after(None, Some("NaN")), None);
        // A date far in the future saturates too.
        assert_eq!(
            parse_retry_after(None, Some("Fri, 31 Dec 9999 23:59:59 GMT")),
            Some(max)
        );
    }

    #[test]
    fn lenient_response_parsing() {
        let w: WireResponse = serde_json::from_str(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"eos"}]}"#,
        )
        .unwrap();
        let p = w.into_reply_parts().unwrap();
        assert_eq!(p.text, "ab");
        assert_eq!(p.usage, Usage::default());
        assert_eq!(p.finish_reason.as_deref(), Some("eos"));

        let w: WireResponse = serde_json::from_str(r#"{"choices":[]}"#).unwrap();
        assert!(w.into_reply_parts().is_err());
        assert!(serde_json::from_str::<WireResponse>(r#"{"id":"x"}"#).is_err());
    }

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
    fn repair_rounds_sample_at_their_own_temperature_with_a_conversation_seed() {
        let gen = Generation {
            temperature: 0.0,
            repair_temperature: Some(0.7),
            ..Generation::default()
        };
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
