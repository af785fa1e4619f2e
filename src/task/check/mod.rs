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
//!   `number:ambiguous` — several different numbers, none marked as the
//!   answer (refused, never guessed);
//! - how a number was read (docs/methodology.md, "Reading a number"):
//!   `number:…` the whole value, `number:singleton:…` the only element of
//!   a list/array, `number:unit:…` a number with unit words (`3 weeks`),
//!   `number:sentence:…` the only number of a sentence,
//!   `number:equation:…` the number after the last `=`;
//! - `text:casefold`, `text:exact` (case-sensitive), `text:singleton:…`,
//!   `text:mismatch`, `text:no_answer`;
//! - `list:ordered`, `list:unordered`, `list:bare:…` (a bare `1, 2, 3`),
//!   `list:length_mismatch`, `list:mismatch`, `list:unparsed`, `list:no_answer`;
//! - `multi:<correct>/<total>` with one [`PartCheck`] per expected name.

mod list;
mod literal;
pub mod math;
mod multi;
mod number;
mod number_reading;
mod numeral;
mod presentation;
pub mod published;
mod text;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod props;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Expected;
use list::judge_list;
use multi::{check_multi, single_named_value};
use number::{exact_digits, judge_number, NumberTol};
use text::judge_text;

pub use multi::find_tagged;
pub(crate) use numeral::{parse_number_literal, Num};

/// Version of the checkers and of the answer rules (what is read as a
/// round's answer). Bump when a rule changes a verdict: a run's protocol
/// fingerprint records it, so `compare` can tell runs scored by different
/// rules apart.
///
/// 2: a one-element list of a string holding an escaped quote and a space
/// is that string, no longer split at its spaces.
/// 3: one rule for reading a number from text (a number with unit words
/// or the only number of a sentence is read; several different numbers
/// are `number:ambiguous`; `56 / 4` is no longer a fraction).
/// 4: LaTeX answers decided by the symbolic checker; sets and sympy
/// expressions are read as answers; published rules judged beside.
pub const CHECKER_VERSION: u32 = 4;

/// The verdict on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// The verdicts of the dataset's published rules on the same answer
    /// (`gsm8k`, `dabench`, `math_verify`, `minerva`; see
    /// [`published`]), beside retrace's in `correct`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub published: BTreeMap<String, bool>,
}

impl Check {
    /// How the answer was read, without how it then compared: `number`
    /// (the whole value), `number:unit`, `number:sentence`,
    /// `number:equation`, `number:singleton`, `number:ambiguous`,
    /// `number:unparsed`, `text`, `text:singleton`, `list:bare`, `multi`…
    pub fn reading(&self) -> String {
        const READ: [&str; 6] = [
            "singleton",
            "unit",
            "sentence",
            "equation",
            "bare",
            // Before checker version 3.
            "last_number_fallback",
        ];
        const NOT_READ: [&str; 3] = ["unparsed", "ambiguous", "no_answer"];
        let mut parts = self.rule.split(':');
        let kind = parts.next().unwrap_or_default();
        match parts.next() {
            Some(how) if kind != "multi" && (READ.contains(&how) || NOT_READ.contains(&how)) => {
                format!("{kind}:{how}")
            }
            _ => kind.to_string(),
        }
    }
}

/// The verdict on one `@name[value]` part of a multi-answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
        // Decided by the symbolic checker ([`math`]); without it, wrong.
        Expected::Math { .. } => math::unchecked(),
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
                published: BTreeMap::new(),
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
        Expected::Math { .. } => Judged::failed("math:unchecked".into(), None),
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

#[cfg(test)]
mod tests {
    use super::fixtures::{list, num, text};
    use super::*;

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
