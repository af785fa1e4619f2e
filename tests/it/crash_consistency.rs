//! Nothing lost or counted twice whatever moment a crash hits: a run is
//! killed (SIGKILL, through the test-only fault points of
//! `retrace::util::fault`) at the worst moments in turn, between a round's
//! execution and its record, halfway through a journal line, through
//! run.json and through a report, resumed after each, and must end with
//! the records and summary of the same run left alone, field for field
//! (the golden run's fixture is that run for its configuration), with no
//! temporary file, kernel, kernel directory or cgroup of a killed process
//! left behind. A `sandbox check` killed while writing its JUnit report
//! leaves the older report whole.

use crate::common;
use crate::golden_run;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use retrace::util::fault;
use serde_json::Value;

/// Kills, in this order: every point is reached by the session it is
/// armed in (the run has more rounds left than the hit counts, and every
/// session ends by writing run.json and the reports).
const KILLS: &[&str] = &[
    "after_execute@4",
    "mid_journal_line@3",
    "after_execute@2",
    "during_run_json@1",
    "during_summary@2",
];

/// The pid a killed session printed as it died.
fn killed_pid(ran: &common::Ran) -> u32 {
    ran.stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{}: process ", fault::ENV)))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no fault fired: {ran}"))
}

/// Runs `args` into `out`, killing it at each of `kills` in turn and
/// resuming after each, then resumes it to its end; gives the pids of the
/// killed sessions.
fn killed_and_resumed(args: &[&str], kills: &[&str], out: &Path) -> Vec<u32> {
    let mut killed = Vec::new();
    for (i, kill) in kills.iter().enumerate() {
        let out_arg = out.to_str().unwrap();
        let session: Vec<&str> = if i == 0 {
            args.iter().copied().chain(["--out", out_arg]).collect()
        } else {
            vec!["run", "--resume", out_arg]
        };
        let ran = common::retrace(session).env(fault::ENV, kill).run();
        assert_eq!(ran.code, -1, "{kill}: the session was not killed: {ran}");
        killed.push(killed_pid(&ran));
    }
    let ran = common::retrace(["run", "--resume", out.to_str().unwrap()]).run();
    assert_eq!(ran.code, 0, "the last resume: {ran}");
    killed
}

/// Files a crashed write left: `.<name>.tmp-<pid>` and the journal's
/// rewrite.
fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .map(|e| e.path())
        .collect()
}

/// Processes still in a cgroup of `pid`'s, and `pid`'s cgroup directories:
/// retrace's groups are `…/retrace…/<harness pid>/<kernel>`.
fn left_by(pid: u32) -> (Vec<i32>, Vec<PathBuf>) {
    let marker = format!("/{pid}/");
    let mut processes = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // A zombie has ended: reaping it is its new parent's (the
        // machine's init's) business, which may come seconds later.
        if is_zombie(&entry.path()) {
            continue;
        }
        let cgroups = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if cgroups
            .lines()
            .any(|l| l.contains("retrace") && l.contains(&marker))
        {
            processes.push(p);
        }
    }
    let mut dirs = Vec::new();
    let mut stack = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let inside_ours = dir.to_string_lossy().contains("retrace");
            if inside_ours && e.file_name().to_string_lossy() == pid.to_string() {
                dirs.push(path);
            } else if depth < 6 {
                stack.push((path, depth + 1));
            }
        }
    }
    (processes, dirs)
}

/// Whether the process at `/proc/<pid>` has ended and awaits its reaping.
fn is_zombie(proc_dir: &Path) -> bool {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    // The command name may hold spaces and ')': the state follows the last ')'.
    stat.rfind(')')
        .and_then(|close| stat[close + 1..].split_whitespace().next())
        .is_some_and(|state| state == "Z")
}

fn read_records(dir: &Path) -> BTreeMap<(String, String, u64), Value> {
    golden_run::records(&std::fs::read_to_string(dir.join("results.jsonl")).unwrap())
}

fn read_summary(dir: &Path) -> Value {
    golden_run::summary(
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap(),
    )
}

/// Every (arm, task, round) once, each record and the summary as `want`'s.
fn assert_same_run(
    got: &Path,
    want_records: &BTreeMap<(String, String, u64), Value>,
    want_summary: &Value,
) {
    let text = std::fs::read_to_string(got.join("results.jsonl")).unwrap();
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    let got_records = read_records(got);
    assert_eq!(lines, got_records.len(), "a record written twice");
    assert_eq!(
        got_records.keys().collect::<Vec<_>>(),
        want_records.keys().collect::<Vec<_>>(),
        "the same (arm, task, round) records"
    );
    for (key, want) in want_records {
        assert_eq!(&got_records[key], want, "record {key:?}");
    }
    assert_eq!(&read_summary(got), want_summary, "summary.json");
}

fn assert_nothing_left(out: &Path, killed: &[u32]) {
    assert_eq!(
        temporary_files(out),
        Vec::<PathBuf>::new(),
        "temporary files"
    );
    for &pid in killed {
        let (processes, dirs) = left_by(pid);
        assert!(
            processes.is_empty(),
            "processes of killed session {pid}: {processes:?}"
        );
        assert!(dirs.is_empty(), "cgroups of killed session {pid}: {dirs:?}");
    }
    let kernel_dirs = kernel_dirs_of(killed);
    assert!(
        kernel_dirs.is_empty(),
        "kernel directories of killed sessions: {kernel_dirs:?}"
    );
}

/// Entries under the kernel root that a killed session claimed: a
/// `.<id>.harness` marker naming it, or a jail spec naming it.
fn kernel_dirs_of(killed: &[u32]) -> Vec<PathBuf> {
    let root = retrace::kernel::default_kernel_root();
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let claimant = |path: &Path| -> Option<u32> {
        if path.is_dir() {
            let spec: Value =
                serde_json::from_slice(&std::fs::read(path.join("jail.json")).ok()?).ok()?;
            spec["harness_pid"].as_u64().map(|p| p as u32)
        } else {
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        }
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| claimant(p).is_some_and(|pid| killed.contains(&pid)))
        .collect()
}

#[test]
fn a_run_killed_at_the_worst_moments_resumes_to_the_uninterrupted_result() {
    if common::lacks_root() {
        return;
    }
    common::image(retrace::pyenv::ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let killed = killed_and_resumed(golden_run::ARGS, KILLS, &out);
    let (want_records, want_summary) = golden_run::expected();
    assert_same_run(&out, &want_records, &want_summary);
    assert_nothing_left(&out, &killed);
}

/// Arms (two feedback modes sharing round 0) and the shared round 0's
/// records, killed and resumed, against the same arms left alone.
#[test]
fn a_run_of_arms_killed_and_resumed_equals_one_left_alone() {
    if common::lacks_root() {
        return;
    }
    common::image(retrace::pyenv::ImageName::Fat);
    let args = [
        "run",
        "--suite",
        "math",
        "--model",
        "oracle:faults",
        "--rounds",
        "2",
        "--feedback",
        "parsed,minimal",
        "--limit-tasks",
        "6",
    ];
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone");
    let ran = common::retrace(
        args.iter()
            .copied()
            .chain(["--out", alone.to_str().unwrap()]),
    )
    .run();
    assert_eq!(ran.code, 0, "{ran}");
    let out = dir.path().join("killed");
    let killed = killed_and_resumed(
        &args,
        &["mid_journal_line@5", "after_execute@3", "during_summary@1"],
        &out,
    );
    assert_same_run(&out, &read_records(&alone), &read_summary(&alone));
    assert_nothing_left(&out, &killed);
}

/// Entries of a directory whose names contain `part`.
fn named(dir: &Path, part: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(part))
                .collect()
        })
        .unwrap_or_default()
}

/// An image build and a package install killed halfway, in a home of their
/// own: the half-built image and the half-installed entry are never used
/// (neither appears under its final name), the next command builds and
/// installs them again, and the leftovers are cleared.
#[test]
fn a_build_and_an_install_killed_halfway_are_never_used() {
    if common::lacks_root() {
        return;
    }
    let home = common::outside_tmp();
    let images = home.path().join("images");
    let cli = |args: &[&str]| common::retrace(args.to_vec()).env("RETRACE_HOME", home.path());

    let ran = cli(&["image", "build", "slim"])
        .env(fault::ENV, "during_build@1")
        .run();
    assert_eq!(ran.code, -1, "the build was not killed: {ran}");
    assert!(
        named(&images, "slim").iter().all(|n| n.starts_with('.')),
        "{:?}",
        named(&images, "")
    );
    let ran = cli(&["image", "build", "slim"]).run();
    assert_eq!(ran.code, 0, "{ran}");
    assert_eq!(
        named(&images, ".tmp-"),
        Vec::<String>::new(),
        "build leftovers"
    );
    let ran = cli(&["exec", "--image", "slim", "-"])
        .stdin("print(6 * 7)\n")
        .run();
    assert!(ran.stdout.contains("42"), "{ran}");

    let out = home.path().join("run");
    let run = [
        "run",
        "--suite",
        "packages",
        "--strategy",
        "dynamic",
        "--model",
        "oracle",
        "--limit-tasks",
        "1",
        "--rounds",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let ran = cli(&run).env(fault::ENV, "during_install@1").run();
    assert_eq!(ran.code, -1, "the install was not killed: {ran}");
    let store = home.path().join("packages");
    // Nothing published: the entry was still in the store's work area.
    assert!(
        named(&store, "").iter().all(|n| n.starts_with('.')),
        "{:?}",
        named(&store, "")
    );
    let ran = cli(&["run", "--resume", out.to_str().unwrap()]).run();
    assert_eq!(ran.code, 0, "{ran}");
    let records = read_records(&out);
    assert!(
        records.values().any(|r| r["correct"] == true),
        "the resumed task was not solved: {records:?}"
    );
    let published: Vec<String> = named(&store, "")
        .into_iter()
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(!published.is_empty(), "nothing installed");
    for entry in &published {
        assert!(
            store.join(entry).join("complete.json").is_file(),
            "{entry} published without its marker"
        );
    }
    assert_eq!(
        named(&store.join(".work"), ""),
        Vec::<String>::new(),
        "install leftovers"
    );
}

/// `sandbox check --junit` killed while writing its report over an older
/// one: the older report stays whole, nothing of the killed process stays,
/// and the next check replaces the report and clears what the crash left
/// beside it.
#[test]
fn a_sandbox_check_killed_writing_its_report_leaves_the_old_one_whole() {
    if common::lacks_root() {
        return;
    }
    common::image(retrace::pyenv::ImageName::Fat);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let check = |case: &str| {
        common::retrace([
            "sandbox",
            "check",
            "--filter",
            case,
            "--junit",
            junit.to_str().unwrap(),
        ])
    };
    let ran = check("fp_read_os_release").run();
    assert_eq!(ran.code, 0, "{ran}");
    let old = std::fs::read_to_string(&junit).unwrap();
    assert!(old.contains("fp_read_os_release"), "{old}");

    let ran = check("fp_lazy_bytes")
        .env(fault::ENV, "during_summary@1")
        .run();
    assert_eq!(ran.code, -1, "the check was not killed: {ran}");
    let killed = killed_pid(&ran);
    assert_eq!(
        std::fs::read_to_string(&junit).unwrap(),
        old,
        "the report a killed check left"
    );
    assert_eq!(
        temporary_files(dir.path()).len(),
        1,
        "the killed write's temporary file"
    );

    let ran = check("fp_lazy_bytes").run();
    assert_eq!(ran.code, 0, "{ran}");
    let new = std::fs::read_to_string(&junit).unwrap();
    assert!(
        new.contains("fp_lazy_bytes") && !new.contains("fp_read_os_release"),
        "{new}"
    );
    assert!(new.trim_end().ends_with("</testsuites>"), "{new}");
    // The next check swept the killed one's cgroups and kernel directories.
    assert_nothing_left(dir.path(), &[killed]);
}
