//! The host's check of a cell's end. Code in a kernel can make it say
//! `idle` (and reply) while its main thread still runs the cell; on a
//! local kernel the client believes the end only once the main thread is
//! seen back in its loop's wait (`kernel::main_thread`). Through a gateway
//! the client cannot see the main thread, so the launcher looks on its
//! host: after the kernel says it is idle after an execute request, the
//! relay holds the reading until the main thread is back (or long enough
//! to call the end forged), and the reading says which.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures_util::future::BoxFuture;

use super::super::main_thread::{MainThread, FORGED_AFTER, POLL, SETTLE};

/// Requests whose start is kept until their end (a few may be pipelined).
const KEPT: usize = 16;

pub struct EndCheck {
    main: MainThread,
    /// How often the main thread had run as each execute request went in.
    runs: Mutex<VecDeque<(String, Option<u64>)>>,
}

impl EndCheck {
    pub fn new(main: MainThread) -> EndCheck {
        EndCheck {
            main,
            runs: Mutex::new(VecDeque::new()),
        }
    }

    /// Execute request `msg_id` is going into the kernel.
    pub fn request_in(&self, msg_id: &str) {
        let mut runs = self.runs.lock().unwrap();
        if runs.len() == KEPT {
            runs.pop_front();
        }
        runs.push_back((msg_id.to_string(), self.main.runs()));
    }

    fn runs_of(&self, request: &str) -> Option<u64> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .rev()
            .find(|(id, _)| id == request)
            .and_then(|(_, runs)| *runs)
    }

    /// Resolves once the main thread has been back in its loop's wait, having
    /// run since `request` went in, for a moment, or once the end has taken
    /// long enough to be forged.
    pub fn settled(&self, request: &str) -> BoxFuture<'static, ()> {
        let main = self.main.clone();
        let runs = self.runs_of(request);
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + FORGED_AFTER;
            let mut back_since = None;
            while tokio::time::Instant::now() < deadline {
                if main.idle_since(runs) {
                    let since = *back_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= SETTLE {
                        return;
                    }
                } else {
                    back_since = None;
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    /// Whether the main thread is back in its loop's wait now, having run
    /// since `request` went in.
    pub fn back(&self, request: &str) -> bool {
        self.main.idle_since(self.runs_of(request))
    }

    /// Threads of the kernel beyond those it started with.
    pub fn extra_threads(&self) -> u64 {
        self.main.extra_threads() as u64
    }
}
