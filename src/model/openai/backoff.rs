//! Delays between attempts: exponential with jitter.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Delays between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry; doubles per retry.
    pub base: Duration,
    /// Upper bound of the exponential delay.
    pub cap: Duration,
    /// Upper bound on a server's `Retry-After`.
    pub retry_after_cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay before retry number `step` (0-based), with jitter: a
    /// uniformly random point in the upper half of `min(cap, base·2^step)`.
    pub fn delay(&self, step: u32) -> Duration {
        let full = self
            .base
            .saturating_mul(2u32.saturating_pow(step.min(30)))
            .min(self.cap);
        let half = full / 2;
        let nanos = half.as_nanos() as u64;
        let jitter = if nanos == 0 {
            0
        } else {
            random_u64() % (nanos + 1)
        };
        half + Duration::from_nanos(jitter)
    }
}

fn random_u64() -> u64 {
    // std's RandomState is seeded randomly per instance; enough for jitter.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let b = Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(800),
            retry_after_cap: Duration::from_secs(1),
        };
        for step in 0..10 {
            let full = Duration::from_millis(100 * 2u64.pow(step.min(3)));
            let d = b.delay(step);
            assert!(d >= full / 2 && d <= full, "step {step}: {d:?}");
        }
        assert!(b.delay(u32::MAX) <= b.cap);
    }
}
