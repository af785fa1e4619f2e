//! Properties of the relay over generated ZMTP streams: nothing past the
//! cap reaches the client, and messages under it pass unchanged.

use proptest::prelude::*;

use super::*;
use crate::kernel::zmtp::{parse_frame, push_frame};

/// One frame as generated: flags (without LONG, which follows from the
/// length) and body.
#[derive(Debug, Clone)]
struct Frame {
    more: bool,
    command: bool,
    body: Vec<u8>,
}

fn frame() -> impl Strategy<Value = Frame> {
    let body = prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..300),
        2 => Just(DELIMITER.to_vec()),
        1 => (256usize..3000).prop_map(|n| vec![b'x'; n]),
        1 => Just(vec![b'y'; SMALL_FRAME as usize + 10]),
    ];
    (any::<bool>(), proptest::bool::weighted(0.1), body).prop_map(|(more, command, body)| Frame {
        more,
        command,
        body,
    })
}

fn encode(frames: &[Frame]) -> Vec<u8> {
    let mut out = vec![0xffu8; 64];
    for f in frames {
        let flags = u8::from(f.more) | if f.command { COMMAND } else { 0 };
        push_frame(&mut out, flags, &f.body);
    }
    out
}

/// The frames of a relayed stream (flags, length); a cut last one is left
/// out.
fn decode(stream: &[u8]) -> Vec<(u8, u64)> {
    let mut frames = Vec::new();
    let mut at = 64;
    while let Some((flags, body, used)) = parse_frame(&stream[at..]) {
        frames.push((flags, body.len() as u64));
        at += used;
    }
    frames
}

fn relay(input: &[u8], max: u64) -> (std::io::Result<()>, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (tx, _rx) = mpsc::channel(1 << 16);
    let mut out = Vec::new();
    let cap = Cap { max, report: tx };
    let result = runtime.block_on(capped_copy(input, &mut out, &cap, None));
    (result, out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_frame_past_the_cap_reaches_the_client(
        frames in proptest::collection::vec(frame(), 0..24),
        cut in any::<prop::sample::Index>(),
        max in 0u64..4000,
    ) {
        let mut input = encode(&frames);
        // The kernel may stop anywhere, even inside a frame.
        input.truncate(64 + cut.index(input.len() - 63));
        let (_, out) = relay(&input, max);
        for (flags, len) in decode(&out) {
            let limit = if flags & COMMAND != 0 { SMALL_FRAME } else { max };
            prop_assert!(len <= limit, "a frame of {len} bytes (flags {flags:#x}), cap {max}");
        }
    }

    #[test]
    fn messages_under_the_cap_pass_unchanged(
        frames in proptest::collection::vec(frame(), 0..24),
    ) {
        let mut frames = frames;
        frames.retain(|f| !f.command || f.body.len() as u64 <= SMALL_FRAME);
        let input = encode(&frames);
        let (result, out) = relay(&input, u64::MAX);
        prop_assert_eq!(
            result.unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof,
            "the stream ends"
        );
        prop_assert!(out == input, "the stream changed");
    }
}

#[test]
fn a_long_command_frame_ends_the_connection() {
    // Found by the property: command frames were outside the cap, so a
    // kernel could hand the client a frame of any length to read whole.
    let input = encode(&[Frame {
        more: false,
        command: true,
        body: vec![b'z'; 1 << 20],
    }]);
    let (result, out) = relay(&input, 1 << 20);
    assert_eq!(result.unwrap_err().kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(out.len(), 64, "only the greeting went on");
}
