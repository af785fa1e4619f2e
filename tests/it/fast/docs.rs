//! The README stays a manual read in one sitting: at most 300 lines, and
//! every relative link in it leads to a file of the checkout. Detail goes
//! to the doc it belongs in (CONTRIBUTING.md, "Where new text goes").

use std::fs;
use std::path::Path;

/// The README's length limit, in lines (issue 49).
const MAX_LINES: usize = 300;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    let path = root().join("README.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The target of every inline link `[text](target)` outside fenced code
/// blocks, with its 1-based line number.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            // `[text](path "title")`: the target is what precedes the title.
            let target = after[..end].split_whitespace().next().unwrap_or("");
            targets.push((i + 1, target.to_string()));
            rest = &after[end + 1..];
        }
    }
    targets
}

/// A link to another site or to a heading of the README itself.
fn is_external_or_local_anchor(target: &str) -> bool {
    target.is_empty()
        || target.starts_with('#')
        || target.contains("://")
        || target.starts_with("mailto:")
}

#[test]
fn readme_stays_under_300_lines() {
    let lines = readme().lines().count();
    assert!(
        lines <= MAX_LINES,
        "README.md has {lines} lines, over its limit of {MAX_LINES}. The README holds what \
         retrace is, its requirements, the two commands, one example per subcommand, where \
         outputs go and links; move the rest to the doc it belongs in (docs/*.md: methodology, \
         outputs, sandbox, gateways, models, strategies, reliability, ci, install), measured \
         numbers to benches/README.md and test facts to tests/README.md, and leave a link \
         (CONTRIBUTING.md, \"Where new text goes\")"
    );
}

#[test]
fn readme_relative_links_lead_to_files() {
    let text = readme();
    let targets = link_targets(&text);
    assert!(
        targets.iter().any(|(_, t)| t.starts_with("docs/")),
        "no link into docs/ found in README.md: the link reader is broken ({targets:?})"
    );
    let broken: Vec<String> = targets
        .iter()
        .filter(|(_, target)| !is_external_or_local_anchor(target))
        .filter_map(|(line, target)| {
            let path = target.split('#').next().unwrap_or("");
            let exists = !path.is_empty() && root().join(path).exists();
            (!exists).then(|| format!("README.md:{line}: {target}"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "links in README.md to files that do not exist (a relative link is relative to the \
         checkout's root):\n{}",
        broken.join("\n")
    );
}

#[test]
fn link_targets_are_read_outside_code_blocks() {
    let text = "see [a](docs/a.md#x) and [`b`](b.md \"title\")\n\
                ```\n\
                [not](a/link.md)\n\
                ```\n\
                [c](https://example.org) [d](#local)\n";
    let targets = link_targets(text);
    assert_eq!(
        targets,
        [
            (1, "docs/a.md#x".to_string()),
            (1, "b.md".to_string()),
            (5, "https://example.org".to_string()),
            (5, "#local".to_string()),
        ]
    );
    let kept: Vec<&str> = targets
        .iter()
        .map(|(_, t)| t.as_str())
        .filter(|t| !is_external_or_local_anchor(t))
        .collect();
    assert_eq!(kept, ["docs/a.md#x", "b.md"]);
}
