//! The compact rendering of a parsed traceback.

use std::fmt::Write as _;

use super::text::{cut_end, cut_middle, fit_keep_tail};
use super::{scrub_paths, Frame, Relation, SyntaxPos, Traceback};

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
