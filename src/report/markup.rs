//! Escaping text for the markup the reports write: Markdown (`report.md`,
//! `compare.md`), HTML pages and JUnit XML. Every string a writer did not
//! write itself (task ids, answers, exception names, arm and model names,
//! error messages, anything read from a dataset, a reply, a kernel or a
//! run's files) goes into a document through one of these, so it shows as
//! the text it is and never as markup. HTML and XML share one table and
//! differ only in the apostrophe and in the characters XML cannot carry.

use crate::util::terminal;

/// Which markup the text goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// HTML text or attribute value.
    Html,
    /// XML 1.0 attribute value or character data.
    Xml,
}

/// Text as HTML text or attribute value.
pub fn html(text: &str) -> String {
    escape(text, Flavor::Html)
}

/// Text for XML attribute values and character data. Characters XML 1.0
/// cannot carry at all (most C0 controls, lone surrogates cannot occur in
/// `str`, U+FFFE/U+FFFF) become U+FFFD, so hostile output can never make
/// the document unreadable.
pub fn xml(text: &str) -> String {
    escape(text, Flavor::Xml)
}

pub fn escape(text: &str, flavor: Flavor) -> String {
    let xml = flavor == Flavor::Xml;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' if xml => out.push_str("&apos;"),
            '\'' => out.push_str("&#39;"),
            // Kept in attributes as character references, so a newline in a
            // message survives attribute-value normalisation.
            '\n' if xml => out.push_str("&#10;"),
            '\r' if xml => out.push_str("&#13;"),
            '\t' if xml => out.push_str("&#9;"),
            c if xml && ((c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}') => {
                out.push('\u{FFFD}')
            }
            c => out.push(c),
        }
    }
    out
}

/// Text as Markdown inline text that renders as itself: no raw HTML
/// (`<`, `>`, `&` as entities, which also rules out autolinks), no code
/// span, emphasis, strikethrough, math or link (their characters
/// backslash-escaped where they could act), no line break (a space: the
/// text stays in its paragraph, list item or table row), no control
/// character (shown as `\x1b`, `\u{202e}`) and no block
/// marker at its start (`#`, `- `, `+ `, `1. `). `_` between two letters or
/// digits and `]` not followed by `(`, `[` or `:` cannot act and are kept,
/// so ordinary ids and bracketed intervals read as they are. In a table,
/// wrap it in [`md_cell`].
pub fn md_text(text: &str) -> String {
    let chars: Vec<char> = visible(text).chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let list_number = chars.iter().take_while(|c| c.is_ascii_digit()).count();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '_' if !(word(prev) && word(next)) => out.push_str("\\_"),
            ']' if matches!(next, Some('(' | '[' | ':')) => out.push_str("\\]"),
            '#' if i == 0 => out.push_str("\\#"),
            '-' | '+' if i == 0 && !next.is_some_and(|n| n.is_alphanumeric() || n == '.') => {
                out.push('\\');
                out.push(c);
            }
            '.' | ')' if list_number > 0 && i == list_number && !word(next) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text as a Markdown code span nothing in it can end or break: a fence
/// longer than any run of backticks inside, padded with a space when the
/// text starts or ends with a backtick (or with a space at both ends,
/// which a renderer would strip), line breaks as spaces (a line break
/// would let the text start a heading or a table row). In a table, wrap
/// it in [`md_cell`].
pub fn md_code(text: &str) -> String {
    let text = visible(text);
    if text.is_empty() {
        return "` `".into();
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let spaced = text.starts_with(' ') && text.ends_with(' ') && text.trim() != "";
    let pad = if text.starts_with('`') || text.ends_with('`') || spaced {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// Line breaks as spaces, every other control (ESC, BEL, NUL, C1, bidi
/// overrides) as a visible escape ([`terminal::text`]): a Markdown file is
/// also read with `cat`, and a viewer would hide them.
fn visible(text: &str) -> String {
    terminal::text(&text.replace(['\n', '\r'], " ")).into_owned()
}

/// Markdown already made safe ([`md_text`], [`md_code`] or the writer's
/// own) as one table cell: every `|` escaped (inside code spans too: a
/// table splits its row before it reads spans), line breaks as spaces.
pub fn md_cell(markdown: &str) -> String {
    markdown.replace(['\n', '\r'], " ").replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_text_shows_markup_as_text() {
        let cases: &[(&str, &str)] = &[
            ("math-precision-004", "math-precision-004"),
            ("syntax_error", "syntax_error"),
            ("BASE run [fat]", "BASE run [fat]"),
            (
                "Acc 50.0% [43.6, 97.0] (6 of 12)",
                "Acc 50.0% [43.6, 97.0] (6 of 12)",
            ),
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
            ),
            (
                "<img src=x onerror=alert(1)>",
                "&lt;img src=x onerror=alert(1)&gt;",
            ),
            ("a & b &lt;", "a &amp; b &amp;lt;"),
            ("<https://x.example>", "&lt;https://x.example&gt;"),
            ("`tick`", "\\`tick\\`"),
            ("a\nb\r\n# c", "a b  # c"),
            ("# title", "\\# title"),
            ("- item", "\\- item"),
            ("12. item", "12\\. item"),
            ("1) item", "1\\) item"),
            ("v1.2", "v1.2"),
            ("50.0% [18.8, 81.2]", "50.0% [18.8, 81.2]"),
            ("-5 and +0.5", "-5 and +0.5"),
            ("---", "\\---"),
            ("1.", "1\\."),
            ("[x](javascript:alert(1))", "[x\\](javascript:alert(1))"),
            (
                "![i](http://t.example/p.png)",
                "![i\\](http://t.example/p.png)",
            ),
            ("[r]: http://x", "[r\\]: http://x"),
            ("[a][b]", "[a\\][b]"),
            ("*b* _i_ ~~s~~ $m$", "\\*b\\* \\_i\\_ \\~\\~s\\~\\~ \\$m\\$"),
            ("a\\`b", "a\\\\\\`b"),
            ("a|b", "a|b"),
            (
                "esc\u{1b}[2J\u{7}\u{202e}",
                "esc\\\\x1b[2J\\\\x07\\\\u{202e}",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(md_text(input), *want, "{input:?}");
        }
    }

    #[test]
    fn markdown_code_spans_hold_any_text() {
        let cases: &[(&str, &str)] = &[
            ("fat", "`fat`"),
            ("a`b", "``a`b``"),
            ("`tick`", "`` `tick` ``"),
            ("``x", "``` ``x ```"),
            ("a\nb", "`a b`"),
            (" x ", "`  x  `"),
            ("  ", "`  `"),
            ("", "` `"),
            ("<img src=x>", "`<img src=x>`"),
            ("esc\u{1b}\u{7}", "`esc\\x1b\\x07`"),
        ];
        for (input, want) in cases {
            assert_eq!(md_code(input), *want, "{input:?}");
        }
    }

    #[test]
    fn markdown_cells_keep_their_row() {
        assert_eq!(md_cell("a|b"), "a\\|b");
        assert_eq!(md_cell(&md_code("a|b")), "`a\\|b`");
        assert_eq!(md_cell(&md_text("a\\|b\nc")), "a\\\\\\|b c");
        assert_eq!(md_cell("x\r\ny"), "x  y");
    }

    #[test]
    fn xml_escapes_markup_quotes_and_controls() {
        assert_eq!(
            xml("a<b>&\"c\"'d'"),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;"
        );
        assert_eq!(xml("x\ny\tz\r"), "x&#10;y&#9;z&#13;");
        assert_eq!(
            xml("bell\u{7}esc\u{1b}nul\0"),
            "bell\u{FFFD}esc\u{FFFD}nul\u{FFFD}"
        );
        assert_eq!(xml("ünïcødé ✓"), "ünïcødé ✓");
        assert_eq!(xml("]]>"), "]]&gt;");
    }

    #[test]
    fn html_escapes_markup_and_quotes_only() {
        assert_eq!(
            html("a<b>&\"c\"'d'"),
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"
        );
        assert_eq!(html("x\ny\tz\r\u{7}"), "x\ny\tz\r\u{7}");
    }
}
