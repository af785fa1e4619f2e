//! Scrubbing harness paths out of what the model sees.
//!
//! Harness paths are scrubbed everywhere ([`scrub_paths`]): anything under a
//! `site-packages/` or `dist-packages/` becomes `<site-packages>/…`, the
//! image/venv prefix, the kernel's directories under `/tmp/retrace-*` and
//! home directories become `<sandbox>`, the interpreter's standard library
//! (`/usr/lib/python3.x/`) becomes `<stdlib>/`, and ipykernel's per-cell file
//! names (`/tmp/ipykernel_N/NNN.py`, seen in warnings) become `<cell>`.

use std::sync::LazyLock;

use regex::Regex;

static SCRUBS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    const SEG: &str = r#"[^/\s"'():,<>\[\]]"#;
    let rules = [
        // Anything installed: venvs, images, system dist-packages.
        (
            format!(r"(?:/{SEG}+)*/(?:site|dist)-packages/"),
            "<site-packages>/",
        ),
        // ipykernel's file name for a cell (warnings point there).
        (r"(?:/tmp)?/ipykernel_\d+/\d+\.py".to_string(), "<cell>"),
        // The kernel's own directories: runtime, work, home.
        (
            format!(r"(?:/{SEG}+)*/retrace-\d+/{SEG}+/(?:work|home|rt)\b"),
            "<sandbox>",
        ),
        (format!(r"/tmp/retrace-{SEG}*(?:/{SEG}+)?"), "<sandbox>"),
        // A retrace image (fat-…, slim-…) and its venv.
        (
            format!(r"(?:/{SEG}+)*/images/[A-Za-z0-9_.]+-[0-9a-f]{{8,}}(?:/venv)?"),
            "<sandbox>",
        ),
        (format!(r"(?:/{SEG}+)*/\.cache/retrace\b"), "<sandbox>"),
        // The interpreter's standard library.
        (format!(r"(?:/{SEG}+)*/lib/python3\.\d+/"), "<stdlib>/"),
        // Home directories of the harness user.
        (
            r#"(^|[\s"'(=:,\[])/(?:root|home/[^/\s"']+)\b"#.to_string(),
            "${1}<sandbox>",
        ),
    ];
    rules
        .into_iter()
        .map(|(re, to)| (Regex::new(&re).expect("valid regex"), to))
        .collect()
});

/// Replaces harness paths (see the module documentation).
pub fn scrub_paths(text: &str) -> String {
    let mut out = text.to_string();
    for (re, to) in SCRUBS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, *to).into_owned();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbing() {
        let cases = [
            (
                "File /home/alice/.cache/retrace/images/fat-6716b415b01ace57/venv/lib/python3.11/site-packages/pandas/core/frame.py:4102, in f",
                "File <site-packages>/pandas/core/frame.py:4102, in f",
            ),
            (
                "File /usr/lib/python3.11/json/decoder.py:337, in JSONDecoder.decode(self, s, _w)",
                "File <stdlib>/json/decoder.py:337, in JSONDecoder.decode(self, s, _w)",
            ),
            (
                "No such file: '/tmp/retrace-1000/k2e319bf9b90/work/data.csv'",
                "No such file: '<sandbox>/data.csv'",
            ),
            ("HOME=/tmp/retrace-1000/kabc/home", "HOME=<sandbox>"),
            (
                "/opt/rt/images/slim-ccf5d594ff87dfc0/venv/bin/python",
                "<sandbox>/bin/python",
            ),
            ("open('/root/secret.txt')", "open('<sandbox>/secret.txt')"),
            ("cd /home/alice/project", "cd <sandbox>/project"),
            (
                "/tmp/ipykernel_2/2922155320.py:2: UserWarning: careful",
                "<cell>:2: UserWarning: careful",
            ),
            (
                "/usr/lib/python3/dist-packages/yaml/__init__.py",
                "<site-packages>/yaml/__init__.py",
            ),
            (
                "/home/alice/.pyenv/versions/3.11.9/lib/python3.11/json/__init__.py",
                "<stdlib>/json/__init__.py",
            ),
            ("x = a/root/b", "x = a/root/b"),
            ("plain text, 3/4 done", "plain text, 3/4 done"),
        ];
        for (input, want) in cases {
            assert_eq!(scrub_paths(input), want, "input: {input}");
            // Idempotent.
            assert_eq!(scrub_paths(want), want);
        }
    }
}
