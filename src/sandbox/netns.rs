//! The SNMP counters of a kernel's network namespace, read by the root
//! harness from `/proc/<pid>/net/snmp` and `snmp6` of one of its processes.
//! The namespace has one interface, its own loopback (up, see
//! `loopback.rs`), and no route but to it: a packet for any other address
//! (the host's loopback is another namespace's) is refused at the route
//! lookup, which moves `OutNoRoutes`. Only those counters count as attempts
//! to leave; code cannot write them, unlike the text of an exception.
//!
//! Measured (docs/sandbox.md): a connect to a public address or to the
//! host's own, a UDP send out, a DNS lookup of a public name, and an HTTP
//! request each move `Ip OutNoRoutes` (IPv6: `Ip6OutNoRoutes`). Traffic on
//! the loopback moves other counters — a connect to a closed port there
//! `Tcp AttemptFails`/`OutRsts`, a datagram to one `Udp NoPorts` and
//! `Icmp OutDestUnreachs` — and is the kernel talking to itself
//! (`multiprocessing`, local servers), so those are not summed.

use std::path::Path;

/// Counters of refused attempts to leave: `(protocol line prefix, field)`
/// in `snmp`, plain names in `snmp6`.
const SNMP: [(&str, &str); 1] = [("Ip", "OutNoRoutes")];
const SNMP6: [&str; 1] = ["Ip6OutNoRoutes"];

/// The sum of the refusal counters of the network namespace `pid` lives
/// in; `None` when it cannot be read or is the harness's own namespace
/// (a reused pid must not report the host's counters).
pub fn refusals(pid: i32) -> Option<u64> {
    let proc = Path::new("/proc").join(pid.to_string());
    let ns = std::fs::read_link(proc.join("ns/net")).ok()?;
    if std::fs::read_link("/proc/self/ns/net").ok()? == ns {
        return None;
    }
    let v4 = std::fs::read_to_string(proc.join("net/snmp")).ok()?;
    // Without IPv6 in the kernel there is no snmp6.
    let v6 = std::fs::read_to_string(proc.join("net/snmp6")).unwrap_or_default();
    Some(sum_snmp(&v4) + sum_snmp6(&v6))
}

/// `snmp` holds pairs of lines per protocol: `Ip: Forwarding DefaultTTL …`
/// then `Ip: 2 64 …`.
fn sum_snmp(text: &str) -> u64 {
    let lines: Vec<&str> = text.lines().collect();
    let mut sum = 0u64;
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((_, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if SNMP.contains(&(proto, name)) {
                sum = sum.saturating_add(value.parse().unwrap_or(0));
            }
        }
    }
    sum
}

/// `snmp6` holds one `Name value` per line.
fn sum_snmp6(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .filter(|(name, _)| SNMP6.contains(name))
        .map(|(_, value)| value.trim().parse::<u64>().unwrap_or(0))
        .fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP_TEXT: &str = "\
Ip: Forwarding DefaultTTL InReceives OutRequests OutNoRoutes
Ip: 1 64 10 20 3
Icmp: InMsgs OutDestUnreachs
Icmp: 7 1
Tcp: RtoAlgorithm ActiveOpens AttemptFails OutRsts
Tcp: 1 9 2 4
Udp: InDatagrams NoPorts InErrors
Udp: 5 6 100
UdpLite: InDatagrams NoPorts
UdpLite: 0 50
";

    #[test]
    fn sums_only_refusals_to_leave() {
        // OutNoRoutes 3; the loopback's refusals (OutDestUnreachs 1,
        // AttemptFails 2, OutRsts 4, NoPorts 6) are the kernel's own traffic.
        assert_eq!(sum_snmp(SNMP_TEXT), 3);
        let v6 = "Ip6InReceives 4\nIp6OutNoRoutes 2\nIcmp6OutDestUnreachs 1\nUdp6NoPorts 5\nUdp6InErrors 9\n";
        assert_eq!(sum_snmp6(v6), 2);
        assert_eq!(sum_snmp(""), 0);
        assert_eq!(sum_snmp6("garbage\n"), 0);
    }

    #[test]
    fn the_harness_namespace_is_not_evidence() {
        assert_eq!(refusals(std::process::id() as i32), None);
    }
}
