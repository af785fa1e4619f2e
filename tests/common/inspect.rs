//! Inspect AI itself, for tests of the Inspect logs retrace exports: its
//! reader (`read_with_inspect`: the Python API and `inspect log dump`) and
//! its log viewer (`view_bundle`: `inspect view bundle`, served with byte
//! ranges and rendered in headless Chromium). Inspect runs from a venv
//! installed from `tests/tools/inspect.lock` on first use
//! (`common::venv`); its scripts are in `tests/tools/`. A tool's failure
//! is a panic with its own output (a Python traceback); what the viewer
//! shows, and its console errors, are the test's to assert.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::chromium::Browser;
use super::static_http::{Served, StaticServer};
use super::venv::{Install, PinnedVenv};

/// The inspect-ai release pinned in `tests/tools/inspect.lock`.
pub const INSPECT_VERSION: &str = "0.3.285";
const LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/inspect.lock");
const READER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/tools/read_inspect_log.py"
);
/// How long the viewer may take to show a page: far above what a loaded
/// machine needs; a page that never settles is read as it is, and the
/// test's assertions say what it lacks.
const SETTLE_LIMIT: Duration = Duration::from_secs(90);
/// The browser's viewport.
const VIEWPORT: (u32, u32) = (1280, 900);

/// The Inspect venv, installed on first use.
pub fn inspect_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        PinnedVenv {
            name: "inspect",
            package: "inspect-ai",
            version: INSPECT_VERSION,
            install: Install::Lock {
                path: LOCK,
                pip_args: &[],
            },
            probe: "import inspect_ai.log, importlib.metadata as m\n\
                    print(m.version('inspect-ai'))",
            after: |_| Vec::new(),
        }
        .ensure()
    })
    .clone()
}

/// The versions of the external tools these helpers run, one line, for a
/// test to print: `inspect-ai 0.3.285, every-eval-ever 0.3.0, Chromium …`.
pub fn tool_versions() -> String {
    inspect_venv();
    super::eee::eee_venv();
    format!(
        "inspect-ai {INSPECT_VERSION}, every-eval-ever {}, {}",
        super::eee::EEE_VERSION,
        super::chromium::version()
    )
}

/// A program of the venv (`python`, `inspect`) with Inspect's own state
/// (traces, caches) kept in the venv instead of the user's home, run from
/// `cwd` (Inspect reads a `.env` file there), warnings turned into errors.
pub fn venv_command(venv: &Path, program: &str, cwd: &Path) -> Command {
    let state = venv.join("state");
    let mut cmd = Command::new(venv.join("bin").join(program));
    cmd.current_dir(cwd)
        .env("XDG_DATA_HOME", state.join("data"))
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .env("PYTHONWARNINGS", "error")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd`; panics with its output unless it exits 0 without a word on
/// stderr (where Python's warnings and tracebacks go).
pub fn run_clean(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "{what}: {}\n--- stderr ---\n{stderr}\n--- stdout ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Reads `log` (a `.eval` file) with Inspect: `read_eval_log` (full,
/// header-only, sample by sample, sample summaries; all agreeing) under
/// `warnings.simplefilter("error")`, and `inspect log dump`, which must
/// exit 0 with nothing on stderr and print JSON of the same log. Returns
/// the digest `tests/tools/read_inspect_log.py` prints: `status`, `eval`
/// (`task`, `model`, `dataset`, `metadata_keys`, `revision`), `results`
/// (`scores[]`: `name`, `scorer`, `metrics` name→value), `stats` and
/// `samples[]` (`id`, `epoch`, `target`, `input`, `scores` name→`value`,
/// `answer`, `explanation`; `message_count`, `roles`, `texts`, `output`,
/// `metadata_keys`, `model_usage`, `total_time`, `working_time`, `error`,
/// `events`).
pub fn read_with_inspect(log: &Path) -> Value {
    let venv = inspect_venv();
    let cwd = log.parent().unwrap_or(Path::new("."));
    let mut read = venv_command(&venv, "python", cwd);
    read.arg(READER).arg(log);
    let out = run_clean(read, &format!("Inspect's reader on {}", log.display()));
    let digest: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the reader's digest of {} is not JSON ({e}): {}",
            log.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let mut dump = venv_command(&venv, "inspect", cwd);
    dump.args(["log", "dump"]).arg(log);
    let out = run_clean(dump, &format!("inspect log dump {}", log.display()));
    let dumped: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("`inspect log dump {}` is not JSON: {e}", log.display()));
    assert_eq!(
        dumped["status"], digest["status"],
        "dump and reader disagree"
    );
    assert_eq!(dumped["eval"]["task"], digest["eval"]["task"]);
    let samples = dumped["samples"].as_array().map_or(0, Vec::len);
    assert_eq!(
        samples,
        digest["samples"].as_array().map_or(0, Vec::len),
        "dump and reader disagree on the number of samples"
    );
    digest
}

/// One page of the viewer as headless Chromium rendered it.
pub struct Page {
    /// The hash route, e.g. `#/logs/x.eval/samples/`.
    pub route: String,
    /// Whether the page settled (no spinner, text stable) in time.
    pub settled: bool,
    /// The DOM (`outerHTML`).
    pub dom: String,
    /// The text a reader sees (`innerText`).
    pub text: String,
    /// A PNG of the viewport (in the bundle's temporary directory).
    pub screenshot: PathBuf,
}

impl Page {
    /// Distinct colours in the screenshot: a blank page has one or two.
    pub fn colours(&self) -> usize {
        distinct_colours(&self.screenshot)
    }
}

/// What `view_bundle` rendered, and what it took.
pub struct Rendered {
    /// The log list (`#/logs/`).
    pub logs: Page,
    /// The first log's samples list with its header (task, metrics).
    pub samples: Page,
    /// That log's first sample, its messages tab.
    pub sample: Page,
    /// The same sample's transcript tab (its events).
    pub transcript: Page,
    /// The first log's file name, and its first sample's id and epoch.
    pub log_file: String,
    pub sample_id: String,
    pub epoch: u64,
    /// Every request the viewer made to the bundle's server.
    pub served: Vec<Served>,
    /// Console errors and uncaught exceptions of all pages.
    pub errors: Vec<String>,
    /// The bundle and the screenshots; removed when dropped.
    pub dir: tempfile::TempDir,
}

impl Rendered {
    /// Requests the server answered with 206 (a byte range).
    pub fn ranges_answered(&self) -> usize {
        self.served.iter().filter(|s| s.status == 206).count()
    }
}

/// Bundles the logs of `log_dir` with `inspect view bundle`, serves the
/// bundle on 127.0.0.1 with byte ranges and renders four pages in
/// headless Chromium: the log list, the first log's (by name) samples list,
/// and its first sample's messages and transcript. Panics when bundling
/// fails or the first log does not read.
pub fn view_bundle(log_dir: &Path) -> Rendered {
    let dir = tempfile::tempdir().expect("a directory for the bundle");
    let bundle = dir.path().join("bundle");
    let venv = inspect_venv();
    let mut cmd = venv_command(&venv, "inspect", dir.path());
    cmd.args(["view", "bundle", "--log-dir"])
        .arg(log_dir)
        .arg("--output-dir")
        .arg(&bundle);
    run_clean(cmd, &format!("inspect view bundle {}", log_dir.display()));
    let log_file = first_log(&bundle.join("logs"));
    let digest = read_with_inspect(&bundle.join("logs").join(&log_file));
    let first = &digest["samples"][0];
    let sample_id = match &first["id"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let epoch = first["epoch"].as_u64().expect("the first sample's epoch");
    let server = StaticServer::start(&bundle);
    let mut browser = Browser::start(VIEWPORT.0, VIEWPORT.1);
    let mut page = |route: String, name: &str| {
        browser.goto(&server.url(&format!("index.html{route}")));
        let settled = browser.settle(SETTLE_LIMIT);
        let screenshot = dir.path().join(format!("{name}.png"));
        browser.screenshot(&screenshot);
        Page {
            settled,
            dom: browser.dom(),
            text: browser.text(),
            screenshot,
            route,
        }
    };
    let logs = page("#/logs/".to_string(), "logs");
    let samples = page(samples_route(&log_file), "samples");
    let sample = page(
        sample_route(&log_file, &sample_id, epoch, "messages"),
        "sample",
    );
    let transcript = page(
        sample_route(&log_file, &sample_id, epoch, "transcript"),
        "transcript",
    );
    Rendered {
        logs,
        samples,
        sample,
        transcript,
        log_file,
        sample_id,
        epoch,
        served: server.served(),
        errors: browser.errors().to_vec(),
        dir,
    }
}

/// The viewer's route to a log's samples list.
pub fn samples_route(log_file: &str) -> String {
    format!("#/logs/{}/samples/", encode(log_file))
}

/// The viewer's route to one sample: `#/logs/<log>/samples/sample/<id>/
/// <epoch>/<tab>`, the tab `messages`, `transcript` (`scoring`, `info`,
/// `json`), or empty for the default: the transcript when the sample has
/// events, else its messages (as the viewer's `logSamplesUrl` builds it).
pub fn sample_route(log_file: &str, id: &str, epoch: u64, tab: &str) -> String {
    format!(
        "#/logs/{}/samples/sample/{}/{epoch}/{tab}",
        encode(log_file),
        encode(id)
    )
}

/// The first `.eval` file by name in a bundle's `logs` directory.
fn first_log(logs: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(logs)
        .unwrap_or_else(|e| panic!("the bundle's logs {}: {e}", logs.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".eval"))
        .collect();
    names.sort();
    names
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no .eval log in the bundle's {}", logs.display()))
}

/// `encodeURIComponent`.
fn encode(part: &str) -> String {
    part.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The number of distinct RGB colours of a PNG.
pub fn distinct_colours(png_file: &Path) -> usize {
    let file = std::fs::File::open(png_file)
        .unwrap_or_else(|e| panic!("opening {}: {e}", png_file.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap_or_else(|e| panic!("decoding {}: {e}", png_file.display()));
    let mut buf = vec![0; reader.output_buffer_size().expect("a PNG's buffer size")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let channels = info.color_type.samples();
    assert!(info.bit_depth == png::BitDepth::Eight && channels >= 3);
    buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect::<HashSet<_>>()
        .len()
}
