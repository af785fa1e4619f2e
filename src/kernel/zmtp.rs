//! The one ZMTP 3 frame codec: frame headers written
//! ([`frame_header`], [`zmtp_message`]) and read ([`read_frame_header`],
//! [`parse_frame`]), and a writer that follows the framing of what passes
//! through it ([`Framed`]). The relay's reader (`wire_cap`), the tap's
//! messages (`wire_tap`, `launcher::evidence`) and the tests all use it.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

/// ZMTP 3 frame flags.
pub(super) const MORE: u8 = 0x01;
pub(super) const LONG: u8 = 0x02;
pub(super) const COMMAND: u8 = 0x04;
/// The Jupyter wire protocol's delimiter between identities and message.
pub(super) const DELIMITER: &[u8] = b"<IDS|MSG>";
/// The ZMTP greeting, passed before any frame.
pub(super) const GREETING: u64 = 64;

/// A ZMTP message of `frames`.
pub(super) fn zmtp_message(frames: &[&[u8]]) -> Vec<u8> {
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
pub(super) fn frame_header(flags: u8, len: u64) -> FrameHeader {
    let mut bytes = [0; 9];
    if len > 255 || flags & LONG != 0 {
        bytes[0] = flags | LONG;
        bytes[1..].copy_from_slice(&len.to_be_bytes());
        FrameHeader { bytes, len: 9 }
    } else {
        bytes[0] = flags;
        bytes[1] = len as u8;
        FrameHeader { bytes, len: 2 }
    }
}

/// A frame header's bytes, on the stack: the relay writes one per frame.
pub(super) struct FrameHeader {
    bytes: [u8; 9],
    len: usize,
}

impl std::ops::Deref for FrameHeader {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
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

/// Reads one frame header: its flags and its body's length.
pub(super) async fn read_frame_header<R: AsyncRead + Unpin>(
    from: &mut R,
) -> std::io::Result<(u8, u64)> {
    let flags = from.read_u8().await?;
    let len = if flags & LONG != 0 {
        from.read_u64().await?
    } else {
        u64::from(from.read_u8().await?)
    };
    Ok((flags, len))
}

/// The frame at the start of `bytes`: its flags, its body and the bytes
/// it took; `None` when `bytes` holds no whole frame.
#[cfg(test)]
pub(super) fn parse_frame(bytes: &[u8]) -> Option<(u8, &[u8], usize)> {
    let flags = *bytes.first()?;
    let (len, head) = if flags & LONG != 0 {
        let len: [u8; 8] = bytes.get(1..9)?.try_into().ok()?;
        (u64::from_be_bytes(len), 9)
    } else {
        (u64::from(*bytes.get(1)?), 2)
    };
    let end = usize::try_from(len).ok()?.checked_add(head)?;
    Some((flags, bytes.get(head..end)?, end))
}

/// Appends one frame of `body` to `out`.
#[cfg(test)]
pub(super) fn push_frame(out: &mut Vec<u8>, flags: u8, body: &[u8]) {
    out.extend_from_slice(&frame_header(flags, body.len() as u64));
    out.extend_from_slice(body);
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
