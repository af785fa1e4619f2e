//! Traceback parsing and the compact error feedback a model sees.
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
//!
//! Harness paths are scrubbed everywhere ([`scrub_paths`]): anything under a
//! `site-packages/` or `dist-packages/` becomes `<site-packages>/…`, the
//! image/venv prefix, the kernel's directories under `/tmp/retrace-*` and
//! home directories become `<sandbox>`, the interpreter's standard library
//! (`/usr/lib/python3.x/`) becomes `<stdlib>/`, and ipykernel's per-cell file
//! names (`/tmp/ipykernel_N/NNN.py`, seen in warnings) become `<cell>`.

use std::fmt::Write as _;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::kernel::{strip_ansi, ErrorInfo, Outcome};
use crate::sandbox::{SandboxLimits, Verdict};
use crate::util::units::format_bytes;

/// A parsed Python exception.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traceback {
    pub exc_type: String,
    /// The exception message (for syntax errors without IPython's
    /// `(file.py, line N)` suffix). Empty when the exception had none.
    pub message: String,
    /// Frames of the final exception, outermost first.
    pub frames: Vec<Frame>,
    /// Where a SyntaxError (or IndentationError, TabError) points.
    pub syntax: Option<SyntaxPos>,
    /// Earlier exceptions of the chain, oldest first.
    pub chain: Vec<Chained>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// `cell` for the submitted code, `In[N]` for a cell run earlier in the
    /// same kernel, otherwise the scrubbed file (e.g.
    /// `<site-packages>/pandas/core/frame.py`, `<stdlib>/json/decoder.py`,
    /// `<string>`).
    pub location: String,
    /// The frame is in the submitted code.
    pub in_cell: bool,
    /// For cell frames the line in the submitted code; for other frames the
    /// line in their own file.
    pub line: Option<usize>,
    /// Function name without its arguments; `None` at the top level of a cell.
    pub function: Option<String>,
    /// The failing source line, trimmed (for cell frames taken from the
    /// submitted code).
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntaxPos {
    /// Line in the submitted code when `location` is `cell`.
    pub line: usize,
    /// 1-based column of the caret within `text`.
    pub offset: Option<usize>,
    /// The offending line as Python showed it (leading whitespace removed).
    pub text: String,
    /// The caret line aligned under `text` (e.g. `"      ^"`).
    pub caret: Option<String>,
    /// `cell`, or where else the source was (`<string>` for `eval`).
    pub location: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// "The above exception was the direct cause of the following exception"
    /// (`raise … from …`).
    Cause,
    /// "During handling of the above exception, another exception occurred".
    Context,
}

/// An earlier exception of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chained {
    pub exc_type: String,
    pub message: String,
    /// How this exception relates to the next one in the chain.
    pub relation: Relation,
}

impl Traceback {
    /// The line of the submitted code where it failed: the syntax error's
    /// line, else the last frame in the submitted code.
    pub fn cell_line(&self) -> Option<usize> {
        if let Some(s) = self.syntax.as_ref().filter(|s| s.location == "cell") {
            return Some(s.line);
        }
        self.last_cell_frame().and_then(|f| f.line)
    }

    pub fn last_cell_frame(&self) -> Option<&Frame> {
        self.frames.iter().rev().find(|f| f.in_cell)
    }

    pub fn is_syntax_error(&self) -> bool {
        self.syntax.is_some()
    }
}

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
    let mut blocks: Vec<Block> = vec![Block::default()];
    for raw in &error.traceback {
        let entry = strip_ansi(raw);
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
    let shift = leading_blank_lines(code);
    let code_lines: Vec<&str> = code.lines().collect();

    let last = blocks.pop().unwrap_or_default();
    let chain = blocks
        .into_iter()
        .map(|b| {
            let (exc_type, message) = b
                .exc
                .or_else(|| b.header_type.map(|t| (t, String::new())))
                .unwrap_or_else(|| ("Exception".to_string(), String::new()));
            Chained {
                exc_type,
                message: scrub_paths(&message),
                relation: b.relation.unwrap_or(Relation::Context),
            }
        })
        .collect();

    let frames = last
        .frames
        .into_iter()
        .filter(|f| !is_ipython_machinery(&f.path))
        .map(|f| {
            let is_current = f.cell.is_some() && f.cell == current_cell;
            if is_current {
                let line = f.line + shift;
                let source = code_lines
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
        })
        .collect();

    let syntax = last.syntax.map(|s| {
        let in_cell = s.path == "<tokenize>" || (s.cell.is_some() && s.cell == current_cell);
        let offset = s.caret.as_ref().and_then(|c| c.find('^')).map(|i| i + 1);
        SyntaxPos {
            line: if in_cell { s.line + shift } else { s.line },
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
    });

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
        message: scrub_paths(strip_ansi(&message).trim_end()),
        frames,
        syntax,
        chain,
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
            let keep = lead.min(indent);
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

static SCRUBS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    const SEG: &str = r#"[^/\s"'():,<>\[\]]"#;
    let rules = [
        // Anything installed: venvs, images, system dist-packages.
        (
            format!(r"(?:/{SEG}+)*/(?:site|dist)-packages/"),
            "<site-packages>/",
        ),
        // ipykernel's file name for a cell (warnings point there).
        (r"(?:/tmp)?/ipykernel_\d+/\d+\.py".to_string(), "<cell>"),
        // The kernel's own directories: runtime, work, home.
        (
            format!(r"(?:/{SEG}+)*/retrace-\d+/{SEG}+/(?:work|home|rt)\b"),
            "<sandbox>",
        ),
        (format!(r"/tmp/retrace-{SEG}*(?:/{SEG}+)?"), "<sandbox>"),
        // A retrace image (fat-…, slim-…) and its venv.
        (
            format!(r"(?:/{SEG}+)*/images/[A-Za-z0-9_.]+-[0-9a-f]{{8,}}(?:/venv)?"),
            "<sandbox>",
        ),
        (format!(r"(?:/{SEG}+)*/\.cache/retrace\b"), "<sandbox>"),
        // The interpreter's standard library.
        (format!(r"(?:/{SEG}+)*/lib/python3\.\d+/"), "<stdlib>/"),
        // Home directories of the harness user.
        (
            r#"(^|[\s"'(=:,\[])/(?:root|home/[^/\s"']+)\b"#.to_string(),
            "${1}<sandbox>",
        ),
    ];
    rules
        .into_iter()
        .map(|(re, to)| (Regex::new(&re).expect("valid regex"), to))
        .collect()
});

/// Replaces harness paths (see the module documentation).
pub fn scrub_paths(text: &str) -> String {
    let mut out = text.to_string();
    for (re, to) in SCRUBS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, *to).into_owned();
        }
    }
    out
}

/// Lines of context shown before and after the failing line.
const CONTEXT_BEFORE: usize = 2;
const CONTEXT_AFTER: usize = 2;
/// Longest source line shown in full.
const MAX_LINE: usize = 160;
const MAX_FAILING_LINE: usize = 400;
/// Library frames shown in a row before the middle ones are summarised.
const MAX_LIBRARY_RUN: usize = 5;

/// Compact feedback for the model, at most `budget` characters: the
/// exception, the chain, the call path, and the failing line of the
/// submitted code with context. When too long, the first line (the
/// exception) and the tail are kept, with a `[... N characters cut ...]`
/// marker in between.
pub fn render(tb: &Traceback, code: &str, budget: usize) -> String {
    // The exception line takes at most half the budget; only its message is cut.
    let mut head = cut_middle(&tb.exc_type, budget / 2);
    if !tb.message.is_empty() {
        let room = (budget / 2).saturating_sub(head.chars().count() + 2);
        head.push_str(": ");
        head.push_str(&cut_middle(&tb.message, room));
    }

    let mut body = String::new();
    for c in &tb.chain {
        let mut msg = c.exc_type.clone();
        let first = c.message.lines().next().unwrap_or("");
        if !first.is_empty() {
            msg.push_str(": ");
            msg.push_str(&cut_middle(first, 200));
        }
        let _ = match c.relation {
            Relation::Cause => writeln!(body, "The direct cause was an earlier exception: {msg}"),
            Relation::Context => writeln!(body, "It was raised while handling: {msg}"),
        };
    }

    let lines: Vec<&str> = code.lines().collect();
    if tb.frames.len() > 1 {
        let _ = writeln!(body, "\nCall stack (most recent call last):");
        body.push_str(&call_stack(&tb.frames));
    }

    let syntax_in_cell = tb.syntax.as_ref().filter(|s| s.location == "cell");
    if let Some(s) = syntax_in_cell {
        let _ = writeln!(body, "\nline {} of your code:", s.line);
        body.push_str(&context(&lines, s.line, Some(s)));
    } else {
        if let Some(f) = tb.last_cell_frame() {
            let line = f.line.unwrap_or(0);
            match &f.function {
                Some(func) if func != "<module>" => {
                    let _ = writeln!(body, "\nline {line} of your code (in {func}):");
                }
                _ => {
                    let _ = writeln!(body, "\nline {line} of your code:");
                }
            }
            if line >= 1 && line <= lines.len() {
                body.push_str(&context(&lines, line, None));
            } else if let Some(src) = &f.source {
                let _ = writeln!(body, "--> {}", cut_middle(src, MAX_FAILING_LINE));
            }
        }
        if let Some(s) = &tb.syntax {
            let _ = writeln!(body, "\nin {}, line {}:", s.location, s.line);
            let _ = writeln!(body, "    {}", cut_middle(&s.text, MAX_FAILING_LINE));
            if let Some(caret) = &s.caret {
                let _ = writeln!(body, "    {caret}");
            }
        }
    }

    let text = if body.trim().is_empty() {
        head
    } else {
        format!("{head}\n{}", body.trim_end())
    };
    fit_keep_tail(&scrub_paths(&text), budget)
}

/// One line per frame, consecutive repeats folded, long runs of library
/// frames summarised.
fn call_stack(frames: &[Frame]) -> String {
    let mut rows: Vec<(String, bool, usize)> = Vec::new();
    for f in frames {
        let row = frame_row(f);
        match rows.last_mut() {
            Some((last, _, count)) if *last == row => *count += 1,
            _ => rows.push((row, f.in_cell || f.location.starts_with("In["), 1)),
        }
    }
    let mut out = String::new();
    let mut i = 0;
    while i < rows.len() {
        // A run of library rows.
        let run_end = rows[i..]
            .iter()
            .position(|r| r.1)
            .map_or(rows.len(), |p| i + p);
        let run = run_end - i;
        if run > MAX_LIBRARY_RUN {
            for r in &rows[i..i + 2] {
                push_row(&mut out, r);
            }
            let _ = writeln!(out, "  ... {} more library frames ...", run - 4);
            for r in &rows[run_end - 2..run_end] {
                push_row(&mut out, r);
            }
            i = run_end;
            continue;
        }
        push_row(&mut out, &rows[i]);
        i += 1;
    }
    out
}

fn push_row(out: &mut String, (row, _, count): &(String, bool, usize)) {
    if *count > 1 {
        let _ = writeln!(out, "  {row}   [repeated {} more times]", count - 1);
    } else {
        let _ = writeln!(out, "  {row}");
    }
}

fn frame_row(f: &Frame) -> String {
    let func = f
        .function
        .as_deref()
        .filter(|n| *n != "<module>")
        .map(|n| format!(", in {n}"))
        .unwrap_or_default();
    let src = f
        .source
        .as_deref()
        .map(|s| format!(": {}", cut_middle(s, MAX_LINE)))
        .unwrap_or_default();
    let line = f.line.map(|l| l.to_string()).unwrap_or_else(|| "?".into());
    if f.in_cell {
        format!("your code, line {line}{func}{src}")
    } else if f.location.starts_with("In[") {
        format!("code run earlier ({}), line {line}{func}{src}", f.location)
    } else {
        format!("{}:{line}{func}", f.location)
    }
}

/// Numbered lines around `line` (1-based), the failing one marked `-->`,
/// with the syntax caret under it when given.
fn context(lines: &[&str], line: usize, syntax: Option<&SyntaxPos>) -> String {
    let first = line.saturating_sub(CONTEXT_BEFORE).max(1);
    let mut last = (line + CONTEXT_AFTER).min(lines.len());
    while last > line && lines[last - 1].trim().is_empty() {
        last -= 1;
    }
    let width = last.max(line).to_string().len();
    let mut out = String::new();
    for n in first..=last {
        let text = lines[n - 1].trim_end();
        if n == line {
            let _ = writeln!(out, "--> {n:>width$} | {}", cut_end(text, MAX_FAILING_LINE));
            if let Some(caret) = syntax.and_then(|s| caret_under(text, s)) {
                let _ = writeln!(out, "    {:>width$} | {caret}", "");
            }
        } else {
            let _ = writeln!(out, "    {n:>width$} | {}", cut_end(text, MAX_LINE));
        }
    }
    if line > lines.len() {
        if let Some(s) = syntax {
            let _ = writeln!(out, "--> {line:>width$} | {}", s.text);
            if let Some(c) = &s.caret {
                let _ = writeln!(out, "    {:>width$} | {c}", "");
            }
        }
    }
    out
}

/// The caret realigned under the original (indented) line.
fn caret_under(original: &str, s: &SyntaxPos) -> Option<String> {
    let caret = s.caret.as_ref()?;
    let stripped = original.trim_start();
    if s.text.is_empty() || !stripped.starts_with(s.text.trim_end()) {
        return None;
    }
    let lead = &original[..original.len() - stripped.len()];
    Some(format!("{lead}{caret}"))
}

fn cut_end(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// Keeps the start and the end of `text` within `max` characters.
pub fn cut_middle(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let marker_len = |cut: usize| format!(" [... {cut} characters cut ...] ").chars().count();
    let mut keep = max.saturating_sub(marker_len(n));
    while keep > 0 && keep + marker_len(n - keep) > max {
        keep -= 1;
    }
    if keep == 0 {
        return text.chars().take(max).collect();
    }
    let head = keep / 2;
    let tail = keep - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start} [... {} characters cut ...] {end}", n - keep)
}

/// Fits `text` in `budget` characters keeping its first line (cut in the
/// middle if it is longer than half the budget) and its tail.
pub(crate) fn fit_keep_tail(text: &str, budget: usize) -> String {
    if text.chars().count() <= budget {
        return text.to_string();
    }
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    if budget < 40 || rest.is_empty() {
        return cut_middle(first, budget);
    }
    let first = cut_middle(first, budget / 2);
    let room = budget - first.chars().count() - 1;
    format!("{first}\n{}", keep_tail(rest, room))
}

/// The end of `text` within `budget` characters, preceded by a
/// `[... N characters cut ...]` line; starts at a line boundary when one is
/// near.
pub fn keep_tail(text: &str, budget: usize) -> String {
    let n = text.chars().count();
    if n <= budget {
        return text.to_string();
    }
    let marker = |cut: usize| format!("[... {cut} characters cut ...]\n");
    let mut keep = budget.saturating_sub(marker(n).chars().count());
    if keep == 0 {
        return text.chars().skip(n - budget).collect();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut start = n - keep;
    // Prefer starting at a line boundary within the first fifth of what is kept.
    if let Some(p) = chars[start..start + keep / 5]
        .iter()
        .position(|&c| c == '\n')
    {
        start += p + 1;
        keep = n - start;
    }
    let tail: String = chars[start..].iter().collect();
    let out = format!("{}{tail}", marker(n - keep));
    debug_assert!(out.chars().count() <= budget);
    out
}

/// The head and the tail of `text` within `budget` characters, with a
/// `[... N characters cut ...]` line in between (for stdout).
pub fn head_tail(text: &str, budget: usize) -> String {
    let n = text.chars().count();
    if n <= budget {
        return text.to_string();
    }
    let marker = |cut: usize| format!("\n[... {cut} characters cut ...]\n");
    let mut keep = budget.saturating_sub(marker(n).chars().count());
    while keep > 0 && keep + marker(n - keep).chars().count() > budget {
        keep -= 1;
    }
    if keep == 0 {
        return text.chars().skip(n - budget).collect();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut head = keep / 3;
    let mut tail = keep - head;
    // End the head and start the tail at line boundaries when one is near.
    if let Some(p) = chars[head - head / 5..head]
        .iter()
        .rposition(|&c| c == '\n')
    {
        head = head - head / 5 + p;
    }
    if let Some(p) = chars[n - tail..n - tail + tail / 5]
        .iter()
        .position(|&c| c == '\n')
    {
        tail -= p + 1;
    }
    let start: String = chars[..head].iter().collect();
    let end: String = chars[n - tail..].iter().collect();
    format!("{start}{}{end}", marker(n - head - tail))
}

fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// The sentence added when the kernel lost its state.
pub const STATE_LOST: &str =
    "The kernel was restarted; your variables are gone — redefine everything you need.";

/// A plain statement of why an execution was ended, for the verdicts that
/// are not a plain exception. `None` for `ok` and `error` unless the kernel
/// was restarted (then only the restart sentence).
pub fn kill_message(outcome: &Outcome, limits: &SandboxLimits) -> Option<String> {
    let mem = format_bytes(limits.memory_bytes);
    let message = match outcome.verdict {
        Verdict::Ok | Verdict::Error => None,
        Verdict::TimeoutWall => Some(format!(
            "Your code did not finish within {} of wall time and was stopped. Make it faster \
             (avoid long loops and sleeps) or compute less.",
            fmt_duration(limits.timeout)
        )),
        Verdict::TimeoutCpu => Some(format!(
            "Your code used more than {} of CPU time and was stopped. Use a faster algorithm \
             or vectorised operations.",
            fmt_duration(limits.cpu_time)
        )),
        Verdict::OomKilled => Some(format!(
            "Your code exceeded the memory limit of {mem} and was killed. Use less memory \
             (smaller arrays, process data in chunks)."
        )),
        Verdict::MemoryError => Some(format!(
            "Your code ran out of memory (MemoryError): the memory limit is {mem}. Use less memory."
        )),
        Verdict::PidsLimit => Some(format!(
            "Your code started too many processes or threads (limit {}). Do not start \
             processes or thread pools.",
            limits.pids
        )),
        Verdict::OutputLimit => Some(format!(
            "Your code printed more than {} of output; it was cut and the execution was \
             stopped. Print only what you need (summaries, not whole tables or long loops).",
            format_bytes(limits.output_cap_bytes)
        )),
        Verdict::DiskLimit => Some(format!(
            "Your code wrote more than the disk limit of {} (for files in the working \
             directory and /tmp). Write less data.",
            format_bytes(limits.disk_bytes)
        )),
        Verdict::FdLimit => Some(
            "Your code opened too many files at once. Close files when done (use `with open(...)`)."
                .to_string(),
        ),
        Verdict::Crash => {
            let how = outcome
                .exit
                .as_ref()
                .and_then(|e| {
                    e.signal_name
                        .clone()
                        .or_else(|| e.signal.map(|s| format!("signal {s}")))
                })
                .map(|s| format!(" with {s}"))
                .unwrap_or_default();
            Some(format!(
                "The Python process crashed{how}. Avoid the operation that crashed it \
                 (e.g. ctypes, huge recursion, broken native calls)."
            ))
        }
        Verdict::KernelExit => {
            let code = outcome
                .exit
                .as_ref()
                .and_then(|e| e.code)
                .map(|c| format!(" (code {c})"))
                .unwrap_or_default();
            Some(format!(
                "The Python process exited{code}. Do not call exit(), quit(), sys.exit() or os._exit()."
            ))
        }
        Verdict::NetworkBlocked => Some(
            "Your code tried to use the network: there is no network access in this sandbox. \
             Use only the files in the working directory."
                .to_string(),
        ),
        Verdict::PolicyDenied => Some(
            "Your code did something this sandbox does not allow (e.g. installing packages). \
             Use only the packages that are available."
                .to_string(),
        ),
        Verdict::InternalError => Some(
            "The execution failed because of a problem in the evaluation harness, not in your \
             code. Run your code again."
                .to_string(),
        ),
    };
    match (message, outcome.state_lost) {
        (Some(m), true) => Some(format!("{m}\n{STATE_LOST}")),
        (Some(m), false) => Some(m),
        (None, true) => Some(STATE_LOST.to_string()),
        (None, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(ename: &str, evalue: &str, tb: &[&str]) -> ErrorInfo {
        ErrorInfo {
            ename: ename.into(),
            evalue: evalue.into(),
            traceback: tb.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn scrubbing() {
        let cases = [
            (
                "File /home/alice/.cache/retrace/images/fat-6716b415b01ace57/venv/lib/python3.11/site-packages/pandas/core/frame.py:4102, in f",
                "File <site-packages>/pandas/core/frame.py:4102, in f",
            ),
            (
                "File /usr/lib/python3.11/json/decoder.py:337, in JSONDecoder.decode(self, s, _w)",
                "File <stdlib>/json/decoder.py:337, in JSONDecoder.decode(self, s, _w)",
            ),
            (
                "No such file: '/tmp/retrace-1000/k2e319bf9b90/work/data.csv'",
                "No such file: '<sandbox>/data.csv'",
            ),
            ("HOME=/tmp/retrace-1000/kabc/home", "HOME=<sandbox>"),
            (
                "/opt/rt/images/slim-ccf5d594ff87dfc0/venv/bin/python",
                "<sandbox>/bin/python",
            ),
            ("open('/root/secret.txt')", "open('<sandbox>/secret.txt')"),
            ("cd /home/alice/project", "cd <sandbox>/project"),
            (
                "/tmp/ipykernel_2/2922155320.py:2: UserWarning: careful",
                "<cell>:2: UserWarning: careful",
            ),
            (
                "/usr/lib/python3/dist-packages/yaml/__init__.py",
                "<site-packages>/yaml/__init__.py",
            ),
            (
                "/home/alice/.pyenv/versions/3.11.9/lib/python3.11/json/__init__.py",
                "<stdlib>/json/__init__.py",
            ),
            ("x = a/root/b", "x = a/root/b"),
            ("plain text, 3/4 done", "plain text, 3/4 done"),
        ];
        for (input, want) in cases {
            assert_eq!(scrub_paths(input), want, "input: {input}");
            // Idempotent.
            assert_eq!(scrub_paths(want), want);
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
    fn kill_messages() {
        let limits = SandboxLimits::default();
        let mut o: Outcome = serde_json::from_value(serde_json::json!({
            "status": "error", "verdict": "timeout_wall", "flags": [], "execution_count": 1,
            "stdout": "", "stderr": "", "results": [], "displays": [], "error": null,
            "answer": null, "artifacts": [], "truncated": false,
            "truncation": {"truncated": false, "dropped_bytes": 0, "dropped_messages": 0},
            "timings_ms": {"total": 1.0}, "state_lost": false
        }))
        .unwrap();
        let msg = |o: &Outcome| kill_message(o, &limits).unwrap_or_default();
        assert!(msg(&o).contains("did not finish within 10s of wall time"));
        o.verdict = Verdict::TimeoutCpu;
        assert!(msg(&o).contains("more than 10s of CPU time"));
        o.verdict = Verdict::OomKilled;
        assert!(msg(&o).contains("exceeded the memory limit of 512M"));
        o.verdict = Verdict::MemoryError;
        assert!(msg(&o).contains("512M"));
        o.verdict = Verdict::PidsLimit;
        assert!(msg(&o).contains("started too many processes or threads (limit 128)"));
        o.verdict = Verdict::OutputLimit;
        assert!(msg(&o).contains("printed more than 1M of output; it was cut"));
        o.verdict = Verdict::DiskLimit;
        assert!(msg(&o).contains("256M"));
        o.verdict = Verdict::FdLimit;
        assert!(msg(&o).contains("too many files"));
        o.verdict = Verdict::Crash;
        o.exit = Some(crate::sandbox::ExitInfo {
            code: None,
            signal: Some(11),
            signal_name: Some("SIGSEGV".into()),
        });
        assert!(msg(&o).contains("crashed with SIGSEGV"));
        o.verdict = Verdict::KernelExit;
        o.exit = Some(crate::sandbox::ExitInfo {
            code: Some(3),
            signal: None,
            signal_name: None,
        });
        assert!(msg(&o).contains("Python process exited (code 3)"));
        o.verdict = Verdict::NetworkBlocked;
        assert!(msg(&o).contains("there is no network access in this sandbox"));
        o.verdict = Verdict::InternalError;
        assert!(msg(&o).contains("not in your code"));
        o.state_lost = true;
        assert!(msg(&o).ends_with(STATE_LOST));
        o.verdict = Verdict::Error;
        assert_eq!(msg(&o), STATE_LOST);
        o.state_lost = false;
        assert_eq!(kill_message(&o, &limits), None);
        o.verdict = Verdict::Ok;
        assert_eq!(kill_message(&o, &limits), None);
        let custom = SandboxLimits {
            timeout: Duration::from_millis(2500),
            ..limits
        };
        o.verdict = Verdict::TimeoutWall;
        assert!(kill_message(&o, &custom).unwrap().contains("within 2.5s"));
    }

    #[test]
    fn cutting_respects_budgets() {
        let text: String = (0..200).map(|i| format!("line {i}\n")).collect();
        for budget in [0, 5, 30, 60, 100, 500] {
            assert!(keep_tail(&text, budget).chars().count() <= budget);
            assert!(head_tail(&text, budget).chars().count() <= budget);
            assert!(cut_middle(&text, budget).chars().count() <= budget);
            assert!(fit_keep_tail(&text, budget).chars().count() <= budget);
        }
        let t = keep_tail(&text, 100);
        assert!(t.starts_with("[... ") && t.ends_with("line 199\n"), "{t}");
        let h = head_tail(&text, 100);
        assert!(
            h.starts_with("line 0\n") && h.ends_with("line 199\n"),
            "{h}"
        );
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
