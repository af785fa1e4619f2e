//! A running kernel process: spawned cold through its jail or adopted from
//! a zygote's fork, watched for its exit, its own stdout/stderr drained (a
//! full pipe would block the kernel) with the last lines kept.

use std::collections::VecDeque;
use std::fs;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::main_thread::MainThread;
use super::KernelError;
use crate::sandbox::{ExitInfo, Jail, KernelLayout, LaunchCommand};
use crate::util::IoContext;

/// How many lines of the kernel's own stderr are kept for error messages.
const STDERR_TAIL_LINES: usize = 40;
/// How much of each such line is kept.
const STDERR_LINE_BYTES: usize = 2000;

/// A running kernel process and what it has said on its own stderr.
pub struct KernelProcess {
    pub pid: i32,
    /// `Some` once the process has exited.
    pub exit: watch::Receiver<Option<ExitInfo>>,
    /// Where the kernel's main thread idles, learned once it answered.
    pub(super) main_thread: Option<MainThread>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

impl Drop for KernelProcess {
    fn drop(&mut self) {
        // A launch abandoned half-way (a cancelled task) must not leave the
        // process running. The jail kills the rest of its processes.
        if self.exit.borrow().is_none() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl KernelProcess {
    /// Spawns the kernel through its jail. The connection file must exist.
    pub fn spawn(
        jail: &dyn Jail,
        launch: &LaunchCommand,
        layout: &KernelLayout,
    ) -> Result<Self, KernelError> {
        let mut cmd = jail.command(launch, layout).map_err(KernelError::Sandbox)?;
        cmd.stdin(std::process::Stdio::null());
        let mut child = spawn_piped(cmd, launch)?;
        let stdout = child.stdout.take();
        Self::watch(child, stdout)
    }

    /// The zygote start (see `zygote.rs`): starts the jail's relay and PID 1,
    /// waits until PID 1 has built the kernel's view, has `fork` put a
    /// kernel into it (given PID 1's host pid, it returns the kernel's pid
    /// in the jail) and hands that pid to PID 1, which adopts it.
    /// `Ok(None)`: the jail cannot adopt, nothing was started.
    pub async fn spawn_adopted<F, E>(
        jail: &dyn Jail,
        launch: &LaunchCommand,
        layout: &KernelLayout,
        timeout: std::time::Duration,
        fork: F,
    ) -> Result<Option<Self>, AdoptError<E>>
    where
        F: FnOnce(&crate::sandbox::ForkPlan, i32) -> Result<i32, E>,
    {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let Some(adoption) = jail
            .adopt(launch, layout)
            .map_err(|e| AdoptError::Jail(e.into()))?
        else {
            return Ok(None);
        };
        let began = std::time::Instant::now();
        let mut cmd = adoption.command;
        cmd.stdin(std::process::Stdio::piped());
        let mut child = spawn_piped(cmd, launch).map_err(AdoptError::Jail)?;
        let mut stdin = child.stdin.take();
        let mut stdout = child.stdout.take().map(tokio::io::BufReader::new);
        let mut line = String::new();
        let ready = match stdout.as_mut() {
            Some(out) => tokio::time::timeout(timeout, out.read_line(&mut line))
                .await
                .is_ok_and(|r| r.is_ok_and(|n| n > 0)),
            None => false,
        };
        let process = Self::watch(child, stdout).map_err(AdoptError::Jail)?;
        if !ready || line.trim_end() != crate::sandbox::init::READY_LINE {
            // PID 1 itself failed (it would have on the cold path too).
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            return Err(AdoptError::Jail(KernelError::Startup {
                message: format!("the kernel's init did not get ready: {:?}", line.trim_end()),
                stderr: process.stderr_tail(),
            }));
        }
        let jail_ready = began.elapsed();
        let handed = match pid1_of(jail) {
            Some(pid1) => fork(&adoption.plan, pid1).map_err(AdoptError::Zygote),
            None => Err(AdoptError::NoPid1),
        };
        tracing::debug!(
            kernel = %layout.id,
            jail_ms = jail_ready.as_secs_f64() * 1e3,
            fork_ms = (began.elapsed() - jail_ready).as_secs_f64() * 1e3,
            "zygote start: jail ready, kernel forked"
        );
        match handed {
            Ok(pid) => {
                let sent = match stdin.as_mut() {
                    Some(pipe) => pipe.write_all(format!("{pid}\n").as_bytes()).await,
                    None => Err(std::io::ErrorKind::BrokenPipe.into()),
                };
                drop(stdin);
                sent.map_err(|e| {
                    AdoptError::Jail(KernelError::Io(crate::util::IoError::new(
                        "handing the kernel to its init",
                        e,
                    )))
                })?;
                Ok(Some(process))
            }
            // Nothing of a kernel exists: the caller ends the jail's init
            // (dropping its stdin makes it exit) and starts cold.
            Err(reason) => Err(reason),
        }
    }

    fn watch<O>(mut child: tokio::process::Child, stdout: Option<O>) -> Result<Self, KernelError>
    where
        O: AsyncRead + Unpin + Send + 'static,
    {
        let pid = child
            .id()
            .map(|p| p as i32)
            .ok_or(KernelError::NotWatched)?;
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = stdout {
            tokio::spawn(drain(out, stderr_tail.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(drain(err, stderr_tail.clone()));
        }
        let (tx, rx) = watch::channel(None);
        tokio::spawn(async move {
            let info = match child.wait().await {
                Ok(status) => ExitInfo::from_status(status),
                Err(_) => ExitInfo {
                    code: None,
                    signal: None,
                    signal_name: None,
                },
            };
            let _ = tx.send(Some(info));
        });
        Ok(Self {
            pid,
            exit: rx,
            main_thread: None,
            stderr_tail,
        })
    }

    /// Learns where the kernel's main thread idles (see [`MainThread`]):
    /// called once the kernel answered, before any task code runs.
    pub(super) async fn learn_main_thread(&mut self, jail: &dyn Jail) {
        self.main_thread = match self.kernel_pid(jail) {
            Some(pid) => MainThread::learn(pid).await,
            None => None,
        };
    }

    /// The host pid of the Python kernel itself: among the jail's
    /// processes, the one that is neither a PID 1 nor the relay that was
    /// started; without a cgroup to list them, the started process.
    fn kernel_pid(&self, jail: &dyn Jail) -> Option<i32> {
        let mut candidates: Vec<i32> = jail
            .live_processes()
            .into_iter()
            .filter(|&pid| !is_pid1(pid))
            .collect();
        if candidates.is_empty() {
            return Some(self.pid);
        }
        if candidates.len() > 1 {
            candidates.retain(|&pid| pid != self.pid);
        }
        match candidates.as_slice() {
            [kernel] => Some(*kernel),
            _ => None,
        }
    }

    pub fn exited(&self) -> Option<ExitInfo> {
        self.exit.borrow().clone()
    }

    /// The last lines the process wrote to its own stdout/stderr.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap();
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Why a zygote start did not happen.
#[derive(Debug)]
pub enum AdoptError<E> {
    /// The jail failed as it would have on the cold path: the start fails.
    Jail(KernelError),
    /// The jail's PID 1 is gone: the caller falls back to the cold path.
    NoPid1,
    /// The zygote could not serve: the caller falls back to the cold path.
    Zygote(E),
}

fn spawn_piped(
    mut cmd: tokio::process::Command,
    launch: &LaunchCommand,
) -> Result<tokio::process::Child, KernelError> {
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(false);
    cmd.spawn()
        .at("starting", &launch.program)
        .map_err(KernelError::from)
}

/// The host pid of the jail's PID 1: the one of its processes that is pid 1
/// in its own namespace (`NSpid` ends in 1).
fn pid1_of(jail: &dyn Jail) -> Option<i32> {
    jail.live_processes().into_iter().find(|&pid| is_pid1(pid))
}

fn is_pid1(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .is_some_and(|ids| {
                let ids: Vec<&str> = ids.split_whitespace().collect();
                ids.len() > 1 && ids.last() == Some(&"1")
            })
    })
}

/// Reads a pipe to its end, keeping the last lines. Reads are in fixed
/// chunks and each line keeps at most [`STDERR_LINE_BYTES`], so a line of
/// gigabytes without a newline costs no more memory than a short one.
async fn drain<R: AsyncRead + Unpin>(mut pipe: R, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut chunk = vec![0u8; 8192];
    let mut line = BoundedLine::default();
    let keep = |text: String| {
        let mut tail = tail.lock().unwrap();
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        line.feed(&chunk[..n], keep);
    }
    if let Some(last) = line.take() {
        keep(last);
    }
}

/// The line being read from a pipe: its first [`STDERR_LINE_BYTES`] bytes
/// and a count of the rest.
#[derive(Debug, Default)]
struct BoundedLine {
    head: Vec<u8>,
    dropped: u64,
}

impl BoundedLine {
    /// Adds bytes; every line they complete goes to `done`.
    fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(String)) {
        while let Some(end) = data.iter().position(|&b| b == b'\n') {
            self.push(&data[..end]);
            done(self.take().unwrap_or_default());
            data = &data[end + 1..];
        }
        self.push(data);
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = STDERR_LINE_BYTES.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        self.dropped += (bytes.len() - take) as u64;
    }

    /// The line so far, if it has anything, and a fresh start.
    fn take(&mut self) -> Option<String> {
        if self.head.is_empty() && self.dropped == 0 {
            return None;
        }
        let mut text = String::from_utf8_lossy(&self.head).trim_end().to_string();
        if self.dropped > 0 {
            text.push_str(&format!(" [... {} bytes dropped]", self.dropped));
        }
        self.head.clear();
        self.dropped = 0;
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_line_without_newline_is_bounded() {
        let mut line = BoundedLine::default();
        let mut lines = Vec::new();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            line.feed(&chunk, |l| lines.push(l));
            assert!(line.head.len() <= STDERR_LINE_BYTES);
        }
        assert!(lines.is_empty());
        line.feed(b"\nnext line\npartial", |l| lines.push(l));
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0].len(),
            STDERR_LINE_BYTES + " [... 67106864 bytes dropped]".len()
        );
        assert!(
            lines[0].ends_with("[... 67106864 bytes dropped]"),
            "{}",
            &lines[0][1990..]
        );
        assert_eq!(lines[1], "next line");
        assert_eq!(line.take().as_deref(), Some("partial"));
        assert_eq!(line.take(), None);
    }

    #[tokio::test]
    async fn drain_keeps_the_last_lines_only() {
        let mut text = Vec::new();
        for i in 0..100 {
            text.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        text.extend(std::iter::repeat_n(b'y', 3 << 20));
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        drain(&text[..], tail.clone()).await;
        let tail = tail.lock().unwrap();
        assert_eq!(tail.len(), STDERR_TAIL_LINES);
        assert_eq!(tail[0], "line 61");
        assert!(tail.back().unwrap().ends_with("bytes dropped]"));
        let kept: usize = tail.iter().map(String::len).sum();
        assert!(kept < STDERR_TAIL_LINES * (STDERR_LINE_BYTES + 40));
    }
}
