//! Text answers: normalised comparison, case-folded unless the task asks
//! for case.

use super::literal::{parse_literal, Lit};
use super::presentation::unwrap_value;
use super::Judged;

pub(super) fn judge_text(expected: &str, case_sensitive: bool, answer: &str) -> Judged {
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
pub(super) fn normalize_text(s: &str, case_sensitive: bool) -> String {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{run_table, text};
    use super::super::Expected;

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
}
