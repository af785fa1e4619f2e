//! async-openai's reqwest transport without its retry layer, noting each
//! response's status and `Retry-After`, and reading each body under a cap.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::{HttpRequestFactory, ReqwestService};
use async_openai::Client;

use crate::model::DEFAULT_MAX_REPLY_BYTES;
use crate::util::redact;
use crate::util::units::{saturating_secs, MAX_DURATION};

/// The most of an error reply's body (any status but 2xx) that is read:
/// only an excerpt of it is ever recorded, and a JSON error is far smaller.
pub const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;

/// A client of `base_url` with `api_key` on [`super::OpenAiClient`]'s
/// transport: no retry layer, reply bodies read up to `max_body` bytes. The
/// key is registered with the redactor: an endpoint may echo it.
pub(super) fn client(
    config: OpenAIConfig,
    base_url: &str,
    api_key: &str,
    max_body: u64,
) -> Client<OpenAIConfig> {
    redact::register(api_key);
    let config = config.with_api_base(base_url).with_api_key(api_key);
    Client::with_config(config).with_http_service(Recorder {
        inner: ReqwestService::default(),
        max_body,
    })
}

/// A client for `base_url` on [`super::OpenAiClient`]'s transport (no retry
/// layer, the default reply cap), for a one-off request such as the local
/// server's readiness probe; no organisation or project header, whatever
/// the environment says.
pub(crate) fn plain_client(base_url: &str, api_key: &str) -> Client<OpenAIConfig> {
    let config = OpenAIConfig::new().with_org_id("").with_project_id("");
    client(config, base_url, api_key, DEFAULT_MAX_REPLY_BYTES)
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
pub(super) struct Seen {
    pub(super) status: u16,
    pub(super) retry_after: Option<Duration>,
}

tokio::task_local! {
    /// Status and Retry-After of the last response in this attempt. Each
    /// attempt runs inside its own scope, so concurrent chats do not mix.
    pub(super) static SEEN: Cell<Option<Seen>>;
}

/// A 2xx reply whose body is over the cap: the request failed. Not
/// retried: the same request gets the same reply.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReplyTooLarge {
    #[error("the reply announced a body of {announced} bytes, over the limit of {limit} bytes (--max-reply-bytes); it was not read")]
    Announced { limit: u64, announced: u64 },
    #[error("the reply body went past the limit of {limit} bytes (--max-reply-bytes); reading stopped there")]
    Read { limit: u64 },
}

/// async-openai's plain reqwest transport (no retry layer) that notes each
/// response's status and `Retry-After` in [`SEEN`] and reads its body
/// under the cap ([`read_capped`]).
#[derive(Clone, Debug)]
pub(super) struct Recorder {
    pub(super) inner: ReqwestService,
    /// The most bytes of a 2xx body (`--max-reply-bytes`).
    pub(super) max_body: u64,
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
        let max_body = self.max_body;
        Box::pin(async move {
            let response = response.await?;
            let headers = response.headers();
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            let seen = Seen {
                status: response.status().as_u16(),
                retry_after: parse_retry_after(header("retry-after-ms"), header("retry-after")),
            };
            let _ = SEEN.try_with(|cell| cell.set(Some(seen)));
            read_capped(response, max_body).await
        })
    }
}

/// `response` with its body read into memory, chunk by chunk, never past a
/// cap: a 2xx body of more than `max_body` bytes (announced or read) is
/// [`ReplyTooLarge`]; any other status keeps at most
/// [`MAX_ERROR_BODY_BYTES`] of its body. What is left unread is dropped
/// with the connection. async-openai then reads the body kept in memory.
async fn read_capped(
    mut response: reqwest::Response,
    max_body: u64,
) -> Result<reqwest::Response, OpenAIError> {
    let success = response.status().is_success();
    let limit = match success {
        true => max_body,
        false => max_body.min(MAX_ERROR_BODY_BYTES),
    };
    if let Some(announced) = response.content_length().filter(|&n| success && n > limit) {
        return Err(too_large(ReplyTooLarge::Announced { limit, announced }));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(OpenAIError::Reqwest)? {
        let room = usize::try_from(limit.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
        if chunk.len() > room {
            if success {
                return Err(too_large(ReplyTooLarge::Read { limit }));
            }
            body.extend_from_slice(&chunk[..room]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let mut kept = http::Response::builder()
        .status(response.status())
        .version(response.version());
    if let Some(headers) = kept.headers_mut() {
        *headers = response.headers().clone();
    }
    let kept = kept
        .body(body.freeze())
        .map_err(|e| OpenAIError::Boxed(Box::new(e)))?;
    Ok(reqwest::Response::from(kept))
}

fn too_large(error: ReplyTooLarge) -> OpenAIError {
    OpenAIError::Boxed(Box::new(error))
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
}
