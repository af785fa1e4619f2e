//! llama.cpp's own HTTP server, `llama-server`: several slots decoded
//! together (continuous batching), a prompt cache per slot and in RAM.
//! Compiled from the llama.cpp sources that the pinned llama-cpp-python
//! sdist vendors (a hashed source release on the package index, which pip
//! can fetch wherever retrace runs), with the cmake and ninja that pip
//! installs into the server venv (pinned in the same lock), for this CPU
//! without AMX ([`BUILD_FLAGS`]).
//!
//! The binary lands in the environment's `bin/`, and a copy in
//! `models/.build-cache/<key>/`, keyed by the source version, the flags and
//! [`BUILD_FORMAT`]: an environment rebuilt for another lock or interpreter
//! takes it from there instead of compiling llama.cpp again (minutes).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::server_env::BUILD_FLAGS;
use crate::pyenv::progress::Total;
use crate::pyenv::recipe::{Recipe, Workspace};
use crate::pyenv::venv;

/// The binary's name, in the environment's `bin/`.
pub const LLAMA_SERVER: &str = "llama-server";
/// Bumped when the cmake options below change.
const BUILD_FORMAT: u32 = 1;
const CACHE_DIR: &str = ".build-cache";

/// cmake options: the server alone, statically linked (one file to keep),
/// no tests or examples, no network (no prebuilt web UI fetched, no TLS):
/// it only ever listens on 127.0.0.1 for retrace.
const CMAKE_OPTIONS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
];

/// Unpacks `argv[1]` into `argv[2]`, refusing members that would land
/// outside it (tarfile's `data` filter where the interpreter has it, the
/// same checks by hand on older 3.11 patch releases).
const UNPACK: &str = r#"
import sys, tarfile
t = tarfile.open(sys.argv[1])
if hasattr(tarfile, "data_filter"):
    t.extractall(sys.argv[2], filter="data")
else:
    def outside(name):
        return name.startswith("/") or ".." in name.split("/")
    for m in t.getmembers():
        if outside(m.name) or ((m.issym() or m.islnk()) and outside(m.linkname)) or m.isdev():
            sys.exit(f"refusing {m.name!r}: it would land outside the sources")
    t.extractall(sys.argv[2])
"#;

/// The cache entry for llama.cpp `version` built by this retrace.
fn cache_key(version: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(BUILD_FLAGS.as_bytes());
    for o in CMAKE_OPTIONS {
        hash.update(o.as_bytes());
    }
    let digest = hex::encode(hash.finalize());
    format!("{LLAMA_SERVER}-{version}-f{BUILD_FORMAT}-{}", &digest[..12])
}

/// Where a `llama-server` compiled from llama-cpp-python `version`'s
/// sources is kept under `models_dir`: one there is used instead of
/// compiling again.
pub(super) fn cached_binary(models_dir: &Path, version: &str) -> PathBuf {
    models_dir
        .join(CACHE_DIR)
        .join(cache_key(version))
        .join(LLAMA_SERVER)
}

/// Puts a `llama-server` built from llama-cpp-python `version`'s sources
/// into `work`'s `bin/`, from the cache under `models_dir` or compiled now;
/// returns what the binary says its version is.
pub(super) fn install<R: Recipe>(
    work: &Workspace<'_, R>,
    python: &Path,
    version: &str,
    models_dir: &Path,
) -> Result<String, R::Error> {
    let bin = work.tmp.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| work.failed("create bin/", e.to_string()))?;
    let target = bin.join(LLAMA_SERVER);
    let cached = cached_binary(models_dir, version);
    if !cached.is_file() {
        compile(work, python, version, &cached)?;
    } else {
        work.log
            .line(&format!("# {LLAMA_SERVER} from {}", cached.display()));
    }
    std::fs::copy(&cached, &target).map_err(|e| {
        work.failed(
            "copy llama-server",
            format!("{} -> {}: {e}", cached.display(), target.display()),
        )
    })?;
    server_version(work, &target)
}

/// Ninja's progress line `[done/total] what`.
fn ninja_step(line: &str) -> Option<(u64, u64, &str)> {
    let (counts, what) = line.strip_prefix('[')?.split_once("] ")?;
    let (done, total) = counts.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?, what))
}

/// Fetches the sources, configures and builds, and stores the binary at
/// `cached` (written under a temporary name and renamed: never half there).
fn compile<R: Recipe>(
    work: &Workspace<'_, R>,
    python: &Path,
    version: &str,
    cached: &Path,
) -> Result<(), R::Error> {
    let src = work.tmp.join("llama-src");
    let phase = work
        .progress
        .phase("fetch the llama.cpp sources", Total::None);
    let step = "fetch the llama.cpp sources (pip download)";
    let mut download = venv::pip(python, "download");
    download
        .args([
            "--no-deps",
            "--no-binary",
            super::server_env::SOURCES_PACKAGE,
        ])
        .arg(format!("{}=={version}", super::server_env::SOURCES_PACKAGE))
        .arg("-d")
        .arg(&src);
    work.run(step, &mut download)?;
    let sdist = std::fs::read_dir(&src)
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        })
        .ok_or_else(|| work.failed(step, format!("no .tar.gz in {}", src.display())))?;
    let mut extract = Command::new(python);
    extract.args(["-I", "-c", UNPACK]).arg(&sdist).arg(&src);
    work.run("unpack the llama.cpp sources", &mut extract)?;
    phase.finish();
    let root = sdist
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".tar.gz"))
        .map(|n| src.join(n).join("vendor").join("llama.cpp"))
        .filter(|p| p.join("CMakeLists.txt").is_file())
        .ok_or_else(|| work.failed(step, "the sdist holds no vendor/llama.cpp".into()))?;

    let tools = python.parent().expect("a venv's bin/").to_path_buf();
    let build = src.join("build");
    let phase = work.progress.phase(
        "compile llama-server (once per machine; about 5 min on 2 cores)",
        Total::None,
    );
    phase.announce("cmake is configuring llama.cpp");
    let mut configure = build_command(&tools, "cmake");
    configure
        .arg("-S")
        .arg(&root)
        .arg("-B")
        .arg(&build)
        .args(["-G", "Ninja"])
        .arg(format!(
            "-DCMAKE_MAKE_PROGRAM={}",
            tools.join("ninja").display()
        ))
        .args(CMAKE_OPTIONS);
    work.run("configure llama.cpp (cmake)", &mut configure)?;
    let mut compile = build_command(&tools, "cmake");
    compile
        .arg("--build")
        .arg(&build)
        .args(["--target", LLAMA_SERVER, "-j"])
        .arg(jobs().to_string());
    work.run_reading(
        "compile llama-server (cmake --build)",
        &mut compile,
        |line| {
            // Ninja's `[done/total] what`: the bar says how far, and how
            // long is left.
            if let Some((done, total, what)) = ninja_step(line) {
                phase.set_steps(done, total);
                phase.set_message(what.chars().take(70).collect::<String>());
            }
        },
    )?;
    phase.finish();

    let built = build.join("bin").join(LLAMA_SERVER);
    let dir = cached.parent().expect("a cache entry's directory");
    let partial = dir.with_extension(format!("tmp-{}", std::process::id()));
    let stored = std::fs::create_dir_all(&partial)
        .and_then(|_| std::fs::copy(&built, partial.join(LLAMA_SERVER)))
        .and_then(|_| {
            let _ = std::fs::remove_dir_all(dir);
            std::fs::rename(&partial, dir)
        });
    if let Err(e) = stored {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(work.failed(
            "keep the built llama-server",
            format!("{} into {}: {e}", built.display(), dir.display()),
        ));
    }
    // The sources and objects (hundreds of MB) are not needed any more.
    let _ = std::fs::remove_dir_all(&src);
    Ok(())
}

/// `tool` from the venv's `bin/`, with the flags that keep AMX out and the
/// venv's tools first on `PATH`.
fn build_command(tools: &Path, tool: &str) -> Command {
    let mut cmd = Command::new(tools.join(tool));
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let mut paths = vec![tools.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths).unwrap_or(path))
        .env("CFLAGS", BUILD_FLAGS)
        .env("CXXFLAGS", BUILD_FLAGS);
    cmd
}

/// Compile jobs: every CPU this process may use.
fn jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `llama-server --version`: its build number and commit (it prints them
/// on stderr), checked to run at all on this CPU.
fn server_version<R: Recipe>(work: &Workspace<'_, R>, binary: &Path) -> Result<String, R::Error> {
    let step = "run llama-server --version";
    let out = Command::new(binary)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| work.failed(step, format!("{}: {e}", binary.display())))?;
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    work.log.line(text.trim_end());
    if !out.status.success() {
        return Err(work.failed(step, format!("it exited with {}", out.status)));
    }
    Ok(parse_version(&text).unwrap_or_else(|| "unknown".into()))
}

/// `version: 7310 (abc1234)` → `7310 (abc1234)`.
fn parse_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("version:"))
        .map(|v| v.trim().to_string())
}

/// Where a prepared environment keeps its `llama-server`.
pub fn binary_in(env_dir: &Path) -> PathBuf {
    env_dir.join("bin").join(LLAMA_SERVER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_what_the_binary_prints() {
        let text = "load_backend: loaded CPU backend\nversion: 7310 (abc1234)\nbuilt with cc\n";
        assert_eq!(parse_version(text).as_deref(), Some("7310 (abc1234)"));
        assert_eq!(parse_version("nothing"), None);
    }

    #[test]
    fn ninja_progress_lines_give_done_and_total() {
        assert_eq!(
            ninja_step("[12/340] Building CXX object src/llama.cpp.o"),
            Some((12, 340, "Building CXX object src/llama.cpp.o"))
        );
        assert_eq!(ninja_step("-- Configuring done"), None);
        assert_eq!(ninja_step("[a/b] x"), None);
    }

    #[test]
    fn the_cache_key_names_the_version_and_changes_with_the_build() {
        let key = cache_key("0.3.36");
        assert!(key.starts_with("llama-server-0.3.36-f1-"), "{key}");
        assert_ne!(key, cache_key("0.3.37"));
    }
}
