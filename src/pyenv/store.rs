//! Where images live (`$RETRACE_HOME/images`), how they are named and found;
//! building one is a recipe (`build`) of the shared builder (`recipe`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use strum::IntoEnumIterator;
use walkdir::WalkDir;

use crate::util::home::retrace_home;

use super::build::ImageRecipe;
use super::interpreter::NoInterpreter;
use super::marker::Marker;
use super::recipe;
use super::{Image, ImageInfo, ImageName, Interpreter, PyenvError, KERNEL_CONFIG};

/// Bumped when the layout of an image changes, so old builds are not reused.
const LAYOUT_VERSION: &str = "retrace-image/1";

#[derive(Debug, Clone)]
pub struct ImageStore {
    home: PathBuf,
    /// Probing runs Python (tens of ms) and every lookup needs the result.
    interpreter: OnceLock<Result<Interpreter, NoInterpreter>>,
}

impl ImageStore {
    /// `home` is made absolute: kernels get paths inside it.
    pub fn new(home: PathBuf) -> Self {
        let home = std::path::absolute(&home).unwrap_or(home);
        ImageStore {
            home,
            interpreter: OnceLock::new(),
        }
    }

    /// `$RETRACE_HOME`, else `$HOME/.cache/retrace`.
    pub fn from_env() -> Self {
        Self::new(retrace_home())
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The current build of `name`, or `NotBuilt`.
    pub fn image(&self, name: ImageName) -> Result<Image, PyenvError> {
        let (_, hash) = self.identity(name)?;
        self.complete(name, &hash)
            .ok_or(PyenvError::NotBuilt { name })
    }

    pub fn ensure(&self, name: ImageName, progress: bool) -> Result<Image, PyenvError> {
        match self.image(name) {
            Err(PyenvError::NotBuilt { .. }) => self.build(name, progress),
            other => other,
        }
    }

    /// [`Self::ensure`] on a blocking thread, for async callers (a build
    /// takes seconds to minutes). A panic in the build is resumed here.
    pub async fn ensure_blocking(
        self,
        name: ImageName,
        progress: bool,
    ) -> Result<Image, PyenvError> {
        match tokio::task::spawn_blocking(move || self.ensure(name, progress)).await {
            Ok(result) => result,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// Idempotent and safe to run concurrently (threads or processes): one
    /// builder per image, the others wait and then find it complete.
    pub fn build(&self, name: ImageName, progress: bool) -> Result<Image, PyenvError> {
        let (python, hash) = self.identity(name)?;
        let recipe = ImageRecipe::new(
            name,
            &hash,
            &python,
            self.images_dir(),
            self.log_path(name, &hash),
        );
        recipe::prepare(&recipe, progress)
    }

    /// The current image of each name (built or not), then older builds still
    /// on disk (left behind by a lock or interpreter change; safe to delete
    /// once no kernel uses them).
    pub fn list(&self) -> Vec<ImageInfo> {
        let mut infos = Vec::new();
        let mut current = Vec::new();
        if let Ok(python) = self.interpreter() {
            for name in ImageName::iter() {
                let hash = image_hash(name.lock_text(), KERNEL_CONFIG, &python);
                let dir = self.image_dir(name, &hash);
                let marker = Marker::read(&dir, name, &hash);
                infos.push(ImageInfo {
                    name,
                    python_version: Some(match &marker {
                        Some(m) => m.python.version.clone(),
                        None => python.version.clone(),
                    }),
                    size_bytes: marker
                        .is_some()
                        .then(|| Marker::image_size(&dir, name, &hash)),
                    built: marker.is_some(),
                    lock_hash: hash,
                    path: dir.clone(),
                });
                current.push(dir);
            }
        }
        let mut older: Vec<ImageInfo> = fs::read_dir(self.images_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let file_name = entry.file_name();
                let (name, hash) = parse_dir_name(&file_name.to_string_lossy())?;
                let dir = entry.path();
                if current.contains(&dir) {
                    return None;
                }
                let marker = Marker::read(&dir, name, &hash)?;
                let size_bytes = Some(Marker::image_size(&dir, name, &hash));
                Some(ImageInfo {
                    name,
                    lock_hash: hash,
                    python_version: Some(marker.python.version),
                    size_bytes,
                    path: dir,
                    built: true,
                })
            })
            .collect();
        older.sort_by(|a, b| (a.name, &a.path).cmp(&(b.name, &b.path)));
        infos.extend(older);
        infos
    }

    fn interpreter(&self) -> Result<Interpreter, PyenvError> {
        Ok(self.interpreter.get_or_init(Interpreter::find).clone()?)
    }

    /// The interpreter an image of `name` is built from, and its hash.
    fn identity(&self, name: ImageName) -> Result<(Interpreter, String), PyenvError> {
        let python = self.interpreter()?;
        let hash = image_hash(name.lock_text(), KERNEL_CONFIG, &python);
        Ok((python, hash))
    }

    fn complete(&self, name: ImageName, hash: &str) -> Option<Image> {
        let dir = self.image_dir(name, hash);
        Marker::read(&dir, name, hash).map(|_| Image {
            name,
            lock_hash: hash.to_string(),
            dir,
        })
    }

    fn images_dir(&self) -> PathBuf {
        self.home.join("images")
    }

    fn image_dir(&self, name: ImageName, hash: &str) -> PathBuf {
        self.images_dir().join(format!("{name}-{hash}"))
    }

    fn log_path(&self, name: ImageName, hash: &str) -> PathBuf {
        self.home
            .join("logs")
            .join(format!("image-{name}-{hash}.log"))
    }
}

/// `<name>-<16 hex>` as used for image directories.
fn parse_dir_name(dir_name: &str) -> Option<(ImageName, String)> {
    let (name, hash) = dir_name.split_once('-')?;
    let name = ImageName::iter().find(|n| n.as_str() == name)?;
    (hash.len() == 16 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| (name, hash.to_string()))
}

/// First 16 hex digits of a SHA-256 over everything an image is made from.
/// Fields are length-prefixed so no two different inputs hash alike.
pub(crate) fn image_hash(lock_text: &str, kernel_config: &str, python: &Interpreter) -> String {
    let path = python.path.to_string_lossy();
    let mut hasher = Sha256::new();
    for (label, value) in [
        ("layout", LAYOUT_VERSION),
        ("lock", lock_text),
        ("kernel_config", kernel_config),
        ("python_tag", python.tag.as_str()),
        ("python_path", path.as_ref()),
    ] {
        hasher.update(label.as_bytes());
        hasher.update((value.len() as u64).to_le_bytes());
        hasher.update(value.as_bytes());
    }
    hex::encode(hasher.finalize())[..16].to_string()
}

/// `du -s` in bytes, without following symlinks (the venv's python points at
/// the base interpreter).
pub(crate) fn disk_usage(root: &Path) -> u64 {
    WalkDir::new(root)
        .follow_root_links(false)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|meta| meta.blocks() * 512)
        .sum()
}

#[cfg(test)]
impl ImageStore {
    fn with_interpreter(home: PathBuf, python: Result<Interpreter, NoInterpreter>) -> Self {
        let store = ImageStore::new(home);
        store.interpreter.set(python).expect("fresh store");
        store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyenv::marker::MARKER_FILE;
    use crate::pyenv::LockEntry;
    use crate::pyenv::LogTail;

    fn python() -> Interpreter {
        Interpreter::example()
    }

    fn store(home: &Path) -> ImageStore {
        ImageStore::with_interpreter(home.to_path_buf(), Ok(python()))
    }

    /// Writes what a finished build leaves (minus the venv's contents).
    fn fake_complete(store: &ImageStore, name: ImageName) -> PathBuf {
        let (python, hash) = store.identity(name).unwrap();
        let dir = store.image_dir(name, &hash);
        fs::create_dir_all(dir.join("venv/bin")).unwrap();
        fs::write(dir.join("kernel_config.py"), KERNEL_CONFIG).unwrap();
        let packages = [LockEntry {
            name: "ipykernel".into(),
            version: "7.4.0".into(),
        }];
        let marker = Marker::new(name, &hash, &python, &packages, false);
        crate::pyenv::marker::write(&dir, &marker).unwrap();
        dir
    }

    #[test]
    fn hash_is_stable_and_covers_every_input() {
        let base = image_hash("a==1\n", "c = 1\n", &python());
        assert_eq!(
            base, "566326571186d060",
            "hash scheme changed: every image rebuilds"
        );
        assert_eq!(base.len(), 16);
        assert_eq!(image_hash("a==1\n", "c = 1\n", &python()), base);
        assert_ne!(image_hash("a==2\n", "c = 1\n", &python()), base);
        assert_ne!(image_hash("a==1\n", "c = 2\n", &python()), base);
        let mut other = python();
        other.tag = "cpython-3.12-x86_64".into();
        assert_ne!(image_hash("a==1\n", "c = 1\n", &other), base);
        let mut other = python();
        other.path = "/opt/python3".into();
        assert_ne!(image_hash("a==1\n", "c = 1\n", &other), base);
        // Moving text between fields must not collide.
        assert_ne!(image_hash("a==1\nc", " = 1\n", &python()), base);
        // A patch release of the same interpreter keeps the image.
        let mut patched = python();
        patched.version = "3.11.9".into();
        assert_eq!(image_hash("a==1\n", "c = 1\n", &patched), base);
    }

    #[test]
    fn slim_and_fat_hash_differently() {
        let home = tempfile::tempdir().unwrap();
        let store = store(home.path());
        let (_, slim) = store.identity(ImageName::Slim).unwrap();
        let (_, fat) = store.identity(ImageName::Fat).unwrap();
        assert_ne!(slim, fat);
    }

    #[test]
    fn list_on_empty_home_shows_every_image_unbuilt() {
        let home = tempfile::tempdir().unwrap();
        let store = store(&home.path().join("does-not-exist-yet"));
        let list = store.list();
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].name, ImageName::Slim);
        assert_eq!(list[1].name, ImageName::Fat);
        assert_eq!(list[2].name, ImageName::Checker);
        for info in &list {
            assert!(!info.built);
            assert_eq!(info.size_bytes, None);
            assert_eq!(info.python_version.as_deref(), Some("3.11.2"));
            assert!(info.path.starts_with(store.home().join("images")));
            assert!(info
                .path
                .ends_with(format!("{}-{}", info.name, info.lock_hash)));
        }
        assert!(matches!(
            store.image(ImageName::Fat),
            Err(PyenvError::NotBuilt {
                name: ImageName::Fat
            })
        ));
    }

    #[test]
    fn incomplete_dir_is_not_built_and_marker_makes_it_built() {
        let home = tempfile::tempdir().unwrap();
        let store = store(home.path());
        let dir = fake_complete(&store, ImageName::Slim);
        let marker = fs::read(dir.join(MARKER_FILE)).unwrap();
        fs::remove_file(dir.join(MARKER_FILE)).unwrap();

        assert!(matches!(
            store.image(ImageName::Slim),
            Err(PyenvError::NotBuilt { .. })
        ));
        assert!(!store.list()[0].built);

        fs::write(dir.join(MARKER_FILE), marker).unwrap();
        let image = store.image(ImageName::Slim).unwrap();
        assert_eq!(image.dir, dir);
        assert_eq!(image.kernel_config(), dir.join("kernel_config.py"));
        let info = &store.list()[0];
        assert!(info.built);
        assert!(info.size_bytes.unwrap() > 0);
        // Complete: build and ensure return at once without any interpreter
        // being run (the fake one does not exist).
        assert_eq!(store.build(ImageName::Slim, false).unwrap(), image);
        assert_eq!(store.ensure(ImageName::Slim, false).unwrap(), image);
    }

    #[test]
    fn older_builds_are_listed_after_current_ones() {
        let home = tempfile::tempdir().unwrap();
        let old = ImageStore::with_interpreter(
            home.path().to_path_buf(),
            Ok(Interpreter {
                tag: "cpython-3.10-x86_64".into(),
                version: "3.10.1".into(),
                ..python()
            }),
        );
        let old_dir = fake_complete(&old, ImageName::Fat);
        let store = store(home.path());
        fs::create_dir_all(store.images_dir().join("fat-notahash")).unwrap();
        let list = store.list();
        assert_eq!(list.len(), 4, "{list:#?}");
        assert_eq!(list[3].path, old_dir);
        assert!(list[3].built);
        assert_eq!(list[3].python_version.as_deref(), Some("3.10.1"));
    }

    #[test]
    fn missing_interpreter_is_reported_with_a_remedy() {
        let home = tempfile::tempdir().unwrap();
        let store = ImageStore::with_interpreter(
            home.path().to_path_buf(),
            Err(NoInterpreter {
                detail: "python3: not found".into(),
            }),
        );
        let err = store.ensure(ImageName::Slim, false).unwrap_err();
        assert!(matches!(err, PyenvError::NoInterpreter { .. }));
        assert!(err.to_string().contains("RETRACE_PYTHON"), "{err}");
        assert!(store.list().is_empty());
    }

    #[test]
    fn failed_build_names_its_log_and_cleans_up() {
        let home = tempfile::tempdir().unwrap();
        let store = ImageStore::with_interpreter(
            home.path().to_path_buf(),
            Ok(Interpreter {
                path: "/bin/false".into(),
                ..python()
            }),
        );
        let err = store.build(ImageName::Slim, false).unwrap_err();
        let PyenvError::BuildFailed {
            log: LogTail { log, tail },
            ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert!(log.starts_with(home.path().join("logs")), "{log:?}");
        assert!(tail.contains("/bin/false -I -m venv"), "{tail}");
        assert!(err.to_string().contains(&log.display().to_string()));
        let leftovers: Vec<_> = fs::read_dir(store.images_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(recipe::LOCK_PREFIX))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        assert!(!store.list()[0].built);
    }

    #[test]
    fn dir_names_parse_strictly() {
        assert_eq!(
            parse_dir_name("fat-0123456789abcdef"),
            Some((ImageName::Fat, "0123456789abcdef".into()))
        );
        for bad in [
            "fat-0123456789ABCDEF",
            "fat-0123",
            "huge-0123456789abcdef",
            ".tmp-fat-0123456789abcdef",
            "fat",
        ] {
            assert_eq!(parse_dir_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn relative_home_is_made_absolute() {
        let store = ImageStore::new(PathBuf::from("relative/home"));
        assert!(store.home().is_absolute());
        assert!(store.home().ends_with("relative/home"));
    }
}
