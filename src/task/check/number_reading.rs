//! How a number is read from an answer: one rule for an `answer` value and
//! for the last stdout line alike (docs/methodology.md, "Reading a
//! number", has the table these tests mirror).
//!
//! In order: the whole value is a number; the only element of a list; the
//! number after the last `=`; the only number of the text, alone with unit
//! words after it or inside a sentence. Text with several different numbers
//! and no `=` is *ambiguous*: refused, never guessed. Arithmetic is never
//! evaluated (`56 / 4` is two numbers); a fraction numeral `p/q` of two
//! integers written without spaces (as `fractions` and `sympy` print one)
//! is a number.

use super::literal::{parse_literal, Lit};
use super::numeral::{parse_number_literal, Num};
use super::presentation::unwrap_value;

/// How a number was found in an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// The whole value is a number: `42`, `$1,234.50`, `12.5%`,
    /// `np.float64(3.5)`.
    Whole,
    /// The only element of a list or array: `[5]`, `array([5.])`.
    Singleton,
    /// The number and at most three words after it: `3 weeks`,
    /// `14,000 gallons`, `5kg`.
    Unit,
    /// The only number of a sentence: `The answer is 14000 gallons.`
    Sentence,
    /// The only number after the last `=`: `26 * 5 * 1000 = 130,000`.
    Equation,
}

impl Found {
    /// The rule's prefix in a check (`number:unit:abs_tol`).
    pub(super) fn rule(self) -> &'static str {
        match self {
            Found::Whole => "number",
            Found::Singleton => "number:singleton",
            Found::Unit => "number:unit",
            Found::Sentence => "number:sentence",
            Found::Equation => "number:equation",
        }
    }
}

/// What an answer says as a number.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reading {
    Read {
        /// The text the number was read from.
        text: String,
        num: Num,
        found: Found,
    },
    /// Several different numbers, none marked as the answer.
    Ambiguous,
    /// No number that can be read.
    Unparsed,
}

/// Words after a number that still make it a number with its unit.
const UNIT_WORDS: usize = 3;

/// Reads the number `answer` stands for.
pub(super) fn read_number(answer: &str) -> Reading {
    let s = unwrap_value(answer);
    if let Some(num) = parse_number_literal(&s) {
        return read(s, num, Found::Whole);
    }
    match parse_literal(&s) {
        // A 0-d array: `array(18.)`.
        Some(Lit::Num(text, num)) => return read(text, num, Found::Whole),
        Some(Lit::List(items)) => {
            return match items.as_slice() {
                [Lit::Num(text, num)] => read(text.clone(), num.clone(), Found::Singleton),
                _ if items.iter().filter(|i| matches!(i, Lit::Num(..))).count() > 1 => {
                    Reading::Ambiguous
                }
                _ => Reading::Unparsed,
            };
        }
        _ => {}
    }
    if holds_sympy_numbers(&s) {
        // A sympy expression as the kernel reads it (srepr text: `Mul(
        // Integer(3), Pow(Integer(13), Rational(1, 2)))`): its leaves are
        // parts of an expression, never the answer's number.
        return Reading::Unparsed;
    }
    read_text(&s)
}

/// Whether `text` holds a sympy number in srepr form (`Integer(3)`,
/// `Rational(1, 2)`, `Float('2.5', precision=53)`) that is not the whole
/// text.
fn holds_sympy_numbers(text: &str) -> bool {
    ["Integer(", "Rational(", "Float("].iter().any(|call| {
        text.match_indices(call).any(|(at, _)| {
            !text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
        })
    })
}

fn read(text: String, num: Num, found: Found) -> Reading {
    Reading::Read { text, num, found }
}

/// Free text: the number after the last `=`, else the text's only number.
fn read_text(s: &str) -> Reading {
    let text = without_latex(&without_emphasis(s));
    if let Some(tail) = after_last_equals(&text) {
        let (numbers, _) = numbers_in(tail);
        return match numbers.as_slice() {
            [] => Reading::Unparsed,
            [(_, n)] => match n {
                Some((text, num)) => read(text.clone(), num.clone(), Found::Equation),
                None => Reading::Unparsed,
            },
            _ => Reading::Ambiguous,
        };
    }
    let (numbers, words) = numbers_in(&text);
    match numbers.as_slice() {
        [] => Reading::Unparsed,
        [(position, n)] => match n {
            Some((text, num)) => {
                let found = if *position == 0 && words <= 1 + UNIT_WORDS {
                    Found::Unit
                } else {
                    Found::Sentence
                };
                read(text.clone(), num.clone(), found)
            }
            None => Reading::Unparsed,
        },
        [(_, Some((text, first))), rest @ ..]
            if rest
                .iter()
                .all(|(_, n)| n.as_ref().is_some_and(|(_, x)| same(x, first))) =>
        {
            // The same number said twice says one number.
            read(text.clone(), first.clone(), Found::Sentence)
        }
        _ => Reading::Ambiguous,
    }
}

fn same(a: &Num, b: &Num) -> bool {
    a.value == b.value && a.percent == b.percent
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || c == ':'
}

/// A number candidate of a text: its word's position among the text's
/// words, and the number when the word reads as one (`None`: it holds
/// digits but is an expression, a date or a malformed numeral).
type Candidate = (usize, Option<(String, Num)>);

/// The words of `text` that hold a number, in order. Words starting with a
/// letter (`float64`, `x2`, `sqrt(2)`) are names, not numbers. A scale
/// word after a number is part of it (`1.5 million`). Also how many words
/// the text has.
fn numbers_in(text: &str) -> (Vec<Candidate>, usize) {
    let words: Vec<&str> = text.split(is_separator).filter(|w| !w.is_empty()).collect();
    let numbers = words
        .iter()
        .enumerate()
        .filter_map(|(position, word)| {
            let core = core_of(word);
            let named = core.starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '\\');
            if named || !core.contains(|c: char| c.is_ascii_digit()) {
                return None;
            }
            let scale = words
                .get(position + 1)
                .and_then(|next| scale_of(core_of(next)));
            let number = numeral_with_unit(core).map(|(text, mut num)| match scale {
                Some(scale) => {
                    num.value *= scale;
                    num.int_digits = None;
                    (text, num)
                }
                None => (text, num),
            });
            Some((position, number))
        })
        .collect();
    (numbers, words.len())
}

/// What a scale word multiplies the number before it by.
fn scale_of(word: &str) -> Option<f64> {
    match word.to_ascii_lowercase().as_str() {
        "thousand" => Some(1e3),
        "million" => Some(1e6),
        "billion" => Some(1e9),
        "trillion" => Some(1e12),
        _ => None,
    }
}

/// `text` without the LaTeX around numbers: `\boxed{`, `\text{`, `\(`,
/// `\)`, `\[`, `\]`; `\$` and `\%` as `$` and `%`; `{,}` as `,`.
fn without_latex(text: &str) -> String {
    if !text.contains(['\\', '{']) {
        return text.to_string();
    }
    let mut out = text.to_string();
    for (latex, plain) in [
        ("\\boxed{", ""),
        ("\\text{", ""),
        ("\\textbf{", ""),
        ("\\mathrm{", ""),
        ("\\(", ""),
        ("\\)", ""),
        ("\\[", ""),
        ("\\]", ""),
        ("\\$", "$"),
        ("\\%", "%"),
        ("{,}", ","),
    ] {
        out = out.replace(latex, plain);
    }
    out
}

/// A word without the punctuation around it: brackets, quotes, sentence
/// marks, markdown and LaTeX delimiters.
fn core_of(word: &str) -> &str {
    word.trim_start_matches(['(', '[', '{', '"', '\'', '“', '‘', '<', '*', '_', '~'])
        .trim_end_matches([
            '.', ',', ';', '!', '?', ')', ']', '}', '"', '\'', '”', '’', '>', '*', '_', '~', '$',
        ])
}

/// A numeral, optionally followed by a unit written onto it (`5kg`,
/// `$7/hour`, `5-year`): the numeral and its number.
fn numeral_with_unit(core: &str) -> Option<(String, Num)> {
    let end = numeral_end(core);
    let (mut numeral, mut unit) = core.split_at(end);
    if let Some(n) = numeral.strip_suffix(['/', '-']) {
        unit = &core[n.len()..];
        numeral = n;
    }
    if !unit.is_empty() {
        let word = unit.trim_start_matches(['/', '-']);
        let unit_like = word.starts_with(char::is_alphabetic)
            && unit.len() - word.len() <= 1
            && !unit.contains(|c: char| c.is_ascii_digit());
        if !unit_like {
            return None;
        }
    }
    let num = parse_number_literal(numeral)?;
    Some((numeral.to_string(), num))
}

/// Where the numeral at the start of `core` ends: signs, currency, digits,
/// separators, a decimal point, an exponent, `%`, a fraction's `/`.
fn numeral_end(core: &str) -> usize {
    let bytes: Vec<(usize, char)> = core.char_indices().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i].1;
        let exponent = matches!(c, 'e' | 'E')
            && i > 0
            && bytes[i - 1].1.is_ascii_digit()
            && match bytes.get(i + 1).map(|b| b.1) {
                Some(d) if d.is_ascii_digit() => true,
                Some('+' | '-') => bytes.get(i + 2).is_some_and(|b| b.1.is_ascii_digit()),
                _ => false,
            };
        let numeric = c.is_ascii_digit()
            || matches!(
                c,
                '+' | '-' | '−' | '$' | '€' | '£' | '¥' | ',' | '_' | '.' | '%' | '/'
            );
        if exponent {
            // The exponent's sign belongs to it.
            i += 2;
            continue;
        }
        if !numeric {
            return bytes[i].0;
        }
        i += 1;
    }
    core.len()
}

/// The text after the last `=` (or `≈`) that is not part of `==`, `<=`,
/// `>=`, `!=` or `=>`; `None` without one.
fn after_last_equals(text: &str) -> Option<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    (0..chars.len()).rev().find_map(|i| {
        let (at, c) = chars[i];
        let before = i.checked_sub(1).map(|j| chars[j].1);
        let after = chars.get(i + 1).map(|p| p.1);
        let marker = c == '≈'
            || (c == '='
                && !matches!(before, Some('=' | '<' | '>' | '!'))
                && !matches!(after, Some('=' | '>')));
        marker.then(|| &text[at + c.len_utf8()..])
    })
}

/// `text` without markdown emphasis and code marks (`**18**`, `` `18` ``)
/// that stand around words, keeping `**` between digits (`2**10`).
fn without_emphasis(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            i += 1;
            continue;
        }
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            let before = i.checked_sub(1).map(|j| chars[j]);
            let after = chars.get(i + 2);
            let between = before.is_some_and(|b| b.is_alphanumeric())
                && after.is_some_and(|a| a.is_alphanumeric());
            if !between {
                i += 2;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of docs/methodology.md ("Reading a number"), row by row:
    /// answer, what is read (`None`: nothing), how.
    #[test]
    fn the_documented_table() {
        let rows: &[(&str, Option<f64>, &str)] = &[
            ("42", Some(42.0), "number"),
            ("$1,234.50", Some(1234.5), "number"),
            ("12.5%", Some(12.5), "number"),
            ("np.float64(3.5)", Some(3.5), "number"),
            ("3/4", Some(0.75), "number"),
            ("$7", Some(7.0), "number"),
            ("[5]", Some(5.0), "number:singleton"),
            ("array([5.])", Some(5.0), "number:singleton"),
            ("3 weeks", Some(3.0), "number:unit"),
            ("2 hours", Some(2.0), "number:unit"),
            ("36 hours", Some(36.0), "number:unit"),
            ("14,000 gallons", Some(14000.0), "number:unit"),
            ("$7 per hour", Some(7.0), "number:unit"),
            ("5kg", Some(5.0), "number:unit"),
            (
                "The answer is 14000 gallons.",
                Some(14000.0),
                "number:sentence",
            ),
            ("The total cost is 7 dollars.", Some(7.0), "number:sentence"),
            (
                "The answer is <solution> 131,250",
                Some(131250.0),
                "number:sentence",
            ),
            ("The answer is **18**.", Some(18.0), "number:sentence"),
            (
                "The answer is $\\boxed{18}$.",
                Some(18.0),
                "number:sentence",
            ),
            ("It costs \\$18.", Some(18.0), "number:sentence"),
            ("\\(18\\) eggs", Some(18.0), "number:unit"),
            ("1.5 million dollars", Some(1.5e6), "number:unit"),
            ("Total: $1,234.50", Some(1234.5), "number:sentence"),
            (
                "She sold 18 eggs, so 18 is the answer",
                Some(18.0),
                "number:sentence",
            ),
            ("26 * 5 * 1000 = 130,000", Some(130000.0), "number:equation"),
            ("x = -3.5", Some(-3.5), "number:equation"),
            ("56 / 4 = 14 apples", Some(14.0), "number:equation"),
            ("56 / 4", None, "number:ambiguous"),
            (
                "16 - 3 - 4 = 9 eggs, 9 * 2 = 18",
                Some(18.0),
                "number:equation",
            ),
            ("I think 12, or maybe 14", None, "number:ambiguous"),
            ("[1, 2]", None, "number:ambiguous"),
            ("= 14 apples and 2 pears", None, "number:ambiguous"),
            ("2**10", None, "number:unparsed"),
            ("sqrt(2)", None, "number:unparsed"),
            ("Mul(Rational(1, 2), pi)", None, "number:unparsed"),
            ("dtype: float64", None, "number:unparsed"),
            ("seven", None, "number:unparsed"),
            ("1,23", None, "number:unparsed"),
            ("3,5", None, "number:unparsed"),
            ("14 000", None, "number:ambiguous"),
        ];
        for (answer, value, rule) in rows {
            let reading = read_number(answer);
            let (got_value, got_rule) = match &reading {
                Reading::Read { num, found, .. } => (Some(num.value), found.rule()),
                Reading::Ambiguous => (None, "number:ambiguous"),
                Reading::Unparsed => (None, "number:unparsed"),
            };
            assert_eq!(
                (got_value, got_rule),
                (*value, *rule),
                "{answer:?} read as {reading:?}"
            );
        }
    }

    /// Text the kernel sent that was not valid Unicode arrives with U+FFFD
    /// in its place (kernel/text.rs): a number with one written onto it
    /// is not a numeral, so it is never read as the number it garbles.
    #[test]
    fn a_replacement_character_makes_a_number_unreadable() {
        for answer in ["42\u{FFFD}", "\u{FFFD}42", "4\u{FFFD}2", "'42\u{FFFD}'"] {
            let reading = read_number(answer);
            assert!(
                matches!(reading, Reading::Unparsed),
                "{answer:?} read as {reading:?}"
            );
        }
        // Beside a number it is text like any other.
        let reading = read_number("The answer is 42 \u{FFFD}");
        assert!(
            matches!(&reading, Reading::Read { num, .. } if num.value == 42.0),
            "{reading:?}"
        );
    }

    #[test]
    fn comparisons_and_arrows_are_no_equation() {
        assert_eq!(after_last_equals("a == 5"), None);
        assert_eq!(after_last_equals("x <= 5 => y"), None);
        assert_eq!(after_last_equals("x = 5 >= 3"), Some(" 5 >= 3"));
        assert_eq!(after_last_equals("about ≈ 14"), Some(" 14"));
    }

    #[test]
    fn units_written_onto_a_number() {
        for (word, read) in [
            ("5kg", Some(5.0)),
            ("$7/hour", Some(7.0)),
            ("5-year", Some(5.0)),
            ("1.5e-7", Some(1.5e-7)),
            ("3rd", Some(3.0)),
            ("12/25/2024", None),
            ("5-3", None),
            ("2*pi", None),
            ("18+0j", None),
            ("5x2", None),
        ] {
            assert_eq!(
                numeral_with_unit(word).map(|(_, n)| n.value),
                read,
                "{word}"
            );
        }
    }
}
