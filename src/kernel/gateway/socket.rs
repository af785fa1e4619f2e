//! A kernel's channels over the gateway's websocket
//! (`/api/kernels/<id>/channels`): Jupyter messages as JSON text frames
//! with a `channel` field, the protocol every Jupyter server speaks. They
//! arrive in the same queues as a local kernel's, through the same filters.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use jupyter_protocol::{Channel, JupyterMessage};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::super::client::{Channels, Outbound};
use super::super::text::decode_json_str;
use super::super::KernelError;
use super::evidence::EvidenceLog;
use super::rest::Rest;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

struct SocketOutbound {
    sink: SplitSink<Socket, Message>,
    quickack: Option<OwnedFd>,
}

#[async_trait::async_trait]
impl Outbound for SocketOutbound {
    async fn send(&mut self, channel: Channel, mut msg: JupyterMessage) -> Result<(), KernelError> {
        msg.channel = Some(channel);
        let text = serde_json::to_string(&msg).map_err(|source| KernelError::Encode {
            what: "a message",
            source,
        })?;
        // The answers to this request are to be ACKed at once (see [`ack_switch`]).
        quick_ack(&self.quickack);
        self.sink
            .send(Message::text(text))
            .await
            .map_err(|e| KernelError::Websocket {
                what: "sending on the kernel's websocket".into(),
                source: Box::new(e),
            })
    }
}

/// Opens the channels of kernel `kernel_id`. `session` names this client
/// to the gateway: a reconnection with the same session gets the messages
/// the server buffered while it was away. Messages larger than
/// `max_message` bytes end the connection (as a local kernel's relay would
/// drop them). Host evidence goes to `host`, never to the queues: it
/// follows the messages a cell is complete with.
pub(super) async fn connect(
    rest: &Rest,
    kernel_id: &str,
    session: &str,
    max_message: usize,
    host: Arc<EvidenceLog>,
) -> Result<Channels, KernelError> {
    let url = socket_url(rest.base(), kernel_id, session);
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| KernelError::Websocket {
            what: format!("websocket {url}"),
            source: Box::new(e),
        })?;
    if let Some(token) = rest.token() {
        let value = format!("token {token}").parse().map_err(|_| {
            KernelError::Gateway("the gateway token is not a valid header value".into())
        })?;
        request.headers_mut().insert("Authorization", value);
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    let (socket, _) = tokio_tungstenite::connect_async_with_config(request, Some(config), true)
        .await
        .map_err(|e| KernelError::Websocket {
            what: format!("websocket {url}"),
            source: Box::new(e),
        })?;
    let quickack = ack_switch(&socket);
    let (sink, mut stream) = socket.split();
    let outbound = SocketOutbound {
        sink,
        quickack: quickack.as_ref().and_then(|fd| fd.try_clone().ok()),
    };
    let (router, mut channels) = Channels::open(Box::new(outbound));
    let router = router.with_server_status();
    let reader = tokio::spawn(async move {
        while let Some(frame) = stream.next().await {
            quick_ack(&quickack);
            let text = match frame {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(_)) => break,
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(error = %e, "the kernel's websocket failed");
                    break;
                }
            };
            // Garbage from the kernel is that message's problem only.
            let Some((channel, msg, replaced)) = parse(&text) else {
                continue;
            };
            if matches!(channel, Channel::IOPub) && host.take(&msg) {
                continue;
            }
            if !router.route(channel, msg, replaced).await {
                break;
            }
        }
        // Dropping the router ends the queues: the session sees the loss.
    });
    channels.keep_reader(reader);
    Ok(channels)
}

/// A handle on the connection's TCP socket to switch delayed ACKs off
/// after every frame. Jupyter servers write each message as it comes with
/// Nagle's algorithm on, so a reply behind a small status message waits for
/// the ACK of that message, which Linux delays by up to 40 ms while the
/// client has nothing to send: every cell took 40 ms more.
fn ack_switch(socket: &Socket) -> Option<OwnedFd> {
    let tcp = match socket.get_ref() {
        MaybeTlsStream::Plain(tcp) => tcp,
        MaybeTlsStream::Rustls(tls) => tls.get_ref().0,
        _ => return None,
    };
    tcp.as_fd().try_clone_to_owned().ok()
}

/// Linux leaves quick-ACK mode on its own; it is switched on again often.
fn quick_ack(fd: &Option<OwnedFd>) {
    if let Some(fd) = fd {
        let _ = socket2::SockRef::from(fd).set_tcp_quickack(true);
    }
}

/// `ws(s)://<base>/api/kernels/<id>/channels?session_id=<session>`.
fn socket_url(base: &str, kernel_id: &str, session: &str) -> String {
    let ws = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{base}"),
    };
    format!("{ws}/api/kernels/{kernel_id}/channels?session_id={session}")
}

/// A frame's channel and message, and how many invalid text sequences
/// (lone surrogate escapes a server re-encoded) the decoder replaced in
/// it; `None` for anything else.
fn parse(text: &str) -> Option<(Channel, JupyterMessage, u64)> {
    let decoded = decode_json_str(text);
    let mut value: Value = serde_json::from_str(&decoded.json).ok()?;
    let channel = serde_json::from_value(value.get_mut("channel")?.take()).ok()?;
    let msg = JupyterMessage::from_value(value).ok()?;
    Some((channel, msg, decoded.replaced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_protocol::{JupyterMessageContent, Status};

    #[test]
    fn socket_urls_follow_the_scheme_and_path() {
        assert_eq!(
            socket_url("http://127.0.0.1:8888", "k1", "s"),
            "ws://127.0.0.1:8888/api/kernels/k1/channels?session_id=s"
        );
        assert_eq!(
            socket_url("https://eg.example/gateway", "k1", "s"),
            "wss://eg.example/gateway/api/kernels/k1/channels?session_id=s"
        );
    }

    #[test]
    fn frames_carry_their_channel() {
        let mut msg = JupyterMessage::new(Status::idle(), None);
        msg.channel = Some(Channel::IOPub);
        let text = serde_json::to_string(&msg).unwrap();
        let (channel, back, replaced) = parse(&text).unwrap();
        assert_eq!(replaced, 0);
        assert!(matches!(channel, Channel::IOPub));
        assert!(matches!(back.content, JupyterMessageContent::Status(_)));
        assert_eq!(back.header.msg_id, msg.header.msg_id);
        assert!(parse("{\"channel\": \"shell\"}").is_none());
        // A server re-encodes a kernel's lone surrogate as an escape.
        let frame = text.replace("\"content\":{", "\"content\":{\"x\":\"\\udcff\",");
        let (_, _, replaced) = parse(&frame).unwrap();
        assert_eq!(replaced, 1);
        assert!(parse("not json").is_none());
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;
    use crate::util::props::{hostile_text, megabyte_of, within_bound};
    use jupyter_protocol::{ExecuteRequest, JupyterMessageContent, StreamContent};

    fn channel() -> impl Strategy<Value = Channel> {
        proptest::sample::select(vec![
            Channel::Shell,
            Channel::Control,
            Channel::IOPub,
            Channel::Stdin,
            Channel::Heartbeat,
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn any_frame_is_a_message_or_nothing(text in hostile_text(40)) {
            // Also a frame that is JSON with a channel, of arbitrary shape.
            let framed = format!("{{\"channel\": \"iopub\", \"header\": {text:?}}}");
            for t in [&text, &framed] {
                let _ = parse(t);
            }
        }

        #[test]
        fn a_message_comes_back_with_its_channel(ch in channel(), text in hostile_text(30)) {
            let mut msg = JupyterMessage::new(StreamContent::stdout(&text), None);
            msg.channel = Some(ch.clone());
            let frame = serde_json::to_string(&msg).unwrap();
            let (back_channel, back, replaced) = parse(&frame).expect("a message");
            prop_assert_eq!(replaced, 0);
            prop_assert_eq!(
                serde_json::to_value(back_channel).unwrap(),
                serde_json::to_value(ch).unwrap()
            );
            prop_assert_eq!(back.header.msg_id, msg.header.msg_id);
            match back.content {
                JupyterMessageContent::StreamContent(s) => prop_assert_eq!(s.text, text),
                other => prop_assert!(false, "{other:?}"),
            }
        }
    }

    #[test]
    fn a_megabyte_frame_is_read_in_linear_time() {
        let mut msg = JupyterMessage::new(ExecuteRequest::new(megabyte_of("x = 1\n")), None);
        msg.channel = Some(Channel::Shell);
        let frame = serde_json::to_string(&msg).unwrap();
        for t in [frame, megabyte_of("["), megabyte_of("{\"channel\":")] {
            within_bound("parse", &t, parse);
        }
    }
}
