//! A full `$RETRACE_HOME`, on a tmpfs this test mounts (so as root): an
//! image build, the local model's prepare and a package store install each
//! stop with an error that names the file system, the path, the space free
//! and (where known) needed; nothing half-written is left or used, and once
//! the tmpfs has grown the next attempt makes it whole. Also a run
//! directory on a full file system, as retrace treats it today.

use crate::common::{self, retrace};

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use retrace::model::local::ModelStore;
use retrace::pyenv::dynamic::{IndexSource, InstallError, Installer, PackageStore};
use retrace::pyenv::{ImageName, ImageStore, PyenvError};

const MB: u64 = 1 << 20;

/// A tmpfs of its own, unmounted when dropped (also when the test fails).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Outside /tmp: confined processes have their own /tmp.
    fn mount(size: u64) -> Tmpfs {
        let dir = common::outside_tmp();
        let options = format!("size={size},mode=755");
        mount(
            Some("tmpfs"),
            dir.path(),
            Some("tmpfs"),
            MsFlags::empty(),
            Some(options.as_str()),
        )
        .expect("mounting a tmpfs (needs root)");
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Grows (or shrinks, down to what is used) the file system in place.
    fn resize(&self, size: u64) {
        let options = format!("size={size}");
        mount(
            None::<&str>,
            self.path(),
            None::<&str>,
            MsFlags::MS_REMOUNT,
            Some(options.as_str()),
        )
        .unwrap_or_else(|e| panic!("resizing the tmpfs to {size}: {e}"));
    }

    fn used(&self) -> u64 {
        let s = nix::sys::statvfs::statvfs(self.path()).unwrap();
        #[allow(clippy::unnecessary_cast)]
        let used = (s.blocks() - s.blocks_free()) as u64 * s.fragment_size() as u64;
        used
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Detached: a process of a failed test may still hold a file there.
        let _ = umount2(self.path(), MntFlags::MNT_DETACH);
    }
}

/// Names under `dir` (recursively) that a builder or installer writes
/// before publishing: `.tmp-*`, `.old-*`, anything in the store's `.work/`.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .map(|e| e.into_path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with(".tmp-")
                || name.starts_with(".old-")
                || p.parent().is_some_and(|d| d.ends_with(".work"))
        })
        .collect()
}

/// The error names the file system, the place and the space, and says
/// what to do.
fn assert_says_full(text: &str, home: &Path, place: &Path) {
    for part in [
        format!("no space left on {}", home.display()),
        place.display().to_string(),
        " free".into(),
        "set RETRACE_HOME".into(),
    ] {
        assert!(text.contains(&part), "no {part:?} in: {text}");
    }
}

#[test]
fn an_image_build_that_fills_the_home_stops_and_the_next_one_builds_it_whole() {
    if common::lacks_root() {
        return;
    }
    // The venv fits, the packages do not.
    let disk = Tmpfs::mount(48 * MB);
    let home = disk.path();
    let build = || {
        retrace(["image", "build", "slim"])
            .env("RETRACE_HOME", home)
            .run()
    };
    let o = build();
    assert_ne!(o.code, 0, "{o}");
    let images = home.join("images");
    assert_says_full(&o.stderr, home, &images);
    assert!(o.stderr.contains("needed"), "{}", o.stderr);
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
    let store = ImageStore::new(home.to_path_buf());
    assert!(
        matches!(
            store.image(ImageName::Slim),
            Err(PyenvError::NotBuilt { .. })
        ),
        "a failed build is not an image"
    );

    disk.resize(1024 * MB);
    let o = build();
    assert_eq!(o.code, 0, "{o}");
    let image = store.image(ImageName::Slim).expect("built whole");
    assert!(image.python().is_file());
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
}

#[test]
fn a_model_prepare_that_fills_the_home_stops_at_each_step_and_resumes_whole() {
    if common::lacks_root() {
        return;
    }
    let disk = Tmpfs::mount(24 * MB);
    let home = disk.path();
    let models = ModelStore::new(home.to_path_buf());
    // Not compiled here (minutes): a stand-in in the cache of compiled
    // servers, which is what an environment rebuilt on this machine uses.
    let cached = models.cached_llama_server().unwrap();
    fs::create_dir_all(cached.parent().unwrap()).unwrap();
    fs::write(&cached, "#!/bin/sh\necho 'version: 0 (stand-in)' >&2\n").unwrap();
    fs::set_permissions(&cached, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let prepare = || {
        retrace(["model", "prepare", "smollm2-135m-instruct"])
            .env("RETRACE_HOME", home)
            .run()
    };

    // 1. The server's venv and build tools do not fit.
    let o = prepare();
    assert_ne!(o.code, 0, "{o}");
    assert_says_full(&o.stderr, home, &models.dir());
    assert!(o.stderr.contains("needed"), "{}", o.stderr);
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
    assert!(
        models.current().is_err(),
        "a failed prepare is not a server"
    );

    // 2. The server fits, the weights (about 98 MB, twice while joined) do not.
    disk.resize(disk.used() + 160 * MB);
    let o = prepare();
    assert_ne!(o.code, 0, "{o}");
    let weights = models.weights_dir_of("smollm2-135m-instruct");
    assert_says_full(&o.stderr, home, &weights);
    assert!(o.stderr.contains("about 197 MB needed"), "{}", o.stderr);
    assert!(models.current().is_ok(), "the server was prepared whole");
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
    let status = models.status();
    let smol = status
        .models
        .iter()
        .find(|m| m.model == "local:smollm2-135m-instruct")
        .unwrap();
    assert!(!smol.prepared, "half-written weights are not a model");

    disk.resize(disk.used() + 400 * MB);
    let o = prepare();
    assert_eq!(o.code, 0, "{o}");
    let status = models.status();
    let smol = status
        .models
        .iter()
        .find(|m| m.model == "local:smollm2-135m-instruct")
        .unwrap();
    assert!(smol.prepared, "{:?}", smol.reason);
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
}

#[tokio::test]
async fn a_store_install_that_fills_the_home_stops_and_the_next_one_publishes_it_whole() {
    if common::lacks_root() {
        return;
    }
    let disk = Tmpfs::mount(1024 * MB);
    let home = disk.path();
    let image = ImageStore::new(home.to_path_buf())
        .ensure(ImageName::Slim, false)
        .unwrap_or_else(|e| panic!("building the slim image into the tmpfs: {e}"));
    let wheels = common::outside_tmp();
    // Stored uncompressed: 8 MB in the store entry.
    let data = "x".repeat(8 * MB as usize);
    let (_, pin) = common::wheel_by(
        &image.python(),
        wheels.path(),
        &[("demo_pkg/data.txt", &data)],
    );
    let root = home.join("packages");
    let installer = Installer::new(
        PackageStore::new(root.clone()),
        image,
        common::sandbox(),
        Duration::from_secs(300),
    )
    .unwrap()
    .with_source(IndexSource::local(wheels.path()));

    // A store with 2 MB to spare.
    disk.resize(disk.used() + 2 * MB);
    let err = installer
        .install(std::slice::from_ref(&pin))
        .await
        .unwrap_err();
    assert!(matches!(err, InstallError::NoSpace(_)), "{err:?}");
    let text = retrace::util::disk::chain_text(&err);
    assert_says_full(&text, home, &root);
    assert!(text.contains("demo-pkg==1.0"), "{text}");
    assert!(installer.store().entry(&pin).is_none());
    assert!(
        !installer.store().site(&pin).exists(),
        "nothing half-written"
    );
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));

    disk.resize(disk.used() + 64 * MB);
    let done = installer.install(std::slice::from_ref(&pin)).await.unwrap();
    assert!(!done.wheels[0].store_hit, "installed anew");
    let site = installer.store().site(&pin);
    assert_eq!(
        fs::metadata(site.join("demo_pkg/data.txt")).unwrap().len(),
        8 * MB
    );
    assert!(leftovers(home).is_empty(), "{:?}", leftovers(home));
}

/// Fills the file system at `dir` to the last byte.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut filler = fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while filler.write(&chunk).is_ok_and(|n| n > 0) {}
    // The last partial page: single bytes until none fits.
    while filler.write(&[0]).is_ok_and(|n| n > 0) {}
}

/// Today's behaviour, kept: a run whose directory is on a full file system
/// stops before any task with an error naming the file it could not write.
#[test]
fn a_run_directory_on_a_full_file_system_stops_naming_the_file() {
    if common::lacks_root() {
        return;
    }
    let disk = Tmpfs::mount(MB);
    fill(disk.path());
    let out = disk.path().join("run");
    let o = retrace([
        "run",
        "--suite",
        "math",
        "--model",
        "oracle",
        "--limit-tasks",
        "1",
        "--rounds",
        "0",
        "--out",
        out.to_str().unwrap(),
    ])
    .image(ImageName::Fat)
    .run();
    assert_ne!(o.code, 0, "{o}");
    assert!(o.stderr.contains(&out.display().to_string()), "{o}");
    assert!(o.stderr.contains("No space left on device"), "{o}");
    assert!(!out.join("results.jsonl").exists(), "no task ran");
}
