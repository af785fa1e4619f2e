//! A jail for the kernel's watchdogs' tests: its only process is the
//! test's own, its CPU time is what the test sets, and its kills are
//! counted, not made.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::sandbox::{Counters, Jail, KernelLayout, KillReport, LaunchCommand, SandboxError};

#[derive(Default)]
pub(super) struct FakeJail {
    pub cpu_usec: AtomicU64,
    pub kills: AtomicUsize,
}

impl Jail for FakeJail {
    fn command(
        &self,
        _launch: &LaunchCommand,
        _layout: &KernelLayout,
    ) -> Result<tokio::process::Command, SandboxError> {
        unreachable!("a watchdog starts nothing")
    }
    fn counters(&self) -> Counters {
        Counters {
            cpu_usage_usec: self.cpu_usec.load(Ordering::SeqCst),
            ..Counters::default()
        }
    }
    fn kill_all(&self, _pid: Option<i32>) -> KillReport {
        self.kills.fetch_add(1, Ordering::SeqCst);
        KillReport {
            method: "fake".into(),
            kill_ms: 0.0,
            survivors: 0,
        }
    }
    fn live_processes(&self) -> Vec<i32> {
        vec![std::process::id() as i32]
    }
    fn release(&self) -> Result<(), SandboxError> {
        Ok(())
    }
    fn uid(&self) -> Option<u32> {
        None
    }
    fn gid(&self) -> Option<u32> {
        None
    }
}
