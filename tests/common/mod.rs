//! Shared setup for integration tests: real images, real kernels.
#![allow(dead_code)]

pub mod apt;
pub mod chromium;
pub mod cli;
pub mod confinement;
pub mod eee;
pub mod enterprise_gateway;
pub mod footprint;
pub mod gateway;
pub mod host;
pub mod hosts;
pub mod http;
pub mod inspect;
pub mod run;
pub mod scripted_http;
pub mod sshd;
pub mod static_http;
pub mod venv;

// Not every test binary that includes this module runs the CLI.
#[allow(unused_imports)]
pub use cli::{retrace, Ran};

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use retrace::pyenv::dynamic::Pin;
use sha2::{Digest, Sha256};

use retrace::kernel::{default_kernel_root, ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::{Image, ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox};

/// The fat image, built on first use into `$RETRACE_HOME` (shared across
/// test runs so it is built once per machine).
pub fn image(name: ImageName) -> Image {
    static FAT: OnceLock<Image> = OnceLock::new();
    static SLIM: OnceLock<Image> = OnceLock::new();
    static CHECKER: OnceLock<Image> = OnceLock::new();
    let cell = match name {
        ImageName::Fat => &FAT,
        ImageName::Slim => &SLIM,
        ImageName::Checker => &CHECKER,
    };
    cell.get_or_init(|| {
        ImageStore::from_env()
            .ensure(name, false)
            .unwrap_or_else(|e| panic!("building image {name}: {e}"))
    })
    .clone()
}

pub fn spec(name: ImageName) -> Arc<KernelSpec> {
    Arc::new(KernelSpec::new(image(name), default_kernel_root()))
}

/// A spec whose kernels live under `root`, so a test can check that
/// nothing is left there.
pub fn spec_in(name: ImageName, root: &std::path::Path) -> Arc<KernelSpec> {
    Arc::new(KernelSpec::new(image(name), root.to_path_buf()))
}

/// Confined kernels, as users run them (each kernel's limits come with its
/// `KernelOptions`). Needs root (CI runs as root).
pub fn sandbox() -> Arc<dyn Sandbox> {
    let init = std::path::PathBuf::from(env!("CARGO_BIN_EXE_retrace"));
    match Confined::open(init) {
        Ok(sandbox) => Arc::new(sandbox),
        Err(e) => panic!("these tests run confined kernels and need root: {e}"),
    }
}

/// Whether this test is skipped for want of root (confined kernels need
/// it); in strict runs (CI) it fails instead. First thing in a test:
/// `if common::lacks_root() { return; }`
pub fn lacks_root() -> bool {
    host::lacks(&[host::Need::Root])
}

/// [`sandbox`], or `None` when the test is skipped because it lacks root
/// (see [`host::lacks`]): `let Some(sandbox) = common::confined() else { return };`
pub fn confined() -> Option<Arc<dyn Sandbox>> {
    (!lacks_root()).then(sandbox)
}

/// Processes whose command line mentions `needle` (a kernel id appears in
/// its connection-file path).
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let state = retrace::util::proc::stat(pid).map(|s| s.state);
        if state != Some('Z') && String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `secs` for no process to mention `needle`.
pub fn wait_gone(needle: &str, secs: u64) -> Vec<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A confined kernel of the fat image.
pub async fn fat_kernel(options: KernelOptions) -> Kernel {
    Kernel::start(spec(ImageName::Fat), sandbox().as_ref(), options)
        .await
        .expect("kernel starts")
}

/// Execution options with a wall timeout in seconds.
pub fn exec_opts(timeout_secs: u64) -> ExecOptions {
    ExecOptions {
        timeout: std::time::Duration::from_secs(timeout_secs),
        ..Default::default()
    }
}

/// A temporary directory outside /tmp: a confined process's /tmp is its
/// own, so directories it must see (a wheel directory) live elsewhere.
pub fn outside_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A real wheel file, written with Python's zipfile: `demo_pkg` plus any
/// extra `(path, text)` files at the top of the wheel.
pub fn wheel(dir: &Path, extra: &[(&str, &str)]) -> (PathBuf, Pin) {
    wheel_by(&image(ImageName::Slim).python(), dir, extra)
}

/// [`wheel`], written by `python` (a test with an image of its own).
pub fn wheel_by(python: &Path, dir: &Path, extra: &[(&str, &str)]) -> (PathBuf, Pin) {
    let name = "demo_pkg-1.0-py3-none-any.whl";
    let path = dir.join(name);
    let files: Vec<(String, String)> = [
        ("demo_pkg/__init__.py", "VALUE = 42\n"),
        (
            "demo_pkg-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        ),
        (
            "demo_pkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: retrace-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ]
    .iter()
    .chain(extra)
    .map(|(p, t)| (p.to_string(), t.to_string()))
    .collect();
    let script = r#"
import base64, hashlib, json, sys, zipfile
path, files = sys.argv[1], json.load(sys.stdin)
record = []
with zipfile.ZipFile(path, "w") as z:
    for name, text in files:
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("demo_pkg-1.0.dist-info/RECORD,,")
    z.writestr("demo_pkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    // On stdin: a test's files may be larger than one argument can be.
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    serde_json::to_writer(&mut stdin, &files).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let sha256 = format!("{:x}", Sha256::digest(std::fs::read(&path).unwrap()));
    let pin = Pin {
        name: "demo-pkg".into(),
        version: "1.0".into(),
        sha256,
    };
    (path, pin)
}

/// Waits up to `secs` for `check`, looking every 100 ms; whether it became
/// true.
/// A third of the shipped corpus, copied into `dir`, for the runs that
/// repeat what the whole corpus already checks locally on zygote kernels
/// (`sandbox_corpus`) on another path: every CPU case and every forged end
/// of a cell (the rules the host-side watch of a remote kernel holds, where
/// remote verdicts once differed), and every third case of each other
/// category, sorted by id, so each category runs. Returns the number of
/// cases copied.
pub fn corpus_sample(dir: &Path) -> usize {
    let all = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/hostile");
    let mut names: Vec<String> = std::fs::read_dir(&all)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    std::fs::create_dir_all(dir).unwrap();
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    let mut chosen = 0;
    for name in names {
        let category = name.split('_').next().unwrap_or_default().to_string();
        let index = seen.entry(category.clone()).or_default();
        let keep = category == "cpu" || name.starts_with("jp_forged") || index.is_multiple_of(3);
        *index += 1;
        if keep {
            std::fs::copy(all.join(&name), dir.join(&name)).unwrap();
            chosen += 1;
        }
    }
    chosen
}

pub fn eventually(secs: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
