//! `--env KEY=VALUE`: the variables reach `os.environ` in confined
//! kernels (cold, forked by the zygote, restarted after a kill), nothing
//! of retrace's own environment does, reserved and malformed names are
//! usage errors, a run records secret values redacted and fingerprinted
//! by hash, and a resumed run must give the same variables.

use crate::common::{self, retrace, Ran};

use retrace::pyenv::ImageName;

/// A variable of retrace's own environment that no kernel may see.
const HARNESS_ONLY: &str = "RETRACE_TEST_HARNESS_ONLY";
const SECRET: &str = "hf_s3cret_value_0123";

/// Prints the three variables as the kernel sees them.
const SHOW: &str = "import os\n\
    print('color', os.environ.get('RT_COLOR'))\n\
    print('harness', os.environ.get('RETRACE_TEST_HARNESS_ONLY'))\n\
    print('token_ok', os.environ.get('HF_TOKEN') == 'hf_s3cret_value_0123')\n";

#[test]
fn exec_kernels_get_the_listed_variables_on_every_start_and_nothing_else() {
    if common::lacks_root() {
        return;
    }
    // Shown, killed from inside (the next cell restarts the kernel), shown
    // again.
    let src = format!(
        "{SHOW}# %%\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n# %%\n{SHOW}"
    );
    for start in ["cold", "zygote"] {
        let Ran { stdout, stderr, .. } = retrace([
            "exec",
            "--image",
            "slim",
            "--kernel-start",
            start,
            "--env",
            "RT_COLOR=blue",
            "--env",
            &format!("HF_TOKEN={SECRET}"),
            "-",
        ])
        .env(HARNESS_ONLY, "leaked")
        .stdin(&src)
        .image(ImageName::Slim)
        .run();
        // Each line as the kernel printed it (exec also echoes the answer).
        let lines = |want: &str| stdout.lines().filter(|l| *l == want).count();
        assert_eq!(
            lines("color blue"),
            2,
            "{start}: before and after the restart: {stdout}\n{stderr}"
        );
        assert_eq!(lines("token_ok True"), 2, "{start}: {stdout}");
        assert_eq!(lines("harness None"), 2, "{start}: {stdout}");
        assert!(
            !stderr.contains("cannot serve"),
            "{start}: started as asked: {stderr}"
        );
        assert!(
            stdout.contains("the kernel was restarted"),
            "{start}: the second cell killed it: {stdout}"
        );
    }
}

#[test]
fn reserved_and_malformed_variables_are_usage_errors_naming_the_key() {
    for (command, entry, key) in [
        ("exec", "LD_PRELOAD=/tmp/x.so", "LD_PRELOAD"),
        ("exec", "PYTHONPATH=/tmp", "PYTHONPATH"),
        ("exec", "JPY_PARENT_PID=1", "JPY_PARENT_PID"),
        ("exec", "KERNEL_MEMORY=1G", "KERNEL_MEMORY"),
        ("exec", "1BAD=x", "1BAD"),
        ("exec", "NO_VALUE", "NO_VALUE"),
        ("run", "PATH=/tmp", "PATH"),
        ("run", "OMP_NUM_THREADS=64", "OMP_NUM_THREADS"),
    ] {
        let args: Vec<&str> = match command {
            "exec" => vec!["exec", "--env", entry, "-"],
            _ => vec!["run", "--model", "oracle", "--env", entry],
        };
        let Ran { code, stderr, .. } = retrace(args).stdin("print(1)\n").run();
        assert_eq!(code, 2, "{command} --env {entry}: {stderr}");
        assert!(stderr.contains("--env"), "{stderr}");
        assert!(stderr.contains(key), "{command} --env {entry}: {stderr}");
    }
    let Ran { code, stderr, .. } = retrace(["exec", "--env", "A=1", "--env", "A=2", "-"])
        .stdin("print(1)\n")
        .run();
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`A` is given twice"), "{stderr}");
}

#[test]
fn a_run_records_its_variables_secrets_redacted_and_resumes_only_with_the_same() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The answer is right only when the kernel sees the variable; the
    // kernel prints the secret itself, which no record may keep.
    let reply = format!(
        "```python\n{SHOW}print('token', os.environ.get('HF_TOKEN'))\n\
         answer = 42 if os.environ.get('RT_COLOR') == 'blue' else 0\n```"
    );
    let (suite, model) = common::run::replayed_task(dir.path(), &[(0, &reply)]);
    let out = dir.path().join("run");
    let out_s = out.display().to_string();
    let token = format!("HF_TOKEN={SECRET}");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run", "--suite", &suite, "--model", &model, "--rounds", "0", "--out", &out_s,
        ];
        args.extend_from_slice(extra);
        retrace(args)
            .env(HARNESS_ONLY, "leaked")
            .image(ImageName::Fat)
            .run()
    };
    let first = run(&["--env", "RT_COLOR=blue", "--env", &token]);
    assert_eq!(first.code, 0, "{}", first.stderr);

    let records = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(records.lines().next().unwrap()).unwrap();
    let stdout = record["outcome"]["stdout"].as_str().unwrap();
    assert!(stdout.contains("color blue"), "{stdout}");
    assert!(stdout.contains("harness None"), "{stdout}");
    assert!(stdout.contains("token_ok True"), "{stdout}");
    assert!(stdout.contains("token [redacted]"), "{stdout}");
    assert_eq!(record["correct"], true, "{record}");

    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let env = &run_json["spec"]["env"];
    assert_eq!(env["RT_COLOR"], "blue", "{env}");
    assert_eq!(env["HF_TOKEN"], "[redacted]", "{env}");
    let print = &run_json["provenance"]["fingerprints"]["fat"]["env"];
    assert_eq!(print["RT_COLOR"], "blue", "{print}");
    assert!(
        print["HF_TOKEN"].as_str().unwrap().starts_with("sha256:"),
        "{print}"
    );
    for entry in walkdir(&out) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(SECRET),
            "{} holds the secret",
            entry.display()
        );
    }

    // Resumed: the secret must be given again, and every variable alike.
    let resume = |env: &[&str]| {
        let mut args = vec!["run", "--resume", &out_s];
        for e in env {
            args.extend(["--env", e]);
        }
        retrace(args).image(ImageName::Fat).run()
    };
    let other_token = "HF_TOKEN=hf_another_value_99";
    for (env, key) in [
        (vec![], "HF_TOKEN"),
        (vec!["RT_COLOR=red", token.as_str()], "RT_COLOR"),
        (vec!["RT_COLOR=blue", other_token], "HF_TOKEN"),
        (vec![token.as_str()], "RT_COLOR"),
    ] {
        let Ran { code, stderr, .. } = resume(&env);
        assert_eq!(code, 2, "{env:?}: {stderr}");
        assert!(stderr.contains(key), "{env:?}: {stderr}");
        assert!(!stderr.contains("hf_another_value_99"), "{stderr}");
    }
    let same = resume(&["RT_COLOR=blue", &token]);
    assert_eq!(same.code, 0, "{}", same.stderr);
}

/// Every file under `dir`.
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}
