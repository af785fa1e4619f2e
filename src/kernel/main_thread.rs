//! The kernel's main thread as the host sees it (`/proc/<pid>/task/<pid>`):
//! where it waits when the kernel is idle, and whether it is there now.
//!
//! Every message a kernel sends can be forged by code in it (it holds the
//! HMAC key, and a thread can take the harness's completion probe off the
//! main thread's queue), so the end of a cell is believed only once the
//! main thread is seen from outside back in its event loop's wait: the
//! same system call on the same descriptor from the same stack and
//! instruction pointers as when the kernel was idle before any task code
//! ran. Code still running the cell is deeper on the main thread's stack
//! (the cell is called from the loop), so a cell's threads cannot make a
//! sleeping or computing main thread look idle.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use super::cell_watch::{Back, End, EndClaim, END_POLL};

/// How long a kernel that just answered may take to settle into its loop
/// before the harness gives up learning where it waits.
const LEARN_TIMEOUT: Duration = Duration::from_secs(2);
/// Consecutive equal readings that make a wait the loop's.
const LEARN_READINGS: usize = 3;
const LEARN_INTERVAL: Duration = Duration::from_millis(1);

/// The system calls an event loop waits in.
#[cfg(target_arch = "x86_64")]
const WAIT_CALLS: &[i64] = &[7, 23, 232, 270, 271, 281, 441];
#[cfg(target_arch = "aarch64")]
const WAIT_CALLS: &[i64] = &[22, 72, 73, 441];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const WAIT_CALLS: &[i64] = &[];

/// A blocked system call as `/proc/<pid>/task/<tid>/syscall` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Blocked {
    nr: i64,
    /// The first argument: the descriptor a loop waits on.
    fd: u64,
    sp: u64,
    pc: u64,
    /// The wait has no timeout: the loop has nothing scheduled (no ready
    /// callback, no timer), so no request is in hand.
    forever: bool,
}

impl Blocked {
    /// `None` for a running thread (`running`), one blocked outside a
    /// system call (`-1 sp pc`), or text of another shape.
    fn parse(text: &str) -> Option<Blocked> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [nr, fd, a2, a3, a4, a5, a6, sp, pc] = fields.as_slice() else {
            return None;
        };
        let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
        let nr = nr.parse().ok()?;
        let mut args = [0; 5];
        for (arg, text) in args.iter_mut().zip([a2, a3, a4, a5, a6]) {
            *arg = hex(text)?;
        }
        Some(Blocked {
            nr,
            fd: hex(fd)?,
            sp: hex(sp)?,
            pc: hex(pc)?,
            forever: waits_forever(nr, &args),
        })
    }

    fn is_wait(&self) -> bool {
        WAIT_CALLS.contains(&self.nr)
    }

    /// The same wait: call, descriptor and stack and instruction pointers
    /// (the timeout aside).
    fn same_wait(&self, other: &Blocked) -> bool {
        (self.nr, self.fd, self.sp, self.pc) == (other.nr, other.fd, other.sp, other.pc)
    }
}

/// Whether a wait call with these arguments (the second to the sixth) has no
/// timeout: an `int` timeout below 0 (`epoll_wait`, `epoll_pwait`,
/// `poll`), a null timeout pointer (`select`, `pselect6`, `ppoll`,
/// `epoll_pwait2`). Unknown calls: `false` (the end settles first).
fn waits_forever(nr: i64, args: &[u64; 5]) -> bool {
    let negative = |arg: u64| (arg as u32 as i32) < 0;
    #[cfg(target_arch = "x86_64")]
    let rule = match nr {
        232 | 281 => Some(negative(args[2])),
        7 => Some(negative(args[1])),
        23 => Some(args[3] == 0),
        270 => Some(args[3] == 0),
        271 => Some(args[1] == 0),
        441 => Some(args[2] == 0),
        _ => None,
    };
    #[cfg(target_arch = "aarch64")]
    let rule = match nr {
        22 => Some(negative(args[2])),
        72 => Some(args[3] == 0),
        73 => Some(args[1] == 0),
        441 => Some(args[2] == 0),
        _ => None,
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let rule: Option<bool> = {
        let _ = (nr, args, negative);
        None
    };
    rule.unwrap_or(false)
}

/// The kernel's main thread and the wait it idles in.
#[derive(Debug, Clone)]
pub(super) struct MainThread {
    task: PathBuf,
    idle: Blocked,
    /// Threads of the kernel process when it had just started.
    threads_at_start: usize,
}

impl MainThread {
    /// Learns where the main thread of process `pid` waits, right after
    /// the kernel answered and before any task code ran. `None` when it
    /// cannot be read (another user's process without the right to trace
    /// it, an architecture without a known wait) or never settles.
    pub(super) async fn learn(pid: i32) -> Option<MainThread> {
        let task = PathBuf::from(format!("/proc/{pid}/task/{pid}"));
        let deadline = tokio::time::Instant::now() + LEARN_TIMEOUT;
        let (mut last, mut same) = (None, 0);
        while tokio::time::Instant::now() < deadline {
            let now = read_blocked(&task).filter(Blocked::is_wait);
            let again = matches!((now, last), (Some(n), Some(l)) if n.same_wait(&l));
            same = if again { same + 1 } else { 1 };
            last = now;
            if let (Some(idle), true) = (last, same >= LEARN_READINGS) {
                let threads_at_start = threads_of(&task);
                return Some(MainThread {
                    task,
                    idle,
                    threads_at_start,
                });
            }
            tokio::time::sleep(LEARN_INTERVAL).await;
        }
        tracing::warn!(
            task = %task.display(),
            seen = ?last,
            "the kernel's main thread was not seen waiting in its loop; the end of its cells is the kernel's word"
        );
        None
    }

    /// How many times the main thread has been scheduled, read before a
    /// cell is sent: an end is believed only once it has run since.
    pub(super) fn runs(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.task.join("schedstat")).ok()?;
        text.split_whitespace().nth(2)?.parse().ok()
    }

    /// Threads the kernel process has beyond those it started with.
    pub(super) fn extra_threads(&self) -> usize {
        threads_of(&self.task).saturating_sub(self.threads_at_start)
    }

    /// Whether the main thread is in its loop's wait now, having run since
    /// `runs` was read (counted first: a thread seen waiting and then
    /// counted may have woken for the cell in between).
    pub(super) fn back_since(&self, runs: Option<u64>) -> Back {
        let woke = match (runs, self.runs()) {
            (Some(before), Some(now)) => now > before,
            _ => true,
        };
        match read_blocked(&self.task) {
            Some(now) if woke && now.same_wait(&self.idle) && now.forever => Back::Idle,
            Some(now) if woke && now.same_wait(&self.idle) => Back::Waiting,
            _ => Back::No,
        }
    }

    /// Resolves once a cell's end is believed or forged (see
    /// [`EndClaim`]), the main thread looked at every [`END_POLL`]; its
    /// runs are counted from the cell's request (`runs`).
    pub(super) fn settled(&self, runs: Option<u64>) -> BoxFuture<'static, ()> {
        let main = self.clone();
        Box::pin(async move {
            let mut claim = EndClaim::default();
            while claim.look(Some(main.back_since(runs)), Instant::now()) == End::Pending {
                tokio::time::sleep(END_POLL).await;
            }
        })
    }
}

/// Threads of the process whose main thread is `task` (0 once it is gone).
fn threads_of(task: &std::path::Path) -> usize {
    task.parent()
        .and_then(|tasks| std::fs::read_dir(tasks).ok())
        .map_or(0, |entries| entries.count())
}

fn read_blocked(task: &std::path::Path) -> Option<Blocked> {
    Blocked::parse(&std::fs::read_to_string(task.join("syscall")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_call_is_read_with_its_descriptor_and_pointers() {
        let b = Blocked::parse(
            "232 0x36 0x7f1 0x3ff 0xffffffff 0x0 0x0 0x7fff62810470 0x7fc5299baf36\n",
        )
        .unwrap();
        assert_eq!(
            b,
            Blocked {
                nr: 232,
                fd: 0x36,
                sp: 0x7fff62810470,
                pc: 0x7fc5299baf36,
                forever: cfg!(target_arch = "x86_64"),
            }
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_wait_is_forever_only_without_a_timeout() {
        let read = |text: &str| Blocked::parse(text).unwrap();
        // ipykernel idle: epoll_wait(fd, events, 2, -1).
        let idle =
            read("232 0x30 0x7f16f8252f90 0x2 0xffffffff 0x0 0xa5b8e8 0x7ffc1106 0x7f16fb63");
        assert!(idle.forever);
        // The same wait with a timer or ready callbacks scheduled.
        let timer = read("232 0x30 0x7f16f8252f90 0x2 0x3e8 0x0 0xa5b8e8 0x7ffc1106 0x7f16fb63");
        let ready = read("232 0x30 0x7f16f8252f90 0x2 0x0 0x0 0xa5b8e8 0x7ffc1106 0x7f16fb63");
        assert!(!timer.forever && !ready.forever);
        assert!(idle.same_wait(&timer) && idle.same_wait(&ready));
        // Sign-extended -1, epoll_pwait, poll(fds, n, -1), ppoll and
        // select with a null timeout, ppoll with one.
        assert!(read("232 0x30 0x1 0x2 0xffffffffffffffff 0x0 0x0 0x7ff 0x7f").forever);
        assert!(read("281 0x30 0x1 0x2 0xffffffff 0x0 0x8 0x7ff 0x7f").forever);
        assert!(read("7 0x7f00 0x3 0xffffffff 0x0 0x0 0x0 0x7ff 0x7f").forever);
        assert!(read("271 0x7f00 0x3 0x0 0x0 0x8 0x0 0x7ff 0x7f").forever);
        assert!(read("23 0x8 0x7f01 0x0 0x0 0x0 0x0 0x7ff 0x7f").forever);
        assert!(!read("271 0x7f00 0x3 0x7ffe10 0x0 0x8 0x0 0x7ff 0x7f").forever);
        // Not a wait a loop idles in: never forever.
        assert!(!read("230 0x1 0x1 0x7ffe 0x0 0x0 0xa5 0x7ffe 0x7fae").forever);
    }

    #[test]
    fn running_or_outside_a_call_is_not_a_wait() {
        assert_eq!(Blocked::parse("running\n"), None);
        assert_eq!(Blocked::parse("-1 0x7fff62810470 0x7fc5299baf36\n"), None);
        assert_eq!(Blocked::parse(""), None);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sleeping_is_not_waiting_in_a_loop() {
        let sleep =
            Blocked::parse("230 0x1 0x1 0x7ffe 0x0 0x0 0xa5 0x7ffe370e3d70 0x7fae").unwrap();
        assert!(!sleep.is_wait());
        let epoll = Blocked::parse("232 0x36 0x1 0x2 0x0 0x0 0x0 0x7ffe 0x7fae").unwrap();
        assert!(epoll.is_wait());
    }
}
