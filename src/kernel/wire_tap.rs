//! What a relay of the wire cap may add to a kernel's stream (the
//! launcher's host evidence, `launcher::evidence`): a message of its own
//! after some of the kernel's, spoiling the kernel's messages that claim
//! to be its own, and a last message once the kernel's process has ended.
//! The relay does the ZMTP; the tap knows what the messages mean.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tokio::io::AsyncWrite;

/// ZMTP 3 frame flags.
pub(super) const MORE: u8 = 0x01;
pub(super) const LONG: u8 = 0x02;
pub(super) const COMMAND: u8 = 0x04;
/// The Jupyter wire protocol's delimiter between identities and message.
pub(super) const DELIMITER: &[u8] = b"<IDS|MSG>";
/// The ZMTP greeting, passed before any frame.
const GREETING: u64 = 64;

/// One whole message the kernel sent, as its Jupyter parts.
pub struct Seen<'a> {
    pub header: &'a [u8],
    pub parent: &'a [u8],
    /// Empty when it was too large to hold (`bytes` says how large).
    pub content: &'a [u8],
    /// The sizes of all its frames.
    pub bytes: u64,
}

pub trait Tap: Send + Sync + 'static {
    /// Whether a kernel message whose header frame is `header` claims to
    /// be one of the tap's: it must not reach the client intact.
    fn claims_ours(&self, header: &[u8]) -> bool;

    /// What the relay waits for before [`Tap::after`] is asked about
    /// `seen`, holding the kernel's later messages meanwhile (`seen`
    /// itself has gone on).
    fn hold_after(&self, _seen: &Seen<'_>) -> Option<BoxFuture<'static, ()>> {
        None
    }

    /// A whole ZMTP message to write after the kernel's message `seen`.
    fn after(&self, seen: &Seen<'_>) -> Option<Vec<u8>>;

    /// Resolves once the kernel's process has ended.
    fn ended(&self) -> BoxFuture<'static, ()>;

    /// The message written last, once the kernel has ended.
    fn last(&self) -> Vec<u8>;
}

/// A ZMTP message of `frames`.
pub fn zmtp_message(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.iter().map(|f| f.len() + 9).sum());
    for (i, body) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { MORE } else { 0 };
        let len = body.len() as u64;
        out.extend_from_slice(&frame_header(more, len));
        out.extend_from_slice(body);
    }
    out
}

/// A frame's flags and length, short or long as ZMTP wants.
pub(super) fn frame_header(flags: u8, len: u64) -> Vec<u8> {
    if len > 255 || flags & LONG != 0 {
        let mut header = vec![flags | LONG];
        header.extend_from_slice(&len.to_be_bytes());
        header
    } else {
        vec![flags, len as u8]
    }
}

/// Where the bytes written so far leave the client's ZMTP parser.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    Greeting {
        left: u64,
    },
    /// Between messages.
    Boundary,
    /// In a frame's header: its flags and the length bytes seen.
    Header {
        flags: u8,
        len: Vec<u8>,
    },
    Body {
        flags: u8,
        left: u64,
    },
    /// Between the frames of a message.
    Within,
}

/// A writer that follows the ZMTP framing of what passes through it, so
/// a copy cut off anywhere (the kernel died mid-message) can be closed
/// into a whole message before the tap's last one goes after it.
pub(super) struct Framed<W> {
    inner: W,
    at: Position,
}

impl<W> Framed<W> {
    pub(super) fn new(inner: W) -> Self {
        Framed {
            inner,
            at: Position::Greeting { left: GREETING },
        }
    }

    /// Bytes that end the message cut off here: the rest of its frame
    /// (zeros) and an empty last frame; `None` inside the greeting, where
    /// nothing can follow.
    pub(super) fn closing(&self) -> Option<Vec<u8>> {
        let (flags, left, mut out) = match &self.at {
            Position::Greeting { .. } => return None,
            Position::Boundary => return Some(Vec::new()),
            Position::Within => return Some(vec![0, 0]),
            Position::Header { flags, len } => {
                let need = if flags & LONG != 0 { 8 } else { 1 };
                let mut bytes = [0u8; 8];
                bytes[8 - need..][..len.len()].copy_from_slice(len);
                let out = bytes[8 - need + len.len()..].to_vec();
                (*flags, u64::from_be_bytes(bytes), out)
            }
            Position::Body { flags, left } => (*flags, *left, Vec::new()),
        };
        // A frame the relay wrote is at most the cap long: so is its rest.
        out.resize(out.len() + left as usize, 0);
        if flags & MORE != 0 {
            out.extend_from_slice(&[0, 0]);
        }
        Some(out)
    }

    fn follow(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (next, used) = match std::mem::replace(&mut self.at, Position::Boundary) {
                Position::Greeting { left } => {
                    let used = (left as usize).min(bytes.len());
                    let left = left - used as u64;
                    let next = if left == 0 {
                        Position::Boundary
                    } else {
                        Position::Greeting { left }
                    };
                    (next, used)
                }
                Position::Boundary | Position::Within => (
                    Position::Header {
                        flags: bytes[0],
                        len: Vec::new(),
                    },
                    1,
                ),
                Position::Header { flags, mut len } => {
                    let need = if flags & LONG != 0 { 8 } else { 1 };
                    let used = (need - len.len()).min(bytes.len());
                    len.extend_from_slice(&bytes[..used]);
                    let next = if len.len() < need {
                        Position::Header { flags, len }
                    } else {
                        let mut full = [0u8; 8];
                        full[8 - need..].copy_from_slice(&len);
                        end_of_body(flags, u64::from_be_bytes(full))
                    };
                    (next, used)
                }
                Position::Body { flags, left } => {
                    let used = (left.min(bytes.len() as u64)) as usize;
                    (end_of_body(flags, left - used as u64), used)
                }
            };
            self.at = next;
            bytes = &bytes[used..];
        }
    }
}

/// Where a frame with `left` bytes of body to come leaves the parser.
fn end_of_body(flags: u8, left: u64) -> Position {
    if left > 0 {
        Position::Body { flags, left }
    } else if flags & (MORE | COMMAND) == MORE {
        Position::Within
    } else {
        Position::Boundary
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Framed<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            self.follow(&buf[..n]);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn followed(bytes: &[u8]) -> Framed<Vec<u8>> {
        let mut framed = Framed::new(Vec::<u8>::new());
        framed.follow(&[0xff; 64]);
        for b in bytes {
            // Byte by byte: the state survives any split.
            framed.follow(std::slice::from_ref(b));
        }
        framed
    }

    #[test]
    fn a_message_cut_anywhere_is_closed_into_whole_frames() {
        let message = zmtp_message(&[b"topic", &[b'x'; 300], b"last"]);
        assert_eq!(followed(&message).closing(), Some(Vec::new()));
        for cut in 0..message.len() {
            let closing = followed(&message[..cut]).closing().unwrap();
            let mut stream = message[..cut].to_vec();
            stream.extend_from_slice(&closing);
            // What the client parses: whole frames, the last one without MORE.
            let mut framed = Framed::new(Vec::<u8>::new());
            framed.follow(&[0xff; 64]);
            framed.follow(&stream);
            assert_eq!(framed.at, Position::Boundary, "cut at {cut}");
        }
    }

    #[test]
    fn nothing_closes_a_greeting() {
        let mut framed = Framed::new(Vec::<u8>::new());
        framed.follow(&[0xff; 10]);
        assert_eq!(framed.closing(), None);
    }
}
