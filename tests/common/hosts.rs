//! Hosts reached over SSH, made on this machine for tests of kernels
//! spread over hosts: each host is a network namespace with a veth into a
//! bridge of the fixture's own in the root namespace, an address on a
//! private /24 and an `sshd` of its own listening on that address only.
//! The hosts share this machine's filesystem and users (only the network is
//! separate), so a kernelspec's paths are the same on every host. Needs
//! root.
//!
//! Every fixture has its own bridge `rtrb<i>`, namespaces
//! `retrace-eg-<i>-h<j>`, veths `rtr<i>h<j>` (peer `rtr<i>p<j>`) and subnet
//! 10.(200 + i / 256).(i % 256).0/24: the slot `i` is claimed by creating
//! the bridge (the kernel refuses a second link of a name), so fixtures in
//! one test process and across processes never share one. Dropping
//! [`Hosts`] kills every process in its namespaces and removes the
//! namespaces, the veths, the bridge and its files; it removes nothing it
//! did not make.

use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::footprint::{Footprint, Process};
use super::sshd::{self, Daemon};

/// Slots for subnets 10.200.0.0/24 to 10.239.255.0/24.
const SLOTS: u32 = 40 * 256;
/// How long the processes of a killed host may take to die.
const KILL_TIMEOUT: Duration = Duration::from_secs(30);

/// One host: a network namespace with its address and its sshd.
pub struct Host {
    /// `h1`, `h2`, …
    pub name: String,
    pub address: Ipv4Addr,
    /// The network namespace's name (`ip netns`), under `/run/netns/`.
    pub netns: String,
    /// The host's end of its veth, in the root namespace.
    veth: String,
    sshd: Option<Daemon>,
}

/// N hosts on a private bridge. Dropping it removes them.
pub struct Hosts {
    slot: u32,
    bridge: Option<String>,
    hosts: Vec<Host>,
    /// Host keys, configurations and logs; the client's key and HOME.
    dir: tempfile::TempDir,
}

impl Hosts {
    /// Makes `n` hosts, each with its sshd answering. Needs root; installs
    /// `openssh-server` first when the machine lacks it. Panics with what
    /// failed (and removes what it made so far).
    pub fn start(n: usize) -> Hosts {
        assert!((1..=200).contains(&n), "Hosts::start({n}): 1 to 200 hosts");
        assert!(
            nix::unistd::geteuid().is_root(),
            "hosts need root (network namespaces, a bridge, sshd): run the test as root"
        );
        sshd::ensure_installed();
        let dir = tempfile::Builder::new()
            .prefix("retrace-hosts-")
            .tempdir()
            .expect("creating the hosts' temporary directory");
        let slot = claim_bridge();
        let mut hosts = Hosts {
            slot,
            bridge: Some(bridge_name(slot)),
            hosts: Vec::new(),
            dir,
        };
        hosts.build(n);
        hosts
    }

    fn build(&mut self, n: usize) {
        let bridge = bridge_name(self.slot);
        let gateway = self.bridge_address();
        ip(&["addr", "add", &format!("{gateway}/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        let ssh = self.ssh_home().join(".ssh");
        std::fs::create_dir_all(&ssh).expect("creating the client's .ssh");
        let client_key = ssh.join("id_ed25519");
        sshd::keygen(&client_key, "retrace-test-client");
        let authorized = self.dir.path().join("authorized_keys");
        std::fs::write(
            &authorized,
            sshd::public_key(&ssh.join("id_ed25519.pub")) + "\n",
        )
        .expect("writing authorized_keys");
        let mut known_hosts = String::new();
        for j in 1..=n {
            let (netns, veth, peer) = (
                format!("retrace-eg-{}-h{j}", self.slot),
                format!("rtr{}h{j}", self.slot),
                format!("rtr{}p{j}", self.slot),
            );
            let address = self.address(j as u8 + 1);
            ip(&["netns", "add", &netns]);
            self.hosts.push(Host {
                name: format!("h{j}"),
                address,
                netns: netns.clone(),
                veth: veth.clone(),
                sshd: None,
            });
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", &peer, "netns", &netns,
            ]);
            ip(&["link", "set", &veth, "master", &bridge, "up"]);
            ip(&["-n", &netns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                &peer,
            ]);
            ip(&["-n", &netns, "link", "set", &peer, "up"]);
            let host_dir = self.dir.path().join(format!("h{j}"));
            std::fs::create_dir(&host_dir).expect("creating a host's directory");
            let daemon = sshd::start(&host_dir, &netns, address, &authorized);
            known_hosts.push_str(&format!(
                "{address} {}\n",
                sshd::public_key(&host_dir.join("host_key.pub"))
            ));
            self.hosts.last_mut().expect("just pushed").sshd = Some(daemon);
        }
        std::fs::write(ssh.join("known_hosts"), known_hosts).expect("writing known_hosts");
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The bridge's address: where the hosts reach this machine.
    pub fn bridge_address(&self) -> Ipv4Addr {
        self.address(1)
    }

    /// A HOME whose `.ssh/` has the client's key (`id_ed25519`) and a
    /// `known_hosts` naming every host's key by address: `ssh root@<address>`
    /// from a process with this HOME gets in without a question.
    pub fn ssh_home(&self) -> PathBuf {
        self.dir.path().join("ssh-home")
    }

    /// Which host's network namespace `pid` runs in, if one of these.
    pub fn host_of_pid(&self, pid: i32) -> Option<usize> {
        let ns = namespace_of(&format!("/proc/{pid}/ns/net"))?;
        self.hosts
            .iter()
            .position(|h| namespace_of(&netns_path(&h.netns)) == Some(ns))
    }

    /// Live processes (not zombies) in host `i`'s network namespace.
    pub fn processes(&self, i: usize) -> Vec<i32> {
        let Some(ns) = namespace_of(&netns_path(&self.hosts[i].netns)) else {
            return Vec::new();
        };
        live_pids()
            .filter(|pid| namespace_of(&format!("/proc/{pid}/ns/net")) == Some(ns))
            .collect()
    }

    /// Host `i` dies: its sshd and every process in its namespace are
    /// stopped together, then killed (SIGKILL). Its address stays up and refuses connections, as a
    /// rebooting host's would. Panics when something survives.
    pub fn kill_host(&mut self, i: usize) {
        let left = self.kill_all(i);
        assert!(
            left.is_empty(),
            "processes of host {} still alive {KILL_TIMEOUT:?} after SIGKILL: {left:?}",
            self.hosts[i].name
        );
    }

    /// Kills host `i`'s sshd and processes; returns those still alive
    /// after [`KILL_TIMEOUT`].
    fn kill_all(&mut self, i: usize) -> Vec<i32> {
        if let Some(mut daemon) = self.hosts[i].sshd.take() {
            let _ = daemon.child.kill();
            let _ = daemon.child.wait();
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        // Every process stopped first, so none sees another die (a
        // launcher reporting its kernel's end): the host goes at once.
        loop {
            let running: Vec<i32> = self
                .processes(i)
                .into_iter()
                .filter(|pid| running(*pid))
                .collect();
            if running.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in running {
                let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        loop {
            let left = self.processes(i);
            if left.is_empty() || Instant::now() > deadline {
                return left;
            }
            for pid in &left {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What these hosts have on the machine now: namespaces, links, live
    /// processes (sshds and whatever runs in the namespaces) and files.
    pub fn footprint(&self) -> Footprint {
        let mut footprint = Footprint::default();
        footprint.links.extend(self.bridge.clone());
        for (i, host) in self.hosts.iter().enumerate() {
            footprint.netns.push(host.netns.clone());
            footprint.links.push(host.veth.clone());
            footprint.processes.extend(
                self.processes(i)
                    .into_iter()
                    .chain(host.sshd.as_ref().map(|d| d.child.id() as i32))
                    .filter_map(Process::of),
            );
        }
        footprint.dirs.push(self.dir.path().to_path_buf());
        footprint
    }

    /// `10.x.y.last` of this fixture's subnet.
    fn address(&self, last: u8) -> Ipv4Addr {
        let [x, y] = subnet(self.slot);
        Ipv4Addr::new(10, x, y, last)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..self.hosts.len() {
            let left = self.kill_all(i);
            if !left.is_empty() {
                eprintln!(
                    "hosts fixture: processes {left:?} of {} survived SIGKILL",
                    self.hosts[i].netns
                );
            }
        }
        // The veth first: deleting one end deletes its peer at once, where
        // a deleted namespace's interfaces go only when the kernel frees it.
        for host in &self.hosts {
            try_ip(&["link", "del", &host.veth]);
            try_ip(&["netns", "del", &host.netns]);
        }
        if let Some(bridge) = self.bridge.take() {
            try_ip(&["link", "del", &bridge]);
        }
    }
}

/// Whether `pid` can still run: not stopped, traced or dead (its state
/// in `/proc/PID/stat`, after the parenthesised name).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| !matches!(state, "T" | "t" | "Z" | "X" | "x"))
    })
}

/// The name of a slot's bridge.
fn bridge_name(slot: u32) -> String {
    format!("rtrb{slot}")
}

/// The second and third octets of a slot's subnet.
fn subnet(slot: u32) -> [u8; 2] {
    [200 + (slot / 256) as u8, (slot % 256) as u8]
}

/// Creates the bridge of a free slot and returns the slot. Starts from
/// this process's id and a counter, so parallel fixtures rarely probe the
/// same names; a name taken, or a subnet this machine already routes, is
/// passed over.
fn claim_bridge() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(131) + NEXT.fetch_add(1, Ordering::Relaxed);
    let routes = Command::new("ip")
        .args(["-4", "-o", "route", "show", "table", "all"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for k in 0..SLOTS {
        let slot = start.wrapping_add(k) % SLOTS;
        let [x, y] = subnet(slot);
        if routes.contains(&format!("10.{x}.{y}.")) {
            continue;
        }
        let out = Command::new("ip")
            .args(["link", "add", &bridge_name(slot), "type", "bridge"])
            .output()
            .unwrap_or_else(|e| panic!("running ip (package iproute2): {e}"));
        if out.status.success() {
            return slot;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("exists"),
            "ip link add {} type bridge: {stderr}",
            bridge_name(slot)
        );
    }
    panic!("no free bridge slot among {SLOTS} (rtrb0..): remove stale rtrb* links");
}

/// Runs `ip args`; panics with its stderr when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running ip (package iproute2): {e}"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs `ip args` during cleanup: a failure is reported, not raised.
fn try_ip(args: &[&str]) {
    match Command::new("ip").args(args).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "hosts fixture: ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("hosts fixture: ip {}: {e}", args.join(" ")),
    }
}

pub fn netns_path(netns: &str) -> String {
    format!("/run/netns/{netns}")
}

/// The identity (device, inode) of the network namespace a path names.
fn namespace_of(path: &str) -> Option<(u64, u64)> {
    std::fs::metadata(Path::new(path))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Live processes of this machine (zombies are dead; their reaping is
/// their parent's).
fn live_pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .expect("reading /proc")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            retrace::util::proc::stat(*pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
        })
}
