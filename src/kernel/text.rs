//! The one decoder of JSON text a kernel sends: its messages (over ZMQ or
//! a gateway's websocket) and the envelopes of retrace's reader in the
//! kernel. Text that is not valid Unicode is kept visible, never dropped:
//! a byte sequence that is not UTF-8 and a `\uXXXX` escape of a lone UTF-16
//! surrogate (which a JSON parser refuses, and Python's `json` writes for a
//! `str` holding one) each become U+FFFD, and are counted. Without this a
//! printed line holding `'\ud800'` lost its whole message, and the
//! last-stdout-line rule read an earlier line as the answer.

use std::borrow::Cow;

/// The replacement character, as a JSON escape (the length of any `\uXXXX`).
const REPLACEMENT_ESCAPE: &str = "\\ufffd";

/// JSON text ready for a parser, and how many invalid sequences in it were
/// replaced by U+FFFD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub json: Cow<'a, str>,
    pub replaced: u64,
}

/// Decodes `bytes` as JSON text: invalid UTF-8 (each maximal invalid
/// subpart, as [`String::from_utf8_lossy`]) and lone surrogate escapes
/// become U+FFFD. Valid text comes back borrowed and unchanged.
pub fn decode_json(bytes: &[u8]) -> Decoded<'_> {
    let (text, invalid) = lossy_utf8(bytes);
    let (json, lone) = replace_lone_surrogates(text);
    Decoded {
        json,
        replaced: invalid + lone,
    }
}

/// [`decode_json`] of text that is already UTF-8 (a websocket text frame,
/// a string a message carried): only its escapes can be invalid.
pub fn decode_json_str(text: &str) -> Decoded<'_> {
    let (json, replaced) = replace_lone_surrogates(Cow::Borrowed(text));
    Decoded { json, replaced }
}

/// `bytes` as UTF-8 with each invalid subpart replaced, and their count.
fn lossy_utf8(bytes: &[u8]) -> (Cow<'_, str>, u64) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return (Cow::Borrowed(text), 0);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut replaced = 0;
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            out.push(char::REPLACEMENT_CHARACTER);
            replaced += 1;
        }
    }
    (Cow::Owned(out), replaced)
}

/// The UTF-16 code unit of the `\uXXXX` escape whose backslash is at `at`.
fn escaped_unit(b: &[u8], at: usize) -> Option<u16> {
    if b.get(at) != Some(&b'\\') || b.get(at + 1) != Some(&b'u') {
        return None;
    }
    let hex = b.get(at + 2..at + 6)?;
    if !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    // Four ASCII hex digits: always a u16.
    u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

fn is_high(unit: u16) -> bool {
    (0xD800..0xDC00).contains(&unit)
}

fn is_low(unit: u16) -> bool {
    (0xDC00..0xE000).contains(&unit)
}

/// `text` with every `\uXXXX` escape of a surrogate that is not half of a
/// high-low pair written as `\ufffd`, and their count. A backslash always
/// starts an escape in JSON, so an escaped backslash (`\\ud800`, the text
/// `\ud800`) is skipped whole and never read as one. Only ASCII is
/// replaced by ASCII of the same length: the text stays UTF-8.
fn replace_lone_surrogates(text: Cow<'_, str>) -> (Cow<'_, str>, u64) {
    let b = text.as_bytes();
    let mut lone = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escaped_unit(b, i) else {
            // `\"`, `\\`, `\n`…: the escaped character is not a backslash.
            i += 2;
            continue;
        };
        if is_high(unit) && escaped_unit(b, i + 6).is_some_and(is_low) {
            i += 12;
            continue;
        }
        if is_high(unit) || is_low(unit) {
            lone.push(i);
        }
        i += 6;
    }
    if lone.is_empty() {
        return (text, 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for &at in &lone {
        out.push_str(&text[from..at]);
        out.push_str(REPLACEMENT_ESCAPE);
        from = at + REPLACEMENT_ESCAPE.len();
    }
    out.push_str(&text[from..]);
    (Cow::Owned(out), lone.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (JSON bytes, the string it parses to after decoding, replaced).
    #[test]
    fn invalid_text_becomes_counted_replacement_characters() {
        let cases: &[(&[u8], &str, u64)] = &[
            (br#""ok""#, "ok", 0),
            (br#""ok\ud800""#, "ok\u{FFFD}", 1),
            (br#""x\udcff""#, "x\u{FFFD}", 1),
            (br#""\uD800\uDC00""#, "\u{10000}", 0),
            (br#""\ud83d\ude00!""#, "\u{1F600}!", 0),
            // A low half before a high one is two lone halves.
            (br#""\udc00\ud800""#, "\u{FFFD}\u{FFFD}", 2),
            // A high half followed by a non-surrogate escape.
            (br#""\ud800\u0041""#, "\u{FFFD}A", 1),
            (br#""\ud800""#, "\u{FFFD}", 1),
            // An escaped backslash before `u` is the text `\ud800`.
            (br#""\\ud800""#, "\\ud800", 0),
            (br#""\\\ud800""#, "\\\u{FFFD}", 1),
            (br#""\\\\ud800""#, "\\\\ud800", 0),
            // Raw bytes that are not UTF-8: one replacement per invalid subpart.
            (b"\"42\xff\"", "42\u{FFFD}", 1),
            (b"\"a\xed\xa0\x80b\"", "a\u{FFFD}\u{FFFD}\u{FFFD}b", 3),
            (b"\"\xc3\"", "\u{FFFD}", 1),
            // Both kinds in one message.
            (b"\"\xff\\udfff\"", "\u{FFFD}\u{FFFD}", 2),
            // Not an escape of four hex digits: left to the parser.
            (br#""\u12""#, "", 0),
        ];
        for &(bytes, parsed, replaced) in cases {
            let decoded = decode_json(bytes);
            assert_eq!(
                decoded.replaced,
                replaced,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
            let value: Result<String, _> = serde_json::from_str(&decoded.json);
            match value {
                Ok(v) => assert_eq!(v, parsed, "{:?}", String::from_utf8_lossy(bytes)),
                Err(_) => assert_eq!(parsed, "", "{:?} did not parse", decoded.json),
            }
        }
    }

    #[test]
    fn valid_text_is_borrowed_unchanged() {
        let text = r#"{"name":"stdout","text":"é \\ud800 \ud83d\ude00\n"}"#;
        let decoded = decode_json(text.as_bytes());
        assert!(matches!(decoded.json, Cow::Borrowed(_)));
        assert_eq!(decoded.json, text);
        assert_eq!(decoded.replaced, 0);
        assert!(matches!(decode_json_str(text).json, Cow::Borrowed(_)));
    }

    #[test]
    fn a_message_a_parser_refused_parses_after_decoding() {
        let content = br#"{"name":"stdout","text":"42\n","more":"ok\ud800\n"}"#;
        assert!(serde_json::from_slice::<serde_json::Value>(content).is_err());
        let decoded = decode_json(content);
        let v: serde_json::Value = serde_json::from_str(&decoded.json).unwrap();
        assert_eq!(v["more"], "ok\u{FFFD}\n");
        assert_eq!(v["text"], "42\n");
        assert_eq!(decoded.replaced, 1);
    }

    #[test]
    fn an_escape_cut_at_the_end_is_left_to_the_parser() {
        for text in ["\"\\ud80", "\"\\", "\"\\ud800\\", "\"\\ud800\\udc"] {
            let decoded = decode_json_str(text);
            assert!(decoded.json.len() == text.len(), "{text}");
        }
    }
}
