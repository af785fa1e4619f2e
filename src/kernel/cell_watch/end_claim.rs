//! Whether the kernel's word that a cell ended is to be believed. Code in
//! a kernel can make it say `idle` (and reply) while its main thread still
//! runs the cell; the end is believed only once the main thread is seen
//! from outside back in its loop's wait (`kernel::main_thread`), and has
//! stayed there for a moment. A claim that long precedes the main thread's
//! return (or is never followed by it) is forged. The client of a local
//! kernel checks its cells' ends with it; the host of a kernel served to a
//! gateway holds a cell's `idle` until it decides.

use std::time::{Duration, Instant};

/// How often the main thread is looked at once the kernel said the cell
/// ended and it was not yet back in its loop.
pub const END_POLL: Duration = Duration::from_millis(1);
/// How long the main thread must stay in its loop's wait before the end
/// is believed when the wait has a timeout: a request the loop has taken
/// but not yet started (its handler scheduled, or awaiting IOPub's flush)
/// also leaves it there for a moment. A wait without a timeout
/// ([`Back::Idle`]) has nothing in hand and needs no settling.
const SETTLE: Duration = Duration::from_millis(2);
/// How long after the kernel said the cell ended its main thread may take
/// to get back to its loop before the end counts as forged (a kernel
/// throttled by its CPU quota waits up to a period, 100 ms, to run).
const FORGED_AFTER: Duration = Duration::from_secs(1);

/// Where one look found the kernel's main thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Back {
    /// Not in its loop's wait, or not run since the cell went in.
    No,
    /// In its loop's wait, with something scheduled (a timeout): that may
    /// be a moment inside the request's own handling, so the end settles.
    Waiting,
    /// In its loop's wait with nothing scheduled (no timeout): no request
    /// is in hand, so the end is believed at once.
    Idle,
}

/// What a look at the main thread decided of a claimed end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The main thread is back in its loop and stayed there: the end is
    /// real (forged all the same when it came long after the claim).
    Believed,
    /// Not yet: look again after [`END_POLL`].
    Pending,
    /// The main thread did not come back long after the claim.
    Forged,
}

/// The kernel's claim that a cell ended, as it is checked against the
/// main thread.
#[derive(Debug, Default, Clone)]
pub struct EndClaim {
    /// When the kernel's messages first said the cell ended.
    claimed: Option<Instant>,
    /// Since when the main thread has been seen back in its loop.
    settling: Option<Instant>,
}

impl EndClaim {
    /// The kernel's messages say the cell ended and `back` is where the
    /// main thread is at `now` (`None`: not visible, the claim is all
    /// there is).
    pub fn look(&mut self, back: Option<Back>, now: Instant) -> End {
        let claimed = *self.claimed.get_or_insert(now);
        let settled = match back {
            None | Some(Back::Idle) => true,
            Some(Back::No) => {
                self.settling = None;
                false
            }
            Some(Back::Waiting) => {
                now.saturating_duration_since(*self.settling.get_or_insert(now)) >= SETTLE
            }
        };
        if settled {
            End::Believed
        } else if now.saturating_duration_since(claimed) >= FORGED_AFTER {
            End::Forged
        } else {
            End::Pending
        }
    }

    pub fn claimed(&self) -> bool {
        self.claimed.is_some()
    }

    /// The claim came long before `now` without the main thread back by
    /// then: the end was forged.
    pub fn forged(&self, now: Instant) -> bool {
        self.claimed
            .is_some_and(|c| now.saturating_duration_since(c) > FORGED_AFTER)
    }
}
