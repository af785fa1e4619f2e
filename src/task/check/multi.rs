//! Multi-answers: `@name[value]` parts found in stdout and the answer value
//! (or a dict of them), scored part by part, and a plain answer value read
//! as the one part of a single-part task; and a single answer given in one
//! of those named forms.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::literal::{read_string, split_top_level};
use super::{judge, Check, Expected, PartCheck};

/// `@name[value]` occurrences in order; values are bracket-balanced so
/// `@cols[['a', 'b']]` keeps its inner brackets.
pub fn find_tagged(text: &str) -> Vec<(String, String)> {
    let bytes = text.as_bytes();
    let closes = closing_brackets(bytes);
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
        match closes.get(&j) {
            Some(&k) => {
                out.push((text[name_start..j].to_string(), text[j + 1..k].to_string()));
                i = k + 1;
            }
            None => i = j + 1,
        }
    }
    out
}

/// Each `[` that is closed on its line → the `]` closing it, found in one
/// pass: scanning ahead from every `@name[` instead made a megabyte of
/// unclosed tags quadratic.
fn closing_brackets(bytes: &[u8]) -> HashMap<usize, usize> {
    let mut closes = HashMap::new();
    let mut open = Vec::new();
    for (k, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => open.push(k),
            b']' => {
                if let Some(j) = open.pop() {
                    closes.insert(j, k);
                }
            }
            // Values are single-line: an unclosed `[` ends at the newline.
            b'\n' => open.clear(),
            _ => {}
        }
    }
    closes
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
pub(super) fn single_named_value(answer: &str) -> Option<String> {
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

pub(super) fn check_multi(
    answers: &std::collections::BTreeMap<String, Expected>,
    answer: Option<&str>,
    stdout: &str,
) -> Check {
    let mut found: Vec<(String, String)> = find_tagged(stdout);
    if let Some(a) = answer {
        let named = find_tagged(a);
        // `answer = {"@name": value, ...}` (with or without the `@`).
        let entries = dict_entries(a);
        // A task with one part and a plain value (`answer = 0.653`): the
        // value can only be that part. Only the answer value, one line; a
        // tag in stdout still wins, being later in `found`.
        if let ([(name, _)], true, None) = (
            answers.iter().collect::<Vec<_>>().as_slice(),
            named.is_empty(),
            &entries,
        ) {
            if !a.trim().is_empty() && !a.trim().contains('\n') {
                found.insert(0, ((*name).clone(), a.trim().to_string()));
            }
        }
        found.extend(named);
        found.extend(entries.unwrap_or_default());
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
        published: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::check;
    use super::super::fixtures::{list, num, num_tol, text};
    use super::*;

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
    fn a_plain_value_is_the_one_part_of_a_single_part_task() {
        // DABench 671: one part, `answer = 0.653`.
        let one = Expected::Multi {
            answers: BTreeMap::from([("mse".to_string(), num_tol(0.653, Some(1e-3), None))]),
        };
        let c = check(&one, Some("0.653"), "");
        assert!(c.correct && c.parsed, "{c:?}");
        assert_eq!(c.rule, "multi:1/1");
        assert_eq!(c.parts[0].extracted.as_deref(), Some("0.653"));
        // A tag in stdout is the model's own naming and wins.
        let c = check(&one, Some("0.1"), "@mse[0.653]");
        assert!(c.correct, "{c:?}");
        // A wrong plain value is read, and wrong.
        let c = check(&one, Some("0.9"), "");
        assert!(!c.correct && c.parsed, "{c:?}");
        // With two parts a plain value names neither.
        let c = check(&dabench_expected(), Some("12.35"), "");
        assert!(!c.parsed, "{c:?}");
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
}
