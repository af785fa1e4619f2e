//! Text shown on a terminal that came from outside the command line (task
//! ids and questions from a dataset, model replies, what a kernel printed,
//! error messages that quote them): every character a terminal would act on
//! is written as a visible escape, so such text can neither move the cursor,
//! rewrite earlier lines, set the window title, ring the bell nor reorder
//! what follows it. The records keep the text as it was.
//!
//! Shown as escapes: the C0 controls (ESC, BEL, CR, backspace, NUL, …), DEL,
//! the C1 controls (U+0080–U+009F, CSI among them) and Unicode's bidirectional
//! controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), as
//! `\x1b` (one byte's worth) or `\u{202e}`.

use std::borrow::Cow;
use std::io::{self, Write};

/// Unicode's `Bidi_Control` characters: they reorder the text after them.
fn bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` is shown as an escape; `keep` are the controls let through.
fn shown_escaped(c: char, keep: &[char]) -> bool {
    (c.is_control() || bidi_control(c)) && !keep.contains(&c)
}

fn escape<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !text.chars().any(|c| shown_escaped(c, keep)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !shown_escaped(c, keep) => out.push(c),
            c if (c as u32) <= 0xFF => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// Text of several lines (a traceback, what a cell printed, an error and
/// its causes): line breaks and tabs are kept, every other control shown.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, &['\n', '\t'])
}

/// Text that must stay on its line (a task id, a list row, a skipped
/// record): line breaks and tabs are shown too.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, &[])
}

/// A writer of diagnostics (the log layer's stderr) that shows every
/// control of what passes through it but line breaks and tabs, as
/// [`text`] does: the logger quotes values (an error, a task id) that may
/// carry them. Its output is then never coloured (colours are ESC
/// sequences). Each write is escaped on its own (the logger writes an
/// event at once); bytes that are not UTF-8 become U+FFFD.
pub struct Writer<W: Write> {
    inner: W,
}

impl<W: Write> Writer<W> {
    pub fn new(inner: W) -> Self {
        Writer { inner }
    }
}

impl<W: Write> Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.inner
            .write_all(escape(&text, &['\n', '\t']).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes() {
        let cases: &[(&str, &str, &str)] = &[
            // (input, as a line, as text)
            ("plain id", "plain id", "plain id"),
            ("a\u{1b}[2Jb", "a\\x1b[2Jb", "a\\x1b[2Jb"),
            (
                "\u{1b}]0;title\u{7}",
                "\\x1b]0;title\\x07",
                "\\x1b]0;title\\x07",
            ),
            ("done\rFAKE", "done\\x0dFAKE", "done\\x0dFAKE"),
            ("a\nb\tc", "a\\x0ab\\x09c", "a\nb\tc"),
            ("nul\0del\u{7f}", "nul\\x00del\\x7f", "nul\\x00del\\x7f"),
            ("csi\u{9b}31m", "csi\\x9b31m", "csi\\x9b31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed", "abc\\u{202e}fed"),
            (
                "\u{2066}x\u{2069}\u{200f}",
                "\\u{2066}x\\u{2069}\\u{200f}",
                "\\u{2066}x\\u{2069}\\u{200f}",
            ),
            ("ünïcødé ✓ 中文", "ünïcødé ✓ 中文", "ünïcødé ✓ 中文"),
        ];
        for (input, as_line, as_text) in cases {
            assert_eq!(line(input), *as_line, "{input:?}");
            assert_eq!(text(input), *as_text, "{input:?}");
            let shown = line(input);
            assert!(
                !shown.chars().any(|c| c.is_control() || bidi_control(c)),
                "{shown:?}"
            );
        }
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_log_writer_keeps_line_breaks_only() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.write_all("WARN task\u{1b}[2J\r\u{7}\u{202e}x\tend\n".as_bytes())
            .unwrap();
        w.write_all(b"bad \xff\r").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "WARN task\\x1b[2J\\x0d\\x07\\u{202e}x\tend\nbad \u{fffd}\\x0d"
        );
    }
}
