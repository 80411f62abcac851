//! Exponential backoff with jitter, for the pauses between rounds that look for a leader.

use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// Exponential backoff with "equal jitter": attempt `n` waits a random
/// duration in `[d/2, d]` where `d = min(max, initial * 2^n)`.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
    rng: u64,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let stack = &nanos as *const u64 as u64;
        Backoff {
            initial,
            max,
            attempt: 0,
            rng: (nanos ^ stack.rotate_left(32)) | 1,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(30)).unwrap_or(u32::MAX);
        let ceiling = self.initial.saturating_mul(factor).min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let half = ceiling / 2;
        let span = (ceiling - half).as_nanos() as u64;
        half + Duration::from_nanos(if span == 0 { 0 } else { r % (span + 1) })
    }

    /// Sleep for the next delay, but not past `deadline`. False when the
    /// deadline has passed.
    pub fn sleep_until_deadline(&mut self, deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::sleep(self.next_delay().min(deadline - now));
        Instant::now() < deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap_with_jitter_inside_bounds() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(200));
        let delays: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
        for (i, d) in delays.iter().enumerate() {
            let ceiling =
                Duration::from_millis(10 * (1u64 << i.min(5))).min(Duration::from_millis(200));
            assert!(
                *d >= ceiling / 2 && *d <= ceiling,
                "attempt {i}: {d:?} vs {ceiling:?}"
            );
        }
        // Far attempts stay at the cap without overflowing.
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(2));
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_secs(2));
        }
    }
}
