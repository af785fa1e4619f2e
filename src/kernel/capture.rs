//! Per-execution output capture under a byte and message cap.
//!
//! Past the cap the head and the tail of each stream are kept and the middle
//! is counted as dropped, so a flood never costs more than the cap in memory
//! and the model still sees how the output began and ended.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::outcome::Truncation;

/// Output limits for one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputCap {
    pub bytes: u64,
    pub messages: u64,
}

impl Default for OutputCap {
    fn default() -> Self {
        Self {
            bytes: 1 << 20,
            messages: 10_000,
        }
    }
}

/// One stream (stdout or stderr): a head that fills first, then a tail ring.
#[derive(Debug, Default)]
struct CappedStream {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
}

impl CappedStream {
    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!("\n[... {} bytes truncated ...]\n", self.dropped));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        // The ring may start inside a UTF-8 sequence; skip continuation bytes.
        let start = tail
            .iter()
            .position(|b| (b & 0xC0) != 0x80)
            .unwrap_or(tail.len());
        text.push_str(&String::from_utf8_lossy(&tail[start..]));
        text
    }
}

/// Collects stdout, stderr and display messages of one execution.
#[derive(Debug)]
pub struct Capture {
    cap: OutputCap,
    stdout: CappedStream,
    stderr: CappedStream,
    head_used: u64,
    seen_bytes: u64,
    seen_messages: u64,
    dropped_messages: u64,
    dropped_artifacts: u64,
}

#[derive(Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Capture {
    pub fn new(cap: OutputCap) -> Self {
        Self {
            cap,
            stdout: CappedStream::default(),
            stderr: CappedStream::default(),
            head_used: 0,
            seen_bytes: 0,
            seen_messages: 0,
            dropped_messages: 0,
            dropped_artifacts: 0,
        }
    }

    fn head_budget(&self) -> u64 {
        self.cap.bytes / 2
    }

    fn tail_budget(&self) -> usize {
        (self.cap.bytes / 4) as usize
    }

    /// True once the execution produced more than the cap allows.
    pub fn exceeded(&self) -> bool {
        self.seen_bytes > self.cap.bytes || self.seen_messages > self.cap.messages
    }

    pub fn push_stream(&mut self, which: Stream, text: &str) {
        self.seen_messages += 1;
        self.seen_bytes += text.len() as u64;
        let over_messages = self.seen_messages > self.cap.messages;
        let tail_budget = self.tail_budget();
        let mut bytes = text.as_bytes();
        if !over_messages {
            let room = self.head_budget().saturating_sub(self.head_used) as usize;
            let mut take = room.min(bytes.len());
            while !text.is_char_boundary(take) {
                take -= 1;
            }
            let stream = self.stream(which);
            stream.head.extend_from_slice(&bytes[..take]);
            self.head_used += take as u64;
            bytes = &bytes[take..];
        } else {
            self.dropped_messages += 1;
        }
        let stream = self.stream(which);
        for &b in bytes {
            if stream.tail.len() == tail_budget {
                stream.tail.pop_front();
                stream.dropped += 1;
            }
            if tail_budget > 0 {
                stream.tail.push_back(b);
            } else {
                stream.dropped += 1;
            }
        }
    }

    /// Counts a message that was dropped on the wire for being larger than
    /// the cap (see `wire_cap`): the execution has exceeded its output.
    pub fn drop_oversize(&mut self, bytes: u64) {
        self.seen_messages += 1;
        self.seen_bytes = self.seen_bytes.saturating_add(bytes);
        self.dropped_messages += 1;
        if self.seen_bytes <= self.cap.bytes {
            // A cap of more than the message itself still counts it as over.
            self.seen_bytes = self.cap.bytes.saturating_add(1);
        }
    }

    /// Counts an image that was not saved (see `artifact::MAX_PER_EXECUTION`).
    pub fn drop_artifact(&mut self) {
        self.dropped_artifacts += 1;
    }

    /// Counts an output message that is kept whatever the cap (the cell's
    /// error).
    pub fn count(&mut self, size: usize) {
        self.seen_messages += 1;
        self.seen_bytes = self.seen_bytes.saturating_add(size as u64);
    }

    /// Counts a rich output message; returns whether it fits under the cap.
    pub fn admit_display(&mut self, size: usize) -> bool {
        self.count(size);
        if self.exceeded() {
            self.dropped_messages += 1;
            return false;
        }
        true
    }

    /// Counts a collected file's message if it fits under the cap; one
    /// that does not is dropped as an artifact. Unlike a display, it never
    /// makes the execution exceed its output: the cell did not print it,
    /// and it comes once the cell has ended.
    pub fn admit_file(&mut self, size: usize) -> bool {
        let fits = self.seen_messages < self.cap.messages
            && self.seen_bytes.saturating_add(size as u64) <= self.cap.bytes;
        if fits {
            self.count(size);
        } else {
            self.drop_artifact();
        }
        fits
    }

    fn stream(&mut self, which: Stream) -> &mut CappedStream {
        match which {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    pub fn stdout(&self) -> String {
        self.stdout.render()
    }

    pub fn stderr(&self) -> String {
        self.stderr.render()
    }

    pub fn truncation(&self) -> Truncation {
        let dropped_bytes = self.stdout.dropped + self.stderr.dropped;
        Truncation {
            truncated: dropped_bytes > 0 || self.dropped_messages > 0 || self.dropped_artifacts > 0,
            dropped_bytes,
            dropped_messages: self.dropped_messages,
            dropped_artifacts: self.dropped_artifacts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut c = Capture::new(OutputCap::default());
        c.push_stream(Stream::Stdout, "hello\n");
        c.push_stream(Stream::Stderr, "warn\n");
        assert_eq!(c.stdout(), "hello\n");
        assert_eq!(c.stderr(), "warn\n");
        assert!(!c.truncation().truncated);
        assert!(!c.exceeded());
    }

    #[test]
    fn flood_keeps_head_and_tail_and_counts_drops() {
        let cap = OutputCap {
            bytes: 100,
            messages: 1000,
        };
        let mut c = Capture::new(cap);
        for i in 0..100 {
            c.push_stream(Stream::Stdout, &format!("line{i:03}\n"));
        }
        let out = c.stdout();
        assert!(out.starts_with("line000\n"), "{out}");
        assert!(out.ends_with("line099\n"), "{out}");
        assert!(out.contains("bytes truncated"));
        let t = c.truncation();
        assert!(t.truncated);
        // 800 bytes in, 50 head + 25 tail kept.
        assert_eq!(t.dropped_bytes, 800 - 75);
        assert!(c.exceeded());
    }

    #[test]
    fn message_cap_counts_messages() {
        let cap = OutputCap {
            bytes: 1 << 20,
            messages: 3,
        };
        let mut c = Capture::new(cap);
        for _ in 0..5 {
            c.push_stream(Stream::Stdout, "x");
        }
        assert!(c.exceeded());
        assert_eq!(c.truncation().dropped_messages, 2);
        assert!(!c.admit_display(10));
    }

    #[test]
    fn a_file_past_the_cap_is_dropped_without_exceeding_it() {
        let cap = OutputCap {
            bytes: 100,
            messages: 10,
        };
        let mut c = Capture::new(cap);
        c.push_stream(Stream::Stdout, &"x".repeat(60));
        assert!(c.admit_file(30));
        assert!(!c.admit_file(30), "90 + 30 is past 100");
        assert!(!c.exceeded());
        let t = c.truncation();
        assert_eq!((t.dropped_artifacts, t.truncated), (1, true));
    }

    #[test]
    fn a_message_dropped_on_the_wire_exceeds_the_cap() {
        let mut c = Capture::new(OutputCap::default());
        c.push_stream(Stream::Stdout, "before\n");
        c.drop_oversize(64 << 20);
        assert!(c.exceeded());
        let t = c.truncation();
        assert!(t.truncated);
        assert_eq!(t.dropped_messages, 1);
        assert_eq!(c.stdout(), "before\n");
    }

    #[test]
    fn tail_never_splits_a_character() {
        let cap = OutputCap {
            bytes: 8,
            messages: 100,
        };
        let mut c = Capture::new(cap);
        c.push_stream(Stream::Stdout, &"é".repeat(50));
        assert!(!c.stdout().contains('\u{FFFD}'));
    }
}
