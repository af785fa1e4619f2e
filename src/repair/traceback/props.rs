//! Properties of traceback parsing, rendering and the budget helpers over
//! generated tracebacks.

use proptest::prelude::*;

use super::*;
use crate::kernel::ErrorInfo;
use crate::util::props::{hostile_lines, hostile_text, megabyte_of, within_bound};

/// Lines of the shapes IPython writes, mixed with hostile text, so the
/// generated entries reach the parser's branches rather than fall through.
fn traceback_line() -> impl Strategy<Value = String> {
    let n = 0usize..40;
    prop_oneof![
        (n.clone(), n.clone(), hostile_text(4))
            .prop_map(|(c, l, f)| format!("Cell In[{c}], line {l}, in {f}")),
        (hostile_text(4), n.clone(), hostile_text(4))
            .prop_map(|(p, l, f)| format!("File {p}:{l}, in {f}(x)")),
        (hostile_text(4), n.clone()).prop_map(|(p, l)| format!("File \"{p}\", line {l}, in f")),
        (n.clone(), hostile_text(6)).prop_map(|(l, s)| format!("----> {l} {s}")),
        (n, hostile_text(6)).prop_map(|(l, s)| format!("      {l} {s}")),
        (INDENT, "[\\^~]{1,6}").prop_map(|(w, c)| format!("{w}{c}")),
        (INDENT, hostile_text(5)).prop_map(|(w, t)| format!("{w}{t}")),
        hostile_text(5).prop_map(|m| format!("ValueError: {m}")),
        Just("SyntaxError: invalid syntax".to_string()),
        Just("The above exception was the direct cause of the following exception:".into()),
        Just("During handling of the above exception, another exception occurred:".into()),
        Just("KeyError                      Traceback (most recent call last)".into()),
        hostile_text(8),
    ]
}

/// Any whitespace, ASCII or not, as indentation.
const INDENT: &str = "[ \t\u{3000}\u{a0}\u{2003}]{0,6}";

/// A SyntaxError block: header, the offending line, its caret, the
/// exception; each indented by generated whitespace.
fn syntax_entry() -> impl Strategy<Value = String> {
    (0usize..9, INDENT, hostile_text(5), INDENT, "[\\^~]{1,4}").prop_map(
        |(line, text_indent, text, caret_indent, caret)| {
            format!(
                "Cell In[1], line {line}\n{text_indent}{text}\n{caret_indent}{caret}\n\
                 SyntaxError: invalid syntax"
            )
        },
    )
}

fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::collection::vec(traceback_line(), 1..8).prop_map(|l| l.join("\n")),
        1 => syntax_entry(),
    ]
}

fn error_info() -> impl Strategy<Value = ErrorInfo> {
    (
        hostile_text(4),
        hostile_text(10),
        proptest::collection::vec(entry(), 0..8),
    )
        .prop_map(|(ename, evalue, traceback)| ErrorInfo {
            ename,
            evalue,
            traceback,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_traceback_parses_and_renders_within_its_budget(
        error in error_info(),
        code in hostile_lines(12),
        budget in 0usize..2000,
    ) {
        let tb = parse(&error, &code);
        let text = render(&tb, &code, budget);
        prop_assert!(text.chars().count() <= budget, "{} > {budget}", text.chars().count());
    }

    #[test]
    fn the_budget_helpers_keep_to_their_budget(text in hostile_lines(30), budget in 0usize..600) {
        for (name, out) in [
            ("cut_middle", cut_middle(&text, budget)),
            ("keep_tail", keep_tail(&text, budget)),
            ("head_tail", head_tail(&text, budget)),
            ("fit_keep_tail", fit_keep_tail(&text, budget)),
        ] {
            let n = out.chars().count();
            prop_assert!(n <= budget, "{name}: {n} > {budget}");
            if text.chars().count() <= budget {
                prop_assert_eq!(&out, &text, "{} changed text within its budget", name);
            }
        }
    }

    #[test]
    fn scrubbing_is_idempotent(text in hostile_lines(10)) {
        let once = scrub_paths(&text);
        prop_assert_eq!(scrub_paths(&once), once.clone());
    }
}

#[test]
fn a_megabyte_traceback_is_parsed_and_rendered_in_linear_time() {
    let frame = "File /usr/lib/python3.11/site-packages/x/y.py:12, in f(a)\n----> 12 g(a)\n";
    let cases = [
        vec![megabyte_of(frame)],
        vec!["Cell In[1], line 1\n".to_string() + &megabyte_of("  ^^^^\n")],
        megabyte_of("Cell In[3], line 2\n----> 2 x\n|")
            .split('|')
            .map(str::to_string)
            .collect(),
        vec![megabyte_of("\u{1b}[0;31m/home/u/a/b/c/")],
        vec![format!(
            "ValueError: {}",
            megabyte_of("/root/x (y.py, line 3)")
        )],
    ];
    for traceback in cases {
        let error = ErrorInfo {
            ename: "ValueError".into(),
            evalue: traceback[0].clone(),
            traceback,
        };
        let code = megabyte_of("x = 1\n");
        within_bound("parse and render", &code, |code| {
            render(&parse(&error, code), code, 4000)
        });
    }
}

#[test]
fn a_caret_indented_by_a_wide_space_is_kept_whole() {
    // Found by the property: the caret line's indentation was cut by the
    // byte length of the text line's, inside U+3000 (a panic).
    let error = ErrorInfo {
        ename: "SyntaxError".into(),
        evalue: "invalid syntax (1.py, line 1)".into(),
        traceback: vec![
            "Cell In[1], line 1\n  x = (\n\u{3000}^\nSyntaxError: invalid syntax".into(),
        ],
    };
    let tb = parse(&error, "x = (\n");
    let syntax = tb.syntax.expect("a syntax error");
    assert_eq!(syntax.text, "x = (");
    assert_eq!(syntax.caret.as_deref(), Some("\u{3000}^"));
}
