//! Answer checkers: compare the kernel's answer value with a task's
//! [`Expected`] answer and record how the verdict was reached.
//!
//! The answer value is usually the Python `repr` of a variable named `answer`
//! (`42`, `np.float64(2.5)`, `'Paris'`, `[1, 2]`, `Fraction(3, 4)`), else the
//! last expression result or the last stdout line (the kernel picks; see
//! `kernel::outcome::choose_answer`). Every [`Check`] keeps what was
//! `extracted`, its `normalized` form, the `rule` that decided and the
//! tolerance applied, so a run can be audited and re-scored later.
//!
//! Rules (the `rule` field):
//! - `number:abs_tol`, `number:rel_tol` — within the absolute / relative
//!   tolerance (defaults when a task sets neither: abs 1e-6 or rel 1e-9);
//! - `number:percent` — matched after scaling by 100 (`allow_percent`);
//! - `number:exact_int` — integers beyond 2^53 compared digit by digit;
//!   `number:exact_int_f64` — the same without exact expected digits (see
//!   [`check`] for the limitation);
//! - `number:mismatch`, `number:unparsed`, `number:no_answer`;
//! - `number:singleton:…` — the number was the only element of a list/array;
//!   `number:last_number_fallback:…` — taken from the end of free text;
//! - `text:casefold`, `text:exact` (case-sensitive), `text:singleton:…`,
//!   `text:mismatch`, `text:no_answer`;
//! - `list:ordered`, `list:unordered`, `list:bare:…` (a bare `1, 2, 3`),
//!   `list:length_mismatch`, `list:mismatch`, `list:unparsed`, `list:no_answer`;
//! - `multi:<correct>/<total>` with one [`PartCheck`] per expected name.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Expected;

/// The verdict on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub correct: bool,
    /// An answer could be extracted (parse@r counts these).
    pub parsed: bool,
    /// The part of the answer that was interpreted, before normalisation.
    pub extracted: Option<String>,
    /// The canonical form that was compared.
    pub normalized: Option<String>,
    /// How the verdict was reached (see the module docs).
    pub rule: String,
    /// The absolute tolerance band applied (for numbers: the larger of
    /// `abs_tol` and `rel_tol·|value|`).
    pub tolerance: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub parts: Vec<PartCheck>,
}

/// The verdict on one `@name[value]` part of a multi-answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartCheck {
    pub name: String,
    pub correct: bool,
    pub extracted: Option<String>,
    pub normalized: Option<String>,
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tolerance: Option<f64>,
}

/// Default tolerances when a number task sets neither.
pub const DEFAULT_ABS_TOL: f64 = 1e-6;
pub const DEFAULT_REL_TOL: f64 = 1e-9;
/// Default element tolerance for lists of numbers.
pub const DEFAULT_LIST_ABS_TOL: f64 = 1e-6;
/// 2^53: beyond this, f64 no longer holds every integer.
pub(crate) const F64_EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Checks `answer` (the kernel's answer value; `None` when there was none)
/// against `expected`. `stdout` is searched for `@name[value]` parts of
/// multi-answers (the answer value is searched too and wins on conflicts).
///
/// Big integers: when the expected value is integral, the extracted text is
/// an integer and either side is beyond 2^53, the comparison is exact: digit
/// by digit against `Expected::Number::exact` when the task has it, else the
/// extracted integer must round to exactly the expected `f64` (rule
/// `number:exact_int_f64`; integers that round to the same double cannot be
/// told apart without `exact`). Explicit `abs_tol`/`rel_tol` still apply.
pub fn check(expected: &Expected, answer: Option<&str>, stdout: &str) -> Check {
    match expected {
        Expected::Multi { answers } => check_multi(answers, answer, stdout),
        _ => {
            let single = answer.and_then(single_named_value);
            let v = judge(expected, single.as_deref().or(answer));
            Check {
                correct: v.correct,
                parsed: v.parsed,
                extracted: v.extracted,
                normalized: v.normalized,
                rule: v.rule,
                tolerance: v.tolerance,
                parts: Vec::new(),
            }
        }
    }
}

/// The verdict on a single value, shared by top-level checks and parts.
#[derive(Debug, Clone, PartialEq)]
struct Judged {
    correct: bool,
    parsed: bool,
    extracted: Option<String>,
    normalized: Option<String>,
    rule: String,
    tolerance: Option<f64>,
}

impl Judged {
    fn failed(rule: String, tolerance: Option<f64>) -> Self {
        Judged {
            correct: false,
            parsed: false,
            extracted: None,
            normalized: None,
            rule,
            tolerance,
        }
    }
}

fn judge(expected: &Expected, answer: Option<&str>) -> Judged {
    let answer = answer.filter(|a| !a.trim().is_empty());
    match expected {
        Expected::Number {
            value,
            abs_tol,
            rel_tol,
            allow_percent,
            ..
        } => {
            let tol = NumberTol {
                value: *value,
                abs_tol: *abs_tol,
                rel_tol: *rel_tol,
                allow_percent: *allow_percent,
                exact: exact_digits(expected),
            };
            match answer {
                None => Judged::failed("number:no_answer".into(), Some(tol.band())),
                Some(a) => judge_number(&tol, a),
            }
        }
        Expected::Text {
            value,
            case_sensitive,
        } => match answer {
            None => Judged::failed("text:no_answer".into(), None),
            Some(a) => judge_text(value, *case_sensitive, a),
        },
        Expected::List {
            values,
            ordered,
            abs_tol,
        } => {
            let tol = abs_tol.unwrap_or(DEFAULT_LIST_ABS_TOL);
            match answer {
                None => Judged::failed("list:no_answer".into(), Some(tol)),
                Some(a) => judge_list(values, *ordered, tol, a),
            }
        }
        Expected::Multi { answers } => {
            // A nested multi-answer: its parts are looked for in the value.
            let c = check_multi(answers, answer, "");
            Judged {
                correct: c.correct,
                parsed: c.parsed,
                extracted: c.extracted,
                normalized: c.normalized,
                rule: c.rule,
                tolerance: None,
            }
        }
    }
}

/// `Expected::Number`'s exact integer digits, if the task carries them.
///
/// Read through serde so that this compiles before and after
/// `Expected::Number` gains `exact: Option<String>`; once it has the field,
/// this becomes a plain field access.
fn exact_digits(expected: &Expected) -> Option<String> {
    let v = serde_json::to_value(expected).ok()?;
    match v.get("exact")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

// ---------------------------------------------------------------- numbers

struct NumberTol {
    value: f64,
    abs_tol: Option<f64>,
    rel_tol: Option<f64>,
    allow_percent: bool,
    exact: Option<String>,
}

impl NumberTol {
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        match (self.abs_tol, self.rel_tol) {
            (None, None) => (Some(DEFAULT_ABS_TOL), Some(DEFAULT_REL_TOL)),
            t => t,
        }
    }

    /// The absolute band the tolerances allow around `value`.
    fn band(&self) -> f64 {
        let (abs, rel) = self.tolerances();
        abs.unwrap_or(0.0)
            .max(rel.map_or(0.0, |r| r * self.value.abs()))
    }

    /// Within tolerance of `value`: the rule that accepted it.
    fn within(&self, x: f64, target: f64) -> Option<&'static str> {
        let (abs, rel) = self.tolerances();
        let diff = (x - target).abs();
        if !diff.is_finite() {
            return (x == target).then_some("abs_tol");
        }
        if abs.is_some_and(|a| diff <= a) {
            Some("abs_tol")
        } else if rel.is_some_and(|r| diff <= r * target.abs()) {
            Some("rel_tol")
        } else {
            None
        }
    }

    fn explicit_tolerance(&self) -> bool {
        self.abs_tol.is_some() || self.rel_tol.is_some()
    }

    /// Compares one parsed number; returns (correct, rule).
    fn compare(&self, n: &Num) -> (bool, &'static str) {
        let v = self.value;
        let integral_v = v.is_finite() && v.fract() == 0.0;
        if let (Some(digits), Some(exact)) = (&n.int_digits, &self.exact) {
            if normalize_int(exact).as_deref() == Some(digits.as_str()) {
                return (true, "exact_int");
            }
        }
        let big = n.int_digits.is_some()
            && integral_v
            && (v.abs() >= F64_EXACT_INT || n.value.abs() >= F64_EXACT_INT);
        if big {
            if self.exact.is_none() && n.value == v {
                return (true, "exact_int_f64");
            }
            if self.explicit_tolerance() {
                if let Some(rule) = self.within(n.value, v) {
                    return (true, rule);
                }
            }
            return (false, "exact_int");
        }
        if let Some(rule) = self.within(n.value, v) {
            return (true, rule);
        }
        if self.allow_percent {
            let mut scaled = vec![n.value / 100.0];
            if !n.percent {
                scaled.push(n.value * 100.0);
            }
            if scaled.into_iter().any(|x| self.within(x, v).is_some()) {
                return (true, "percent");
            }
        }
        (false, "mismatch")
    }
}

/// A number read from an answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Num {
    pub(crate) value: f64,
    /// Canonical digits (with `-` sign) when the text was a plain integer.
    pub(crate) int_digits: Option<String>,
    /// Written with a trailing `%`.
    pub(crate) percent: bool,
}

impl Num {
    fn normalized(&self) -> String {
        let mut s = match &self.int_digits {
            Some(d) => d.clone(),
            None => fmt_f64(self.value),
        };
        if self.percent {
            s.push('%');
        }
        s
    }
}

/// How a number was found in the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Found {
    Direct,
    Singleton,
    LastNumber,
}

fn judge_number(tol: &NumberTol, answer: &str) -> Judged {
    let band = Some(tol.band());
    let Some((extracted, n, found)) = extract_number(answer) else {
        return Judged::failed("number:unparsed".into(), band);
    };
    let (correct, how) = tol.compare(&n);
    let prefix = match found {
        Found::Direct => "number",
        Found::Singleton => "number:singleton",
        Found::LastNumber => "number:last_number_fallback",
    };
    Judged {
        correct,
        parsed: true,
        extracted: Some(extracted),
        normalized: Some(n.normalized()),
        rule: format!("{prefix}:{how}"),
        tolerance: band,
    }
}

/// Finds the number an answer stands for: the whole (unwrapped) value, the
/// only element of a list, or a number ending free text.
fn extract_number(answer: &str) -> Option<(String, Num, Found)> {
    let s = unwrap_value(answer);
    if let Some(n) = parse_number_literal(&s) {
        return Some((s, n, Found::Direct));
    }
    match parse_literal(&s) {
        // A 0-d array: `array(18.)`.
        Some(Lit::Num(text, n)) => return Some((text, n, Found::Direct)),
        Some(Lit::List(items)) => {
            if let [Lit::Num(text, n)] = items.as_slice() {
                return Some((text.clone(), n.clone(), Found::Singleton));
            }
        }
        _ => {}
    }
    last_number(&s).map(|(text, n)| (text, n, Found::LastNumber))
}

/// Peels presentation from an answer value: surrounding whitespace,
/// markdown emphasis and code ticks, `\boxed{}`, `<solution>` tags,
/// `Final Answer:` / `####` prefixes, repr quotes and scalar wrappers such
/// as `np.float64(…)`, `Decimal('…')`, `mpf('…')`, `Fraction(3, 4)`.
fn unwrap_value(answer: &str) -> String {
    let mut s = answer.trim().to_string();
    for _ in 0..8 {
        let before = s.clone();
        s = peel_once(&s).trim().to_string();
        if s == before {
            break;
        }
    }
    s
}

fn peel_once(s: &str) -> String {
    for (open, close) in [("**", "**"), ("`", "`"), ("$", "$")] {
        if s.len() > open.len() + close.len() && s.starts_with(open) && s.ends_with(close) {
            let inner = &s[open.len()..s.len() - close.len()];
            // `$5` / `$1,000$`-style money keeps its sign: only peel math
            // delimiters when the inside has no further `$`.
            if open != "$" || !inner.contains('$') {
                return inner.to_string();
            }
        }
    }
    if let Some(inner) = s.strip_prefix("\\boxed{").and_then(|r| r.strip_suffix('}')) {
        return inner.to_string();
    }
    let lower = s.to_ascii_lowercase();
    if let (Some(a), Some(b)) = (lower.find("<solution>"), lower.rfind("</solution>")) {
        if a + 10 <= b {
            return s[a + 10..b].to_string();
        }
    }
    for marker in ["final answer:", "####"] {
        if let Some(i) = lower.rfind(marker) {
            return s[i + marker.len()..].to_string();
        }
    }
    if let Some(inner) = strip_quotes(s) {
        return inner;
    }
    if let Some((name, args)) = split_call(s) {
        if let Some(v) = scalar_wrapper(name, &args) {
            return v;
        }
    }
    s.to_string()
}

/// `'abc'`, `"abc"`, `b'abc'`, `u'abc'` → `abc` with escapes resolved.
fn strip_quotes(s: &str) -> Option<String> {
    let body = s
        .strip_prefix(['b', 'u', 'r', 'B', 'U', 'R'])
        .filter(|r| r.starts_with(['\'', '"']))
        .unwrap_or(s);
    let q = body.chars().next()?;
    if !(q == '\'' || q == '"') || body.len() < 2 || !body.ends_with(q) {
        return None;
    }
    let (lit, rest) = read_string(body)?;
    rest.trim().is_empty().then_some(lit)
}

/// Reads a quoted string at the start of `s`; returns it and the rest.
fn read_string(s: &str) -> Option<(String, &str)> {
    let mut chars = s.char_indices();
    let (_, q) = chars.next()?;
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '\'' | '"' => out.push(e),
                    'x' | 'u' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String =
                            (0..len).filter_map(|_| chars.next().map(|c| c.1)).collect();
                        out.push(
                            u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .unwrap_or('\u{fffd}'),
                        );
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            c if c == q => return Some((out, &s[i + c.len_utf8()..])),
            c => out.push(c),
        }
    }
    None
}

/// `name(args)` spanning the whole text → (name, top-level args).
fn split_call(s: &str) -> Option<(&str, Vec<String>)> {
    let open = s.find('(')?;
    let name = &s[..open];
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !name.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !valid || !s.ends_with(')') {
        return None;
    }
    let inner = &s[open + 1..s.len() - 1];
    // The closing paren must match the opening one.
    if matching_close(s, open) != Some(s.len() - 1) {
        return None;
    }
    Some((name, split_top_level(inner, ',')))
}

/// Index of the bracket closing the one at `open` (quotes respected).
fn matching_close(s: &str, open: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = open;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
        } else {
            match b {
                b'\'' | b'"' => quote = Some(b),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// Splits on `sep` outside brackets and quotes; trims the pieces and drops
/// a trailing empty piece (`(1,)`).
fn split_top_level(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut cur = String::new();
    for c in s.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if c == sep && depth == 0 {
            parts.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    let last = cur.trim().to_string();
    if !last.is_empty() || !parts.is_empty() {
        parts.push(last);
    }
    if parts.last().is_some_and(String::is_empty) {
        parts.pop();
    }
    parts
}

/// Known wrappers of a single scalar: numpy scalar types, `Decimal`,
/// `Fraction`, mpmath, gmpy2, sympy's `Integer`/`Float`/`Rational`,
/// `np.str_`.
fn scalar_wrapper(name: &str, args: &[String]) -> Option<String> {
    let base = name.rsplit('.').next().unwrap_or(name);
    let positional: Vec<&String> = args.iter().filter(|a| !is_kwarg(a)).collect();
    let numeric_type = |b: &str| {
        let stem = b.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
        matches!(
            stem,
            "float"
                | "int"
                | "uint"
                | "complex"
                | "longdouble"
                | "double"
                | "single"
                | "half"
                | "intc"
                | "longlong"
                | "ulonglong"
                | "short"
                | "ushort"
                | "byte"
                | "ubyte"
                | "str"
                | "bool"
                | "intp"
                | "uintp"
        )
    };
    match base {
        "Fraction" | "Rational" | "mpq" if positional.len() == 2 => {
            Some(format!("{}/{}", positional[0], positional[1]))
        }
        "Decimal" | "mpf" | "mpz" | "Integer" | "Float" | "Fraction" | "Rational" | "mpq"
        | "tensor"
            if positional.len() == 1 =>
        {
            Some(positional[0].clone())
        }
        b if numeric_type(b) && positional.len() == 1 => Some(positional[0].clone()),
        _ => None,
    }
}

fn is_kwarg(arg: &str) -> bool {
    match arg.find('=') {
        Some(i) => {
            let key = &arg[..i];
            !key.is_empty()
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !arg[i + 1..].starts_with('=')
        }
        None => false,
    }
}

/// A whole number literal: sign, currency (`$ € £ ¥`), thousands
/// separators, `_` digit groups, decimals, exponent, trailing `%`,
/// fractions `3/4`, `inf`/`nan`.
pub(crate) fn parse_number_literal(text: &str) -> Option<Num> {
    let mut s = text.trim();
    let mut percent = false;
    if let Some(r) = s.strip_suffix('%') {
        percent = true;
        s = r.trim_end();
    }
    if let Some((a, b)) = s.split_once('/') {
        let (a, b) = (parse_plain(a.trim())?, parse_plain(b.trim())?);
        if b.value == 0.0 {
            return None;
        }
        return Some(Num {
            value: a.value / b.value,
            int_digits: None,
            percent,
        });
    }
    let mut n = parse_plain(s)?;
    n.percent = percent;
    Some(n)
}

/// Sign, currency and one decimal number (no `%`, no fraction).
fn parse_plain(s: &str) -> Option<Num> {
    let mut negative = false;
    let mut rest = s;
    for _ in 0..2 {
        if let Some(r) = rest.strip_prefix(['-', '−']) {
            negative = !negative;
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix('+') {
            rest = r.trim_start();
        }
        if let Some(r) = rest.strip_prefix(['$', '€', '£', '¥']) {
            rest = r.trim_start();
        }
    }
    let lower = rest.to_ascii_lowercase();
    let special = match lower.as_str() {
        "inf" | "infinity" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    };
    if let Some(v) = special {
        return Some(Num {
            value: if negative { -v } else { v },
            int_digits: None,
            percent: false,
        });
    }
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let int_digits = plain_int_digits(int_part)?;
    if let Some(f) = frac_part {
        if !f.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if int_digits.is_empty() && f.is_empty() {
            return None;
        }
    } else if int_digits.is_empty() {
        return None;
    }
    if let Some(e) = exponent {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e.is_empty() || !e.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    let mut canonical = String::new();
    if negative {
        canonical.push('-');
    }
    canonical.push_str(if int_digits.is_empty() {
        "0"
    } else {
        &int_digits
    });
    if let Some(f) = frac_part {
        canonical.push('.');
        canonical.push_str(f);
    }
    if let Some(e) = exponent {
        canonical.push('e');
        canonical.push_str(e);
    }
    let value: f64 = canonical.parse().ok()?;
    let int_digits = (frac_part.is_none() && exponent.is_none())
        .then(|| normalize_int(&canonical))
        .flatten();
    Some(Num {
        value,
        int_digits,
        percent: false,
    })
}

/// Digits of an integer part written `1234`, `1,234,567` or `1_000`
/// (may be empty for `.5`); `None` if the grouping is malformed.
fn plain_int_digits(s: &str) -> Option<String> {
    if s.contains(',') {
        let groups: Vec<&str> = s.split(',').collect();
        let first_ok = (1..=3).contains(&groups[0].len());
        let rest_ok = groups[1..].iter().all(|g| g.len() == 3);
        let digits_ok = groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit()));
        return (first_ok && rest_ok && digits_ok).then(|| groups.concat());
    }
    if s.contains('_') {
        let groups: Vec<&str> = s.split('_').collect();
        let ok = groups
            .iter()
            .all(|g| !g.is_empty() && g.chars().all(|c| c.is_ascii_digit()));
        return ok.then(|| groups.concat());
    }
    s.chars().all(|c| c.is_ascii_digit()).then(|| s.to_string())
}

/// `-007` → `-7`, `+12` → `12`, `-0` → `0`; `None` if not an integer.
fn normalize_int(s: &str) -> Option<String> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let digits = plain_int_digits(digits)?;
    if digits.is_empty() {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    Some(if neg && trimmed != "0" {
        format!("-{trimmed}")
    } else {
        trimmed.to_string()
    })
}

/// Text that ends with a number (`The answer is 42.`, `x = -3.5`,
/// `Total: $1,234.50`): that number. The number must stand alone — after
/// the start, whitespace, `:` or `=` — so `float64`, `2**10` and `sqrt(2)`
/// do not qualify.
fn last_number(s: &str) -> Option<(String, Num)> {
    let t = s.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | '*' | '`'));
    let start = t
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_whitespace() || c == ':' || c == '=')
        .map_or(0, |(i, c)| i + c.len_utf8());
    let token = &t[start..];
    if start == 0 || token.is_empty() {
        // The whole answer is one token: already tried as a literal.
        return None;
    }
    let n = parse_number_literal(token)?;
    Some((token.to_string(), n))
}

/// Shortest round-trip text, without exponent for ordinary magnitudes.
fn fmt_f64(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-6..1e16).contains(&a) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

// ------------------------------------------------------------------- text

fn judge_text(expected: &str, case_sensitive: bool, answer: &str) -> Judged {
    let want = normalize_text(&unwrap_value(expected), case_sensitive);
    let how = if case_sensitive { "exact" } else { "casefold" };
    let mut extracted = unwrap_value(answer);
    let mut prefix = "text";
    if let Some(Lit::List(items)) = parse_literal(&extracted) {
        if let [Lit::Str(s)] = items.as_slice() {
            extracted = s.clone();
            prefix = "text:singleton";
        }
    }
    let got = normalize_text(&extracted, case_sensitive);
    let correct = got == want;
    Judged {
        correct,
        parsed: !got.is_empty(),
        extracted: Some(extracted),
        normalized: Some(got),
        rule: if correct {
            format!("{prefix}:{how}")
        } else {
            format!("{prefix}:mismatch")
        },
        tolerance: None,
    }
}

/// Collapses whitespace (and spaces around commas), drops a trailing
/// period, folds case unless `case_sensitive`.
fn normalize_text(s: &str, case_sensitive: bool) -> String {
    let mut out = s.split_whitespace().collect::<Vec<_>>().join(" ");
    out = out.replace(" ,", ",").replace(", ", ",");
    while out.ends_with('.') && !out.ends_with("..") {
        out.pop();
        out.truncate(out.trim_end().len());
    }
    if case_sensitive {
        out
    } else {
        out.to_lowercase()
    }
}

// ------------------------------------------------------------------ lists

/// A parsed Python/JSON literal.
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    /// The number and its source text.
    Num(String, Num),
    Str(String),
    Bool(bool),
    None,
    List(Vec<Lit>),
}

impl Lit {
    fn render(&self) -> String {
        match self {
            Lit::Num(_, n) => n.normalized(),
            Lit::Str(s) => serde_json::to_string(s).unwrap_or_default(),
            Lit::Bool(b) => b.to_string(),
            Lit::None => "null".into(),
            Lit::List(items) => {
                let mut out = String::from("[");
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&it.render());
                }
                out.push(']');
                out
            }
        }
    }
}

/// Parses a literal: lists, tuples, sets, `array([...], dtype=...)`,
/// `np.array`, `set()`, `frozenset({...})`, `dict_keys([...])`, pandas
/// `Index([...])`, numpy's printed form `[1 2 3]`, strings, numbers (with
/// scalar wrappers), `True`/`False`/`None`. Dicts and truncated (`...`)
/// output do not parse.
fn parse_literal(s: &str) -> Option<Lit> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let prefixed = s.starts_with(['b', 'u', 'r', 'B', 'U', 'R']) && s[1..].starts_with(['\'', '"']);
    if s.starts_with(['\'', '"']) || prefixed {
        if let Some(v) = strip_quotes(s) {
            return Some(Lit::Str(v));
        }
    }
    if let Some(first) = s.chars().next().filter(|c| matches!(c, '[' | '(' | '{')) {
        if matching_close(s, 0) != Some(s.len() - 1) {
            return None;
        }
        let inner = &s[1..s.len() - 1];
        let items = split_top_level(inner, ',');
        if first == '{' && items.iter().any(|i| top_level_colon(i)) {
            return None; // a dict
        }
        let items = if items.len() == 1 && !inner.contains(',') && first == '[' {
            // numpy's str form: `[1 2 3]` or `['a' 'b']`.
            split_whitespace_top_level(inner)
        } else {
            items
        };
        return items
            .iter()
            .map(|i| parse_literal(i))
            .collect::<Option<Vec<_>>>()
            .map(Lit::List);
    }
    if let Some((name, args)) = split_call(s) {
        let base = name.rsplit('.').next().unwrap_or(name);
        let positional: Vec<&String> = args.iter().filter(|a| !is_kwarg(a)).collect();
        if matches!(
            base,
            "array"
                | "asarray"
                | "set"
                | "frozenset"
                | "tuple"
                | "list"
                | "dict_keys"
                | "dict_values"
                | "Index"
                | "Series"
                | "deque"
                | "matrix"
        ) {
            return match positional.as_slice() {
                [] => Some(Lit::List(Vec::new())),
                [one] => match parse_literal(one)? {
                    l @ Lit::List(_) => Some(l),
                    scalar => Some(scalar), // array(5) is a 0-d array
                },
                _ => None,
            };
        }
        let inner = scalar_wrapper(name, &args)?;
        if base.starts_with("str") {
            return strip_quotes(&inner).map(Lit::Str);
        }
        // `Decimal('1.5')`, `mpf('2')`: the quoted text is the number.
        let inner = strip_quotes(&inner).unwrap_or(inner);
        return parse_literal(&inner);
    }
    match s {
        "True" | "true" => return Some(Lit::Bool(true)),
        "False" | "false" => return Some(Lit::Bool(false)),
        "None" | "null" => return Some(Lit::None),
        "..." | "…" => return None,
        _ => {}
    }
    if let Some(n) = parse_number_literal(s) {
        return Some(Lit::Num(s.to_string(), n));
    }
    // A bare word (numpy prints string arrays without quotes in some forms).
    let word_ok = !s.contains(['(', ')', '[', ']', '{', '}', ',', '\'', '"']);
    word_ok.then(|| Lit::Str(s.to_string()))
}

fn top_level_colon(item: &str) -> bool {
    split_top_level(item, ':').len() > 1
}

/// Splits on whitespace outside brackets and quotes.
fn split_whitespace_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in s.chars() {
        if let Some(q) = quote {
            cur.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if c.is_whitespace() && depth == 0 {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

fn judge_list(values: &[Value], ordered: bool, tol: f64, answer: &str) -> Judged {
    let s = unwrap_value(answer);
    let (items, bare) = match parse_literal(&s) {
        Some(Lit::List(items)) => (items, false),
        _ => {
            // A bare `1, 2, 3` / `a, b`.
            let parts = split_top_level(&s, ',');
            let items = (parts.len() > 1)
                .then(|| {
                    parts
                        .iter()
                        .map(|p| parse_literal(p))
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            match items {
                Some(items) => (items, true),
                None => return Judged::failed("list:unparsed".into(), Some(tol)),
            }
        }
    };
    let prefix = if bare { "list:bare" } else { "list" };
    let mut rendered: Vec<String> = items.iter().map(Lit::render).collect();
    if !ordered {
        rendered.sort();
    }
    let normalized = format!("[{}]", rendered.join(", "));
    let (correct, how) = if items.len() != values.len() {
        (false, "length_mismatch")
    } else if ordered {
        let ok = values.iter().zip(&items).all(|(v, l)| lit_eq(v, l, tol));
        (ok, if ok { "ordered" } else { "mismatch" })
    } else {
        let ok = multiset_match(values, &items, tol);
        (ok, if ok { "unordered" } else { "mismatch" })
    };
    Judged {
        correct,
        parsed: true,
        extracted: Some(s),
        normalized: Some(normalized),
        rule: format!("{prefix}:{how}"),
        tolerance: Some(tol),
    }
}

/// One expected JSON value against one parsed element.
fn lit_eq(want: &Value, got: &Lit, tol: f64) -> bool {
    let num_eq = |a: f64, b: f64| a == b || (a - b).abs() <= tol;
    match (want, got) {
        (Value::Number(w), Lit::Num(_, n)) => {
            let big_int = w.is_u64() || w.is_i64();
            match (&n.int_digits, big_int) {
                (Some(d), true) if w.as_f64().is_some_and(|f| f.abs() >= F64_EXACT_INT) => {
                    *d == w.to_string()
                }
                _ => w.as_f64().is_some_and(|w| num_eq(w, n.value)),
            }
        }
        (Value::Number(w), Lit::Str(s)) => parse_number_literal(s)
            .zip(w.as_f64())
            .is_some_and(|(n, w)| num_eq(w, n.value)),
        (Value::String(w), Lit::Num(_, n)) => {
            parse_number_literal(w).is_some_and(|w| num_eq(w.value, n.value))
        }
        (Value::String(w), Lit::Str(s)) => normalize_text(w, false) == normalize_text(s, false),
        (Value::Bool(w), Lit::Bool(b)) => w == b,
        (Value::Null, Lit::None) => true,
        (Value::Array(ws), Lit::List(ls)) => {
            ws.len() == ls.len() && ws.iter().zip(ls).all(|(w, l)| lit_eq(w, l, tol))
        }
        _ => false,
    }
}

/// A perfect matching between expected values and elements (Kuhn's
/// augmenting paths; tolerant equality is not transitive, so sorting
/// would not do).
fn multiset_match(values: &[Value], items: &[Lit], tol: f64) -> bool {
    let n = values.len();
    let adj: Vec<Vec<usize>> = values
        .iter()
        .map(|v| (0..n).filter(|&j| lit_eq(v, &items[j], tol)).collect())
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; n];
    fn augment(
        i: usize,
        adj: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &j in &adj[i] {
            if seen[j] {
                continue;
            }
            seen[j] = true;
            if owner[j].is_none_or(|k| augment(k, adj, seen, owner)) {
                owner[j] = Some(i);
                return true;
            }
        }
        false
    }
    (0..n).all(|i| augment(i, &adj, &mut vec![false; n], &mut owner))
}

// ------------------------------------------------------------------ multi

/// `@name[value]` occurrences in order; values are bracket-balanced so
/// `@cols[['a', 'b']]` keeps its inner brackets.
pub fn find_tagged(text: &str) -> Vec<(String, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'@' {
            i += 1;
            continue;
        }
        let name_start = i + 1;
        let mut j = name_start;
        while j < bytes.len()
            && (bytes[j].is_ascii_alphanumeric() || matches!(bytes[j], b'_' | b'-'))
        {
            j += 1;
        }
        if j == name_start || j >= bytes.len() || bytes[j] != b'[' {
            i += 1;
            continue;
        }
        let mut depth = 0usize;
        let mut end = None;
        for (k, &b) in bytes.iter().enumerate().skip(j) {
            match b {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k);
                        break;
                    }
                }
                // Values are single-line: an unclosed `[` ends at the newline.
                b'\n' => break,
                _ => {}
            }
        }
        match end {
            Some(k) => {
                out.push((text[name_start..j].to_string(), text[j + 1..k].to_string()));
                i = k + 1;
            }
            None => i = j + 1,
        }
    }
    out
}

/// The entries of a dict literal (`{'@mean': 2.5, "n": 3}`), keys without
/// their quotes and without a leading `@`; `None` when `text` is not one.
fn dict_entries(text: &str) -> Option<Vec<(String, String)>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    for item in split_top_level(inner, ',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (key, rest) = read_string(item)?;
        let value = rest.trim_start().strip_prefix(':')?.trim();
        out.push((key.trim_start_matches('@').to_string(), value.to_string()));
    }
    Some(out)
}

/// A single answer given in a named form, read as the answer: one
/// `@name[value]` (the multi-answer form used on a single answer) or a
/// dict with one entry. `None` when the answer is not in such a form.
fn single_named_value(answer: &str) -> Option<String> {
    let trimmed = answer.trim();
    if trimmed.starts_with('@') {
        let tagged = find_tagged(trimmed);
        if let [(name, value)] = tagged.as_slice() {
            if trimmed.len() == name.len() + value.len() + 3 {
                return Some(value.clone());
            }
        }
    }
    match dict_entries(trimmed)?.as_slice() {
        [(_, value)] => Some(value.clone()),
        _ => None,
    }
}

fn check_multi(
    answers: &std::collections::BTreeMap<String, Expected>,
    answer: Option<&str>,
    stdout: &str,
) -> Check {
    let mut found: Vec<(String, String)> = find_tagged(stdout);
    if let Some(a) = answer {
        found.extend(find_tagged(a));
        // `answer = {"@name": value, ...}` (with or without the `@`).
        found.extend(dict_entries(a).unwrap_or_default());
    }
    let lookup = |name: &str| -> Option<&String> {
        found
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .or_else(|| {
                found
                    .iter()
                    .rev()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| v)
    };
    let mut parts = Vec::new();
    let mut extracted = String::new();
    let mut normalized = String::new();
    for (name, sub) in answers {
        let part = match lookup(name) {
            Some(value) => {
                let v = judge(sub, Some(value));
                let _ = write!(extracted, "@{name}[{value}] ");
                let _ = write!(
                    normalized,
                    "@{name}[{}] ",
                    v.normalized.as_deref().unwrap_or("")
                );
                PartCheck {
                    name: name.clone(),
                    correct: v.correct,
                    extracted: v.extracted,
                    normalized: v.normalized,
                    rule: v.rule,
                    tolerance: v.tolerance,
                }
            }
            None => PartCheck {
                name: name.clone(),
                correct: false,
                extracted: None,
                normalized: None,
                rule: "missing".into(),
                tolerance: None,
            },
        };
        parts.push(part);
    }
    let n_correct = parts.iter().filter(|p| p.correct).count();
    let any_found = parts.iter().any(|p| p.extracted.is_some());
    let some = |s: String| (!s.is_empty()).then(|| s.trim_end().to_string());
    Check {
        correct: !parts.is_empty() && n_correct == parts.len(),
        parsed: any_found,
        extracted: some(extracted),
        normalized: some(normalized),
        rule: format!("multi:{n_correct}/{}", parts.len()),
        tolerance: None,
        parts,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Built through serde so the tests compile with or without
    /// `Expected::Number::exact`.
    fn number(value: f64, abs_tol: Option<f64>, rel_tol: Option<f64>, pct: bool) -> Expected {
        serde_json::from_value(serde_json::json!({
            "type": "number", "value": value, "abs_tol": abs_tol,
            "rel_tol": rel_tol, "allow_percent": pct,
        }))
        .unwrap()
    }

    fn num(value: f64) -> Expected {
        if value.is_infinite() {
            // JSON has no infinity.
            let mut e = number(0.0, None, None, false);
            if let Expected::Number { value: v, .. } = &mut e {
                *v = value;
            }
            return e;
        }
        number(value, None, None, false)
    }

    fn num_tol(value: f64, abs_tol: Option<f64>, rel_tol: Option<f64>) -> Expected {
        number(value, abs_tol, rel_tol, false)
    }

    fn pct(value: f64) -> Expected {
        number(value, Some(1e-6), None, true)
    }

    #[test]
    fn a_single_answer_in_a_named_form_is_read_as_the_answer() {
        let c = check(&num(20.0), Some("@total_windows[20]"), "");
        assert!(c.correct && c.parsed, "{c:?}");
        let c = check(&num(20.0), Some("{'total': 20}"), "");
        assert!(c.correct, "{c:?}");
        let c = check(&num(20.0), Some("{\"@total\": 20.0}"), "");
        assert!(c.correct, "{c:?}");
        // Two named values are not one answer; neither is text around a tag.
        assert!(!check(&num(20.0), Some("{'a': 20, 'b': 3}"), "").correct);
        let c = check(&num(20.0), Some("@a[20] and @b[3]"), "");
        assert!(!c.correct, "{c:?}");
        let text: Expected =
            serde_json::from_value(serde_json::json!({"type": "text", "value": "Central"}))
                .unwrap();
        assert!(check(&text, Some("@region[Central]"), "").correct);
    }

    #[test]
    fn a_multi_answer_may_be_a_dict() {
        let multi = Expected::Multi {
            answers: BTreeMap::from([
                ("p_value".to_string(), num_tol(0.03, Some(0.005), None)),
                (
                    "region".to_string(),
                    serde_json::from_value(serde_json::json!({"type": "text", "value": "North"}))
                        .unwrap(),
                ),
            ]),
        };
        let c = check(&multi, Some("{'@p_value': 0.031, '@region': 'North'}"), "");
        assert!(c.correct, "{c:?}");
        let c = check(
            &multi,
            Some("{\"p_value\": 0.03, \"region\": \"North\"}"),
            "",
        );
        assert!(c.correct, "{c:?}");
        let c = check(&multi, Some("{'p_value': 0.5, 'region': 'North'}"), "");
        assert!(!c.correct && c.parsed);
        assert_eq!(c.parts.iter().filter(|p| p.correct).count(), 1);
    }

    fn text(value: &str) -> Expected {
        Expected::Text {
            value: value.into(),
            case_sensitive: false,
        }
    }

    fn list(values: Value, ordered: bool) -> Expected {
        Expected::List {
            values: values.as_array().unwrap().clone(),
            ordered,
            abs_tol: None,
        }
    }

    /// (expected, answer, correct, parsed, rule prefix, normalized)
    type Row = (
        Expected,
        &'static str,
        bool,
        bool,
        &'static str,
        Option<&'static str>,
    );

    fn run_table(rows: Vec<Row>) {
        let mut failures = Vec::new();
        for (expected, answer, correct, parsed, rule, normalized) in rows {
            let c = check(&expected, Some(answer), "");
            let ok = c.correct == correct
                && c.parsed == parsed
                && c.rule.starts_with(rule)
                && normalized.is_none_or(|n| c.normalized.as_deref() == Some(n));
            if !ok {
                failures.push(format!(
                    "{answer:?} vs {expected:?}: want correct={correct} parsed={parsed} \
                     rule={rule} normalized={normalized:?}, got {c:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn number_table() {
        run_table(vec![
            (num(42.0), "42", true, true, "number:abs_tol", Some("42")),
            (num(42.0), "42.0", true, true, "number:abs_tol", Some("42")),
            (num(42.0), "43", false, true, "number:mismatch", Some("43")),
            (num(42.0), "  42\n", true, true, "number:abs_tol", None),
            (
                num(3.5),
                "np.float64(3.5)",
                true,
                true,
                "number:abs_tol",
                Some("3.5"),
            ),
            (
                num(7.0),
                "np.int64(7)",
                true,
                true,
                "number:abs_tol",
                Some("7"),
            ),
            (
                num(7.0),
                "numpy.int32(7)",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (num(2.5), "float64(2.5)", true, true, "number:abs_tol", None),
            (
                num(0.75),
                "Fraction(3, 4)",
                true,
                true,
                "number:abs_tol",
                Some("0.75"),
            ),
            (num(0.75), "3/4", true, true, "number:abs_tol", None),
            (num(-0.75), "-3/4", true, true, "number:abs_tol", None),
            (
                num(1.5),
                "Decimal('1.50')",
                true,
                true,
                "number:abs_tol",
                Some("1.5"),
            ),
            (num(2.75), "mpf('2.75')", true, true, "number:abs_tol", None),
            (
                num(2.5),
                "Float('2.5', precision=53)",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (num(9.0), "Integer(9)", true, true, "number:abs_tol", None),
            (
                num(1000.0),
                "1,000",
                true,
                true,
                "number:abs_tol",
                Some("1000"),
            ),
            (
                num(1234.5),
                "$1,234.50",
                true,
                true,
                "number:abs_tol",
                Some("1234.5"),
            ),
            (num(-5.0), "-$5", true, true, "number:abs_tol", None),
            (
                num(1000000.0),
                "1_000_000",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (
                num(1.5e-7),
                "1.5e-7",
                true,
                true,
                "number:abs_tol",
                Some("1.5e-7"),
            ),
            (num(2.0e10), "2E+10", true, true, "number:abs_tol", None),
            (num(0.5), ".5", true, true, "number:abs_tol", None),
            (num(5.0), "5.", true, true, "number:abs_tol", None),
            (num(18.0), "'18'", true, true, "number:abs_tol", None),
            (num(18.0), "\"$18\"", true, true, "number:abs_tol", None),
            (num(18.0), "**18**", true, true, "number:abs_tol", None),
            (num(18.0), "\\boxed{18}", true, true, "number:abs_tol", None),
            (
                num(18.0),
                "<solution>18</solution>",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (
                num(18.0),
                "Final Answer: 18",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (num(18.0), "#### 18", true, true, "number:abs_tol", None),
            // Near misses and tolerance edges.
            (num(1.0), "1.0000005", true, true, "number:abs_tol", None),
            (num(1.0), "1.000002", false, true, "number:mismatch", None),
            (
                num(1e12),
                "1000000000000.5",
                true,
                true,
                "number:rel_tol",
                None,
            ),
            (
                num(1e12),
                "1000000002000",
                false,
                true,
                "number:mismatch",
                None,
            ),
            (
                num_tol(72.0, Some(1e-3), None),
                "72.0004",
                true,
                true,
                "number:abs_tol",
                None,
            ),
            (
                num_tol(72.0, Some(1e-3), None),
                "72.01",
                false,
                true,
                "number:mismatch",
                None,
            ),
            (
                num_tol(100.0, None, Some(0.05)),
                "104.9",
                true,
                true,
                "number:rel_tol",
                None,
            ),
            (
                num_tol(100.0, None, Some(0.05)),
                "105.1",
                false,
                true,
                "number:mismatch",
                None,
            ),
            // Free text ending with a number.
            (
                num(42.0),
                "The answer is 42.",
                true,
                true,
                "number:last_number_fallback:abs_tol",
                Some("42"),
            ),
            (
                num(5.0),
                "x = 5",
                true,
                true,
                "number:last_number_fallback:abs_tol",
                None,
            ),
            (
                num(1234.5),
                "Total: $1,234.50",
                true,
                true,
                "number:last_number_fallback",
                None,
            ),
            (
                num(42.0),
                "The answer is 41.",
                false,
                true,
                "number:last_number_fallback:mismatch",
                None,
            ),
            // Singletons.
            (
                num(5.0),
                "array([5.])",
                true,
                true,
                "number:singleton:abs_tol",
                None,
            ),
            (
                num(5.0),
                "[5]",
                true,
                true,
                "number:singleton:abs_tol",
                None,
            ),
            (
                num(5.0),
                "(5,)",
                true,
                true,
                "number:singleton:abs_tol",
                None,
            ),
            (
                num(18.0),
                "array(18.)",
                true,
                true,
                "number:abs_tol",
                Some("18"),
            ),
            (
                num(18.0),
                "18 dollars",
                false,
                false,
                "number:unparsed",
                None,
            ),
            (num(18.0), "18+0j", false, false, "number:unparsed", None),
            (num(18.0), "True", false, false, "number:unparsed", None),
            (num(18.0), "-18", false, true, "number:mismatch", None),
            // Not numbers.
            (
                num(std::f64::consts::SQRT_2),
                "sqrt(2)",
                false,
                false,
                "number:unparsed",
                None,
            ),
            (
                num(std::f64::consts::TAU),
                "2*pi",
                false,
                false,
                "number:unparsed",
                None,
            ),
            (num(1024.0), "2**10", false, false, "number:unparsed", None),
            (
                num(64.0),
                "dtype: float64",
                false,
                false,
                "number:unparsed",
                None,
            ),
            (num(1.0), "None", false, false, "number:unparsed", None),
            (num(1.0), "'Paris'", false, false, "number:unparsed", None),
            (num(2.0), "[1, 2]", false, false, "number:unparsed", None),
            (num(1.0), "1,23", false, false, "number:unparsed", None),
            (num(1.0), "nan", false, true, "number:mismatch", None),
            (
                num(f64::INFINITY),
                "inf",
                true,
                true,
                "number:abs_tol",
                None,
            ),
        ]);
    }

    #[test]
    fn percent_table() {
        run_table(vec![
            (
                pct(0.125),
                "12.5%",
                true,
                true,
                "number:percent",
                Some("12.5%"),
            ),
            (pct(0.125), "0.125", true, true, "number:abs_tol", None),
            (pct(0.125), "12.5", true, true, "number:percent", None),
            (pct(12.5), "0.125", true, true, "number:percent", None),
            (pct(12.5), "12.5%", true, true, "number:abs_tol", None),
            (pct(12.5), "'12.5 %'", true, true, "number:abs_tol", None),
            (pct(0.125), "12.4%", false, true, "number:mismatch", None),
            (pct(12.5), "125%", false, true, "number:mismatch", None),
            // Without allow_percent, only the number as written counts.
            (num(0.125), "12.5%", false, true, "number:mismatch", None),
            (num(12.5), "12.5%", true, true, "number:abs_tol", None),
            (num(12.5), "0.125", false, true, "number:mismatch", None),
        ]);
    }

    #[test]
    fn big_integers_compare_exactly() {
        // 2^64 + 1 cannot be held by f64; with default tolerances its
        // f64 neighbours must not pass as equal to a different integer.
        let two_64 = 18446744073709551616.0_f64;
        let c = check(&num(two_64), Some("18446744073709551616"), "");
        assert!(c.correct, "{c:?}");
        assert_eq!(c.rule, "number:exact_int_f64");
        // Far enough to be a different double: wrong, even though
        // rel_tol 1e-9 would have accepted it.
        let c = check(&num(two_64), Some("18446744073709600000"), "");
        assert!(!c.correct, "{c:?}");
        assert_eq!(c.rule, "number:exact_int");
        assert_eq!(c.normalized.as_deref(), Some("18446744073709600000"));
        // A float answer for a big integer still uses the tolerances.
        let c = check(&num(two_64), Some("1.8446744073709552e+19"), "");
        assert!(c.correct, "{c:?}");
        // An explicit tolerance is honoured.
        let c = check(
            &num_tol(two_64, None, Some(1e-6)),
            Some("18446744073709600000"),
            "",
        );
        assert!(c.correct, "{c:?}");
    }

    #[test]
    fn big_integers_with_exact_digits() {
        // Built through serde: works once `Expected::Number` has `exact`.
        let e: Expected = serde_json::from_value(serde_json::json!({
            "type": "number", "value": 1e30,
            "exact": "1000000000000000000000000000001"
        }))
        .unwrap();
        let c = check(&e, Some("1000000000000000000000000000001"), "");
        assert!(c.correct, "{c:?}");
        if exact_digits(&e).is_some() {
            assert_eq!(c.rule, "number:exact_int");
            let c = check(&e, Some("1000000000000000000000000000000"), "");
            assert!(!c.correct, "{c:?}");
        }
    }

    #[test]
    fn text_table() {
        let cs = Expected::Text {
            value: "Paris".into(),
            case_sensitive: true,
        };
        run_table(vec![
            (
                text("Paris"),
                "'Paris'",
                true,
                true,
                "text:casefold",
                Some("paris"),
            ),
            (
                text("Paris"),
                "\"paris\"",
                true,
                true,
                "text:casefold",
                None,
            ),
            (text("Paris"), "PARIS.", true, true, "text:casefold", None),
            (
                text("New York"),
                "'  New   York '",
                true,
                true,
                "text:casefold",
                Some("new york"),
            ),
            (
                text("Paris"),
                "np.str_('Paris')",
                true,
                true,
                "text:casefold",
                None,
            ),
            (
                text("Paris"),
                "['Paris']",
                true,
                true,
                "text:singleton:casefold",
                None,
            ),
            (text("a, b"), "'a,b'", true, true, "text:casefold", None),
            (text("it's"), "\"it's\"", true, true, "text:casefold", None),
            (text("it's"), "'it\\'s'", true, true, "text:casefold", None),
            (text("Paris"), "'Lyon'", false, true, "text:mismatch", None),
            (
                text("Paris"),
                "'Paris, France'",
                false,
                true,
                "text:mismatch",
                None,
            ),
            (cs.clone(), "'Paris'", true, true, "text:exact", None),
            (cs, "'paris'", false, true, "text:mismatch", None),
            (text("Paris"), "''", false, false, "text:mismatch", None),
        ]);
    }

    #[test]
    fn list_table() {
        let nums = || list(serde_json::json!([1, 2, 3]), true);
        let set = || list(serde_json::json!(["a", "b"]), false);
        let floats = || list(serde_json::json!([1.5, 2.25]), false);
        run_table(vec![
            (
                nums(),
                "[1, 2, 3]",
                true,
                true,
                "list:ordered",
                Some("[1, 2, 3]"),
            ),
            (nums(), "(1, 2, 3)", true, true, "list:ordered", None),
            (nums(), "array([1, 2, 3])", true, true, "list:ordered", None),
            (
                nums(),
                "array([1., 2., 3.])",
                true,
                true,
                "list:ordered",
                None,
            ),
            (
                nums(),
                "array([1, 2, 3], dtype=int32)",
                true,
                true,
                "list:ordered",
                None,
            ),
            (
                nums(),
                "[np.int64(1), np.int64(2), np.int64(3)]",
                true,
                true,
                "list:ordered",
                None,
            ),
            (nums(), "[1 2 3]", true, true, "list:ordered", None),
            (nums(), "1, 2, 3", true, true, "list:bare:ordered", None),
            (nums(), "[3, 2, 1]", false, true, "list:mismatch", None),
            (nums(), "[1, 2]", false, true, "list:length_mismatch", None),
            (
                nums(),
                "[1, 2, 3, ...]",
                false,
                false,
                "list:unparsed",
                None,
            ),
            (nums(), "{'a': 1}", false, false, "list:unparsed", None),
            (
                set(),
                "{'b', 'a'}",
                true,
                true,
                "list:unordered",
                Some("[\"a\", \"b\"]"),
            ),
            (set(), "['B', 'a']", true, true, "list:unordered", None),
            (
                set(),
                "Index(['a', 'b'], dtype='object')",
                true,
                true,
                "list:unordered",
                None,
            ),
            (
                set(),
                "array(['b', 'a'], dtype='<U1')",
                true,
                true,
                "list:unordered",
                None,
            ),
            (
                set(),
                "frozenset({'a', 'b'})",
                true,
                true,
                "list:unordered",
                None,
            ),
            (set(), "['a', 'a']", false, true, "list:mismatch", None),
            (
                set(),
                "['a', 'b', 'c']",
                false,
                true,
                "list:length_mismatch",
                None,
            ),
            (
                floats(),
                "[2.2500001, 1.5]",
                true,
                true,
                "list:unordered",
                None,
            ),
            (floats(), "[2.26, 1.5]", false, true, "list:mismatch", None),
            (
                floats(),
                "[np.float64(1.5), np.float64(2.25)]",
                true,
                true,
                "list:unordered",
                None,
            ),
        ]);
        let pairs = list(serde_json::json!([[1, "x"], [2, "y"]]), true);
        let c = check(&pairs, Some("[(1, 'x'), (2, 'y')]"), "");
        assert!(c.correct, "{c:?}");
    }

    fn dabench_expected() -> Expected {
        let mut answers = BTreeMap::new();
        answers.insert("mean_price".to_string(), num_tol(12.35, Some(1e-6), None));
        answers.insert("top_city".to_string(), text("Colden"));
        answers.insert("n_rows".to_string(), num_tol(120.0, Some(1e-6), None));
        Expected::Multi { answers }
    }

    #[test]
    fn multi_answers() {
        let e = dabench_expected();
        let out = "rows loaded\n@mean_price[12.35] @top_city[Colden]\n@n_rows[120]\n";
        let c = check(&e, None, out);
        assert!(c.correct && c.parsed, "{c:?}");
        assert_eq!(c.rule, "multi:3/3");
        assert_eq!(c.parts.len(), 3);

        // One wrong, one missing.
        let c = check(&e, None, "@mean_price[12.36]\n@top_city[colden]");
        assert!(!c.correct && c.parsed, "{c:?}");
        assert_eq!(c.rule, "multi:1/3");
        let missing = c.parts.iter().find(|p| p.name == "n_rows").unwrap();
        assert_eq!(missing.rule, "missing");
        assert!(missing.extracted.is_none());

        // The last occurrence wins; the answer value overrides stdout.
        let c = check(
            &e,
            Some("'@n_rows[120]'"),
            "@mean_price[1]\n@mean_price[12.35]\n@top_city[Colden]\n@n_rows[7]",
        );
        assert!(c.correct, "{c:?}");

        // Nothing found: not parsed.
        let c = check(&e, Some("12.35"), "the mean price is 12.35");
        assert!(!c.correct && !c.parsed, "{c:?}");
        assert_eq!(c.rule, "multi:0/3");
    }

    #[test]
    fn tagged_values_are_bracket_balanced() {
        let found = find_tagged("@cols[['a', 'b']] x@y[1] @bad[unclosed @ok[2] @[3] email@host");
        assert_eq!(
            found,
            vec![
                ("cols".to_string(), "['a', 'b']".to_string()),
                ("y".to_string(), "1".to_string()),
                ("ok".to_string(), "2".to_string()),
            ]
        );
        let mut answers = BTreeMap::new();
        answers.insert(
            "cols".to_string(),
            list(serde_json::json!(["a", "b"]), true),
        );
        let c = check(&Expected::Multi { answers }, None, "@cols[['a', 'b']]");
        assert!(c.correct, "{c:?}");
        assert_eq!(c.parts[0].rule, "list:ordered");
    }

    #[test]
    fn no_answer_is_not_parsed() {
        for e in [num(1.0), text("x"), list(serde_json::json!([1]), true)] {
            let c = check(&e, None, "1\n");
            assert!(!c.correct && !c.parsed, "{c:?}");
            assert!(c.rule.ends_with(":no_answer"), "{c:?}");
            let c = check(&e, Some("  "), "");
            assert!(!c.parsed, "{c:?}");
        }
    }

    #[test]
    fn check_serializes_without_empty_parts() {
        let c = check(&num(1.0), Some("1"), "");
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("parts").is_none());
        assert_eq!(v["rule"], "number:abs_tol");
        assert_eq!(v["tolerance"], 1e-6);
        let back: Check = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
