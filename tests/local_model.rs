//! The local model for real: prepared into `$RETRACE_HOME` (once per
//! machine; the first time compiles llama.cpp, 10-20 min), served by
//! llama.cpp, asked by `retrace run` through the OpenAI client. Slow.
//!
//! What is checked is that runs are complete and consistent and that no
//! server outlives its owner, never what the model scores: it is a 135M
//! model and its answers are what they are.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use retrace::model::local::{LocalServer, ModelEnv, ModelStore, ServerOptions, SPEC};
use retrace::pyenv::ImageName;

const TASKS: usize = 4;
const ROUNDS: u64 = 2;

/// One test at a time: each runs a llama server that wants every core, and
/// the leak checks must not see another test's server.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn prepared() -> &'static ModelEnv {
    static ENV: OnceLock<ModelEnv> = OnceLock::new();
    ENV.get_or_init(|| {
        ModelStore::from_env()
            .prepare(true)
            .unwrap_or_else(|e| panic!("preparing the local model: {e}"))
    })
}

/// llama servers serving our GGUF, by pid.
fn llama_servers(gguf: &Path) -> BTreeSet<i32> {
    let gguf = gguf.to_string_lossy().into_owned();
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        let zombie = retrace::util::proc::stat(pid).map(|s| s.state) == Some('Z');
        if !zombie && cmdline.contains("llama_cpp.server") && cmdline.contains(&gguf) {
            found.insert(pid);
        }
    }
    found
}

/// Waits up to `secs` for every server not in `before` to be gone.
fn new_servers_after(before: &BTreeSet<i32>, gguf: &Path, secs: u64) -> BTreeSet<i32> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let new: BTreeSet<i32> = llama_servers(gguf).difference(before).copied().collect();
        if new.is_empty() || Instant::now() > deadline {
            return new;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn retrace_run(model: &str, out: &Path, envs: &[(&str, &str)]) -> Output {
    common::image(ImageName::Fat);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_retrace"));
    cmd.args(["run", "--suite", "math", "--limit-tasks"])
        .arg(TASKS.to_string())
        .arg("--rounds")
        .arg(ROUNDS.to_string())
        .args(["--concurrency", "2", "--model", model, "--out"])
        .arg(out);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("retrace runs")
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The run directory is complete; every task has rounds 0..=last with no
/// gap, ends exactly once, and every round has a reply, tokens and a model
/// time.
fn assert_complete_run(dir: &Path, model: &str, output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "retrace run failed:\n{stderr}");
    for file in [
        "run.json",
        "results.jsonl",
        "summary.json",
        "summary.csv",
        "report.md",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing; stderr:\n{stderr}"
        );
    }
    let run = read_json(&dir.join("run.json"));
    assert_eq!(run["model"], model, "{run}");
    assert_eq!(run["synthetic_model"], false);
    let task_ids: BTreeSet<String> = run["task_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(task_ids.len(), TASKS);

    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    let mut by_task: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        by_task
            .entry(r["task_id"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
    }
    assert_eq!(
        by_task.keys().cloned().collect::<BTreeSet<_>>(),
        task_ids,
        "every task has records"
    );
    for (task, records) in &by_task {
        let rounds: Vec<u64> = records
            .iter()
            .map(|r| r["round"].as_u64().unwrap())
            .collect();
        let want: Vec<u64> = (0..rounds.len() as u64).collect();
        assert_eq!(rounds, want, "rounds of {task}");
        assert!(rounds.len() as u64 <= ROUNDS + 1, "{task}: {rounds:?}");
        let finals: Vec<u64> = records
            .iter()
            .filter(|r| !r["stop"].is_null())
            .map(|r| r["round"].as_u64().unwrap())
            .collect();
        assert_eq!(
            finals,
            vec![*rounds.last().unwrap()],
            "{task} ends once, last"
        );
        for r in records {
            let at = format!("{task} round {}", r["round"]);
            assert_eq!(r["kind"], "attempt", "{at}: {r}");
            assert!(r["infra_error"].is_null(), "{at}: {}", r["infra_error"]);
            assert_eq!(r["model"], model, "{at}");
            let reply = r["reply"].as_str().unwrap_or_default();
            assert!(!reply.trim().is_empty(), "{at}: empty reply");
            let completion = r["tokens"]["completion_tokens"].as_u64().unwrap_or(0);
            assert!(completion > 0, "{at}: tokens {}", r["tokens"]);
            let model_ms = r["timings_ms"]["model"].as_f64().unwrap_or(0.0);
            assert!(model_ms > 0.0, "{at}: timings {}", r["timings_ms"]);
        }
    }
    let summary = read_json(&dir.join("summary.json"));
    assert_eq!(summary["tasks"], TASKS as u64, "{summary}");
}

#[test]
fn run_with_the_local_model_is_complete_and_leaves_no_server() {
    let _serial = serial();
    let env = prepared();
    let before = llama_servers(&env.gguf());
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let output = retrace_run("local", &dir, &[]);
    assert_complete_run(&dir, SPEC, &output);

    let run = read_json(&dir.join("run.json"));
    let info = &run["model_info"];
    assert_eq!(info["model"], SPEC, "{run}");
    assert_eq!(info["gguf_sha256"], env.marker.gguf.sha256);
    assert_eq!(info["gguf_size_bytes"], env.marker.gguf.size_bytes);
    assert_eq!(info["server_version"], env.server_version());
    assert!(
        info["base_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{info}"
    );
    assert!(info["n_ctx"].as_u64().unwrap() >= 4096, "{info}");
    assert!(info["threads"].as_u64().unwrap() >= 1, "{info}");

    let left = new_servers_after(&before, &env.gguf(), 10);
    assert!(left.is_empty(), "llama servers left running: {left:?}");
}

#[test]
fn a_local_server_serves_an_ordinary_openai_client() {
    let _serial = serial();
    let env = prepared();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(LocalServer::start(
            env,
            &ModelStore::from_env().logs_dir(),
            ServerOptions {
                // Any OpenAI client with any key, as a user would point one
                // at a llama server.
                require_key: false,
                ..ServerOptions::default()
            },
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let output = retrace_run(
        "openai:smollm2",
        &dir,
        &[
            ("OPENAI_BASE_URL", server.base_url()),
            ("OPENAI_API_KEY", "none"),
        ],
    );
    assert_complete_run(&dir, "openai:smollm2", &output);
    assert!(server.is_running(), "the server survived the run");

    let pid = server.pid() as i32;
    drop(server);
    // Dropped means killed and reaped: the pid is gone, not a zombie.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "server {pid} still exists after drop"
    );
}

#[test]
fn a_server_that_cannot_load_fails_fast_with_its_log() {
    let _serial = serial();
    let env = prepared();
    // The real venv, a file that is not a GGUF.
    let fake = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env.venv(), fake.path().join("venv")).unwrap();
    std::fs::create_dir(fake.path().join("model")).unwrap();
    std::fs::write(fake.path().join("model/broken.gguf"), b"not a gguf").unwrap();
    let mut marker = env.marker.clone();
    marker.gguf.file = "model/broken.gguf".into();
    let broken = ModelEnv {
        dir: fake.path().to_path_buf(),
        marker,
    };
    let logs = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let err = runtime
        .block_on(LocalServer::start(
            &broken,
            logs.path(),
            ServerOptions::default(),
        ))
        .unwrap_err();
    let message = err.to_string();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert!(message.contains("exited during startup"), "{message}");
    assert!(
        message.contains("--- last lines of the log ---"),
        "{message}"
    );
    let log: Vec<PathBuf> = std::fs::read_dir(logs.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(message.contains(&log[0].display().to_string()), "{message}");
    assert!(llama_servers(&broken.gguf()).is_empty());
}

#[test]
fn a_killed_retrace_takes_its_server_along() {
    let _serial = serial();
    let env = prepared();
    common::image(ImageName::Fat);
    let before = llama_servers(&env.gguf());
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "run",
            "--suite",
            "math",
            "--limit-tasks",
            "1",
            "--model",
            "local",
        ])
        .arg("--out")
        .arg(out.path().join("run"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Its server: a new one whose parent is this retrace.
    let deadline = Instant::now() + Duration::from_secs(120);
    let server = loop {
        let new = llama_servers(&env.gguf())
            .into_iter()
            .filter(|pid| !before.contains(pid))
            .find(|&pid| retrace::util::proc::stat(pid).map(|s| s.ppid) == Some(child.id() as i32));
        if let Some(pid) = new {
            break pid;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "retrace ended before its server was seen"
        );
        assert!(Instant::now() < deadline, "no server appeared");
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let left = new_servers_after(&before, &env.gguf(), 15);
    assert!(
        left.is_empty(),
        "server {server} outlived its retrace: {left:?}"
    );
}
