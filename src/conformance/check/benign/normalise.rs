//! What legitimately differs between two runs of the same cell, replaced by
//! a placeholder before a confined and an unconfined output are compared.
//! Each rule is listed in docs/sandbox.md; none may hide a difference that
//! confinement causes (a missing file, an error, a changed number).

use std::sync::OnceLock;

use regex::Regex;

/// The rules: a pattern and what replaces it, applied in order.
fn rules() -> &'static [(Regex, &'static str)] {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    RULES.get_or_init(|| {
        [
            // ipykernel's file of a cell, named after the kernel's pid.
            (r"/tmp/ipykernel_\d+/\d+\.py", "<cell file>"),
            // tempfile's random names (mkstemp, mkdtemp, NamedTemporaryFile).
            (r"\btmp[a-z0-9_]{8}\b", "tmp<random>"),
            // Memory addresses in reprs (`<object at 0x7f…>`).
            (r"0x[0-9a-fA-F]{4,}", "0x…"),
            // %timeit's warning that one run was much slower than another:
            // printed or not depending on the machine's load, so dropped
            // with its line end.
            (r"(?m)^The slowest run took .*(\n|$)", ""),
            // %timeit's measurements, one line per statement.
            (
                r"(?m)^.*(per loop \(mean ± std\. dev\. of|per loop \(mean ± std\.|best of \d+:).*$",
                "<timeit>",
            ),
            // %time's measurements.
            (r"(?m)^(CPU times|Wall time):.*$", "<time>"),
            // Process ids printed by name.
            (r"(?i)\b(pid|process id|ppid|parent process)(\W{1,3})\d+", "$1$2<pid>"),
        ]
        .into_iter()
        .map(|(p, r)| (Regex::new(p).expect("a valid pattern"), r))
        .collect()
    })
}

/// The paths of one kernel that its output may show: they differ between
/// any two kernels.
#[derive(Debug, Clone, Default)]
pub struct KernelPaths {
    /// The working directory, as the kernel sees it.
    pub work_dir: String,
    pub home_dir: String,
    pub kernel_id: String,
}

/// `text` with every rule applied and `paths` replaced.
pub fn normalise(text: &str, paths: &KernelPaths) -> String {
    let mut out = text.to_string();
    for (path, placeholder) in [
        (&paths.work_dir, "<cwd>"),
        (&paths.home_dir, "<home>"),
        (&paths.kernel_id, "<kernel>"),
    ] {
        if !path.is_empty() {
            out = out.replace(path.as_str(), placeholder);
        }
    }
    for (pattern, placeholder) in rules() {
        if let std::borrow::Cow::Owned(s) = pattern.replace_all(&out, *placeholder) {
            out = s;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_what_varies_and_keeps_the_rest() {
        let paths = KernelPaths {
            work_dir: "/k/abc/work".into(),
            home_dir: "/k/abc/home".into(),
            kernel_id: "abc".into(),
        };
        let text = "6.1 µs ± 45.2 ns per loop (mean ± std. dev. of 7 runs, 100,000 loops each)\n\
CPU times: user 3 ms, sys: 0 ns, total: 3 ms\nWall time: 2.9 ms\n\
<Foo object at 0x7f3a2b1c>\n/k/abc/work/x.csv\n/tmp/tmpab12cd_9/f\n\
/tmp/ipykernel_812/3371.py:2: UserWarning\nprocess id: 4242\n42 files\n";
        let got = normalise(text, &paths);
        assert_eq!(
            got,
            "<timeit>\n<time>\n<time>\n<Foo object at 0x…>\n<cwd>/x.csv\n/tmp/tmp<random>/f\n\
<cell file>:2: UserWarning\nprocess id: <pid>\n42 files\n"
        );
        // The slow-run warning comes and goes with the load: a loaded run's
        // output compares equal to a quiet one's.
        let loaded = "The slowest run took 5.53 times longer than the fastest. \
This could mean that an intermediate result is being cached.\n\
1.2 µs ± 0.9 µs per loop (mean ± std. dev. of 7 runs, 1,000,000 loops each)\nok\n";
        let quiet =
            "1.1 µs ± 0.1 µs per loop (mean ± std. dev. of 7 runs, 1,000,000 loops each)\nok\n";
        assert_eq!(normalise(loaded, &paths), "<timeit>\nok\n");
        assert_eq!(normalise(loaded, &paths), normalise(quiet, &paths));
        // A number that is not a measurement stays.
        assert_eq!(normalise("mean 0.5 s\n", &paths), "mean 0.5 s\n");
    }
}
