//! Traceback parsing and rendering over real kernel output.
//!
//! Every `tests/fixtures/tracebacks/<name>.json` is the `error` object of an
//! outcome printed by `retrace exec --json <name>.py` (fat image, confined,
//! IPython 9 on Python 3.11); `<name>.py` is the program. Files with `# %%`
//! ran as several cells; the error belongs to the last one.
//! `outcomes/<name>.json` are whole outcomes of executions ended by a limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use retrace::kernel::{ErrorInfo, Outcome};
use retrace::repair::prompt::{feedback, feedback_parts};
use retrace::repair::traceback::{kill_message, parse, render, Relation, Traceback};
use retrace::sandbox::{SandboxLimits, Verdict};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracebacks")
}

/// The code of the cell that failed: the last `# %%` cell of the file.
fn last_cell(source: &str) -> String {
    let mut cells = vec![String::new()];
    for line in source.split_inclusive('\n') {
        if line.starts_with("# %%") {
            cells.push(String::new());
        } else {
            cells.last_mut().unwrap().push_str(line);
        }
    }
    cells.retain(|c| !c.trim().is_empty());
    cells.pop().unwrap_or_default()
}

fn load(name: &str) -> (ErrorInfo, String) {
    let dir = fixture_dir();
    let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    let error: ErrorInfo = serde_json::from_str(&json).unwrap();
    let source = std::fs::read_to_string(dir.join(format!("{name}.py"))).unwrap();
    (error, last_cell(&source))
}

/// (fixture, exception type, line of the submitted code it failed at)
const EXPECTED: &[(&str, &str, Option<usize>)] = &[
    ("assertion_error", "AssertionError", Some(3)),
    ("attribute_error", "AttributeError", Some(2)),
    ("bare_raise", "EmptyInput", Some(7)),
    ("chained_explicit", "RuntimeError", Some(5)),
    ("chained_implicit", "ZeroDivisionError", Some(5)),
    ("earlier_cell", "ZeroDivisionError", Some(2)),
    ("eval_syntax", "SyntaxError", Some(2)),
    ("exception_group", "ExceptionGroup", None),
    ("file_not_found", "FileNotFoundError", Some(3)),
    ("import_error", "ModuleNotFoundError", Some(2)),
    ("indentation_expected_block", "IndentationError", Some(2)),
    ("indentation_unindent", "IndentationError", Some(5)),
    ("index_error", "IndexError", Some(4)),
    ("key_error_pandas", "KeyError", Some(5)),
    ("leading_blank_lines", "ZeroDivisionError", Some(7)),
    ("leading_blank_syntax", "SyntaxError", Some(4)),
    ("leading_indent", "ZeroDivisionError", Some(2)),
    ("long_cell", "ZeroDivisionError", Some(18)),
    ("method_type_error", "TypeError", Some(11)),
    ("multiline_message", "ValueError", Some(3)),
    ("name_error", "NameError", Some(3)),
    ("numpy_deep", "ValueError", Some(5)),
    ("pandas_astype_deep", "ValueError", Some(4)),
    ("pandas_merge_deep", "KeyError", Some(5)),
    ("recursion_error", "RecursionError", Some(2)),
    ("scipy_callback", "NameError", Some(7)),
    ("stdlib_json", "JSONDecodeError", Some(4)),
    ("sympy_error", "TypeError", Some(5)),
    ("syntax_expected_colon", "SyntaxError", Some(2)),
    ("syntax_forgot_comma", "SyntaxError", Some(2)),
    ("syntax_unclosed", "SyntaxError", Some(2)),
    ("syntax_unterminated_string", "SyntaxError", Some(1)),
    ("tab_error", "TabError", Some(3)),
    ("type_error", "TypeError", Some(2)),
    ("value_error_unpack", "ValueError", Some(2)),
    ("zero_division_nested", "ZeroDivisionError", Some(2)),
];

const BUDGETS: [usize; 6] = [120, 300, 600, 1000, 2000, 6000];

fn assert_clean(name: &str, text: &str) {
    assert!(!text.contains("/root/"), "{name}: /root/ in\n{text}");
    assert!(!text.contains("/home/"), "{name}: /home/ in\n{text}");
    assert!(
        !text.contains("/tmp/retrace"),
        "{name}: /tmp/retrace in\n{text}"
    );
    assert!(
        !text.contains("/tmp/ipykernel"),
        "{name}: ipykernel path in\n{text}"
    );
    assert!(
        !text.contains("site-packages/"),
        "{name}: raw site-packages in\n{text}"
    );
    assert!(!text.contains('\u{1b}'), "{name}: ANSI escape in\n{text}");
}

#[test]
fn every_fixture_is_expected() {
    let mut on_disk: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "json").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    on_disk.sort();
    let mut expected: Vec<String> = EXPECTED.iter().map(|e| e.0.to_string()).collect();
    expected.sort();
    assert_eq!(on_disk, expected);
}

#[test]
fn parse_and_render_every_fixture() {
    for &(name, exc_type, line) in EXPECTED {
        let (error, code) = load(name);
        let tb = parse(&error, &code);
        assert_eq!(tb.exc_type, exc_type, "{name}: {tb:#?}");
        assert_eq!(tb.cell_line(), line, "{name}: {tb:#?}");
        assert!(
            !tb.message.contains(".py, line"),
            "{name}: IPython's file suffix left in {:?}",
            tb.message
        );
        for f in &tb.frames {
            assert!(
                f.in_cell == (f.location == "cell"),
                "{name}: inconsistent frame {f:?}"
            );
            assert_clean(name, &f.location);
        }

        let failing = line.map(|l| code.lines().nth(l - 1).unwrap().trim().to_string());
        for budget in BUDGETS {
            let text = render(&tb, &code, budget);
            assert!(
                text.chars().count() <= budget,
                "{name}: {} > {budget} chars:\n{text}",
                text.chars().count()
            );
            assert_clean(name, &text);
            if budget >= 120 {
                assert!(
                    text.starts_with(exc_type),
                    "{name} @ {budget}: does not start with the exception:\n{text}"
                );
            }
            if budget >= 600 {
                if let Some(src) = &failing {
                    assert!(
                        text.contains(src.as_str()),
                        "{name} @ {budget}: failing line {src:?} missing:\n{text}"
                    );
                    assert!(text.contains("-->"), "{name}: no marker:\n{text}");
                }
            }
        }
        // The JSON form of a parsed traceback (journaled) round-trips.
        let json = serde_json::to_string(&tb).unwrap();
        let back: Traceback = serde_json::from_str(&json).unwrap();
        assert_eq!(back, tb);
    }
}

#[test]
fn syntax_positions() {
    // (fixture, line, caret column in text, text)
    let cases = [
        ("syntax_expected_colon", 2, 16, "for v in values"),
        ("syntax_unclosed", 2, 7, "print("),
        ("syntax_unterminated_string", 1, 8, "name = \"world"),
        ("syntax_forgot_comma", 2, 12, "weights = [1 2 3]"),
        ("indentation_unindent", 5, 1, "return s"),
        ("leading_blank_syntax", 4, 8, "x = (1,"),
    ];
    for (name, line, offset, text) in cases {
        let (error, code) = load(name);
        let tb = parse(&error, &code);
        let s = tb
            .syntax
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no syntax"));
        assert_eq!(
            (s.location.as_str(), s.line, s.offset, s.text.as_str()),
            ("cell", line, Some(offset), text),
            "{name}"
        );
        assert!(tb.frames.is_empty(), "{name}");
    }
    let (error, code) = load("syntax_expected_colon");
    let tb = parse(&error, &code);
    assert_eq!(tb.message, "expected ':'");
    let text = render(&tb, &code, 1000);
    assert!(
        text.contains("--> 2 | for v in values\n      |                ^"),
        "{text}"
    );

    // A syntax error inside eval(): the position is in "<string>", the cell
    // frame is the eval call.
    let (error, code) = load("eval_syntax");
    let tb = parse(&error, &code);
    let s = tb.syntax.as_ref().unwrap();
    assert_eq!(
        (s.location.as_str(), s.line, s.text.as_str()),
        ("<string>", 1, "2 +")
    );
    assert_eq!(tb.message, "invalid syntax");
    let text = render(&tb, &code, 1000);
    assert!(text.contains("--> 2 | value = eval(expr)"), "{text}");
    assert!(
        text.contains("in <string>, line 1:\n    2 +\n      ^"),
        "{text}"
    );
}

#[test]
fn frames_chains_and_locations() {
    let (error, code) = load("key_error_pandas");
    let tb = parse(&error, &code);
    assert_eq!(tb.message, "'missing'");
    assert_eq!(tb.chain.len(), 1);
    assert_eq!(
        (tb.chain[0].exc_type.as_str(), tb.chain[0].relation),
        ("KeyError", Relation::Cause)
    );
    let locations: Vec<&str> = tb.frames.iter().map(|f| f.location.as_str()).collect();
    assert_eq!(
        locations,
        [
            "cell",
            "<site-packages>/pandas/core/frame.py",
            "<site-packages>/pandas/core/indexes/base.py"
        ]
    );
    assert_eq!(
        tb.frames[1].function.as_deref(),
        Some("DataFrame.__getitem__")
    );
    let text = render(&tb, &code, 2000);
    assert!(
        text.contains("<site-packages>/pandas/core/frame.py:"),
        "{text}"
    );
    assert!(
        text.contains("The direct cause was an earlier exception: KeyError"),
        "{text}"
    );

    let (error, code) = load("chained_implicit");
    let tb = parse(&error, &code);
    assert_eq!(tb.chain[0].exc_type, "KeyError");
    assert_eq!(tb.chain[0].relation, Relation::Context);
    assert!(render(&tb, &code, 2000).contains("It was raised while handling: KeyError: 'b'"));

    let (error, code) = load("stdlib_json");
    let tb = parse(&error, &code);
    assert_eq!(
        tb.frames.last().unwrap().location,
        "<stdlib>/json/decoder.py"
    );

    // The user's function called back from deep inside scipy.
    let (error, code) = load("scipy_callback");
    let tb = parse(&error, &code);
    let last = tb.last_cell_frame().unwrap();
    assert_eq!(
        (last.line, last.function.as_deref()),
        (Some(7), Some("loss"))
    );
    assert!(tb
        .frames
        .iter()
        .any(|f| f.location.starts_with("<site-packages>/scipy/")));
    let text = render(&tb, &code, 3000);
    assert!(text.contains("line 7 of your code (in loss):"), "{text}");

    // A function defined in an earlier cell of the same kernel.
    let (error, code) = load("earlier_cell");
    let tb = parse(&error, &code);
    let f = tb.frames.last().unwrap();
    assert_eq!(
        (f.location.as_str(), f.in_cell, f.line, f.source.as_deref()),
        ("In[1]", false, Some(2), Some("return a / b"))
    );
    assert!(render(&tb, &code, 2000).contains("code run earlier (In[1]), line 2, in ratio"));

    // 900+ identical frames fold into one row.
    let (error, code) = load("recursion_error");
    let tb = parse(&error, &code);
    assert!(tb.frames.len() > 900);
    let text = render(&tb, &code, 2000);
    assert!(text.contains("[repeated "), "{text}");
    assert!(text.chars().count() < 1000, "{text}");

    // Long library runs are summarised.
    let (error, code) = load("pandas_astype_deep");
    let text = render(&parse(&error, &code), &code, 4000);
    assert!(text.contains("more library frames"), "{text}");

    let (error, code) = load("multiline_message");
    let tb = parse(&error, &code);
    assert_eq!(tb.message, "need at least 3 rows\ngot 2: [1, 2]");

    let (error, code) = load("bare_raise");
    assert_eq!(parse(&error, &code).message, "");
}

fn load_outcome(name: &str) -> (Outcome, String) {
    let dir = fixture_dir().join("outcomes");
    let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    let outcome: Outcome = serde_json::from_str(&json).unwrap();
    let code = std::fs::read_to_string(dir.join(format!("{name}.py"))).unwrap();
    (outcome, code)
}

#[test]
fn feedback_for_real_outcomes() {
    // The limits each outcome ran with (`retrace exec` flags).
    let base = SandboxLimits {
        timeout: Duration::from_secs(3),
        cpu_time: Duration::from_secs(3),
        ..SandboxLimits::default()
    };
    let cases: &[(&str, Verdict, SandboxLimits, &[&str])] = &[
        (
            "timeout_sleep",
            Verdict::TimeoutWall,
            base,
            &[
                "did not finish within 3s of wall time",
                "--> 3 | time.sleep(100)",
                "waiting",
            ],
        ),
        (
            "timeout_cpu",
            Verdict::TimeoutCpu,
            SandboxLimits {
                timeout: Duration::from_secs(10),
                cpu_time: Duration::from_secs(1),
                ..base
            },
            &["more than 1s of CPU time", "--> 2 | while True:"],
        ),
        (
            "oom",
            Verdict::OomKilled,
            base,
            &[
                "exceeded the memory limit of 512M",
                "The kernel was restarted",
            ],
        ),
        (
            "memory_error",
            Verdict::MemoryError,
            base,
            &["MemoryError", "512M"],
        ),
        (
            "output_limit",
            Verdict::OutputLimit,
            SandboxLimits {
                output_cap_bytes: 64 << 10,
                ..base
            },
            &[
                "printed more than 64K of output (",
                "); it was cut",
                "--> 2 |     print(\"line\", i)",
            ],
        ),
        (
            "kernel_exit",
            Verdict::KernelExit,
            base,
            &["exited (code 3)", "The kernel was restarted"],
        ),
        ("crash", Verdict::Crash, base, &["crashed with SIGSEGV"]),
        (
            "pids",
            Verdict::PidsLimit,
            base,
            &[
                "too many processes or threads (limit 128)",
                "can't start new thread",
                "t.start()",
            ],
        ),
        (
            "network",
            Verdict::NetworkBlocked,
            base,
            &["there is no network access in this sandbox", "URLError"],
        ),
        (
            "disk",
            Verdict::DiskLimit,
            base,
            &["256M", "File too large"],
        ),
        (
            "fd",
            Verdict::FdLimit,
            base,
            &["too many files", "Too many open files"],
        ),
        (
            "stderr_ok",
            Verdict::Ok,
            base,
            &["ran without errors", "UserWarning: careful", "<cell>:2"],
        ),
        (
            "no_answer",
            Verdict::Ok,
            base,
            &["ran without errors", "computing"],
        ),
    ];
    let mut on_disk: Vec<String> = std::fs::read_dir(fixture_dir().join("outcomes"))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "json").then(|| p.file_stem()?.to_str().map(str::to_string))?
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);

    for (name, verdict, limits, wanted) in cases {
        let (outcome, code) = load_outcome(name);
        assert_eq!(outcome.verdict, *verdict, "{name}");
        assert_eq!(
            kill_message(&outcome, limits).is_some(),
            !matches!(verdict, Verdict::Ok | Verdict::Error) || outcome.state_lost,
            "{name}"
        );
        let text = feedback(&outcome, &code, limits, 2000);
        assert!(text.chars().count() <= 2000, "{name}");
        assert_clean(name, &text);
        for w in *wanted {
            assert!(text.contains(w), "{name}: {w:?} missing in\n{text}");
        }
        for budget in [100, 400, 1000] {
            let f = feedback(&outcome, &code, limits, budget);
            assert!(f.chars().count() <= budget, "{name} @ {budget}:\n{f}");
            let parts = feedback_parts(&outcome, &code, limits, budget);
            assert!(
                parts.error.chars().count() + parts.stdout.chars().count() <= budget,
                "{name} @ {budget}: {parts:?}"
            );
            assert!(parts.stdout.chars().count() <= budget / 4 + 11, "{name}");
        }
    }
}
