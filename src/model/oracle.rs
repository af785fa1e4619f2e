//! `oracle` and `oracle:faults`: deterministic stand-ins that answer with
//! the task's reference solution. With faults, round 0 carries exactly one
//! injected fault (chosen by a stable hash of the task id) that makes the
//! code raise; rounds ≥ 1 reply with the exact reference, so the repair loop
//! is exercised end to end without a real model.
//!
//! Faults are injected into the source text with a small Python-aware
//! scanner (strings, comments, brackets, logical lines), not a parser. Each
//! fault is placed only where it must raise: compile-time faults anywhere;
//! run-time faults only on top-level simple statements that contain no
//! conditional or lazy construct (`if`/`else`, `and`/`or`, `lambda`,
//! comprehensions), so the faulty sub-expression is certainly evaluated
//! (the reference ran cleanly, so every such statement is reached).

use std::collections::HashSet;
use std::ops::Range;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ChatRequest, ModelClient, ModelError, Reply, Usage};

/// The deterministic reference-solution model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Oracle {
    pub faults: bool,
}

impl Oracle {
    /// The code this oracle writes for `request`.
    pub fn code_for(&self, request: &ChatRequest) -> Result<String, ModelError> {
        let reference = request
            .reference
            .as_deref()
            .filter(|r| !r.trim().is_empty());
        let reference = reference.ok_or_else(|| {
            ModelError::Config(format!(
                "{}: task {} has no reference solution",
                self.label(),
                request.task_id
            ))
        })?;
        if self.faults && request.round == 0 {
            Ok(inject_fault(reference, &request.task_id).code)
        } else {
            Ok(reference.to_string())
        }
    }

    fn label(&self) -> &'static str {
        if self.faults {
            "oracle:faults"
        } else {
            "oracle"
        }
    }
}

#[async_trait::async_trait]
impl ModelClient for Oracle {
    fn name(&self) -> String {
        self.label().to_string()
    }

    fn is_synthetic(&self) -> bool {
        true
    }

    fn vision(&self) -> bool {
        false
    }

    async fn chat(&self, request: &ChatRequest) -> Result<Reply, ModelError> {
        let started = Instant::now();
        let code = self.code_for(request)?;
        Ok(Reply {
            text: markdown(&code),
            usage: Usage::default(),
            attempts: 1,
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
            finish_reason: Some("stop".into()),
            fault: None,
        })
    }
}

/// A reply with one fenced python block (a longer fence if the code itself
/// contains three backticks).
fn markdown(code: &str) -> String {
    let mut fence = "```".to_string();
    while code.contains(&fence) {
        fence.push('`');
    }
    let newline = if code.ends_with('\n') { "" } else { "\n" };
    format!("Here is the solution.\n\n{fence}python\n{code}{newline}{fence}\n")
}

// ---- faults --------------------------------------------------------------

/// The kinds of injected fault, in the order they are tried (starting at
/// the one the task id's hash picks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A used variable misspelled at its use site → NameError.
    UndefinedName,
    /// A string key in a subscript (`df['col']`, `row["col"]`) misspelled →
    /// KeyError.
    WrongColumn,
    /// A closing parenthesis (or a block's colon) dropped → SyntaxError.
    SyntaxError,
    /// The first import whose name is then used removed → NameError.
    MissingImport,
    /// An index one past the end (`x[-1]`, `x[0]`, `x[len(x) - 1]` →
    /// `x[len(x)]`) → IndexError (KeyError for mappings).
    OffByOne,
    /// The fallback that always applies: a call of an undefined helper at
    /// the top → NameError.
    UndefinedHelper,
}

pub const FAULT_KINDS: [FaultKind; 5] = [
    FaultKind::UndefinedName,
    FaultKind::WrongColumn,
    FaultKind::SyntaxError,
    FaultKind::MissingImport,
    FaultKind::OffByOne,
];

/// Faulty code and what was done to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    pub code: String,
    /// E.g. "renamed `total` to `totla` on line 4".
    pub note: String,
}

/// A stable 64-bit hash of the task id (SHA-256, first 8 bytes).
fn stable_hash(task_id: &str) -> u64 {
    let digest = Sha256::digest(task_id.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// The order in which fault kinds are tried for this task.
pub fn fault_order(task_id: &str) -> [FaultKind; 5] {
    let start = (stable_hash(task_id) % FAULT_KINDS.len() as u64) as usize;
    std::array::from_fn(|i| FAULT_KINDS[(start + i) % FAULT_KINDS.len()])
}

/// One fault, deterministic in (`code`, `task_id`), that makes the code raise.
pub fn inject_fault(code: &str, task_id: &str) -> Fault {
    let seed = stable_hash(task_id) >> 8;
    for kind in fault_order(task_id) {
        if let Some(fault) = apply_fault(code, kind, seed) {
            if fault.code != code {
                return fault;
            }
        }
    }
    undefined_helper(code)
}

/// Apply one kind of fault, choosing among candidate sites by `seed`;
/// `None` when this kind cannot be placed so that it certainly raises.
pub fn apply_fault(code: &str, kind: FaultKind, seed: u64) -> Option<Fault> {
    let src = Source::scan(code);
    match kind {
        FaultKind::UndefinedName => src.undefined_name(seed),
        FaultKind::WrongColumn => src.wrong_column(seed),
        FaultKind::SyntaxError => src.syntax_error(seed),
        FaultKind::MissingImport => src.missing_import(),
        FaultKind::OffByOne => src.off_by_one(seed),
        FaultKind::UndefinedHelper => Some(undefined_helper(code)),
    }
}

fn undefined_helper(code: &str) -> Fault {
    let src = Source::scan(code);
    let words = src.all_words();
    let mut helper = "undefined_helper".to_string();
    let mut n = 2;
    while words.contains(helper.as_str()) {
        helper = format!("undefined_helper_{n}");
        n += 1;
    }
    // After any `from __future__` imports, which must stay first.
    let at = src
        .lines
        .iter()
        .filter(|l| {
            l.indent == 0
                && src
                    .masked_str(l.range())
                    .trim_start()
                    .starts_with("from __future__")
        })
        .map(|l| l.end)
        .max()
        .unwrap_or(0);
    let mut out = String::with_capacity(code.len() + 40);
    out.push_str(&code[..at]);
    if at > 0 && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!("_check = {helper}()\n"));
    out.push_str(&code[at..]);
    Fault {
        kind: FaultKind::UndefinedHelper,
        code: out,
        note: format!("inserted a call of the undefined `{helper}`"),
    }
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case", "_", "type",
];

/// Statements that are not plain expression/assignment statements.
const STATEMENT_KEYWORDS: &[&str] = &[
    "if", "elif", "else", "for", "while", "def", "class", "with", "try", "except", "finally",
    "async", "match", "case", "return", "yield", "raise", "del", "global", "nonlocal", "import",
    "from", "assert", "pass", "break", "continue", "lambda", "await", "type",
];

/// Words that make part of a statement conditional or deferred.
const LAZY_WORDS: &[&str] = &[
    "if", "else", "for", "while", "and", "or", "lambda", "yield", "await", "async",
];

/// Block headers whose trailing colon may be dropped.
const HEADER_KEYWORDS: &[&str] = &[
    "if", "elif", "else", "for", "while", "def", "class", "with", "try", "except", "finally",
];

/// Names a fresh IPython namespace (or Python) already defines.
const PREDEFINED: &str =
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

fn is_predefined(name: &str) -> bool {
    PREDEFINED.split_whitespace().any(|n| n == name)
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b >= 0x80
}

fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\\' | b'\x0c')
}

/// A string literal: `start..end` includes prefix and quotes.
#[derive(Debug, Clone, Copy)]
struct Lit {
    start: usize,
    body: (usize, usize),
    end: usize,
    prefix_len: usize,
}

/// A logical line: `start..end` covers its physical lines and final newline.
#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
    indent: usize,
}

impl Line {
    fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

/// Python source with strings and comments masked out (same byte offsets),
/// split into logical lines.
struct Source<'a> {
    code: &'a str,
    /// `code` with string bodies and comments replaced by spaces (newlines
    /// kept); quotes and prefixes are kept.
    masked: Vec<u8>,
    lits: Vec<Lit>,
    lines: Vec<Line>,
}

impl<'a> Source<'a> {
    fn scan(code: &'a str) -> Self {
        let b = code.as_bytes();
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
                q @ (b'\'' | b'"') => {
                    let mut p = i;
                    while p > 0 && b[p - 1].is_ascii_alphabetic() && i - p < 2 {
                        p -= 1;
                    }
                    let prefix_ok = b[p..i].iter().all(|c| b"rRbBuUfFtT".contains(c))
                        && (p == 0 || !is_ident_byte(b[p - 1]));
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
                    let body_end = body_end.min(n);
                    for m in &mut masked[body_start.min(n)..body_end] {
                        if *m != b'\n' {
                            *m = b' ';
                        }
                    }
                    lits.push(Lit {
                        start,
                        body: (body_start.min(n), body_end),
                        end: end.min(n),
                        prefix_len: i - start,
                    });
                    i = end.max(i + 1);
                }
                _ => i += 1,
            }
        }

        // Logical lines.
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
        Source {
            code,
            masked,
            lits,
            lines,
        }
    }

    fn masked_str(&self, r: Range<usize>) -> &str {
        // Masking only replaces whole characters with ASCII, so this holds.
        std::str::from_utf8(&self.masked[r]).unwrap_or("")
    }

    fn is_blank_line(&self, line: &Line) -> bool {
        self.masked[line.range()].iter().all(|&c| is_blank(c))
    }

    /// Identifier spans in `r` (of the masked text).
    fn words(&self, r: Range<usize>) -> Vec<Range<usize>> {
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

    fn word(&self, r: &Range<usize>) -> &str {
        &self.code[r.clone()]
    }

    fn all_words(&self) -> HashSet<&str> {
        self.words(0..self.masked.len())
            .into_iter()
            .map(|r| &self.code[r])
            .collect()
    }

    fn first_word(&self, line: &Line) -> Option<&str> {
        let s = line.start + line.indent;
        self.words(s..line.end)
            .into_iter()
            .next()
            .filter(|w| w.start == s)
            .map(|w| &self.code[w])
    }

    fn prev_non_blank(&self, pos: usize) -> Option<(usize, u8)> {
        (0..pos)
            .rev()
            .find(|&k| !is_blank(self.masked[k]))
            .map(|k| (k, self.masked[k]))
    }

    fn next_non_blank(&self, pos: usize) -> Option<(usize, u8)> {
        (pos..self.masked.len())
            .find(|&k| !is_blank(self.masked[k]))
            .map(|k| (k, self.masked[k]))
    }

    /// Bracket depth before each byte of the line, relative to its start.
    fn depths(&self, line: &Line) -> Vec<i64> {
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
    fn plain_assignments(&self, line: &Line) -> Vec<usize> {
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
    fn value_start(&self, line: &Line) -> usize {
        self.plain_assignments(line)
            .last()
            .map(|k| k + 1)
            .unwrap_or(line.start + line.indent)
    }

    /// A top-level simple statement every part of which is evaluated.
    fn surely_evaluated(&self, line: &Line) -> bool {
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
    fn name_uses(&self, line: &Line, from: usize) -> Vec<Range<usize>> {
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
    fn assigned_names(&self, before: usize) -> HashSet<&str> {
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

    fn replace(&self, r: Range<usize>, with: &str) -> String {
        format!("{}{}{}", &self.code[..r.start], with, &self.code[r.end..])
    }

    fn line_number(&self, pos: usize) -> usize {
        self.code[..pos].bytes().filter(|&c| c == b'\n').count() + 1
    }

    fn mentions_default_mappings(&self) -> bool {
        let words = self.all_words();
        ["defaultdict", "Counter", "setdefault"]
            .iter()
            .any(|w| words.contains(w))
    }

    // ---- the faults ----

    fn undefined_name(&self, seed: u64) -> Option<Fault> {
        let mut preferred = Vec::new();
        let mut other = Vec::new();
        for (idx, line) in self.lines.iter().enumerate() {
            if !self.surely_evaluated(line) {
                continue;
            }
            let assigned = self.assigned_names(idx);
            for w in self.name_uses(line, self.value_start(line)) {
                if assigned.contains(self.word(&w)) {
                    preferred.push(w);
                } else {
                    other.push(w);
                }
            }
        }
        let pool = if preferred.is_empty() {
            other
        } else {
            preferred
        };
        let site = pick(&pool, seed)?.clone();
        let name = self.word(&site);
        let words = self.all_words();
        let typo = misspell(name, |c| {
            words.contains(c) || is_predefined(c) || KEYWORDS.contains(&c) || !is_identifier(c)
        });
        Some(Fault {
            kind: FaultKind::UndefinedName,
            code: self.replace(site.clone(), &typo),
            note: format!(
                "renamed `{name}` to `{typo}` on line {}",
                self.line_number(site.start)
            ),
        })
    }

    fn wrong_column(&self, seed: u64) -> Option<Fault> {
        if self.mentions_default_mappings() {
            return None;
        }
        let bodies: HashSet<&str> = self
            .lits
            .iter()
            .map(|l| &self.code[l.body.0..l.body.1])
            .collect();
        let mut sites = Vec::new();
        for line in &self.lines {
            if !self.surely_evaluated(line) {
                continue;
            }
            let from = self.value_start(line);
            for lit in self
                .lits
                .iter()
                .filter(|l| l.start >= from && l.end <= line.end)
            {
                let prefix = &self.code[lit.start..lit.start + lit.prefix_len];
                if !prefix.chars().all(|c| matches!(c, 'r' | 'R' | 'u' | 'U')) {
                    continue;
                }
                let body = &self.code[lit.body.0..lit.body.1];
                if body.is_empty() || body.contains(['\\', '\'', '"', '\n', '{', '}']) {
                    continue;
                }
                if self.subscript_key(lit, line) {
                    sites.push(*lit);
                }
            }
        }
        let lit = *pick(&sites, seed)?;
        let body = &self.code[lit.body.0..lit.body.1];
        let typo = misspell(body, |c| bodies.contains(c));
        Some(Fault {
            kind: FaultKind::WrongColumn,
            code: self.replace(lit.body.0..lit.body.1, &typo),
            note: format!(
                "misspelled the key '{body}' as '{typo}' on line {}",
                self.line_number(lit.start)
            ),
        })
    }

    /// Whether the literal is a whole element of a subscript: `x['k']`,
    /// `x[a, 'k']`, `x[['k', 'j']]`.
    fn subscript_key(&self, lit: &Lit, line: &Line) -> bool {
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

    fn enclosing_open(&self, pos: usize, floor: usize) -> Option<usize> {
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

    fn matching_close(&self, open: usize) -> Option<usize> {
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
    fn is_subscript(&self, open: usize) -> bool {
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

    fn syntax_error(&self, seed: u64) -> Option<Fault> {
        let parens: Vec<usize> = self
            .lines
            .iter()
            .filter_map(|l| l.range().rev().find(|&k| self.masked[k] == b')'))
            .collect();
        if let Some(&k) = pick(&parens, seed) {
            return Some(Fault {
                kind: FaultKind::SyntaxError,
                code: self.replace(k..k + 1, ""),
                note: format!(
                    "dropped a closing parenthesis on line {}",
                    self.line_number(k)
                ),
            });
        }
        let colons: Vec<usize> = self
            .lines
            .iter()
            .filter(|l| {
                self.first_word(l)
                    .is_some_and(|w| HEADER_KEYWORDS.contains(&w))
            })
            .filter_map(|l| {
                let k = l.range().rev().find(|&k| !is_blank(self.masked[k]))?;
                (self.masked[k] == b':').then_some(k)
            })
            .collect();
        let &k = pick(&colons, seed)?;
        Some(Fault {
            kind: FaultKind::SyntaxError,
            code: self.replace(k..k + 1, ""),
            note: format!(
                "dropped the colon of a block on line {}",
                self.line_number(k)
            ),
        })
    }

    /// Names an import statement binds (`None` for `import *` and
    /// `__future__`).
    fn import_bindings(&self, line: &Line) -> Option<Vec<String>> {
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
    fn bound_elsewhere(&self, name: &str, skip: usize) -> bool {
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

    fn missing_import(&self) -> Option<Fault> {
        for (idx, line) in self.lines.iter().enumerate() {
            if line.indent != 0 || !matches!(self.first_word(line), Some("import" | "from")) {
                continue;
            }
            let Some(bound) = self.import_bindings(line) else {
                continue;
            };
            let used = bound.iter().find(|name| {
                !self.bound_elsewhere(name, idx)
                    && self.lines[idx + 1..].iter().any(|l| {
                        self.surely_evaluated(l)
                            && self
                                .name_uses(l, self.value_start(l))
                                .iter()
                                .any(|w| self.word(w) == name.as_str())
                    })
            });
            if let Some(name) = used {
                let statement = self.code[line.range()].trim_end();
                return Some(Fault {
                    kind: FaultKind::MissingImport,
                    code: self.replace(line.range(), ""),
                    note: format!(
                        "removed `{statement}` (line {}); `{name}` is used next",
                        self.line_number(line.start)
                    ),
                });
            }
        }
        None
    }

    fn off_by_one(&self, seed: u64) -> Option<Fault> {
        if self.mentions_default_mappings() {
            return None;
        }
        let mut sites: Vec<(Range<usize>, String)> = Vec::new();
        for line in &self.lines {
            if !self.surely_evaluated(line) {
                continue;
            }
            let from = self.value_start(line);
            for open in from..line.end {
                if self.masked[open] != b'[' {
                    continue;
                }
                let Some(chain) = self.name_chain_before(open) else {
                    continue;
                };
                let Some(close) = self.matching_close(open) else {
                    continue;
                };
                let inner = self.code[open + 1..close].trim();
                let chain_text = &self.code[chain.clone()];
                if chain_text.ends_with(".str") || self.is_mapping(chain_text) {
                    continue;
                }
                let base = ["iloc", "iat", "loc", "at"]
                    .iter()
                    .find_map(|acc| chain_text.strip_suffix(&format!(".{acc}")))
                    .unwrap_or(chain_text);
                let is_int = {
                    let digits = inner.strip_prefix('-').unwrap_or(inner).trim_start();
                    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
                };
                if is_int {
                    sites.push((open + 1..close, format!("len({base})")));
                } else if let Some(len_arg) = len_minus_one(inner) {
                    sites.push((open + 1..close, format!("len({len_arg})")));
                }
            }
        }
        let (range, with) = pick(&sites, seed)?.clone();
        let before = self.code[range.clone()].trim().to_string();
        Some(Fault {
            kind: FaultKind::OffByOne,
            code: self.replace(range.clone(), &with),
            note: format!(
                "index `{before}` → `{with}` (one past the end) on line {}",
                self.line_number(range.start)
            ),
        })
    }

    /// `a.b.c` right before `[`, with nothing (but an operator) before it.
    fn name_chain_before(&self, open: usize) -> Option<Range<usize>> {
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
    fn is_mapping(&self, chain: &str) -> bool {
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

/// `len(x) - 1` → `x`.
fn len_minus_one(inner: &str) -> Option<&str> {
    let rest = inner.strip_prefix("len")?.trim_start().strip_prefix('(')?;
    let (arg, tail) = rest.split_once(')')?;
    let tail: String = tail.split_whitespace().collect();
    let arg = arg.trim();
    let ok = tail == "-1"
        && !arg.is_empty()
        && arg
            .split('.')
            .all(|p| is_identifier(p) && !KEYWORDS.contains(&p));
    ok.then_some(arg)
}

fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && is_ident_start(b[0]) && b.iter().all(|&c| is_ident_byte(c))
}

fn pick<T>(items: &[T], seed: u64) -> Option<&T> {
    if items.is_empty() {
        None
    } else {
        items.get((seed % items.len() as u64) as usize)
    }
}

/// A plausible misspelling of `s` that `taken` rejects not: swap two
/// adjacent characters, else drop one, else double the last, else number.
fn misspell(s: &str, taken: impl Fn(&str) -> bool) -> String {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len();
    let mut candidates = Vec::new();
    if n >= 3 {
        // Towards the end first (`total` → `totla`); never the first char.
        for k in (1..n - 1).rev() {
            if chars[k] != chars[k + 1] {
                let mut c = chars.clone();
                c.swap(k, k + 1);
                candidates.push(c.into_iter().collect::<String>());
            }
        }
    }
    if n >= 4 {
        let mut c = chars.clone();
        c.remove(n / 2);
        candidates.push(c.into_iter().collect());
    }
    if let Some(&last) = chars.last() {
        candidates.push(format!("{s}{last}"));
    }
    if let Some(c) = candidates.into_iter().find(|c| c != s && !taken(c)) {
        return c;
    }
    (2..)
        .map(|k| format!("{s}{k}"))
        .find(|c| !taken(c))
        .expect("some numbered name is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "import math\nimport statistics\n\nvalues = [3, 1, 4, 1, 5, 9, 2, 6]\ntotal = sum(values)\nmean = total / len(values)\nspread = statistics.pstdev(values)\nlast = values[-1]\nanswer = round(mean + spread / math.sqrt(len(values)), 3)\n";

    const TABLE: &str = "import csv\nimport io\n\n# a tiny table\ndata = \"\"\"name,price\na,3\nb,5\n\"\"\"\nrows = list(csv.DictReader(io.StringIO(data)))\nfirst = rows[0]\nprice = float(first['price'])\nanswer = price * 2\nprint(f\"answer={answer}\")\n";

    const FUNCS: &str = "def solve(xs):\n    best = None\n    for x in xs:\n        if best is None or x > best:\n            best = x\n    return best\n\nanswer = solve([4, 8, 2])\n";

    const PANDAS: &str = "import pandas as pd\n\ndf = pd.read_csv('sales.csv')\ndf['total'] = df['price'] * df[\"qty\"]\nbest = df.sort_values('total').iloc[-1]\nanswer = df[['price', 'qty']].sum().sum()\n";

    const SAMPLES: &[&str] = &[STATS, TABLE, FUNCS, PANDAS];

    fn parens_balanced(code: &str) -> bool {
        let src = Source::scan(code);
        let open = src.masked.iter().filter(|&&c| c == b'(').count();
        let close = src.masked.iter().filter(|&&c| c == b')').count();
        open == close
    }

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

    #[test]
    fn undefined_name_renames_a_used_variable() {
        let f = apply_fault(STATS, FaultKind::UndefinedName, 0).unwrap();
        assert_ne!(f.code, STATS);
        assert_eq!(f.kind, FaultKind::UndefinedName);
        // Exactly one identifier changed, into something not in the code.
        let src = Source::scan(STATS);
        let before = src.all_words();
        let fsrc = Source::scan(&f.code);
        let new: Vec<&str> = fsrc
            .all_words()
            .into_iter()
            .filter(|w| !before.contains(w))
            .collect();
        assert_eq!(new.len(), 1, "{f:?}");
        assert!(!is_predefined(new[0]));
        // Never inside the function body of FUNCS (not certainly run).
        for seed in 0..20 {
            let f = apply_fault(FUNCS, FaultKind::UndefinedName, seed).unwrap();
            let changed = FUNCS
                .lines()
                .zip(f.code.lines())
                .find(|(a, b)| a != b)
                .unwrap();
            assert!(changed.0.starts_with("answer"), "{changed:?}");
        }
    }

    #[test]
    fn wrong_column_misspells_a_read_key_only() {
        for seed in 0..12 {
            let f = apply_fault(PANDAS, FaultKind::WrongColumn, seed).unwrap();
            assert_ne!(f.code, PANDAS);
            // The assigned column `total` is never the one misspelled.
            assert!(f.code.contains("df['total'] ="), "{}", f.code);
            assert!(
                f.note.contains("price") || f.note.contains("qty"),
                "{}",
                f.note
            );
        }
        let f = apply_fault(TABLE, FaultKind::WrongColumn, 0).unwrap();
        assert!(f.code.contains("first['priec']"), "{}", f.code);
        // No subscripted string: not applicable.
        assert!(apply_fault(STATS, FaultKind::WrongColumn, 0).is_none());
        // defaultdict/Counter return defaults instead of raising.
        let counter = "from collections import Counter\nc = Counter('abc')\nanswer = c['a']\n";
        assert!(apply_fault(counter, FaultKind::WrongColumn, 0).is_none());
    }

    #[test]
    fn syntax_error_unbalances_or_drops_a_colon() {
        for code in SAMPLES {
            let f = apply_fault(code, FaultKind::SyntaxError, 3).unwrap();
            assert_ne!(f.code, *code);
            assert!(!parens_balanced(&f.code), "{}", f.code);
        }
        let no_parens = "x = 1\nif x:\n    answer = x\n";
        let f = apply_fault(no_parens, FaultKind::SyntaxError, 0).unwrap();
        assert_eq!(f.code, "x = 1\nif x\n    answer = x\n");
        // A parenthesis inside a string is not a parenthesis.
        let in_string = "answer = ')'\n";
        assert!(apply_fault(in_string, FaultKind::SyntaxError, 0).is_none());
    }

    #[test]
    fn missing_import_removes_a_used_import() {
        let f = apply_fault(STATS, FaultKind::MissingImport, 0).unwrap();
        assert!(!f.code.contains("import math"));
        assert!(f.code.contains("import statistics"));
        // `os` is only used inside a function: skip it, take `json`.
        let code = "import os\nimport json\n\ndef f():\n    return os.getcwd()\n\nanswer = json.dumps([1])\n";
        let f = apply_fault(code, FaultKind::MissingImport, 0).unwrap();
        assert!(
            f.code.contains("import os") && !f.code.contains("import json"),
            "{}",
            f.code
        );
        // Imported twice: removing one would not raise.
        let twice = "import math\nimport math\nanswer = math.pi\n";
        assert!(apply_fault(twice, FaultKind::MissingImport, 0).is_none());
        let rebound = "import math\nmath = 3\nanswer = math\n";
        assert!(apply_fault(rebound, FaultKind::MissingImport, 0).is_none());
        let configured = "import json\njson.x = 1\nanswer = json.dumps(1)\n";
        let f = apply_fault(configured, FaultKind::MissingImport, 0).unwrap();
        assert!(!f.code.contains("import json"));
        let none = "answer = 1 + 2\n";
        assert!(apply_fault(none, FaultKind::MissingImport, 0).is_none());
        let aliased = "from math import sqrt as root\nanswer = root(4)\n";
        let f = apply_fault(aliased, FaultKind::MissingImport, 0).unwrap();
        assert_eq!(f.code, "answer = root(4)\n");
    }

    #[test]
    fn off_by_one_indexes_past_the_end() {
        let f = apply_fault(STATS, FaultKind::OffByOne, 0).unwrap();
        assert!(f.code.contains("last = values[len(values)]"), "{}", f.code);
        let f = apply_fault(PANDAS, FaultKind::OffByOne, 0);
        assert!(f.is_none(), "the chain ends in a call: {f:?}");
        let iloc = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\nanswer = df.iloc[0]\n";
        let f = apply_fault(iloc, FaultKind::OffByOne, 0).unwrap();
        assert!(f.code.contains("df.iloc[len(df)]"), "{}", f.code);
        let len = "xs = [1, 2]\nanswer = xs[len(xs) - 1]\n";
        let f = apply_fault(len, FaultKind::OffByOne, 0).unwrap();
        assert_eq!(f.code, "xs = [1, 2]\nanswer = xs[len(xs)]\n");
        let dict = "d = {0: 'a', 1: 'b'}\nanswer = d[0]\n";
        assert!(apply_fault(dict, FaultKind::OffByOne, 0).is_none());
        let target = "xs = [1]\nxs[0] = 2\nanswer = 3\n";
        assert!(apply_fault(target, FaultKind::OffByOne, 0).is_none());
    }

    #[test]
    fn fallback_always_applies() {
        let bare = "answer = 42\n";
        for kind in [
            FaultKind::WrongColumn,
            FaultKind::SyntaxError,
            FaultKind::MissingImport,
            FaultKind::OffByOne,
        ] {
            assert!(apply_fault(bare, kind, 0).is_none(), "{kind:?}");
        }
        // UndefinedName: `42` has no name to rename.
        assert!(apply_fault(bare, FaultKind::UndefinedName, 0).is_none());
        let f = inject_fault(bare, "any");
        assert_eq!(f.kind, FaultKind::UndefinedHelper);
        assert_eq!(f.code, "_check = undefined_helper()\nanswer = 42\n");
        let future = "from __future__ import annotations\nanswer = 42";
        let f = inject_fault(future, "t");
        assert_eq!(
            f.code,
            "from __future__ import annotations\n_check = undefined_helper()\nanswer = 42"
        );
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let odd = [
            "",
            "# only a comment",
            "'''unterminated",
            "x = 'unterminated\n",
            "\\",
            "(((",
            ")))",
            "s = 'héllo'[0]\nπ = 3.14\nanswer = π * 2  # ünïcode",
            "x = 1\r\nanswer = x[0]\r\n",
            "f'''{x}'''",
            "a = b'\\''; answer = a[0]",
            "@decorator\ndef f(): pass\n",
            "%timeit 1 + 1\n!ls\nanswer = 1",
            "if x: y = (1,\n  2)\nelse: z = [3]",
        ];
        for code in odd {
            for i in 0..12 {
                let f = inject_fault(code, &format!("odd-{i}"));
                assert_ne!(f.code, code);
            }
        }
    }

    #[test]
    fn deterministic_and_spread_over_kinds() {
        let mut kinds = HashSet::new();
        for i in 0..60 {
            let id = format!("task-{i}");
            let a = inject_fault(STATS, &id);
            assert_eq!(a, inject_fault(STATS, &id));
            assert_ne!(a.code, STATS);
            kinds.insert(a.kind);
        }
        // STATS admits every kind but wrong-column (which falls through).
        assert_eq!(kinds.len(), 4, "{kinds:?}");
        assert_eq!(fault_order("x"), fault_order("x"));
    }

    #[test]
    fn misspellings_avoid_taken_names() {
        assert_eq!(misspell("total", |_| false), "totla");
        assert_eq!(misspell("df", |_| false), "dff");
        assert_eq!(misspell("ab", |c| c == "abb"), "ab2");
        let m = misspell("price", |c| c == "priec");
        assert_eq!(m, "prcie");
        assert_ne!(m, "price");
    }

    #[tokio::test]
    async fn oracle_replies() {
        let request = |round| ChatRequest {
            messages: vec![],
            task_id: "t1".into(),
            round,
            reference: Some(STATS.to_string()),
        };
        let plain = Oracle { faults: false };
        assert_eq!(plain.name(), "oracle");
        assert!(plain.is_synthetic());
        let r = plain.chat(&request(0)).await.unwrap();
        assert!(r.text.contains(&format!("```python\n{STATS}```")));
        let faulty = Oracle { faults: true };
        assert_eq!(faulty.name(), "oracle:faults");
        let r0 = faulty.chat(&request(0)).await.unwrap();
        assert!(!r0.text.contains(STATS));
        let r1 = faulty.chat(&request(1)).await.unwrap();
        assert!(r1.text.contains(&format!("```python\n{STATS}```")));
        let missing = ChatRequest {
            reference: None,
            ..request(0)
        };
        match faulty.chat(&missing).await {
            Err(ModelError::Config(m)) => assert!(m.contains("t1"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    /// With a Python at hand, check the real contract: the reference runs,
    /// every injected fault raises.
    #[test]
    fn faults_raise_in_python() {
        let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
            std::process::Command::new(p)
                .arg("-c")
                .arg("pass")
                .output()
                .is_ok_and(|o| o.status.success())
        });
        let Some(python) = python else {
            eprintln!("no python3: skipped");
            return;
        };
        let run = |code: &str| {
            std::process::Command::new(python)
                .arg("-c")
                .arg(code)
                .output()
                .expect("python runs")
        };
        let runnable = [STATS, TABLE, FUNCS];
        let extra = "import json\nimport os.path as p\nrecords = json.loads('[{\"k\": 1}, {\"k\": 2}]')\nks = [r['k'] for r in records]\nname = p.basename('/a/b.txt')\nanswer = ks[-1] + len(name) + records[0]['k']\n";
        let mut seen = HashSet::new();
        for code in runnable.iter().copied().chain([extra]) {
            assert!(run(code).status.success(), "reference fails:\n{code}");
            for kind in FAULT_KINDS.into_iter().chain([FaultKind::UndefinedHelper]) {
                for seed in 0..6 {
                    let Some(f) = apply_fault(code, kind, seed) else {
                        continue;
                    };
                    if !seen.insert(f.code.clone()) {
                        continue;
                    }
                    let out = run(&f.code);
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(!out.status.success(), "{kind:?} ran cleanly:\n{}", f.code);
                    let expected = match kind {
                        FaultKind::UndefinedName
                        | FaultKind::MissingImport
                        | FaultKind::UndefinedHelper => "NameError",
                        FaultKind::WrongColumn => "KeyError",
                        FaultKind::SyntaxError => "SyntaxError",
                        FaultKind::OffByOne => "IndexError",
                    };
                    assert!(stderr.contains(expected), "{kind:?}: {stderr}\n{}", f.code);
                }
            }
        }
        eprintln!("{} distinct faults raised in {python}", seen.len());
        assert!(seen.len() >= 15, "only {} distinct faults", seen.len());
    }
}
