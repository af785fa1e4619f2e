//! The commands that make and fill a virtual environment, and what makes one
//! valid under another name, shared by image builds and the local model's
//! prepare (both build a venv in a temporary directory, then rename it).

use std::fs;
use std::path::Path;
use std::process::Command;

use super::Interpreter;

/// pip settings that would send packages somewhere other than the venv.
const PIP_REDIRECTS: [&str; 4] = ["PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER"];

/// `python -m venv <dir>`, isolated from the user's site-packages.
pub(crate) fn create(python: &Interpreter, dir: &Path) -> Command {
    let mut cmd = Command::new(&python.path);
    cmd.args(["-I", "-m", "venv"]).arg(dir);
    cmd
}

/// `pip <subcommand>` of the venv whose interpreter is `python`, quiet and
/// non-interactive; the caller adds the arguments. `-u`: pip's lines must
/// arrive as printed when they drive a progress bar.
pub(crate) fn pip(python: &Path, subcommand: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-u", "-m", "pip", subcommand]).args([
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
    ]);
    for var in PIP_REDIRECTS {
        cmd.env_remove(var);
    }
    cmd
}

/// `pip check`: the installed set is consistent (with `--no-deps` installs,
/// the only proof that the lock is complete).
pub(crate) fn pip_check(python: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-m", "pip", "check", "--disable-pip-version-check"]);
    cmd
}

/// A venv is not relocatable: console-script shebangs, the activate scripts
/// and pyvenv.cfg name the directory it was created in. Module code is fine
/// (imports find it relative to the interpreter, and .pyc paths are fixed up
/// on load), so only these text files need the final path.
pub(crate) fn rewrite_prefix(venv: &Path, from: &str, to: &str) -> std::io::Result<usize> {
    let mut files = vec![venv.join("pyvenv.cfg")];
    for entry in fs::read_dir(venv.join("bin"))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push(entry.path());
        }
    }
    let mut rewritten = 0;
    for file in files {
        // Binaries (not expected in bin/, but possible) are not text: skip.
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        if text.contains(from) {
            fs::write(&file, text.replace(from, to))?;
            rewritten += 1;
        }
    }
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_shebangs_and_cfg_but_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        fs::create_dir_all(venv.join("bin")).unwrap();
        fs::create_dir_all(venv.join("lib")).unwrap();
        let old = "/h/images/.tmp-fat-0123456789abcdef-42";
        let new = "/h/images/fat-0123456789abcdef";
        fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = /usr/bin\ncommand = /usr/bin/python3 -m venv {old}/venv\n"),
        )
        .unwrap();
        fs::write(
            venv.join("bin/ipython"),
            format!("#!{old}/venv/bin/python\nimport sys\n"),
        )
        .unwrap();
        fs::write(venv.join("lib/other.txt"), old).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", venv.join("bin/python")).unwrap();

        assert_eq!(rewrite_prefix(&venv, old, new).unwrap(), 2);
        let script = fs::read_to_string(venv.join("bin/ipython")).unwrap();
        assert_eq!(script, format!("#!{new}/venv/bin/python\nimport sys\n"));
        assert!(fs::read_to_string(venv.join("pyvenv.cfg"))
            .unwrap()
            .contains(&format!("venv {new}/venv")));
        assert_eq!(fs::read_to_string(venv.join("lib/other.txt")).unwrap(), old);
        assert_eq!(
            fs::read_link(venv.join("bin/python")).unwrap(),
            Path::new("/usr/bin/python3")
        );
    }

    #[test]
    fn pip_is_isolated_from_redirecting_settings() {
        let cmd = pip(Path::new("/v/bin/python"), "install");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(&args[..5], ["-I", "-u", "-m", "pip", "install"]);
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(removed.len(), PIP_REDIRECTS.len());
    }
}
