//! What one request came to, from the error async-openai gave and the
//! status the transport saw.

use std::time::Duration;

use async_openai::error::OpenAIError;

use super::transport::Seen;
use super::wire::ReplyParts;

pub(super) enum Step {
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

pub(super) fn classify(error: OpenAIError, seen: Option<Seen>) -> Step {
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
