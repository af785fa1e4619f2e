//! Restarts are clean and planted symlinks are inert, against real kernels:
//! after a kill, the new kernel finds nothing the old one wrote (startup
//! files, configuration, customize modules, `.pth` files, changed task
//! files), and links planted where the root harness writes, copies or
//! removes files never make it touch a host file outside.

use crate::common;

use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use retrace::kernel::{ExecOptions, Kernel, KernelOptions, KernelSpec};
use retrace::pyenv::ImageName;
use retrace::sandbox::{Unconfined, Verdict};

use common::exec_opts as opts;

const INPUT: &str = "a,b\n1,2\n";

/// A spec of the fat image whose kernels get `input.csv`.
fn spec_with_input(dir: &Path) -> Arc<KernelSpec> {
    let input = dir.join("input.csv");
    std::fs::write(&input, INPUT).unwrap();
    let mut spec = KernelSpec::new(
        common::image(ImageName::Fat),
        retrace::kernel::default_kernel_root(),
    );
    spec.files = vec![input];
    Arc::new(spec)
}

/// Python that plants everything a later kernel could pick up. Each
/// planted file sets `builtins.PLANTED` and the variable `PLANTED` when
/// it runs.
const PLANT: &str = r#"
import os, pathlib, site, sys
from ipykernel.connect import get_connection_file
effect = "import builtins, os; builtins.PLANTED = True; os.environ['PLANTED'] = '1'\n"
home = pathlib.Path(os.environ['HOME'])
ipy = pathlib.Path(os.environ['IPYTHONDIR'])
cwd = pathlib.Path.cwd()
rt = pathlib.Path(get_connection_file()).parent
startup = ipy / 'profile_default' / 'startup'
startup.mkdir(parents=True, exist_ok=True)
planted = [startup / '00-x.py']
for d in (cwd, home, ipy, ipy / 'profile_default'):
    planted += [d / 'ipython_kernel_config.py', d / 'ipython_config.py']
for d in (cwd, home):
    planted += [d / n for n in ('.pythonrc', '.pythonrc.py', 'sitecustomize.py', 'usercustomize.py')]
# Modules ipykernel imports at startup, shadowed from the working directory.
planted += [cwd / 'ipykernel_launcher.py', cwd / 'traitlets.py']
user_site = pathlib.Path(site.getusersitepackages())
user_site.mkdir(parents=True, exist_ok=True)
planted += [user_site / 'planted.pth']
for p in planted:
    p.write_text(effect)
try:
    # A confined kernel's runtime directory is the harness's once it started.
    (rt / 'planted.py').write_text(effect)
except PermissionError:
    pass
(cwd / 'input.csv').write_text('tampered\n')
extra = [pathlib.Path(p) for p in EXTRA]
for p in extra:
    p.write_text('planted\n')
print(len(planted) + len(extra), 'planted')
"#;

/// Python that reports what of the planted files is visible or took effect.
const CHECK: &str = r#"
import builtins, os, pathlib, site
from ipykernel.connect import get_connection_file
home = pathlib.Path(os.environ['HOME'])
ipy = pathlib.Path(os.environ['IPYTHONDIR'])
cwd = pathlib.Path.cwd()
rt = pathlib.Path(get_connection_file()).parent
names = ['ipython_kernel_config.py', 'ipython_config.py', '.pythonrc', '.pythonrc.py',
         'sitecustomize.py', 'usercustomize.py', 'ipykernel_launcher.py', 'traitlets.py']
candidates = [ipy / 'profile_default' / 'startup' / '00-x.py',
              pathlib.Path(site.getusersitepackages()) / 'planted.pth', rt / 'planted.py']
candidates += [d / n for d in (cwd, home, ipy, ipy / 'profile_default') for n in names]
candidates += [pathlib.Path(p) for p in EXTRA]
left = sorted(str(p) for p in candidates if os.path.lexists(p))
effect = getattr(builtins, 'PLANTED', None) or os.environ.get('PLANTED') or globals().get('PLANTED')
print('left', left)
print('effect', effect)
print('input', repr(open('input.csv').read()))
"#;

fn with_extra(code: &str, extra: &[String]) -> String {
    format!("EXTRA = {extra:?}\n{code}")
}

/// Plants, kills the kernel from inside, and checks the restarted kernel.
async fn plant_kill_check(kernel: &mut Kernel, extra: &[String]) {
    let planted = kernel.execute(&with_extra(PLANT, extra), &opts(30)).await;
    assert_eq!(planted.verdict, Verdict::Ok, "{planted:?}");
    assert!(planted.stdout.ends_with(" planted\n"), "{planted:?}");
    let pid = kernel.pid();
    let killed = kernel
        .execute("import os\nos.kill(os.getpid(), 9)", &opts(30))
        .await;
    assert!(killed.state_lost, "{killed:?}");
    assert!(
        killed.flags.contains(&"restarted".to_string()),
        "{killed:?}"
    );
    assert_ne!(kernel.pid(), pid, "a new kernel process");
    let checked = kernel.execute(&with_extra(CHECK, extra), &opts(30)).await;
    assert_eq!(checked.verdict, Verdict::Ok, "{checked:?}");
    assert_eq!(
        checked.stdout,
        format!("left []\neffect None\ninput {INPUT:?}\n").replace('"', "'"),
        "the restarted kernel saw what the old one left"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_confined_restart_leaves_nothing_of_the_old_kernel() {
    let dir = common::outside_tmp();
    let spec = spec_with_input(dir.path());
    let sandbox = common::sandbox();
    let mut k = Kernel::start(spec, sandbox.as_ref(), KernelOptions::default())
        .await
        .expect("kernel starts");
    // A confined kernel's /tmp and /dev/shm are its own, so they must be new too.
    let extra = ["/tmp/planted".to_string(), "/dev/shm/planted".to_string()];
    plant_kill_check(&mut k, &extra).await;
    k.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unconfined_restart_recreates_the_layout() {
    let dir = common::outside_tmp();
    let spec = spec_with_input(dir.path());
    let mut k = Kernel::start(spec, &Unconfined, KernelOptions::default())
        .await
        .expect("kernel starts");
    // Without namespaces /tmp is the host's; only the layout can be new.
    plant_kill_check(&mut k, &[]).await;
    k.shutdown().await;
}

/// A host file and directory outside every kernel's view, with what they
/// held, so a test can assert they were neither written, chowned, chmodded
/// nor emptied.
struct HostTarget {
    _dir: tempfile::TempDir,
    file: PathBuf,
    tree: PathBuf,
}

impl HostTarget {
    fn new() -> Self {
        let dir = common::outside_tmp();
        let file = dir.path().join("secret");
        std::fs::write(&file, "host secret\n").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("keep"), "kept\n").unwrap();
        HostTarget {
            file,
            tree,
            _dir: dir,
        }
    }

    fn assert_untouched(&self) {
        let meta = std::fs::metadata(&self.file).unwrap();
        assert_eq!(
            std::fs::read_to_string(&self.file).unwrap(),
            "host secret\n"
        );
        assert_eq!(
            (meta.uid(), meta.mode() & 0o7777),
            (0, 0o600),
            "owner and mode"
        );
        assert_eq!(
            std::fs::read_to_string(self.tree.join("keep")).unwrap(),
            "kept\n"
        );
    }
}

/// Python that replaces the connection file with a link to the host file
/// and plants links in the runtime directory, the working directory and HOME
/// (a kernel can name host paths it cannot see).
fn plant_links(target: &HostTarget) -> String {
    format!(
        r#"
import os, pathlib
from ipykernel.connect import get_connection_file
conn = pathlib.Path(get_connection_file())
rt = conn.parent
file, tree = {file:?}, {tree:?}
def plant(d):
    os.symlink(file, d / 'file-link')
    os.symlink(tree, d / 'dir-link')
    (d / 'sub').mkdir(exist_ok=True)
    os.symlink(tree, d / 'sub' / 'dir-link')
for d in (pathlib.Path.cwd(), pathlib.Path(os.environ['HOME'])):
    plant(d)
try:
    os.remove(conn)
    os.symlink(file, conn)
    plant(rt)
    print('links planted')
except PermissionError:
    print('links planted; runtime dir refused')
"#,
        file = target.file.display().to_string(),
        tree = target.tree.display().to_string(),
    )
}

/// Links a kernel whose runtime directory was still its own could have
/// planted there (the harness writes and chowns there at every start):
/// planted from the host, so the harness's side is tested in both modes.
fn plant_in_runtime_dir(rt: &Path, target: &HostTarget) {
    let conn = rt.join("kernel.json");
    std::fs::remove_file(&conn).unwrap();
    symlink(&target.file, &conn).unwrap();
    symlink(&target.file, rt.join("host-file-link")).unwrap();
    symlink(&target.tree, rt.join("host-dir-link")).unwrap();
}

async fn links_then_restart(k: &mut Kernel, target: &HostTarget, planted: &str) {
    let o = k.execute(&plant_links(target), &opts(30)).await;
    assert_eq!(o.stdout, planted, "{o:?}");
    plant_in_runtime_dir(&k.layout().runtime_dir.clone(), target);
    let killed = k
        .execute("import os\nos.kill(os.getpid(), 9)", &opts(30))
        .await;
    assert!(killed.state_lost, "{killed:?}");
    target.assert_untouched();
    // The new kernel read a connection file the harness wrote anew.
    let after = k.execute("print('fresh')", &opts(30)).await;
    assert_eq!(after.stdout, "fresh\n", "{after:?}");
    let rt = k.layout().runtime_dir.clone();
    let conn = std::fs::symlink_metadata(rt.join("kernel.json")).unwrap();
    assert!(conn.file_type().is_file());
    for name in [
        "file-link",
        "dir-link",
        "sub",
        "host-file-link",
        "host-dir-link",
    ] {
        assert!(
            std::fs::symlink_metadata(rt.join(name)).is_err(),
            "{name} is gone"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn links_in_a_confined_runtime_dir_do_not_reach_the_host() {
    let target = HostTarget::new();
    let mut k = common::fat_kernel(KernelOptions::default()).await;
    let root = k.layout().runtime_dir.parent().unwrap().to_path_buf();
    let refused = "links planted; runtime dir refused\n";
    links_then_restart(&mut k, &target, refused).await;
    // Links planted again, then the teardown removes the layout.
    let o = k.execute(&plant_links(&target), &opts(30)).await;
    assert_eq!(o.stdout, refused, "{o:?}");
    plant_in_runtime_dir(&k.layout().runtime_dir.clone(), &target);
    k.shutdown().await;
    assert!(!root.exists(), "the layout is gone");
    target.assert_untouched();
}

#[tokio::test(flavor = "multi_thread")]
async fn links_in_an_unconfined_layout_do_not_reach_the_host() {
    let target = HostTarget::new();
    let dir = common::outside_tmp();
    let spec = spec_with_input(dir.path());
    let mut k = Kernel::start(spec, &Unconfined, KernelOptions::default())
        .await
        .expect("kernel starts");
    let root = k.layout().runtime_dir.parent().unwrap().to_path_buf();
    // The task file and the matplotlib cache, copied anew at the restart,
    // are replaced by links first: the copies must not go through them.
    let replace = format!(
        "import os, shutil\nos.remove('input.csv')\nos.symlink({file:?}, 'input.csv')\n\
         mpl = os.path.join(os.environ['HOME'], '.mplconfig')\nshutil.rmtree(mpl, ignore_errors=True)\n\
         os.symlink({tree:?}, mpl)\nprint('replaced')",
        file = target.file.display().to_string(),
        tree = target.tree.display().to_string(),
    );
    let o = k.execute(&replace, &opts(30)).await;
    assert_eq!(o.stdout, "replaced\n", "{o:?}");
    links_then_restart(&mut k, &target, "links planted\n").await;
    let o = k
        .execute("print(open('input.csv').read())", &opts(30))
        .await;
    assert_eq!(o.stdout, format!("{INPUT}\n"), "{o:?}");
    let o = k.execute(&plant_links(&target), &opts(30)).await;
    assert_eq!(o.stdout, "links planted\n", "{o:?}");
    k.shutdown().await;
    assert!(!root.exists(), "the layout is gone");
    target.assert_untouched();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_artifact_is_never_written_through_a_link() {
    let target = HostTarget::new();
    let artifacts = tempfile::tempdir().unwrap();
    symlink(&target.file, artifacts.path().join("plot-000.png")).unwrap();
    let mut k = common::fat_kernel(KernelOptions::default()).await;
    let exec = ExecOptions {
        artifact_dir: Some(artifacts.path().to_path_buf()),
        artifact_prefix: "plot".into(),
        ..opts(30)
    };
    let o = k
        .execute(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()",
            &exec,
        )
        .await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert_eq!(o.artifacts.len(), 1, "{o:?}");
    let saved = artifacts.path().join(&o.artifacts[0].path);
    let meta = std::fs::symlink_metadata(&saved).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the link was replaced by the file"
    );
    assert!(std::fs::read(&saved).unwrap().starts_with(b"\x89PNG"));
    target.assert_untouched();
    k.shutdown().await;
}
