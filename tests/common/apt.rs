//! Debian packages a test needs from the machine (`openssh-server`,
//! `chromium`), installed with apt-get when missing: under a file lock
//! across test processes (dpkg allows one install at a time), without
//! starting any service a package brings, and only as root.

use std::fs::{self, File};
use std::path::Path;
use std::process::Command;

/// Debian's hook that `invoke-rc.d` asks before starting a service.
const POLICY_RC_D: &str = "/usr/sbin/policy-rc.d";

/// Installs `package` unless `installed` (the file it provides, e.g.
/// `/usr/sbin/sshd`) exists. Panics with the reason and the install log's
/// tail when it cannot, or when the file is still missing after it.
/// Callers keep their own `OnceLock`: this checks the file each time.
pub fn ensure(package: &str, installed: &Path) {
    if installed.exists() {
        return;
    }
    let root = super::venv::root();
    let lock_path = root.join(format!("{package}.lock"));
    let lock = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("creating {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("locking {}: {e}", lock_path.display()));
    if installed.exists() {
        return;
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs Debian's `{package}` ({} is missing) and installing it needs root: \
         run `apt-get install -y {package}`",
        installed.display()
    );
    // A package's postinst may start a system daemon (sshd on every address
    // of the machine); a policy that refuses (101) stops that. An existing
    // policy is the machine's and stays as it is.
    let own_policy = !Path::new(POLICY_RC_D).exists();
    if own_policy {
        fs::write(
            POLICY_RC_D,
            "#!/bin/sh\n# retrace tests: no service starts\nexit 101\n",
        )
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(POLICY_RC_D, fs::Permissions::from_mode(0o755))
        })
        .unwrap_or_else(|e| panic!("writing {POLICY_RC_D}: {e}"));
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]);
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "-q", "--no-install-recommends", package])
        .env("DEBIAN_FRONTEND", "noninteractive");
    let log = root.join(format!("{package}-install.log"));
    let what = format!("apt-get install {package}");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::venv::run_logged(
            vec![
                ("refresh the package lists (apt-get update)", update),
                (what.as_str(), install),
            ],
            &log,
            installed,
        )
    }));
    if own_policy {
        let _ = fs::remove_file(POLICY_RC_D);
    }
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    assert!(
        installed.exists(),
        "apt-get installed {package} but {} is missing (log {})",
        installed.display(),
        log.display()
    );
}
