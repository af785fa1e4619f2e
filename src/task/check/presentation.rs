//! Presentation around an answer value: markdown, `\boxed{}`, solution
//! tags, answer prefixes, repr quotes and scalar wrappers.

use super::literal::{scalar_wrapper, split_call, strip_quotes};

/// Peels presentation from an answer value: surrounding whitespace,
/// markdown emphasis and code ticks, `\boxed{}`, `<solution>` tags,
/// `Final Answer:` / `####` prefixes, repr quotes and scalar wrappers such
/// as `np.float64(…)`, `Decimal('…')`, `mpf('…')`, `Fraction(3, 4)`.
pub(super) fn unwrap_value(answer: &str) -> String {
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
