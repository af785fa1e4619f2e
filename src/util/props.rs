//! What the property tests of the parsers of untrusted text share: the
//! text they generate and the bound on their time.

use std::time::{Duration, Instant};

use proptest::prelude::*;

/// How long one parse of a megabyte of input may take. Linear work on a
/// megabyte takes milliseconds, even in a debug build on a loaded machine;
/// quadratic work takes minutes. The bound sits far above the first and far
/// below the second: it catches a blowup, it measures no speed.
pub(crate) const LINEAR_BOUND: Duration = Duration::from_secs(10);

/// The size of the large generated inputs.
pub(crate) const MEGABYTE: usize = 1 << 20;

/// Runs `f` on `input` and fails when it took longer than [`LINEAR_BOUND`].
pub(crate) fn within_bound<T>(what: &str, input: &str, f: impl FnOnce(&str) -> T) -> T {
    let start = Instant::now();
    let out = f(input);
    let took = start.elapsed();
    assert!(
        took < LINEAR_BOUND,
        "{what} took {took:?} on {} bytes (bound {LINEAR_BOUND:?}): not linear",
        input.len()
    );
    out
}

/// `unit` repeated until the text is about a megabyte.
pub(crate) fn megabyte_of(unit: &str) -> String {
    unit.repeat(MEGABYTE / unit.len().max(1) + 1)
}

/// Characters that break parsers and documents: markup, table and code
/// delimiters, quotes, brackets, escapes, line ends, controls, multi-byte
/// and Unicode whitespace, a BOM.
const NASTY: &[&str] = &[
    "<",
    ">",
    "&",
    "\"",
    "'",
    "`",
    "```",
    "~~~",
    "|",
    "]]>",
    "<!--",
    "</script>",
    "\n",
    "\r\n",
    "\r",
    "\t",
    "\0",
    "\u{7}",
    "\u{1b}[31m",
    "\\",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "@",
    "#",
    "$",
    "%",
    ",",
    ":",
    "=",
    "^",
    "-",
    "*",
    "_",
    ".",
    "é",
    "✓",
    "😀",
    "\u{3000}",
    "\u{a0}",
    "\u{2028}",
    "\u{feff}",
    "\u{fffe}",
    " ",
];

/// Text made of hostile pieces, words and numbers, up to `max` pieces.
pub(crate) fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => proptest::sample::select(NASTY).prop_map(str::to_string),
        2 => "[a-zA-Z_]{1,8}",
        1 => "-?[0-9]{1,6}(\\.[0-9]{1,4})?",
        1 => any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(piece, 0..max).prop_map(|p| p.concat())
}

/// Lines of hostile text joined by newlines.
pub(crate) fn hostile_lines(lines: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(hostile_text(12), 0..lines).prop_map(|l| l.join("\n"))
}
