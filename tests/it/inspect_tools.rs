//! The tooling that checks retrace's Inspect and EEE exports with the real
//! tools (`common::inspect`, `common::eee`, `common::static_http`), proved
//! on files the real Python libraries wrote: a log written by Inspect's own
//! API is digested by Inspect's reader and rendered by its viewer, a record
//! pair built by every-eval-ever's own models validates, and broken inputs
//! fail loudly with what is wrong. The first run on a machine installs the
//! pinned venvs from the package index (and Chromium with apt, as root,
//! when it is missing); a tool that cannot run fails the test.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Once;

use serde_json::{json, Value};

use common::eee::{eee_venv, validate_eee};
use common::inspect::{inspect_venv, read_with_inspect, run_clean, venv_command, view_bundle};
use common::static_http::StaticServer;

const INSPECT_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/tools/inspect_fixture.py"
);
const EEE_FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/eee_fixture.py");
const LOG_NAME: &str = "2026-01-01T00-00-00+00-00_math_fixture.eval";
/// The file stem `tests/tools/eee_fixture.py` gives its records.
const EEE_NAME: &str = "0f8c4d52-9b0e-4c5e-8e64-2f4a1c3b7d10";

/// Prints the tools' versions once per test binary, past libtest's capture.
fn announce_versions() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let line = common::inspect::tool_versions();
        let _ = writeln!(std::io::stderr(), "inspect_tools: {line}");
    });
}

/// `<dir>/logs/<LOG_NAME>`, written by `tests/tools/inspect_fixture.py`.
fn fixture_log(dir: &Path) -> PathBuf {
    let log = dir.join("logs").join(LOG_NAME);
    let mut cmd = venv_command(&inspect_venv(), "python", dir);
    cmd.arg(INSPECT_FIXTURE).arg(&log);
    run_clean(cmd, "writing the Inspect fixture log");
    log
}

#[test]
fn inspects_reader_digests_a_log_written_by_inspect() {
    announce_versions();
    let dir = tempfile::tempdir().unwrap();
    let digest = read_with_inspect(&fixture_log(dir.path()));
    assert_eq!(digest["status"], "success");
    let eval = &digest["eval"];
    assert_eq!(eval["task"], "math");
    assert_eq!(eval["model"], "retrace/oracle");
    assert_eq!(
        eval["dataset"],
        json!({"name": "math", "samples": 2, "sample_ids": ["math-1", "math-2"]})
    );
    assert_eq!(eval["metadata_keys"], json!(["arm"]));
    assert_eq!(eval["revision"], Value::Null);
    assert_eq!(
        digest["results"]["scores"],
        json!([{"name": "match", "scorer": "match", "metrics": {"accuracy": 0.5}}])
    );
    let samples = digest["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 2);
    let (first, second) = (&samples[0], &samples[1]);
    assert_eq!(first["id"], "math-1");
    assert_eq!(first["epoch"], 1);
    assert_eq!(first["target"], "4");
    assert_eq!(first["input"], "What is 2+2?");
    assert_eq!(
        first["scores"]["match"],
        json!({"value": "C", "answer": "4", "explanation": "exact match"})
    );
    assert_eq!(second["scores"]["match"]["value"], "I");
    assert_eq!(first["message_count"], 3);
    assert_eq!(first["roles"], json!(["system", "user", "assistant"]));
    assert_eq!(first["texts"][2], "The answer is 4.");
    assert_eq!(second["output"], "The answer is 6.");
    assert_eq!(first["metadata_keys"], json!(["suite"]));
    assert_eq!(
        first["model_usage"]["retrace/oracle"],
        json!({"input_tokens": 12, "output_tokens": 6, "total_tokens": 18})
    );
    assert_eq!(first["total_time"], 1.5);
    assert_eq!(first["working_time"], 1.25);
    assert_eq!(first["error"], Value::Null);
}

#[test]
fn a_log_inspect_cannot_read_fails_with_its_traceback() {
    announce_versions();
    let dir = tempfile::tempdir().unwrap();
    let log = fixture_log(dir.path());
    // Cut before the zip's central directory: no longer a zip file.
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() / 2]).unwrap();
    let failed = std::panic::catch_unwind(|| read_with_inspect(&log)).expect_err("a panic");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("Traceback"), "{message}");
    assert!(message.contains(LOG_NAME), "names the log: {message}");
}

#[test]
fn inspects_viewer_shows_the_samples_and_a_transcript() {
    announce_versions();
    let dir = tempfile::tempdir().unwrap();
    fixture_log(dir.path());
    let shown = view_bundle(&dir.path().join("logs"));
    assert_eq!(shown.log_file, LOG_NAME);
    assert_eq!((shown.sample_id.as_str(), shown.epoch), ("math-1", 1));
    assert!(
        shown.errors.is_empty(),
        "viewer errors: {:#?}",
        shown.errors
    );
    for page in [
        &shown.logs,
        &shown.samples,
        &shown.sample,
        &shown.transcript,
    ] {
        assert!(page.settled, "{} did not settle: {}", page.route, page.text);
        // Text and badges: hundreds of shades; a blank or bare page has a
        // handful, a lone "Loading…" some dozens.
        let colours = page.colours();
        assert!(
            colours > 200,
            "{} looks blank ({colours} colours)",
            page.route
        );
    }
    assert!(shown.logs.text.contains(LOG_NAME), "{}", shown.logs.text);
    let samples = &shown.samples.text;
    for id in ["math-1", "math-2"] {
        assert!(samples.contains(id), "{id}: {samples}");
        assert!(shown.samples.dom.contains(id));
    }
    // The header shows the metric (its name in capitals, by CSS).
    assert!(
        samples.to_lowercase().contains("accuracy\n0.5"),
        "{samples}"
    );
    for text in ["What is 2+2?", "Solve the task.", "The answer is 4."] {
        assert!(
            shown.sample.text.contains(text),
            "{text:?}: {}",
            shown.sample.text
        );
    }
    let transcript = &shown.transcript.text;
    assert!(
        transcript.to_lowercase().contains("model call"),
        "{transcript}"
    );
    for text in ["The answer is 4.", "exact match"] {
        assert!(
            transcript.contains(text),
            "{text:?} not in the transcript: {transcript}"
        );
    }
    // The viewer read the log by byte ranges, and was answered with them;
    // nothing it asked for was missing but the optional files it probes.
    let ranges = shown
        .served
        .iter()
        .filter(|s| s.path.ends_with(".eval") && s.range.is_some())
        .count();
    assert!(
        ranges > 0 && shown.ranges_answered() >= ranges,
        "{:#?}",
        shown.served
    );
    let missing: Vec<&str> = shown
        .served
        .iter()
        .filter(|s| s.status != 200 && s.status != 206)
        .map(|s| s.path.as_str())
        .filter(|p| !["/logs/eval-set.json", "/logs/flow.yaml"].contains(p))
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
}

/// Sends one raw request and returns the reply's status line, headers
/// (lower-cased names) and body.
fn request(
    server: &StaticServer,
    method: &str,
    path: &str,
    range: Option<&str>,
) -> (String, String, Vec<u8>) {
    let url = server.url("");
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(host).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(range) = range {
        head.push_str(&format!("Range: {range}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut reply = Vec::new();
    // One request per test connection: the server keeps it open, so read
    // exactly what Content-Length says.
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        reply.extend_from_slice(&buf[..n]);
        if let Some(end) = reply.windows(4).position(|w| w == b"\r\n\r\n") {
            let headers = String::from_utf8_lossy(&reply[..end]).to_lowercase();
            let length: usize = headers
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            let want = if method == "HEAD" { 0 } else { length };
            if reply.len() >= end + 4 + want || n == 0 {
                let status = headers.lines().next().unwrap_or_default().to_string();
                return (status, headers, reply[end + 4..].to_vec());
            }
        }
        assert!(n > 0, "connection closed mid-reply");
    }
}

#[test]
fn the_bundle_server_answers_byte_ranges() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.eval"), b"0123456789").unwrap();
    std::fs::write(dir.path().join("index.html"), b"<p>hi</p>").unwrap();
    let server = StaticServer::start(dir.path());
    let (status, headers, body) = request(&server, "HEAD", "/a.eval", None);
    assert!(status.contains(" 200 "), "{status}");
    assert!(headers.contains("accept-ranges: bytes") && headers.contains("content-length: 10"));
    assert!(body.is_empty());
    let cases = [
        ("bytes=0-0", "0", "bytes 0-0/10"),
        ("bytes=2-4", "234", "bytes 2-4/10"),
        ("bytes=7-", "789", "bytes 7-9/10"),
        ("bytes=-3", "789", "bytes 7-9/10"),
        ("bytes=8-99", "89", "bytes 8-9/10"),
    ];
    for (range, want, content_range) in cases {
        let (status, headers, body) = request(&server, "GET", "/a.eval", Some(range));
        assert!(status.contains(" 206 "), "{range}: {status}");
        assert!(
            headers.contains(&format!("content-range: {content_range}")),
            "{headers}"
        );
        assert_eq!(body, want.as_bytes(), "{range}");
    }
    let (status, headers, _) = request(&server, "GET", "/a.eval", Some("bytes=10-12"));
    assert!(status.contains(" 416 ") && headers.contains("content-range: bytes */10"));
    let (status, _, body) = request(&server, "GET", "/a.eval", Some("bytes=0-1,4-5"));
    assert!(
        status.contains(" 200 ") && body == b"0123456789",
        "several ranges: all"
    );
    let (status, headers, body) = request(&server, "GET", "/?x=1", None);
    assert!(status.contains(" 200 ") && headers.contains("text/html") && body == b"<p>hi</p>");
    for outside in ["/../etc/passwd", "/%2e%2e/etc/passwd", "/missing"] {
        let (status, _, _) = request(&server, "GET", outside, None);
        assert!(status.contains(" 404 "), "{outside}: {status}");
    }
    let served = server.served();
    assert_eq!(
        served.iter().filter(|s| s.status == 206).count(),
        cases.len()
    );
}

#[test]
fn the_eee_validator_accepts_a_valid_record_pair_and_names_each_error() {
    announce_versions();
    let dir = tempfile::tempdir().unwrap();
    let valid = dir.path().join("valid");
    let mut cmd = venv_command(&eee_venv(), "python", dir.path());
    cmd.arg(EEE_FIXTURE).arg(&valid);
    run_clean(cmd, "writing the EEE fixture records");
    assert_eq!(validate_eee(&valid), Vec::<String>::new());

    // The same pair, broken in ways the schemas and the package catch.
    let invalid = dir.path().join("invalid");
    std::fs::create_dir(&invalid).unwrap();
    for entry in std::fs::read_dir(&valid).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".jsonl") {
            let mut record: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            record["evaluation"]
                .as_object_mut()
                .unwrap()
                .remove("is_correct");
            record["evaluation_id"] = json!("no/such/evaluation");
            let lines = format!("{record}\n{{\"schema_version\": NaN}}\n");
            std::fs::write(invalid.join(name), lines).unwrap();
        } else {
            let mut record: Value = serde_json::from_str(&text).unwrap();
            let details = record["model_info"]["additional_details"]
                .as_object_mut()
                .unwrap();
            details.remove("deployment_type");
            record["source_metadata"]["source_type"] = json!("leaderboard");
            std::fs::write(invalid.join(name), record.to_string()).unwrap();
        }
    }
    // Each error once, with its file, line (JSONL), JSON path and checker.
    let (agg, lines) = (
        format!("{EEE_NAME}.json"),
        format!("{EEE_NAME}_samples.jsonl"),
    );
    let expected = [
        format!("{agg}: $.model_info.additional_details: 'deployment_type' is a required property [jsonschema]"),
        format!("{agg}: $.source_metadata.source_type: 'leaderboard' is not one of ['documentation', 'evaluation_run'] [jsonschema]"),
        format!("{agg}: source_metadata -> source_type: Input should be 'documentation' or 'evaluation_run' [every_eval_ever]"),
        format!("{lines}:1: $.evaluation: 'is_correct' is a required property [jsonschema]"),
        format!("{lines}:2: $: not strict JSON: non-finite JSON number 'NaN' is not allowed [json]"),
        format!("{lines}: line 1 -> evaluation -> is_correct: Field required [every_eval_ever]"),
        format!("{lines}: line 2: non-finite JSON number 'NaN' is not allowed [every_eval_ever]"),
        format!("{lines}:1: $.evaluation_id: 'no/such/evaluation' is no aggregate record's evaluation_id [cross-file]"),
    ];
    assert_eq!(validate_eee(&invalid), expected);

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(
        validate_eee(&empty),
        [".: $: no *.json or *.jsonl records [files]"]
    );
}
