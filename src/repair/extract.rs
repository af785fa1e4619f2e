//! Code extraction: which part of a model's reply is the program to run.
//!
//! The rules, in order (the first that yields code wins):
//!
//! 1. **Fenced Python** ([`ExtractRule::FencedPython`]). Every fenced block
//!    (```` ``` ```` or `~~~`, three or more, any indentation) whose info
//!    string's first word is `py` or starts with `python` / `ipython`
//!    (`python`, `python3`, `Python`, `ipython3`, `{.python}` …). All such blocks are
//!    concatenated in reply order, separated by a blank line: models often
//!    split code into steps, and the kernel is stateful anyway. A block is
//!    skipped when it looks like example output rather than code: the prose
//!    line just before it is an output label (ends in `output:`, `prints:`,
//!    `result:`, `returns:` …), or the block starts with
//!    `Traceback (most recent call last)`. An exact repeat of a block
//!    already taken is taken once.
//! 2. **Fenced untagged** ([`ExtractRule::FencedUntagged`]). Only when no
//!    Python-tagged block qualified: fenced blocks with no info string whose
//!    content is plausible Python (contains `=`, `import`, `print(`, `def `
//!    or `answer`, has a line that looks like code, and is not mostly
//!    sentences) and that are not example output (same tests as above);
//!    concatenated the same way. Blocks tagged with any other language
//!    (`text`, `output`, `console`, `bash`, `json`, `csv`, …) are never
//!    code.
//! 3. **Bare code** ([`ExtractRule::BareCode`]). Only when the reply has no
//!    fence line at all: after dropping up to two leading prose lines (and
//!    up to two trailing ones), every remaining non-blank line must look like
//!    a Python line (a statement keyword, an assignment, a call, a comment,
//!    an indented continuation, a closing bracket …), there must be at least
//!    two such lines or one with a strong signal (`=`, `import`, `print(`,
//!    `def `, `answer`), and no line may look like a sentence. Deliberately
//!    conservative: a reply that is mostly prose yields nothing.
//! 4. **None** ([`ExtractRule::None`]): nothing qualified (also when fences
//!    exist but none holds code). The harness records a parse failure and
//!    sends the `repair_no_code` prompt.
//!
//! An unterminated final fence (a truncated reply) runs to the end of the
//! reply. A closing fence is a line of the same fence character, at least as
//! long as the opening one, and nothing else. Leading and trailing blank
//! lines of each block are dropped; the extracted code ends with a newline.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// Which rule produced the code.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ExtractRule {
    FencedPython,
    FencedUntagged,
    BareCode,
    None,
}

impl ExtractRule {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The code found in one reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Extraction {
    /// The program to run, or `None` when nothing qualified.
    pub code: Option<String>,
    pub rule: ExtractRule,
    /// How many blocks were concatenated into `code` (0 when none).
    pub blocks: usize,
}

/// Finds the program in a model's reply (see the module documentation).
pub fn extract_code(reply: &str) -> Extraction {
    let lines: Vec<&str> = reply.lines().collect();
    let blocks = fenced_blocks(&lines);

    if blocks.is_empty() {
        return match bare_code(&lines) {
            Some(code) => Extraction {
                code: Some(code),
                rule: ExtractRule::BareCode,
                blocks: 1,
            },
            None => nothing(),
        };
    }

    let tagged: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.lang == Lang::Python && !b.looks_like_output())
        .collect();
    if let Some(found) = join(&tagged, ExtractRule::FencedPython) {
        return found;
    }
    let untagged: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.lang == Lang::Untagged && !b.looks_like_output())
        .filter(|b| plausible_python(&b.body))
        .collect();
    join(&untagged, ExtractRule::FencedUntagged).unwrap_or_else(nothing)
}

fn nothing() -> Extraction {
    Extraction {
        code: None,
        rule: ExtractRule::None,
        blocks: 0,
    }
}

fn join(blocks: &[&Block], rule: ExtractRule) -> Option<Extraction> {
    let mut taken: Vec<&str> = Vec::new();
    // A set: a reply of many distinct blocks must not compare each with all.
    let mut seen: HashSet<&str> = HashSet::new();
    for b in blocks {
        let body = b.body.as_str();
        if !body.is_empty() && seen.insert(body) {
            taken.push(body);
        }
    }
    if taken.is_empty() {
        return None;
    }
    let mut code = taken.join("\n\n");
    code.push('\n');
    Some(Extraction {
        code: Some(code),
        rule,
        blocks: taken.len(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Untagged,
    Other,
}

#[derive(Debug)]
struct Block {
    lang: Lang,
    /// Content with leading/trailing blank lines removed, no final newline.
    body: String,
    /// The last non-blank line before the opening fence, trimmed.
    before: String,
}

impl Block {
    fn looks_like_output(&self) -> bool {
        is_output_label(&self.before) || self.body.starts_with("Traceback (most recent call last)")
    }
}

/// An opening or closing fence: indentation, fence character, run length,
/// info string.
fn fence(line: &str) -> Option<(usize, char, usize, &str)> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let ch = trimmed.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let run = trimmed.chars().take_while(|&c| c == ch).count();
    if run < 3 {
        return None;
    }
    let info = trimmed[run..].trim();
    if ch == '`' && info.contains('`') {
        // Inline code such as ```x = 1``` on one line, not a fence.
        return None;
    }
    Some((indent, ch, run, info))
}

fn lang_of(info: &str) -> Lang {
    let word = info
        .split(|c: char| c.is_whitespace() || c == ',' || c == '}')
        .next()
        .unwrap_or("")
        .trim_start_matches('{')
        .trim_start_matches('.')
        .to_ascii_lowercase();
    match word.as_str() {
        "" => Lang::Untagged,
        "py" => Lang::Python,
        w if w.starts_with("python") || w.starts_with("ipython") => Lang::Python,
        _ => Lang::Other,
    }
}

fn fenced_blocks(lines: &[&str]) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut before = String::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((indent, ch, run, info)) = fence(lines[i]) else {
            if !lines[i].trim().is_empty() {
                before = lines[i].trim().to_string();
            }
            i += 1;
            continue;
        };
        let lang = lang_of(info);
        let mut content: Vec<&str> = Vec::new();
        i += 1;
        while i < lines.len() {
            if let Some((_, c, r, rest)) = fence(lines[i]) {
                if c == ch && r >= run && rest.is_empty() {
                    break;
                }
            }
            content.push(strip_indent(lines[i], indent));
            i += 1;
        }
        // Past the closing fence (or the end, for a truncated reply).
        i += 1;
        blocks.push(Block {
            lang,
            body: trim_blank_lines(&content),
            before: std::mem::take(&mut before),
        });
    }
    blocks
}

/// Removes up to `n` leading spaces (the fence's own indentation).
fn strip_indent(line: &str, n: usize) -> &str {
    let spaces = line.bytes().take(n).take_while(|&b| b == b' ').count();
    &line[spaces..]
}

fn trim_blank_lines(lines: &[&str]) -> String {
    let start = lines.iter().position(|l| !l.trim().is_empty());
    let end = lines.iter().rposition(|l| !l.trim().is_empty());
    match (start, end) {
        (Some(s), Some(e)) => lines[s..=e]
            .iter()
            .map(|l| l.trim_end())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn is_output_label(line: &str) -> bool {
    let l = line
        .trim_end_matches(['*', '_', '`', ' '])
        .to_ascii_lowercase();
    if !l.ends_with(':') {
        return false;
    }
    let l = l.trim_end_matches(':').trim_end_matches(['*', '_', ' ']);
    const LABELS: [&str; 10] = [
        "output",
        "outputs",
        "prints",
        "print",
        "result",
        "results",
        "returns",
        "stdout",
        "console",
        "expected output",
    ];
    LABELS.iter().any(|label| {
        l.ends_with(label)
            && l[..l.len() - label.len()]
                .chars()
                .last()
                .is_none_or(|c| !c.is_alphanumeric())
    })
}

/// An untagged block worth running: a strong signal, at least one line that
/// looks like code, and not mostly sentences.
fn plausible_python(body: &str) -> bool {
    let mut code = 0;
    let mut prose = 0;
    for line in body.lines().filter(|l| !l.starts_with([' ', '\t'])) {
        if is_code_line(line) {
            code += 1;
        } else if is_prose(line) {
            prose += 1;
        }
    }
    has_strong_signal(body) && code > 0 && prose * 2 <= code
}

/// The strong signals of Python code.
fn has_strong_signal(text: &str) -> bool {
    text.contains('=')
        || text.contains("import")
        || text.contains("print(")
        || text.contains("def ")
        || text.contains("answer")
}

const KEYWORDS: [&str; 30] = [
    "import ",
    "from ",
    "def ",
    "class ",
    "for ",
    "while ",
    "if ",
    "elif ",
    "else:",
    "try:",
    "except",
    "finally:",
    "with ",
    "return",
    "print(",
    "assert ",
    "raise",
    "pass",
    "break",
    "continue",
    "lambda",
    "yield",
    "global ",
    "nonlocal ",
    "del ",
    "async ",
    "await ",
    "@",
    "#",
    "match ",
];

/// Whether one line (not indented) plausibly is Python.
fn is_code_line(line: &str) -> bool {
    let t = line.trim();
    if KEYWORDS.iter().any(|k| t.starts_with(k)) {
        return true;
    }
    if t.starts_with([')', ']', '}']) || t.starts_with("\"\"\"") || t.starts_with("'''") {
        return true;
    }
    // An assignment or augmented assignment: target, then `=` not `==`.
    let target_end = t
        .find(|c: char| !(c.is_alphanumeric() || "_.[]'\", ".contains(c)))
        .unwrap_or(t.len());
    let (target, rest) = t.split_at(target_end);
    let rest = rest.trim_start_matches(['+', '-', '*', '/', '%', '@', '&', '|', '^', '<', '>']);
    if !target.trim().is_empty()
        && rest.starts_with('=')
        && !rest.starts_with("==")
        && !target.trim().contains("  ")
        && target.split_whitespace().count() <= 3
    {
        return true;
    }
    // A call or expression statement such as `foo(x)` / `df.head()`.
    let ident_end = t
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(t.len());
    ident_end > 0 && t[ident_end..].starts_with('(') && t.ends_with([')', '(', ',', '[', '{'])
}

/// Whether a line reads like an English sentence rather than code.
fn is_prose(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return false;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    let wordy = words
        .iter()
        .filter(|w| {
            w.chars()
                .all(|c| c.is_alphabetic() || ",.:;!?'".contains(c))
        })
        .count();
    words.len() >= 3 && wordy * 3 >= words.len() * 2 && !is_code_line(t)
}

fn bare_code(lines: &[&str]) -> Option<String> {
    let mut start = lines.iter().position(|l| !l.trim().is_empty())?;
    let mut end = lines.iter().rposition(|l| !l.trim().is_empty())? + 1;
    // Up to two leading prose lines ("Here is the code:").
    for _ in 0..2 {
        if start < end && !is_code_line(lines[start]) && !lines[start].starts_with([' ', '\t']) {
            start += 1;
            while start < end && lines[start].trim().is_empty() {
                start += 1;
            }
        }
    }
    // Up to two trailing prose lines ("This prints the total.").
    for _ in 0..2 {
        if end > start && is_prose(lines[end - 1]) {
            end -= 1;
            while end > start && lines[end - 1].trim().is_empty() {
                end -= 1;
            }
        }
    }
    let body = &lines[start..end];
    let mut code_lines = 0;
    let mut previous_code = false;
    for line in body {
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with([' ', '\t']);
        if is_prose(line) && !(indented && previous_code) {
            return None;
        }
        if is_code_line(line) || (indented && previous_code) {
            code_lines += 1;
            previous_code = true;
        } else {
            return None;
        }
    }
    let text = trim_blank_lines(body);
    let strong = body.iter().any(|l| has_strong_signal(l));
    if code_lines == 0 || !(strong && (code_lines >= 2 || text.contains('='))) {
        return None;
    }
    Some(text + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_the_serde_names() {
        for rule in [
            ExtractRule::FencedPython,
            ExtractRule::FencedUntagged,
            ExtractRule::BareCode,
            ExtractRule::None,
        ] {
            assert_eq!(serde_json::to_value(rule).unwrap(), rule.as_str());
        }
        assert_eq!(ExtractRule::FencedUntagged.as_str(), "fenced_untagged");
    }

    fn ex(reply: &str) -> (Option<String>, ExtractRule, usize) {
        let e = extract_code(reply);
        (e.code, e.rule, e.blocks)
    }

    use ExtractRule::{BareCode, FencedPython, FencedUntagged};

    type Case<'a> = (&'a str, &'a str, Option<&'a str>, ExtractRule, usize);

    fn check_rules(cases: &[Case]) {
        for (name, reply, code, rule, blocks) in cases {
            let got = ex(reply);
            assert_eq!(
                got,
                (code.map(str::to_string), *rule, *blocks),
                "case: {name}"
            );
        }
    }

    #[test]
    fn python_fences_are_taken_in_order() {
        check_rules(&[
            (
                "one python block",
                "Here you go:\n```python\nanswer = 1 + 1\n```\nDone.",
                Some("answer = 1 + 1\n"),
                FencedPython,
                1,
            ),
            (
                "py and python3 tags, tilde fence",
                "```py\nx = 2\n```\ntext\n~~~python3\nanswer = x * 3\n~~~\n",
                Some("x = 2\n\nanswer = x * 3\n"),
                FencedPython,
                2,
            ),
            (
                "several blocks, in order",
                "Step 1:\n```python\nimport math\n```\nStep 2:\n```python\n\nr = 2\n\n```\nStep 3:\n```Python\nanswer = math.pi * r ** 2\n```",
                Some("import math\n\nr = 2\n\nanswer = math.pi * r ** 2\n"),
                FencedPython,
                3,
            ),
            (
                "text, output and console blocks are never code",
                "```python\nprint(6 * 7)\n```\nOutput:\n```text\n42\n```\n```output\nanswer = 3\n```\n```console\n$ python x.py\n```",
                Some("print(6 * 7)\n"),
                FencedPython,
                1,
            ),
            (
                "python-tagged example output after an output label is skipped",
                "```python\nprint([1, 2])\n```\nThis prints:\n```python\n[1, 2]\n```",
                Some("print([1, 2])\n"),
                FencedPython,
                1,
            ),
            (
                "a traceback in a python block is not code",
                "```python\nTraceback (most recent call last):\n  File x\n```\n```python\nanswer = 2\n```",
                Some("answer = 2\n"),
                FencedPython,
                1,
            ),
            (
                "tagged wins over untagged",
                "```\nx = 1\n```\n```python\nanswer = 2\n```",
                Some("answer = 2\n"),
                FencedPython,
                1,
            ),
            (
                "truncated reply: unterminated fence runs to the end",
                "Let me compute.\n```python\nimport numpy as np\nanswer = np.sum([1, 2",
                Some("import numpy as np\nanswer = np.sum([1, 2\n"),
                FencedPython,
                1,
            ),
            (
                "indented fence inside a list item",
                "1. Run this:\n   ```python\n   for i in range(2):\n       print(i)\n   ```\n",
                Some("for i in range(2):\n    print(i)\n"),
                FencedPython,
                1,
            ),
            (
                "longer fence holds a shorter one",
                "````python\ns = '''\n```\n'''\nanswer = len(s)\n````",
                Some("s = '''\n```\n'''\nanswer = len(s)\n"),
                FencedPython,
                1,
            ),
            (
                "duplicate block taken once",
                "```python\nanswer = 5\n```\nFinal code:\n```python\nanswer = 5\n```",
                Some("answer = 5\n"),
                FencedPython,
                1,
            ),
            (
                "info string with attributes and a version",
                "``` Python3.11 title=\"x\"\nanswer = 1\n```\n~~~{.python}\nb = 2\n~~~",
                Some("answer = 1\n\nb = 2\n"),
                FencedPython,
                2,
            ),
            (
                "CRLF line endings",
                "```python\r\nanswer = 3\r\n```\r\n",
                Some("answer = 3\n"),
                FencedPython,
                1,
            ),
        ]);
    }

    #[test]
    fn untagged_fences_that_look_like_python() {
        check_rules(&[
            (
                "untagged block with code",
                "Code:\n```\nimport statistics\nanswer = statistics.mean([1, 2, 3])\n```",
                Some("import statistics\nanswer = statistics.mean([1, 2, 3])\n"),
                FencedUntagged,
                1,
            ),
            (
                "untagged block without code signal is skipped",
                "```\n42\n```\n```\nanswer = 42\n```",
                Some("answer = 42\n"),
                FencedUntagged,
                1,
            ),
        ]);
    }

    #[test]
    fn replies_without_code() {
        check_rules(&[
            (
                "untagged block of prose is not code",
                "```\nThe answer is 5 because 2 + 3 = 5.\n```",
                None,
                ExtractRule::None,
                0,
            ),
            ("no code: prose", "The answer is 42 because six times seven is 42.", None, ExtractRule::None, 0),
            (
                "no code: prose mentioning code words",
                "I would import the data and print the answer, then define a function.\nIt is easy.",
                None,
                ExtractRule::None,
                0,
            ),
            ("no code: empty", "", None, ExtractRule::None, 0),
            (
                "no code: only non-python fences",
                "```bash\npip install pandas\n```\n```text\nanswer = 1\n```",
                None,
                ExtractRule::None,
                0,
            ),
            ("no code: empty python block", "```python\n\n```", None, ExtractRule::None, 0),
            (
                "inline triple backticks are not a fence",
                "Use ```x = 1``` and then print it.",
                None,
                ExtractRule::None,
                0,
            ),
        ]);
    }

    #[test]
    fn bare_code_without_fences() {
        check_rules(&[
            (
                "bare code after a prose line",
                "Here is the solution:\nimport math\nanswer = math.factorial(5)\n",
                Some("import math\nanswer = math.factorial(5)\n"),
                BareCode,
                1,
            ),
            (
                "bare code with a block and a trailing sentence",
                "total = 0\nfor i in range(10):\n    total += i\nanswer = total\n\nThis sums the numbers from 0 to 9.",
                Some("total = 0\nfor i in range(10):\n    total += i\nanswer = total\n"),
                BareCode,
                1,
            ),
        ]);
    }

    #[test]
    fn rule_names_serialise_snake_case() {
        for rule in [
            ExtractRule::FencedPython,
            ExtractRule::FencedUntagged,
            ExtractRule::BareCode,
            ExtractRule::None,
        ] {
            assert_eq!(
                serde_json::to_string(&rule).unwrap(),
                format!("\"{}\"", rule.as_str())
            );
        }
    }

    #[test]
    fn output_labels() {
        assert!(is_output_label("Output:"));
        assert!(is_output_label("**Expected output:**"));
        assert!(is_output_label("This prints:"));
        assert!(is_output_label("Result:"));
        assert!(!is_output_label("Here is the code:"));
        assert!(!is_output_label("Compute the results"));
        assert!(!is_output_label("Printout:"));
    }

    #[test]
    fn bare_code_is_conservative() {
        // A single call with no strong signal is not enough.
        assert_eq!(ex("foo(bar)").1, ExtractRule::None);
        // Prose in the middle rejects the whole reply.
        assert_eq!(
            ex("x = 1\nThen we add one to it and print it.\ny = x + 1\nprint(y)").1,
            ExtractRule::None
        );
        assert_eq!(ex("answer = 7").1, ExtractRule::BareCode);
    }
}

#[cfg(test)]
#[path = "extract_props.rs"]
mod props;
