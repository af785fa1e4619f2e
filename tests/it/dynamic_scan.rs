//! The `dynamic` strategy's decision half against the real slim image's
//! interpreter: install lines and imports found by Python's own parser,
//! install lines neutralised, requests decided by the compiled-in allowlist.

use crate::common;

use retrace::pyenv::dynamic::{
    Allowlist, CellScan, CellScanner, Decision, Denial, RequestSource, ScanError,
};
use retrace::pyenv::ImageName;

/// Scans `cell` in the scanner's own jail; `None` when the test is skipped
/// for lack of root. The scan's directories are gone afterwards.
async fn scan(cell: &str) -> Option<Result<CellScan, ScanError>> {
    let sandbox = common::confined()?;
    let work = tempfile::tempdir().unwrap();
    let scanner = CellScanner::new(
        common::image(ImageName::Slim),
        sandbox,
        work.path().to_path_buf(),
    );
    let found = scanner.scan(cell).await;
    let left: Vec<_> = std::fs::read_dir(work.path()).unwrap().collect();
    assert!(left.is_empty(), "the scan left {left:?}");
    Some(found)
}

#[tokio::test(flavor = "multi_thread")]
async fn install_lines_are_found_neutralised_and_decided() {
    let cell = "import numpy as np\n\
                %pip install -q scipy\n\
                !pip install scipyy\n\
                pip install git+https://example.invalid/x.git\n\
                def f():\n    !python -m pip install sympy==1.14.0\n    return 1\n\
                from sklearn.linear_model import LinearRegression\n\
                x = __import__('networkx')\n";
    let Some(found) = scan(cell).await else {
        return;
    };
    let found = found.unwrap();
    assert_eq!(found.syntax_error, None);
    let lines: Vec<u32> = found.installs.iter().map(|i| i.line).collect();
    assert_eq!(lines, [2, 3, 4, 6]);

    // Every install line is gone from what the kernel runs, in place.
    let code: Vec<&str> = found.code.lines().collect();
    assert_eq!(code.len(), cell.lines().count());
    for i in [1, 2, 3] {
        assert!(code[i].starts_with("pass"), "{}", code[i]);
    }
    assert!(code[5].starts_with("    pass"), "{}", code[5]);
    assert!(!found.code.contains("pip "), "{}", found.code);

    let modules: Vec<&str> = found.imports.iter().map(|i| i.module.as_str()).collect();
    assert_eq!(modules, ["numpy", "sklearn", "networkx"]);

    let allowlist = Allowlist::embedded().unwrap();
    let decisions: Vec<Decision> = found
        .installs
        .iter()
        .flat_map(|i| i.requests())
        .map(|r| allowlist.decide(&r))
        .collect();
    assert_eq!(decisions.len(), 4);
    assert!(decisions[0].is_allowed(), "{:?}", decisions[0]);
    assert!(matches!(
        &decisions[1],
        Decision::Denied { denial: Denial::LikelyTyposquat { of }, .. } if of == "scipy"
    ));
    assert!(matches!(
        &decisions[2],
        Decision::Denied {
            denial: Denial::UnsupportedSpec,
            ..
        }
    ));
    match &decisions[3] {
        Decision::Allowed {
            request, version, ..
        } => {
            assert_eq!(version, "1.14.0");
            assert_eq!(request.source, RequestSource::ExplicitLine { line: 6 });
        }
        other => panic!("{other:?}"),
    }
    // Imports decide like missing modules: sklearn maps to scikit-learn.
    let sklearn = allowlist.decide(&found.imports[1].request());
    assert!(
        matches!(&sklearn, Decision::Allowed { distribution, .. } if distribution == "scikit-learn")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_python_keeps_what_was_found_and_says_why() {
    let Some(found) = scan("import numpy\npip install sympy\ndef (:\n").await else {
        return;
    };
    let found = found.unwrap();
    assert_eq!(found.installs.len(), 1);
    assert_eq!(found.installs[0].line, 2);
    assert!(found.code.lines().nth(1).unwrap().starts_with("pass"));
    let error = found.syntax_error.expect("a syntax error");
    assert!(error.contains("line 3"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cell_built_to_exhaust_the_parser_is_stopped_not_waited_for() {
    // Ten million additions in one expression: the scanner's parser runs
    // out of its jail's memory (or time), and the scan fails with a reason
    // instead of taking the harness's memory or hanging.
    let cell = format!("x = {}1\n", "1+".repeat(10_000_000));
    let Some(found) = scan(&cell).await else {
        return;
    };
    let err = found.unwrap_err();
    let text = err.to_string();
    eprintln!("scan error: {text}");
    assert!(
        text.contains("cell scanner"),
        "the error names the scanner: {text}"
    );
}
