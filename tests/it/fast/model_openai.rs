//! The OpenAI-compatible client against a scripted HTTP/1.1 server on
//! 127.0.0.1 (hand-written responses, to inject faults): retries, backoff,
//! timeouts, and what is not retried.

use crate::common;

use std::time::{Duration, Instant};

use common::scripted_http::{completion, ok, respond, Act, Server};

use retrace::model::openai::{Backoff, OpenAiClient, OpenAiSettings};
use retrace::model::{
    ChatRequest, Generation, Message, ModelClient, ModelError, Part, Role, Usage,
    DEFAULT_MAX_REPLY_BYTES,
};

const TIMEOUT: Duration = Duration::from_millis(300);

fn client(base_url: String, max_retries: u32, vision: bool) -> OpenAiClient {
    client_with(base_url, max_retries, vision, DEFAULT_MAX_REPLY_BYTES)
}

fn client_with(
    base_url: String,
    max_retries: u32,
    vision: bool,
    max_reply_bytes: u64,
) -> OpenAiClient {
    let generation = Generation {
        temperature: 0.2,
        repair_temperature: None,
        max_tokens: 64,
        request_timeout: TIMEOUT,
        max_retries,
        max_reply_bytes,
    };
    OpenAiClient::new(
        OpenAiSettings {
            model: "test-model".into(),
            base_url: Some(base_url),
            api_key: Some("test-key".into()),
            vision,
        },
        generation,
    )
    .unwrap()
    .with_backoff(Backoff {
        base: Duration::from_millis(5),
        cap: Duration::from_millis(20),
        retry_after_cap: Duration::from_millis(400),
    })
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::text(Role::System, "You write Python."),
            Message::text(Role::User, "Compute 6 * 7."),
        ],
        round: 0,
        temperature: 0.2,
    }
}

#[tokio::test]
async fn rate_limited_then_success() {
    let server = Server::start(vec![
        respond(
            429,
            r#"{"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}"#,
        ),
        ok("```python\nanswer = 42\n```"),
    ])
    .await;
    let reply = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(reply.text, "```python\nanswer = 42\n```");
    assert_eq!(reply.attempts, 2);
    assert_eq!(reply.usage.prompt_tokens, Some(11));
    assert_eq!(reply.usage.completion_tokens, Some(7));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert!(reply.latency_ms > 0.0);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let head = requests[0].head.to_ascii_lowercase();
    assert!(head.starts_with("post /v1/chat/completions "), "{head}");
    assert!(head.contains("authorization: bearer test-key"), "{head}");
    let body: serde_json::Value = serde_json::from_str(&requests[0].body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["max_tokens"], 64);
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "Compute 6 * 7.");
}

#[tokio::test]
async fn server_errors_twice_then_success() {
    let server = Server::start(vec![
        respond(500, "internal error"),
        respond(503, "<html>overloaded</html>"),
        ok("fine"),
    ])
    .await;
    let reply = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(reply.text, "fine");
    assert_eq!(reply.attempts, 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn garbage_body_is_an_invalid_reply() {
    let server = Server::start(vec![respond(200, "this is {not json")]).await;
    let err = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap_err();
    match err {
        ModelError::InvalidReply(m) => assert!(m.contains("not json"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        server.requests().len(),
        1,
        "an invalid reply is not retried"
    );

    for body in [
        r#"{"choices": []}"#,
        r#"{"id": "x", "object": "chat.completion"}"#,
    ] {
        let server = Server::start(vec![respond(200, body)]).await;
        let err = client(server.base_url(), 3, false)
            .chat(&request())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ModelError::InvalidReply(_)),
            "{body}: {err:?}"
        );
    }
}

#[tokio::test]
async fn stalls_are_retried_then_reported() {
    let stall = Act::Stall(Duration::from_secs(600));
    let server = Server::start(vec![stall.clone(), stall.clone(), stall]).await;
    let started = Instant::now();
    let err = client(server.base_url(), 2, false)
        .chat(&request())
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    match err {
        ModelError::Endpoint { attempts, message } => {
            assert_eq!(attempts, 3);
            assert!(message.contains("timeout"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
    assert!(elapsed >= TIMEOUT * 3, "{elapsed:?}");
    // Not a speed goal: only that no attempt waited for its 600 s stall.
    assert!(elapsed < Duration::from_secs(120), "{elapsed:?}");
}

#[tokio::test]
async fn stall_then_success() {
    let server = Server::start(vec![Act::Stall(Duration::from_secs(3)), ok("late")]).await;
    let reply = client(server.base_url(), 2, false)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!((reply.text.as_str(), reply.attempts), ("late", 2));
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = Server::start(vec![
        respond(
            400,
            r#"{"error": {"message": "bad request: context too long", "type": "invalid_request_error"}}"#,
        ),
        ok("never"),
    ])
    .await;
    let err = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap_err();
    match err {
        ModelError::Endpoint { attempts, message } => {
            assert_eq!(attempts, 1);
            assert!(
                message.contains("400") && message.contains("context too long"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1);

    // llama.cpp's error shape (integer `code`) is not OpenAI's: still a
    // non-retried 4xx, with the status kept.
    let server = Server::start(vec![respond(
        404,
        r#"{"error": {"code": 404, "message": "model not found", "type": "not_found_error"}}"#,
    )])
    .await;
    let err = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap_err();
    match err {
        ModelError::Endpoint { attempts, message } => {
            assert_eq!(attempts, 1);
            assert!(
                message.contains("404") && message.contains("model not found"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn rate_limit_with_plain_body_is_retried_and_quota_is_not() {
    let server = Server::start(vec![respond(429, "Too Many Requests"), ok("ok")]).await;
    let reply = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(reply.attempts, 2);

    let server = Server::start(vec![respond(
        429,
        r#"{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#,
    )])
    .await;
    let err = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::Endpoint { attempts: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let server = Server::start(vec![
        Act::Respond {
            status: 429,
            headers: vec![("Retry-After-Ms", "150".into())],
            body: "{}".into(),
        },
        Act::Respond {
            status: 503,
            headers: vec![("Retry-After", "3600".into())],
            body: "maintenance".into(),
        },
        ok("after waiting"),
    ])
    .await;
    let started = Instant::now();
    let reply = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(reply.attempts, 3);
    // 150 ms as asked, then 3600 s capped at 400 ms. The upper bound is not
    // a speed goal: only that the 3600 s were not waited.
    assert!(elapsed >= Duration::from_millis(550), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(120), "{elapsed:?}");
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let addr = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let err = client(format!("http://{addr}/v1"), 2, false)
        .chat(&request())
        .await
        .unwrap_err();
    match err {
        ModelError::Endpoint { attempts, message } => {
            assert_eq!(attempts, 3);
            assert!(message.contains("transport"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn lenient_reply_without_usage() {
    // What a minimal compatible server might send: no id/created/object,
    // an unknown finish reason, no usage.
    let server = Server::start(vec![respond(
        200,
        r#"{"choices": [{"message": {"content": "hi"}, "finish_reason": "eos"}]}"#,
    )])
    .await;
    let reply = client(server.base_url(), 0, false)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(reply.text, "hi");
    assert_eq!(reply.usage, Usage::UNKNOWN);
    assert_eq!(reply.finish_reason.as_deref(), Some("eos"));
    assert_eq!(reply.attempts, 1);
}

#[tokio::test]
async fn vision_sends_images_as_data_urls() {
    let server = Server::start(vec![ok("seen")]).await;
    let mut req = request();
    req.messages.push(Message {
        role: Role::User,
        parts: vec![
            Part::Text {
                text: "the plot".into(),
            },
            Part::ImagePng {
                base64: "iVBORw0KGgo=".into(),
            },
        ],
    });
    let model = client(server.base_url(), 0, true);
    assert!(model.vision());
    model.chat(&req).await.unwrap();
    let body: serde_json::Value = serde_json::from_str(&server.requests()[0].body).unwrap();
    let parts = &body["messages"][2]["content"];
    assert_eq!(
        parts[0],
        serde_json::json!({"type": "text", "text": "the plot"})
    );
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        parts[1]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
}

/// The failure of a request that must not have been retried.
fn endpoint_failure(err: ModelError) -> String {
    match err {
        ModelError::Endpoint { attempts, message } => {
            assert_eq!(attempts, 1, "{message}");
            message
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_endless_chunked_body_is_cut_at_the_cap_and_not_retried() {
    let server = Server::start_with_default(
        vec![],
        Act::Flood {
            length: None,
            chunk: 64 << 10,
            every: Duration::ZERO,
        },
    )
    .await;
    let err = client_with(server.base_url(), 3, false, 1 << 20)
        .chat(&request())
        .await
        .unwrap_err();
    let message = endpoint_failure(err);
    assert!(
        message.contains("went past the limit of 1048576 bytes (--max-reply-bytes)"),
        "{message}"
    );
    assert!(message.contains("not retried"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_huge_announced_body_is_refused_unread() {
    let server = Server::start_with_default(
        vec![],
        Act::Flood {
            length: Some(300 << 20),
            chunk: 64 << 10,
            every: Duration::ZERO,
        },
    )
    .await;
    let err = client_with(server.base_url(), 3, false, 1 << 20)
        .chat(&request())
        .await
        .unwrap_err();
    let message = endpoint_failure(err);
    assert!(
        message.contains("announced a body of 314572800 bytes, over the limit of 1048576 bytes"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_body_exactly_at_the_cap_is_read_and_one_byte_more_is_not() {
    let body = completion(&"z".repeat(5000));
    let cap = body.len() as u64;
    let server = Server::start_with_default(vec![], respond(200, &body)).await;
    let reply = client_with(server.base_url(), 3, false, cap)
        .chat(&request())
        .await
        .unwrap();
    assert_eq!(reply.text.len(), 5000);
    let err = client_with(server.base_url(), 3, false, cap - 1)
        .chat(&request())
        .await
        .unwrap_err();
    let message = endpoint_failure(err);
    assert!(message.contains("--max-reply-bytes"), "{message}");
}

#[tokio::test]
async fn a_body_that_trickles_for_ever_ends_at_the_request_timeout() {
    // Never past the cap: the request timeout covers the body's reading.
    let server = Server::start_with_default(
        vec![],
        Act::Flood {
            length: None,
            chunk: 64,
            every: Duration::from_millis(10),
        },
    )
    .await;
    let chat = client_with(server.base_url(), 0, false, 1 << 20);
    // Far above the request timeout: reached only if the body is read for ever.
    let watchdog = Duration::from_secs(120);
    let err = tokio::time::timeout(watchdog, chat.chat(&request()))
        .await
        .expect("the body was read past the request timeout")
        .unwrap_err();
    match err {
        ModelError::Endpoint { message, .. } => {
            assert!(message.contains("request timeout"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_body_is_kept_as_a_short_excerpt_without_the_key() {
    // A 4xx echoing the key in a body far over the excerpt.
    let body = format!(
        r#"{{"error": {{"message": "Incorrect API key provided: test-key. {}", "type": "invalid_request_error"}}}}"#,
        "y".repeat(200_000)
    );
    let server = Server::start(vec![respond(401, &body)]).await;
    let err = client(server.base_url(), 3, false)
        .chat(&request())
        .await
        .unwrap_err();
    let message = endpoint_failure(err);
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    assert!(!message.contains("test-key"), "{message}");
    assert!(message.chars().count() <= 2100, "{} chars", message.len());
}

#[tokio::test]
async fn odd_usage_keeps_the_reply() {
    let body = serde_json::json!({
        "choices": [{"message": {"content": "kept"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": "eleven",
            "completion_tokens": -7,
            "total_tokens": 1.5,
            "prompt_tokens_details": {"cached_tokens": null}
        }
    })
    .to_string();
    // A count no number type holds makes the JSON itself unreadable to a
    // strict parser.
    let huge = body.replace("-7", "1e999");
    let server = Server::start(vec![respond(200, &body), respond(200, &huge)]).await;
    for _ in 0..2 {
        let reply = client(server.base_url(), 0, false)
            .chat(&request())
            .await
            .unwrap();
        assert_eq!(reply.text, "kept");
        assert_eq!(reply.usage, Usage::UNKNOWN);
    }
}
