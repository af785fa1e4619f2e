//! Runs the hostile corpus through the real confined executor and checks,
//! case by case, what the reference asks of a sandbox:
//!
//! * a setup cell, when the case has one, runs first in the same kernel
//!   (round 0 leaving hostile state), optionally followed by a restart;
//! * the verdict is the expected one and the outcome meets the case's other
//!   expectations (flags, limits that fired, exception, errno, text printed
//!   or not printed, answer);
//! * the next cell in the same (possibly restarted) kernel prints exactly
//!   what it should, promptly;
//! * after `shutdown()` no process of that kernel is left (by command line,
//!   by cgroup membership and by PID namespace) and no cgroup directory
//!   named after it remains in any hierarchy;
//! * the harness is unharmed: its own `oom_score_adj` and cgroup are what
//!   they were before the case;
//! * a fresh kernel still runs `print(1)`.
//!
//! Every case gets a fresh kernel with the command-line limits overridden
//! by the case's own `[limits]`.
//!
//! On a gateway ([`CheckConfig::gateway`]) only the cases whose outcome
//! retrace establishes from its side of the socket run ([`remote_reason`]
//! says why the others do not); leftovers are checked by asking the gateway
//! whether it still has the kernel.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use walkdir::WalkDir;

use super::corpus::{Case, Category, Setup};
use super::expectation::head;
use super::Expectation;
use crate::kernel::gateway::Gateway;
use crate::kernel::{
    AnyKernel, ExecOptions, Executor, KernelOptions, KernelSpec, LocalBackend, Outcome,
};
use crate::report::junit::{render as render_junit, TestCase};
use crate::sandbox::{Confined, SandboxError, SandboxInfo, SandboxLimits, Verdict};
use crate::util::stats::percentile;

/// How long leftovers (processes, cgroup directories) may take to vanish
/// after `shutdown()` returns.
const LEFTOVER_WAIT: Duration = Duration::from_secs(3);
/// Extra time the executor gets beyond the case's own deadlines (interrupt
/// grace, kill, restart) before the check gives up on it.
const EXECUTOR_SLACK: Duration = Duration::from_secs(60);
/// Wall-clock limit of the follow-up `print(1)` cells.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Everything a check run needs besides the cases.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    /// Limits of every case unless the case overrides them.
    pub limits: SandboxLimits,
    /// The retrace binary, re-executed as each kernel's init.
    pub init_exe: PathBuf,
    /// Image and kernel directory root (threads are set per case).
    pub spec: Arc<KernelSpec>,
    /// Cases run at the same time.
    pub jobs: usize,
    /// How the cases' kernels start.
    pub kernel_start: crate::kernel::KernelStart,
    /// Run the cases on this gateway instead of in local confined kernels.
    pub gateway: Option<Arc<Gateway>>,
}

/// Verdicts retrace establishes itself on a gateway's kernel.
const REMOTE_VERDICTS: [Verdict; 5] = [
    Verdict::Ok,
    Verdict::Error,
    Verdict::TimeoutWall,
    Verdict::OutputLimit,
    Verdict::KernelExit,
];

/// Why `case` does not run against a gateway, or `None` when it does: its
/// category tests confinement that is the gateway's (memory, processes,
/// signals to other processes, disk, network, escapes), the case reaches
/// beyond its kernel (`local_only`), or its verdict needs evidence only a
/// local jail has (CPU time, OOM kills, exit signals, limits' counters).
/// What remains stays inside the kernel's own process: on a gateway that
/// does not confine its kernels, the rest could harm its host.
pub fn remote_reason(case: &Case) -> Option<String> {
    if let Some(why) = &case.local_only {
        return Some(format!("local only: {why}"));
    }
    let owned_by_gateway = matches!(
        case.category,
        Category::Memory
            | Category::Processes
            | Category::Signals
            | Category::Disk
            | Category::NetworkIpc
            | Category::Escape
            | Category::Crashes
    );
    if owned_by_gateway {
        return Some(format!(
            "{} is confinement the gateway's kernelspec provides, not retrace",
            case.category.as_str()
        ));
    }
    if !REMOTE_VERDICTS.contains(&case.expect) {
        return Some(format!(
            "verdict {} needs evidence from a local jail (cgroup counters, exit signals)",
            case.expect
        ));
    }
    None
}

/// A case left out of a check on a gateway.
#[derive(Debug, Clone, Serialize)]
pub struct NotApplicable {
    pub id: String,
    pub reason: String,
}

/// The verdict of one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub category: Category,
    pub expected: Verdict,
    #[serde(skip_serializing_if = "is_empty")]
    pub expectation: Expectation,
    /// `None` when the case never ran (the kernel did not start).
    pub got: Option<Verdict>,
    pub flags: Vec<String>,
    /// Milliseconds from the kill decision until every process was gone.
    pub kill_ms: Option<f64>,
    /// Wall time of the hostile execution itself.
    pub exec_ms: Option<f64>,
    /// Wall time of the whole case: start, execution, checks, teardown.
    pub duration_ms: f64,
    pub pass: bool,
    /// Why the case failed; empty when it passed.
    pub failures: Vec<String>,
    pub kernel_id: Option<String>,
    pub limits: SandboxLimits,
    /// Everything the executor reported (image payloads removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// How the case's kernel started (`cold`, `zygote`, or `fallback: why`
    /// when the zygote was asked for and could not serve).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
}

fn is_empty(e: &Expectation) -> bool {
    *e == Expectation::default()
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub sandbox: SandboxInfo,
    /// Where the kernels ran.
    pub executor: crate::kernel::ExecutorInfo,
    /// Cases that do not apply on this executor (a gateway), and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<NotApplicable>,
    pub limits: SandboxLimits,
    pub jobs: usize,
    pub duration_ms: f64,
    pub summary: Summary,
    pub results: Vec<CaseResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    /// Cases whose execution needed a kill by the harness.
    pub killed: usize,
    pub kill_ms_p50: Option<f64>,
    pub kill_ms_p99: Option<f64>,
    pub kill_ms_max: Option<f64>,
}

impl Summary {
    pub fn of(results: &[CaseResult]) -> Summary {
        let passed = results.iter().filter(|r| r.pass).count();
        let mut kills: Vec<f64> = results.iter().filter_map(|r| r.kill_ms).collect();
        kills.sort_by(f64::total_cmp);
        Summary {
            total: results.len(),
            passed,
            failed: results.len() - passed,
            killed: kills.len(),
            kill_ms_p50: percentile(&kills, 50.0),
            kill_ms_p99: percentile(&kills, 99.0),
            kill_ms_max: kills.last().copied(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// No confinement on this host: nothing can be checked.
    #[error(transparent)]
    Unavailable(SandboxError),
}

/// What the harness process looks like from the outside; a case must not
/// change it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessState {
    pub oom_score_adj: String,
    pub cgroup: String,
}

impl HarnessState {
    pub fn now() -> HarnessState {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| format!("<unreadable: {e}>"))
        };
        HarnessState {
            oom_score_adj: read("/proc/self/oom_score_adj"),
            cgroup: read("/proc/self/cgroup"),
        }
    }
}

/// Runs `cases` with at most `config.jobs` at a time; `on_done` sees each
/// result as it completes. Results come back in the order of `cases`.
pub async fn run(
    cases: &[Case],
    config: &CheckConfig,
    on_done: Arc<dyn Fn(&CaseResult) + Send + Sync>,
) -> Result<CheckReport, CheckError> {
    let started = Instant::now();
    let (executor, sandbox, cases, not_applicable) = match &config.gateway {
        None => {
            // One sandbox for every case (each jail gets the case's limits),
            // set up before any case runs: fails closed, and sets the
            // harness's own OOM score, which every case is then compared
            // against.
            let confined =
                Arc::new(Confined::open(config.init_exe.clone()).map_err(CheckError::Unavailable)?);
            let info = crate::sandbox::Sandbox::info(confined.as_ref());
            (Executor::Local(confined), info, cases.to_vec(), Vec::new())
        }
        Some(gateway) => {
            let (remote, skipped): (Vec<&Case>, Vec<&Case>) =
                cases.iter().partition(|c| remote_reason(c).is_none());
            let not_applicable = skipped
                .into_iter()
                .map(|c| NotApplicable {
                    id: c.id.clone(),
                    reason: remote_reason(c).unwrap_or_default(),
                })
                .collect();
            let info = SandboxInfo {
                confined: false,
                mode: "gateway".into(),
                notes: vec![format!(
                    "kernels on {}: confinement is the gateway's",
                    gateway.info().url
                )],
            };
            let remote = remote.into_iter().cloned().collect();
            (
                Executor::Gateway(gateway.clone()),
                info,
                remote,
                not_applicable,
            )
        }
    };
    let cases = &cases[..];
    let harness = HarnessState::now();

    let jobs = config.jobs.max(1);
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut set = tokio::task::JoinSet::new();
    for (index, case) in cases.iter().enumerate() {
        let case = case.clone();
        let config = config.clone();
        let harness = harness.clone();
        let permits = permits.clone();
        let on_done = on_done.clone();
        let executor = executor.clone();
        set.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("semaphore open");
            let result = run_case(&case, &config, &executor, &harness).await;
            on_done(&result);
            (index, result)
        });
    }
    let mut slots: Vec<Option<CaseResult>> = vec![None; cases.len()];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((index, result)) => slots[index] = Some(result),
            Err(e) => {
                // A panicking case must not hide the others; its slot stays
                // empty and is reported below.
                eprintln!("a case task failed: {e}");
            }
        }
    }
    let results: Vec<CaseResult> = slots
        .into_iter()
        .zip(cases)
        .map(|(slot, case)| {
            slot.unwrap_or_else(|| {
                let mut r = CaseResult::new(case, &case.limits.apply(&config.limits));
                r.fail("the check itself panicked while running this case".into());
                r
            })
        })
        .collect();
    let executor_info = executor.info();
    drop(executor);
    Ok(CheckReport {
        sandbox,
        executor: executor_info,
        not_applicable,
        limits: config.limits,
        jobs,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
        summary: Summary::of(&results),
        results,
    })
}

impl CaseResult {
    fn new(case: &Case, limits: &SandboxLimits) -> CaseResult {
        CaseResult {
            id: case.id.clone(),
            category: case.category,
            expected: case.expect,
            expectation: case.expectation.clone(),
            got: None,
            flags: Vec::new(),
            kill_ms: None,
            exec_ms: None,
            duration_ms: 0.0,
            pass: false,
            failures: Vec::new(),
            kernel_id: None,
            limits: *limits,
            outcome: None,
            start: None,
        }
    }

    /// Records how the kernel started; a fallback is never overwritten.
    fn started(&mut self, kernel: &AnyKernel) {
        use crate::kernel::StartPath;
        let Some(path) = kernel.as_local().map(LocalBackend::start_path) else {
            self.start = Some("gateway".into());
            return;
        };
        if self
            .start
            .as_deref()
            .is_some_and(|s| s.starts_with("fallback"))
        {
            return;
        }
        self.start = Some(match path {
            StartPath::Cold => "cold".into(),
            StartPath::Zygote => "zygote".into(),
            StartPath::Fallback(why) => format!("fallback: {why}"),
        });
    }

    fn fail(&mut self, reason: String) {
        self.failures.push(reason);
        self.pass = false;
    }
}

/// Runs one case in a fresh kernel of `executor` and checks everything
/// around it.
pub async fn run_case(
    case: &Case,
    config: &CheckConfig,
    executor: &Executor,
    harness: &HarnessState,
) -> CaseResult {
    let started = Instant::now();
    let limits = case.limits.apply(&config.limits);
    let mut result = CaseResult::new(case, &limits);
    run_case_into(case, config, executor, harness, &limits, &mut result).await;
    result.pass = result.failures.is_empty();
    result.duration_ms = started.elapsed().as_secs_f64() * 1e3;
    result
}

async fn run_case_into(
    case: &Case,
    config: &CheckConfig,
    executor: &Executor,
    harness: &HarnessState,
    limits: &SandboxLimits,
    result: &mut CaseResult,
) {
    let spec = Arc::new(KernelSpec {
        threads: limits.threads(),
        ..(*config.spec).clone()
    });
    let options = KernelOptions {
        start: config.kernel_start,
        ..KernelOptions::enforcing(limits, true)
    };
    let mut kernel = match executor.start(spec.clone(), options.clone()).await {
        Ok(k) => k,
        Err(e) => return result.fail(format!("the kernel did not start: {e}")),
    };
    let id = kernel.id().to_string();
    result.kernel_id = Some(id.clone());
    result.started(&kernel);
    let mut namespaces = PidNamespaces::default();
    namespaces.record(&kernel);

    if let Some(setup) = &case.setup {
        run_setup(&mut kernel, setup, &case.id, result).await;
        namespaces.record(&kernel);
    }

    // The hostile cell.
    let exec = ExecOptions {
        timeout: limits.timeout,
        artifact_dir: None,
        artifact_prefix: case.id.clone(),
    };
    let budget = limits.timeout + limits.cpu_time + EXECUTOR_SLACK;
    match tokio::time::timeout(budget, kernel.execute(&case.code, &exec)).await {
        Ok(mut outcome) => {
            for a in &mut outcome.artifacts {
                a.base64 = None;
            }
            result.got = Some(outcome.verdict);
            result.flags = outcome.flags.clone();
            result.kill_ms = outcome.kill_ms;
            result.exec_ms = Some(outcome.timings_ms.total);
            if outcome.verdict != case.expect {
                result.fail(format!(
                    "expected verdict {} but got {}{}",
                    case.expect,
                    outcome.verdict,
                    describe(&outcome)
                ));
            }
            for reason in case.expectation.failures(&outcome) {
                result.fail(reason);
            }
            result.outcome = Some(outcome);
            result.started(&kernel);
        }
        Err(_) => result.fail(format!(
            "the executor did not return within {:.0} s",
            budget.as_secs_f64()
        )),
    }
    namespaces.record(&kernel);

    // The next cell in the same (possibly restarted) kernel.
    if let Err(reason) = probe(&mut kernel, &case.next_code, &case.next_stdout).await {
        result.fail(format!("next cell in the same kernel: {reason}"));
    }
    namespaces.record(&kernel);

    let id = kernel.id().to_string();
    kernel.shutdown().await;
    for reason in leftovers(executor, &id, &namespaces).await {
        result.fail(reason);
    }

    let now = HarnessState::now();
    if now.oom_score_adj != harness.oom_score_adj {
        result.fail(format!(
            "the harness's oom_score_adj changed from {} to {}",
            harness.oom_score_adj, now.oom_score_adj
        ));
    }
    if now.cgroup != harness.cgroup {
        result.fail(format!(
            "the harness's cgroup changed from {:?} to {:?}",
            harness.cgroup, now.cgroup
        ));
    }

    // A fresh kernel must still work.
    match executor.start(spec, options).await {
        Ok(mut fresh) => {
            let mut fresh_ns = PidNamespaces::default();
            fresh_ns.record(&fresh);
            if let Err(reason) = probe(&mut fresh, "print(1)", "1\n").await {
                result.fail(format!("fresh kernel: {reason}"));
            }
            let fresh_id = fresh.id().to_string();
            fresh.shutdown().await;
            for reason in leftovers(executor, &fresh_id, &fresh_ns).await {
                result.fail(format!("fresh kernel: {reason}"));
            }
        }
        Err(e) => result.fail(format!("a fresh kernel did not start: {e}")),
    }
}

/// A short account of an outcome for failure messages.
fn describe(o: &Outcome) -> String {
    let mut s = String::new();
    if let Some(e) = &o.error {
        let _ = write!(s, "; error {}: {}", e.ename, shorten(&e.evalue, 200));
    }
    if let Some(exit) = &o.exit {
        let _ = write!(
            s,
            "; exit code {:?} signal {}",
            exit.code,
            exit.signal_name.as_deref().unwrap_or("-")
        );
    }
    if !o.flags.is_empty() {
        let _ = write!(s, "; flags [{}]", o.flags.join(", "));
    }
    let _ = write!(s, "; {:.0} ms", o.timings_ms.total);
    s
}

fn shorten(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.len() <= max {
        line.to_string()
    } else {
        format!("{}…", &line[..line.floor_char_boundary(max)])
    }
}

/// Runs the case's setup cell (and the restart after it, if asked).
async fn run_setup(kernel: &mut AnyKernel, setup: &Setup, id: &str, result: &mut CaseResult) {
    let exec = ExecOptions {
        timeout: PROBE_TIMEOUT,
        artifact_dir: None,
        artifact_prefix: format!("{id}-setup"),
    };
    match tokio::time::timeout(
        PROBE_TIMEOUT + EXECUTOR_SLACK,
        kernel.execute(&setup.code, &exec),
    )
    .await
    {
        Ok(outcome) => {
            if let Some(want) = setup.expect.filter(|v| *v != outcome.verdict) {
                result.fail(format!(
                    "setup cell: expected verdict {want} but got {}{}",
                    outcome.verdict,
                    describe(&outcome)
                ));
            }
        }
        Err(_) => result.fail("the setup cell did not return".into()),
    }
    if setup.restart_before {
        if let Err(e) = kernel.restart().await {
            result.fail(format!("restart after the setup cell: {e}"));
        }
    }
}

/// Runs `code` and requires exactly `stdout` from it, with verdict `ok`.
async fn probe(kernel: &mut AnyKernel, code: &str, stdout: &str) -> Result<(), String> {
    let exec = ExecOptions {
        timeout: PROBE_TIMEOUT,
        artifact_dir: None,
        artifact_prefix: "probe".into(),
    };
    let outcome =
        match tokio::time::timeout(PROBE_TIMEOUT + EXECUTOR_SLACK, kernel.execute(code, &exec))
            .await
        {
            Ok(o) => o,
            Err(_) => return Err(format!("{} did not return", shorten(code, 60))),
        };
    if outcome.verdict != Verdict::Ok || outcome.stdout != stdout {
        return Err(format!(
            "{} gave {} with stdout {:?} (expected {:?}){}",
            shorten(code, 60),
            outcome.verdict,
            head(&outcome.stdout, 200),
            stdout,
            describe(&outcome)
        ));
    }
    Ok(())
}

/// PID namespaces the kernel's processes live in (other than ours), so a
/// child that changed its command line and left the cgroup is still found.
#[derive(Debug, Default)]
struct PidNamespaces(HashSet<String>);

impl PidNamespaces {
    fn record(&mut self, kernel: &AnyKernel) {
        let Some(kernel) = kernel.as_local() else {
            return;
        };
        let own = pid_namespace(std::process::id() as i32);
        let mut pids = kernel.live_processes();
        pids.push(kernel.pid());
        for pid in pids {
            if let Some(ns) = pid_namespace(pid) {
                if Some(&ns) != own.as_ref() {
                    self.0.insert(ns);
                }
            }
        }
    }
}

fn pid_namespace(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Waits up to [`LEFTOVER_WAIT`] for every trace of kernel `id` to vanish
/// (on a gateway: for the gateway to no longer list it); returns what is
/// still there.
async fn leftovers(executor: &Executor, id: &str, namespaces: &PidNamespaces) -> Vec<String> {
    match executor {
        Executor::Local(_) => local_leftovers(id, namespaces).await,
        Executor::Gateway(gateway) => match gateway.has_kernel(id).await {
            Ok(false) => Vec::new(),
            Ok(true) => vec![format!(
                "the gateway still has kernel {id} after its shutdown"
            )],
            Err(e) => vec![format!("could not ask the gateway about kernel {id}: {e}")],
        },
    }
}

async fn local_leftovers(id: &str, namespaces: &PidNamespaces) -> Vec<String> {
    let deadline = Instant::now() + LEFTOVER_WAIT;
    loop {
        let procs = processes_of(id, namespaces);
        let dirs = cgroup_dirs_named(id);
        if (procs.is_empty() && dirs.is_empty()) || Instant::now() >= deadline {
            let mut reasons = Vec::new();
            if !procs.is_empty() {
                reasons.push(format!(
                    "{} process(es) of kernel {id} still alive {:.0} s after shutdown: {}",
                    procs.len(),
                    LEFTOVER_WAIT.as_secs_f64(),
                    procs.join("; ")
                ));
            }
            if !dirs.is_empty() {
                let dirs: Vec<_> = dirs.iter().map(|d| d.display().to_string()).collect();
                reasons.push(format!(
                    "cgroup directories of kernel {id} remain: {}",
                    dirs.join(", ")
                ));
            }
            return reasons;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Live (non-zombie) processes whose command line mentions `id`, whose
/// cgroup path contains it, or that live in one of `namespaces`.
fn processes_of(id: &str, namespaces: &PidNamespaces) -> Vec<String> {
    let own = std::process::id() as i32;
    let group = format!("/{id}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Some(stat) = crate::util::proc::stat(pid) else {
            continue;
        };
        if stat.state == 'Z' {
            continue;
        }
        let dir = entry.path();
        let cmdline = std::fs::read(dir.join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
        let why = if cmdline.contains(id) {
            "command line"
        } else if cgroup.lines().any(|l| in_group(l, &group)) {
            "cgroup"
        } else if pid_namespace(pid).is_some_and(|ns| namespaces.0.contains(&ns))
            // Namespace inode numbers are reused: a process in another
            // kernel's group belongs to that kernel, not to this one.
            && !cgroup.contains("/retrace/")
        {
            "pid namespace"
        } else {
            continue;
        };
        found.push(format!(
            "pid {pid} ({why}) {}",
            shorten(cmdline.trim(), 100)
        ));
    }
    found
}

/// Whether a `/proc/PID/cgroup` line places the process in `group` (a
/// `/<kernel id>` path component) or below it.
fn in_group(line: &str, group: &str) -> bool {
    let path = line.splitn(3, ':').nth(2).unwrap_or("");
    path.ends_with(group) || path.contains(&format!("{group}/"))
}

/// Every directory named `id` in any mounted cgroup hierarchy: the v1
/// controllers, the v2 tree, and hybrid's (controller-less) `unified` tree.
pub fn cgroup_dirs_named(id: &str) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    dirs_named_below(&crate::sandbox::cgroup::mount_points(&text), id)
}

/// Every directory named `id` below any of `mounts`, sorted.
fn dirs_named_below(mounts: &[PathBuf], id: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for mount in mounts {
        found.extend(find_dirs(mount, id));
    }
    found.sort();
    found.dedup();
    found
}

/// Directories named `name` below `dir`, not looking inside a match. The walk
/// is depth-limited: cgroup trees are shallow, retrace's groups sit at
/// `<mount>/…/retrace/<harness pid>/<kernel id>`.
fn find_dirs(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut walk = WalkDir::new(dir).min_depth(1).max_depth(13).into_iter();
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_dir() && entry.file_name() == name {
            found.push(entry.into_path());
            walk.skip_current_dir();
        }
    }
    found
}

/// The results as a fixed-width table, failures listed under their row.
pub fn table(results: &[CaseResult]) -> String {
    let width = results.iter().map(|r| r.id.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:<16}  {:<16}  {:<16}  {:>8}  {:>8}  result",
        "case", "category", "expected", "got", "kill ms", "time s"
    );
    for r in results {
        let _ = writeln!(out, "{}", row(r, width));
        for f in &r.failures {
            let _ = writeln!(out, "{:<width$}    - {f}", "");
        }
    }
    out
}

/// One table row (also printed as results come in).
pub fn row(r: &CaseResult, width: usize) -> String {
    let got = r.got.map(|v| v.as_str()).unwrap_or("-");
    let kill = r
        .kill_ms
        .map(|k| format!("{k:.1}"))
        .unwrap_or_else(|| "-".into());
    format!(
        "{:<width$}  {:<16}  {:<16}  {:<16}  {:>8}  {:>8.1}  {}",
        r.id,
        r.category.as_str(),
        r.expected.as_str(),
        got,
        kill,
        r.duration_ms / 1e3,
        if r.pass { "pass" } else { "FAIL" }
    )
}

/// The closing line: counts and kill latency (goal: p99 ≤ 100 ms).
pub fn summary_line(report: &CheckReport) -> String {
    let s = &report.summary;
    let ms = |v: Option<f64>| {
        v.map(|v| format!("{v:.1} ms"))
            .unwrap_or_else(|| "-".into())
    };
    let fallbacks = report
        .results
        .iter()
        .filter(|r| {
            r.start
                .as_deref()
                .is_some_and(|s| s.starts_with("fallback"))
        })
        .count();
    let fallbacks = if fallbacks > 0 {
        format!("; {fallbacks} kernel(s) started cold: the zygote could not serve")
    } else {
        String::new()
    };
    format!(
        "{} passed, {} failed; kill latency over {} killed case(s): p50 {}, p99 {}, max {}; {:.1} s with {} job(s){fallbacks}",
        s.passed,
        s.failed,
        s.killed,
        ms(s.kill_ms_p50),
        ms(s.kill_ms_p99),
        ms(s.kill_ms_max),
        report.duration_ms / 1e3,
        report.jobs
    )
}

/// The report as JUnit XML: one `<testcase classname="<category>"
/// name="<id>">` per case.
pub fn junit(report: &CheckReport) -> String {
    let cases: Vec<TestCase> = report
        .results
        .iter()
        .map(|r| {
            let got = r.got.map(|v| v.as_str()).unwrap_or("-");
            let mut out = format!("expected {} got {}", r.expected, got);
            if !r.flags.is_empty() {
                let _ = write!(out, " flags [{}]", r.flags.join(", "));
            }
            if let Some(k) = r.kill_ms {
                let _ = write!(out, " kill {k:.1} ms");
            }
            TestCase {
                classname: r.category.as_str().to_string(),
                name: r.id.clone(),
                time_secs: r.duration_ms / 1e3,
                failure: (!r.pass).then(|| {
                    (
                        r.failures
                            .first()
                            .cloned()
                            .unwrap_or_else(|| "failed".into()),
                        r.failures.join("\n"),
                    )
                }),
                system_out: Some(out),
            }
        })
        .collect();
    render_junit(JUNIT_SUITE, &cases)
}

/// The `<testsuite name>` of sandbox checks.
pub const JUNIT_SUITE: &str = "retrace-sandbox";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_lines_match_whole_components() {
        assert!(in_group("4:memory:/retrace/123/kabc", "/kabc"));
        assert!(in_group("0::/retrace/123/kabc/sub", "/kabc"));
        assert!(!in_group("0::/retrace/123/kabcdef", "/kabc"));
        assert!(!in_group("0::/", "/kabc"));
    }

    #[test]
    fn finds_processes_and_directories_named_after_a_kernel() {
        let id = format!("kself{}", std::process::id());
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30", &id])
            .spawn()
            .unwrap();
        let ns = PidNamespaces::default();
        let mut found = Vec::new();
        for _ in 0..100 {
            found = processes_of(&id, &ns);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("command line"), "{found:?}");
        assert!(processes_of(&id, &ns).is_empty());

        let tree = tempfile::tempdir().unwrap();
        let deep = tree.path().join("retrace/123").join(&id);
        std::fs::create_dir_all(deep.join("child")).unwrap();
        std::fs::create_dir_all(tree.path().join("other/x")).unwrap();
        assert_eq!(find_dirs(tree.path(), &id), vec![deep]);
        assert!(cgroup_dirs_named(&id).is_empty());
    }

    /// The leak search covers every layout: v1 controllers, hybrid's empty
    /// `unified` v2 tree, a pure v2 tree with retrace deep under a
    /// delegated service, and escaped mount points; never a non-cgroup mount.
    #[test]
    fn leak_search_covers_v1_hybrid_unified_and_v2_trees() {
        let id = "kleak";
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path();
        let group = |base: &str| root.join(base).join("retrace/4242").join(id);
        let v1_memory = group("hybrid/memory");
        let v1_pids = group("hybrid/pids");
        let unified = group("hybrid/unified");
        let v2 = group("v2/system.slice/ci.service");
        let spaced = group("my cg");
        let not_cgroup = group("tmpfs");
        for dir in [&v1_memory, &v1_pids, &unified, &v2, &spaced, &not_cgroup] {
            std::fs::create_dir_all(dir.join("child")).unwrap();
        }
        let r = root.display();
        let mountinfo = format!(
            "31 23 0:28 / {r}/hybrid rw,relatime - tmpfs tmpfs rw,mode=755\n\
             35 31 0:32 / {r}/hybrid/memory rw,relatime - cgroup cgroup rw,memory\n\
             39 31 0:36 / {r}/hybrid/pids rw,relatime - cgroup cgroup rw,pids\n\
             41 31 0:38 / {r}/hybrid/unified rw,relatime - cgroup2 cgroup2 rw\n\
             50 24 0:40 / {r}/v2 rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n\
             51 24 0:41 / {r}/my\\040cg rw - cgroup2 none rw\n\
             52 24 0:42 / {r}/tmpfs rw - tmpfs tmpfs rw\n"
        );
        let mounts = crate::sandbox::cgroup::mount_points(&mountinfo);
        assert_eq!(mounts.len(), 5, "{mounts:?}");
        assert!(mounts.contains(&root.join("hybrid/unified")), "{mounts:?}");
        assert!(mounts.contains(&root.join("my cg")), "{mounts:?}");
        let mut want = vec![v1_memory, v1_pids, unified, v2, spaced];
        want.sort();
        assert_eq!(dirs_named_below(&mounts, id), want);
    }

    #[test]
    fn table_lists_failures() {
        let case = Case::parse(
            "id = \"x\"\ncategory = \"memory\"\ndescription = \"d\"\ncode = \"1\"\nexpect = \"ok\"",
            Path::new("x.toml"),
        )
        .unwrap();
        let mut r = CaseResult::new(&case, &SandboxLimits::default());
        r.got = Some(Verdict::OomKilled);
        r.kill_ms = Some(12.5);
        r.fail("expected verdict ok but got oom_killed".into());
        let text = table(&[r.clone()]);
        assert!(text.contains("FAIL"), "{text}");
        assert!(text.contains("12.5"), "{text}");
        assert!(text.contains("- expected verdict ok"), "{text}");
        let s = Summary::of(&[r]);
        assert_eq!((s.total, s.failed, s.killed), (1, 1, 1));
    }
}
