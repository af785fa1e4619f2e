//! OpenSSH's server for the hosts of `common::hosts`: installed from the
//! machine's Debian packages when missing, and one daemon per host, run in
//! that host's network namespace with a configuration, host key and pid
//! file of its own, so nothing of the machine's SSH setup is used or
//! changed.

use std::fs::{self, File};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where Debian's `openssh-server` puts the daemon.
pub const SSHD: &str = "/usr/sbin/sshd";
/// The daemon refuses to start without its privilege separation directory.
const PRIVSEP_DIR: &str = "/run/sshd";
/// How long a daemon may take to greet on its port.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Installs `openssh-server` with apt-get when `/usr/sbin/sshd` is missing
/// (once per process; see `common::apt`).
pub fn ensure_installed() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| super::apt::ensure("openssh-server", Path::new(SSHD)));
}

/// Generates an ed25519 key pair without passphrase at `path` (and
/// `path.pub`).
pub fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running ssh-keygen (package openssh-client): {e}"));
    assert!(
        out.status.success(),
        "ssh-keygen for {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `type base64` of a public key file, as known_hosts and
/// authorized_keys want it.
pub fn public_key(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One host's daemon: its files live in `dir`.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

/// Writes a configuration into `dir` (host key, pid file, log) and starts
/// the daemon in network namespace `netns`, listening on `address:22` only
/// and letting in root with the keys in `authorized_keys`; returns once it
/// greets. Panics with its log when it does not.
pub fn start(dir: &Path, netns: &str, address: Ipv4Addr, authorized_keys: &Path) -> Daemon {
    fs::create_dir_all(PRIVSEP_DIR).unwrap_or_else(|e| panic!("creating {PRIVSEP_DIR}: {e}"));
    let host_key = dir.join("host_key");
    keygen(&host_key, netns);
    let config = dir.join("sshd_config");
    let text = format!(
        "ListenAddress {address}:22\n\
         HostKey {key}\n\
         PidFile {pid}\n\
         AuthorizedKeysFile {authorized}\n\
         PermitRootLogin prohibit-password\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         # The temporary directory is not root's home: no ownership checks.\n\
         StrictModes no\n\
         # Enterprise Gateway opens one connection per launch and signal.\n\
         MaxStartups 100\n\
         PrintMotd no\n",
        key = host_key.display(),
        pid = dir.join("sshd.pid").display(),
        authorized = authorized_keys.display(),
    );
    fs::write(&config, text).unwrap_or_else(|e| panic!("writing {}: {e}", config.display()));
    let log = dir.join("sshd.log");
    let out = File::create(&log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
    let err = out.try_clone().expect("cloning the sshd log");
    // nsenter enters the network namespace only and execs: the child is
    // sshd, in this machine's mounts (`ip netns exec` would give it a sysfs
    // of its own, without the cgroup filesystems retrace's kernels need).
    let child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{netns}"))
        .args(["--", SSHD, "-D", "-e", "-f"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Not in the test's group: a terminal's signals are not its.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {SSHD} in {netns}: {e}"));
    let mut daemon = Daemon { child, log };
    daemon.wait_ready(address);
    daemon
}

impl Daemon {
    fn wait_ready(&mut self, address: Ipv4Addr) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let at = SocketAddr::from((address, 22));
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "sshd for {address} exited ({status}) before listening\n--- sshd log ---\n{}",
                    super::venv::tail(&self.log, 30)
                );
            }
            if greets(at) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sshd for {address} did not greet on {at} within {READY_TIMEOUT:?}\n\
                 --- sshd log ---\n{}",
                super::venv::tail(&self.log, 30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether an SSH server answers at `at` with its version banner.
fn greets(at: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&at, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut banner = [0u8; 4];
    stream.read_exact(&mut banner).is_ok() && &banner == b"SSH-"
}
