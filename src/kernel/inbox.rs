//! The queue from one channel's reader to the session, bounded in bytes as
//! well as in messages: a kernel that floods a channel makes its reader
//! wait (and its own socket drop at its high-water mark), never the harness
//! hold more than the budget. A message's share of the budget is its
//! content's size as JSON text, counted without being written out.

use std::io::Write;
use std::sync::Arc;

use jupyter_protocol::{JupyterMessage, JupyterMessageContent};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

type Queued = (JupyterMessage, OwnedSemaphorePermit);

/// A queue of at most `messages` messages and `bytes` bytes (a larger
/// message waits until the queue is empty).
pub(super) fn inbox(messages: usize, bytes: u32) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(messages);
    let outbox = Outbox {
        tx,
        budget: Arc::new(Semaphore::new(bytes as usize)),
        bytes,
    };
    (outbox, Inbox { rx })
}

/// The reader's end.
#[derive(Clone)]
pub(super) struct Outbox {
    tx: mpsc::Sender<Queued>,
    budget: Arc<Semaphore>,
    bytes: u32,
}

impl Outbox {
    /// Queues `msg`, waiting for room; `false` once the session is gone.
    pub(super) async fn send(&self, msg: JupyterMessage) -> bool {
        let share = self.share(&msg);
        match self.budget.clone().acquire_many_owned(share).await {
            Ok(permit) => self.tx.send((msg, permit)).await.is_ok(),
            Err(_) => false,
        }
    }

    /// Queues `msg` if there is room now; the surplus is dropped.
    pub(super) fn try_send(&self, msg: JupyterMessage) {
        if let Ok(permit) = self.budget.clone().try_acquire_many_owned(self.share(&msg)) {
            let _ = self.tx.try_send((msg, permit));
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    fn share(&self, msg: &JupyterMessage) -> u32 {
        let size = json_size(msg).min(self.bytes as usize).max(1);
        u32::try_from(size).unwrap_or(self.bytes)
    }
}

/// The session's end: a message taken gives its share back.
pub struct Inbox {
    rx: mpsc::Receiver<Queued>,
}

impl Inbox {
    pub async fn recv(&mut self) -> Option<JupyterMessage> {
        self.rx.recv().await.map(|(msg, _share)| msg)
    }

    pub fn try_recv(&mut self) -> Result<JupyterMessage, TryRecvError> {
        self.rx.try_recv().map(|(msg, _share)| msg)
    }

    pub fn is_closed(&self) -> bool {
        self.rx.is_closed()
    }
}

/// The message's content, metadata and buffers as bytes on the wire. The
/// kinds that come by the thousand are sized from their fields; the rest
/// are counted as JSON.
fn json_size(msg: &JupyterMessage) -> usize {
    let mut counter = Counter(0);
    match &msg.content {
        JupyterMessageContent::StreamContent(stream) => counter.0 = stream.text.len() + 32,
        JupyterMessageContent::Status(_) => counter.0 = 32,
        content => {
            let _ = serde_json::to_writer(&mut counter, content);
        }
    }
    let _ = serde_json::to_writer(&mut counter, &msg.metadata);
    counter.0 + msg.buffers.iter().map(|b| b.len()).sum::<usize>()
}

/// A writer that only counts.
struct Counter(usize);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_protocol::{Stdio, StreamContent};

    fn stream(text: &str) -> JupyterMessage {
        JupyterMessage::new(
            StreamContent {
                name: Stdio::Stdout,
                text: text.into(),
            },
            None,
        )
    }

    #[tokio::test]
    async fn a_full_budget_holds_the_reader_until_the_session_takes_a_message() {
        let (outbox, mut inbox) = inbox(16, 3000);
        assert!(outbox.send(stream(&"x".repeat(2000))).await);
        // A second 2000-byte message does not fit next to the first.
        let second = outbox.clone();
        let waiting = tokio::spawn(async move { second.send(stream(&"y".repeat(2000))).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the reader waits for room");
        outbox.try_send(stream(&"z".repeat(2000)));
        let first = inbox.recv().await.unwrap();
        assert!(
            matches!(first.content, jupyter_protocol::JupyterMessageContent::StreamContent(ref s) if s.text.starts_with('x'))
        );
        assert!(waiting.await.unwrap());
        let next = inbox.recv().await.unwrap();
        assert!(
            matches!(next.content, jupyter_protocol::JupyterMessageContent::StreamContent(ref s) if s.text.starts_with('y')),
            "the surplus was dropped, not queued"
        );
        assert!(inbox.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_waits_for_an_empty_queue() {
        let (outbox, mut inbox) = inbox(16, 100);
        assert!(outbox.send(stream(&"x".repeat(1000))).await);
        assert!(inbox.recv().await.is_some());
    }
}
