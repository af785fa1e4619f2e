//! The host's check of a cell's end. Code in a kernel can make it say
//! `idle` (and reply) while its main thread still runs the cell; on a
//! local kernel the client believes the end only once the main thread is
//! seen back in its loop's wait (`kernel::main_thread`). Through a gateway
//! the client cannot see the main thread, so the launcher looks on its
//! host: after the kernel says it is idle after an execute request, the
//! relay holds the reading until the main thread is back (or long enough
//! to call the end forged), and the reading says which.

use std::time::Instant;

use futures_util::future::BoxFuture;

use super::super::cell_watch::{End, EndClaim, END_POLL};
use super::super::main_thread::MainThread;

pub struct EndCheck {
    main: MainThread,
}

impl EndCheck {
    pub fn new(main: MainThread) -> EndCheck {
        EndCheck { main }
    }

    /// How often the main thread has run so far: taken as each execute
    /// request goes in, what its end is checked against.
    pub fn runs(&self) -> Option<u64> {
        self.main.runs()
    }

    /// Resolves once the end is believed or forged (see [`EndClaim`]),
    /// the main thread looked at every [`END_POLL`]; its runs are counted
    /// from the request's (`runs`).
    pub fn settled(&self, runs: Option<u64>) -> BoxFuture<'static, ()> {
        let main = self.main.clone();
        Box::pin(async move {
            let mut claim = EndClaim::default();
            while claim.look(Some(main.idle_since(runs)), Instant::now()) == End::Pending {
                tokio::time::sleep(END_POLL).await;
            }
        })
    }

    /// Whether the main thread is back in its loop's wait now, having run
    /// since the request went in (`runs` then).
    pub fn back(&self, runs: Option<u64>) -> bool {
        self.main.idle_since(runs)
    }

    /// Threads of the kernel beyond those it started with.
    pub fn extra_threads(&self) -> u64 {
        self.main.extra_threads() as u64
    }
}
