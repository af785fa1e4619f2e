//! A compact view of a live kernel's state after a failure, for
//! `--feedback parsed+state`: names, types and shapes of the variables the
//! failing line uses, a DataFrame's columns behind a `KeyError`, close
//! matches for a misspelt name, attribute or key. Computed in the kernel by
//! retrace's own code (`probe.py`), which reads only exact, known types and
//! never calls code the task defined; bounded in time here and in size there.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What to look at. Build it from the failing line and the exception:
/// `names` from [`names_in_line`], plus the misspelt name (`NameError`),
/// attribute (`AttributeError`) or key (`KeyError`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateQuery {
    /// Variables to describe (at most 20 are looked at).
    pub names: Vec<String>,
    /// The undefined name of a `NameError`: close matches among the
    /// namespace's names and the builtins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_name: Option<String>,
    /// The missing attribute of an `AttributeError`: close matches among the
    /// attributes of `owner` (or of every variable in `names`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_attribute: Option<String>,
    /// The variable the attribute was looked up on, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The missing key of a `KeyError`: close matches among the keys of the
    /// dicts and the columns of the DataFrames in `names`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_key: Option<String>,
    /// How long the kernel may take; then it is interrupted.
    #[serde(skip)]
    pub timeout: Duration,
}

impl Default for StateQuery {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            missing_name: None,
            missing_attribute: None,
            owner: None,
            missing_key: None,
            timeout: Duration::from_secs(3),
        }
    }
}

/// One variable, as retrace saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VariableView {
    pub name: String,
    /// `int`, `list`, `pandas.DataFrame`, `numpy.ndarray`, `__main__.Foo`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// A plain scalar's value (bounded text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    /// Array / DataFrame shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// Array / Series dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// DataFrame columns (first 40) and their dtypes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns_more: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtypes: Option<Vec<Option<String>>>,
    /// Dict keys / Index labels (first 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<String>>,
    /// Series: its name and first index labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Vec<String>>,
    /// Types of a list's first elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_types: Option<Vec<String>>,
    /// A module's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

/// Close matches for one misspelt name, attribute or key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloseMatch {
    /// `name`, `attribute` or `key`.
    pub kind: String,
    /// What was misspelt.
    #[serde(rename = "for")]
    pub wanted: String,
    /// The variable whose attributes / keys were searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub candidates: Vec<String>,
}

/// The compact view of the state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateView {
    pub variables: Vec<VariableView>,
    /// Requested names that are not defined.
    pub missing: Vec<String>,
    pub close_matches: Vec<CloseMatch>,
}

impl StateView {
    /// Plain text for a repair prompt, at most `max_chars` characters
    /// (whole lines are dropped from the end, then marked).
    pub fn render(&self, max_chars: usize) -> String {
        let mut lines = Vec::new();
        for m in &self.close_matches {
            let what = match (&m.kind[..], &m.owner) {
                ("attribute", Some(o)) => format!("attribute `{}` of `{o}`", m.wanted),
                ("key", Some(o)) => format!("key {:?} in `{o}`", m.wanted),
                (kind, _) => format!("{kind} `{}`", m.wanted),
            };
            if m.candidates.is_empty() {
                lines.push(format!("no close match for {what}"));
            } else {
                let c: Vec<String> = m.candidates.iter().map(|c| format!("{c:?}")).collect();
                lines.push(format!("close matches for {what}: {}", c.join(", ")));
            }
        }
        for v in &self.variables {
            lines.push(render_variable(v));
        }
        for name in &self.missing {
            lines.push(format!("{name}: not defined"));
        }
        crate::util::fitted_lines::fitted_lines(&lines, max_chars)
    }
}

fn render_variable(v: &VariableView) -> String {
    let mut s = format!("{}: {}", v.name, v.type_name);
    if let Some(shape) = &v.shape {
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let _ = write!(s, ", shape ({})", dims.join(", "));
    }
    if let Some(len) = v.len {
        let _ = write!(s, ", len {len}");
    }
    if let Some(dtype) = &v.dtype {
        let _ = write!(s, ", dtype {dtype}");
    }
    if let Some(name) = &v.series_name {
        let _ = write!(s, ", name {name:?}");
    }
    if let Some(value) = &v.value {
        let _ = write!(s, " = {value}");
    }
    if let Some(cols) = &v.columns {
        let typed: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                match v
                    .dtypes
                    .as_ref()
                    .and_then(|d| d.get(i))
                    .and_then(|d| d.as_deref())
                {
                    Some(d) => format!("{c:?} ({d})"),
                    None => format!("{c:?}"),
                }
            })
            .collect();
        let _ = write!(s, "; columns: {}", typed.join(", "));
        if let Some(more) = v.columns_more {
            let _ = write!(s, " and {more} more");
        }
    }
    if let Some(keys) = &v.keys {
        let k: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
        let _ = write!(s, "; keys: {}", k.join(", "));
    }
    if let Some(index) = &v.index {
        if !index.is_empty() {
            let _ = write!(s, "; index starts {}", index.join(", "));
        }
    }
    if let Some(types) = &v.item_types {
        if !types.is_empty() {
            let _ = write!(s, "; items: {}", types.join(", "));
        }
    }
    if let Some(m) = &v.module {
        let _ = write!(s, " {m}");
    }
    s
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "match", "case",
];

/// The variable names a line of Python uses, in order of first use:
/// identifiers outside strings and comments that are not keywords and not
/// attributes (`df.col` gives `df`), nor keyword-argument names (`f(x=1)`
/// gives `f`). A heuristic for a single line; good enough to choose what to
/// show.
pub fn names_in_line(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut names: Vec<String> = Vec::new();
    // A set beside the list: a line of many distinct names stays linear.
    let mut seen: HashSet<String> = HashSet::new();
    let mut i = 0;
    let mut prev_sig: Option<char> = None;
    // Open `(` brackets: `name=` is a keyword argument only inside a call.
    let mut parens: Vec<char> = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            break;
        }
        if c == '\'' || c == '"' {
            // Skip a string literal (prefixes were read as identifiers and
            // are dropped below), triple quotes included.
            let triple = i + 2 < chars.len() && chars[i + 1] == c && chars[i + 2] == c;
            let q = if triple { 3 } else { 1 };
            i += q;
            while i < chars.len() {
                if chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                if chars[i] == c
                    && (!triple || (i + 2 < chars.len() && chars[i + 1] == c && chars[i + 2] == c))
                {
                    i += q;
                    break;
                }
                i += 1;
            }
            prev_sig = Some('"');
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
            let is_prefix = matches!(next, Some('\'' | '"'))
                && i < chars.len()
                && matches!(chars[i], '\'' | '"')
                && word.len() <= 2
                && word.chars().all(|c| "rbufRBUF".contains(c));
            let after_dot = prev_sig == Some('.');
            let next2 = chars[i..]
                .iter()
                .filter(|c| !c.is_whitespace())
                .take(2)
                .collect::<String>();
            let kwarg =
                parens.last() == Some(&'(') && next == Some('=') && !next2.starts_with("==");
            if !after_dot
                && !is_prefix
                && !kwarg
                && !KEYWORDS.contains(&word.as_str())
                && seen.insert(word.clone())
            {
                names.push(word);
            }
            prev_sig = Some('a');
            continue;
        }
        if c.is_ascii_digit() {
            // Numbers (1.5, 1e3, 0x1f) are not names.
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            prev_sig = Some('0');
            continue;
        }
        match c {
            '(' | '[' | '{' => parens.push(c),
            ')' | ']' | '}' => {
                parens.pop();
            }
            _ => {}
        }
        if !c.is_whitespace() {
            prev_sig = Some(c);
        }
        i += 1;
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_a_failing_line() {
        assert_eq!(
            names_in_line("    total = df['GDP per capita'].sum() / len(rows)  # x.y"),
            ["total", "df", "len", "rows"]
        );
        assert_eq!(names_in_line("print(totl)"), ["print", "totl"]);
        assert_eq!(names_in_line("df.colum.mean()"), ["df"]);
        assert_eq!(
            names_in_line("f(x=1, y == z, s=f'{a}', n=1.5e3)"),
            ["f", "y", "z"]
        );
        assert_eq!(names_in_line("if a is not None and b: pass"), ["a", "b"]);
    }

    #[test]
    fn render_stays_within_budget() {
        let view = StateView {
            variables: vec![VariableView {
                name: "df".into(),
                type_name: "pandas.DataFrame".into(),
                shape: Some(vec![3, 2]),
                columns: Some(vec!["GDP per capita (USD)".into(), "country".into()]),
                dtypes: Some(vec![Some("float64".into()), Some("str".into())]),
                ..Default::default()
            }],
            missing: vec!["totl".into()],
            close_matches: vec![CloseMatch {
                kind: "name".into(),
                wanted: "totl".into(),
                owner: None,
                candidates: vec!["total".into()],
            }],
        };
        let full = view.render(10_000);
        assert_eq!(
            full,
            "close matches for name `totl`: \"total\"\n\
             df: pandas.DataFrame, shape (3, 2); columns: \"GDP per capita (USD)\" (float64), \"country\" (str)\n\
             totl: not defined\n"
        );
        let short = view.render(70);
        assert!(short.len() <= 70, "{short}");
        assert!(
            short.starts_with("close matches for name `totl`"),
            "{short}"
        );
        assert!(short.ends_with("more lines)"), "{short}");
        assert_eq!(view.render(0), "");
    }
}
