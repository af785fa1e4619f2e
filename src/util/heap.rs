//! Giving freed heap back to the system. glibc's malloc keeps what a
//! thread freed in that thread's arena (up to 8 per core); a run starts a
//! lock watchdog thread per kernel and its work hops between runtime
//! threads, so every arena collects free pages that stay resident. On two
//! cores a run's RSS crept up by about 7 MB over 2,000 tasks that way,
//! with the memory in use flat (benches/README.md, "Long runs").

/// Returns the free pages of every malloc arena to the kernel
/// (`malloc_trim(0)`, which also releases pages inside an arena, not only
/// at its top). Costs a walk over the free lists: call it once per task,
/// not per allocation. A no-op where the C library is not glibc.
#[allow(unsafe_code)]
pub fn release_free_memory() {
    // SAFETY: malloc_trim takes each arena's lock and touches only the
    // allocator's own free chunks; any thread may call it at any time.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let _ = unsafe { libc::malloc_trim(0) };
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    }

    #[test]
    fn freed_pages_inside_an_arena_go_back() {
        const CHUNKS: usize = 8 * 1024;
        const MIB_32: u64 = 32 * 1024;
        // A thread of its own allocates in an arena of its own; keeping the
        // last chunk keeps the arena's top in use, so malloc alone returns
        // nothing of the 32 MiB freed below it.
        let (before, kept, after_free) = std::thread::spawn(|| {
            let mut chunks: Vec<Vec<u8>> = (0..CHUNKS).map(|_| vec![1u8; 4096]).collect();
            let kept = chunks.pop();
            let before = rss_anon_kib();
            drop(chunks);
            (before, kept, rss_anon_kib())
        })
        .join()
        .unwrap();
        release_free_memory();
        let after_trim = rss_anon_kib();
        drop(kept);
        assert!(
            before.saturating_sub(after_free) < MIB_32 / 2,
            "malloc returned the pages itself ({before} -> {after_free} KiB): the test shows nothing"
        );
        assert!(
            after_free.saturating_sub(after_trim) > MIB_32 / 2,
            "{after_free} -> {after_trim} KiB: the freed pages stayed resident"
        );
    }
}
