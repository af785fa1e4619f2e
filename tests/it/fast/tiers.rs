//! The test tiers are written twice: as commands in tests/README.md and as
//! the module list `.ci/timings` sorts CI's per-test times by. Both must
//! name the same `it` modules, and every one of them must exist, so that a
//! renamed module cannot silently change tier.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `NAME::` filters of the README's command that starts with `prefix`,
/// the ones after `--skip` or the others.
fn filters(readme: &str, prefix: &str, skipped: bool) -> BTreeSet<String> {
    let line = readme
        .lines()
        .find(|l| l.contains(&format!("`{prefix}")))
        .unwrap_or_else(|| panic!("tests/README.md has no `{prefix}…` command"));
    let command = line.split(&format!("`{prefix}")).nth(1).unwrap();
    let command = command.split('`').next().unwrap();
    let words: Vec<&str> = command.split_whitespace().collect();
    words
        .iter()
        .enumerate()
        .filter(|(i, w)| w.ends_with("::") && (*i > 0 && words[i - 1] == "--skip") == skipped)
        .map(|(_, w)| w.trim_end_matches("::").to_string())
        .collect()
}

#[test]
fn the_tiers_of_the_readme_are_those_ci_times() {
    let readme = read("tests/README.md");
    let timings = read(".ci/timings");
    let listed = timings
        .lines()
        .find_map(|l| l.strip_prefix("externals='"))
        .expect(".ci/timings names the externals' modules")
        .trim_end_matches('\'');
    let ci: BTreeSet<String> = listed.split_whitespace().map(String::from).collect();

    let prefix = "cargo test --test it -- ";
    let externals = filters(&readme, prefix, false);
    // `gateway::` also selects `enterprise_gateway::`, `gateway_fixture::`
    // `enterprise_gateway_fixture::`: CI lists each module.
    let selected: BTreeSet<String> = ci
        .iter()
        .filter(|m| !externals.contains(*m))
        .filter(|m| !externals.iter().any(|e| m.ends_with(&format!("_{e}"))))
        .cloned()
        .collect();
    assert!(
        selected.is_empty(),
        "in .ci/timings, not the README's externals command: {selected:?}"
    );
    assert!(
        externals.is_subset(&ci),
        "README {externals:?}, .ci/timings {ci:?}"
    );

    let kernels = filters(&readme, "cargo test --test it --test kernel_zygote", true);
    let mut want = externals.clone();
    want.insert("fast".into());
    assert_eq!(
        kernels, want,
        "the kernels tier skips fast:: and the externals"
    );

    let main = read("tests/it/main.rs");
    for module in &ci {
        assert!(
            main.contains(&format!("\nmod {module};")),
            "tests/it/main.rs has no module {module}"
        );
    }
}
