//! Properties of code extraction over generated replies.

use proptest::prelude::*;

use super::*;
use crate::util::props::{hostile_lines, megabyte_of, within_bound};

/// A line of code that holds no fence and has no trailing blanks.
fn code_line() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,6} = [0-9a-z_ +*()\\[\\]'\"<>&|]{0,20}"
        .prop_map(|l| l.trim_end().to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_reply_gives_a_consistent_extraction(reply in hostile_lines(40)) {
        let e = extract_code(&reply);
        prop_assert_eq!(e.code.is_some(), e.rule != ExtractRule::None);
        prop_assert_eq!(e.code.is_some(), e.blocks > 0);
        if let Some(code) = &e.code {
            prop_assert!(code.ends_with('\n'));
        }
    }

    #[test]
    fn one_python_block_comes_back_exactly(
        before in hostile_lines(4),
        code in proptest::collection::vec(code_line(), 1..12),
        after in hostile_lines(4),
    ) {
        // Prose without fences around one tagged block: the block is the code.
        let strip = |t: String| t.replace(['`', '~'], "'");
        let body = code.join("\n");
        let reply = format!("{}\n```python\n{body}\n```\n{}", strip(before), strip(after));
        let e = extract_code(&reply);
        prop_assert_eq!(e.rule, ExtractRule::FencedPython);
        prop_assert_eq!(e.code, Some(format!("{}\n", body.trim_matches('\n'))));
    }
}

/// A reply of `n` distinct blocks and a repeat of each.
fn distinct_blocks(n: usize) -> String {
    (0..n)
        .chain(0..n)
        .map(|i| format!("```python\nx{i} = {i}\n```\n"))
        .collect()
}

#[test]
fn many_distinct_blocks_are_joined_once_each_in_linear_time() {
    // Found by the megabyte property: the repeats check compared each block
    // with every block taken before it (minutes on a megabyte reply).
    let reply = distinct_blocks(40_000);
    let e = within_bound("extract_code", &reply, extract_code);
    assert_eq!(e.blocks, 40_000);
    let code = e.code.unwrap();
    assert!(code.starts_with("x0 = 0\n\nx1 = 1\n\n"));
    assert!(code.ends_with("\n\nx39999 = 39999\n"));
}

#[test]
fn a_megabyte_reply_is_read_in_linear_time() {
    for reply in [
        distinct_blocks(30_000),
        format!("```python\n{}", megabyte_of("x = 1\n")),
        megabyte_of("```\n"),
        megabyte_of("Here is a sentence about the code.\n"),
        megabyte_of("answer = compute(1, 2)\n"),
        megabyte_of("`"),
        megabyte_of(" \u{3000}é"),
    ] {
        within_bound("extract_code", &reply, extract_code);
    }
}
