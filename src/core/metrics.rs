//! Per-process counters and timing histograms for operators.
//!
//! Plain atomics: recording costs a few nanoseconds and no Redis round trip.
//! Aggregation across php-fpm workers builds on these snapshots.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

macro_rules! counters {
    ($($variant:ident => $name:literal, $help:literal;)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Counter { $($variant),* }

        impl Counter {
            pub const ALL: &'static [Counter] = &[$(Counter::$variant),*];
            pub fn name(self) -> &'static str { match self { $(Counter::$variant => $name),* } }
            pub fn help(self) -> &'static str { match self { $(Counter::$variant => $help),* } }
        }
    };
}

counters! {
    LockAcquired => "lock_acquired", "Locks acquired.";
    LockContended => "lock_contended", "Acquisitions that found the lock held at least once.";
    LockBusy => "lock_busy", "Acquire calls that gave up because another holder kept the lock (failed acquisitions).";
    LockReleased => "lock_released", "Locks released by their holder.";
    LockLost => "lock_lost", "Releases or renewals rejected because the lease had expired or was taken.";
    LockRenewals => "lock_renewals", "Successful lease renewals (refresh).";
    SessionLocked => "session_locked", "Sessions opened with their lock.";
    SessionContended => "session_contended", "Session opens that found the lock held at least once.";
    SessionLockTimeouts => "session_lock_timeouts", "Session opens whose lock wait ran out (failed acquisitions).";
    SessionTooManyWaiters => "session_too_many_waiters", "Session opens refused because max_waiters requests already waited.";
    SessionLost => "session_lost", "Session writes or unlocks rejected because the lease had expired.";
    SessionReadonly => "session_readonly", "Sessions opened read-only after the lock wait ran out.";
    Wakeups => "wakeups", "Waiters woken by a release.";
    Connects => "connects", "Connections opened to Redis.";
    ConnectionErrors => "connection_errors", "Connections refused, timed out, broken, or error replies.";
    Retries => "retries", "Commands retried on a fresh connection after an uncertain failure.";
    UncertainResolved => "uncertain_resolved", "Uncertain outcomes resolved by asking Redis again.";
}

static COUNTERS: [AtomicU64; Counter::ALL.len()] =
    [const { AtomicU64::new(0) }; Counter::ALL.len()];

pub fn incr(c: Counter) {
    COUNTERS[c as usize].fetch_add(1, Ordering::Relaxed);
}

pub fn get(c: Counter) -> u64 {
    COUNTERS[c as usize].load(Ordering::Relaxed)
}

/// Upper bounds of the histogram buckets, in seconds: from a loopback round trip
/// to a slow request.
pub const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

pub struct Histogram {
    pub name: &'static str,
    pub help: &'static str,
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    const fn new(name: &'static str, help: &'static str) -> Self {
        Histogram {
            name,
            help,
            buckets: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    /// Cumulative counts per bucket (the last one is +Inf), as Prometheus wants them.
    pub fn cumulative(&self) -> Vec<u64> {
        let mut total = 0;
        self.buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect()
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }
}

pub static LOCK_WAIT: Histogram = Histogram::new(
    "lock_wait_seconds",
    "Time from acquire() to holding the lock.",
);
pub static LOCK_HOLD: Histogram =
    Histogram::new("lock_hold_seconds", "Time a lock was held, until release.");
pub static SESSION_WAIT: Histogram = Histogram::new(
    "session_wait_seconds",
    "Time from session open to holding its lock.",
);
pub static SESSION_HOLD: Histogram = Histogram::new(
    "session_hold_seconds",
    "Time a session lock was held, until save or close.",
);
pub static HISTOGRAMS: [&Histogram; 4] = [&LOCK_WAIT, &LOCK_HOLD, &SESSION_WAIT, &SESSION_HOLD];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::new("t", "t");
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let c = h.cumulative();
        assert_eq!(c[0], 1);
        assert_eq!(c[3], 2);
        assert_eq!(*c.last().unwrap(), 3);
        assert!((h.sum_seconds() - 60.0031).abs() < 1e-9);
    }
}
