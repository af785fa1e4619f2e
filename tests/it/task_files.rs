//! Task files on their way into real kernels: opened with the kernel
//! user's rights, never through a link planted after the load, and never
//! run in place of the kernel's own modules while it starts (cold or
//! forked by the zygote); once started, the working directory is
//! importable as in any notebook.

use crate::common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use retrace::kernel::{Kernel, KernelError, KernelOptions, KernelSpec, KernelStart, StartPath};
use retrace::pyenv::ImageName;
use retrace::sandbox::{Unconfined, Verdict};
use retrace::task::load::{load_suite, SUITES};
use retrace::util::input_file::{open_task_file, InputFileError, ReadAs};

use common::exec_opts as opts;

fn spec_with(files: Vec<PathBuf>) -> Arc<KernelSpec> {
    let mut spec = KernelSpec::new(
        common::image(ImageName::Fat),
        retrace::kernel::default_kernel_root(),
    );
    spec.files = files;
    Arc::new(spec)
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A folder only root may enter, as root's home is.
fn private_dir() -> tempfile::TempDir {
    let dir = common::outside_tmp();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

async fn started(spec: Arc<KernelSpec>) -> Result<Kernel, KernelError> {
    let sandbox = common::sandbox();
    Kernel::start(spec, sandbox.as_ref(), KernelOptions::default()).await
}

#[test]
fn task_files_open_with_the_kernel_users_rights_only() {
    if common::lacks_root() {
        return;
    }
    // Under a private folder (as root's home is), which the kernel's user
    // could not walk: only the file's own permissions count.
    let dir = private_dir();
    let readable = dir.path().join("open.csv");
    let private = dir.path().join("private.csv");
    let group = dir.path().join("group.csv");
    write(&readable, "x", 0o644);
    write(&private, "secret", 0o600);
    // Root's group may read it; the kernel has no supplementary groups.
    write(&group, "secret", 0o640);
    let user = ReadAs::User {
        uid: 1_900_999_999,
        gid: 1_900_999_999,
    };
    let read = |path: &Path, read_as| -> Result<String, InputFileError> {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_task_file(path, 10, read_as)?, &mut text)?;
        Ok(text)
    };
    assert_eq!(read(&readable, user).unwrap(), "x");
    for path in [&private, &group] {
        match read(path, user) {
            Err(InputFileError::NotForKernel {
                uid: 1_900_999_999, ..
            }) => {}
            other => panic!("{path:?}: {other:?}"),
        }
    }
    // The calling thread's rights are untouched.
    assert_eq!(read(&private, ReadAs::Harness).unwrap(), "secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confined_kernel_gets_only_what_its_user_may_read() {
    let Some(sandbox) = common::confined() else {
        return;
    };
    let dir = private_dir();
    let open = dir.path().join("open.csv");
    let private = dir.path().join("private.csv");
    write(&open, "a\n1\n", 0o644);
    write(&private, "host secret\n", 0o600);

    // A readable file under a private folder is copied.
    let mut k = Kernel::start(
        spec_with(vec![open.clone()]),
        sandbox.as_ref(),
        KernelOptions::default(),
    )
    .await
    .expect("kernel starts");
    let read = k.execute("print(open('open.csv').read())", &opts(30)).await;
    assert_eq!(
        (read.verdict, read.stdout.as_str()),
        (Verdict::Ok, "a\n1\n\n")
    );
    k.shutdown().await;

    // A file root may read but the kernel's user may not is refused.
    let err = started(spec_with(vec![open, private.clone()]))
        .await
        .err()
        .expect("the private file is refused");
    match &err {
        KernelError::TaskFile {
            file,
            source: InputFileError::NotForKernel { .. },
        } => assert_eq!(file, &private),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("chmod a+r"), "{err}");
    assert!(!err.to_string().contains("host secret"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unconfined_kernel_reads_as_the_harness() {
    if common::lacks_root() {
        return;
    }
    let dir = private_dir();
    let private = dir.path().join("mine.csv");
    write(&private, "the user's own\n", 0o600);
    let mut k = Kernel::start(
        spec_with(vec![private]),
        &Unconfined,
        KernelOptions::default(),
    )
    .await
    .expect("kernel starts");
    let read = k.execute("print(open('mine.csv').read())", &opts(30)).await;
    assert_eq!(read.stdout, "the user's own\n\n", "{read:?}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_link_planted_after_the_load_is_not_followed() {
    if common::lacks_root() {
        return;
    }
    let dir = common::outside_tmp();
    let secret = dir.path().join("secret.txt");
    write(&secret, "host secret\n", 0o644);
    std::fs::create_dir(dir.path().join("real")).unwrap();
    write(&dir.path().join("real/data.csv"), "a\n", 0o644);
    // The loader gave `set/data.csv` with `set` a folder; it became a link.
    symlink(dir.path().join("real"), dir.path().join("set")).unwrap();
    symlink(&secret, dir.path().join("real/leak.csv")).unwrap();
    for (file, at) in [
        (dir.path().join("set/data.csv"), dir.path().join("set")),
        (
            dir.path().join("real/leak.csv"),
            dir.path().join("real/leak.csv"),
        ),
    ] {
        let err = started(spec_with(vec![file.clone()]))
            .await
            .err()
            .expect("refused");
        match err {
            KernelError::TaskFile {
                file: f,
                source: InputFileError::Link { at: link },
            } => assert_eq!((f, link), (file, at)),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_builtin_suites_files_reach_a_confined_kernel_from_a_private_home() {
    let Some(sandbox) = common::confined() else {
        return;
    };
    // As with the default $RETRACE_HOME under root's 0700 home.
    let home = private_dir();
    let datasets = retrace::util::builtin::datasets(home.path()).unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for suite in SUITES {
        for task in load_suite(suite, &datasets).unwrap() {
            for f in task.files {
                if !files.iter().any(|g| g.file_name() == f.file_name()) {
                    files.push(f);
                }
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    let mut k = Kernel::start(
        spec_with(files.clone()),
        sandbox.as_ref(),
        KernelOptions::default(),
    )
    .await
    .expect("kernel starts with every built-in task file");
    let listed = k
        .execute("import os\nprint(len(os.listdir('.')))", &opts(30))
        .await;
    assert_eq!(listed.stdout.trim(), files.len().to_string(), "{listed:?}");
    k.shutdown().await;
}

/// Task files named like modules a kernel imports while it starts: each
/// leaves a marker and raises if it ever runs.
fn shadowing_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for module in [
        "types",
        "enum",
        "json",
        "ipykernel_launcher",
        "ipykernel",
        "IPython",
        "traitlets",
        "zmq",
    ] {
        let path = dir.join(format!("{module}.py"));
        let code = format!(
            "open('hijacked-{module}', 'w').close()\nraise RuntimeError('{module}.py ran')\n"
        );
        write(&path, &code, 0o644);
        files.push(path);
    }
    let helpers = dir.join("helpers.py");
    write(&helpers, "VALUE = 42\n", 0o644);
    files.push(helpers);
    files
}

/// The kernel's own modules ran, the task's did not, and the working
/// directory is importable once the kernel has started.
const AFTER_START: &str = r#"
import os, subprocess, sys, types
import helpers
print(sorted(f for f in os.listdir('.') if f.startswith('hijacked')))
print(os.path.dirname(types.__file__) != os.getcwd(), helpers.VALUE)
print('PYTHONSAFEPATH' in os.environ)
print(subprocess.run([sys.executable, '-c', 'import sys; print(sys.flags.safe_path)'],
                     capture_output=True, text=True).stdout.strip())
"#;

async fn modules_are_not_shadowed(start: KernelStart) {
    let Some(sandbox) = common::confined() else {
        return;
    };
    let dir = common::outside_tmp();
    let options = KernelOptions {
        start,
        ..KernelOptions::default()
    };
    let mut k = Kernel::start(
        spec_with(shadowing_files(dir.path())),
        sandbox.as_ref(),
        options,
    )
    .await
    .expect("the kernel starts with its own modules");
    if start == KernelStart::Zygote {
        assert_eq!(k.start_path(), &StartPath::Zygote, "forked, not cold");
    }
    let after = k.execute(AFTER_START, &opts(60)).await;
    assert_eq!(after.verdict, Verdict::Ok, "{after:?}");
    assert_eq!(after.stdout, "[]\nTrue 42\nFalse\nFalse\n", "{after:?}");
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn task_files_named_like_modules_never_run_at_a_cold_start() {
    modules_are_not_shadowed(KernelStart::Cold).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn task_files_named_like_modules_never_run_at_a_zygote_start() {
    modules_are_not_shadowed(KernelStart::Zygote).await;
}
