//! The fault injector of `oracle:faults`: exactly one fault per task,
//! chosen by a stable hash of the task id, placed with the [`Source`]
//! scanner only where it must raise. Compile-time faults go anywhere;
//! run-time faults only on top-level simple statements that contain no
//! conditional or lazy construct (`if`/`else`, `and`/`or`, `lambda`,
//! comprehensions), so the faulty sub-expression is certainly evaluated
//! (the reference ran cleanly, so every such statement is reached).

use std::collections::HashSet;
use std::ops::Range;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::scanner::{
    is_blank, is_identifier, is_predefined, Line, Source, HEADER_KEYWORDS, KEYWORDS,
};

/// The kinds of injected fault, in the order they are tried (starting at
/// the one the task id's hash picks).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumIter,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// Not injected into code: a reference written as two cells (split at
    /// a `# %%` line) is sent a cell at a time, and the repair of the
    /// second uses what the first defined → NameError in a kernel without
    /// that state (`--execution fresh`). Recorded on round 0.
    NeedsState,
}

impl FaultKind {
    /// The exceptions Python raises for this fault (any one of them).
    pub fn raises(self) -> &'static [&'static str] {
        match self {
            FaultKind::UndefinedName
            | FaultKind::MissingImport
            | FaultKind::UndefinedHelper
            | FaultKind::NeedsState => &["NameError"],
            FaultKind::WrongColumn => &["KeyError"],
            FaultKind::SyntaxError => &["SyntaxError"],
            // pandas' `.loc`, `.at` and label-indexed Series raise KeyError.
            FaultKind::OffByOne => &["IndexError", "KeyError"],
        }
    }

    /// The name recorded with a reply, e.g. `undefined_name`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
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
    /// Lines of `code` (trimmed), one of which a traceback of the fault
    /// shows: the faulty statement, or where Python reports it.
    pub lines: Vec<String>,
}

/// How much of a long line must appear: feedback may cut long lines.
const LINE_PREFIX_CHARS: usize = 60;

impl Fault {
    /// Whether `feedback` carries what a repair needs: the exception of this
    /// fault and the failing line, shown as a line of code (a feedback line
    /// that ends with it, as in `--> 4 | total = sum(valeus)`; for a long
    /// line, its beginning). An exception message that merely quotes a name
    /// (`name 'valeus' is not defined`) is not the line.
    pub fn explained_by(&self, feedback: &str) -> bool {
        let named = self
            .kind
            .raises()
            .iter()
            .any(|e| contains_word(feedback, e));
        named
            && feedback
                .lines()
                .any(|shown| self.lines.iter().any(|line| shows_line(shown, line)))
    }
}

/// Whether one line of feedback shows the code line `line`.
fn shows_line(shown: &str, line: &str) -> bool {
    let shown = shown.trim_end();
    if line.chars().count() > LINE_PREFIX_CHARS {
        let prefix: String = line.chars().take(LINE_PREFIX_CHARS).collect();
        return shown.contains(prefix.as_str());
    }
    shown
        .strip_suffix(line)
        .is_some_and(|before| !before.ends_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// `needle` in `hay` not preceded or followed by an identifier character.
fn contains_word(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(at, _)| {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// The trimmed text of the 1-based `numbers` lines of `code`; lines too
/// short to recognise (`)`, `x`) are left out unless nothing else remains.
fn line_texts(code: &str, numbers: impl IntoIterator<Item = usize>) -> Vec<String> {
    let all: Vec<&str> = code.lines().collect();
    let mut texts: Vec<String> = Vec::new();
    for n in numbers {
        if let Some(text) = n.checked_sub(1).and_then(|i| all.get(i)) {
            let text = text.trim();
            if !text.is_empty() && !texts.iter().any(|t| t == text) {
                texts.push(text.to_string());
            }
        }
    }
    let recognisable = |t: &String| t.chars().filter(|c| c.is_alphanumeric()).count() >= 3;
    if texts.iter().any(recognisable) {
        texts.retain(recognisable);
    }
    texts
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
        FaultKind::NeedsState => None,
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
        lines: vec![format!("_check = {helper}()")],
    }
}

impl Source<'_> {
    /// The 1-based physical line numbers of the logical line holding `pos`.
    fn statement_numbers(&self, pos: usize) -> Vec<usize> {
        let line: Option<&Line> = self.lines.iter().find(|l| l.range().contains(&pos));
        match line {
            Some(l) => {
                let last = self.line_number(l.end.saturating_sub(1).max(l.start));
                (self.line_number(l.start)..=last).collect()
            }
            None => vec![self.line_number(pos)],
        }
    }

    /// [`line_texts`] of the statement holding `pos`, read from `faulty`
    /// (which has the same line structure).
    fn statement_texts(&self, faulty: &str, pos: usize) -> Vec<String> {
        line_texts(faulty, self.statement_numbers(pos))
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
            lines: self.statement_texts(&self.replace(site.clone(), &typo), site.start),
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
        let code = self.replace(lit.body.0..lit.body.1, &typo);
        Some(Fault {
            kind: FaultKind::WrongColumn,
            note: format!(
                "misspelled the key '{body}' as '{typo}' on line {}",
                self.line_number(lit.start)
            ),
            lines: self.statement_texts(&code, lit.start),
            code,
        })
    }

    fn syntax_error(&self, seed: u64) -> Option<Fault> {
        let parens: Vec<usize> = self
            .lines
            .iter()
            .filter_map(|l| l.range().rev().find(|&k| self.masked[k] == b')'))
            .collect();
        if let Some(&k) = pick(&parens, seed) {
            let code = self.replace(k..k + 1, "");
            // Python reports an unclosed bracket at the statement, or at the
            // line after it where the parse fails.
            let mut numbers = self.statement_numbers(k);
            let last = numbers.last().copied().unwrap_or(1);
            let next = code
                .lines()
                .enumerate()
                .skip(last)
                .find(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
            numbers.extend(next.map(|(i, _)| i + 1));
            return Some(Fault {
                kind: FaultKind::SyntaxError,
                note: format!(
                    "dropped a closing parenthesis on line {}",
                    self.line_number(k)
                ),
                lines: line_texts(&code, numbers),
                code,
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
        let code = self.replace(k..k + 1, "");
        Some(Fault {
            kind: FaultKind::SyntaxError,
            note: format!(
                "dropped the colon of a block on line {}",
                self.line_number(k)
            ),
            lines: self.statement_texts(&code, k),
            code,
        })
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
                let code = self.replace(line.range(), "");
                // The NameError is raised where the name is first looked up
                // (possibly inside a function): any line that mentions it.
                let faulty = Source::scan(&code);
                let numbers: Vec<usize> = faulty
                    .words(0..faulty.masked.len())
                    .into_iter()
                    .filter(|w| faulty.word(w) == name.as_str())
                    .map(|w| faulty.line_number(w.start))
                    .collect();
                return Some(Fault {
                    kind: FaultKind::MissingImport,
                    note: format!(
                        "removed `{statement}` (line {}); `{name}` is used next",
                        self.line_number(line.start)
                    ),
                    lines: line_texts(&code, numbers),
                    code,
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
        let code = self.replace(range.clone(), &with);
        Some(Fault {
            kind: FaultKind::OffByOne,
            note: format!(
                "index `{before}` → `{with}` (one past the end) on line {}",
                self.line_number(range.start)
            ),
            lines: self.statement_texts(&code, range.start),
            code,
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
pub(super) mod tests;
