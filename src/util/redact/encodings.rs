//! The forms a secret takes in what an endpoint echoes and what retrace
//! writes, as one regular expression: the secret as is and escaped by any
//! layer of JSON, Markdown, CSV, HTML or URL encoding (per character, so
//! mixed layers match too), the fragments a cut keeps of it, and its base64
//! at any alignment (inside `Basic` credentials or an encoded body).

use base64::Engine;

/// The fewest characters of a secret a fragment at a cut must keep to be
/// recognised: shorter pieces are too common to remove from ordinary text.
pub const MIN_FRAGMENT_CHARS: usize = 8;

/// The fewest base64 characters a base64 form must have to be removed: a
/// shorter one would turn up by chance inside embedded images.
const MIN_BASE64_CHARS: usize = 8;

/// The regular expression of `secret`'s forms (the secret is not empty);
/// with `fragments`, also the pieces a cut keeps of it.
pub(super) fn pattern(secret: &str, fragments: bool) -> String {
    let units: Vec<String> = secret.chars().map(unit).collect();
    let n = units.len();
    // A fragment keeps at least half of the secret and at least
    // MIN_FRAGMENT_CHARS; a short secret is only recognised whole.
    let keep = match fragments {
        true => MIN_FRAGMENT_CHARS.max(n.div_ceil(2)).min(n),
        false => n,
    };
    let mut forms = vec![prefixes(&units, keep)];
    if keep < n {
        forms.push(suffixes(&units, keep));
    }
    forms.extend(base64_forms(secret).iter().map(|b| regex::escape(b)));
    forms
        .iter()
        .map(|f| format!("(?:{f})"))
        .collect::<Vec<_>>()
        .join("|")
}

/// The secret or any prefix of it of at least `keep` characters (what a
/// cut at the end of a text leaves), longest first.
fn prefixes(units: &[String], keep: usize) -> String {
    let mut tail = String::new();
    for u in units[keep..].iter().rev() {
        tail = format!("(?:{u}{tail})?");
    }
    units[..keep].concat() + &tail
}

/// Any proper suffix of the secret of at least `keep` characters (what a
/// cut at the start of a text leaves), longest first.
fn suffixes(units: &[String], keep: usize) -> String {
    let n = units.len();
    let mut head = String::new();
    for u in &units[1..n - keep] {
        head = format!("(?:{head}{u})?");
    }
    head + &units[n - keep..].concat()
}

/// One character of a secret in every escaped form it may take.
fn unit(c: char) -> String {
    let plain = regex::escape(c.encode_utf8(&mut [0; 4]));
    if c.is_ascii_alphanumeric() {
        return plain;
    }
    let mut forms = vec![plain];
    let mut utf8 = [0; 4];
    forms.push(
        c.encode_utf8(&mut utf8)
            .bytes()
            .map(|b| format!("%(?i:{b:02x})"))
            .collect(),
    );
    forms.push(
        c.encode_utf16(&mut [0; 2])
            .iter()
            .map(|u| format!(r"\\u(?i:{u:04x})"))
            .collect(),
    );
    let code = c as u32;
    forms.push(format!("&#0*{code};"));
    forms.push(format!("&#[xX]0*(?i:{code:x});"));
    if let Some(name) = entity(c) {
        forms.push(format!("&{name};"));
    }
    match c {
        '"' => forms.push("\"\"".into()), // CSV doubles quotes
        ' ' => forms.push(r"\+".into()),  // form encoding
        _ => {}
    }
    if c.is_ascii_punctuation() {
        // JSON, Markdown and nested JSON put backslashes before punctuation.
        format!(r"\\*(?:{})", forms.join("|"))
    } else {
        format!("(?:{})", forms.join("|"))
    }
}

fn entity(c: char) -> Option<&'static str> {
    Some(match c {
        '&' => "amp",
        '<' => "lt",
        '>' => "gt",
        '"' => "quot",
        '\'' => "apos",
        _ => return None,
    })
}

/// The base64 characters that depend on the secret's bytes alone, at each
/// of the three alignments it may have inside a longer encoded text, in
/// the standard and the URL-safe alphabets.
fn base64_forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut forms = Vec::new();
    for skip in 0..3.min(bytes.len()) {
        let rest = &bytes[skip..];
        let whole = &rest[..rest.len() / 3 * 3];
        for engine in [
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            let form = engine.encode(whole);
            if form.len() >= MIN_BASE64_CHARS && !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    forms
}
