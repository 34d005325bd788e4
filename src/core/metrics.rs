//! Counters and timing histograms for operators, per process and per server.
//!
//! Recording is a few relaxed atomic additions: no lock, no Redis round trip.
//! Each value is kept twice: in this process's own set, and in a set in shared
//! memory that `share_with_children()` maps before php-fpm forks its workers, so
//! one scrape of any worker sees the whole pool.

use std::fmt::Write as _;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

macro_rules! named {
    ($enum:ident { $($variant:ident => $name:literal, $help:literal;)* }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $enum { $($variant),* }

        impl $enum {
            pub const ALL: &'static [$enum] = &[$($enum::$variant),*];
            pub fn name(self) -> &'static str { match self { $($enum::$variant => $name),* } }
            pub fn help(self) -> &'static str { match self { $($enum::$variant => $help),* } }
        }
    };
}

named!(Counter {
    LockAcquired => "lock_acquired", "Locks acquired (alone: writers).";
    ReadLocksAcquired => "lock_read_acquired", "Locks acquired as readers (shared).";
    PermitsAcquired => "semaphore_acquired", "Semaphore permits acquired.";
    PermitsBusy => "semaphore_busy", "Semaphore acquire calls that gave up because all permits stayed taken.";
    LockContended => "lock_contended", "Acquisitions that found the lock held at least once.";
    LockBusy => "lock_busy", "Acquire calls that gave up because another holder kept the lock (failed acquisitions).";
    LockReleased => "lock_released", "Holds of locks and permits released by their holder (an upgrade or downgrade releases the hold it converts). A hold's end is counted once at most: here or in lock_lost.";
    LockLost => "lock_lost", "Holds of locks and permits found expired or taken (by a release, renewal, fencing token, inspect, conversion, or a release left for later), or given up by the watchdog.";
    LockRenewals => "lock_renewals", "Successful lease renewals (refresh).";
    AutoRenewals => "auto_renewals", "Leases (locks and sessions) extended by the watchdog thread.";
    RenewalRoundTrips => "renewal_round_trips", "Round trips of the watchdog (each renews every lease due on one endpoint).";
    RenewalErrors => "renewal_errors", "Watchdog renewals that got no answer, an error, or too few replica acknowledgements (tried again until the lease would end).";
    SessionLocked => "session_locked", "Sessions opened with their lock.";
    SessionContended => "session_contended", "Session opens that found the lock held at least once.";
    SessionLockTimeouts => "session_lock_timeouts", "Session opens whose lock wait ran out (failed acquisitions).";
    SessionTooManyWaiters => "session_too_many_waiters", "Session opens refused because max_waiters requests already waited.";
    SessionLost => "session_lost", "Session writes or unlocks rejected because the lease had expired (or given up by the watchdog).";
    SessionRevoked => "session_revoked", "Session writes or unlocks refused because a logout (a destroy by another request) revoked the request's lock: the session stays destroyed.";
    SessionReadonly => "session_readonly", "Sessions opened read-only (on_lock_timeout = readonly) after the lock wait ran out, or when max_waiters requests already waited.";
    SessionUndecodable => "session_undecodable", "Sessions whose stored data could not be read (not the configured compression's, nor a serialized session; or inflating past the bound): left as stored, seen empty, not written over.";
    SessionWriteConflicts => "session_write_conflicts", "Writes of a session the request did not hold refused: another request held its lock, or had saved it since this request's own save; or a read-only request's fresh id (a regenerate) left unwritten because the session it read changed since (a logout).";
    Wakeups => "wakeups", "Waiters woken by a release that handed them the lock.";
    GrantsLapsed => "grants_lapsed", "Grants (locks, permits, sessions) never counted on: handed to a waiter that stalled past them before extending them for wait_replicas, or read only after they could have ended (a slow reply or WAIT) and not ours, or still too late, when extended; asked for again (a conversion's hold is let go).";
    Connects => "connects", "Connections opened to Redis.";
    ConnectionErrors => "connection_errors", "Connections refused, timed out, broken, or error replies.";
    Retries => "retries", "Commands retried on a fresh connection after an uncertain failure.";
    UncertainResolved => "uncertain_resolved", "Uncertain outcomes resolved by asking Redis again.";
    MasterChanges => "master_changes", "Masters found at a new address through Sentinel, or slots of a Cluster found served by another master (failovers and slot moves; on a Cluster, each link of the process that is redirected counts once).";
    FailoverLost => "failover_lost", "Holds (locks and sessions) that a new master (Sentinel or Cluster) did not have: taken on the old master, or lost with it.";
    WaitShortfalls => "wait_shortfalls", "Writes that fewer replicas than wait_replicas acknowledged in time (reported as failed).";
});

named!(Timing {
    LockWait => "lock_wait_seconds", "Time from acquire() to holding the lock.";
    LockHold => "lock_hold_seconds", "Time a lock was held, until release.";
    SessionWait => "session_wait_seconds", "Time from session open to holding its lock.";
    SessionHold => "session_hold_seconds", "Time a session lock was held, until save or close.";
});

/// Upper bounds of the histogram buckets, in seconds: from a loopback round trip
/// to a slow request.
pub const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

const NC: usize = Counter::ALL.len();
const NT: usize = Timing::ALL.len();
const NB: usize = BUCKETS.len() + 1;

/// One set of values. `repr(C)` and atomics only: it may live in shared memory.
#[repr(C)]
struct Set {
    counters: [AtomicU64; NC],
    buckets: [[AtomicU64; NB]; NT],
    sum_micros: [AtomicU64; NT],
}

impl Set {
    const fn new() -> Set {
        Set {
            counters: [const { AtomicU64::new(0) }; NC],
            buckets: [const { [const { AtomicU64::new(0) }; NB] }; NT],
            sum_micros: [const { AtomicU64::new(0) }; NT],
        }
    }
}

static LOCAL: Set = Set::new();
static SHARED: AtomicPtr<Set> = AtomicPtr::new(null_mut());

fn sets() -> impl Iterator<Item = &'static Set> {
    // SAFETY: SHARED is null or a mapping made once by share_with_children() and
    // never unmapped; Set is plain atomics, valid when zero-filled.
    std::iter::once(&LOCAL).chain(unsafe { SHARED.load(Ordering::Acquire).as_ref() })
}

/// Maps a shared set that forked children keep writing to. Call it once, in the
/// parent, before it forks (php-fpm's MINIT runs in the master). Without it the
/// server view is this process's own.
pub fn share_with_children() -> bool {
    if !SHARED.load(Ordering::Acquire).is_null() {
        return true;
    }
    // SAFETY: an anonymous shared mapping of our size; zero-filled, which is a
    // valid Set (all counters 0).
    let p = unsafe {
        libc::mmap(
            null_mut(),
            std::mem::size_of::<Set>(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    SHARED.store(p.cast(), Ordering::Release);
    true
}

pub fn incr(c: Counter) {
    for s in sets() {
        s.counters[c as usize].fetch_add(1, Ordering::Relaxed);
    }
}

pub fn observe(t: Timing, d: Duration) {
    let secs = d.as_secs_f64();
    let i = BUCKETS
        .iter()
        .position(|&b| secs <= b)
        .unwrap_or(BUCKETS.len());
    for s in sets() {
        s.buckets[t as usize][i].fetch_add(1, Ordering::Relaxed);
        s.sum_micros[t as usize].fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Which values to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This process alone.
    Process,
    /// Every process forked from the one that called `share_with_children()`.
    Server,
}

/// The values of a histogram, as Prometheus wants them.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// Cumulative count per bucket of `BUCKETS`, then +Inf (the total).
    pub cumulative: Vec<u64>,
    pub sum_seconds: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub counters: Vec<(Counter, u64)>,
    pub timings: Vec<(Timing, HistogramSnapshot)>,
}

pub fn snapshot(scope: Scope) -> Snapshot {
    let set = match scope {
        Scope::Process => &LOCAL,
        // SAFETY: as in sets().
        Scope::Server => unsafe { SHARED.load(Ordering::Acquire).as_ref() }.unwrap_or(&LOCAL),
    };
    let counters = Counter::ALL
        .iter()
        .map(|&c| (c, set.counters[c as usize].load(Ordering::Relaxed)))
        .collect();
    let timings = Timing::ALL
        .iter()
        .map(|&t| {
            let mut total = 0;
            let cumulative = set.buckets[t as usize]
                .iter()
                .map(|b| {
                    total += b.load(Ordering::Relaxed);
                    total
                })
                .collect();
            let sum_seconds = set.sum_micros[t as usize].load(Ordering::Relaxed) as f64 / 1e6;
            (
                t,
                HistogramSnapshot {
                    cumulative,
                    sum_seconds,
                },
            )
        })
        .collect();
    Snapshot { counters, timings }
}

/// This process's value of one counter.
pub fn get(c: Counter) -> u64 {
    LOCAL.counters[c as usize].load(Ordering::Relaxed)
}

/// The snapshot in Prometheus's text exposition format, names prefixed `redis_lease_`.
pub fn prometheus(s: &Snapshot) -> String {
    let mut out = String::new();
    for (c, v) in &s.counters {
        let name = format!("redis_lease_{}_total", c.name());
        let _ = writeln!(
            out,
            "# HELP {name} {}\n# TYPE {name} counter\n{name} {v}",
            c.help()
        );
    }
    for (t, h) in &s.timings {
        let name = format!("redis_lease_{}", t.name());
        let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} histogram", t.help());
        for (bound, count) in BUCKETS.iter().zip(&h.cumulative) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {count}");
        }
        let total = h.cumulative.last().copied().unwrap_or(0);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
        let _ = writeln!(out, "{name}_sum {}", h.sum_seconds);
        let _ = writeln!(out, "{name}_count {total}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_exported() {
        let before = snapshot(Scope::Process);
        observe(Timing::SessionHold, Duration::from_micros(100));
        observe(Timing::SessionHold, Duration::from_millis(3));
        observe(Timing::SessionHold, Duration::from_secs(60));
        let after = snapshot(Scope::Process);
        let h = |s: &Snapshot| s.timings[Timing::SessionHold as usize].1.clone();
        let (b, a) = (h(&before), h(&after));
        assert_eq!(a.cumulative[0] - b.cumulative[0], 1);
        assert_eq!(a.cumulative[3] - b.cumulative[3], 2);
        assert_eq!(
            a.cumulative.last().unwrap() - b.cumulative.last().unwrap(),
            3
        );
        assert!((a.sum_seconds - b.sum_seconds - 60.0031).abs() < 1e-6);
        let text = prometheus(&after);
        assert!(text.contains("# TYPE redis_lease_session_hold_seconds histogram"));
        assert!(text.contains("redis_lease_session_hold_seconds_bucket{le=\"+Inf\"}"));
        assert!(text.contains("# TYPE redis_lease_lock_acquired_total counter"));
    }

    #[test]
    fn a_forked_child_counts_into_the_shared_set() {
        assert!(share_with_children());
        let before = snapshot(Scope::Server).counters[Counter::Retries as usize].1;
        // SAFETY: the child only does atomic adds and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            incr(Counter::Retries);
            incr(Counter::Retries);
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let after = snapshot(Scope::Server).counters[Counter::Retries as usize].1;
        assert!(
            after - before >= 2,
            "the parent sees the child's counts: {before} -> {after}"
        );
    }
}
