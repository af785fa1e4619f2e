//! The answer reader and the state inspector, against real kernels: one
//! answer per cell, read by retrace's own serializer, never by code the
//! task defined; a bounded view of the state after a failure.

use crate::common;

use std::time::Duration;

use retrace::kernel::{Answer, AnswerRule, Kernel, KernelError, KernelOptions, StateQuery};
use retrace::sandbox::Verdict;
use serde_json::json;

async fn kernel() -> Kernel {
    common::fat_kernel(KernelOptions::default()).await
}

use common::exec_opts as opts;

/// Runs a cell that must succeed and returns its answer.
async fn answer_of(k: &mut Kernel, code: &str) -> Answer {
    let o = k.execute(code, &opts(20)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{code}: {o:?}");
    match o.answer.clone() {
        Some(a) => a,
        None => panic!("{code}: no answer; {o:?}"),
    }
}

fn unsupported(a: &Answer) -> (&str, &str) {
    let u = a
        .unsupported
        .as_ref()
        .unwrap_or_else(|| panic!("expected an unsupported answer, got {a:?}"));
    (u.type_name.as_str(), u.reason.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_answer_is_not_read_again() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let a = answer_of(&mut k, "answer = 5").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("5", AnswerRule::AnswerVariable)
    );

    // The next cell prints without assigning: its answer is what it printed.
    let a = answer_of(&mut k, "print('later')").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("later", AnswerRule::LastStdoutLine)
    );
    // A cell with no output at all has no answer, not the old one.
    let o = k.execute("y = 1", &opts(10)).await;
    assert!(o.answer.is_none(), "{o:?}");

    // The earlier answer is still usable by later code, and still defined.
    let a = answer_of(&mut k, "z = answer + 1\nprint(z, 'answer' in globals())").await;
    assert_eq!(
        a.value, "6 False",
        "inside the cell it is read through builtins"
    );
    let view = k
        .inspect_state(&StateQuery {
            names: vec!["answer".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(view.variables[0].value.as_deref(), Some("5"));

    // Assigning the same value again counts: this cell assigned it.
    let a = answer_of(&mut k, "answer = 5").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("5", AnswerRule::AnswerVariable)
    );
    // `answer += 1` and a function's `global answer` assign too.
    let a = answer_of(&mut k, "answer += 1").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("6", AnswerRule::AnswerVariable)
    );
    let a = answer_of(&mut k, "def f():\n    global answer\n    answer = 'g'\nf()").await;
    assert_eq!(a.value, "'g'");

    // A failing cell leaves the namespace as it was.
    let o = k.execute("raise ValueError('x')", &opts(10)).await;
    assert_eq!(o.verdict, Verdict::Error);
    assert!(o.answer.is_none());
    let o = k.execute("print(answer)", &opts(10)).await;
    assert_eq!(o.stdout, "g\n");
    assert_eq!(o.answer.unwrap().rule, AnswerRule::LastStdoutLine);

    // Planting a value in builtins does not make it this cell's answer.
    let o = k
        .execute(
            "import builtins\ndel answer\nbuiltins.answer = 41",
            &opts(10),
        )
        .await;
    assert!(o.answer.is_none(), "{o:?}");
    // Nor does removing retrace's hooks make an old answer count again.
    let code = "answer = 'old'";
    answer_of(&mut k, code).await;
    let o = k
        .execute(
            "ip = get_ipython()\nfor e in ('pre_run_cell', 'post_run_cell'):\n    ip.events.callbacks[e].clear()",
            &opts(10),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok);
    let o = k.execute("x = 1", &opts(10)).await;
    assert!(o.answer.is_none(), "{o:?}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_values_are_unsupported_without_running_their_code() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let a = answer_of(
        &mut k,
        "class Slow:\n    def __repr__(self):\n        import time\n        time.sleep(3600)\n        return 'never'\nanswer = Slow()",
    )
    .await;
    assert_eq!(unsupported(&a), ("__main__.Slow", "not a plain value"));
    assert_eq!(a.checkable(), None);
    assert_eq!(a.value, "");

    let a = answer_of(
        &mut k,
        "class Boom:\n    def __repr__(self):\n        raise RuntimeError('no')\n    __str__ = __repr__\nanswer = Boom()",
    )
    .await;
    assert_eq!(unsupported(&a).0, "__main__.Boom");

    // An int subclass whose repr lies is not read as an int.
    let a = answer_of(
        &mut k,
        "class E(int):\n    def __repr__(self):\n        return '999'\n    __str__ = __repr__\nanswer = E(5)",
    )
    .await;
    assert_eq!(unsupported(&a).0, "__main__.E");

    // A class disguised as a builtin, alone and nested.
    let disguise = "class float(float):\n    __module__ = 'builtins'\n    __qualname__ = 'float'\n    def __repr__(self):\n        return '1.0'\n";
    let a = answer_of(&mut k, &format!("{disguise}answer = float(2.0)")).await;
    assert_eq!(unsupported(&a).0, "builtins.float");
    let a = answer_of(
        &mut k,
        &format!("{disguise}answer = {{'a': [1, float(3.0)]}}"),
    )
    .await;
    let (t, reason) = unsupported(&a);
    assert_eq!(t, "builtins.float");
    assert!(reason.contains("answer['a'][1]"), "{reason}");

    // A metaclass whose __eq__ hangs is never compared.
    let a = answer_of(
        &mut k,
        "class M(type):\n    def __eq__(cls, other):\n        while True: pass\n    __hash__ = type.__hash__\nclass V(metaclass=M): pass\nanswer = V()",
    )
    .await;
    assert_eq!(unsupported(&a).0, "__main__.V");

    let a = answer_of(
        &mut k,
        "import pandas as pd\nanswer = pd.DataFrame({'a': [1, 2]})",
    )
    .await;
    assert_eq!(unsupported(&a), ("pandas.DataFrame", "not a plain value"));

    let a = answer_of(&mut k, "answer = {1: 'a'}").await;
    assert!(unsupported(&a).1.contains("keys must be strings"), "{a:?}");

    // Too big: said so, never silently shortened.
    let a = answer_of(&mut k, "answer = list(range(100000))").await;
    let (t, reason) = unsupported(&a);
    assert_eq!(t, "list");
    assert!(reason.starts_with("too large"), "{reason}");
    let a = answer_of(&mut k, "answer = 'x' * 1_000_000").await;
    assert!(unsupported(&a).1.starts_with("too large"));
    let a = answer_of(
        &mut k,
        "x = []\nfor _ in range(100):\n    x = [x]\nanswer = x",
    )
    .await;
    assert!(unsupported(&a).1.contains("nested deeper"), "{a:?}");

    // The kernel is fine afterwards.
    let a = answer_of(&mut k, "answer = 1").await;
    assert_eq!(a.value, "1");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_values_are_read_whole() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let a = answer_of(&mut k, "answer = [i / 7 for i in range(300)]").await;
    let values = a.json.as_ref().unwrap().as_array().unwrap();
    assert_eq!(values.len(), 300);
    assert_eq!(values[299].as_f64(), Some(299.0 / 7.0));
    assert!(!a.value.contains("..."));
    assert_eq!(a.value.matches(", ").count(), 299);

    // A long list as the last expression: IPython's text/plain would end in
    // `...`; the reader gets all of it.
    let o = k.execute("list(range(2000))", &opts(10)).await;
    let shown = o.results[0].text().unwrap();
    assert!(
        shown.contains("..."),
        "IPython truncates its display: {shown:.60}"
    );
    let a = o.answer.unwrap();
    assert_eq!(a.rule, AnswerRule::LastResult);
    assert_eq!(a.json.as_ref().unwrap().as_array().unwrap().len(), 2000);
    assert!(a.value.ends_with("1998, 1999]"));

    let cases: &[(&str, &str, serde_json::Value, &str)] = &[
        (
            "import numpy as np\nanswer = np.float64(2.5)",
            "2.5",
            json!(2.5),
            "numpy.float64",
        ),
        (
            "import numpy as np\nanswer = np.int64(7)",
            "7",
            json!(7),
            "numpy.int64",
        ),
        (
            "import numpy as np\nanswer = np.float32(0.1)",
            "0.1",
            json!(0.10000000149011612),
            "numpy.float32",
        ),
        (
            "import numpy as np\nanswer = np.bool_(True)",
            "True",
            json!(true),
            "numpy.bool",
        ),
        (
            "import numpy as np\nanswer = np.array([1.5, 2])",
            "[1.5, 2.0]",
            json!([1.5, 2.0]),
            "numpy.ndarray",
        ),
        (
            "import numpy as np\nanswer = np.array(3)",
            "3",
            json!(3),
            "numpy.ndarray",
        ),
        (
            "from decimal import Decimal\nanswer = Decimal('1.10')",
            "1.10",
            json!(1.1),
            "decimal.Decimal",
        ),
        (
            "from fractions import Fraction\nanswer = Fraction(3, 4)",
            "3/4",
            json!(0.75),
            "fractions.Fraction",
        ),
        (
            "import sympy\nanswer = sympy.Rational(3, 4)",
            "3/4",
            json!(0.75),
            "sympy.core.numbers.Rational",
        ),
        (
            "import sympy\nanswer = sympy.Integer(12)",
            "12",
            json!(12),
            "sympy.core.numbers.Integer",
        ),
        (
            "import sympy\nanswer = sympy.Float(0.5)",
            "0.5",
            json!(0.5),
            "sympy.core.numbers.Float",
        ),
        ("answer = True", "True", json!(true), "bool"),
        ("answer = None", "None", json!(null), "NoneType"),
        ("answer = float('nan')", "nan", json!(null), "float"),
        ("answer = 'it''s'", "'its'", json!("its"), "str"),
        ("answer = \"don't\"", "\"don't\"", json!("don't"), "str"),
        ("answer = (1,)", "(1,)", json!([1]), "tuple"),
        (
            "answer = {'@p_value': 0.03, 'name': 'x', 'parts': [1, (2, 'é')], 'none': None}",
            "{'@p_value': 0.03, 'name': 'x', 'parts': [1, (2, 'é')], 'none': None}",
            json!({"@p_value": 0.03, "name": "x", "parts": [1, [2, "é"]], "none": null}),
            "dict",
        ),
    ];
    for (code, text, value, type_name) in cases {
        let a = answer_of(&mut k, code).await;
        assert_eq!(a.value, *text, "{code}");
        assert_eq!(a.json.as_ref(), Some(value), "{code}");
        assert_eq!(a.type_name.as_deref(), Some(*type_name), "{code}");
        assert_eq!(a.rule, AnswerRule::AnswerVariable);
    }
    // Big integers: exact digits in the text, a float in the JSON.
    let a = answer_of(&mut k, "answer = 2**70").await;
    assert_eq!(a.value, "1180591620717411303424");
    let f = a.json.as_ref().and_then(|v| v.as_f64()).unwrap();
    assert!((f / 2f64.powi(70) - 1.0).abs() < 1e-12, "{f}");
    // Integers beyond the int-to-str limit keep every digit.
    let a = answer_of(&mut k, "answer = 7 ** 20000").await;
    let o = k
        .execute(
            "import sys, hashlib\nsys.set_int_max_str_digits(0)\nprint(hashlib.sha256(str(7 ** 20000).encode()).hexdigest())",
            &opts(20),
        )
        .await;
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(a.value.as_bytes()));
    assert_eq!(a.value.len(), 16902);
    assert_eq!(o.stdout.trim(), digest);
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn monkeypatched_state_does_not_fool_the_reader() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // Names shadowed in the namespace and builtins replaced in the module.
    let o = k
        .execute(
            "import builtins, io, sys, json\n\
             type = lambda *a: int\nstr = repr = len = print = isinstance = None\n\
             json = None\nlist = dict = float = int = object = None\n\
             builtins.print = lambda *a, **k: None\nbuiltins.repr = lambda o: '13'\n\
             builtins.ascii = builtins.format = None\nsys.stdout = io.StringIO()",
            &opts(10),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let a = answer_of(&mut k, "answer = [1, 2.5, 'x', {'k': (True, None)}]").await;
    assert_eq!(a.value, "[1, 2.5, 'x', {'k': (True, None)}]");
    assert_eq!(a.json, Some(json!([1, 2.5, "x", {"k": [true, null]}])));
    let a = answer_of(&mut k, "answer = 7").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("7", AnswerRule::AnswerVariable)
    );
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_display_formatter_does_not_hide_the_answer() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // IPython formats user expressions with the display formatter; the
    // answer reader's envelope does not go through it.
    let o = k
        .execute(
            "get_ipython().display_formatter.format = lambda obj, *a, **kw: ({}, {})",
            &opts(10),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let a = answer_of(&mut k, "answer = 7").await;
    assert_eq!(
        (a.value.as_str(), a.rule),
        ("7", AnswerRule::AnswerVariable)
    );
    k.shutdown().await;
}

async fn names_in(k: &mut Kernel) -> String {
    let o = k
        .execute(
            "print(sorted(n for n in globals() if not n.startswith('_')))",
            &opts(10),
        )
        .await;
    o.stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn state_view_after_a_key_error_shows_the_columns() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute(
            "import pandas as pd\ndf = pd.DataFrame({'GDP per capita (USD)': [1.0, 2.0], 'country': ['a', 'b'], 'year': [1, 2]})\nx = df['GDP per capita'].sum()",
            &opts(20),
        )
        .await;
    assert_eq!(o.error.as_ref().unwrap().ename, "KeyError");
    let before = names_in(&mut k).await;
    let count_before = k.execute("1", &opts(10)).await.execution_count;
    let line = "x = df['GDP per capita'].sum()";
    let query = StateQuery {
        names: retrace::kernel::names_in_line(line),
        missing_key: Some("GDP per capita".into()),
        ..Default::default()
    };
    assert_eq!(query.names, ["x", "df"]);
    let view = k.inspect_state(&query).await.expect("view");
    let df = view.variables.iter().find(|v| v.name == "df").unwrap();
    assert_eq!(df.type_name, "pandas.DataFrame");
    assert_eq!(df.shape, Some(vec![2, 3]));
    assert_eq!(
        df.columns.as_deref().unwrap(),
        ["GDP per capita (USD)", "country", "year"]
    );
    assert_eq!(df.dtypes.as_ref().unwrap()[0].as_deref(), Some("float64"));
    assert_eq!(view.missing, ["x"]);
    let m = &view.close_matches[0];
    assert_eq!((m.kind.as_str(), m.owner.as_deref()), ("key", Some("df")));
    assert_eq!(m.candidates, ["GDP per capita (USD)"]);
    let text = view.render(2000);
    assert!(
        text.contains("\"GDP per capita (USD)\" (float64)"),
        "{text}"
    );
    assert!(view.render(100).len() <= 100);

    // Nothing changed: names, and the execution count the model sees.
    assert_eq!(names_in(&mut k).await, before);
    let count_after = k.execute("1", &opts(10)).await.execution_count;
    assert_eq!(count_after, count_before.map(|c| c + 2));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn state_view_offers_close_names_and_attributes() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute(
            "import pandas as pd\ntotal = 10\nitems = [1, 2, 3]\ndf = pd.DataFrame({'column_a': [1]})\nprint(totl)",
            &opts(20),
        )
        .await;
    assert_eq!(o.error.as_ref().unwrap().ename, "NameError");
    let view = k
        .inspect_state(&StateQuery {
            names: vec![
                "print".into(),
                "totl".into(),
                "items".into(),
                "total".into(),
            ],
            missing_name: Some("totl".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(view.close_matches[0].candidates[0], "total");
    assert_eq!(view.missing, ["totl"]);
    let items = view.variables.iter().find(|v| v.name == "items").unwrap();
    assert_eq!((items.type_name.as_str(), items.len), ("list", Some(3)));
    let total = view.variables.iter().find(|v| v.name == "total").unwrap();
    assert_eq!(total.value.as_deref(), Some("10"));

    let o = k.execute("df.colum", &opts(10)).await;
    assert_eq!(o.error.as_ref().unwrap().ename, "AttributeError");
    let view = k
        .inspect_state(&StateQuery {
            names: retrace::kernel::names_in_line("df.colum"),
            missing_attribute: Some("colum".into()),
            owner: Some("df".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let m = &view.close_matches[0];
    assert_eq!(m.kind, "attribute");
    assert!(m.candidates.contains(&"columns".to_string()), "{m:?}");
    assert!(m.candidates.contains(&"column_a".to_string()), "{m:?}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn state_view_of_hostile_objects_returns_promptly() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute(
            "import time\nclass H:\n    def __repr__(self):\n        time.sleep(3600)\n    def __getattr__(self, n):\n        time.sleep(3600)\n    def __dir__(self):\n        time.sleep(3600)\n    @property\n    def shape(self):\n        time.sleep(3600)\n    def __len__(self):\n        time.sleep(3600)\nh = H()\nh.missing_thing",
            &opts(5),
        )
        .await;
    assert_eq!(
        o.verdict,
        Verdict::TimeoutWall,
        "__getattr__ hangs the cell itself"
    );
    let view = k
        .inspect_state(&StateQuery {
            names: vec!["h".into()],
            missing_attribute: Some("shap".into()),
            owner: Some("h".into()),
            timeout: Duration::from_secs(10),
            ..Default::default()
        })
        .await
        .expect("a view, not a hang");
    let h = &view.variables[0];
    assert_eq!(h.type_name, "__main__.H");
    assert!(h.len.is_none() && h.shape.is_none() && h.value.is_none());
    assert!(view.close_matches[0]
        .candidates
        .contains(&"shape".to_string()));
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn state_inspection_times_out_behind_a_busy_kernel() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    // Code that patches a genuine class the inspector reads (deliberately
    // hostile; a rebound inspector would be put back by the reader) can make
    // it hang; the query still ends at its deadline.
    let o = k
        .execute(
            "import time, pandas as pd\nx = pd.DataFrame({'a': [1]})\npd.DataFrame.shape = property(lambda self: time.sleep(3600))",
            &opts(20),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok);
    let err = k
        .inspect_state(&StateQuery {
            names: vec!["x".into()],
            timeout: Duration::from_secs(2),
            ..Default::default()
        })
        .await
        .expect_err("replaced by the cell: times out");
    assert!(matches!(err, KernelError::StateTimeout(_)), "{err}");
    // The interrupt freed the kernel; it works as before.
    let o = k.execute("print('alive')", &opts(10)).await;
    assert_eq!(o.stdout, "alive\n");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sympy_expressions_are_read_as_their_srepr() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute(
            "import sympy as sp\nfrom sympy import *\nx = sp.Symbol('x')",
            &opts(60),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    // Text only: a tree has no JSON value.
    let cases: &[(&str, &str, &str)] = &[
        (
            "answer = 3*sqrt(13)",
            "Mul(Integer(3), Pow(Integer(13), Rational(1, 2)))",
            "sympy.core.mul.Mul",
        ),
        ("answer = pi/2", "Mul(Rational(1, 2), pi)", "sympy.core.mul.Mul"),
        (
            "answer = -Rational(14, 3)*pi",
            "Mul(Integer(-1), Rational(14, 3), pi)",
            "sympy.core.mul.Mul",
        ),
        ("answer = x", "Symbol('x')", "sympy.core.symbol.Symbol"),
        (
            "answer = Symbol('n', positive=True)",
            "Symbol('n', positive=True)",
            "sympy.core.symbol.Symbol",
        ),
        (
            "answer = Interval(0, 1, True, False)",
            "Interval(Integer(0), Integer(1), true, false)",
            "sympy.sets.sets.Interval",
        ),
        (
            "answer = FiniteSet(1, 2)",
            "FiniteSet(Integer(1), Integer(2))",
            "sympy.sets.sets.FiniteSet",
        ),
        (
            "answer = Eq(x, 5)",
            "Equality(Symbol('x'), Integer(5))",
            "sympy.core.relational.Equality",
        ),
        (
            "answer = Tuple(3, pi/2)",
            "Tuple(Integer(3), Mul(Rational(1, 2), pi))",
            "sympy.core.containers.Tuple",
        ),
        (
            "answer = ImmutableMatrix([[1, 2], [3, 4]])",
            "ImmutableDenseMatrix([[Integer(1), Integer(2)], [Integer(3), Integer(4)]])",
            "sympy.matrices.immutable.ImmutableDenseMatrix",
        ),
        (
            "answer = Matrix([[1, 2], [3, 4]])",
            "MutableDenseMatrix([[Integer(1), Integer(2)], [Integer(3), Integer(4)]])",
            "sympy.matrices.dense.MutableDenseMatrix",
        ),
        (
            "answer = Matrix([[Rational(1, 2), sqrt(2)], [x, 2.5]])",
            "MutableDenseMatrix([[Rational(1, 2), Pow(Integer(2), Rational(1, 2))], [Symbol('x'), Float('2.5', precision=53)]])",
            "sympy.matrices.dense.MutableDenseMatrix",
        ),
        // The terms of an Add in the order sympy keeps them (`args`).
        (
            "answer = sqrt(2) + I",
            "Add(I, Pow(Integer(2), Rational(1, 2)))",
            "sympy.core.add.Add",
        ),
        ("answer = oo", "oo", "sympy.core.numbers.Infinity"),
        ("answer = S.EmptySet", "EmptySet", "sympy.sets.sets.EmptySet"),
    ];
    for (code, text, type_name) in cases {
        let a = answer_of(&mut k, code).await;
        assert_eq!(a.unsupported, None, "{code}: {a:?}");
        assert_eq!(a.value, *text, "{code}");
        assert_eq!(a.json, Some(json!(null)), "{code}");
        assert_eq!(a.type_name.as_deref(), Some(*type_name), "{code}");
        assert_eq!(a.rule, AnswerRule::AnswerVariable);
    }
    // Inside plain containers, through the usual recursion.
    let a = answer_of(&mut k, "answer = (3, pi/2)").await;
    assert_eq!(a.value, "(3, Mul(Rational(1, 2), pi))");
    assert_eq!(a.json, Some(json!([3, null])));
    let a = answer_of(&mut k, "answer = {'r': sqrt(2), 'n': Integer(4)}").await;
    assert_eq!(a.value, "{'r': Pow(Integer(2), Rational(1, 2)), 'n': 4}");
    // A number alone stays a plain number, singletons included.
    for (code, text, value) in [
        ("answer = Rational(14, 3)", "14/3", json!(14.0 / 3.0)),
        ("answer = Rational(1, 2)", "1/2", json!(0.5)),
        ("answer = Integer(1)", "1", json!(1)),
        ("answer = Integer(0)", "0", json!(0)),
        ("answer = Integer(-1)", "-1", json!(-1)),
    ] {
        let a = answer_of(&mut k, code).await;
        assert_eq!(
            (a.value.as_str(), a.json.as_ref()),
            (text, Some(&value)),
            "{code}"
        );
    }
    // The last expression's value is read the same way.
    let o = k.execute("sqrt(8)", &opts(10)).await;
    let a = o.answer.unwrap();
    assert_eq!(a.rule, AnswerRule::LastResult);
    assert_eq!(a.value, "Mul(Integer(2), Pow(Integer(2), Rational(1, 2)))");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sympy_trees_match_sympys_own_srepr() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let exprs = [
        "3*sqrt(13)",
        "-3*sqrt(2)/2",
        "pi/2",
        "2*pi/3",
        "Rational(5, 2)*x**2",
        "exp(2)",
        "log(3)/2",
        "Interval.Ropen(0, oo)",
        "Union(Interval(0, 1), Interval(2, 3))",
        "FiniteSet(-1, Rational(1, 2), 3)",
        "Eq(x, 5)",
        "Ne(x, 1)",
        "And(x > 1, x < 2)",
        "Tuple(3, pi/2)",
        "ImmutableMatrix([[1, 2], [3, 4]])",
        "Matrix([[1, x], [sqrt(3), -2]])",
        "Matrix(0, 3, [])",
        "Float(2.5)*x",
        "Float(-0.1)*x",
        "Float('0.1', 30)*x",
        "Float(1e300)*x",
        "Abs(x) + 1",
        "sin(x)",
        "Lambda(x, x**2)",
        "Piecewise((x, x > 0), (0, True))",
        "Integral(x, (x, 0, 1))",
        "ImageSet(Lambda(x, x**2), S.Integers)",
        "-oo*x",
        "S.Reals",
        "zoo",
        "E + EulerGamma",
    ];
    let o = k
        .execute(
            &format!(
                "import sympy as sp\nfrom sympy import *\nx = sp.Symbol('x')\nexprs = [{}]\n\
                 ns = dict(sp.__dict__, ExprCondPair=sp.functions.elementary.piecewise.ExprCondPair)",
                exprs.join(", ")
            ),
            &opts(60),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    let mut same = 0;
    for (i, e) in exprs.iter().enumerate() {
        let a = answer_of(&mut k, &format!("answer = exprs[{i}]")).await;
        assert_eq!(a.unsupported, None, "{e}: {a:?}");
        let o = k
            .execute(
                &format!(
                    "text = {:?}\nprint(sp.srepr(exprs[{i}]) == text, eval(text, ns) == exprs[{i}], sp.srepr(exprs[{i}]))",
                    a.value
                ),
                &opts(20),
            )
            .await;
        // Every text is sympy code for the same expression...
        assert!(
            o.stdout.contains(" True "),
            "{e}: {} vs {}",
            a.value,
            o.stdout
        );
        if o.stdout.starts_with("True ") {
            same += 1;
        } else {
            // ... and where srepr differs, only in the order it prints an
            // Add's terms in.
            assert!(a.value.contains("Add("), "{e}: {} vs {}", a.value, o.stdout);
        }
    }
    assert!(same >= exprs.len() - 2, "{same} of {}", exprs.len());
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_sympy_values_are_unsupported_without_running_their_code() {
    if common::lacks_root() {
        return;
    }
    let mut k = kernel().await;
    let o = k
        .execute(
            "import sympy as sp\nx = sp.Symbol('x')\n\
             class Hostile(sp.Expr):\n    def __repr__(self):\n        print('RAN')\n        while True: pass\n    __str__ = __repr__\n    def _sympyrepr(self, p):\n        print('RAN')\n        while True: pass\n\
             class Disguised(sp.Symbol):\n    def __new__(cls):\n        return sp.Symbol.__new__(cls, 'y')\n    def __repr__(self):\n        print('RAN')\n        while True: pass",
            &opts(60),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    for (code, type_name) in [
        ("answer = Hostile()", "__main__.Hostile"),
        (
            "answer = sp.Add(x, Hostile(), evaluate=False)",
            "__main__.Hostile",
        ),
        ("answer = (1, sp.pi, Hostile())", "__main__.Hostile"),
        ("answer = Disguised()", "__main__.Disguised"),
        ("answer = sp.Tuple(1, Disguised())", "__main__.Disguised"),
    ] {
        let o = k.execute(code, &opts(10)).await;
        assert_eq!(o.verdict, Verdict::Ok, "{code}: {o:?}");
        assert!(!o.stdout.contains("RAN"), "{code}: {o:?}");
        let a = o.answer.unwrap();
        let (t, reason) = unsupported(&a);
        assert_eq!(t, type_name, "{code}");
        assert!(reason.contains("not a plain value"), "{code}: {reason}");
    }
    // An `_args` replaced by something that is not a tuple is not read.
    let o = k
        .execute(
            "e = x + 1\nsaved = sp.Basic.__dict__['_args']\n\
             sp.Basic._args = property(lambda self: print('RAN') or ())\nanswer = e",
            &opts(10),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(!o.stdout.contains("RAN"), "{o:?}");
    let a = o.answer.unwrap();
    assert_eq!(unsupported(&a).0, "sympy.core.add.Add");
    let a = answer_of(&mut k, "sp.Basic._args = saved\nanswer = e").await;
    assert_eq!(a.value, "Add(Integer(1), Symbol('x'))");

    // A huge tree (2**20 nodes, shared) and a deep one are refused promptly.
    let o = k
        .execute(
            "e = x\nfor _ in range(20):\n    e = sp.Add(e, e, evaluate=False)\nhuge = e\n\
             e = x\nfor _ in range(100000):\n    e = sp.Pow(e, 2, evaluate=False)\ndeep = e",
            &opts(60),
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    // Each read is one cell under its time limit (`answer_of`): a reader
    // that walked the whole tree would end as a timeout, not an answer.
    let a = answer_of(&mut k, "answer = huge").await;
    assert!(unsupported(&a).1.starts_with("too large"), "{a:?}");
    let a = answer_of(&mut k, "answer = deep").await;
    assert!(unsupported(&a).1.contains("nested deeper"), "{a:?}");
    let a = answer_of(&mut k, "answer = [deep]").await;
    assert!(unsupported(&a).1.contains("nested deeper"), "{a:?}");
    let a = answer_of(&mut k, "answer = sp.sqrt(2)").await;
    assert_eq!(a.value, "Pow(Integer(2), Rational(1, 2))");
    k.shutdown().await;
}
