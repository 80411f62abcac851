//! One clock for a cluster's leases: this host's offset from the clock of the cluster's leader.
//!
//! A lease's expiry is `now + leaseMs`, and every lease check compares a stored expiry with
//! `now`. On a file all processes read one machine's clock; on a cluster the hosts sharing a
//! queue are different machines, and a host whose clock runs ahead takes every lease the others
//! hold (issue 35: hosts at −60 s, 0 and +60 s, 72 overlapping holders in 30 s). So a cluster
//! store's time, for a call that passes no `now`, is the caller's clock plus this host's offset
//! from the leader: SQL runs on the leader, and with every host's time moved onto its clock one
//! clock orders every lease. An explicit `now` keeps its meaning.
//!
//! Why an offset on top of the caller's clock, measured once per leader connection, rather than
//! the leader's time read on every call: the JS layer computes `now + leaseMs` and
//! `new Date(now)` with JavaScript's own arithmetic before a `store.async` call is queued, so it
//! must know the time before the call, not learn it inside; a fake clock (Jest's, sinon's) stays
//! the base of the store's time instead of being replaced; a host in step with the cluster sees
//! exactly its own clock; and it costs no round trip per call. Why not `julianday('now')` inside
//! the store's statements: they bind `now` as the reference's do, and its expiries are computed
//! in JavaScript.
//!
//! The measurement, on every new leader connection (the open and each reconnection, since a new
//! leader after a failover has its own clock): [`SAMPLES`] round trips of [`LEADER_TIME_SQL`].
//! The leader read its clock between the host's reading before the request (`sent`) and after
//! the reply (`received`), so its offset is `leader − (sent + received) / 2` within half the
//! round trip; the sample with the shortest round trip is kept (NTP's rule). An offset within
//! half its round trip cannot be told from 0 and is applied as 0, so hosts in step (one machine,
//! NTP) keep their own clock to the millisecond, fake timers and replayed traces included.
//!
//! The host's clock measured is the system's wall clock, not the caller's `Date.now()`: a
//! caller's fake timers are kept on top of the offset, not cancelled by it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use dqlite_wire::{Connection, ErrorKind, Outcome, Value};

/// The leader's wall clock in epoch ms, as its SQLite reads it (SQLite keeps `'now'` in whole
/// ms). `unixepoch('subsec')` would say it shorter, but needs SQLite 3.42, and Debian 12's
/// libdqlite links 3.40.1.
pub const LEADER_TIME_SQL: &str =
    "SELECT CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

/// Round trips per measurement.
pub const SAMPLES: usize = 3;

/// One round trip: the host's clock before the request and after the reply, and the leader's
/// clock read in between (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The host's clock before the request was sent.
    pub sent: i64,
    /// The leader's clock.
    pub leader: i64,
    /// The host's clock after the reply arrived.
    pub received: i64,
}

impl Sample {
    /// How long the round trip took (ms).
    pub fn round_trip(&self) -> i64 {
        self.received.saturating_sub(self.sent)
    }

    /// `2 × (leader − midpoint)`, exact in integers.
    fn twice_offset(&self) -> i128 {
        2 * i128::from(self.leader) - i128::from(self.sent) - i128::from(self.received)
    }

    /// The leader's clock minus the host's at the round trip's midpoint, in ms (a half rounded
    /// away from zero).
    pub fn offset(&self) -> i64 {
        let twice = self.twice_offset();
        clamp((twice + twice.signum()) / 2)
    }

    /// [`Sample::offset`], or 0 when it is within half the round trip: a clock in step with the
    /// leader's could have given it.
    pub fn applied_offset(&self) -> i64 {
        if self.twice_offset().abs() <= i128::from(self.round_trip()) {
            0
        } else {
            self.offset()
        }
    }
}

fn clamp(value: i128) -> i64 {
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The sample with the shortest round trip (the first of equals).
pub fn best(samples: &[Sample]) -> Option<Sample> {
    samples.iter().copied().min_by_key(Sample::round_trip)
}

/// What the latest measurement found (`state.clusterClock` in the JS layer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The offset the store adds to the caller's clock.
    pub offset_ms: i64,
    /// The offset measured, before a value within half the round trip is taken as 0.
    pub measured_offset_ms: i64,
    /// The round trip of the sample kept.
    pub round_trip_ms: i64,
    /// The leader measured.
    pub leader: String,
    /// How many leader connections were measured so far.
    pub measurements: u64,
}

/// This host's offset from the leader, written by the connection that measures it and read by
/// the JS layer on every call without the state's lock.
#[derive(Debug, Default)]
pub struct ClusterClock {
    offset_ms: AtomicI64,
    measurements: AtomicU64,
    reading: Mutex<Option<Reading>>,
}

impl ClusterClock {
    /// Measures the leader `conn` is connected to and keeps the result.
    pub fn measure(&self, conn: &mut Connection) -> dqlite_wire::Result<()> {
        let mut samples = [Sample {
            sent: 0,
            leader: 0,
            received: 0,
        }; SAMPLES];
        for sample in &mut samples {
            let sent = host_now_ms();
            let result = conn.query_all(LEADER_TIME_SQL, &[])?;
            let received = host_now_ms();
            let leader = match result.rows.first().and_then(|row| row.first()) {
                Some(Value::Integer(ms)) => *ms,
                other => {
                    return Err(dqlite_wire::Error::new(
                        ErrorKind::Protocol(format!("the leader's clock read as {other:?}")),
                        Outcome::Failed,
                    ))
                }
            };
            *sample = Sample {
                sent,
                leader,
                received,
            };
        }
        let kept = best(&samples).expect("SAMPLES > 0");
        self.record(kept, conn.address());
        Ok(())
    }

    /// Keeps `sample` as the measurement of `leader`.
    pub fn record(&self, sample: Sample, leader: &str) {
        let mut reading = self
            .reading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let measurements = self.measurements.load(Ordering::Relaxed) + 1;
        *reading = Some(Reading {
            offset_ms: sample.applied_offset(),
            measured_offset_ms: sample.offset(),
            round_trip_ms: sample.round_trip(),
            leader: leader.to_owned(),
            measurements,
        });
        self.offset_ms
            .store(sample.applied_offset(), Ordering::Relaxed);
        self.measurements.store(measurements, Ordering::Release);
    }

    /// The offset to add to the caller's clock (0 before any measurement).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// How many measurements were made: the JS layer looks at [`ClusterClock::reading`] again
    /// when it changed.
    pub fn measurements(&self) -> u64 {
        self.measurements.load(Ordering::Acquire)
    }

    /// The latest measurement, `None` before the first.
    pub fn reading(&self) -> Option<Reading> {
        self.reading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// The host's wall clock in epoch ms (floored, as `Date.now()`).
pub fn host_now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_millis() as i64,
        Err(before) => -(before.duration().as_millis() as i64) - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(sent: i64, leader: i64, received: i64) -> Sample {
        Sample {
            sent,
            leader,
            received,
        }
    }

    #[test]
    fn the_offset_is_the_leaders_clock_minus_the_midpoint() {
        // A host 60 s behind the leader, and one 60 s ahead, over a 4 ms round trip.
        let behind = sample(1_000, 61_002, 1_004);
        assert_eq!((behind.offset(), behind.round_trip()), (60_000, 4));
        assert_eq!(behind.applied_offset(), 60_000);
        let ahead = sample(61_000, 1_002, 61_004);
        assert_eq!(ahead.applied_offset(), -60_000);
        // Half a millisecond is rounded away from zero.
        assert_eq!(sample(0, 2, 1).offset(), 2);
        assert_eq!(sample(0, -1, 1).offset(), -2);
        assert_eq!(sample(0, 500, 3).offset(), 499);
        assert_eq!(sample(0, -500, 3).offset(), -502);
    }

    #[test]
    fn an_offset_within_half_the_round_trip_is_applied_as_zero() {
        // The leader's clock read anywhere in the round trip of a clock in step: 0 applied.
        for leader in 100..=110 {
            let s = sample(100, leader, 110);
            assert_eq!(s.applied_offset(), 0, "{leader}");
            assert_eq!(s.offset(), leader - 105);
        }
        // Just outside the round trip: applied.
        assert_eq!(sample(100, 111, 110).applied_offset(), 6);
        assert_eq!(sample(100, 99, 110).applied_offset(), -6);
        // A round trip within one millisecond tick.
        assert_eq!(sample(100, 100, 100).applied_offset(), 0);
        assert_eq!(sample(100, 101, 100).applied_offset(), 1);
    }

    #[test]
    fn the_shortest_round_trip_is_kept() {
        let samples = [
            sample(0, 60_040, 80),
            sample(100, 60_102, 104),
            sample(200, 60_150, 210),
            sample(300, 60_302, 304),
        ];
        assert_eq!(best(&samples), Some(samples[1]));
        assert_eq!(best(&[]), None);
    }

    #[test]
    fn absurd_readings_do_not_overflow() {
        assert_eq!(sample(0, i64::MAX, 0).offset(), i64::MAX);
        assert_eq!(sample(0, i64::MIN, 0).offset(), i64::MIN);
        assert_eq!(sample(i64::MIN, 0, i64::MAX).round_trip(), i64::MAX);
        assert_eq!(sample(i64::MIN, 0, i64::MAX).applied_offset(), 0);
    }

    #[test]
    fn a_record_is_read_back_and_counted() {
        let clock = ClusterClock::default();
        assert_eq!((clock.offset_ms(), clock.measurements()), (0, 0));
        assert_eq!(clock.reading(), None);
        clock.record(sample(1_000, 61_002, 1_004), "127.0.0.1:9001");
        clock.record(sample(2_000, 2_001, 2_002), "127.0.0.1:9002");
        assert_eq!((clock.offset_ms(), clock.measurements()), (0, 2));
        assert_eq!(
            clock.reading(),
            Some(Reading {
                offset_ms: 0,
                measured_offset_ms: 0,
                round_trip_ms: 2,
                leader: "127.0.0.1:9002".into(),
                measurements: 2,
            })
        );
    }

    #[test]
    fn the_host_clock_is_epoch_milliseconds() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let now = host_now_ms();
        assert!(now >= before && now - before < 60_000);
    }
}
