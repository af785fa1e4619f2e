//! A cold install through retrace's own installer: the locked closure of
//! one allowed distribution (default scipy) into a fresh, temporary package
//! store, so nothing is a store hit and pip has no cache. This is what the
//! `dynamic` strategy pays on a store miss: the confined jail (own cgroup,
//! kernel user, filesystem view), pip per wheel, the audit and publishing.
//! Needs root (the installer is confined).
//!
//! ```text
//! cargo run --profile bench --example install_cold -- [--runs N] [--dist scipy] [--init PATH]
//! ```
//!
//! `--init` is the `retrace` binary (the sandbox's init); by default the one
//! built beside this example. Prints `installer_ms=` per run, then the median.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use retrace::pyenv::dynamic::{Allowlist, Installer, PackageStore};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::{Confined, Sandbox};

struct Args {
    runs: usize,
    dist: String,
    init: PathBuf,
}

fn args() -> Args {
    let mut args = Args {
        runs: 1,
        dist: "scipy".into(),
        // target/<profile>/examples/install_cold → target/<profile>/retrace
        init: std::env::current_exe()
            .expect("own path")
            .parent()
            .and_then(|examples| examples.parent())
            .expect("built under target/<profile>/examples")
            .join("retrace"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value().parse().expect("--runs N"),
            "--dist" => args.dist = value(),
            "--init" => args.init = PathBuf::from(value()),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

#[tokio::main]
async fn main() {
    let args = args();
    let sandbox: Arc<dyn Sandbox> = match Confined::open(args.init.clone()) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("the installer runs confined and needs root: {e}"),
    };
    let images = ImageStore::from_env();
    let slim = images
        .ensure(ImageName::Slim, false)
        .unwrap_or_else(|e| panic!("building the slim image: {e}"));
    let closure = Allowlist::embedded()
        .expect("the embedded allowlist")
        .closure(&args.dist)
        .unwrap_or_else(|| panic!("{} is not on the allowlist", args.dist));
    let names: Vec<String> = closure
        .iter()
        .map(|p| format!("{}=={}", p.name, p.version))
        .collect();
    eprintln!("cold install of {} ({})", args.dist, names.join(" "));
    let mut times = Vec::new();
    for _ in 0..args.runs {
        // Beside the real store, not under /tmp: the installer's /tmp is
        // its own.
        std::fs::create_dir_all(images.home()).expect("creating RETRACE_HOME");
        let tmp = tempfile::tempdir_in(images.home()).expect("a temporary store");
        let installer = Installer::new(
            PackageStore::new(tmp.path().join("packages")),
            slim.clone(),
            sandbox.clone(),
            Duration::from_secs(600),
        )
        .expect("the installer");
        let t = Instant::now();
        let installed = installer
            .install(&closure)
            .await
            .unwrap_or_else(|e| panic!("installing {}: {e}", args.dist));
        let wall = t.elapsed().as_secs_f64() * 1e3;
        assert!(installed.wheels.iter().all(|w| !w.store_hit));
        let bytes: u64 = installed.wheels.iter().map(|w| w.entry.bytes).sum();
        println!(
            "installer_ms={:.0} wall_ms={wall:.0} bytes={bytes}",
            installed.installer_ms
        );
        times.push(installed.installer_ms);
    }
    times.sort_by(f64::total_cmp);
    println!("median_installer_ms={:.0}", times[times.len() / 2]);
}
