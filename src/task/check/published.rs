//! The scoring rules datasets' publishers ship, applied beside retrace's
//! own so a run's accuracy can be read against published numbers
//! (docs/math-checking.md, "Published rules"). Each is a port of the
//! publisher's code, kept as strict as the original: where retrace reads
//! more forms of an answer than the publisher does, these say no.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::literal::strip_quotes;
use crate::task::{Expected, Published, Task};

/// Names of the published rules, as records, summaries and reports show
/// them.
pub const GSM8K: &str = "gsm8k";
pub const DABENCH: &str = "dabench";
pub const MATH_VERIFY: &str = "math_verify";
pub const MINERVA: &str = "minerva";

/// The published rules a task is scored by besides retrace's, by name.
pub fn rules_of(task: &Task) -> &'static [&'static str] {
    match (&task.published, &task.expected) {
        (Some(Published::Gsm8k { .. }), _) => &[GSM8K],
        (Some(Published::Dabench), _) => &[DABENCH],
        (None, Expected::Math { .. }) => &[MATH_VERIFY, MINERVA],
        (None, _) => &[],
    }
}

/// The verdicts of the task's own published rule (GSM8K, DABench) on an
/// answer; MATH's come from the symbolic checker.
pub fn judge(task: &Task, answer: Option<&str>, stdout: &str) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    match (&task.published, &task.expected) {
        (Some(Published::Gsm8k { answer: reference }), _) => {
            out.insert(GSM8K.to_string(), gsm8k(reference, answer));
        }
        (Some(Published::Dabench), Expected::Multi { answers }) => {
            out.insert(DABENCH.to_string(), dabench(answers, answer, stdout));
        }
        _ => {}
    }
    out
}

/// lm-evaluation-harness's `gsm8k` exact match: `regexes_to_ignore` (`,`,
/// `$`, everything up to `#### `, a final `.`) removed from both sides,
/// case ignored, then equal as strings. The answer is the value as text
/// (a string answer's content, without its quotes): `18` matches `18`,
/// `18.0` does not.
pub fn gsm8k(reference: &str, answer: Option<&str>) -> bool {
    let Some(answer) = answer else {
        return false;
    };
    let answer = strip_quotes(answer.trim()).unwrap_or_else(|| answer.trim().to_string());
    let clean = |s: &str| {
        static IGNORED: LazyLock<[Regex; 4]> = LazyLock::new(|| {
            [",", r"\$", r"(?s).*#### ", r"\.$"].map(|r| Regex::new(r).expect("valid regex"))
        });
        let mut s = s.to_string();
        for re in IGNORED.iter() {
            s = re.replace_all(&s, "").into_owned();
        }
        s.trim().to_lowercase()
    };
    let answer = clean(&answer);
    !answer.is_empty() && answer == clean(reference)
}

/// InfiAgent-DABench's closed-form evaluation: `@(\w+)\[(.*?)\]` found in
/// the output and the answer value (the last of a name wins); every
/// expected part must be there and equal its label as a string or, both
/// read as floats, within 1e-6. A plain value is not a tagged answer.
pub fn dabench(answers: &BTreeMap<String, Expected>, answer: Option<&str>, stdout: &str) -> bool {
    static TAG: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"@(\w+)\[(.*?)\]").expect("valid regex"));
    let text = format!("{stdout}\n{}", answer.unwrap_or_default());
    let mut found: BTreeMap<&str, &str> = BTreeMap::new();
    for cap in TAG.captures_iter(&text) {
        if let (Some(name), Some(value)) = (cap.get(1), cap.get(2)) {
            found.insert(name.as_str(), value.as_str());
        }
    }
    !answers.is_empty()
        && answers.iter().all(|(name, expected)| {
            found
                .get(name.as_str())
                .is_some_and(|value| label_equal(value, expected))
        })
}

fn label_equal(response: &str, label: &Expected) -> bool {
    let label = match label {
        Expected::Number { value, .. } => {
            return response == value.to_string()
                || response
                    .trim()
                    .parse::<f64>()
                    .is_ok_and(|r| (r - value).abs() < 1e-6);
        }
        Expected::Text { value, .. } => value.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    response == label
        || matches!(
            (response.trim().parse::<f64>(), label.trim().parse::<f64>()),
            (Ok(r), Ok(l)) if (r - l).abs() < 1e-6
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::check::fixtures::{num, text};

    #[test]
    fn gsm8k_is_lm_evals_exact_match() {
        for (reference, answer, same) in [
            ("18", "18", true),
            ("1,000", "1000", true),
            ("18", "'18'", true),
            ("18", "$18.", true),
            ("18", "18.0", false),
            ("18", "18 eggs", false),
            ("-3", "-3", true),
            ("18", "", false),
        ] {
            assert_eq!(gsm8k(reference, Some(answer)), same, "{reference} {answer}");
        }
        assert!(!gsm8k("18", None));
    }

    #[test]
    fn dabench_requires_every_part_tagged() {
        let answers: BTreeMap<String, Expected> = [
            ("mean".to_string(), num(0.653)),
            ("city".to_string(), text("Paris")),
        ]
        .into();
        assert!(dabench(&answers, None, "@mean[0.6530000001] @city[Paris]"));
        assert!(dabench(&answers, Some("'@mean[0.653], @city[Paris]'"), ""));
        assert!(!dabench(&answers, None, "@mean[0.653] @city[paris]"));
        assert!(!dabench(&answers, None, "@mean[0.653]"));
        let one: BTreeMap<String, Expected> = [("mean".to_string(), num(0.653))].into();
        assert!(!dabench(&one, Some("0.653"), ""), "a plain value is no tag");
        assert!(dabench(&one, Some("0.653"), "@mean[0.653]"));
        // The original's lazy match: a list value ends at its first `]`.
        let cols: BTreeMap<String, Expected> = [("cols".to_string(), text("['a', 'b']"))].into();
        assert!(!dabench(&cols, None, "@cols[['a', 'b']]"));
    }
}
