//! The confined installer against real pip: a locked closure from the
//! machine's configured index into a package store, a second install that
//! is a store hit, and wheels the installer must refuse (a `.pth` that runs
//! code, a hash that does not match), built here as real wheel files.

use crate::common;

use std::path::Path;
use std::time::Duration;

use retrace::pyenv::dynamic::{
    Allowlist, Finding, IndexSource, InstallError, Installer, PackageStore, Pin,
};
use retrace::pyenv::ImageName;

fn outside_tmp() -> tempfile::TempDir {
    common::outside_tmp()
}

fn installer(store: &Path) -> Installer {
    Installer::new(
        PackageStore::new(store.to_path_buf()),
        common::image(ImageName::Slim),
        common::sandbox(),
        Duration::from_secs(300),
    )
    .unwrap()
}

#[tokio::test]
async fn a_locked_closure_is_installed_once_then_served_from_the_store() {
    if common::lacks_root() {
        return;
    }
    let dir = outside_tmp();
    let installer = installer(&dir.path().join("packages"));
    let closure = Allowlist::embedded().unwrap().closure("sympy").unwrap();
    let names: Vec<&str> = closure.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"mpmath"), "{names:?}");

    let first = installer
        .install(&closure)
        .await
        .unwrap_or_else(|e| panic!("installing sympy from the configured index: {e}"));
    assert!(first.wheels.iter().all(|w| !w.store_hit));
    assert!(first.installer_ms > 0.0);
    for placed in &first.wheels {
        assert!(placed.site.is_dir(), "{}", placed.site.display());
        assert!(placed.entry.bytes > 0);
    }
    assert!(first
        .wheels
        .iter()
        .any(|w| w.site.join("sympy/__init__.py").is_file()));

    let second = installer.install(&closure).await.unwrap();
    assert!(second.wheels.iter().all(|w| w.store_hit));
    assert_eq!(second.installer_ms, 0.0, "a store hit runs no installer");
}

#[tokio::test]
async fn a_wheel_with_a_pth_that_runs_code_is_refused_and_not_published() {
    if common::lacks_root() {
        return;
    }
    let dir = outside_tmp();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let (_, pin) = common::wheel(
        &wheels,
        &[("demo_hook.pth", "import os; os.system('echo owned')\n")],
    );
    let store = dir.path().join("packages");
    let installer = installer(&store).with_source(IndexSource::local(&wheels));
    let err = installer
        .install(std::slice::from_ref(&pin))
        .await
        .unwrap_err();
    match &err {
        InstallError::Refused { findings, .. } => assert!(
            findings
                .iter()
                .any(|f| matches!(f, Finding::ExecutablePth { line: 1, .. })),
            "{findings:?}"
        ),
        other => panic!("expected a refusal, got {other}"),
    }
    assert!(err.to_string().contains("demo_hook.pth"), "{err}");
    assert!(PackageStore::new(store.clone()).entry(&pin).is_none());
    // Nothing of it is left anywhere in the store.
    let left: Vec<_> = walkdir::WalkDir::new(&store)
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == "demo_hook.pth")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_clean_local_wheel_is_published_and_a_wrong_hash_is_not() {
    if common::lacks_root() {
        return;
    }
    let dir = outside_tmp();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let (_, pin) = common::wheel(&wheels, &[]);
    let store = dir.path().join("packages");
    let installer = installer(&store).with_source(IndexSource::local(&wheels));

    let wrong = Pin {
        sha256: "0".repeat(64),
        ..pin.clone()
    };
    let err = installer
        .install(std::slice::from_ref(&wrong))
        .await
        .unwrap_err();
    assert!(
        matches!(err, InstallError::HashMismatch { .. }) && err.is_refusal(),
        "{err}"
    );
    assert!(err.to_string().contains("demo-pkg==1.0"), "{err}");
    assert!(PackageStore::new(store.clone()).entry(&wrong).is_none());

    let placed = installer.install(&[pin]).await.unwrap();
    let site = &placed.wheels[0].site;
    assert_eq!(
        std::fs::read_to_string(site.join("demo_pkg/__init__.py")).unwrap(),
        "VALUE = 42\n"
    );
}
