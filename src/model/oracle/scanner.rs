//! A small Python-aware scanner: string literals and comments masked out
//! (same byte offsets), logical lines, identifiers, and the questions the
//! fault injector asks of a statement (is every part of it evaluated, which
//! names does it look up, what does an import bind). Not a parser: enough to
//! place a fault where it certainly raises.

use std::collections::HashSet;
use std::ops::Range;

pub(super) const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case", "_", "type",
];

/// Statements that are not plain expression/assignment statements.
pub(super) const STATEMENT_KEYWORDS: &[&str] = &[
    "if", "elif", "else", "for", "while", "def", "class", "with", "try", "except", "finally",
    "async", "match", "case", "return", "yield", "raise", "del", "global", "nonlocal", "import",
    "from", "assert", "pass", "break", "continue", "lambda", "await", "type",
];

/// Words that make part of a statement conditional or deferred.
pub(super) const LAZY_WORDS: &[&str] = &[
    "if", "else", "for", "while", "and", "or", "lambda", "yield", "await", "async",
];

/// Block headers whose trailing colon may be dropped.
pub(super) const HEADER_KEYWORDS: &[&str] = &[
    "if", "elif", "else", "for", "while", "def", "class", "with", "try", "except", "finally",
];

/// Names a fresh IPython namespace (or Python) already defines.
pub(super) const PREDEFINED: &str =
    "ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup \
    BlockingIOError BrokenPipeError BufferError BytesWarning ChildProcessError \
    ConnectionAbortedError ConnectionError ConnectionRefusedError ConnectionResetError \
    DeprecationWarning EOFError Ellipsis EncodingWarning EnvironmentError Exception \
    ExceptionGroup False FileExistsError FileNotFoundError FloatingPointError FutureWarning \
    GeneratorExit IOError ImportError ImportWarning IndentationError IndexError \
    InterruptedError IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError \
    ModuleNotFoundError NameError None NotADirectoryError NotImplemented NotImplementedError \
    OSError OverflowError PendingDeprecationWarning PermissionError ProcessLookupError \
    RecursionError ReferenceError ResourceWarning RuntimeError RuntimeWarning \
    StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError SystemExit TabError \
    TimeoutError True TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError \
    UnicodeError UnicodeTranslateError UnicodeWarning UserWarning ValueError Warning \
    ZeroDivisionError abs aiter all anext any ascii bin bool breakpoint bytearray bytes \
    callable chr classmethod compile complex copyright credits delattr dict dir divmod \
    enumerate eval exec exit filter float format frozenset getattr globals hasattr hash help \
    hex id input int isinstance issubclass iter len license list locals map max memoryview min \
    next object oct open ord pow print property quit range repr reversed round set setattr \
    slice sorted staticmethod str sum super tuple type vars zip In Out get_ipython display";

pub(super) fn is_predefined(name: &str) -> bool {
    PREDEFINED.split_whitespace().any(|n| n == name)
}

pub(super) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

pub(super) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

pub(super) fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\\' | b'\x0c')
}

/// A string literal: `start..end` includes prefix and quotes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lit {
    pub(super) start: usize,
    pub(super) body: (usize, usize),
    pub(super) end: usize,
    pub(super) prefix_len: usize,
}

/// A logical line: `start..end` covers its physical lines and final newline.
#[derive(Debug, Clone, Copy)]
pub(super) struct Line {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) indent: usize,
}

impl Line {
    pub(super) fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

/// Python source with strings and comments masked out (same byte offsets),
/// split into logical lines.
pub(super) struct Source<'a> {
    pub(super) code: &'a str,
    /// `code` with string bodies and comments replaced by spaces (newlines
    /// kept); quotes and prefixes are kept.
    pub(super) masked: Vec<u8>,
    pub(super) lits: Vec<Lit>,
    pub(super) lines: Vec<Line>,
}

/// `b` with comments and string bodies blanked, and its string literals.
fn mask(b: &[u8]) -> (Vec<u8>, Vec<Lit>) {
    let n = b.len();
    let mut masked = b.to_vec();
    let mut lits = Vec::new();
    let mut i = 0;
    while i < n {
        match b[i] {
            b'#' => {
                while i < n && b[i] != b'\n' {
                    masked[i] = b' ';
                    i += 1;
                }
            }
            b'\'' | b'"' => {
                let lit = string_literal(b, i);
                for m in &mut masked[lit.body.0..lit.body.1] {
                    if *m != b'\n' {
                        *m = b' ';
                    }
                }
                i = lit.end.max(i + 1);
                lits.push(lit);
            }
            _ => i += 1,
        }
    }
    (masked, lits)
}

/// The string literal whose opening quote is at `i`, with its prefix; an
/// unterminated one ends at the end of its line (or of a triple-quoted
/// string, of the code).
fn string_literal(b: &[u8], i: usize) -> Lit {
    let n = b.len();
    let q = b[i];
    let mut p = i;
    while p > 0 && b[p - 1].is_ascii_alphabetic() && i - p < 2 {
        p -= 1;
    }
    let prefix_ok =
        b[p..i].iter().all(|c| b"rRbBuUfFtT".contains(c)) && (p == 0 || !is_ident_byte(b[p - 1]));
    let start = if prefix_ok { p } else { i };
    let triple = i + 2 < n && b[i + 1] == q && b[i + 2] == q;
    let body_start = if triple { i + 3 } else { i + 1 };
    let mut j = body_start;
    let (body_end, end) = loop {
        if j >= n {
            break (n, n);
        }
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if triple {
            if j + 2 < n && b[j] == q && b[j + 1] == q && b[j + 2] == q {
                break (j, j + 3);
            }
        } else if b[j] == q {
            break (j, j + 1);
        } else if b[j] == b'\n' {
            break (j, j);
        }
        j += 1;
    };
    Lit {
        start,
        body: (body_start.min(n), body_end.min(n)),
        end: end.min(n),
        prefix_len: i - start,
    }
}

/// Logical lines of masked code: a line continues while brackets are open,
/// after a backslash, or inside a string literal.
fn logical_lines(masked: &[u8], lits: &[Lit]) -> Vec<Line> {
    let n = masked.len();
    let mut lines = Vec::new();
    let mut depth: i64 = 0;
    let mut continued = false;
    let mut current: Option<usize> = None;
    let mut pos = 0;
    let mut lit_idx = 0;
    while pos < n {
        let line_end = masked[pos..]
            .iter()
            .position(|&c| c == b'\n')
            .map(|k| pos + k + 1)
            .unwrap_or(n);
        while lit_idx < lits.len() && lits[lit_idx].end <= pos {
            lit_idx += 1;
        }
        let in_string = lit_idx < lits.len() && lits[lit_idx].start < pos;
        if depth <= 0 && !continued && !in_string {
            if let Some(s) = current {
                lines.push(Line {
                    start: s,
                    end: pos,
                    indent: 0,
                });
            }
            current = Some(pos);
            depth = 0;
        }
        for &c in &masked[pos..line_end] {
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                _ => {}
            }
        }
        let body = masked[pos..line_end].trim_ascii_end();
        continued = body.ends_with(b"\\");
        pos = line_end;
    }
    if let Some(s) = current {
        lines.push(Line {
            start: s,
            end: n,
            indent: 0,
        });
    }
    for line in &mut lines {
        line.indent = masked[line.start..line.end]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count();
    }
    lines
}

impl<'a> Source<'a> {
    pub(super) fn scan(code: &'a str) -> Self {
        let (masked, lits) = mask(code.as_bytes());
        let lines = logical_lines(&masked, &lits);
        Source {
            code,
            masked,
            lits,
            lines,
        }
    }

    pub(super) fn masked_str(&self, r: Range<usize>) -> &str {
        // Masking only replaces whole characters with ASCII, so this holds.
        std::str::from_utf8(&self.masked[r]).unwrap_or("")
    }

    pub(super) fn is_blank_line(&self, line: &Line) -> bool {
        self.masked[line.range()].iter().all(|&c| is_blank(c))
    }

    /// Identifier spans in `r` (of the masked text).
    pub(super) fn words(&self, r: Range<usize>) -> Vec<Range<usize>> {
        let m = &self.masked;
        let mut out = Vec::new();
        let mut i = r.start;
        while i < r.end {
            if is_ident_start(m[i]) && (i == 0 || !is_ident_byte(m[i - 1])) {
                let s = i;
                while i < r.end && is_ident_byte(m[i]) {
                    i += 1;
                }
                out.push(s..i);
            } else {
                i += 1;
            }
        }
        out
    }

    pub(super) fn word(&self, r: &Range<usize>) -> &str {
        &self.code[r.clone()]
    }

    pub(super) fn all_words(&self) -> HashSet<&str> {
        self.words(0..self.masked.len())
            .into_iter()
            .map(|r| &self.code[r])
            .collect()
    }

    pub(super) fn first_word(&self, line: &Line) -> Option<&str> {
        let s = line.start + line.indent;
        self.words(s..line.end)
            .into_iter()
            .next()
            .filter(|w| w.start == s)
            .map(|w| &self.code[w])
    }

    pub(super) fn prev_non_blank(&self, pos: usize) -> Option<(usize, u8)> {
        (0..pos)
            .rev()
            .find(|&k| !is_blank(self.masked[k]))
            .map(|k| (k, self.masked[k]))
    }

    pub(super) fn next_non_blank(&self, pos: usize) -> Option<(usize, u8)> {
        (pos..self.masked.len())
            .find(|&k| !is_blank(self.masked[k]))
            .map(|k| (k, self.masked[k]))
    }

    /// Bracket depth before each byte of the line, relative to its start.
    pub(super) fn depths(&self, line: &Line) -> Vec<i64> {
        let mut d = 0;
        self.masked[line.range()]
            .iter()
            .map(|&c| {
                let before = d;
                match c {
                    b'(' | b'[' | b'{' => d += 1,
                    b')' | b']' | b'}' => d -= 1,
                    _ => {}
                }
                before
            })
            .collect()
    }

    /// Positions of plain `=` (assignment, not `==`, `<=`, `+=`, `:=`, …)
    /// at depth 0.
    pub(super) fn plain_assignments(&self, line: &Line) -> Vec<usize> {
        let m = &self.masked;
        let depths = self.depths(line);
        line.range()
            .filter(|&k| {
                m[k] == b'='
                    && depths[k - line.start] == 0
                    && (k == 0 || !b"=!<>+-*/%&|^@:".contains(&m[k - 1]))
                    && m.get(k + 1) != Some(&b'=')
            })
            .collect()
    }

    /// Where the evaluated part of a statement starts: after the last plain
    /// `=`, else the statement's start.
    pub(super) fn value_start(&self, line: &Line) -> usize {
        self.plain_assignments(line)
            .last()
            .map(|k| k + 1)
            .unwrap_or(line.start + line.indent)
    }

    /// A top-level simple statement every part of which is evaluated.
    pub(super) fn surely_evaluated(&self, line: &Line) -> bool {
        if line.indent != 0 || self.is_blank_line(line) {
            return false;
        }
        let first = self.masked[line.start];
        if !(is_ident_start(first) || b"([{-+~'\"".contains(&first)) {
            return false;
        }
        if let Some(w) = self.first_word(line) {
            if STATEMENT_KEYWORDS.contains(&w) {
                return false;
            }
        }
        let depths = self.depths(line);
        if line
            .range()
            .any(|k| self.masked[k] == b':' && depths[k - line.start] == 0)
        {
            return false;
        }
        !self
            .words(line.range())
            .iter()
            .any(|w| LAZY_WORDS.contains(&self.word(w)))
    }

    /// Identifier occurrences in `r` of `line` that are name lookups (not
    /// keywords, attributes, keyword-argument names or string prefixes).
    pub(super) fn name_uses(&self, line: &Line, from: usize) -> Vec<Range<usize>> {
        let depths = self.depths(line);
        self.words(from..line.end)
            .into_iter()
            .filter(|w| {
                let word = self.word(w);
                if KEYWORDS.contains(&word) {
                    return false;
                }
                if matches!(self.masked.get(w.end), Some(b'\'' | b'"')) {
                    return false;
                }
                if matches!(self.prev_non_blank(w.start), Some((_, b'.'))) {
                    return false;
                }
                // `name := value` binds.
                if let Some((k, b':')) = self.next_non_blank(w.end) {
                    if self.masked.get(k + 1) == Some(&b'=') {
                        return false;
                    }
                }
                if let Some((k, b'=')) = self.next_non_blank(w.end) {
                    if self.masked.get(k + 1) != Some(&b'=') && depths[w.start - line.start] > 0 {
                        return false;
                    }
                }
                true
            })
            .collect()
    }

    /// Names assigned with a plain `=` in lines before `before`.
    pub(super) fn assigned_names(&self, before: usize) -> HashSet<&str> {
        let mut out = HashSet::new();
        for line in &self.lines[..before] {
            let Some(&last) = self.plain_assignments(line).last() else {
                continue;
            };
            let depths = self.depths(line);
            for w in self.words(line.start..last) {
                let word = self.word(&w);
                if !KEYWORDS.contains(&word)
                    && depths[w.start - line.start] == 0
                    && !matches!(self.prev_non_blank(w.start), Some((_, b'.')))
                {
                    out.insert(word);
                }
            }
        }
        out
    }

    pub(super) fn replace(&self, r: Range<usize>, with: &str) -> String {
        format!("{}{}{}", &self.code[..r.start], with, &self.code[r.end..])
    }

    pub(super) fn line_number(&self, pos: usize) -> usize {
        self.code[..pos].bytes().filter(|&c| c == b'\n').count() + 1
    }

    pub(super) fn mentions_default_mappings(&self) -> bool {
        let words = self.all_words();
        ["defaultdict", "Counter", "setdefault"]
            .iter()
            .any(|w| words.contains(w))
    }

    /// Whether the literal is a whole element of a subscript: `x['k']`,
    /// `x[a, 'k']`, `x[['k', 'j']]`.
    pub(super) fn subscript_key(&self, lit: &Lit, line: &Line) -> bool {
        let Some((_, before)) = self.prev_non_blank(lit.start) else {
            return false;
        };
        let Some((_, after)) = self.next_non_blank(lit.end) else {
            return false;
        };
        if !matches!(before, b'[' | b',') || !matches!(after, b']' | b',') {
            return false;
        }
        let Some(open) = self.enclosing_open(lit.start, line.start) else {
            return false;
        };
        if self.masked[open] != b'[' {
            return false;
        }
        if self.is_subscript(open) {
            return true;
        }
        // A list of keys directly inside a subscript: x[['a', 'b']].
        match (
            self.prev_non_blank(open),
            self.enclosing_open(open, line.start),
        ) {
            (Some((p, b'[')), Some(outer)) => p == outer && self.is_subscript(outer),
            _ => false,
        }
    }

    pub(super) fn enclosing_open(&self, pos: usize, floor: usize) -> Option<usize> {
        let mut depth = 0;
        for k in (floor..pos).rev() {
            match self.masked[k] {
                b')' | b']' | b'}' => depth += 1,
                b'(' | b'[' | b'{' => {
                    if depth == 0 {
                        return Some(k);
                    }
                    depth -= 1;
                }
                _ => {}
            }
        }
        None
    }

    pub(super) fn matching_close(&self, open: usize) -> Option<usize> {
        let mut depth = 0;
        for k in open..self.masked.len() {
            match self.masked[k] {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// `[` at `open` follows an expression (a subscript), not an operator
    /// or keyword (a list display).
    pub(super) fn is_subscript(&self, open: usize) -> bool {
        match self.prev_non_blank(open) {
            Some((_, b')' | b']' | b'\'' | b'"')) => true,
            Some((k, c)) if is_ident_byte(c) => {
                let mut s = k;
                while s > 0 && is_ident_byte(self.masked[s - 1]) {
                    s -= 1;
                }
                let word = &self.code[s..=k];
                // `return [...]`, `in [...]`: a list display after a keyword.
                word == "_" || !KEYWORDS.contains(&word)
            }
            _ => false,
        }
    }

    /// Names an import statement binds (`None` for `import *` and
    /// `__future__`).
    pub(super) fn import_bindings(&self, line: &Line) -> Option<Vec<String>> {
        let text = self
            .masked_str(line.range())
            .replace(['\\', '\n', '(', ')'], " ");
        let text = text.trim();
        let (names, from) = if let Some(rest) = text.strip_prefix("import ") {
            (rest.to_string(), false)
        } else if let Some(rest) = text.strip_prefix("from ") {
            let (module, names) = rest.split_once(" import ")?;
            if module.trim() == "__future__" {
                return None;
            }
            (names.to_string(), true)
        } else {
            return None;
        };
        let mut out = Vec::new();
        for item in names.split(',') {
            let parts: Vec<&str> = item.split_whitespace().collect();
            match parts.as_slice() {
                [] => {}
                ["*"] => return None,
                [_, "as", alias] => out.push(alias.to_string()),
                [name] if from => out.push(name.to_string()),
                [name] => out.push(name.split('.').next()?.to_string()),
                _ => return None,
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Whether `name` is bound anywhere other than by the import line `skip`.
    pub(super) fn bound_elsewhere(&self, name: &str, skip: usize) -> bool {
        for (idx, line) in self.lines.iter().enumerate() {
            if idx == skip {
                continue;
            }
            let first = self.first_word(line);
            if matches!(first, Some("import" | "from"))
                && self
                    .words(line.range())
                    .iter()
                    .any(|w| self.word(w) == name)
            {
                return true;
            }
            let words = self.words(line.range());
            for (i, w) in words.iter().enumerate() {
                if self.word(w) != name {
                    continue;
                }
                if i > 0
                    && matches!(
                        self.word(&words[i - 1]),
                        "def" | "class" | "as" | "global" | "nonlocal"
                    )
                {
                    return true;
                }
                // A `for` target, or anything bound between `for` and `in`.
                let last_for = words[..i].iter().rposition(|x| self.word(x) == "for");
                if let Some(f) = last_for {
                    if !words[f..i].iter().any(|x| self.word(x) == "in") {
                        return true;
                    }
                }
            }
            // An assignment target (not `name.attr = …` or `name[k] = …`).
            if let Some(&last) = self.plain_assignments(line).last() {
                let binds = self.words(line.start..last).into_iter().any(|w| {
                    self.word(&w) == name
                        && !matches!(self.prev_non_blank(w.start), Some((_, b'.')))
                        && !matches!(self.next_non_blank(w.end), Some((_, b'.' | b'[' | b'(')))
                });
                if binds {
                    return true;
                }
            }
            // Walrus.
            if line
                .range()
                .any(|k| self.masked[k] == b':' && self.masked.get(k + 1) == Some(&b'='))
                && words.iter().any(|w| self.word(w) == name)
            {
                return true;
            }
        }
        false
    }

    /// `a.b.c` right before `[`, with nothing (but an operator) before it.
    pub(super) fn name_chain_before(&self, open: usize) -> Option<Range<usize>> {
        let m = &self.masked;
        let mut s = open;
        while s > 0 && (is_ident_byte(m[s - 1]) || m[s - 1] == b'.') {
            s -= 1;
        }
        if s == open {
            return None;
        }
        let text = &self.code[s..open];
        let parts: Vec<&str> = text.split('.').collect();
        if parts
            .iter()
            .any(|p| p.is_empty() || !is_identifier(p) || KEYWORDS.contains(p))
        {
            return None;
        }
        if s > 0 && matches!(m[s - 1], b'\'' | b'"') {
            return None;
        }
        Some(s..open)
    }

    /// Whether the chain's base name is assigned a dict somewhere.
    pub(super) fn is_mapping(&self, chain: &str) -> bool {
        let base = chain.split('.').next().unwrap_or(chain);
        self.lines.iter().any(|line| {
            let Some(&eq) = self.plain_assignments(line).last() else {
                return false;
            };
            let target = self.code[line.start..eq].trim();
            let value = self.masked_str(eq + 1..line.end).trim_start();
            target == base && (value.starts_with('{') || value.starts_with("dict("))
        })
    }
}

pub(super) fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && is_ident_start(b[0]) && b.iter().all(|&c| is_ident_byte(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::oracle::fault::tests::TABLE;

    #[test]
    fn scanner_masks_strings_and_comments() {
        let src = Source::scan(TABLE);
        let masked = String::from_utf8(src.masked.clone()).unwrap();
        assert!(!masked.contains("price,"));
        assert!(!masked.contains("tiny"));
        assert!(masked.contains("rows = list(csv.DictReader"));
        // The triple-quoted string is inside one logical line.
        let data_line = src
            .lines
            .iter()
            .find(|l| TABLE[l.range()].starts_with("data ="))
            .unwrap();
        assert!(TABLE[data_line.range()].contains("b,5"));
    }
}
