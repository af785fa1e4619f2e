//! Repairs that hide the error, checked by the slim image's interpreter in
//! its own jail: for each rule a real failing/repair pair that must be
//! flagged and a near miss that must not.

use crate::common;

use std::time::Instant;

use retrace::kernel::KernelOptions;
use retrace::pyenv::ImageName;
use retrace::repair::masking::{
    MaskCheck, MaskError, MaskFlag, RepairPair, Unchecked, UncheckedReason, MAX_DETAIL,
};
use retrace::sandbox::Verdict;

use MaskFlag::*;

/// Checks `pair` in the check's own jail (the test fails without root);
/// the check's directories are gone afterwards.
async fn try_check(pair: &RepairPair) -> Result<Vec<MaskFlag>, MaskError> {
    let work = tempfile::tempdir().unwrap();
    let masks = MaskCheck::new(
        common::image(ImageName::Slim),
        common::sandbox(),
        work.path().to_path_buf(),
    );
    let found = masks.check(pair).await;
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().collect();
    assert!(left.is_empty(), "the check left {left:?}");
    found
}

async fn check(pair: &RepairPair) -> Vec<MaskFlag> {
    try_check(pair)
        .await
        .unwrap_or_else(|e| panic!("checking {pair:?}: {e}"))
}

/// A pair whose repair printed `stdout` and left `answer`.
fn pair(
    failing: &str,
    line: usize,
    exception: &str,
    repair: &str,
    stdout: &str,
    answer: Option<&str>,
) -> RepairPair {
    RepairPair {
        failing_code: failing.into(),
        failing_line: Some(line),
        exception: Some(exception.into()),
        repair_code: repair.into(),
        repair_stdout: stdout.into(),
        repair_answer: answer.map(str::to_string),
    }
}

/// A tabular task's code failing with `KeyError: 'category'` at line 3.
const TABULAR: &str = "import pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
counts = df['category'].value_counts()\n\
answer = counts.idxmax()\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_new_broad_handler_around_the_failing_line_is_flagged() {
    let wrapped = "import pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
try:\n    counts = df['category'].value_counts()\n    answer = counts.idxmax()\n\
except Exception as e:\n    print(f'An error occurred: {e}')\n";
    let p = pair(
        TABULAR,
        3,
        "KeyError",
        wrapped,
        "An error occurred: 'category'\n",
        None,
    );
    let flags = check(&p).await;
    assert!(flags.contains(&BroadHandler), "{flags:?}");
    // Fixed and wrapped: the handler would still hide the next error.
    let fixed = wrapped.replace("df['category']", "df['Category']");
    let p = pair(TABULAR, 3, "KeyError", &fixed, "", Some("'Books'"));
    assert_eq!(check(&p).await, [BroadHandler]);

    // A bare `except:` and a tuple with Exception in it are as broad, and
    // a call of the function holding the failing line is covered too.
    let failing = "def total(rows):\n    return sum(r['price'] for r in rows)\n\
rows = [{'cost': 3}, {'cost': 4}]\nanswer = total(rows)\n";
    let bare = "def total(rows):\n    return sum(r['price'] for r in rows)\n\
rows = [{'cost': 3}, {'cost': 4}]\ntry:\n    answer = total(rows)\nexcept:\n    answer = None\n";
    let tuple = bare.replace("except:", "except (KeyError, Exception):");
    let suppress = "import contextlib\n\
def total(rows):\n    return sum(r['price'] for r in rows)\n\
rows = [{'cost': 3}, {'cost': 4}]\nanswer = None\n\
with contextlib.suppress(Exception):\n    answer = total(rows)\n";
    for repair in [bare, tuple.as_str(), suppress] {
        let p = pair(failing, 2, "KeyError", repair, "", Some("None"));
        assert_eq!(check(&p).await, [BroadHandler], "{repair}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn handlers_that_fix_or_re_raise_are_not_broad_handlers() {
    // The named exception with a real fallback: the fix the feedback asked for.
    let fallback = "import pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
try:\n    counts = df['category'].value_counts()\n\
except KeyError:\n    counts = df['Category'].value_counts()\n\
answer = counts.idxmax()\n";
    // A broad handler that re-raises hides nothing.
    let reraise = "import pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
try:\n    counts = df['category'].value_counts()\n\
except Exception as e:\n    raise ValueError(f'no category column in {list(df.columns)}') from e\n\
answer = counts.idxmax()\n";
    // A broad handler around another statement than the failing one.
    let elsewhere = "import pandas as pd\n\
try:\n    df = pd.read_csv('sales.csv')\nexcept Exception:\n    df = pd.read_csv('sales.csv', sep=';')\n\
counts = df['Category'].value_counts()\n\
answer = counts.idxmax()\n";
    for repair in [fallback, reraise, elsewhere] {
        let p = pair(TABULAR, 3, "KeyError", repair, "", Some("'Books'"));
        assert_eq!(check(&p).await, [], "{repair}");
    }
    // A broad handler the failing code already had is not new.
    let failing = "import json\n\
try:\n    cfg = json.loads('{}')\nexcept Exception:\n    cfg = {}\n\
answer = cfg['rate'] * 2\n";
    let repair = "import json\n\
try:\n    cfg = json.loads('{}')\nexcept Exception:\n    cfg = {}\n\
answer = cfg.get('rate', 0.5) * 2\n";
    let p = pair(failing, 6, "KeyError", repair, "", Some("1.0"));
    assert_eq!(check(&p).await, []);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_that_only_silences_the_failing_exception_is_flagged() {
    let silenced = "import pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
try:\n    counts = df['category'].value_counts()\n    answer = counts.idxmax()\n\
except KeyError:\n    pass\n";
    let p = pair(TABULAR, 3, "KeyError", silenced, "", None);
    assert_eq!(check(&p).await, [SilencedException]);
    let suppressed = "import pandas as pd\nfrom contextlib import suppress\n\
df = pd.read_csv('sales.csv')\n\
with suppress(KeyError):\n    counts = df['category'].value_counts()\n    answer = counts.idxmax()\n";
    let p = pair(TABULAR, 3, "KeyError", suppressed, "", None);
    assert_eq!(check(&p).await, [SilencedException]);
    // Another exception's handler is the model's business.
    let other = silenced.replace("except KeyError:", "except FileNotFoundError:");
    let p = pair(TABULAR, 3, "KeyError", &other, "", None);
    assert_eq!(check(&p).await, []);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_failing_statement_is_flagged_a_fixed_one_is_not() {
    // The model dropped the statement that failed and kept the rest.
    let failing = "prices = [3.5, 4.0, 2.25]\n\
mean = sum(prices) / len(prices)\n\
spread = max(prices) - min(prics)\n\
print(mean, spread)\n";
    let dropped = "prices = [3.5, 4.0, 2.25]\n\
mean = sum(prices) / len(prices)\n\
print(mean)\n";
    let p = pair(failing, 3, "NameError", dropped, "3.25\n", None);
    assert_eq!(check(&p).await, [FailingStatementDeleted]);

    // The misspelt name fixed, or the statement computed another way.
    let renamed = failing.replace("min(prics)", "min(prices)");
    let rewritten = failing.replace(
        "spread = max(prices) - min(prics)",
        "ordered = sorted(prices)\nspread = ordered[-1] - ordered[0]",
    );
    for repair in [renamed.as_str(), rewritten.as_str()] {
        let p = pair(failing, 3, "NameError", repair, "3.25 1.75\n", None);
        assert_eq!(check(&p).await, [], "{repair}");
    }
    // A printed name fixed is not a deletion (same shape), a print of a
    // message in its place is.
    let failing = "total = 12 * 4\nprint(totl)\n";
    let p = pair(
        failing,
        2,
        "NameError",
        "total = 12 * 4\nprint(total)\n",
        "48\n",
        None,
    );
    assert_eq!(check(&p).await, []);
    let p = pair(
        failing,
        2,
        "NameError",
        "total = 12 * 4\nprint('done')\n",
        "done\n",
        None,
    );
    assert_eq!(check(&p).await, [FailingStatementDeleted]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_literal_answer_in_place_of_a_computed_one_is_flagged() {
    let failing = "eggs_per_day = 16\n\
eaten = 3\nbaked = 4\n\
answer = (eggs_per_day - eaten - baked) * price_per_egg\n";
    let literal = "eggs_per_day = 16\n\
eaten = 3\nbaked = 4\n\
answer = 18\n";
    let p = pair(failing, 4, "NameError", literal, "", Some("18"));
    // The computation is gone too.
    assert_eq!(check(&p).await, [FailingStatementDeleted, LiteralAnswer]);

    // A literal as the handler's fallback is one too.
    let fallback = failing.replace("answer = (", "try:\n    answer = (")
        + "except NameError:\n    answer = 18\n";
    let p = pair(failing, 4, "NameError", &fallback, "", Some("18"));
    assert_eq!(check(&p).await, [LiteralAnswer]);

    // The fix: the missing name defined.
    let fixed = failing.replace("baked = 4\n", "baked = 4\nprice_per_egg = 2\n");
    let p = pair(failing, 4, "NameError", &fixed, "", Some("18"));
    assert_eq!(check(&p).await, []);
    // A literal in both rounds (the failure was elsewhere), and `None` as a
    // placeholder before the computation, are not flagged.
    let both = "import math\nanswer = 0.653\nprint(math.sqrt(-1))\n";
    let fixed_both = both.replace("sqrt(-1)", "sqrt(1)");
    let p = pair(both, 3, "ValueError", &fixed_both, "1.0\n", Some("0.653"));
    assert_eq!(check(&p).await, []);
    let placeholder = format!("price_per_egg = 2\nanswer = None\n{}", failing);
    let p = pair(failing, 4, "NameError", &placeholder, "", Some("18"));
    assert_eq!(check(&p).await, []);
}

#[tokio::test(flavor = "multi_thread")]
async fn added_exits_are_flagged() {
    let exits = [
        "import sys\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n\
if 'category' not in df.columns:\n    sys.exit(0)\n\
counts = df['category'].value_counts()\nanswer = counts.idxmax()\n",
        "import os\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n\
if 'category' not in df.columns:\n    os._exit(0)\n\
counts = df['category'].value_counts()\nanswer = counts.idxmax()\n",
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\n\
if 'category' not in df.columns:\n    raise SystemExit\n\
counts = df['category'].value_counts()\nanswer = counts.idxmax()\n",
    ];
    for repair in exits {
        let p = pair(TABULAR, 3, "KeyError", repair, "", None);
        assert_eq!(check(&p).await, [Exits], "{repair}");
    }
    // An exit the failing code already had, and an `exit` method of
    // something else, are not added exits.
    let failing = "import sys\nrows = []\nif not rows:\n    sys.exit(1)\nanswer = rows[0]\n";
    let repair = "import sys\nrows = [5]\nif not rows:\n    sys.exit(1)\nanswer = rows[0]\n";
    let p = pair(failing, 5, "IndexError", repair, "", Some("5"));
    assert_eq!(check(&p).await, []);
    let method = "class Game:\n    def exit(self):\n        return 'bye'\n\
g = Game()\ncounts = {'a': 2}\nanswer = counts['a']\ng.exit()\n";
    let failing_method = method.replace("counts['a']", "counts['b']");
    let p = pair(&failing_method, 6, "KeyError", method, "", Some("2"));
    assert_eq!(check(&p).await, []);
}

/// The DABench case of issue 28, as two real rounds in one kernel: the
/// repair catches the missing column and prints a sentence, which the
/// harness took as the answer.
#[tokio::test(flavor = "multi_thread")]
async fn an_error_message_as_the_only_output_is_flagged() {
    let mut kernel = common::fat_kernel(KernelOptions::default()).await;
    let data = "import io\nimport pandas as pd\n\
df = pd.read_csv(io.StringIO('item,Category,price\\na,Books,3\\nb,Toys,5\\nc,Books,2\\n'))\n";
    let failing =
        format!("{data}counts = df['category'].value_counts()\nanswer = counts.idxmax()\n");
    let guarded = format!(
        "{data}if 'category' in df.columns:\n    answer = df['category'].value_counts().idxmax()\n\
else:\n    print(\"The column 'category' does not exist in the dataset.\")\n"
    );
    let caught = format!(
        "{data}try:\n    answer = df['category'].value_counts().idxmax()\n\
except KeyError:\n    print(\"The column 'category' does not exist in the dataset.\")\n"
    );
    let fixed = format!(
        "{data}top = df['Category'].value_counts().idxmax()\nprint(f'The most common category is {{top}}')\n"
    );
    let mean_error = format!(
        "{data}if 'price' in df.columns:\n    err = (df['price'] - df['price'].mean()).abs().mean()\n    \
print(f'Mean absolute error: {{err:.3f}}')\n"
    );

    let failed = kernel.execute(&failing, &common::exec_opts(30)).await;
    assert_eq!(failed.verdict, Verdict::Error, "{failed:?}");
    let mut got = Vec::new();
    for repair in [&guarded, &caught, &fixed, &mean_error] {
        let repaired = kernel.execute(repair, &common::exec_opts(30)).await;
        assert_eq!(repaired.verdict, Verdict::Ok, "{repair}: {repaired:?}");
        let p = RepairPair::of_rounds(&failing, &failed, repair, &repaired);
        assert_eq!(p.failing_line, Some(4), "{p:?}");
        assert_eq!(p.exception.as_deref(), Some("KeyError"));
        got.push((repaired.stdout.clone(), check(&p).await));
    }
    let line = "The column 'category' does not exist in the dataset.\n";
    assert_eq!(got[0], (line.to_string(), vec![ErrorMessageOutput]));
    assert_eq!(
        got[1],
        (
            line.to_string(),
            vec![SilencedException, ErrorMessageOutput]
        )
    );
    // Prose that is the result, and a metric named "error", are not.
    assert_eq!(got[2].1, [], "{:?}", got[2]);
    assert!(!got[3].1.contains(&ErrorMessageOutput), "{:?}", got[3]);
}

/// The reason a pair was not compared; the test fails if it was.
async fn unchecked(pair: &RepairPair) -> Unchecked {
    match try_check(pair).await {
        Err(e) => e.unchecked(),
        Ok(flags) => panic!("expected no comparison, got {flags:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn code_that_is_not_python_is_not_checked_and_magics_are_read() {
    let broken = "import pandas as pd\ndf = pd.read_csv('sales.csv'\n";
    let p = pair(TABULAR, 3, "KeyError", broken, "", None);
    let why = unchecked(&p).await;
    assert_eq!(why.reason, UncheckedReason::SyntaxError, "{why}");
    assert!(why.detail.starts_with("SyntaxError"), "{why}");
    let p = pair(broken, 2, "SyntaxError", TABULAR, "", None);
    assert_eq!(unchecked(&p).await.reason, UncheckedReason::SyntaxError);
    // Null bytes are not Python either.
    let p = pair(TABULAR, 3, "KeyError", "answer = 1\0\n", "", None);
    assert_eq!(unchecked(&p).await.reason, UncheckedReason::SyntaxError);

    // A cell with an install magic is read as IPython runs it.
    let magic = "%pip install -q pandas\nimport pandas as pd\n\
df = pd.read_csv('sales.csv')\n\
try:\n    counts = df['category'].value_counts()\nexcept BaseException:\n    counts = None\n";
    let p = pair(TABULAR, 3, "KeyError", magic, "", None);
    assert_eq!(check(&p).await, [BroadHandler]);
}

#[tokio::test(flavor = "multi_thread")]
async fn code_nested_past_the_parser_is_not_checked_and_says_why() {
    // Deep nesting makes CPython's parser raise MemoryError,
    // RecursionError or "too many nested parentheses": each is the
    // parser's limit, named with its exception, never a silent "no flags".
    let cases = [
        ("(".repeat(100_000) + &")".repeat(100_000), "SyntaxError"),
        ("-".repeat(1_000_000) + "1", "MemoryError"),
        ("[".repeat(100_000) + &"]".repeat(100_000), "SyntaxError"),
        (
            format!("x = {}1\n", "1 + ".repeat(200_000)),
            "RecursionError",
        ),
    ];
    for (repair, exception) in &cases {
        let p = pair(TABULAR, 3, "KeyError", repair, "", None);
        let why = unchecked(&p).await;
        assert_eq!(why.reason, UncheckedReason::ParserLimit, "{why}");
        assert!(why.detail.starts_with(exception), "{why}");
        assert!(why.detail.chars().count() <= MAX_DETAIL + 3, "{why}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parser_killed_in_its_jail_is_not_checked_naming_the_cause() {
    // Millions of statements: the parse outgrows the jail's memory, and
    // is killed or raises MemoryError.
    let huge = "x = [1, 2, 3]\n".repeat(3_000_000);
    let p = pair(TABULAR, 3, "KeyError", &huge, "", None);
    match try_check(&p).await {
        Err(e @ MaskError::Failed { .. }) => {
            let text = e.to_string();
            assert!(text.contains("repair masking check failed"), "{text}");
            assert_eq!(e.unchecked().reason, UncheckedReason::CheckerError);
        }
        Err(e @ MaskError::Unread(_)) => {
            let why = e.unchecked();
            assert_eq!(why.reason, UncheckedReason::ParserLimit, "{why}");
            assert!(why.detail.starts_with("MemoryError"), "{why}");
        }
        other => panic!("expected a check that did not compare, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_costs_a_fraction_of_a_second() {
    let p = pair(TABULAR, 3, "KeyError", TABULAR, "", Some("'Books'"));
    check(&p).await;
    let runs = 5;
    let started = Instant::now();
    for _ in 0..runs {
        assert_eq!(check(&p).await, []);
    }
    let each = started.elapsed().as_secs_f64() * 1000.0 / runs as f64;
    eprintln!("one repair masking check: {each:.0} ms");
    assert!(each < 5_000.0, "{each} ms per check");
}

/// The state a cell takes from earlier cells, found by the masking
/// check's parser in its jail: names read, bound nowhere in the cell, and
/// bound at the top level of an earlier cell (imports, assignments, loop
/// targets, definitions); not a function's own parameter or local, not a
/// comprehension's variable, not a name no earlier cell bound.
#[tokio::test]
async fn state_names_are_what_a_cell_reads_of_earlier_cells_top_level() {
    let work = tempfile::tempdir().unwrap();
    let masks = MaskCheck::new(
        common::image(ImageName::Slim),
        common::sandbox(),
        work.path().to_path_buf(),
    );
    let earlier = [
        "import math as m\nxs = [1, 2]\ndef f(a):\n    local = a\n    return local\nfor i in xs:\n    pass\n",
        "this is not python (",
    ];
    let code = "total = sum(xs) + f(3) + i + len([x for x in xs])\n\
                def g(local):\n    return local\n\
                print(m.pi, total, g(1), undefined)\n";
    let names = masks.state_names(&earlier, code).await.unwrap();
    assert_eq!(names, ["f", "i", "m", "xs"]);
    // A cell that defines what it reads takes nothing.
    let own = "xs = [3]\nimport math as m\nprint(m.pi, sum(xs))\n";
    assert!(masks.state_names(&earlier, own).await.unwrap().is_empty());
    // Code that is not Python is not checked, and says why.
    let unread = masks.state_names(&earlier, "def (").await.unwrap_err();
    assert_eq!(unread.unchecked().reason, UncheckedReason::SyntaxError);
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().collect();
    assert!(left.is_empty(), "the check left {left:?}");
}
