//! What a relay of the wire cap may add to a kernel's stream (the
//! launcher's host evidence, `launcher::evidence`): a message of its own
//! after some of the kernel's, spoiling the kernel's messages that claim
//! to be its own, and a last message once the kernel's process has ended.
//! The relay does the ZMTP ([`super::zmtp`]); the tap knows what the
//! messages mean.

use futures_util::future::BoxFuture;

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
