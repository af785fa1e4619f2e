//! The benign corpus (`datasets/benign`): legitimate public notebooks run
//! confined and unconfined; CI requires that confinement changes no cell
//! that succeeds unconfined. Needs root, like the hostile corpus.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use retrace::conformance::check::benign::{self, CellStatus, Notebook};
use retrace::conformance::check::{self, CheckConfig};
use retrace::conformance::corpus;
use retrace::kernel::KernelStart;
use retrace::pyenv::ImageName;
use retrace::sandbox::SandboxLimits;

use crate::common::{self, retrace, Ran};

fn benign_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/benign")
}

#[test]
fn benign_corpus_files_parse_and_name_their_sources() {
    let notebooks: Vec<Notebook> =
        corpus::load_entries(&[benign_dir()]).expect("the shipped benign corpus loads");
    assert!(notebooks.len() >= 25, "only {} notebooks", notebooks.len());
    let cells: usize = notebooks.iter().map(|n| n.cells.len()).sum();
    assert!(cells >= 300, "only {cells} cells");
    let readme = std::fs::read_to_string(benign_dir().join("README.md")).unwrap();
    for nb in &notebooks {
        let file = nb.file.file_stem().unwrap().to_string_lossy();
        assert_eq!(file, nb.id, "file name and id differ");
        assert!(
            readme.contains(&nb.source.repository) && readme.contains(&nb.source.commit),
            "{}: its source {} at {} is not in datasets/benign/README.md",
            nb.id,
            nb.source.repository,
            nb.source.commit
        );
    }
    // Every package the issue names is used by some cell.
    for package in [
        "numpy",
        "pandas",
        "matplotlib",
        "scipy",
        "sympy",
        "sklearn",
        "statsmodels",
        "seaborn",
    ] {
        let used = notebooks.iter().flat_map(|n| &n.cells).any(|c| {
            c.contains(&format!("import {package}")) || c.contains(&format!("from {package}"))
        });
        assert!(used, "no cell imports {package}");
    }
}

/// The whole benign corpus on the default (zygote) kernels: no cell that
/// succeeds unconfined may fail or show something else confined.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn benign_corpus_has_no_false_positive() {
    if common::lacks_root() {
        return;
    }
    // Not beside a hostile corpus run: each would load the other's machine.
    let _alone = super::ONE_CORPUS.lock().await;
    let notebooks: Vec<Notebook> =
        corpus::load_entries(&[benign_dir()]).expect("the shipped benign corpus loads");
    // Notebooks are not model cells: `%timeit` alone runs for seconds, and
    // on a loaded CI machine a 10 s wall limit would kill either side at
    // random. The limits compared here are the jail's resources, not time.
    let limits = SandboxLimits {
        timeout: std::time::Duration::from_secs(60),
        cpu_time: std::time::Duration::from_secs(60),
        ..SandboxLimits::default()
    };
    let config = CheckConfig {
        limits,
        init_exe: PathBuf::from(env!("CARGO_BIN_EXE_retrace")),
        spec: common::spec(ImageName::Fat),
        jobs: 2,
        kernel_start: KernelStart::Zygote,
        gateway: None,
    };
    let progress: Arc<dyn Fn(&check::CaseResult) + Send + Sync> =
        Arc::new(|r| eprintln!("{}", check::row(r, 36)));
    let report = benign::run(&notebooks, &config, progress)
        .await
        .unwrap_or_else(|e| panic!("confinement must be available to CI (running as root): {e}"));
    let table = check::table(&report.results);
    let summary = check::summary_line(&report);
    println!("{table}{summary}");
    assert_eq!(report.summary.total, notebooks.len());
    let cells = report.summary.cells.expect("cell counts");
    assert_eq!(
        cells.cells,
        notebooks.iter().map(|n| n.cells.len()).sum::<usize>()
    );
    assert_eq!(
        (report.summary.failed, cells.differs),
        (0, 0),
        "false positives on legitimate notebooks:\n{table}{summary}"
    );
    // Most of the corpus runs, and runs identically: a check where every
    // cell failed on both sides would prove nothing.
    assert!(cells.same * 10 >= cells.cells * 8, "{summary}");
}

const SMALL: &str = r#"
id = "small"
description = "a cell confinement changes, one that varies, one that fails anyway"
cells = [
    "import os, random",
    "print('root:', os.geteuid() == 0)",
    "print(random.random())",
    "1 / 0",
    "print('after')",
]
[source]
repository = "example/none"
path = "small.ipynb"
commit = "0000000000000000000000000000000000000000"
licence = "CC0-1.0"
"#;

/// The check fails on a cell confinement changes (the kernel's user is not
/// root confined), names it with both sides, and neither fails on text
/// that varies between any two runs nor on a cell that fails unconfined.
#[test]
fn benign_check_fails_on_a_difference_and_names_the_cell() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), SMALL).unwrap();
    let json = dir.path().join("out.json");
    let junit = dir.path().join("out.xml");
    let arg = |p: &Path| p.to_string_lossy().to_string();
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace([
        "sandbox",
        "check",
        "--benign",
        "--corpus",
        &arg(dir.path()),
        "--json",
        &arg(&json),
        "--junit",
        &arg(&junit),
    ])
    .image(ImageName::Fat)
    .run();
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
    assert!(
        stdout.contains(
            "cell 1 (`print('root:', os.geteuid() == 0)`): stdout differs: unconfined \"root: True\" vs confined \"root: False\""
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("~ cell 3: fails unconfined too: error (ZeroDivisionError"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cells: 5 compared, 2 same, 1 varied between unconfined runs too, 1 failed unconfined too, 1 differ"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let nb = &report["results"][0];
    assert_eq!(nb["pass"], false);
    assert_eq!(nb["benign"]["second_run"], true);
    let status: Vec<&str> = nb["benign"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        status,
        ["same", "differs", "varies", "fails_unconfined", "same"]
    );
    assert_eq!(report["summary"]["cells"]["differs"], 1);
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("name=\"small\""), "{junit}");
    assert!(junit.contains("<failure"), "{junit}");
    // The serde names are what the JSON says.
    assert_eq!(
        serde_json::to_value(CellStatus::FailsUnconfined).unwrap(),
        "fails_unconfined"
    );
}
