//! The resolver configuration a kernel with its own network namespace sees.
//! Its `/etc` is the host's, but its loopback is its own (see
//! `loopback.rs`): a host resolver on a loopback address (systemd-resolved's
//! 127.0.0.53, a local dnsmasq), or no `/etc/resolv.conf` in the kernel's
//! view (a link into the host's `/run`, which glibc then reads as
//! 127.0.0.1), would turn a lookup of a public name into traffic on the
//! kernel's own loopback, which no refusal counter of leaving sees. Such a
//! view gets a resolv.conf whose nameserver has no route: a lookup is then
//! an attempt to leave, refused with `Ip OutNoRoutes` (see `netns.rs`).

use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

/// The nameserver of a kernel whose host resolver is on loopback: in
/// TEST-NET-1 (RFC 5737), never routed, and the kernel's namespace has no
/// route but its loopback anyway.
pub const UNROUTABLE_NAMESERVER: &str = "192.0.2.53";

/// The resolv.conf the kernel must see instead of `host` (the host's text,
/// `None` when the kernel's view has none), or `None` when `host` already
/// names only nameservers off the loopback. Search and option lines are
/// kept; loopback nameservers are dropped.
pub fn kernel_resolv_conf(host: Option<&str>) -> Option<String> {
    let text = host.unwrap_or("");
    let nameserver = |line: &str| -> Option<Option<IpAddr>> {
        let mut words = line.split_whitespace();
        (words.next() == Some("nameserver")).then(|| {
            // An address with a zone (`fe80::1%eth0`) is still an address.
            let word = words.next().unwrap_or("");
            word.split('%').next().unwrap_or("").parse().ok()
        })
    };
    let servers: Vec<Option<IpAddr>> = text.lines().filter_map(nameserver).collect();
    let on_loopback = |s: &Option<IpAddr>| s.is_none_or(|a| a.is_loopback() || a.is_unspecified());
    if !servers.is_empty() && !servers.iter().any(on_loopback) {
        return None;
    }
    let mut out = String::from(
        "# retrace: the host's resolver is not reachable off the kernel's own loopback\n",
    );
    for line in text.lines() {
        if nameserver(line).is_none_or(|s| !on_loopback(&s)) {
            out.push_str(line);
            out.push('\n');
        }
    }
    if servers.iter().all(on_loopback) {
        out.push_str(&format!("nameserver {UNROUTABLE_NAMESERVER}\n"));
    }
    Some(out)
}

/// Where the kernel's `/etc/resolv.conf` leads when it is a link: the
/// link's destination made absolute and without `..` (`None` for a file).
pub fn link_destination(etc_resolv: &Path) -> Option<PathBuf> {
    let link = std::fs::read_link(etc_resolv).ok()?;
    let joined = etc_resolv.parent().unwrap_or(Path::new("/")).join(link);
    let mut out = PathBuf::from("/");
    for part in joined.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routable_nameservers_are_kept_as_they_are() {
        assert_eq!(kernel_resolv_conf(Some("nameserver 10.0.0.2\n")), None);
        assert_eq!(
            kernel_resolv_conf(Some(
                "search lan\nnameserver 10.0.0.2\nnameserver 2001:db8::1\n"
            )),
            None
        );
    }

    #[test]
    fn loopback_resolvers_are_replaced_by_an_unroutable_one() {
        let stub =
            kernel_resolv_conf(Some("nameserver 127.0.0.53\noptions edns0\nsearch lan\n")).unwrap();
        assert!(!stub.contains("127.0.0.53"), "{stub}");
        assert!(stub.contains("options edns0\n") && stub.contains("search lan\n"));
        assert!(stub.ends_with(&format!("nameserver {UNROUTABLE_NAMESERVER}\n")));
        for host in [
            "nameserver ::1\n",
            "nameserver 0.0.0.0\n",
            "",
            "search lan\n",
        ] {
            let text = kernel_resolv_conf(Some(host)).unwrap();
            assert!(text.contains(UNROUTABLE_NAMESERVER), "{host:?}: {text}");
        }
        assert!(kernel_resolv_conf(None)
            .unwrap()
            .contains(UNROUTABLE_NAMESERVER));
    }

    #[test]
    fn a_routable_nameserver_beside_a_loopback_one_stays_alone() {
        let text = kernel_resolv_conf(Some("nameserver 127.0.0.1\nnameserver 10.0.0.2\n")).unwrap();
        assert!(text.contains("nameserver 10.0.0.2\n"), "{text}");
        assert!(!text.contains("127.0.0.1") && !text.contains(UNROUTABLE_NAMESERVER));
    }

    #[test]
    fn link_destinations_are_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        let link = etc.join("resolv.conf");
        std::os::unix::fs::symlink("../run/systemd/resolve/stub-resolv.conf", &link).unwrap();
        assert_eq!(
            link_destination(&link).unwrap(),
            dir.path().join("run/systemd/resolve/stub-resolv.conf")
        );
        let file = etc.join("hosts");
        std::fs::write(&file, "").unwrap();
        assert_eq!(link_destination(&file), None);
    }
}
