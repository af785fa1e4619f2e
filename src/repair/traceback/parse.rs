//! Parsing IPython's traceback.
//!
//! Input is IPython's NoColor traceback as the kernel sends it (one string
//! per entry, ANSI escapes removed): a verbose traceback (`Cell In[3], line 5`
//! / `File /path/x.py:4102, in f(a)` headers followed by numbered source
//! lines, `---->` marking the failing one), a SyntaxError block
//! (`  Cell In[1], line 2` / text / caret / `SyntaxError: msg`), the plain
//! variant IPython uses for a SyntaxError raised by `eval`/`exec` at run time,
//! and chains joined by "The above exception was the direct cause of the
//! following exception:" / "During handling of the above exception, another
//! exception occurred:".
//!
//! Line numbers of the code being run ("Cell In[N], line L", with N the
//! highest cell number in the traceback; also `<tokenize>` positions) are
//! mapped back to the submitted code. IPython drops leading blank lines of a
//! cell before compiling it, so its line numbers are shifted by that many
//! lines; [`parse`] adds them back. Frames of cells run earlier in the same
//! kernel (an earlier repair round) keep their own cell number as location.

use std::sync::LazyLock;

use console::strip_ansi_codes;
use regex::Regex;

use super::{scrub_paths, Chained, Frame, Relation, SyntaxPos, Traceback};
use crate::kernel::ErrorInfo;

static CELL_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Cell In\[(\d+)\], line (\d+)(?:,? in (.+?))?:?$").expect("valid regex")
});
static FILE_HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^File (.+?):(\d+)(?:,? in (.+?))?:?$").expect("valid regex"));
static PY_FILE_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^File "(.+?)", line (\d+)(?:, in (.+))?$"#).expect("valid regex")
});
static BLOCK_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\S+)\s+Traceback \(most recent call last\)$").expect("valid regex")
});
static NUMBERED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(-*>)?\s*(\d+)(?: (.*))?$").expect("valid regex"));
static EXC_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Za-z_][A-Za-z0-9_.]*)(?::(?: (.*))?)?$").expect("valid regex")
});
static SYNTAX_SUFFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r" \([^()\n]*, line \d+\)$").expect("valid regex"));

const NO_SOURCE: &str = "Could not get source";
const CAUSE: &str = "The above exception was the direct cause of the following exception:";
const CONTEXT: &str = "During handling of the above exception, another exception occurred:";

/// One exception of the chain while parsing.
#[derive(Default)]
struct Block {
    header_type: Option<String>,
    frames: Vec<RawFrame>,
    exc: Option<(String, String)>,
    syntax: Option<RawSyntax>,
    /// Relation to the next block, set by the marker after this one.
    relation: Option<Relation>,
}

struct RawFrame {
    cell: Option<u64>,
    path: String,
    line: usize,
    function: Option<String>,
    source: Option<String>,
}

struct RawSyntax {
    cell: Option<u64>,
    path: String,
    line: usize,
    text: String,
    caret: Option<String>,
}

/// Parses an IPython NoColor traceback. `code` is the code exactly as sent
/// to the kernel; cell line numbers are mapped onto it.
pub fn parse(error: &ErrorInfo, code: &str) -> Traceback {
    let mut blocks = blocks(error);
    // The cell being run is the one with the highest number.
    let current_cell = blocks
        .iter()
        .flat_map(|b| {
            b.frames
                .iter()
                .map(|f| f.cell)
                .chain(b.syntax.iter().map(|s| s.cell))
        })
        .flatten()
        .max();
    let cell = CellMap {
        current: current_cell,
        shift: leading_blank_lines(code),
        lines: code.lines().collect(),
    };

    let last = blocks.pop().unwrap_or_default();
    let chain = blocks.into_iter().map(chained).collect();
    let frames = last
        .frames
        .into_iter()
        .filter(|f| !is_ipython_machinery(&f.path))
        .map(|f| cell.frame(f))
        .collect();
    let syntax = last.syntax.map(|s| cell.syntax(s));

    let exc_type = if error.ename.is_empty() {
        last.exc
            .as_ref()
            .map(|e| e.0.clone())
            .or(last.header_type)
            .unwrap_or_else(|| "Exception".into())
    } else {
        error.ename.clone()
    };
    let message = match (&syntax, &last.exc) {
        // IPython appends "(123456.py, line 2)" to a SyntaxError's evalue;
        // the printed last line has the message without it.
        (Some(_), Some((_, printed))) => printed.clone(),
        (Some(_), None) => SYNTAX_SUFFIX.replace(&error.evalue, "").into_owned(),
        _ => error.evalue.clone(),
    };

    Traceback {
        exc_type,
        message: scrub_paths(strip_ansi_codes(&message).trim_end()),
        frames,
        syntax,
        chain,
    }
}

/// The traceback's entries grouped into one block per exception of the
/// chain, the raised one last.
fn blocks(error: &ErrorInfo) -> Vec<Block> {
    let mut blocks: Vec<Block> = vec![Block::default()];
    for raw in &error.traceback {
        let entry = strip_ansi_codes(raw);
        let entry = entry.trim_end_matches(['\n', '\r']);
        let trimmed = entry.trim();
        if trimmed.is_empty() || trimmed.chars().all(|c| c == '-') {
            continue;
        }
        if trimmed == CAUSE || trimmed == CONTEXT {
            let relation = if trimmed == CAUSE {
                Relation::Cause
            } else {
                Relation::Context
            };
            blocks.last_mut().expect("never empty").relation = Some(relation);
            blocks.push(Block::default());
            continue;
        }
        let current = blocks.last_mut().expect("never empty");
        if let Some(c) = BLOCK_HEADER.captures(trimmed) {
            current.header_type = Some(c[1].to_string());
            continue;
        }
        if trimmed.starts_with("Traceback (most recent call last)") {
            continue;
        }
        parse_entry(entry, current);
    }
    blocks.retain(|b| {
        b.exc.is_some() || b.header_type.is_some() || !b.frames.is_empty() || b.syntax.is_some()
    });
    blocks
}

/// An earlier exception of the chain.
fn chained(b: Block) -> Chained {
    let (exc_type, message) = b
        .exc
        .or_else(|| b.header_type.map(|t| (t, String::new())))
        .unwrap_or_else(|| ("Exception".to_string(), String::new()));
    Chained {
        exc_type,
        message: scrub_paths(&message),
        relation: b.relation.unwrap_or(Relation::Context),
    }
}

/// Maps the running cell's line numbers onto the code as sent.
struct CellMap<'a> {
    current: Option<u64>,
    /// Blank lines IPython dropped from the top of the code.
    shift: usize,
    lines: Vec<&'a str>,
}

impl CellMap<'_> {
    fn frame(&self, f: RawFrame) -> Frame {
        let is_current = f.cell.is_some() && f.cell == self.current;
        if is_current {
            let line = f.line + self.shift;
            let source = self
                .lines
                .get(line.wrapping_sub(1))
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .or(f.source);
            Frame {
                location: "cell".into(),
                in_cell: true,
                line: Some(line),
                function: f.function,
                source: source.map(|s| scrub_paths(&s)),
            }
        } else {
            Frame {
                location: match f.cell {
                    Some(n) => format!("In[{n}]"),
                    None => scrub_paths(&f.path),
                },
                in_cell: false,
                line: Some(f.line),
                function: f.function,
                source: f.source.map(|s| scrub_paths(&s)),
            }
        }
    }

    fn syntax(&self, s: RawSyntax) -> SyntaxPos {
        let in_cell = s.path == "<tokenize>" || (s.cell.is_some() && s.cell == self.current);
        let offset = s.caret.as_ref().and_then(|c| c.find('^')).map(|i| i + 1);
        SyntaxPos {
            line: if in_cell { s.line + self.shift } else { s.line },
            offset,
            text: scrub_paths(&s.text),
            caret: s.caret,
            location: if in_cell {
                "cell".into()
            } else if let Some(n) = s.cell {
                format!("In[{n}]")
            } else {
                scrub_paths(&s.path)
            },
        }
    }
}

/// IPython's own frame that runs every cell (`run_code`), not the user's.
fn is_ipython_machinery(path: &str) -> bool {
    path.ends_with("/IPython/core/interactiveshell.py")
}

/// Lines IPython's `leading_empty_lines` transform drops before compiling.
fn leading_blank_lines(code: &str) -> usize {
    let lines: Vec<&str> = code.split_inclusive('\n').collect();
    lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or_default()
}

/// Parses one traceback entry: a frame, a SyntaxError block or the final
/// `ExcType: message` line.
fn parse_entry(entry: &str, block: &mut Block) {
    let mut lines = entry.lines();
    let Some(first) = lines.next() else { return };
    let plain = first.starts_with([' ', '\t']);
    let head = first.trim();
    let rest: Vec<&str> = lines.collect();

    let header = if let Some(c) = CELL_HEADER.captures(head) {
        Some((
            c[1].parse::<u64>().ok(),
            String::new(),
            c[2].parse::<usize>().unwrap_or(0),
            c.get(3).map(|m| m.as_str().to_string()),
        ))
    } else {
        FILE_HEADER
            .captures(head)
            .or_else(|| PY_FILE_HEADER.captures(head))
            .map(|c| {
                (
                    None,
                    c[1].to_string(),
                    c[2].parse::<usize>().unwrap_or(0),
                    c.get(3).map(|m| m.as_str().to_string()),
                )
            })
    };

    let Some((cell, path, line, function)) = header else {
        // The final "ExcType: message" line (the message may span lines).
        if let Some((name, msg)) = exception_line(entry) {
            block.exc = Some((name, msg));
        }
        return;
    };

    // An exception line inside the entry marks a SyntaxError block.
    let exc_at = rest
        .iter()
        .position(|l| !l.starts_with([' ', '\t', '-']) && exception_line(l).is_some());
    if let Some(at) = exc_at {
        let body: Vec<&str> = rest[..at]
            .iter()
            .copied()
            .filter(|l| !l.trim().is_empty())
            .collect();
        let text_line = body.iter().find(|l| !is_caret_line(l)).copied();
        let caret_line = body.iter().find(|l| is_caret_line(l)).copied();
        let indent = text_line
            .map(|t| t.len() - t.trim_start().len())
            .unwrap_or(0);
        let caret = caret_line.map(|c| {
            let lead = c.len() - c.trim_start().len();
            // Byte counts: a multi-byte space must not be cut in half.
            let keep = c.floor_char_boundary(lead.min(indent));
            c[keep..].trim_end().to_string()
        });
        let cell = if path == "<tokenize>" { None } else { cell };
        block.syntax = Some(RawSyntax {
            cell,
            path,
            line,
            text: text_line.map(|t| t.trim().to_string()).unwrap_or_default(),
            caret,
        });
        let message = rest[at..].join("\n");
        if let Some(exc) = exception_line(&message) {
            block.exc = Some(exc);
        }
        return;
    }

    let source = if plain {
        rest.iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .map(str::to_string)
    } else {
        rest.iter()
            .filter_map(|l| NUMBERED.captures(l))
            .find(|c| c.get(1).is_some())
            .and_then(|c| c.get(3).map(|m| m.as_str().trim().to_string()))
    }
    .filter(|s| !s.is_empty() && !s.contains(NO_SOURCE));

    block.frames.push(RawFrame {
        cell,
        path,
        line,
        function: function.map(|f| function_name(&f)),
        source,
    });
}

fn is_caret_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.chars().all(|c| c == '^' || c == '~') && t.contains('^')
}

/// `ExcType: message` / `ExcType` (first line) with the message running to
/// the end of the text.
fn exception_line(text: &str) -> Option<(String, String)> {
    let (first, more) = match text.split_once('\n') {
        Some((f, m)) => (f, Some(m)),
        None => (text, None),
    };
    let c = EXC_LINE.captures(first.trim_end())?;
    let name = c[1].to_string();
    // A bare word is only an exception name if it looks like one.
    if c.get(2).is_none() && !first.contains(':') && !looks_like_exception_name(&name) {
        return None;
    }
    let mut message = c.get(2).map(|m| m.as_str().to_string()).unwrap_or_default();
    if let Some(more) = more {
        message.push('\n');
        message.push_str(more);
    }
    let short = name.rsplit('.').next().unwrap_or(&name).to_string();
    Some((short, message.trim_end().to_string()))
}

fn looks_like_exception_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && !name.contains(' ')
        && name.len() > 1
}

/// `DataFrame.__getitem__(self, key)` → `DataFrame.__getitem__`;
/// `<listcomp>(.0)` → `<listcomp>`.
fn function_name(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().find(|&(i, c)| c == '(' && i > 0) {
        Some((i, _)) => t[..i].to_string(),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::traceback::render;

    #[test]
    fn kernel_colour_and_title_codes_are_stripped() {
        let red = "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero";
        assert_eq!(strip_ansi_codes(red), "ZeroDivisionError: division by zero");
        assert_eq!(strip_ansi_codes("\u{1b}]0;title\u{07}x"), "x");
        assert_eq!(strip_ansi_codes("plain"), "plain");
    }

    fn err(ename: &str, evalue: &str, tb: &[&str]) -> ErrorInfo {
        ErrorInfo {
            ename: ename.into(),
            evalue: evalue.into(),
            traceback: tb.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn simple_cell_error() {
        let e = err(
            "NameError",
            "name 'valeu' is not defined",
            &[
                "---------------------------------------------------------------------------",
                "NameError                                 Traceback (most recent call last)",
                "Cell In[4], line 3\n      1 total = 0\n      2 for i in range(3):\n----> 3     total += valeu\n",
                "NameError: name 'valeu' is not defined",
            ],
        );
        let code = "total = 0\nfor i in range(3):\n    total += valeu\nanswer = total\n";
        let tb = parse(&e, code);
        assert_eq!(tb.exc_type, "NameError");
        assert_eq!(tb.message, "name 'valeu' is not defined");
        assert_eq!(tb.cell_line(), Some(3));
        assert_eq!(tb.frames[0].source.as_deref(), Some("total += valeu"));
        let text = render(&tb, code, 2000);
        assert!(text.starts_with("NameError: name 'valeu' is not defined\n"));
        assert!(text.contains("-->"), "{text}");
        assert!(text.contains("--> 3 |     total += valeu"), "{text}");
    }

    #[test]
    fn ansi_and_missing_traceback() {
        let e = err(
            "ZeroDivisionError",
            "division by zero",
            &[
                "\u{1b}[31m---------------------------------------------------------------------------\u{1b}[39m",
                "\u{1b}[31mZeroDivisionError\u{1b}[39m                         Traceback (most recent call last)",
                "\u{1b}[36mCell\u{1b}[39m\u{1b}[36m \u{1b}[39m\u{1b}[32mIn[2]\u{1b}[39m\u{1b}[32m, line 1\u{1b}[39m\n\u{1b}[32m----> \u{1b}[39m\u{1b}[32m1\u{1b}[39m x = 1/0\n",
                "\u{1b}[31mZeroDivisionError\u{1b}[39m: division by zero",
            ],
        );
        let tb = parse(&e, "x = 1/0\n");
        assert_eq!(tb.cell_line(), Some(1));
        let text = render(&tb, "x = 1/0\n", 500);
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("--> 1 | x = 1/0"), "{text}");

        let tb = parse(&err("ExceptionGroup", "two (2 sub-exceptions)", &[]), "");
        assert_eq!(
            (tb.exc_type.as_str(), tb.message.as_str(), tb.frames.len()),
            ("ExceptionGroup", "two (2 sub-exceptions)", 0)
        );
        assert_eq!(
            render(&tb, "", 500),
            "ExceptionGroup: two (2 sub-exceptions)"
        );
    }

    #[test]
    fn leading_blank_lines_shift_cell_lines() {
        let e = err(
            "SyntaxError",
            "incomplete input (4010862068.py, line 1)",
            &["  Cell In[1], line 1\n    x = (1,\n           ^\nSyntaxError: incomplete input\n"],
        );
        let code = "\n  \n\nx = (1,\n";
        let tb = parse(&e, code);
        assert_eq!(tb.message, "incomplete input");
        let s = tb.syntax.as_ref().unwrap();
        assert_eq!((s.line, s.offset), (4, Some(8)));
        assert_eq!(s.text, "x = (1,");
        assert_eq!(tb.cell_line(), Some(4));
        let text = render(&tb, code, 1000);
        assert!(text.contains("--> 4 | x = (1,\n      |        ^"), "{text}");
    }

    #[test]
    fn exception_lines() {
        assert_eq!(
            exception_line("KeyboardInterrupt: "),
            Some(("KeyboardInterrupt".into(), String::new()))
        );
        assert_eq!(
            exception_line("EmptyInput"),
            Some(("EmptyInput".into(), String::new()))
        );
        assert_eq!(
            exception_line("json.decoder.JSONDecodeError: Expecting value"),
            Some(("JSONDecodeError".into(), "Expecting value".into()))
        );
        assert_eq!(
            exception_line("ValueError: a\nb"),
            Some(("ValueError".into(), "a\nb".into()))
        );
        assert_eq!(exception_line("some text"), None);
        assert_eq!(function_name("<listcomp>(.0)"), "<listcomp>");
        assert_eq!(
            function_name("DataFrame.__getitem__(self, key)"),
            "DataFrame.__getitem__"
        );
    }
}
