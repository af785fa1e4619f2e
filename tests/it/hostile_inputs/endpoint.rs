//! The model endpoint and its replies as hostile inputs: a scripted
//! OpenAI-compatible server that echoes the API key (in error bodies, in a
//! reply's code and its outputs, in headers), sends a 300 MB reply or a
//! body without end, or bookkeeping no parser expects, against the real
//! `retrace run`. No form of the key may reach a file of the run directory
//! or stderr; a reply past `--max-reply-bytes` is a recorded failure of its
//! request with the harness's memory bounded; odd `usage` keeps the reply.

use std::path::{Path, PathBuf};

use base64::Engine;
use retrace::pyenv::ImageName;
use serde_json::{json, Value};

use super::{files_containing, files_under, records, run_case, write_suite};
use crate::common::scripted_http::{completion, Act, Server};
use crate::common::{retrace, Ran};

/// The key the endpoint echoes; shaped like a real project key.
const KEY: &str = "sk-proj-Q7x9_Lr2-mZ8vT4kW1pN6yB3cD5fG0hJ";

/// The longest journal line a failed request may leave (a line holds the
/// prompt, the failure's excerpt of at most 2 KiB, and bookkeeping).
const MAX_FAILED_LINE: usize = 64 << 10;

fn suite(dir: &Path) -> PathBuf {
    write_suite(
        dir,
        "tasks.jsonl",
        &[json!({
            "id": "six-times-seven",
            "question": "What is 6 * 7?",
            "expected": {"type": "number", "value": 42.0},
            "reference": "answer = 6 * 7\n",
        })],
    )
}

/// `retrace run` of the one-task suite against `server`, with `extra`
/// flags and environment, as a corpus case (hang and memory checked).
async fn run_against(
    case: &'static str,
    server: &Server,
    dir: &Path,
    extra: &[&str],
    env: &[(&'static str, &str)],
) -> (Ran, PathBuf) {
    let out = dir.join("run");
    let mut args: Vec<String> = [
        "run",
        "--suite",
        suite(dir).to_str().unwrap(),
        "--model",
        "openai:hostile",
        "--base-url",
        &server.base_url(),
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    let env: Vec<(&'static str, String)> = env.iter().map(|(k, v)| (*k, v.to_string())).collect();
    let ran = tokio::task::spawn_blocking(move || {
        let mut cli = retrace(args).image(ImageName::Fat);
        for (k, v) in env {
            cli = cli.env(k, v);
        }
        run_case(case, cli)
    })
    .await
    .unwrap();
    (ran, out)
}

/// No file of the run and nothing on stderr holds the key, as is or as
/// base64.
fn assert_no_key(out: &Path, ran: &Ran) {
    let files = files_under(out);
    for name in ["results.jsonl", "run.json", "report.html", "report.md"] {
        assert!(
            files.iter().any(|f| f.ends_with(name)),
            "no {name}: {files:?}"
        );
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(KEY);
    for form in [KEY, b64.trim_end_matches('=')] {
        let leaks = files_containing(out, form.as_bytes());
        assert!(leaks.is_empty(), "{form} is in {leaks:?}");
        assert!(
            !ran.stderr.contains(form),
            "{form} on stderr:\n{}",
            ran.stderr
        );
    }
}

/// Log everything that may quote an endpoint: retries, warnings, and
/// async-openai's own warning with a 5xx body.
const LOUD: (&str, &str) = ("RETRACE_LOG", "warn,retrace=debug,async_openai=warn");

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_key_in_error_body_is_redacted() {
    if crate::common::lacks_root() {
        return;
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{KEY}"));
    let echo = vec![
        ("www-authenticate", format!("Bearer realm=\"{KEY}\"")),
        ("x-echo-authorization", format!("Bearer {KEY}")),
    ];
    let unavailable = Act::Respond {
        status: 503,
        headers: echo.clone(),
        body: format!("<html>upstream refused Authorization: Bearer {KEY} (Basic {b64})</html>"),
    };
    let unauthorized = Act::Respond {
        status: 401,
        headers: echo,
        body: json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}. You sent: Bearer {KEY}"),
            "type": "invalid_request_error",
            "code": "invalid_api_key"
        }})
        .to_string(),
    };
    let server = Server::start_with_default(vec![unavailable], unauthorized).await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, out) = run_against(
        "endpoint/key_in_error_body",
        &server,
        dir.path(),
        &[
            "--api-key",
            KEY,
            "--max-retries",
            "1",
            "--max-infra-errors",
            "1",
        ],
        &[LOUD],
    )
    .await;
    assert!(ran.success(), "{ran}");
    let records = records(&out);
    let why = records[0]["infra_error"]
        .as_str()
        .expect("a failed request");
    assert!(
        why.contains("HTTP 401") && why.contains("[redacted]"),
        "{why}"
    );
    assert_no_key(&out, &ran);
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_key_in_reply_is_redacted() {
    if crate::common::lacks_root() {
        return;
    }
    // Code that prints the key plainly and encoded, displays it in an SVG
    // and in a PNG's metadata, answers with it and fails with it (the
    // traceback goes into the next prompt).
    let code = format!(
        r#"```python
import base64, io, urllib.parse
from IPython.display import SVG, Image, display
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
KEY = "{KEY}"
print("key:", KEY, "url:", urllib.parse.quote(KEY))
print("basic:", base64.b64encode(("user:" + KEY).encode()).decode())
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="80" height="20"><text y="15">' + KEY + '</text></svg>'))
buf = io.BytesIO()
plt.plot([1, 2])
plt.savefig(buf, format="png", metadata={{"Comment": KEY}})
display(Image(buf.getvalue()))
answer = KEY
raise ValueError("bad key " + KEY)
```"#
    );
    let server = Server::start_with_default(
        vec![],
        Act::Respond {
            status: 200,
            headers: vec![("x-echo-key", KEY.to_string())],
            body: completion(&format!("Here you go, {KEY}:\n{code}")),
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, out) = run_against(
        "endpoint/key_in_reply",
        &server,
        dir.path(),
        &["--rounds", "1"],
        &[("OPENAI_API_KEY", KEY), LOUD],
    )
    .await;
    assert!(ran.success(), "{ran}");
    let records = records(&out);
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(
        records.iter().all(|r| r["infra_error"].is_null()),
        "{records:?}"
    );
    assert!(
        files_under(&out)
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "svg")),
        "the SVG artifact was written"
    );
    assert_no_key(&out, &ran);
}

/// A run whose one request gets `flood`: a recorded failure of that
/// request, not retried, small journal lines, a normal end.
async fn flood_case(case: &'static str, flood: Act) {
    let server = Server::start_with_default(vec![], flood).await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, out) = run_against(
        case,
        &server,
        dir.path(),
        &[
            "--max-retries",
            "2",
            "--max-infra-errors",
            "1",
            // Only for the code before the cap: it read until this timeout.
            "--request-timeout",
            "5s",
        ],
        &[],
    )
    .await;
    assert!(ran.success(), "{ran}");
    assert_eq!(
        server.requests().len(),
        1,
        "a reply too large is not retried"
    );
    let journal = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    for line in journal.lines() {
        assert!(
            line.len() <= MAX_FAILED_LINE,
            "a line of {} bytes",
            line.len()
        );
    }
    let records = records(&out);
    assert_eq!(records[0]["kind"], "infra_error", "{:?}", records[0]);
    let why = records[0]["infra_error"].as_str().unwrap();
    assert!(why.contains("--max-reply-bytes"), "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_reply_of_300_mb_is_a_recorded_failure() {
    if crate::common::lacks_root() {
        return;
    }
    let flood = Act::Flood {
        length: Some(300 << 20),
        chunk: 1 << 20,
        every: std::time::Duration::ZERO,
    };
    flood_case("endpoint/reply_of_300_mb", flood).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_endless_chunked_reply_is_a_recorded_failure() {
    if crate::common::lacks_root() {
        return;
    }
    let flood = Act::Flood {
        length: None,
        chunk: 1 << 20,
        every: std::time::Duration::ZERO,
    };
    flood_case("endpoint/endless_chunked_reply", flood).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoint_odd_usage_keeps_the_reply() {
    if crate::common::lacks_root() {
        return;
    }
    let body = json!({
        "choices": [{
            "message": {"content": "```python\nanswer = 6 * 7\n```"},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": -3,
            "completion_tokens": "7",
            "total_tokens": 2.5,
            "prompt_tokens_details": {"cached_tokens": "many"}
        }
    })
    .to_string()
    // No number type holds it: a strict parser loses the whole reply.
    .replace("2.5", "1e999");
    let server = Server::start_with_default(
        vec![],
        Act::Respond {
            status: 200,
            headers: vec![],
            body,
        },
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ran, out) = run_against(
        "endpoint/odd_usage",
        &server,
        dir.path(),
        &["--max-retries", "0"],
        &[],
    )
    .await;
    assert!(ran.success(), "{ran}");
    let records = records(&out);
    let first = &records[0];
    assert!(first["infra_error"].is_null(), "{first}");
    assert_eq!(first["correct"], true, "{first}");
    assert_eq!(first["tokens"]["prompt_tokens"], Value::Null, "{first}");
    assert_eq!(first["tokens"]["completion_tokens"], Value::Null, "{first}");
}

#[test]
fn max_reply_bytes_refuses_nonsense() {
    // A usage error (exit 2) naming the flag, before anything runs.
    for value in ["0", "-1", "lots", "2G", ""] {
        let flag = format!("--max-reply-bytes={value}");
        let ran = retrace(["run", "--model", "oracle", &flag]).run();
        assert_eq!(ran.code, 2, "{value}: {ran}");
        assert!(ran.stderr.contains("--max-reply-bytes"), "{value}: {ran}");
    }
}
