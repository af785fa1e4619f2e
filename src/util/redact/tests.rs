use std::borrow::Cow;
use std::path::Path;

use base64::Engine;

use super::*;

const KEY: &str = "sk-proj-Zq8/Vx+w_9Lm\"T3kBf&Pd<01>Yh";

fn redactor() -> Redactor {
    Redactor::new([KEY])
}

fn assert_clean(text: &str, secret: &str) {
    assert!(!text.contains(secret), "{secret} left in {text}");
}

#[test]
fn the_key_goes_in_every_common_form() {
    let r = redactor();
    let b64 = base64::engine::general_purpose::STANDARD;
    let url = base64::engine::general_purpose::URL_SAFE;
    let percent = |lower: bool| -> String {
        KEY.bytes()
            .map(|b| match b {
                b if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) => (b as char).to_string(),
                b if lower => format!("%{b:02x}"),
                b => format!("%{b:02X}"),
            })
            .collect()
    };
    let json = serde_json::to_string(KEY).unwrap();
    let html = KEY
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('/', "&#x2F;");
    let markdown: String = KEY
        .chars()
        .flat_map(|c| {
            if c.is_ascii_punctuation() {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect();
    let nested = serde_json::to_string(&json).unwrap();
    let forms = [
        KEY.to_string(),
        format!("Authorization: Bearer {KEY}"),
        percent(false),
        percent(true),
        json.clone(),
        json.replace('/', "\\/"),
        nested,
        html,
        markdown,
        KEY.replace('"', "\"\""),
        KEY.replace('_', "&#95;").replace('-', "%2d"),
        format!("Basic {}", b64.encode(format!("user:{KEY}"))),
        format!("x{}y", b64.encode(KEY)),
        format!("x{}y", url.encode(format!("ab{KEY}"))),
    ];
    for form in forms {
        let text = format!("error: invalid key <<{form}>> given");
        let out = r.text(&text);
        assert!(out.contains(REPLACEMENT), "{form}: {out}");
        assert_clean(&out, KEY);
        assert_clean(&out, &form);
        assert!(out.starts_with("error: invalid key <<"), "{out}");
        assert!(out.ends_with(">> given"), "{out}");
    }
}

#[test]
fn fragments_a_cut_keeps_go_too() {
    let r = Redactor::new(["0123456789abcdefghijklmnopqrstuv"]); // 32 chars
                                                                 // A cut after 20 characters at the end of a text, and one before the
                                                                 // last 20 at its start: both keep more than half of the key.
    let head = "error: 0123456789abcdefghij…";
    let tail = "…efghijklmnopqrstuv was refused";
    assert_eq!(r.text(head), format!("error: {REPLACEMENT}…"));
    assert_eq!(r.text(tail), format!("…{REPLACEMENT} was refused"));
    // Fewer characters than half the key are ordinary text.
    assert_eq!(r.text("0123456789"), "0123456789");
}

#[test]
fn short_keys_are_redacted_whole_and_placeholders_are_not_secrets() {
    let r = Redactor::new(["k3Y9", "none", "x", "EMPTY", " sk-no-key-required "]);
    assert_eq!(
        r.text("key k3Y9, Bearer k3Y9."),
        format!("key {REPLACEMENT}, Bearer {REPLACEMENT}.")
    );
    // No fragments of a short key: only the whole of it.
    assert_eq!(r.text("k3Y and 3Y9"), "k3Y and 3Y9");
    assert_eq!(r.text("feedback none, x, EMPTY"), "feedback none, x, EMPTY");
    assert!(!Redactor::is_secret("abc"));
    assert!(!Redactor::is_secret("None"));
    assert!(Redactor::is_secret("abcd"));
    assert!(Redactor::new(["", "  "]).is_empty());
}

#[test]
fn json_stays_json_and_only_its_strings_change() {
    let r = Redactor::new(["nabc123\"x", "12345678"]);
    let value = serde_json::json!({
        "note": "line one\nabc123\"x echoed: nabc123\"x",
        "nested": format!("{{\"error\":{}}}", serde_json::to_string("bad nabc123\"x").unwrap()),
        "count": 12345678,
        "nabc123\"x": true,
        "plain": "nothing here",
    });
    for text in [
        serde_json::to_string(&value).unwrap(),
        serde_json::to_string_pretty(&value).unwrap(),
    ] {
        let out = r.json(&text);
        let back: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(back["count"], 12345678, "numbers are left alone");
        assert_eq!(back["plain"], "nothing here");
        // `\n` followed by the key's tail is no form of the key: the
        // newline survives (the tail, a fragment of 8 characters, goes).
        assert_eq!(
            back["note"],
            format!("line one\n{REPLACEMENT} echoed: {REPLACEMENT}")
        );
        assert!(!back["nested"].as_str().unwrap().contains("nabc123"));
        assert!(back.get(REPLACEMENT).is_some(), "{back}");
        assert!(!out.contains("nabc123"), "{out}");
    }
    let clean = "{\"a\":\"b\"}";
    assert!(matches!(r.json(clean), Cow::Borrowed(_)));
}

#[test]
fn files_are_redacted_by_kind() {
    let r = Redactor::new(["s3cr3t-token-value"]);
    let line = serde_json::json!({"reply": "s3cr3t-token-value"}).to_string();
    let out = r.file(Path::new("results.jsonl"), line.as_bytes());
    let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(back["reply"], REPLACEMENT);

    let html = "<td>s3cr3t-token-value</td>";
    let out = r.file(Path::new("report.html"), html.as_bytes());
    assert_eq!(&*out, format!("<td>{REPLACEMENT}</td>").as_bytes());

    // Not UTF-8 (a PNG's text chunk): overwritten in place, same length.
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x1ctEXtComment\0".to_vec();
    png.extend_from_slice(b"s3cr3t-token-value\xff\xfe");
    let out = r.file(Path::new("a.png"), &png);
    assert_eq!(out.len(), png.len());
    assert!(!out.windows(6).any(|w| w == b"s3cr3t"));
    assert!(out.starts_with(b"\x89PNG"));

    let clean = b"nothing";
    assert!(matches!(r.file(Path::new("x.md"), clean), Cow::Borrowed(_)));
    assert!(matches!(
        Redactor::default().file(Path::new("x.md"), html.as_bytes()),
        Cow::Borrowed(_)
    ));
}

#[test]
fn a_secret_inside_another_goes_whole() {
    let r = Redactor::new(["abcd1234", "xxabcd1234yy-longer"]);
    assert_eq!(
        r.text("k=xxabcd1234yy-longer; j=abcd1234"),
        format!("k={REPLACEMENT}; j={REPLACEMENT}")
    );
}

#[test]
fn long_keys_compile_and_match() {
    let key: String = (0..400)
        .map(|i| ["a", "/", "Z", "+", "9", "_", "%"][i % 7])
        .collect();
    let r = Redactor::new([&key]);
    assert!(!r.is_empty());
    assert_eq!(r.text(&format!("<{key}>")), format!("<{REPLACEMENT}>"));
    // Its fragments too.
    assert_eq!(
        r.text(&format!("<{}", &key[..300])),
        format!("<{REPLACEMENT}")
    );
}

#[test]
fn the_log_writer_redacts_each_line() {
    let r = Redactor::new(["k-EY-12345678"]);
    // The writer uses the process's redactor; check the same path with a
    // local one through `text`, and that the writer passes text through.
    assert_eq!(
        r.text("WARN retry: k-EY-12345678\n"),
        format!("WARN retry: {REPLACEMENT}\n")
    );
    let mut out = Vec::new();
    let mut w = Writer(&mut out);
    w.write_all(b"plain line\n").unwrap();
    assert_eq!(out, b"plain line\n");
}

#[test]
fn registered_secrets_reach_every_sink_function() {
    // A secret no other test uses, so the process-wide registry can be
    // shared with them.
    let secret = "reg-7f3a9c1e55d04b2a";
    register(secret);
    register("none");
    assert!(!current().text("none").contains(REPLACEMENT));
    let line = format!("{{\"m\":\"{secret}\"}}");
    assert_eq!(json(line), format!("{{\"m\":\"{REPLACEMENT}\"}}"));
    assert_eq!(text(secret), REPLACEMENT);
    let mut out = Vec::new();
    Writer(&mut out)
        .write_all(format!("WARN {secret}\n").as_bytes())
        .unwrap();
    assert_eq!(out, format!("WARN {REPLACEMENT}\n").as_bytes());
    assert_eq!(
        &*file(Path::new("r.md"), secret.as_bytes()),
        REPLACEMENT.as_bytes()
    );
}

#[test]
fn names_that_say_secret_are_secret_names() {
    for name in [
        "OPENAI_API_KEY",
        "hf_token",
        "DB_Password",
        "AWS_SECRET_ACCESS_KEY",
        "GIT_CREDENTIALS",
    ] {
        assert!(secret_name(name), "{name}");
    }
    for name in ["TZ", "MY_SETTING", "DATA_DIR", "SEED"] {
        assert!(!secret_name(name), "{name}");
    }
}
