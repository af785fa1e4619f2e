//! Numerals: a number as written in an answer or a dataset (sign, currency,
//! thousands separators, decimals, exponent, `%`, fractions) and its
//! canonical text.

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
    pub(super) fn normalized(&self) -> String {
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

/// A whole number literal: sign, currency (`$ € £ ¥`), thousands
/// separators, `_` digit groups, decimals, exponent, trailing `%`,
/// fractions `3/4`, `inf`/`nan`.
///
/// A fraction is a numeral only as two integers written without spaces
/// (`3/4`, `-56/4`, as `fractions` and `sympy` print one): `56 / 4` is
/// arithmetic, which is never evaluated.
pub(crate) fn parse_number_literal(text: &str) -> Option<Num> {
    let mut s = text.trim();
    let mut percent = false;
    if let Some(r) = s.strip_suffix('%') {
        percent = true;
        s = r.trim_end();
    }
    if let Some((a, b)) = s.split_once('/') {
        if a.ends_with(char::is_whitespace) || b.starts_with(char::is_whitespace) {
            return None;
        }
        let (a, b) = (parse_plain(a)?, parse_plain(b)?);
        if a.int_digits.is_none() || b.int_digits.is_none() || b.value == 0.0 {
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
pub(super) fn normalize_int(s: &str) -> Option<String> {
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
