//! Number answers: the tolerances of an expected number, compared with the
//! number read from an answer (`number_reading`).

use serde_json::Value;

use super::number_reading::{read_number, Reading};
use super::numeral::{normalize_int, Num};
use super::{Expected, Judged, DEFAULT_ABS_TOL, DEFAULT_REL_TOL, F64_EXACT_INT};

/// `Expected::Number`'s exact integer digits, if the task carries them.
///
/// Read through serde so that this compiles before and after
/// `Expected::Number` gains `exact: Option<String>`; once it has the field,
/// this becomes a plain field access.
pub(super) fn exact_digits(expected: &Expected) -> Option<String> {
    let v = serde_json::to_value(expected).ok()?;
    match v.get("exact")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(super) struct NumberTol {
    pub(super) value: f64,
    pub(super) abs_tol: Option<f64>,
    pub(super) rel_tol: Option<f64>,
    pub(super) allow_percent: bool,
    pub(super) exact: Option<String>,
}

impl NumberTol {
    fn tolerances(&self) -> (Option<f64>, Option<f64>) {
        match (self.abs_tol, self.rel_tol) {
            (None, None) => (Some(DEFAULT_ABS_TOL), Some(DEFAULT_REL_TOL)),
            t => t,
        }
    }

    /// The absolute band the tolerances allow around `value`.
    pub(super) fn band(&self) -> f64 {
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

pub(super) fn judge_number(tol: &NumberTol, answer: &str) -> Judged {
    let band = Some(tol.band());
    let (extracted, n, found) = match read_number(answer) {
        Reading::Read { text, num, found } => (text, num, found),
        Reading::Ambiguous => return Judged::failed("number:ambiguous".into(), band),
        Reading::Unparsed => return Judged::failed("number:unparsed".into(), band),
    };
    let (correct, how) = tol.compare(&n);
    Judged {
        correct,
        parsed: true,
        extracted: Some(extracted),
        normalized: Some(n.normalized()),
        rule: format!("{}:{how}", found.rule()),
        tolerance: band,
    }
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use super::super::fixtures::{num, num_tol, pct, run_table};
    use super::*;

    #[test]
    fn number_literals_and_wrappers() {
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
        ]);
    }

    #[test]
    fn number_tolerance_edges() {
        run_table(vec![
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
        ]);
    }

    #[test]
    fn number_free_text_is_read_by_the_one_rule() {
        run_table(vec![
            // Free text: the number after `=`, or the text's only number
            // (the rule's own table is in number_reading.rs).
            (
                num(42.0),
                "The answer is 42.",
                true,
                true,
                "number:sentence:abs_tol",
                Some("42"),
            ),
            (
                num(5.0),
                "x = 5",
                true,
                true,
                "number:equation:abs_tol",
                None,
            ),
            (
                num(1234.5),
                "Total: $1,234.50",
                true,
                true,
                "number:sentence:abs_tol",
                None,
            ),
            (
                num(42.0),
                "The answer is 41.",
                false,
                true,
                "number:sentence:mismatch",
                None,
            ),
        ]);
    }

    #[test]
    fn number_singletons_and_near_numbers() {
        run_table(vec![
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
                true,
                true,
                "number:unit:abs_tol",
                Some("18"),
            ),
            (num(18.0), "18+0j", false, false, "number:unparsed", None),
            (num(18.0), "True", false, false, "number:unparsed", None),
            (num(18.0), "-18", false, true, "number:mismatch", None),
        ]);
    }

    #[test]
    fn number_non_numbers() {
        run_table(vec![
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
            (num(2.0), "[1, 2]", false, false, "number:ambiguous", None),
            (num(1.0), "1,23", false, false, "number:unparsed", None),
            (num(1.0), "nan", false, true, "number:mismatch", None),
        ]);
    }

    #[test]
    fn number_srepr_texts() {
        run_table(vec![
            // A sympy expression the kernel read as its srepr text is not
            // a number, whatever numbers its leaves hold.
            (
                num(3.0 * 13f64.sqrt()),
                "Mul(Integer(3), Pow(Integer(13), Rational(1, 2)))",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(3.0),
                "Mul(Integer(3), Pow(Integer(13), Rational(1, 2)))",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(std::f64::consts::FRAC_PI_2),
                "Mul(Rational(1, 2), pi)",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(1.0),
                "Interval(Integer(0), Integer(1), true, false)",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(5.0),
                "Equality(Symbol('x'), Integer(5))",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(2.5),
                "Mul(Integer(-1), Float('2.5', precision=53), Symbol('x'))",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(1.0),
                "MutableDenseMatrix([[Integer(1), Integer(2)], [Integer(3), Integer(4)]])",
                false,
                false,
                "number:",
                None,
            ),
            (num(1.0), "oo", false, false, "number:", None),
            (
                num(2.0),
                "[Pow(Integer(2), Rational(1, 2))]",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(2.0),
                "(3, Mul(Rational(1, 2), pi))",
                false,
                false,
                "number:",
                None,
            ),
            (
                num(53.0),
                "The answer is Mul(Float('2.5', precision=53), Symbol('x'))",
                false,
                false,
                "number:unparsed",
                None,
            ),
            // A lone srepr number is still the number.
            (num(9.0), "Integer(9)", true, true, "number:abs_tol", None),
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
}
