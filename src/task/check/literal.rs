//! Python literal text as a kernel prints it: quoted strings, calls such as
//! `array([...])`, splitting at top level, and the parsed [`Lit`] value.

use super::numeral::{parse_number_literal, Num};

/// A parsed Python/JSON literal.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lit {
    /// The number and its source text.
    Num(String, Num),
    Str(String),
    Bool(bool),
    None,
    List(Vec<Lit>),
}

impl Lit {
    pub(super) fn render(&self) -> String {
        match self {
            Lit::Num(_, n) => n.normalized(),
            Lit::Str(s) => serde_json::to_string(s).unwrap_or_default(),
            Lit::Bool(b) => b.to_string(),
            Lit::None => "null".into(),
            Lit::List(items) => {
                let mut out = String::from("[");
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&it.render());
                }
                out.push(']');
                out
            }
        }
    }
}

/// Parses a literal: lists, tuples, sets, `array([...], dtype=...)`,
/// `np.array`, `set()`, `frozenset({...})`, `dict_keys([...])`, pandas
/// `Index([...])`, numpy's printed form `[1 2 3]`, strings, numbers (with
/// scalar wrappers), `True`/`False`/`None`. Dicts and truncated (`...`)
/// output do not parse.
pub(super) fn parse_literal(s: &str) -> Option<Lit> {
    // One pass refuses deep text before each level re-reads the rest of it.
    let mut nesting = Nesting::new();
    let too_deep = s.chars().any(|c| {
        nesting.top_level(c);
        nesting.depth > MAX_NESTING as i32
    });
    if too_deep {
        return None;
    }
    parse_nested(s, MAX_NESTING)
}

/// Brackets and calls nested deeper than this do not parse: the kernel
/// writes values at most 16 levels deep (`MAX_DEPTH` in `probe.py`), a
/// wrapper such as `array(…)` adds one, and without a bound a printed
/// megabyte of `[[[…` took quadratic time and overflowed the stack. The
/// depth passed down also bounds strings that hold literals (`Decimal('…')`).
const MAX_NESTING: usize = 64;

fn parse_nested(s: &str, depth: usize) -> Option<Lit> {
    let depth = depth.checked_sub(1)?;
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let prefixed = s.starts_with(['b', 'u', 'r', 'B', 'U', 'R']) && s[1..].starts_with(['\'', '"']);
    if s.starts_with(['\'', '"']) || prefixed {
        if let Some(v) = strip_quotes(s) {
            return Some(Lit::Str(v));
        }
    }
    if let Some(first) = s.chars().next().filter(|c| matches!(c, '[' | '(' | '{')) {
        if matching_close(s, 0) != Some(s.len() - 1) {
            return None;
        }
        let inner = &s[1..s.len() - 1];
        let items = split_top_level(inner, ',');
        if first == '{' && items.iter().any(|i| top_level_colon(i)) {
            return None; // a dict
        }
        let items = if items.len() == 1 && !inner.contains(',') && first == '[' {
            // numpy's str form: `[1 2 3]` or `['a' 'b']`.
            split_whitespace_top_level(inner)
        } else {
            items
        };
        return items
            .iter()
            .map(|i| parse_nested(i, depth))
            .collect::<Option<Vec<_>>>()
            .map(Lit::List);
    }
    if let Some((name, args)) = split_call(s) {
        let base = name.rsplit('.').next().unwrap_or(name);
        let positional: Vec<&String> = args.iter().filter(|a| !is_kwarg(a)).collect();
        if matches!(
            base,
            "array"
                | "asarray"
                | "set"
                | "frozenset"
                | "tuple"
                | "list"
                | "dict_keys"
                | "dict_values"
                | "Index"
                | "Series"
                | "deque"
                | "matrix"
        ) {
            return match positional.as_slice() {
                [] => Some(Lit::List(Vec::new())),
                [one] => match parse_nested(one, depth)? {
                    l @ Lit::List(_) => Some(l),
                    scalar => Some(scalar), // array(5) is a 0-d array
                },
                _ => None,
            };
        }
        let inner = scalar_wrapper(name, &args)?;
        if base.starts_with("str") {
            return strip_quotes(&inner).map(Lit::Str);
        }
        // `Decimal('1.5')`, `mpf('2')`: the quoted text is the number.
        let inner = strip_quotes(&inner).unwrap_or(inner);
        return parse_nested(&inner, depth);
    }
    match s {
        "True" | "true" => return Some(Lit::Bool(true)),
        "False" | "false" => return Some(Lit::Bool(false)),
        "None" | "null" => return Some(Lit::None),
        "..." | "…" => return None,
        _ => {}
    }
    if let Some(n) = parse_number_literal(s) {
        return Some(Lit::Num(s.to_string(), n));
    }
    // A bare word (numpy prints string arrays without quotes in some forms).
    let word_ok = !s.contains(['(', ')', '[', ']', '{', '}', ',', '\'', '"']);
    word_ok.then(|| Lit::Str(s.to_string()))
}

/// `'abc'`, `"abc"`, `b'abc'`, `u'abc'` → `abc` with escapes resolved.
pub(super) fn strip_quotes(s: &str) -> Option<String> {
    let body = s
        .strip_prefix(['b', 'u', 'r', 'B', 'U', 'R'])
        .filter(|r| r.starts_with(['\'', '"']))
        .unwrap_or(s);
    let q = body.chars().next()?;
    if !(q == '\'' || q == '"') || body.len() < 2 || !body.ends_with(q) {
        return None;
    }
    let (lit, rest) = read_string(body)?;
    rest.trim().is_empty().then_some(lit)
}

/// Reads a quoted string at the start of `s`; returns it and the rest.
pub(super) fn read_string(s: &str) -> Option<(String, &str)> {
    let mut chars = s.char_indices();
    let (_, q) = chars.next()?;
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '\\' | '\'' | '"' => out.push(e),
                    'x' | 'u' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String =
                            (0..len).filter_map(|_| chars.next().map(|c| c.1)).collect();
                        out.push(
                            u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .unwrap_or('\u{fffd}'),
                        );
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            c if c == q => return Some((out, &s[i + c.len_utf8()..])),
            c => out.push(c),
        }
    }
    None
}

/// `name(args)` spanning the whole text → (name, top-level args).
pub(super) fn split_call(s: &str) -> Option<(&str, Vec<String>)> {
    let open = s.find('(')?;
    let name = &s[..open];
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !name.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    if !valid || !s.ends_with(')') {
        return None;
    }
    let inner = &s[open + 1..s.len() - 1];
    // The closing paren must match the opening one.
    if matching_close(s, open) != Some(s.len() - 1) {
        return None;
    }
    Some((name, split_top_level(inner, ',')))
}

/// Index of the bracket closing the one at `open` (quotes respected).
fn matching_close(s: &str, open: usize) -> Option<usize> {
    let mut nesting = Nesting::new();
    for (i, c) in s[open..].char_indices() {
        let top = nesting.top_level(c);
        if nesting.depth < 0 {
            return None;
        }
        if top && matches!(c, ')' | ']' | '}') {
            return Some(open + i);
        }
    }
    None
}

/// Quotes and bracket depth while reading literal text left to right.
/// A backslash inside quotes escapes the next character.
struct Nesting {
    depth: i32,
    quote: Option<char>,
    escaped: bool,
}

impl Nesting {
    fn new() -> Self {
        Nesting {
            depth: 0,
            quote: None,
            escaped: false,
        }
    }

    /// Reads `c`; true when, once it is read, no quote or bracket is open.
    fn top_level(&mut self, c: char) -> bool {
        if let Some(q) = self.quote {
            if self.escaped {
                self.escaped = false;
            } else if c == '\\' {
                self.escaped = true;
            } else if c == q {
                self.quote = None;
            }
            return false;
        }
        match c {
            '\'' | '"' => self.quote = Some(c),
            '(' | '[' | '{' => self.depth += 1,
            ')' | ']' | '}' => self.depth -= 1,
            _ => {}
        }
        self.quote.is_none() && self.depth == 0
    }
}

/// Splits on `sep` outside brackets and quotes; trims the pieces and drops
/// a trailing empty piece (`(1,)`).
pub(super) fn split_top_level(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut nesting = Nesting::new();
    let mut cur = String::new();
    for c in s.chars() {
        if nesting.top_level(c) && c == sep {
            parts.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    let last = cur.trim().to_string();
    if !last.is_empty() || !parts.is_empty() {
        parts.push(last);
    }
    if parts.last().is_some_and(String::is_empty) {
        parts.pop();
    }
    parts
}

/// Known wrappers of a single scalar: numpy scalar types, `Decimal`,
/// `Fraction`, mpmath, gmpy2, sympy's `Integer`/`Float`/`Rational`,
/// `np.str_`.
pub(super) fn scalar_wrapper(name: &str, args: &[String]) -> Option<String> {
    let base = name.rsplit('.').next().unwrap_or(name);
    let positional: Vec<&String> = args.iter().filter(|a| !is_kwarg(a)).collect();
    let numeric_type = |b: &str| {
        let stem = b.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
        matches!(
            stem,
            "float"
                | "int"
                | "uint"
                | "complex"
                | "longdouble"
                | "double"
                | "single"
                | "half"
                | "intc"
                | "longlong"
                | "ulonglong"
                | "short"
                | "ushort"
                | "byte"
                | "ubyte"
                | "str"
                | "bool"
                | "intp"
                | "uintp"
        )
    };
    match base {
        "Fraction" | "Rational" | "mpq" if positional.len() == 2 => {
            Some(format!("{}/{}", positional[0], positional[1]))
        }
        "Decimal" | "mpf" | "mpz" | "Integer" | "Float" | "Fraction" | "Rational" | "mpq"
        | "tensor"
            if positional.len() == 1 =>
        {
            Some(positional[0].clone())
        }
        b if numeric_type(b) && positional.len() == 1 => Some(positional[0].clone()),
        _ => None,
    }
}

fn is_kwarg(arg: &str) -> bool {
    match arg.find('=') {
        Some(i) => {
            let key = &arg[..i];
            !key.is_empty()
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !arg[i + 1..].starts_with('=')
        }
        None => false,
    }
}

fn top_level_colon(item: &str) -> bool {
    split_top_level(item, ':').len() > 1
}

/// Splits on whitespace outside brackets and quotes.
fn split_whitespace_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut nesting = Nesting::new();
    let mut cur = String::new();
    for c in s.chars() {
        if nesting.top_level(c) && c.is_whitespace() {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitting_respects_brackets_quotes_and_escapes() {
        assert_eq!(
            split_top_level("1, (2, 3), 'a,b', 'it\\'s, x',", ','),
            vec!["1", "(2, 3)", "'a,b'", "'it\\'s, x'"]
        );
        assert_eq!(
            split_whitespace_top_level("1  [2 3] 'a b'"),
            vec!["1", "[2 3]", "'a b'"]
        );
        assert_eq!(matching_close("f(a, (b), ')')", 1), Some(13));
        assert_eq!(matching_close("[1, 2", 0), None);
        assert_eq!(matching_close(")(", 0), None);
    }
}
