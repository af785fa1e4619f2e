//! The gateway's REST API (`/api/kernelspecs`, `/api/kernels`): every call
//! retried on what passes (refused or reset connections, timeouts, 429 and
//! 5xx), then failed with the URL and the gateway's own words.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::super::KernelError;

/// Attempts per call, and the wait before the first retry (doubled each time).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// A gateway's base URL and token, and the HTTP client that calls it.
#[derive(Clone)]
pub(super) struct Rest {
    http: reqwest::Client,
    /// Without a trailing slash; may hold a path (`https://host/gateway`).
    base: String,
    token: Option<String>,
}

/// A call's answer: 404 is an answer too (a kernel the gateway no longer has).
pub(super) struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Rest {
    pub(super) fn new(
        url: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Rest, KernelError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| KernelError::Gateway(format!("gateway URL `{url}`: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(KernelError::Gateway(format!(
                "gateway URL `{url}`: use http:// or https:// (the websocket address is derived from it)"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|source| KernelError::Http {
                what: "HTTP client".into(),
                source,
            })?;
        let token = token.filter(|t| !t.is_empty());
        // A gateway may echo its token in an error page.
        if let Some(token) = &token {
            crate::util::redact::register(token);
        }
        Ok(Rest {
            http,
            base: url.trim_end_matches('/').to_string(),
            token,
        })
    }

    pub(super) fn base(&self) -> &str {
        &self.base
    }

    pub(super) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// `method` on `path` (below the base URL, e.g. `/api/kernels`), retried
    /// while the failure may pass.
    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, KernelError> {
        let url = format!("{}{path}", self.base);
        let mut backoff = FIRST_BACKOFF;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            match self.once(method.clone(), &url, body).await {
                Ok(answer) if !passing(answer.status) => {
                    if answer.status.is_success() || answer.status == StatusCode::NOT_FOUND {
                        return Ok(answer);
                    }
                    return Err(KernelError::Gateway(format!(
                        "{method} {url}: {} {}{}",
                        answer.status,
                        detail(&answer.body),
                        hint(answer.status)
                    )));
                }
                Ok(answer) => last = format!("{} {}", answer.status, detail(&answer.body)),
                Err(Failure { text, sent }) => {
                    last = text;
                    // A POST that may have reached the gateway is not sent
                    // twice: a second kernel would be left behind.
                    if sent && method == Method::POST {
                        break;
                    }
                }
            }
            if attempt < ATTEMPTS {
                tracing::debug!(%url, attempt, error = %last, "gateway call failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        Err(KernelError::Gateway(format!("{method} {url}: {last}")))
    }

    async fn once(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Answer, Failure> {
        let mut request = self.http.request(method, url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("token {token}"));
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let failure = |e: reqwest::Error| Failure {
            sent: !e.is_connect(),
            text: describe(&e),
        };
        let response = request.send().await.map_err(failure)?;
        let status = response.status();
        let text = response.text().await.map_err(failure)?;
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(Answer { status, body })
    }
}

/// A call that got no answer.
struct Failure {
    text: String,
    /// The request may have reached the gateway (not a refused connection).
    sent: bool,
}

/// Statuses worth another attempt.
fn passing(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// The gateway's own explanation (`{"message": ...}` or `{"reason": ...}`).
fn detail(body: &Value) -> String {
    for key in ["message", "reason"] {
        match body.get(key).and_then(Value::as_str) {
            Some(text) if !text.is_empty() => return format!("({text})"),
            _ => {}
        }
    }
    match body {
        Value::String(s) if !s.is_empty() => {
            format!("({})", s.chars().take(200).collect::<String>())
        }
        _ => String::new(),
    }
}

/// What the user can do about a refusal.
fn hint(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            "; check --gateway-token (or JUPYTER_GATEWAY_AUTH_TOKEN)"
        }
        _ => "",
    }
}

/// reqwest's error with its cause chain (\"connection refused\" is two levels down).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_are_gateways() {
        let t = Duration::from_secs(1);
        assert!(Rest::new("http://127.0.0.1:8888/", None, t).is_ok());
        assert_eq!(
            Rest::new("https://eg.example/gw/", Some("t".into()), t)
                .unwrap()
                .base(),
            "https://eg.example/gw"
        );
        let e = Rest::new("ws://127.0.0.1:8888", None, t)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("http://"), "{e}");
        assert!(Rest::new("not a url", None, t).is_err());
        assert_eq!(
            Rest::new("http://h", Some(String::new()), t)
                .unwrap()
                .token(),
            None
        );
    }

    #[test]
    fn refusals_say_what_to_do() {
        assert!(passing(StatusCode::BAD_GATEWAY) && passing(StatusCode::TOO_MANY_REQUESTS));
        assert!(!passing(StatusCode::FORBIDDEN) && !passing(StatusCode::NOT_FOUND));
        assert!(hint(StatusCode::FORBIDDEN).contains("--gateway-token"));
        assert_eq!(
            detail(&serde_json::json!({"message": "No such kernel"})),
            "(No such kernel)"
        );
    }
}
