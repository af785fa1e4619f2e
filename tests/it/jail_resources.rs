//! What the jail gives a legitimate notebook besides limits: pseudo-terminals
//! for shell escapes (a private devpts instance, bounded), the kernel's own
//! loopback (up, and only its own). Needs root, as `containment.rs`.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};

use retrace::sandbox::{Verdict, PTY_MAX};

use super::containment::{exec, limits, start};
use crate::common;

#[tokio::test(flavor = "multi_thread")]
async fn pseudo_terminals_are_bounded_by_the_devpts_max() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let code = r#"
import os
held = []
try:
    while len(held) < 1000:
        held.append(os.openpty())
except OSError as e:
    print('refused errno', e.errno)
print('held', len(held))
for a, b in held:
    os.close(a); os.close(b)
out = !echo shell-escape-after
print(out)
"#;
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(o.stdout.contains("refused errno 28"), "{}", o.stdout);
    assert!(
        o.stdout.contains(&format!("held {PTY_MAX}\n")),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("['shell-escape-after']"), "{}", o.stdout);
}

/// The host's outbound address, when it has a route out (else only the
/// loopback is tried).
fn host_address() -> Option<std::net::IpAddr> {
    let probe = UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("192.0.2.1:9").ok()?;
    Some(probe.local_addr().ok()?.ip())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_listeners_are_out_of_reach() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let listener = TcpListener::bind("0.0.0.0:0").expect("host listener");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = host_address().map_or(String::new(), |a| a.to_string());
    let mut k = start(&sandbox, &l).await;
    let code = format!(
        r#"
import socket
for host in ['127.0.0.1', '{outside}']:
    if not host:
        continue
    try:
        socket.create_connection((host, {port}), timeout=3).close()
        print(host, 'connected')
    except OSError as e:
        print(host, type(e).__name__, e.errno)
own = socket.socket()
own.bind(('127.0.0.1', {port}))
own.listen()
print('own loopback has the port free')
"#
    );
    let o = k.execute(&code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(
        o.stdout.contains("127.0.0.1 ConnectionRefusedError 111"),
        "{}",
        o.stdout
    );
    if !outside.is_empty() {
        assert!(
            o.stdout.contains(&format!("{outside} OSError 101")),
            "{}",
            o.stdout
        );
    }
    assert!(o.stdout.contains("own loopback has the port free"));
    assert!(!o.stdout.contains("connected"), "{}", o.stdout);
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the host's listener was reached"
    );
    // The refused connect to the kernel's own loopback is no attempt to
    // leave; the one to the host's address is.
    assert_eq!(
        o.fired.contains(&Verdict::NetworkBlocked),
        !outside.is_empty(),
        "{o:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pool_workers_that_print_run_on_the_kernels_loopback() {
    let mut l = limits();
    // Ten prints stalled about 6 s each with the loopback down.
    l.timeout = std::time::Duration::from_secs(8);
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    let code = r#"
import multiprocessing as mp
import sys
def work(i):
    sys.stdout.write(f'worker says {i}\n')
    sys.stdout.flush()
    return i
with mp.Pool(2) as pool:
    print('sum', sum(pool.map(work, range(10))))
"#;
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    for i in 0..10 {
        assert!(
            o.stdout.contains(&format!("worker says {i}\n")),
            "{}",
            o.stdout
        );
    }
    assert!(o.stdout.contains("sum 45"), "{}", o.stdout);
    assert!(!o.fired.contains(&Verdict::NetworkBlocked), "{o:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kernel_writes_nothing_on_the_hosts_disk() {
    let l = limits();
    let Some(sandbox) = common::confined() else {
        return;
    };
    let mut k = start(&sandbox, &l).await;
    // Its runtime directory is the one place in its view on the host's
    // disk; without a file-size rlimit nothing but ownership bounds it.
    let code = r#"
import os
from ipykernel import get_connection_file
path = get_connection_file()
for what, attempt in [('append', lambda: open(path, 'a')),
                      ('create', lambda: open(os.path.join(os.path.dirname(path), 'planted'), 'w'))]:
    try:
        attempt()
        print(what, 'allowed')
    except PermissionError as e:
        print(what, 'refused', e.errno)
"#;
    let o = k.execute(code, &exec(&l)).await;
    assert_eq!(o.verdict, Verdict::Ok, "{o:?}");
    assert!(o.stdout.contains("append refused 13"), "{}", o.stdout);
    assert!(o.stdout.contains("create refused 13"), "{}", o.stdout);
}
