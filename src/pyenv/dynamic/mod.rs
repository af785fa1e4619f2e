//! The `dynamic` strategy's policy: which distributions a slim kernel may
//! get on demand, decided before anything is fetched.
//!
//! A request names a module (a `ModuleNotFoundError`, an import) or a
//! requirement (the model's own `pip install` line). It is mapped to a
//! distribution through `images/import-map.toml`, then looked up in the
//! allowlist `images/dynamic.lock`: allowed top-level distributions, each
//! with its dependency closure pinned by version and wheel sha256, so the
//! installer resolves nothing (`--no-deps --require-hashes`). Everything
//! else is denied with a reason and a message that tells the model what it
//! can have. Never install a name because a model wrote it: models
//! hallucinate package names, and consistently (reference §4).
//!
//! Both files are compiled in, so an installed `retrace` needs no checkout.

mod allowlist;
mod audit;
mod decision;
mod install;
pub(crate) mod oneshot;
mod scan;
mod store;

pub use allowlist::{Allowlist, AllowlistError, Pin};
pub use audit::{audit, Finding};
pub use decision::{Decision, Denial, Request, RequestSource};
pub use install::{IndexSource, InstallError, Installed, Installer, Placed};
pub use oneshot::OneShotError;
pub use scan::{
    might_install, missing_module, CellScan, CellScanner, Import, InstallLine, ScanError,
};
pub use store::{Entry, PackageStore};

/// The allowlist, compiled in (regenerate with
/// `images/build_dynamic_lock.py`).
pub const DYNAMIC_LOCK: &str = include_str!("../../../images/dynamic.lock");
/// Import names whose distribution has another name, compiled in.
pub const IMPORT_MAP: &str = include_str!("../../../images/import-map.toml");
