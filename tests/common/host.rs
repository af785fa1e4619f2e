//! What a test needs from the machine (root, a cgroup layout) and what
//! happens when the machine lacks it. Strict runs (`RETRACE_REQUIRE_ROOT=1`,
//! set by `.ci/run`, or `CI=true` as CI services set it) fail with the
//! reason; elsewhere the test is skipped visibly: a `SKIPPED` line on the
//! terminal whatever the capture setting, and a count of skipped tests when
//! the test binary exits. A skipped test never passes silently.
//!
//! Usage, first thing in a test: `if common::host::lacks(&[Need::Root]) { return; }`

use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, Once};

/// A precondition of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Running as root: namespaces, the kernel user, cgroupfs writes.
    Root,
    /// A cgroup v1 or hybrid host (v1 controller hierarchies mounted).
    CgroupV1,
    /// A pure cgroup v2 host (cgroup2 at /sys/fs/cgroup).
    CgroupV2,
}

/// How the host mounts cgroups, as far as the tests care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    V1,
    Hybrid,
    V2,
    None,
}

impl Layout {
    /// From `/proc/self/mountinfo`, as retrace detects it: cgroup2 at the
    /// root is v2; v1 memory plus cgroup2 at `unified` is hybrid.
    pub fn of_host() -> Layout {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut v1_memory = false;
        let mut v2_root = false;
        let mut v2_unified = false;
        for line in text.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let point = left.split_whitespace().nth(4).unwrap_or("");
            let mut right = right.split_whitespace();
            let fstype = right.next().unwrap_or("");
            let superopts = right.nth(1).unwrap_or("");
            match fstype {
                "cgroup2" if point == "/sys/fs/cgroup" => v2_root = true,
                "cgroup2" if point == "/sys/fs/cgroup/unified" => v2_unified = true,
                "cgroup" if superopts.split(',').any(|o| o == "memory") => v1_memory = true,
                _ => {}
            }
        }
        match (v2_root, v1_memory, v2_unified) {
            (true, _, _) => Layout::V2,
            (false, true, true) => Layout::Hybrid,
            (false, true, false) => Layout::V1,
            (false, false, _) => Layout::None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Layout::V1 => "v1",
            Layout::Hybrid => "hybrid",
            Layout::V2 => "v2",
            Layout::None => "none",
        }
    }
}

/// Whether missing preconditions fail the test (CI) instead of skipping it.
pub fn strict() -> bool {
    match std::env::var("RETRACE_REQUIRE_ROOT").as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0"),
    }
}

/// The layout a job declares with `RETRACE_CGROUP=v1|hybrid|v2` (the v2 job
/// sets `v2`), if any.
pub fn declared_layout() -> Option<Layout> {
    let value = std::env::var("RETRACE_CGROUP").ok()?;
    match value.as_str() {
        "v1" => Some(Layout::V1),
        "hybrid" => Some(Layout::Hybrid),
        "v2" => Some(Layout::V2),
        "" => None,
        other => panic!("RETRACE_CGROUP={other:?}: expected v1, hybrid or v2"),
    }
}

/// `true` when the calling test must stop because the machine lacks one of
/// `needs`: the skip is then reported. Panics instead, with the reason and
/// the fix, where a skip is not allowed:
/// - `Root` and `CgroupV1` in strict runs (CI's own host is v1/hybrid),
///   unless `RETRACE_CGROUP` declares a v2 job, which skips `CgroupV1`;
/// - `CgroupV2` when `RETRACE_CGROUP=v2` (a v2 job on a host that is not);
/// - any cgroup need when the host's layout is not the declared one.
#[must_use]
pub fn lacks(needs: &[Need]) -> bool {
    let layout = Layout::of_host();
    let declared = declared_layout();
    if let Some(want) = declared {
        assert_eq!(
            layout,
            want,
            "RETRACE_CGROUP={} but this host's cgroup layout is {}",
            want.name(),
            layout.name()
        );
    }
    for need in needs {
        let (missing, must_fail, why, strict_with) = match need {
            Need::Root => (
                !nix::unistd::geteuid().is_root(),
                strict(),
                "needs root (namespaces, the kernel user, cgroup writes): run the tests as root, \
                 as CI does"
                    .to_string(),
                "RETRACE_REQUIRE_ROOT=1",
            ),
            Need::CgroupV1 => (
                !matches!(layout, Layout::V1 | Layout::Hybrid),
                strict() && declared != Some(Layout::V2),
                format!(
                    "needs a cgroup v1 or hybrid host, this one is {}; on a v2 host run the v2 \
                     job instead (`.ci/run v2`, tests/README.md: Tiers)",
                    layout.name()
                ),
                "RETRACE_REQUIRE_ROOT=1",
            ),
            Need::CgroupV2 => (
                layout != Layout::V2,
                declared == Some(Layout::V2),
                format!(
                    "needs a cgroup v2 host, this one is {}; the v2 job runs it on one \
                     (`.ci/run v2`)",
                    layout.name()
                ),
                "RETRACE_CGROUP=v2",
            ),
        };
        if !missing {
            continue;
        }
        let test = test_name();
        assert!(
            !must_fail,
            "{test} {why} (this run requires it: RETRACE_REQUIRE_ROOT=1, CI or RETRACE_CGROUP)"
        );
        skip(
            &test,
            &format!("{why} [{strict_with} makes this a failure]"),
        );
        return true;
    }
    false
}

/// Tests skipped in this test binary.
static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn test_name() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => "this test".to_string(),
    }
}

/// Reports a skip on the real stderr (libtest captures only the print
/// macros, not writes to the handle) and once registers the exit summary.
fn skip(test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    SKIPPED.lock().unwrap().push(test.to_string());
    static SUMMARY: Once = Once::new();
    SUMMARY.call_once(|| {
        // SAFETY: `summary` is an `extern "C" fn()` that never unwinds.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(summary);
        }
    });
}

/// Printed when the test binary exits, after libtest's own result line,
/// which counts a skipped test as passed.
extern "C" fn summary() {
    let Ok(skipped) = SKIPPED.lock() else { return };
    if skipped.is_empty() {
        return;
    }
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {} test(s) of {binary} (counted as passed above, why in the SKIPPED lines): {}",
        skipped.len(),
        skipped.join(", ")
    );
}
