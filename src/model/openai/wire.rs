//! Messages to the wire, and the reply from it.

use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestMessageContentPartImage,
    ChatCompletionRequestMessageContentPartText, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionRequestUserMessageContentPart, ImageUrl,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

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
// (llama.cpp, proxies) differ in exactly those. Only `choices` is required,
// and the bookkeeping beside the answer (usage, timings, finish reason,
// refusal) is read by [`lenient`]: a field of the wrong shape is unknown,
// never a reply lost.

#[derive(Debug, Deserialize)]
pub(super) struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default, deserialize_with = "lenient_object")]
    usage: Option<WireUsage>,
    /// llama.cpp's servers: where the request's time went.
    #[serde(default, deserialize_with = "lenient")]
    timings: Option<WireTimings>,
}

/// A field read leniently: whatever JSON it holds (a number out of any
/// range included), a value that is not a `T` is `None`.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    Ok(serde_json::from_str(raw.get()).ok())
}

/// [`lenient`] for a JSON object only (serde would read `[1, 2]` as a
/// struct's fields in order).
fn lenient_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    let object = raw.get().trim_start().starts_with('{');
    Ok(object
        .then(|| serde_json::from_str(raw.get()).ok())
        .flatten())
}

/// The largest token count believed (about 10^12, far beyond any context
/// window): a larger one is unknown, and sums of counts never overflow.
pub const MAX_TOKEN_COUNT: u64 = 1 << 40;

/// A token count read leniently: a whole number from 0 to
/// [`MAX_TOKEN_COUNT`] (`12.0` included); anything else (negative,
/// fractional, text, null, huge) is unknown.
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    Ok(read_count(raw.get()))
}

fn read_count(json: &str) -> Option<u64> {
    let n: serde_json::Number = serde_json::from_str(json).ok()?;
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=MAX_TOKEN_COUNT as f64).contains(f))
            .map(|f| f as u64)
    })?;
    (whole <= MAX_TOKEN_COUNT).then_some(whole)
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
    /// Speculative decoding: tokens drafted, and accepted.
    #[serde(default)]
    draft_n: u64,
    #[serde(default)]
    draft_n_accepted: u64,
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
            draft_tokens: self.draft_n,
            draft_accepted: self.draft_n_accepted,
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default, deserialize_with = "lenient")]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "lenient")]
    refusal: Option<String>,
}

/// `usage`: only the two counts retrace records are read (`total_tokens`
/// and the details are ignored, whatever they hold).
#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "count")]
    prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
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
        let usage = self.usage.map_or(Usage::UNKNOWN, |u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        });
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
        assert_eq!(p.usage, Usage::UNKNOWN);
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

    #[test]
    fn odd_usage_counts_are_unknown_and_the_reply_is_kept() {
        let table: [(&str, Option<u64>); 17] = [
            ("11", Some(11)),
            ("0", Some(0)),
            ("12.0", Some(12)),
            ("1e3", Some(1000)),
            ("1099511627776", Some(MAX_TOKEN_COUNT)),
            ("1099511627777", None),
            ("18446744073709551615", None),
            ("99999999999999999999999999", None),
            ("1e999", None),
            ("-1", None),
            ("-1e999", None),
            ("1.5", None),
            ("\"12\"", None),
            ("null", None),
            ("true", None),
            ("[3]", None),
            ("{\"n\": 3}", None),
        ];
        for (value, expected) in table {
            // The same odd value in every count, read or ignored.
            let body = format!(
                r#"{{"choices":[{{"message":{{"content":"x"}}}}],"usage":{{"prompt_tokens":{value},"completion_tokens":7,"total_tokens":{value},"prompt_tokens_details":{{"cached_tokens":{value}}},"completion_tokens_details":{value}}}}}"#
            );
            let w: WireResponse = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{value}: the reply was lost: {e}"));
            let p = w.into_reply_parts().unwrap();
            assert_eq!(p.text, "x", "{value}");
            assert_eq!(p.usage.prompt_tokens, expected, "{value}");
            assert_eq!(p.usage.completion_tokens, Some(7), "{value}");
        }
    }

    #[test]
    fn odd_bookkeeping_is_unknown_and_the_reply_is_kept() {
        for extra in [
            r#""usage": "many""#,
            r#""usage": [1, 2]"#,
            r#""usage": null"#,
            r#""usage": {"prompt_tokens": 1, "prompt_tokens": 2}"#,
            r#""timings": {"prompt_n": -1, "predicted_ms": "slow"}"#,
            r#""timings": 1e999"#,
        ] {
            let body = format!(
                r#"{{"choices":[{{"message":{{"content":"x","refusal":5}},"finish_reason":{{"why":1}}}}],{extra}}}"#
            );
            let w: WireResponse = serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("{extra}: the reply was lost: {e}"));
            let p = w.into_reply_parts().unwrap();
            assert_eq!(p.text, "x", "{extra}");
            assert_eq!(p.usage, Usage::UNKNOWN, "{extra}");
            assert!(p.timings.is_none() && p.finish_reason.is_none(), "{extra}");
        }
    }
}
