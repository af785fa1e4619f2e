//! The hostile-code corpus against the real confined executor: this is how
//! CI checks that no sandbox limit has regressed. Needs root (cgroups and
//! namespaces); without it the confined tests fail in strict runs (CI,
//! `RETRACE_REQUIRE_ROOT=1`) and are skipped visibly elsewhere.

use crate::common::{self, retrace, Ran};

mod benign;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use retrace::conformance::check::{self, CheckConfig};
use retrace::conformance::corpus;
use retrace::kernel::KernelStart;
use retrace::pyenv::ImageName;
use retrace::sandbox::SandboxLimits;
use strum::IntoEnumIterator;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/hostile")
}

#[test]
fn corpus_files_all_parse_and_cover_every_category() {
    let cases = corpus::load_dirs(&[corpus_dir()]).expect("the shipped corpus loads");
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    for category in corpus::Category::iter() {
        let n = cases.iter().filter(|c| c.category == category).count();
        assert!(n >= 3, "category {category} has only {n} case(s)");
    }
    for case in &cases {
        let file = case.source.file_stem().unwrap().to_string_lossy();
        assert_eq!(file, case.id, "file name and id differ");
    }
}

/// The default start path: every kernel forked from the image's zygote.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_corpus_passes_on_zygote_kernels() {
    corpus_passes(KernelStart::Zygote).await;
}

/// The cold path, which stays selectable and is the zygote's fallback: a
/// third of the corpus (`common::corpus_sample`; every case runs on the
/// cell watch both start paths share, above), every category in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_sample_passes_on_cold_kernels() {
    corpus_passes(KernelStart::Cold).await;
}

/// One whole corpus at a time: two at once would put four hostile cases on
/// the machine together, and their timings are part of what is checked.
pub(crate) static ONE_CORPUS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn corpus_passes(kernel_start: KernelStart) {
    if common::lacks_root() {
        return;
    }
    let _alone = ONE_CORPUS.lock().await;
    let sample = tempfile::tempdir().unwrap();
    let dir = match kernel_start {
        KernelStart::Zygote => corpus_dir(),
        KernelStart::Cold => {
            common::corpus_sample(sample.path());
            sample.path().to_path_buf()
        }
    };
    let cases = corpus::load_dirs(&[dir]).expect("the shipped corpus loads");
    let config = CheckConfig {
        limits: SandboxLimits::default(),
        init_exe: PathBuf::from(env!("CARGO_BIN_EXE_retrace")),
        spec: common::spec(ImageName::Fat),
        jobs: 2,
        kernel_start,
        gateway: None,
    };
    let progress: Arc<dyn Fn(&check::CaseResult) + Send + Sync> =
        Arc::new(|r| eprintln!("{}", check::row(r, 32)));
    let report = check::run(&cases, &config, progress)
        .await
        .unwrap_or_else(|e| panic!("confinement must be available to CI (running as root): {e}"));
    let table = check::table(&report.results);
    let summary = check::summary_line(&report);
    if report.summary.failed == 0 {
        println!("{table}{summary}");
    }
    if let Some(path) = std::env::var_os("RETRACE_SANDBOX_JUNIT") {
        std::fs::write(path, check::junit(&report)).expect("write JUnit");
    }
    assert_eq!(report.summary.total, cases.len());
    assert_eq!(
        report.summary.failed,
        0,
        "sandbox corpus failures ({} kernels):\n{table}{summary}",
        kernel_start.as_str()
    );
    let expected = kernel_start.as_str();
    let other: Vec<String> = report
        .results
        .iter()
        .filter(|r| r.start.as_deref() != Some(expected))
        .map(|r| format!("{}: {:?}", r.id, r.start))
        .collect();
    assert!(
        other.is_empty(),
        "cases whose kernel did not start {expected}: {other:?}"
    );
    // Every case reports the harness's memory, within its bound.
    for r in &report.results {
        let memory = r
            .harness
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no figure of the harness's memory", r.id));
        let bound = r.expectation.harness_bound_mb();
        assert!(
            memory.growth_bytes <= bound * check::MIB,
            "{}: the harness grew {:.1} MiB, bound {bound} MiB",
            r.id,
            memory.growth_mib()
        );
        assert!(memory.peak_bytes >= memory.start_bytes, "{}", r.id);
    }
    let most = report.summary.harness_growth_max_bytes;
    assert!(most.is_some(), "{summary}");
    assert!(
        summary.contains("harness memory: largest growth"),
        "{summary}"
    );
}

const OK_CASE: &str = r#"
id = "user_ok"
category = "false_positive"
description = "prints"
expect = "ok"
code = '''
print(6 * 7)
'''
[limits]
timeout = "5s"
"#;

const ERROR_CASE: &str = r#"
id = "user_div"
category = "crashes"
description = "divides by zero"
expect = "error"
code = "1 / 0"
"#;

const WRONG_CASE: &str = r#"
id = "user_wrong"
category = "memory"
description = "expects the wrong verdict on purpose"
expect = "oom_killed"
code = "x = 1"
"#;

#[test]
fn user_corpus_with_filter_json_and_junit() {
    if common::lacks_root() {
        return;
    }
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(cases.join("user_ok.toml"), OK_CASE).unwrap();
    std::fs::write(cases.join("user_div.toml"), ERROR_CASE).unwrap();
    let json = dir.path().join("out/results.json");
    let junit = dir.path().join("out/junit.xml");
    let cases_arg = cases.to_string_lossy().to_string();
    let json_arg = json.to_string_lossy().to_string();
    let junit_arg = junit.to_string_lossy().to_string();

    // --filter on a category picks one case.
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace([
        "sandbox",
        "check",
        "--corpus",
        &cases_arg,
        "--filter",
        "false_pos",
        "--json",
        &json_arg,
        "--junit",
        &junit_arg,
    ])
    .run();
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], "user_ok");
    assert_eq!(results[0]["got"], "ok");
    assert_eq!(results[0]["pass"], true);
    assert_eq!(results[0]["outcome"]["stdout"], "42\n");
    // The harness's memory during the case: a column, per-case figures in
    // the JSON and the JUnit, and the largest in the summary.
    assert!(stdout.contains("harness MB"), "{stdout}");
    let memory = &results[0]["harness"];
    let (start, peak, growth) = (
        memory["start_bytes"].as_u64().unwrap(),
        memory["peak_bytes"].as_u64().unwrap(),
        memory["growth_bytes"].as_u64().unwrap(),
    );
    assert!(
        start > 0 && peak >= start && growth == peak - start,
        "{memory}"
    );
    assert_eq!(report["summary"]["harness_growth_max_bytes"], growth);
    assert_eq!(report["summary"]["harness_growth_max_case"], "user_ok");
    assert!(stdout.contains("largest growth during a case"), "{stdout}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<testsuite name=\"retrace-sandbox\" tests=\"1\" failures=\"0\""));
    assert!(xml.contains("classname=\"false_positive\" name=\"user_ok\""));
    assert!(xml.contains(" harness +"), "{xml}");

    // --filter on ids; a second corpus holding a wrong expectation
    // makes the run fail with exit code 1 and a JUnit failure.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("user_wrong.toml"), WRONG_CASE).unwrap();
    let other_arg = other.to_string_lossy().to_string();
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = retrace([
        "sandbox", "check", "--corpus", &cases_arg, "--corpus", &other_arg, "--filter", "user_",
        "--junit", &junit_arg, "--jobs", "3",
    ])
    .run();
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("2 passed, 1 failed"), "{stdout}");
    assert!(
        stdout.contains("expected verdict oom_killed but got ok"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"3\" failures=\"1\""), "{xml}");
    assert!(xml.contains("name=\"user_wrong\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"expected verdict oom_killed"),
        "{xml}"
    );
}

const STDOUT_CASE: &str = r#"
id = "user_marker"
category = "network_ipc"
description = "prints one expected marker and misses another"
expect = "ok"
stdout_contains = ["blocked True", "installed False"]
code = "print('blocked True')"
[limits]
timeout = "5s"
"#;

/// `sandbox check` of a corpus holding only `text` as `file`.
fn check_one_case(file: &str, text: &str) -> Ran {
    common::image(ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(file), text).unwrap();
    let arg = dir.path().to_string_lossy().to_string();
    retrace(["sandbox", "check", "--corpus", &arg]).run()
}

#[test]
fn a_missing_stdout_marker_fails_the_case() {
    if common::lacks_root() {
        return;
    }
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = check_one_case("user_marker.toml", STDOUT_CASE);
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
    assert!(
        stdout.contains("expected stdout to contain \"installed False\""),
        "{stdout}"
    );
    // The marker that was printed is not reported.
    assert!(!stdout.contains("contain \"blocked True\""), "{stdout}");
}

/// Signed stream messages at the wire cap: tens of MiB of harness memory,
/// against a bound of 2.
const HEAVY_CASE: &str = r#"
id = "user_heavy"
category = "output"
description = "makes the harness hold more than its bound allows"
expect = "output_limit"
max_harness_mb = 2
code = '''
k = get_ipython().kernel
text = 'x' * ((4 << 20) - 8192)
for _ in range(300):
    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': text}, parent=k.get_parent())
import time
time.sleep(2)
'''
[limits]
timeout = "30s"
"#;

#[test]
fn a_case_over_its_harness_bound_fails() {
    if common::lacks_root() {
        return;
    }
    let Ran {
        code,
        stdout,
        stderr,
        ..
    } = check_one_case("user_heavy.toml", HEAVY_CASE);
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
    // The verdict is right: only the bound fails the case.
    assert!(!stdout.contains("expected verdict"), "{stdout}");
    assert!(
        stdout.contains("the harness's resident memory grew by"),
        "{stdout}"
    );
    assert!(
        stdout.contains("over its bound of 2 MiB (max_harness_mb)"),
        "{stdout}"
    );
}

#[test]
fn malformed_case_is_reported_with_its_file_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.toml"), OK_CASE).unwrap();
    std::fs::write(
        dir.path().join("broken_case.toml"),
        "id = \"x\"\ncode = '''\nprint(1)\n",
    )
    .unwrap();
    let arg = dir.path().to_string_lossy().to_string();
    let Ran { code, stderr, .. } = retrace(["sandbox", "check", "--corpus", &arg]).run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("broken_case.toml"), "{stderr}");

    // A duplicate id names both files.
    std::fs::write(dir.path().join("broken_case.toml"), OK_CASE).unwrap();
    let Ran { code, stderr, .. } = retrace(["sandbox", "check", "--corpus", &arg]).run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("duplicate case id `user_ok`"), "{stderr}");

    // No --corpus and no datasets/hostile here: the built-in corpus is
    // loaded (a filter that matches none of it keeps this quick).
    let Ran { code, stderr, .. } = retrace(["sandbox", "check", "--filter", "no-such-case"])
        .cwd(dir.path())
        .run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no case matches"), "{stderr}");

    // A filter that matches nothing is a usage error, not a green run.
    std::fs::remove_file(dir.path().join("broken_case.toml")).unwrap();
    let Ran { code, stderr, .. } = retrace([
        "sandbox",
        "check",
        "--corpus",
        &arg,
        "--filter",
        "no-such-case",
    ])
    .run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no case matches"), "{stderr}");
}
