//! The `dynamic` strategy end to end in real confined slim kernels: a
//! missing import installed through the confined installer and seen by the
//! live kernel without a restart, the cell re-run as an install step; the
//! model's own `%pip install` lines intercepted (never run in the kernel);
//! refused requests ending with verdict `policy_denied` and a message that
//! names what is available; a second kernel served from the store.

use crate::common;

use std::sync::Arc;

use retrace::harness::packages::{Activated, CellRun, Packages};
use retrace::harness::ArmKernels;
use retrace::kernel::{AnyKernel, Kernel, KernelOptions};
use retrace::pyenv::dynamic::DYNAMIC_LOCK;
use retrace::pyenv::dynamic::{Allowlist, Decision, Denial, RequestSource, IMPORT_MAP};
use retrace::pyenv::{ImageName, Strategy};
use retrace::record::{InstallOn, InstallTrigger};
use retrace::sandbox::{SandboxLimits, Verdict};

fn arm() -> ArmKernels {
    let sandbox = common::sandbox();
    ArmKernels::new(
        Strategy::Dynamic,
        common::image(ImageName::Slim),
        1,
        InstallOn::Both,
        &sandbox,
    )
    .unwrap()
}

async fn kernel(arm: &ArmKernels) -> AnyKernel {
    let options = KernelOptions::enforcing(&SandboxLimits::default(), true);
    let kernel = Kernel::start(arm.kernel.clone(), common::sandbox().as_ref(), options)
        .await
        .expect("slim kernel starts");
    kernel.into_any()
}

async fn run(packages: &Packages, kernel: &mut AnyKernel, code: &str) -> CellRun {
    let mut activated = Activated::default();
    packages
        .run_cell(kernel, &mut activated, code, &common::exec_opts(60))
        .await
}

fn answer(run: &CellRun) -> String {
    let a = run.outcome.answer.as_ref().expect("an answer");
    a.value.clone()
}

#[tokio::test]
async fn a_missing_import_is_installed_into_the_live_kernel_and_the_cell_rerun() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let packages = arm.packages.clone().expect("a dynamic arm installs");
    let mut k = kernel(&arm).await;
    // State from before the install survives it: no restart.
    let before = k.execute("x = 41", &common::exec_opts(10)).await;
    assert!(before.succeeded());

    let code = "import scipy.special\nanswer = int(scipy.special.comb(10, 3)) + x - 41";
    let run1 = run(&packages, &mut k, code).await;
    assert!(run1.outcome.succeeded(), "{:?}", run1.outcome.error);
    assert_eq!(answer(&run1), "120");
    assert_eq!(k.restarts(), 0);
    let steps = &run1.steps;
    assert!(!steps.is_empty());
    assert!(steps.iter().all(|s| s.rerun && !s.denied() && !s.failed()));
    let first = &steps[0];
    assert!(matches!(
        &first.trigger,
        InstallTrigger::MissingImport { module } if module == "scipy"
    ));
    let failed = first
        .failed_outcome
        .as_ref()
        .expect("the failed run is kept");
    assert_eq!(
        failed.error.as_ref().map(|e| e.ename.as_str()),
        Some("ModuleNotFoundError")
    );
    let names: Vec<&str> = first.wheels.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["numpy", "scipy"]);
    match &first.decisions[0] {
        Decision::Allowed {
            request,
            distribution,
            version,
            ..
        } => {
            assert_eq!(request.source, RequestSource::MissingImport);
            assert_eq!(distribution, "scipy");
            assert!(!version.is_empty());
        }
        other => panic!("scipy must be allowed: {other:?}"),
    }
    // The kernel never got the network or a writable store.
    let probe = k
        .execute(
            "import os, scipy\n\
             answer = os.access(os.path.dirname(scipy.__file__), os.W_OK)",
            &common::exec_opts(10),
        )
        .await;
    assert_eq!(
        probe.answer.as_ref().map(|a| a.value.as_str()),
        Some("False")
    );
    k.shutdown().await;

    // Another task's kernel: the same packages come from the store.
    let mut k2 = kernel(&arm).await;
    let run2 = run(&packages, &mut k2, "import scipy\nanswer = 1").await;
    assert!(run2.outcome.succeeded());
    assert!(!run2.steps.is_empty());
    assert!(
        run2.steps
            .iter()
            .all(|s| s.store_hit && s.installer_ms == 0.0),
        "{:?}",
        run2.steps
    );
    k2.shutdown().await;
}

#[tokio::test]
async fn pip_install_lines_are_intercepted_and_never_run_in_the_kernel() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let packages = arm.packages.clone().unwrap();
    let mut k = kernel(&arm).await;
    // If the line ran in the kernel, pip would print (and fail offline).
    let code = "%pip install sympy\n\
                !pip install -q networkx\n\
                import sympy, networkx\n\
                answer = int(sympy.Integer(6) * 7)";
    let run = run(&packages, &mut k, code).await;
    assert!(run.outcome.succeeded(), "{:?}", run.outcome.error);
    assert_eq!(answer(&run), "42");
    assert!(!run.outcome.stdout.to_lowercase().contains("pip"));
    assert_eq!(run.steps.len(), 1, "{:?}", run.steps);
    let step = &run.steps[0];
    assert_eq!(step.trigger, InstallTrigger::ExplicitLines);
    assert!(!step.rerun);
    let lines: Vec<u32> = step
        .decisions
        .iter()
        .map(|d| match d {
            Decision::Allowed { request, .. } => match request.source {
                RequestSource::ExplicitLine { line } => line,
                _ => panic!("explicit"),
            },
            other => panic!("allowed: {other:?}"),
        })
        .collect();
    assert_eq!(lines, [1, 2]);
    k.shutdown().await;
}

#[tokio::test]
async fn code_that_only_mentions_pip_runs_as_written() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let packages = arm.packages.clone().unwrap();
    let mut k = kernel(&arm).await;
    let code = "%pip install -q sympy\n\
                s = 'pip install requests'  # !pip install requests\n\
                print(s)\n\
                import sympy\n\
                answer = int(sympy.Integer(6) * 7)";
    let run = run(&packages, &mut k, code).await;
    assert!(run.outcome.succeeded(), "{:?}", run.outcome.error);
    assert_eq!(run.outcome.stdout, "pip install requests\n");
    assert_eq!(answer(&run), "42");
    assert_eq!(run.steps.len(), 1, "{:?}", run.steps);
    assert_eq!(run.steps[0].decisions.len(), 1, "only line 1 asks");
    k.shutdown().await;
}

#[tokio::test]
async fn refused_requests_end_with_policy_denied_and_name_what_is_available() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let packages = arm.packages.clone().unwrap();
    let mut k = kernel(&arm).await;

    // A typosquat in an install line: the cell does not run at all.
    let typo = run(&packages, &mut k, "%pip install scipyy\nanswer = 1").await;
    assert_eq!(typo.outcome.verdict, Verdict::PolicyDenied);
    assert_eq!(typo.outcome.execution_count, None, "the cell must not run");
    let message = typo.outcome.policy.clone().unwrap();
    assert!(message.contains("misspelling of `scipy`"), "{message}");
    assert!(
        message.contains("numpy") && message.contains("pandas"),
        "{message}"
    );
    assert!(matches!(
        &typo.steps[0].decisions[0],
        Decision::Denied { denial: Denial::LikelyTyposquat { of }, .. } if of == "scipy"
    ));
    assert!(typo.steps[0].wheels.is_empty());

    // A hallucinated import: the error stays, the verdict says why.
    let made_up = run(&packages, &mut k, "import quantumstats\nanswer = 1").await;
    assert_eq!(made_up.outcome.verdict, Verdict::PolicyDenied);
    assert!(made_up
        .outcome
        .policy
        .as_deref()
        .unwrap()
        .contains("not on the allowlist"));
    let feedback = retrace::repair::feedback::error_feedback(
        retrace::repair::FeedbackMode::Parsed,
        &made_up.outcome,
        "import quantumstats\nanswer = 1",
        &SandboxLimits::default(),
        4000,
    );
    assert!(
        feedback.error.contains("Packages that can be installed"),
        "{}",
        feedback.error
    );

    // Only a source distribution exists: never built, never installed.
    let lock = format!("{DYNAMIC_LOCK}\n# sdist-only (no wheel for cp311): pycrypto==2.6.1\n");
    let strict = Packages {
        allowlist: Allowlist::parse(&lock, IMPORT_MAP).unwrap(),
        installer: packages.installer.clone(),
        scanner: packages.scanner.clone(),
        install_on: InstallOn::Both,
    };
    let sdist = run(&strict, &mut k, "!pip install pycrypto\nanswer = 1").await;
    assert_eq!(sdist.outcome.verdict, Verdict::PolicyDenied);
    assert!(matches!(
        &sdist.steps[0].decisions[0],
        Decision::Denied {
            denial: Denial::SdistOnly,
            ..
        }
    ));
    assert!(sdist
        .outcome
        .policy
        .as_deref()
        .unwrap()
        .contains("only as source code"));
    k.shutdown().await;
}

#[tokio::test]
async fn install_on_explicit_leaves_missing_imports_alone() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let base = arm.packages.clone().unwrap();
    let explicit_only = Arc::new(Packages {
        allowlist: base.allowlist.clone(),
        installer: base.installer.clone(),
        scanner: base.scanner.clone(),
        install_on: InstallOn::Explicit,
    });
    let mut k = kernel(&arm).await;
    let run = run(&explicit_only, &mut k, "import sympy\nanswer = 1").await;
    assert_eq!(run.outcome.verdict, Verdict::Error);
    assert!(run.steps.is_empty());
    k.shutdown().await;
}

/// A package whose wheel carries a `.pth` that runs code: the installer
/// refuses it after the download, nothing reaches the kernel, and the
/// execution ends as `policy_denied` naming what was found.
#[tokio::test]
async fn a_wheel_refused_after_download_ends_as_policy_denied() {
    if common::lacks_root() {
        return;
    }
    let dir = common::outside_tmp();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let (_, pin) = common::wheel(&wheels, &[("demo_hook.pth", "import os\n")]);
    let lock = format!(
        "# allow demo-pkg: demo-pkg\ndemo-pkg==1.0 --hash=sha256:{}\n",
        pin.sha256
    );
    let installer = retrace::pyenv::dynamic::Installer::new(
        retrace::pyenv::dynamic::PackageStore::new(dir.path().join("packages")),
        common::image(ImageName::Slim),
        common::sandbox(),
        std::time::Duration::from_secs(120),
    )
    .unwrap()
    .with_source(retrace::pyenv::dynamic::IndexSource::local(&wheels));
    let packages = Packages {
        allowlist: Allowlist::parse(&lock, "[modules]\ndemo_pkg = \"demo-pkg\"\n").unwrap(),
        installer: Arc::new(installer),
        scanner: Arc::new(retrace::pyenv::dynamic::CellScanner::new(
            common::image(ImageName::Slim),
            common::sandbox(),
            dir.path().join("scans"),
        )),
        install_on: InstallOn::Both,
    };
    let arm = arm();
    let mut k = kernel(&arm).await;
    let run = run(
        &packages,
        &mut k,
        "import demo_pkg\nanswer = demo_pkg.VALUE",
    )
    .await;
    assert_eq!(run.outcome.verdict, Verdict::PolicyDenied);
    let step = &run.steps[0];
    assert!(step.denied() && !step.failed());
    assert!(!step.findings.is_empty());
    assert!(step.wheels.is_empty());
    let policy = run.outcome.policy.unwrap();
    assert!(policy.contains("demo_hook.pth"), "{policy}");
    assert!(policy.contains("demo-pkg"), "{policy}");
    k.shutdown().await;
}

/// A kernel restarted after a crash is a fresh interpreter: what was
/// installed is given to it again (from the store).
#[tokio::test]
async fn a_restarted_kernel_gets_its_packages_again() {
    if common::lacks_root() {
        return;
    }
    let arm = arm();
    let packages = arm.packages.clone().unwrap();
    let mut k = kernel(&arm).await;
    let mut activated = Activated::default();
    let exec = common::exec_opts(60);
    let first = packages
        .run_cell(&mut k, &mut activated, "import sympy\nanswer = 1", &exec)
        .await;
    assert!(first.outcome.succeeded());
    let crash = packages
        .run_cell(
            &mut k,
            &mut activated,
            "import os\nos.kill(os.getpid(), 9)",
            &exec,
        )
        .await;
    assert!(crash.outcome.state_lost, "{:?}", crash.outcome.verdict);
    assert_eq!(k.restarts(), 1);
    let again = packages
        .run_cell(&mut k, &mut activated, "import sympy\nanswer = 2", &exec)
        .await;
    assert!(again.outcome.succeeded(), "{:?}", again.outcome.error);
    assert!(again.steps.iter().all(|s| s.store_hit && s.rerun));
    k.shutdown().await;
}
