//! The one redactor: the configured secrets (the model endpoint's API key,
//! a gateway's token) removed from everything retrace writes. It is applied
//! at the sinks, not by the code that makes the text: the journal's lines,
//! every file written whole (`run.json`, the reports, plots, JUnit), the
//! kernels' artifacts and the log lines on stderr all pass through it, so
//! an endpoint that echoes the key (in an error body, a reply, a header)
//! cannot put it into a run directory or a terminal.
//!
//! Secrets are registered where they are read ([`register`]); each is
//! replaced by [`REPLACEMENT`] in every form [`encodings`] lists. JSON is
//! redacted inside its string values, so a line stays valid JSON.

mod encodings;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, RwLock};

pub use encodings::MIN_FRAGMENT_CHARS;

/// What a secret is replaced with.
pub const REPLACEMENT: &str = "[redacted]";

/// The fewest characters a secret must have to be redacted: a shorter
/// value cannot be told from ordinary text (and protects nothing).
pub const MIN_SECRET_CHARS: usize = 4;

/// Values that stand for "no key" by convention (local servers accept
/// anything), compared without case: removing them would mangle ordinary
/// words in records (`none` is a feedback mode) and protect nothing.
pub const PLACEHOLDERS: [&str; 11] = [
    "none",
    "null",
    "empty",
    "dummy",
    "test",
    "key",
    "no-key",
    "nokey",
    "not-needed",
    "sk-no-key-required",
    "sk-xxx",
];

/// Words that make a variable's *name* say its value is a secret
/// (`OPENAI_API_KEY`, `HF_TOKEN`, `DB_PASSWORD`), matched without case
/// anywhere in the name: such values are registered and never written in
/// clear (a kernel's `--env`).
pub const SECRET_NAME_WORDS: [&str; 10] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// Whether a variable named `name` holds a secret by its name
/// ([`SECRET_NAME_WORDS`]).
pub fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    SECRET_NAME_WORDS.iter().any(|w| name.contains(w))
}

/// The regex engine's limits for the secrets' pattern: far above what
/// keys of a few hundred characters need.
const REGEX_SIZE: usize = 64 << 20;
const REGEX_NEST: u32 = 4096;

/// A set of secrets and the pattern of all their forms.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    text: Option<regex::Regex>,
    bytes: Option<regex::bytes::Regex>,
}

impl Redactor {
    /// A redactor of `secrets`; values that are no secret (see
    /// [`Redactor::is_secret`]) are left out.
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Redactor {
        let mut r = Redactor::default();
        for s in secrets {
            r.add(s.as_ref());
        }
        r
    }

    /// Whether `value` is redacted when registered: at least
    /// [`MIN_SECRET_CHARS`] characters (surrounding blanks aside) and not
    /// one of the [`PLACEHOLDERS`].
    pub fn is_secret(value: &str) -> bool {
        let value = value.trim();
        value.chars().count() >= MIN_SECRET_CHARS
            && !PLACEHOLDERS.iter().any(|p| p.eq_ignore_ascii_case(value))
    }

    /// Adds `secret`; returns whether it was new (and a secret).
    fn add(&mut self, secret: &str) -> bool {
        let secret = secret.trim();
        if !Self::is_secret(secret) || self.secrets.iter().any(|s| s == secret) {
            return false;
        }
        self.secrets.push(secret.to_string());
        // Longest first: a secret that contains another is removed whole.
        self.secrets
            .sort_by_key(|s| std::cmp::Reverse(s.chars().count()));
        // Fragments nest one group per character: a secret too long for
        // the regex engine's limits is still recognised whole.
        for fragments in [true, false] {
            let pattern = self
                .secrets
                .iter()
                .map(|s| encodings::pattern(s, fragments))
                .collect::<Vec<_>>()
                .join("|");
            let text = regex::RegexBuilder::new(&pattern)
                .size_limit(REGEX_SIZE)
                .nest_limit(REGEX_NEST)
                .build();
            let bytes = regex::bytes::RegexBuilder::new(&pattern)
                .size_limit(REGEX_SIZE)
                .nest_limit(REGEX_NEST)
                .build();
            if let (Ok(text), Ok(bytes)) = (text, bytes) {
                (self.text, self.bytes) = (Some(text), Some(bytes));
                return true;
            }
        }
        unreachable!("a secret's whole forms always compile")
    }

    /// Whether there is anything to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every form of every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.text {
            Some(re) => re.replace_all(text, REPLACEMENT),
            None => Cow::Borrowed(text),
        }
    }

    /// `json` (JSON text) with the secrets replaced inside its strings
    /// (keys and values), each re-encoded: the result is JSON whenever
    /// `json` was. Numbers and literals are left alone.
    pub fn json<'a>(&self, json: &'a str) -> Cow<'a, str> {
        let Some(re) = &self.text else {
            return Cow::Borrowed(json);
        };
        // Escapes are among the forms matched: what holds no form in its
        // raw text holds none in its strings either.
        if !re.is_match(json) {
            return Cow::Borrowed(json);
        }
        let mut out = String::with_capacity(json.len());
        let mut copied = 0;
        for (start, end) in string_literals(json) {
            let literal = &json[start..end];
            if !re.is_match(literal) {
                continue;
            }
            let redacted = match serde_json::from_str::<String>(literal) {
                Ok(value) => match self.text(&value) {
                    Cow::Owned(r) => serde_json::to_string(&r).unwrap_or_default(),
                    Cow::Borrowed(_) => continue,
                },
                // Not JSON after all (a torn line): leak nothing anyway.
                Err(_) => self.text(literal).into_owned(),
            };
            out.push_str(&json[copied..start]);
            out.push_str(&redacted);
            copied = end;
        }
        if copied == 0 {
            return Cow::Borrowed(json);
        }
        out.push_str(&json[copied..]);
        Cow::Owned(out)
    }

    /// `bytes` of a file that is not text (a PNG's metadata): each form
    /// found is overwritten in place by as many `*`, so the file keeps its
    /// layout (offsets and lengths stay right; a checksum over the bytes
    /// does not).
    pub fn binary<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let Some(re) = &self.bytes else {
            return Cow::Borrowed(bytes);
        };
        let mut found = re.find_iter(bytes).map(|m| m.range()).peekable();
        if found.peek().is_none() {
            return Cow::Borrowed(bytes);
        }
        let mut out = bytes.to_vec();
        for range in found {
            out[range].fill(b'*');
        }
        Cow::Owned(out)
    }

    /// The contents of a file named `path`, redacted by its kind: JSON and
    /// JSON Lines inside their strings, other UTF-8 as text, the rest as
    /// binary.
    pub fn file<'a>(&self, path: &Path, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        if self.is_empty() {
            return Cow::Borrowed(bytes);
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return self.binary(bytes);
        };
        let json = path
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl");
        let redacted = if json {
            self.json(text)
        } else {
            self.text(text)
        };
        match redacted {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }
    }
}

/// The byte ranges of the string literals (quotes included) of JSON text.
fn string_literals(json: &str) -> Vec<(usize, usize)> {
    let bytes = json.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < bytes.len() && bytes[i] != b'"' {
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        let end = (i + 1).min(bytes.len());
        out.push((start, end));
        i = end;
    }
    out
}

static GLOBAL: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Adds a configured secret to the process's redactor (a value that is no
/// secret, see [`Redactor::is_secret`], is ignored). Called where a
/// secret is read: the endpoint's key, a gateway's token.
pub fn register(secret: &str) {
    if !Redactor::is_secret(secret) {
        return;
    }
    let mut global = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    let mut next = global.as_deref().cloned().unwrap_or_default();
    if next.add(secret) {
        *global = Some(Arc::new(next));
    }
}

/// The process's redactor as it is now.
pub fn current() -> Arc<Redactor> {
    GLOBAL
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default()
}

/// [`Redactor::text`] with the registered secrets.
pub fn text(text: &str) -> Cow<'_, str> {
    match current().text(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// [`Redactor::json`] with the registered secrets, on an owned string.
pub fn json(json: String) -> String {
    let redacted = match current().json(&json) {
        Cow::Owned(s) => s,
        Cow::Borrowed(_) => return json,
    };
    redacted
}

/// [`Redactor::file`] with the registered secrets.
pub fn file<'a>(path: &Path, bytes: &'a [u8]) -> Cow<'a, [u8]> {
    match current().file(path, bytes) {
        Cow::Borrowed(_) => Cow::Borrowed(bytes),
        Cow::Owned(b) => Cow::Owned(b),
    }
}

/// A writer that redacts each buffer before passing it on whole: for log
/// lines, which a `tracing` subscriber writes one event per call.
#[derive(Debug)]
pub struct Writer<W: Write>(pub W);

impl<W: Write> Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let redactor = current();
        let redacted = match std::str::from_utf8(buf) {
            Ok(text) => match redactor.text(text) {
                Cow::Borrowed(_) => Cow::Borrowed(buf),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
            Err(_) => redactor.binary(buf),
        };
        self.0.write_all(&redacted)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
