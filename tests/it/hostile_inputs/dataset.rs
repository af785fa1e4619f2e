//! Dataset folders as hostile inputs (classes 1, 2, 5 and 9): task files
//! that name a host file (`..`, an absolute path, a link out of the folder,
//! DABench's `file_name`), one the kernel's user may not read, a sparse
//! table of gigabytes, a suite file that is a FIFO or a link to
//! `/dev/zero`, a line that is not UTF-8, two task files of one name, and
//! task files named like the modules a kernel starts with. Each is a real
//! `retrace run` with the oracle model on a folder built in a temporary
//! directory beside a private host file (mode 0600) that must never reach
//! the kernel, stdout, stderr or any file of the run directory.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use retrace::pyenv::ImageName;
use serde_json::{json, Value};

use super::{files_containing, records, run_case, write_suite};
use crate::common::{self, Ran};

/// What the host file holds.
const SECRET: &str = "host-secret-6a1f0c9e2b";

/// A dataset folder `set/` beside a private host file; the run goes to
/// `run/`.
struct Folder {
    dir: tempfile::TempDir,
    secret: PathBuf,
}

impl Folder {
    fn new() -> Folder {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("set")).unwrap();
        let secret = dir.path().join("private").join("secret.txt");
        std::fs::create_dir(secret.parent().unwrap()).unwrap();
        std::fs::write(&secret, SECRET).unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        Folder { dir, secret }
    }

    fn set(&self) -> PathBuf {
        self.dir.path().join("set")
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `set/tasks.jsonl`: a good task, then `lines`.
    fn suite(&self, lines: &[Value]) -> PathBuf {
        let mut all = vec![good("good")];
        all.extend_from_slice(lines);
        write_suite(&self.set(), "tasks.jsonl", &all)
    }

    /// `retrace run` of `suite` with the oracle model (one round), plus
    /// `extra` flags, as a corpus case.
    fn run(&self, case: &str, suite: &Path, extra: &[&str]) -> Ran {
        let out = self.out();
        let mut args = vec![
            "run",
            "--suite",
            suite.to_str().unwrap(),
            "--model",
            "oracle",
            "--rounds",
            "0",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run_case(case, common::retrace(args).image(ImageName::Fat))
    }

    /// The host file reached nothing the run wrote or said.
    fn assert_secret_kept(&self, ran: &Ran) {
        assert_eq!(std::fs::read_to_string(&self.secret).unwrap(), SECRET);
        assert!(!ran.stdout.contains(SECRET), "{ran}");
        assert!(!ran.stderr.contains(SECRET), "{ran}");
        let leaked = files_containing(&self.out(), SECRET.as_bytes());
        assert!(leaked.is_empty(), "the host file reached {leaked:?}");
    }
}

fn good(id: &str) -> Value {
    json!({
        "id": id,
        "question": "What is 6 * 7?",
        "expected": {"type": "number", "value": 42.0},
        "reference": "answer = 6 * 7\n",
    })
}

/// A task whose reference answers with the content of its file `name`
/// (the oracle runs it): the host file, if it ever reached the kernel,
/// would be the answer recorded.
fn reads(id: &str, files: &[&str], name: &str) -> Value {
    json!({
        "id": id,
        "question": "What does the file say?",
        "files": files,
        "expected": {"type": "text", "value": "nothing"},
        "reference": format!("answer = open({name:?}).read()\n"),
    })
}

/// The run went on with the good task alone and listed `id` as skipped
/// for `why`, on stderr and in run.json.
fn skipped_for(folder: &Folder, ran: &Ran, id: &str, why: &str) {
    assert!(ran.success(), "{ran}");
    let ids: Vec<Value> = records(&folder.out())
        .iter()
        .map(|r| r["task_id"].clone())
        .collect();
    assert_eq!(ids, [json!("good")], "{ran}");
    assert!(ran.stderr.contains("skipped "), "{ran}");
    assert!(ran.stderr.contains(why), "{ran}");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.out().join("run.json")).unwrap())
            .unwrap();
    let skipped = &run["provenance"]["skipped"];
    assert_eq!(skipped[0]["id"], id, "{skipped}");
    assert!(
        skipped[0]["reason"].as_str().unwrap().contains(why),
        "{skipped}"
    );
}

const OUTSIDE: &str = "is outside the dataset's folder";

#[test]
fn dataset_file_dotdot_is_refused() {
    // The harness copied ../private/secret.txt into the kernel as root.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let suite = folder.suite(&[reads("bad", &["../private/secret.txt"], "secret.txt")]);
    let ran = folder.run("dataset/file_dotdot", &suite, &["--skip-invalid"]);
    skipped_for(&folder, &ran, "bad", OUTSIDE);
    folder.assert_secret_kept(&ran);
}

#[test]
fn dataset_file_absolute_path_out_of_the_folder_refuses_the_run() {
    // Without --skip-invalid the run is refused at load, naming the line.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let secret = folder.secret.to_str().unwrap().to_string();
    let suite = folder.suite(&[reads("bad", &[&secret], "secret.txt")]);
    let ran = folder.run("dataset/file_absolute_path", &suite, &[]);
    assert_eq!(ran.code, 2, "{ran}");
    assert!(ran.stderr.contains("tasks.jsonl:2: "), "{ran}");
    assert!(ran.stderr.contains(OUTSIDE), "{ran}");
    assert!(!folder.out().join("results.jsonl").exists());
    folder.assert_secret_kept(&ran);
}

#[test]
fn dataset_file_symlink_out_of_the_folder_is_refused() {
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    symlink(&folder.secret, folder.set().join("data.csv")).unwrap();
    let suite = folder.suite(&[reads("bad", &["data.csv"], "data.csv")]);
    let ran = folder.run("dataset/file_symlink_out", &suite, &["--skip-invalid"]);
    skipped_for(&folder, &ran, "bad", OUTSIDE);
    folder.assert_secret_kept(&ran);
}

#[test]
fn dataset_dabench_file_name_out_of_the_folder_is_refused() {
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let suite = folder.suite(&[json!({
        "id": "bad",
        "question": "What does the table say?",
        "format": "@text[value]",
        "file_name": "../private/secret.txt",
        "answers": [["text", "nothing"]],
    })]);
    let ran = folder.run(
        "dataset/dabench_file_name_dotdot",
        &suite,
        &["--skip-invalid"],
    );
    skipped_for(&folder, &ran, "bad", OUTSIDE);
    folder.assert_secret_kept(&ran);
}

#[test]
fn dataset_file_the_kernel_user_may_not_read_stays_out() {
    // Inside the folder but private to root: root's copy carried it in.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let inside = folder.set().join("private.csv");
    std::fs::rename(&folder.secret, &inside).unwrap();
    let ran = {
        let suite = folder.suite(&[reads("bad", &["private.csv"], "private.csv")]);
        folder.run("dataset/file_unreadable_by_kernel_user", &suite, &[])
    };
    std::fs::rename(&inside, &folder.secret).unwrap();
    // The task ends on an infrastructure error that says why.
    assert_eq!(ran.code, 3, "{ran}");
    let bad = records(&folder.out())
        .into_iter()
        .find(|r| r["task_id"] == "bad")
        .expect("a record of the refused task");
    let text = bad.to_string();
    assert!(text.contains("may not read it"), "{text}");
    folder.assert_secret_kept(&ran);
}

#[test]
fn dataset_sparse_task_file_is_refused_unread() {
    // A sparse table of a gigabyte was read whole to hash it (a 2 GB one
    // took the harness to 2 GB).
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let big = std::fs::File::create(folder.set().join("big.csv")).unwrap();
    big.set_len(1 << 30).unwrap();
    let suite = folder.suite(&[reads("bad", &["big.csv"], "big.csv")]);
    let ran = folder.run("dataset/sparse_task_file", &suite, &["--skip-invalid"]);
    skipped_for(&folder, &ran, "bad", "over the bound of 67108864 bytes");
}

#[test]
fn dataset_suite_file_linked_to_dev_zero_is_refused() {
    // read_to_string on /dev/zero grew the harness by 1.5 GB in 2 s.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let zero = folder.set().join("tasks.jsonl");
    symlink("/dev/zero", &zero).unwrap();
    let ran = folder.run("dataset/suite_link_to_dev_zero", &zero, &[]);
    assert_eq!(ran.code, 2, "{ran}");
    assert!(
        ran.stderr
            .contains("tasks.jsonl: refused: is a character device, not a regular file"),
        "{ran}"
    );
    // In a suite folder, a link out of it is refused before it is opened.
    std::fs::remove_file(&zero).unwrap();
    folder.suite(&[]);
    symlink("/dev/urandom", folder.set().join("more.jsonl")).unwrap();
    let ran = folder.run(
        "dataset/suite_folder_link_to_dev_urandom",
        &folder.set(),
        &[],
    );
    assert_eq!(ran.code, 2, "{ran}");
    assert!(
        ran.stderr
            .contains("more.jsonl: refused: a link that leads out of the suite's folder"),
        "{ran}"
    );
}

#[test]
fn dataset_suite_fifo_does_not_hang_the_load() {
    // Opening a FIFO named like a suite file waited for a writer for ever.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    folder.suite(&[]);
    let fifo = folder.set().join("more.jsonl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let ran = folder.run("dataset/suite_fifo", &folder.set(), &["--skip-invalid"]);
    assert_eq!(ran.code, 2, "{ran}");
    assert!(ran.stderr.contains("more.jsonl"), "{ran}");
    assert!(
        ran.stderr.contains("is a FIFO, not a regular file"),
        "{ran}"
    );
}

#[test]
fn dataset_invalid_utf8_line_is_skipped_alone() {
    // One invalid byte refused the whole file, naming no line, even with
    // --skip-invalid.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let suite = folder.suite(&[]);
    let mut bytes = std::fs::read(&suite).unwrap();
    bytes.extend_from_slice(b"{\"id\": \"bad\", \"question\": \"caf\xe9?\"}\n");
    std::fs::write(&suite, bytes).unwrap();
    let ran = folder.run("dataset/invalid_utf8_line", &suite, &["--skip-invalid"]);
    assert!(ran.success(), "{ran}");
    assert!(
        ran.stderr
            .contains("tasks.jsonl:2: invalid UTF-8 at byte 31 of the line"),
        "{ran}"
    );
    let ids: Vec<Value> = records(&folder.out())
        .iter()
        .map(|r| r["task_id"].clone())
        .collect();
    assert_eq!(ids, [json!("good")]);
}

#[test]
fn dataset_two_task_files_of_one_name_are_refused_at_load() {
    // Both landed on x.csv in the kernel's working directory: an
    // infrastructure error at run time (exit 3, repeated by --resume).
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    for sub in ["a", "b"] {
        std::fs::create_dir(folder.set().join(sub)).unwrap();
        std::fs::write(folder.set().join(sub).join("x.csv"), sub).unwrap();
    }
    let suite = folder.suite(&[reads("bad", &["a/x.csv", "b/x.csv"], "x.csv")]);
    let ran = folder.run("dataset/duplicate_task_file_names", &suite, &[]);
    assert_eq!(ran.code, 2, "{ran}");
    assert!(ran.stderr.contains("tasks.jsonl:2: "), "{ran}");
    assert!(
        ran.stderr
            .contains("input files `a/x.csv` and `b/x.csv` have the same file name `x.csv`"),
        "{ran}"
    );
}

#[test]
fn dataset_task_files_named_like_modules_do_not_run_at_a_cold_start() {
    // types.py in the working directory ran instead of the standard
    // library's when `python -m ipykernel_launcher` started.
    if common::lacks_root() {
        return;
    }
    let folder = Folder::new();
    let mut files = Vec::new();
    for module in ["types", "enum", "ipykernel_launcher"] {
        let name = format!("{module}.py");
        let code = format!("open('hijacked', 'w').close()\nraise SystemExit('{module}.py ran')\n");
        std::fs::write(folder.set().join(&name), code).unwrap();
        files.push(name);
    }
    std::fs::write(folder.set().join("helpers.py"), "ANSWER = 42\n").unwrap();
    files.push("helpers.py".into());
    let suite = folder.suite(&[json!({
        "id": "modules",
        "question": "What is 6 * 7?",
        "files": files,
        "expected": {"type": "number", "value": 42.0},
        "reference": "import os, helpers\nanswer = helpers.ANSWER + len([f for f in os.listdir('.') if f == 'hijacked'])\n",
    })]);
    let ran = folder.run(
        "dataset/task_files_shadow_modules",
        &suite,
        &["--kernel-start", "cold"],
    );
    assert!(ran.success(), "{ran}");
    let records = records(&folder.out());
    let modules = records
        .iter()
        .find(|r| r["task_id"] == "modules")
        .expect("the task ran");
    assert_eq!(modules["correct"], true, "{modules}");
}
