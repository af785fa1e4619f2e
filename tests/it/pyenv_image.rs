//! Real image builds into a throwaway RETRACE_HOME (needs a Python with venv
//! and access to pip's configured index).

use std::fs;
use std::path::Path;
use std::process::Command;

use retrace::pyenv::{ImageName, ImageStore, KERNEL_CONFIG};

use crate::common;

#[test]
fn slim_builds_once_concurrently_and_runs_ipykernel() {
    let home = tempfile::tempdir().unwrap();
    let store = ImageStore::new(home.path().to_path_buf());
    let before = store.list();
    assert!(before.iter().all(|i| !i.built), "{before:#?}");

    // Two builders at once (separate stores, as two processes would be):
    // one builds, the other waits for the lock and finds it complete.
    let images: Vec<_> = std::thread::scope(|s| {
        let builders: Vec<_> = (0..2)
            .map(|_| {
                let store = ImageStore::new(home.path().to_path_buf());
                s.spawn(move || store.build(ImageName::Slim, false))
            })
            .collect();
        builders
            .into_iter()
            .map(|b| b.join().unwrap().unwrap_or_else(|e| panic!("{e}")))
            .collect()
    });
    assert_eq!(images[0], images[1]);
    let image = &images[0];

    let slim = store
        .list()
        .into_iter()
        .find(|i| i.name == ImageName::Slim)
        .unwrap();
    assert!(slim.built);
    assert_eq!(slim.path, image.dir);
    assert_eq!(slim.lock_hash, image.lock_hash);
    assert!(slim.size_bytes.unwrap() > 10 << 20, "{slim:?}");
    assert!(slim.python_version.is_some());

    // Idempotent: nothing is rebuilt.
    let marker = fs::read(image.dir.join("complete.json")).unwrap();
    assert_eq!(&store.build(ImageName::Slim, false).unwrap(), image);
    assert_eq!(&store.ensure(ImageName::Slim, false).unwrap(), image);
    assert_eq!(&store.image(ImageName::Slim).unwrap(), image);
    assert_eq!(fs::read(image.dir.join("complete.json")).unwrap(), marker);

    let out = Command::new(image.python())
        .args([
            "-I",
            "-c",
            "import ipykernel, IPython; print(ipykernel.__version__)",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs::read_to_string(image.kernel_config()).unwrap(),
        KERNEL_CONFIG
    );
    assert_eq!(image.mpl_cache(), None);

    // Published under the final name only, with no trace of the temporary
    // one in anything but bytecode (whose paths Python fixes up on import).
    let images_dir = home.path().join("images");
    let tmp_left: Vec<_> = fs::read_dir(&images_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(tmp_left.is_empty(), "{tmp_left:?}");
    assert_tree(&image.dir, &mut |path, meta| {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        assert!(mode & 0o004 != 0, "{} not world-readable", path.display());
        if meta.is_dir() {
            assert!(mode & 0o001 != 0, "{} not traversable", path.display());
        }
        if meta.is_file() && path.extension().is_none_or(|e| e != "pyc") {
            let bytes = fs::read(path).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("/images/.tmp-"),
                "{} still names the temporary build dir",
                path.display()
            );
        }
    });
    let log = home
        .path()
        .join("logs")
        .join(format!("image-slim-{}.log", image.lock_hash));
    assert!(fs::read_to_string(log)
        .unwrap()
        .contains("Successfully installed"));

    // A $RETRACE_HOME under /tmp (this one): the kernel's own /tmp is a
    // private tmpfs, which must not hide the image bound below it; started
    // cold and from the zygote.
    if common::lacks_root() {
        return;
    }
    for start in ["cold", "zygote"] {
        let ran = common::retrace(["exec", "--image", "slim", "--kernel-start", start, "-"])
            .env("RETRACE_HOME", home.path())
            .stdin("import ipykernel, sys; print(6 * 7, sys.prefix)\n")
            .run();
        assert_eq!(ran.code, 0, "{start}: {}", ran.stderr);
        let prefix = image.dir.join("venv");
        assert!(
            ran.stdout.contains(&format!("42 {}", prefix.display())),
            "{start}: {}",
            ran.stdout
        );
    }
}

/// Uses the shared fat image (`$RETRACE_HOME`, built once for every test
/// that needs it) rather than a second 755 MB build in a temporary home.
#[test]
fn fat_builds_with_a_warm_font_cache() {
    let home = tempfile::tempdir().unwrap();
    let image = ImageStore::from_env()
        .ensure(ImageName::Fat, false)
        .unwrap_or_else(|e| panic!("{e}"));
    let cache = image.mpl_cache().expect("fat has matplotlib");

    // A kernel copies the cache; matplotlib must then not rebuild it.
    let copy = home.path().join("kernel-mplconfig");
    fs::create_dir(&copy).unwrap();
    for entry in fs::read_dir(&cache).unwrap().flatten() {
        fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let out = Command::new(image.python())
        .env("MPLCONFIGDIR", &copy)
        .args([
            "-I",
            "-c",
            "import matplotlib; matplotlib.use('agg'); import matplotlib.pyplot as plt; \
             import numpy, pandas, scipy, sympy, sklearn, statsmodels.api, networkx, seaborn; \
             plt.plot([1, 2]); plt.savefig('/dev/null', format='png')",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("font cache"), "{stderr}");
}

/// Calls `check` on everything under `root` except symlinks (not followed).
fn assert_tree(root: &Path, check: &mut dyn FnMut(&Path, &fs::Metadata)) {
    for entry in walkdir::WalkDir::new(root).follow_root_links(false) {
        let entry = entry.unwrap();
        if !entry.path_is_symlink() {
            check(entry.path(), &entry.metadata().unwrap());
        }
    }
}
