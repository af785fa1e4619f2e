use super::*;

#[test]
fn fault_names_are_the_serde_names() {
    use strum::IntoEnumIterator;
    for kind in FaultKind::iter() {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(FaultKind::OffByOne.as_str(), "off_by_one");
}
use std::collections::HashSet;

pub(in crate::model::oracle) const STATS: &str = "import math\nimport statistics\n\nvalues = [3, 1, 4, 1, 5, 9, 2, 6]\ntotal = sum(values)\nmean = total / len(values)\nspread = statistics.pstdev(values)\nlast = values[-1]\nanswer = round(mean + spread / math.sqrt(len(values)), 3)\n";

pub(in crate::model::oracle) const TABLE: &str = "import csv\nimport io\n\n# a tiny table\ndata = \"\"\"name,price\na,3\nb,5\n\"\"\"\nrows = list(csv.DictReader(io.StringIO(data)))\nfirst = rows[0]\nprice = float(first['price'])\nanswer = price * 2\nprint(f\"answer={answer}\")\n";

pub(in crate::model::oracle) const FUNCS: &str = "def solve(xs):\n    best = None\n    for x in xs:\n        if best is None or x > best:\n            best = x\n    return best\n\nanswer = solve([4, 8, 2])\n";

pub(in crate::model::oracle) const PANDAS: &str = "import pandas as pd\n\ndf = pd.read_csv('sales.csv')\ndf['total'] = df['price'] * df[\"qty\"]\nbest = df.sort_values('total').iloc[-1]\nanswer = df[['price', 'qty']].sum().sum()\n";

const SAMPLES: &[&str] = &[STATS, TABLE, FUNCS, PANDAS];

fn parens_balanced(code: &str) -> bool {
    let src = Source::scan(code);
    let open = src.masked.iter().filter(|&&c| c == b'(').count();
    let close = src.masked.iter().filter(|&&c| c == b')').count();
    open == close
}

#[test]
fn undefined_name_renames_a_used_variable() {
    let f = apply_fault(STATS, FaultKind::UndefinedName, 0).unwrap();
    assert_ne!(f.code, STATS);
    assert_eq!(f.kind, FaultKind::UndefinedName);
    // Exactly one identifier changed, into something not in the code.
    let src = Source::scan(STATS);
    let before = src.all_words();
    let fsrc = Source::scan(&f.code);
    let new: Vec<&str> = fsrc
        .all_words()
        .into_iter()
        .filter(|w| !before.contains(w))
        .collect();
    assert_eq!(new.len(), 1, "{f:?}");
    assert!(!is_predefined(new[0]));
    // Never inside the function body of FUNCS (not certainly run).
    for seed in 0..20 {
        let f = apply_fault(FUNCS, FaultKind::UndefinedName, seed).unwrap();
        let changed = FUNCS
            .lines()
            .zip(f.code.lines())
            .find(|(a, b)| a != b)
            .unwrap();
        assert!(changed.0.starts_with("answer"), "{changed:?}");
    }
}

#[test]
fn wrong_column_misspells_a_read_key_only() {
    for seed in 0..12 {
        let f = apply_fault(PANDAS, FaultKind::WrongColumn, seed).unwrap();
        assert_ne!(f.code, PANDAS);
        // The assigned column `total` is never the one misspelled.
        assert!(f.code.contains("df['total'] ="), "{}", f.code);
        assert!(
            f.note.contains("price") || f.note.contains("qty"),
            "{}",
            f.note
        );
    }
    let f = apply_fault(TABLE, FaultKind::WrongColumn, 0).unwrap();
    assert!(f.code.contains("first['priec']"), "{}", f.code);
    // No subscripted string: not applicable.
    assert!(apply_fault(STATS, FaultKind::WrongColumn, 0).is_none());
    // defaultdict/Counter return defaults instead of raising.
    let counter = "from collections import Counter\nc = Counter('abc')\nanswer = c['a']\n";
    assert!(apply_fault(counter, FaultKind::WrongColumn, 0).is_none());
}

#[test]
fn syntax_error_unbalances_or_drops_a_colon() {
    for code in SAMPLES {
        let f = apply_fault(code, FaultKind::SyntaxError, 3).unwrap();
        assert_ne!(f.code, *code);
        assert!(!parens_balanced(&f.code), "{}", f.code);
    }
    let no_parens = "x = 1\nif x:\n    answer = x\n";
    let f = apply_fault(no_parens, FaultKind::SyntaxError, 0).unwrap();
    assert_eq!(f.code, "x = 1\nif x\n    answer = x\n");
    // A parenthesis inside a string is not a parenthesis.
    let in_string = "answer = ')'\n";
    assert!(apply_fault(in_string, FaultKind::SyntaxError, 0).is_none());
}

#[test]
fn missing_import_removes_a_used_import() {
    let f = apply_fault(STATS, FaultKind::MissingImport, 0).unwrap();
    assert!(!f.code.contains("import math"));
    assert!(f.code.contains("import statistics"));
    // `os` is only used inside a function: skip it, take `json`.
    let code =
        "import os\nimport json\n\ndef f():\n    return os.getcwd()\n\nanswer = json.dumps([1])\n";
    let f = apply_fault(code, FaultKind::MissingImport, 0).unwrap();
    assert!(
        f.code.contains("import os") && !f.code.contains("import json"),
        "{}",
        f.code
    );
    // Imported twice: removing one would not raise.
    let twice = "import math\nimport math\nanswer = math.pi\n";
    assert!(apply_fault(twice, FaultKind::MissingImport, 0).is_none());
    let rebound = "import math\nmath = 3\nanswer = math\n";
    assert!(apply_fault(rebound, FaultKind::MissingImport, 0).is_none());
    let configured = "import json\njson.x = 1\nanswer = json.dumps(1)\n";
    let f = apply_fault(configured, FaultKind::MissingImport, 0).unwrap();
    assert!(!f.code.contains("import json"));
    let none = "answer = 1 + 2\n";
    assert!(apply_fault(none, FaultKind::MissingImport, 0).is_none());
    let aliased = "from math import sqrt as root\nanswer = root(4)\n";
    let f = apply_fault(aliased, FaultKind::MissingImport, 0).unwrap();
    assert_eq!(f.code, "answer = root(4)\n");
}

#[test]
fn off_by_one_indexes_past_the_end() {
    let f = apply_fault(STATS, FaultKind::OffByOne, 0).unwrap();
    assert!(f.code.contains("last = values[len(values)]"), "{}", f.code);
    let f = apply_fault(PANDAS, FaultKind::OffByOne, 0);
    assert!(f.is_none(), "the chain ends in a call: {f:?}");
    let iloc = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\nanswer = df.iloc[0]\n";
    let f = apply_fault(iloc, FaultKind::OffByOne, 0).unwrap();
    assert!(f.code.contains("df.iloc[len(df)]"), "{}", f.code);
    let len = "xs = [1, 2]\nanswer = xs[len(xs) - 1]\n";
    let f = apply_fault(len, FaultKind::OffByOne, 0).unwrap();
    assert_eq!(f.code, "xs = [1, 2]\nanswer = xs[len(xs)]\n");
    let dict = "d = {0: 'a', 1: 'b'}\nanswer = d[0]\n";
    assert!(apply_fault(dict, FaultKind::OffByOne, 0).is_none());
    let target = "xs = [1]\nxs[0] = 2\nanswer = 3\n";
    assert!(apply_fault(target, FaultKind::OffByOne, 0).is_none());
}

#[test]
fn fallback_always_applies() {
    let bare = "answer = 42\n";
    for kind in [
        FaultKind::WrongColumn,
        FaultKind::SyntaxError,
        FaultKind::MissingImport,
        FaultKind::OffByOne,
    ] {
        assert!(apply_fault(bare, kind, 0).is_none(), "{kind:?}");
    }
    // UndefinedName: `42` has no name to rename.
    assert!(apply_fault(bare, FaultKind::UndefinedName, 0).is_none());
    let f = inject_fault(bare, "any");
    assert_eq!(f.kind, FaultKind::UndefinedHelper);
    assert_eq!(f.code, "_check = undefined_helper()\nanswer = 42\n");
    let future = "from __future__ import annotations\nanswer = 42";
    let f = inject_fault(future, "t");
    assert_eq!(
        f.code,
        "from __future__ import annotations\n_check = undefined_helper()\nanswer = 42"
    );
}

#[test]
fn odd_inputs_do_not_panic() {
    let odd = [
        "",
        "# only a comment",
        "'''unterminated",
        "x = 'unterminated\n",
        "\\",
        "(((",
        ")))",
        "s = 'héllo'[0]\nπ = 3.14\nanswer = π * 2  # ünïcode",
        "x = 1\r\nanswer = x[0]\r\n",
        "f'''{x}'''",
        "a = b'\\''; answer = a[0]",
        "@decorator\ndef f(): pass\n",
        "%timeit 1 + 1\n!ls\nanswer = 1",
        "if x: y = (1,\n  2)\nelse: z = [3]",
    ];
    for code in odd {
        for i in 0..12 {
            let f = inject_fault(code, &format!("odd-{i}"));
            assert_ne!(f.code, code);
        }
    }
}

#[test]
fn deterministic_and_spread_over_kinds() {
    let mut kinds = HashSet::new();
    for i in 0..60 {
        let id = format!("task-{i}");
        let a = inject_fault(STATS, &id);
        assert_eq!(a, inject_fault(STATS, &id));
        assert_ne!(a.code, STATS);
        kinds.insert(a.kind);
    }
    // STATS admits every kind but wrong-column (which falls through).
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert_eq!(fault_order("x"), fault_order("x"));
}

#[test]
fn misspellings_avoid_taken_names() {
    assert_eq!(misspell("total", |_| false), "totla");
    assert_eq!(misspell("df", |_| false), "dff");
    assert_eq!(misspell("ab", |c| c == "abb"), "ab2");
    let m = misspell("price", |c| c == "priec");
    assert_eq!(m, "prcie");
    assert_ne!(m, "price");
}

/// With a Python at hand, check the real contract: the reference runs,
/// every injected fault raises.
#[test]
fn faults_raise_in_python() {
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        std::process::Command::new(p)
            .arg("-c")
            .arg("pass")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let python = python.expect(
        "this test runs the faulty code in a real python3; install python3 (CI machines have it)",
    );
    let run = |code: &str| {
        std::process::Command::new(python)
            .arg("-c")
            .arg(code)
            .output()
            .expect("python runs")
    };
    let runnable = [STATS, TABLE, FUNCS];
    let extra = "import json\nimport os.path as p\nrecords = json.loads('[{\"k\": 1}, {\"k\": 2}]')\nks = [r['k'] for r in records]\nname = p.basename('/a/b.txt')\nanswer = ks[-1] + len(name) + records[0]['k']\n";
    let mut seen = HashSet::new();
    for code in runnable.iter().copied().chain([extra]) {
        assert!(run(code).status.success(), "reference fails:\n{code}");
        for kind in FAULT_KINDS.into_iter().chain([FaultKind::UndefinedHelper]) {
            for seed in 0..6 {
                let Some(f) = apply_fault(code, kind, seed) else {
                    continue;
                };
                if !seen.insert(f.code.clone()) {
                    continue;
                }
                let out = run(&f.code);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(!out.status.success(), "{kind:?} ran cleanly:\n{}", f.code);
                let expected = match kind {
                    FaultKind::UndefinedName
                    | FaultKind::MissingImport
                    | FaultKind::UndefinedHelper
                    | FaultKind::NeedsState => "NameError",
                    FaultKind::WrongColumn => "KeyError",
                    FaultKind::SyntaxError => "SyntaxError",
                    FaultKind::OffByOne => "IndexError",
                };
                assert!(stderr.contains(expected), "{kind:?}: {stderr}\n{}", f.code);
            }
        }
    }
    eprintln!("{} distinct faults raised in {python}", seen.len());
    assert!(seen.len() >= 15, "only {} distinct faults", seen.len());
}
