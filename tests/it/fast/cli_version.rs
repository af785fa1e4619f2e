//! `retrace --version` names the version and the commit it was built from.

use std::process::Command;

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_retrace"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = concat!("retrace ", env!("CARGO_PKG_VERSION"), " (");
    let commit = text
        .trim_end()
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `{prefix}COMMIT)`: {text:?}"));
    // Built from this checkout, the commit is git's own view of HEAD.
    let manifest = env!("CARGO_MANIFEST_DIR");
    let head = Command::new("git")
        .args(["-C", manifest, "rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let checkout = std::path::Path::new(manifest).join(".git").exists();
    match head {
        Some(head) if checkout => {
            let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
            assert_eq!(hash, head, "{text}");
        }
        _ => assert_eq!(commit, "unknown", "{text}"),
    }
}
