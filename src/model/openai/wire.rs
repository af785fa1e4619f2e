//! Messages to the wire, and the reply from it.

use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartImage,
    ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionRequestUserMessageContentPart, ImageUrl,
};
use serde::Deserialize;

use crate::model::{Message, Part, Role, ServerTimings, Usage};

pub(super) fn to_wire(message: &Message, vision: bool) -> ChatCompletionRequestMessage {
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

pub(super) struct ReplyParts {
    pub(super) text: String,
    pub(super) usage: Usage,
    pub(super) finish_reason: Option<String>,
    pub(super) timings: Option<WireTimings>,
}

// ---- the response, parsed leniently -------------------------------------
//
// async-openai's typed response insists on `id`, `created`, `object`, a
// known `finish_reason` and a `role`; servers that merely resemble OpenAI
// (llama.cpp, proxies) differ in exactly those. Only `choices` is required.

#[derive(Debug, Deserialize)]
pub(super) struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// llama.cpp's servers: where the request's time went.
    #[serde(default)]
    timings: Option<WireTimings>,
}

/// llama.cpp's `timings` (`prompt_n` evaluated, `cache_n` reused).
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct WireTimings {
    #[serde(default)]
    prompt_n: u64,
    #[serde(default)]
    cache_n: u64,
    #[serde(default)]
    prompt_ms: f64,
    #[serde(default)]
    predicted_n: u64,
    #[serde(default)]
    predicted_ms: f64,
}

impl WireTimings {
    /// The timings of a request whose successful attempt took
    /// `latency_ms` from send to the whole reply.
    pub(super) fn within(self, latency_ms: f64) -> ServerTimings {
        ServerTimings {
            queue_ms: (latency_ms - self.prompt_ms - self.predicted_ms).max(0.0),
            prompt_tokens: self.prompt_n,
            cached_tokens: self.cache_n,
            prompt_ms: self.prompt_ms,
            generated_tokens: self.predicted_n,
            generation_ms: self.predicted_ms,
        }
    }
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

/// A 2xx reply that is not a chat completion.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotACompletion {
    #[error("the reply has no choices")]
    NoChoices,
    #[error("the first choice has no message")]
    NoMessage,
    #[error("message content is not text: {0}")]
    ContentNotText(serde_json::Value),
}

impl WireResponse {
    pub(super) fn into_reply_parts(self) -> Result<ReplyParts, NotACompletion> {
        let usage = self
            .usage
            .map(|u| Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0),
                completion_tokens: u.completion_tokens.unwrap_or(0),
            })
            .unwrap_or_default();
        let Some(choice) = self.choices.into_iter().next() else {
            return Err(NotACompletion::NoChoices);
        };
        let Some(message) = choice.message else {
            return Err(NotACompletion::NoMessage);
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
            Some(other) => return Err(NotACompletion::ContentNotText(other)),
        };
        Ok(ReplyParts {
            text: text.or(message.refusal).unwrap_or_default(),
            usage,
            finish_reason: choice.finish_reason,
            timings: self.timings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

        assert!(p.timings.is_none());

        let w: WireResponse = serde_json::from_str(
            r#"{"choices":[{"message":{"content":"x"}}],"timings":{"prompt_n":12,"cache_n":300,"prompt_ms":80.0,"predicted_n":20,"predicted_ms":900.0,"predicted_per_second":22.2}}"#,
        )
        .unwrap();
        let t = w
            .into_reply_parts()
            .unwrap()
            .timings
            .unwrap()
            .within(1000.0);
        assert_eq!(
            (t.prompt_tokens, t.cached_tokens, t.generated_tokens),
            (12, 300, 20)
        );
        assert!((t.queue_ms - 20.0).abs() < 1e-9, "{t:?}");

        let w: WireResponse = serde_json::from_str(r#"{"choices":[]}"#).unwrap();
        assert!(w.into_reply_parts().is_err());
        assert!(serde_json::from_str::<WireResponse>(r#"{"id":"x"}"#).is_err());
    }
}
