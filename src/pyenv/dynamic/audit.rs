//! What an install put on disk that could run code without being imported:
//! checked after every install, before a kernel may see the result.
//!
//! - a `.pth` line starting with `import` runs at every interpreter start
//!   (site.py executes it; the litellm 1.82.7 `.pth` stole credentials);
//! - `sitecustomize` / `usercustomize` run at every start too;
//! - console scripts named like `python`, `pip` or a shell would shadow
//!   them on a PATH that includes the package's `bin/`.
//!
//! Plain `.pth` lines that only name directories are harmless and allowed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use walkdir::WalkDir;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Finding {
    /// A `.pth` file with a line that Python executes.
    ExecutablePth { file: PathBuf, line: usize },
    /// `sitecustomize` or `usercustomize` (a module or a package).
    StartupHook { file: PathBuf },
    /// A console script that shadows an interpreter, pip or a shell.
    ShadowingScript { file: PathBuf },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::ExecutablePth { file, line } => {
                write!(
                    f,
                    "{}:{line} runs code at interpreter start",
                    file.display()
                )
            }
            Finding::StartupHook { file } => {
                write!(f, "{} runs at interpreter start", file.display())
            }
            Finding::ShadowingScript { file } => {
                write!(f, "{} shadows a system command", file.display())
            }
        }
    }
}

const HOOKS: [&str; 2] = ["sitecustomize", "usercustomize"];

fn shadows(name: &str) -> bool {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(base, "python" | "pip" | "sh" | "bash" | "env" | "uv")
}

/// Every finding under `root` (an install target: packages at the top,
/// scripts in `bin/`), paths relative to `root`, sorted.
pub fn audit(root: &Path) -> std::io::Result<Vec<Finding>> {
    let mut found = Vec::new();
    for entry in WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(std::io::Error::other)?;
        let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
        let name = entry.file_name().to_string_lossy();
        let top_level = relative.components().count() == 1;
        let stem = name.split('.').next().unwrap_or_default();
        if top_level && HOOKS.contains(&stem) {
            found.push(Finding::StartupHook {
                file: relative.to_path_buf(),
            });
        } else if entry.file_type().is_file() && name.ends_with(".pth") {
            let text = std::fs::read_to_string(entry.path())?;
            // site.py: a line starting with `import` (then space or tab) is
            // executed; anything else is a path.
            for (i, line) in text.lines().enumerate() {
                if line.starts_with("import ") || line.starts_with("import\t") {
                    found.push(Finding::ExecutablePth {
                        file: relative.to_path_buf(),
                        line: i + 1,
                    });
                }
            }
        } else if relative.parent() == Some(Path::new("bin")) && shadows(&name) {
            found.push(Finding::ShadowingScript {
                file: relative.to_path_buf(),
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn code_that_runs_at_start_is_found_and_plain_paths_are_not() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        write(root, "numpy/__init__.py", "");
        write(root, "distutils-precedence.pth", "some/dir\n# comment\n");
        write(
            root,
            "evil_init.pth",
            "lib\nimport os; os.system('curl x')\n",
        );
        write(root, "sitecustomize.py", "print('hi')\n");
        write(root, "usercustomize/__init__.py", "");
        write(root, "pkg/sitecustomize.py", ""); // not at the top: never run
        write(root, "bin/python3.11", "#!/bin/sh\n");
        write(root, "bin/pip", "#!/bin/sh\n");
        write(root, "bin/f2py", "#!/bin/sh\n");
        let found = audit(root).unwrap();
        assert_eq!(
            found,
            [
                Finding::ShadowingScript {
                    file: "bin/pip".into()
                },
                Finding::ShadowingScript {
                    file: "bin/python3.11".into()
                },
                Finding::ExecutablePth {
                    file: "evil_init.pth".into(),
                    line: 2
                },
                Finding::StartupHook {
                    file: "sitecustomize.py".into()
                },
                Finding::StartupHook {
                    file: "usercustomize".into()
                },
            ]
        );
        assert!(found[2].to_string().contains("evil_init.pth:2"));
    }

    #[test]
    fn a_clean_tree_has_no_findings() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "scipy/__init__.py", "import os\n");
        write(t.path(), "scipy-1.17.1.dist-info/RECORD", "");
        write(t.path(), "bin/f2py", "");
        assert!(audit(t.path()).unwrap().is_empty());
    }
}
