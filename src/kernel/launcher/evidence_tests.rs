//! The tap on a real relay: a fake kernel on a Unix socket, a client on
//! TCP reading what the relay writes.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::{mpsc, watch};

use super::*;
use crate::kernel::wire_cap::{Relay, Taps};
use crate::kernel::zmtp::{parse_frame, MORE};
use crate::sandbox::ExitInfo;

const KEY: &str = "a-kernel-key";

fn sign(parts: [&[u8]; 4]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, KEY.as_bytes());
    let mut signing = hmac::Context::with_key(&key);
    for part in parts {
        signing.update(part);
    }
    hex::encode(signing.sign().as_ref())
}

/// A message the kernel signs with its key, as ipykernel would;
/// `msg_type` as written in the header's JSON.
fn kernel_message(msg_type: &str, parent: &str, content: &str) -> Vec<u8> {
    let header = format!(
        r#"{{"msg_id":"k-{parent}","session":"s","username":"u","date":"2024-01-01T00:00:00Z","msg_type":"{msg_type}","version":"5.3"}}"#
    );
    let parent = format!(r#"{{"msg_id":"{parent}","msg_type":"execute_request"}}"#);
    let parts = [
        header.as_bytes(),
        parent.as_bytes(),
        b"{}",
        content.as_bytes(),
    ];
    let signature = sign(parts);
    zmtp_message(&[
        b"kernel.x.status",
        DELIMITER,
        signature.as_bytes(),
        parts[0],
        parts[1],
        parts[2],
        parts[3],
    ])
}

fn status(state: &str, parent: &str) -> Vec<u8> {
    kernel_message(
        "status",
        parent,
        &format!(r#"{{"execution_state":"{state}"}}"#),
    )
}

/// One message as the client sees it.
#[derive(Debug, PartialEq)]
struct Received {
    msg_type: String,
    parent: String,
    valid: bool,
    content: serde_json::Value,
}

/// The messages in what the client read after the greeting.
fn received(stream: &[u8]) -> Vec<Received> {
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut out = Vec::new();
    let mut at = 64;
    while at < stream.len() {
        let (flags, body, used) = parse_frame(&stream[at..]).unwrap();
        frames.push(body.to_vec());
        at += used;
        if flags & MORE == 0 {
            let d = frames.iter().position(|f| f == DELIMITER).unwrap();
            let parts = [
                &frames[d + 2],
                &frames[d + 3],
                &frames[d + 4],
                &frames[d + 5],
            ];
            let valid = sign(parts.map(|p| p.as_slice())).as_bytes() == frames[d + 1];
            let json = |f: &[u8]| serde_json::from_slice::<serde_json::Value>(f).ok();
            let header = json(parts[0]).unwrap_or_default();
            out.push(Received {
                msg_type: header["msg_type"].as_str().unwrap_or("?").to_string(),
                parent: json(parts[1]).unwrap_or_default()["msg_id"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                valid,
                content: json(parts[3]).unwrap_or_default(),
            });
            frames.clear();
        }
    }
    out
}

/// Runs a relay with the tap between a fake kernel that sends `sent` and
/// then dies by SIGKILL, and a client; what the client read.
async fn through_the_relay(sent: Vec<u8>) -> Vec<Received> {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("iopub");
    let kernel = UnixListener::bind(&socket).unwrap();
    let (exit_tx, exit) = watch::channel(None);
    let read: ReadJail = Arc::new(|| JailReading {
        counters: Counters {
            oom_kills: 1,
            cpu_usage_usec: 42,
            ..Counters::default()
        },
        traces: Traces::default(),
        kernel_uid: Some(1234),
        stops: HostStops {
            oversize_messages: 2,
            ..HostStops::default()
        },
    });
    let tap = EvidenceTap::new(KEY, "hmac-sha256", read, exit).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (report, _reports) = mpsc::channel(4);
    let taps = Taps {
        from_kernel: Some(Arc::new(tap)),
        to_kernel: None,
    };
    let relay = Relay::start_tcp(listener, &socket, 1 << 20, report, taps);
    let mut client = TcpStream::connect(address).await.unwrap();
    let (mut kernel, _) = kernel.accept().await.unwrap();
    kernel.write_all(&[0xff; 64]).await.unwrap();
    kernel.write_all(&sent).await.unwrap();
    kernel.flush().await.unwrap();
    // The kernel's messages arrive before the end is known.
    tokio::time::sleep(Duration::from_millis(200)).await;
    exit_tx
        .send(Some(ExitInfo::from_status(
            std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL),
        )))
        .unwrap();
    let mut stream = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut stream));
    read.await
        .expect("the relay closes the client after the last message")
        .unwrap();
    relay.settle(Duration::from_secs(1)).await;
    drop(kernel);
    received(&stream)
}

#[tokio::test]
async fn each_status_is_followed_by_one_signed_reading_with_its_parent() {
    let mut sent = status("busy", "cell-1");
    sent.extend(kernel_message(
        "stream",
        "cell-1",
        r#"{"name":"stdout","text":"hi"}"#,
    ));
    sent.extend(status("idle", "cell-1"));
    let got = through_the_relay(sent).await;
    let kinds: Vec<_> = got.iter().map(|m| m.msg_type.as_str()).collect();
    assert_eq!(
        kinds,
        ["status", MSG_TYPE, "stream", "status", MSG_TYPE, MSG_TYPE],
        "{got:#?}"
    );
    assert!(got.iter().all(|m| m.valid), "{got:#?}");
    assert!(got.iter().all(|m| m.parent == "cell-1"), "{got:#?}");
    let moments: Vec<_> = got
        .iter()
        .filter(|m| m.msg_type == MSG_TYPE)
        .map(|m| serde_json::from_value::<HostEvidence>(m.content.clone()).unwrap())
        .collect();
    assert_eq!(moments[0].moment, Moment::Busy);
    assert_eq!(moments[1].moment, Moment::Idle);
    assert_eq!(moments[1].counters.cpu_usage_usec, 42);
    assert_eq!(moments[1].kernel_uid, Some(1234));
    assert_eq!(moments[1].stops.oversize_messages, 2);
    assert_eq!(moments[1].exit, None);
    // The last one, after the kernel died, answers the request it was busy with.
    assert_eq!(moments[2].moment, Moment::Dead);
    assert_eq!(
        moments[2].exit.as_ref().and_then(|e| e.signal),
        Some(libc::SIGKILL)
    );
    assert_eq!(moments[2].counters.oom_kills, 1);
}

#[tokio::test]
async fn a_reading_the_kernel_forges_never_arrives_signed() {
    let fake = r#"{"moment":"idle","counters":{"oom_kills":0,"pids_max_events":0,"cpu_usage_usec":0,"nr_throttled":0},"exit":null,"kernel_uid":1,"launcher_pid":1,"launcher":"retrace"}"#;
    let mut sent = status("busy", "cell-1");
    sent.extend(kernel_message(MSG_TYPE, "cell-1", fake));
    // Spelled with an escape: the JSON says the same.
    sent.extend(kernel_message(
        r"retrace\u005fhost_evidence",
        "cell-1",
        fake,
    ));
    let got = through_the_relay(sent).await;
    // Not even spoiled: a gateway's server fails on a message whose
    // signature does not match, so nothing of it goes on.
    let forged: Vec<_> = got
        .iter()
        .filter(|m| m.content.get("moment").and_then(|v| v.as_str()) == Some("idle"))
        .collect();
    assert_eq!(forged, Vec::<&Received>::new(), "{got:#?}");
    // The launcher's own readings still arrive signed.
    let signed = got.iter().filter(|m| m.msg_type == MSG_TYPE && m.valid);
    assert_eq!(signed.count(), 2, "{got:#?}");
}

/// A jail that reads all zeros, unconfined.
fn quiet_jail() -> ReadJail {
    Arc::new(|| JailReading {
        counters: Counters::default(),
        traces: Traces::default(),
        kernel_uid: None,
        stops: HostStops::default(),
    })
}

#[test]
fn claims_are_judged_on_what_any_parser_reads() {
    let (_tx, exit) = watch::channel(None);
    let read = quiet_jail();
    let tap = EvidenceTap::new(KEY, "hmac-sha256", read.clone(), exit.clone()).unwrap();
    assert!(tap.claims_ours(br#"{"msg_type":"retrace_host_evidence"}"#));
    assert!(tap.claims_ours(br#"{"msg_type":"retrace\u005fhost_evidence"}"#));
    assert!(tap.claims_ours(b"{\"msg_type\":\"status\", NaN}"));
    assert!(!tap.claims_ours(br#"{"msg_type":"status","msg_id":"x"}"#));
    assert!(EvidenceTap::new("", "hmac-sha256", read.clone(), exit.clone()).is_err());
    assert!(EvidenceTap::new(KEY, "hmac-md5", read, exit).is_err());
}

#[test]
fn the_guard_is_told_once_of_execute_requests_their_output_and_their_end() {
    let (_tx, exit) = watch::channel(None);
    let read = quiet_jail();
    let (cells, mut told) = mpsc::unbounded_channel();
    let tap = EvidenceTap::new(KEY, "hmac-sha256", read, exit)
        .unwrap()
        .telling(cells);
    let tap = Arc::new(tap);
    let parent = |id: &str, t: &str| format!(r#"{{"msg_id":"{id}","msg_type":"{t}"}}"#);
    // Requests as they go into the kernel, on the shell channel.
    for (id, msg_type) in [("info", "kernel_info_request"), ("cell", "execute_request")] {
        let request = parent(id, msg_type);
        RequestTap(tap.clone()).after(&Seen {
            header: request.as_bytes(),
            parent: b"{}",
            content: b"{}",
            bytes: 2,
        });
    }
    let sent = std::cell::Cell::new(0);
    let see = |msg_type: &str, parent: &str, content: &str| {
        // Each message once, but the stream twice (two connections).
        let id = if msg_type == "stream" {
            0
        } else {
            sent.get() + 1
        };
        sent.set(sent.get() + 1);
        let header = format!(r#"{{"msg_id":"m{id}","msg_type":"{msg_type}"}}"#);
        tap.after(&Seen {
            header: header.as_bytes(),
            parent: parent.as_bytes(),
            content: content.as_bytes(),
            bytes: content.len() as u64,
        })
    };
    let busy = r#"{"execution_state":"busy"}"#;
    let idle = r#"{"execution_state":"idle"}"#;
    let text = r#"{"name":"stdout","text":"hi"}"#;
    // A kernel_info request (the gateway's nudge) is no cell.
    assert!(see("status", &parent("info", "kernel_info_request"), busy).is_some());
    see("status", &parent("cell", "execute_request"), busy);
    see("stream", &parent("cell", "execute_request"), text);
    see("stream", &parent("cell", "execute_request"), text);
    see("status", &parent("info", "kernel_info_request"), idle);
    see("status", &parent("cell", "execute_request"), idle);
    let mut events = Vec::new();
    while let Ok(event) = told.try_recv() {
        events.push(event);
    }
    assert_eq!(
        events,
        [
            CellEvent::Requested("cell".into()),
            CellEvent::Busy("cell".into()),
            CellEvent::Output {
                request: "cell".into(),
                bytes: text.len() as u64
            },
            CellEvent::Idle("cell".into()),
        ]
    );
}

#[test]
fn a_cells_first_reading_is_taken_as_its_request_goes_in() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let (_tx, exit) = watch::channel(None);
    let refusals = Arc::new(AtomicU64::new(0));
    let now = refusals.clone();
    let read: ReadJail = Arc::new(move || JailReading {
        counters: Counters::default(),
        traces: Traces {
            net_refusals: now.load(Ordering::SeqCst),
            ..Traces::default()
        },
        kernel_uid: None,
        stops: HostStops::default(),
    });
    let tap = Arc::new(EvidenceTap::new(KEY, "hmac-sha256", read, exit).unwrap());
    let requests = RequestTap(tap.clone());
    let header = |id: &str, t: &str| format!(r#"{{"msg_id":"{id}","msg_type":"{t}"}}"#);
    let request = header("cell", "execute_request");
    assert!(requests
        .after(&Seen {
            header: request.as_bytes(),
            parent: b"{}",
            content: b"{}",
            bytes: 2,
        })
        .is_none());
    // The cell refused a connection before the kernel's `busy` was read.
    refusals.store(1, Ordering::SeqCst);
    let reading = |moment: &str| -> HostEvidence {
        let status = header(&format!("s-{moment}"), "status");
        let content = format!(r#"{{"execution_state":"{moment}"}}"#);
        let message = tap
            .after(&Seen {
                header: status.as_bytes(),
                parent: request.as_bytes(),
                content: content.as_bytes(),
                bytes: content.len() as u64,
            })
            .unwrap();
        let got = received(&[vec![0; 64], message].concat());
        serde_json::from_value(got[0].content.clone()).unwrap()
    };
    assert_eq!(reading("busy").traces.net_refusals, 0);
    assert_eq!(reading("idle").traces.net_refusals, 1);
    // Another connection of the gateway's to IOPub gets the same start.
    assert_eq!(reading("busy").traces.net_refusals, 0);
}
