//! The relay's cap on hand-made ZMTP streams: messages under it pass
//! unchanged, past it they are emptied (or, with a tap, dropped) and
//! reported with what their headers say.

use super::*;
use crate::kernel::zmtp::{push_frame, LONG};

fn frame(out: &mut Vec<u8>, body: &[u8], more: bool) {
    push_frame(out, u8::from(more), body);
}

/// A message's frames up to its parent header.
fn head(out: &mut Vec<u8>, topic: &[u8], parent: &str) {
    frame(out, topic, true);
    frame(out, DELIMITER, true);
    frame(out, b"signature", true);
    frame(out, b"{\"msg_id\":\"m\"}", true);
    frame(out, format!("{{\"msg_id\":\"{parent}\"}}").as_bytes(), true);
}

fn message(out: &mut Vec<u8>, parent: &str, content: &[u8]) {
    head(out, b"stream.stdout", parent);
    frame(out, b"{}", true);
    frame(out, content, false);
}

async fn run(input: &[u8], max: u64) -> (Vec<u8>, Vec<Oversize>) {
    run_tapped(input, max, None).await
}

/// A tap that only watches.
struct Watching;

impl Tap for Watching {
    fn claims_ours(&self, _header: &[u8]) -> bool {
        false
    }
    fn after(&self, _seen: &Seen<'_>) -> Option<Vec<u8>> {
        None
    }
    fn ended(&self) -> futures_util::future::BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }
    fn last(&self) -> Vec<u8> {
        Vec::new()
    }
}

async fn run_tapped(input: &[u8], max: u64, tap: Option<&dyn Tap>) -> (Vec<u8>, Vec<Oversize>) {
    let (tx, mut rx) = mpsc::channel(16);
    let mut out = Vec::new();
    let cap = Cap { max, report: tx };
    let result = capped_copy(input, &mut out, &cap, tap).await;
    assert_eq!(
        result.unwrap_err().kind(),
        std::io::ErrorKind::UnexpectedEof
    );
    let mut reports = Vec::new();
    while let Ok(r) = rx.try_recv() {
        reports.push(r);
    }
    (out, reports)
}

#[tokio::test]
async fn the_greeting_goes_on_in_the_parts_it_comes_in() {
    // libzmq's handshake: each side sends its signature and waits for
    // the other's before the rest of its greeting.
    let (mut kernel, from) = tokio::io::duplex(1024);
    let (to, mut client) = tokio::io::duplex(1024);
    let (tx, _rx) = mpsc::channel(1);
    let relay = tokio::spawn(async move {
        let mut to = to;
        let cap = Cap {
            max: 1 << 20,
            report: tx,
        };
        capped_copy(from, &mut to, &cap, None).await
    });
    let signature = [0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f];
    kernel.write_all(&signature).await.unwrap();
    let mut got = [0u8; 10];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        client.read_exact(&mut got),
    );
    read.await
        .expect("the signature passes before the rest of the greeting")
        .unwrap();
    assert_eq!(got, signature);
    drop(kernel);
    assert_eq!(
        relay.await.unwrap().unwrap_err().kind(),
        std::io::ErrorKind::UnexpectedEof
    );
}

#[tokio::test]
async fn small_messages_pass_unchanged() {
    let mut input = vec![0xffu8; 64];
    message(&mut input, "cell-1", b"hello");
    message(&mut input, "cell-1", &[b'x'; 100_000]);
    let (out, reports) = run(&input, 1 << 20).await;
    assert_eq!(out, input);
    assert!(reports.is_empty());
}

#[tokio::test]
async fn a_message_past_the_cap_is_emptied_and_reported() {
    let mut input = vec![0xffu8; 64];
    message(&mut input, "cell-1", &vec![b'x'; 3 << 20]);
    message(&mut input, "cell-2", b"after");
    let (out, reports) = run(&input, 1 << 20).await;
    assert_eq!(
        reports,
        [Oversize {
            parent: Some("cell-1".into()),
            msg_id: Some("m".into()),
            bytes: 3 << 20,
            msg_type: None,
        }]
    );
    // The big body never reached the client; the next message did.
    assert!(out.len() < 1024, "{}", out.len());
    let mut expected_tail = Vec::new();
    message(&mut expected_tail, "cell-2", b"after");
    assert!(out.ends_with(&expected_tail));
}

#[tokio::test]
async fn with_a_tap_a_message_past_the_cap_goes_nowhere_at_all() {
    // A gateway's server fails on a message whose signature does not
    // match: nothing of it may reach it.
    let mut input = vec![0xffu8; 64];
    message(&mut input, "cell-1", b"before");
    message(&mut input, "cell-1", &vec![b'x'; 3 << 20]);
    head(&mut input, b"display_data", "cell-1");
    for _ in 0..2000 {
        frame(&mut input, b"", true);
    }
    frame(&mut input, b"", false);
    message(&mut input, "cell-2", b"after");
    let (out, reports) = run_tapped(&input, 1 << 20, Some(&Watching)).await;
    assert_eq!(reports.len(), 2, "{reports:?}");
    let mut expected = vec![0xffu8; 64];
    message(&mut expected, "cell-1", b"before");
    message(&mut expected, "cell-2", b"after");
    assert_eq!(out, expected);
}

#[tokio::test]
async fn a_lying_frame_length_costs_nothing() {
    // A header claiming 2^60 bytes: skipped as it streams, never allocated.
    let mut input = vec![0xffu8; 64];
    input.push(LONG);
    input.extend_from_slice(&(1u64 << 60).to_be_bytes());
    input.extend_from_slice(&[b'y'; 4096]);
    let (out, reports) = run(&input, 1 << 20).await;
    assert_eq!(out.len(), 64 + 2);
    assert!(reports.is_empty(), "the message never ended");
}

#[tokio::test]
async fn a_message_of_too_many_frames_is_cut_and_reported() {
    // Millions of empty buffer frames fit the byte cap; each would
    // still cost the client an allocation.
    let mut input = vec![0xffu8; 64];
    head(&mut input, b"display_data", "cell-1");
    for _ in 0..100_000 {
        frame(&mut input, b"", true);
    }
    frame(&mut input, b"", false);
    message(&mut input, "cell-2", b"after");
    let (out, reports) = run(&input, 1 << 20).await;
    assert_eq!(
        reports,
        [Oversize {
            parent: Some("cell-1".into()),
            msg_id: Some("m".into()),
            bytes: 0,
            msg_type: None,
        }]
    );
    // What reached the client: at most MAX_FRAMES frames of it, then
    // one empty end, then the next message whole.
    assert!(
        out.len() < 64 + 2 * MAX_FRAMES as usize + 256,
        "{}",
        out.len()
    );
    let mut expected_tail = Vec::new();
    message(&mut expected_tail, "cell-2", b"after");
    assert!(out.ends_with(&expected_tail));
}

#[tokio::test]
async fn the_echo_of_large_code_is_dropped_but_is_not_output() {
    // The kernel's execute_input echoes the cell's code: past the cap it is
    // emptied like any message, and reported as not the cell's output.
    let mut input = vec![0xffu8; 64];
    frame(&mut input, b"execute_input", true);
    frame(&mut input, DELIMITER, true);
    frame(&mut input, b"signature", true);
    frame(
        &mut input,
        b"{\"msg_id\":\"echo\",\"msg_type\":\"execute_input\"}",
        true,
    );
    frame(&mut input, b"{\"msg_id\":\"cell-1\"}", true);
    frame(&mut input, b"{}", true);
    frame(&mut input, &vec![b'#'; 2 << 20], false);
    message(&mut input, "cell-1", b"1\n");
    let (out, reports) = run(&input, 1 << 20).await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    let echo = &reports[0];
    assert_eq!(echo.msg_type.as_deref(), Some("execute_input"));
    assert_eq!(echo.parent.as_deref(), Some("cell-1"));
    assert!(!echo.is_output());
    let mut expected_tail = Vec::new();
    message(&mut expected_tail, "cell-1", b"1\n");
    assert!(out.ends_with(&expected_tail));
    // Any other message past the cap is output.
    let stream = Oversize {
        msg_type: Some("stream".into()),
        ..echo.clone()
    };
    assert!(stream.is_output());
    assert!(Oversize {
        msg_type: None,
        ..echo.clone()
    }
    .is_output());
}
