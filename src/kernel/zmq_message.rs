//! One message read from a local kernel's ZMQ socket: its signature
//! verified on the bytes as they came, then its JSON parts decoded by the
//! kernel text decoder ([`super::text`]) before they are parsed, so a
//! message holding text that is not valid Unicode is kept (with U+FFFD)
//! instead of being dropped whole by the parser, as the client's own
//! `read` would.

use jupyter_protocol::{Header, JupyterMessage, JupyterMessageContent};
use jupyter_zmq_client::{Connection, RawMessage, RuntimeError};
use zeromq::SocketRecv;

use super::text::decode_json;

/// A message and how many invalid text sequences its parts held.
pub(super) struct Received {
    pub(super) msg: JupyterMessage,
    pub(super) replaced: u64,
}

/// Reads the next message of `conn`. A transport error ends the stream
/// (see `client::is_fatal`); any other error is that message's only.
pub(super) async fn read<S: SocketRecv>(
    conn: &mut Connection<S>,
) -> Result<Received, RuntimeError> {
    let multipart = conn.socket.recv().await?;
    let raw = RawMessage::from_multipart(multipart, &conn.mac)?;
    parse(raw)
}

/// The message of verified parts: header, parent header, metadata and
/// content decoded, then parsed as the client would.
fn parse(raw: RawMessage) -> Result<Received, RuntimeError> {
    let parts = &raw.jparts;
    if parts.len() < 4 {
        return Err(RuntimeError::InsufficientMessageParts(parts.len()));
    }
    let decoded: Vec<_> = parts[..4].iter().map(|p| decode_json(p)).collect();
    let replaced = decoded.iter().map(|d| d.replaced).sum();
    let header: Header = serde_json::from_str(&decoded[0].json)?;
    let content = serde_json::from_str(&decoded[3].json)?;
    let content = JupyterMessageContent::from_type_and_content(&header.msg_type, content).map_err(
        |source| RuntimeError::ParseError {
            msg_type: header.msg_type.clone(),
            source,
        },
    )?;
    // An empty parent header (`{}`) is no parent.
    let parent_header = serde_json::from_str(&decoded[1].json).ok();
    let metadata = serde_json::from_str(&decoded[2].json)?;
    let msg = JupyterMessage {
        zmq_identities: raw.zmq_identities.clone(),
        header,
        parent_header,
        metadata,
        content,
        buffers: parts[4..].to_vec(),
        channel: None,
    };
    Ok(Received { msg, replaced })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use jupyter_protocol::{ExecuteRequest, StreamContent};

    fn raw(content: &[u8]) -> RawMessage {
        let parent = JupyterMessage::new(ExecuteRequest::new("print(1)".into()), None);
        let msg = JupyterMessage::new(StreamContent::stdout("x"), Some(&parent));
        RawMessage {
            zmq_identities: Vec::new(),
            jparts: vec![
                Bytes::from(serde_json::to_vec(&msg.header).unwrap()),
                Bytes::from(serde_json::to_vec(&msg.parent_header).unwrap()),
                Bytes::from_static(b"{}"),
                Bytes::copy_from_slice(content),
            ],
        }
    }

    fn text(received: &Received) -> &str {
        match &received.msg.content {
            JupyterMessageContent::StreamContent(s) => &s.text,
            other => panic!("not a stream: {other:?}"),
        }
    }

    #[test]
    fn a_stream_with_a_lone_surrogate_is_kept_with_a_replacement() {
        let got = parse(raw(br#"{"name":"stdout","text":"ok\ud800\n"}"#)).unwrap();
        assert_eq!(text(&got), "ok\u{FFFD}\n");
        assert_eq!(got.replaced, 1);
        assert!(got.msg.parent_header.is_some());
        let got = parse(raw(b"{\"name\":\"stdout\",\"text\":\"x\xff\\n\"}")).unwrap();
        assert_eq!(text(&got), "x\u{FFFD}\n");
        assert_eq!(got.replaced, 1);
        let got = parse(raw(br#"{"name":"stdout","text":"fine\n"}"#)).unwrap();
        assert_eq!((text(&got), got.replaced), ("fine\n", 0));
    }

    #[test]
    fn garbage_is_still_an_error_of_that_message() {
        assert!(parse(raw(b"not json")).is_err());
        let mut short = raw(b"{}");
        short.jparts.truncate(3);
        assert!(parse(short).is_err());
    }
}
