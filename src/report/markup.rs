//! Escaping text for the markup the reports write: HTML pages and JUnit
//! XML. One table; the two flavours differ only in the apostrophe and in
//! the characters XML cannot carry.

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

#[cfg(test)]
mod tests {
    use super::*;

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
