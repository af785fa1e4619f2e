//! A round's code as the repair metrics compare it: the one normalisation
//! behind resent code and oscillation, so that both count the same
//! "same program".
//!
//! `#` comments outside strings are dropped, runs of whitespace inside a
//! line (outside strings) become one space, line ends are trimmed and blank
//! lines dropped. A line's leading indentation is kept as written: Python
//! reads it, and collapsing it could make two different programs equal.
//! String literals (any quote, triple-quoted ones across lines) are kept
//! verbatim.

/// The same program once comments, whitespace runs and blank lines are
/// set aside (a model that resends its code often re-wraps it that way).
pub(crate) fn same_code(a: &str, b: &str) -> bool {
    normalise(a) == normalise(b)
}

/// The code with comments, whitespace runs, line-end whitespace and blank
/// lines removed, one line per logical line of text.
pub(crate) fn normalise(code: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    // The open string: its quote character and whether it is triple.
    let mut open: Option<(char, bool)> = None;
    let mut at_line_start = true;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some((q, triple)) = open {
            line.push(c);
            if c == '\\' {
                if let Some(next) = chars.next() {
                    line.push(next);
                }
            } else if c == q && (!triple || closes_triple(&mut chars, q, &mut line)) {
                open = None;
            } else if c == '\n' && !triple {
                // An unterminated one-line string ends with its line.
                open = None;
                line.pop();
                end_line(&mut lines, &mut line);
                at_line_start = true;
            }
            continue;
        }
        match c {
            '\n' => {
                end_line(&mut lines, &mut line);
                at_line_start = true;
            }
            '#' => {
                // Skip to the line end, which the loop then sees.
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            c if c.is_whitespace() => {
                if at_line_start {
                    line.push(c);
                } else {
                    while chars
                        .peek()
                        .is_some_and(|&n| n != '\n' && n.is_whitespace())
                    {
                        chars.next();
                    }
                    line.push(' ');
                }
            }
            '\'' | '"' => {
                at_line_start = false;
                line.push(c);
                let triple = chars.peek() == Some(&c) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek() == Some(&c)
                };
                if triple {
                    line.push(chars.next().expect("peeked"));
                    line.push(chars.next().expect("peeked"));
                }
                open = Some((c, triple));
            }
            c => {
                at_line_start = false;
                line.push(c);
            }
        }
    }
    end_line(&mut lines, &mut line);
    lines.join("\n")
}

/// After a quote inside a triple-quoted string: whether the next two
/// characters close it (consumed and kept when they do).
fn closes_triple(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    q: char,
    line: &mut String,
) -> bool {
    let mut ahead = chars.clone();
    if ahead.next() == Some(q) && ahead.next() == Some(q) {
        line.push(chars.next().expect("peeked"));
        line.push(chars.next().expect("peeked"));
        return true;
    }
    false
}

fn end_line(lines: &mut Vec<String>, line: &mut String) {
    let text = line.trim_end();
    if !text.trim_start().is_empty() {
        lines.push(text.to_owned());
    }
    line.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_whitespace_runs_and_blank_lines_are_set_aside() {
        let a = "x = 1  # the start\n\n\ny  =   x + 1\n# a note\nanswer = y   \n";
        let b = "x = 1\ny = x + 1\nanswer = y";
        assert_eq!(normalise(a), b);
        assert!(same_code(a, b));
        // Blank lines and line ends, as resent code always ignored them.
        assert!(same_code("a\n\n b", "a\n b  \n"));
    }

    #[test]
    fn indentation_is_kept_so_different_blocks_stay_different() {
        assert!(!same_code("a\n b", "a\nb"));
        let nested = "if a:\n    if b:\n        x\n    y\n";
        let inner = "if a:\n    if b:\n        x\n        y\n";
        assert!(!same_code(nested, inner));
    }

    #[test]
    fn strings_are_kept_verbatim_with_their_hashes_and_spaces() {
        assert!(!same_code("s = 'a  # b'", "s = 'a'"));
        assert_eq!(normalise("s = 'a  # b'  # c"), "s = 'a  # b'");
        assert_eq!(normalise(r#"s = "it\"s # x"  # c"#), r#"s = "it\"s # x""#);
        let doc = "s = \"\"\"one  # not a comment\n\ntwo\"\"\"  # a comment\nx = 1";
        assert_eq!(
            normalise(doc),
            "s = \"\"\"one  # not a comment\n\ntwo\"\"\"\nx = 1"
        );
        assert!(!same_code("s = '''a\n\nb'''", "s = '''a\nb'''"));
    }
}
