//! `$RETRACE_HOME`: where retrace keeps what it builds and downloads
//! (images, packages, models, logs, the built-in datasets written out).

use std::path::PathBuf;

/// `$RETRACE_HOME`, else `$HOME/.cache/retrace` (the user database's home
/// when `$HOME` is unset, else the temp dir).
pub fn retrace_home() -> PathBuf {
    if let Some(home) = std::env::var_os("RETRACE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let user_home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .unwrap_or_else(std::env::temp_dir);
    user_home.join(".cache").join("retrace")
}
