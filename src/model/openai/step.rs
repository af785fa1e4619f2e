//! What one request came to, from the error async-openai gave and the
//! status the transport saw.

use std::time::Duration;

use async_openai::error::OpenAIError;

use super::transport::{ReplyTooLarge, Seen};
use super::wire::ReplyParts;
use crate::util::redact;

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
    if let OpenAIError::Boxed(e) = &error {
        if let Some(large) = e.downcast_ref::<ReplyTooLarge>() {
            let status = seen.map_or(0, |s| s.status);
            return Step::Fatal(format!(
                "HTTP {status}: {large}; not retried (the same request gets the same reply)"
            ));
        }
    }
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
/// is only "error sending request for url"), bounded ([`excerpt`]).
fn describe(error: &OpenAIError) -> String {
    let text = match error {
        OpenAIError::ApiError(r) => snippet(&r.api_error.to_string()),
        OpenAIError::JSONDeserialize(e, body) => {
            format!("{}; body: {}", excerpt(&e.to_string()), snippet(body))
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
    };
    excerpt(&text)
}

/// The most characters of an endpoint's text a failure's message keeps
/// (a parse error quotes the value it choked on, whatever its size).
pub(super) const MAX_EXCERPT_CHARS: usize = 2048;

/// The most characters of a reply's body quoted in a failure's message.
const MAX_BODY_CHARS: usize = 300;

/// `text` as a failure's message keeps it: redacted, then cut to
/// [`MAX_EXCERPT_CHARS`] (in this order, so a cut cannot split a secret
/// into pieces the redactor no longer knows).
pub(super) fn excerpt(text: &str) -> String {
    cut(&redact::text(text), MAX_EXCERPT_CHARS)
}

/// A body quoted in a message: redacted, then cut to [`MAX_BODY_CHARS`].
fn snippet(text: &str) -> String {
    cut(&redact::text(text), MAX_BODY_CHARS)
}

fn cut(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}
