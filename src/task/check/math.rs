//! LaTeX answers ([`Expected::Math`](crate::task::Expected::Math)): the
//! verdicts the symbolic checker returns for one answer, under retrace's
//! rule and the published ones, and the [`Check`] they make. The checker
//! itself runs in a kernel of its own (`harness::math_checker`); this is
//! what its one line of output means.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::published::{MATH_VERIFY, MINERVA};
use super::Check;

/// What the model is told after a LaTeX task's question: the answer forms
/// the checker reads (docs/math-checking.md).
pub const ANSWER_FORM: &str = "Leave the exact answer in `answer`: a sympy \
expression (`3*sqrt(13)`, `Rational(14, 3)`, `pi/2`), an integer, or a LaTeX string \
(`'\\frac{14}{3}'`). A float counts only within a relative 1e-6 of the exact value. \
Several values in order: a tuple `(3, pi/2)`; all solutions: a set `{2, -3}`; an \
interval: `sympy.Interval(-2, 7, False, True)` or LaTeX `'[-2, 7)'`; a matrix: \
`sympy.Matrix(...)`; a word or name: a string.";

/// The checker's verdicts on one answer (the JSON after `RETRACE-MATH `).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MathVerdict {
    /// The expected LaTeX could be read.
    pub expected_parsed: bool,
    #[serde(default)]
    pub expected_normalized: Option<String>,
    pub retrace: RuleVerdict,
    pub math_verify: Published,
    pub minerva: Published,
}

/// retrace's own rule on one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleVerdict {
    pub correct: bool,
    pub parsed: bool,
    /// `math:exact`, `math:numeric`, `math:tuple`… (docs/math-checking.md).
    pub rule: String,
    #[serde(default)]
    pub extracted: Option<String>,
    #[serde(default)]
    pub normalized: Option<String>,
    #[serde(default)]
    pub tolerance: Option<f64>,
}

/// A published rule's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    pub correct: bool,
    #[serde(default)]
    pub note: Option<String>,
}

impl MathVerdict {
    /// The verdict when the checker could not decide (`rule`:
    /// `math:checker_timeout`, `math:checker_killed`, `math:checker_error`):
    /// not equivalent under every rule, with why.
    pub fn undecided(rule: &str, why: &str) -> MathVerdict {
        let no = Published {
            correct: false,
            note: Some(why.to_string()),
        };
        MathVerdict {
            expected_parsed: false,
            expected_normalized: None,
            retrace: RuleVerdict {
                correct: false,
                parsed: false,
                rule: rule.to_string(),
                extracted: None,
                normalized: Some(why.to_string()),
                tolerance: None,
            },
            math_verify: no.clone(),
            minerva: no,
        }
    }

    /// The round's check: retrace's verdict, the published ones beside it.
    pub fn into_check(self) -> Check {
        let published = BTreeMap::from([
            (MATH_VERIFY.to_string(), self.math_verify.correct),
            (MINERVA.to_string(), self.minerva.correct),
        ]);
        Check {
            correct: self.retrace.correct,
            parsed: self.retrace.parsed,
            extracted: self.retrace.extracted,
            normalized: self.retrace.normalized,
            rule: self.retrace.rule,
            tolerance: self.retrace.tolerance,
            parts: Vec::new(),
            published,
        }
    }
}

/// The check of a math task no checker has looked at (`rule`
/// `math:unchecked`): scored wrong, never parsed.
pub fn unchecked() -> Check {
    MathVerdict::undecided("math:unchecked", "no symbolic checker was run").into_check()
}
