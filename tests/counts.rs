//! The counters operators read: every hold we grant is counted once as
//! acquired and once as ended (released, lost, revoked), however it ends: let
//! go by its holder, found gone by a refresh, a fencing token or an inspect,
//! given up by the watchdog, run out unrenewed on a Sentinel or Cluster
//! endpoint, converted, or released later by the process's next call.
//!
//! The counters are the process's: the tests here run one at a time (`SERIAL`)
//! and each ends what it holds, so what each sees change is its own doing.

mod support;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::metrics::{self, Counter, Scope, Timing};
use redis_lease::core::session::{Saved, SessionConfig, SessionStore};
use redis_lease::core::watchdog::Kind;
use support::{
    await_until, exists, load_scripts, lock_lease, pttl, ClusterSet, HoldingProxy, RedisServer,
    SentinelSet,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The counters (and histogram counts) when it was taken.
struct Counts(metrics::Snapshot);

impl Counts {
    fn now() -> Counts {
        Counts(metrics::snapshot(Scope::Process))
    }

    /// How much `c` rose since.
    fn rose(&self, c: Counter) -> u64 {
        let then = self.0.counters.iter().find(|(k, _)| *k == c).unwrap().1;
        metrics::get(c) - then
    }

    /// How many observations of `t` were made since.
    fn observed(&self, t: Timing) -> u64 {
        let count = |s: &metrics::Snapshot| {
            let (_, h) = s.timings.iter().find(|(k, _)| *k == t).unwrap();
            *h.cumulative.last().unwrap()
        };
        count(&metrics::snapshot(Scope::Process)) - count(&self.0)
    }

    /// Holds of locks (alone, shared) and permits acquired since, and how
    /// many of them ended (released, lost).
    fn lock_holds(&self) -> (u64, u64) {
        let acquired = self.rose(Counter::LockAcquired)
            + self.rose(Counter::ReadLocksAcquired)
            + self.rose(Counter::PermitsAcquired);
        (
            acquired,
            self.rose(Counter::LockReleased) + self.rose(Counter::LockLost),
        )
    }
}

fn lease_at(dsn: &str, keys: LeaseKeys) -> Lease {
    Lease::new(
        Arc::new(Endpoint::parse(dsn, Timeouts::default()).unwrap()),
        keys,
    )
}

fn session_store(dsn: &str, config: SessionConfig) -> SessionStore {
    SessionStore::new(
        Arc::new(Endpoint::parse(dsn, Timeouts::default()).unwrap()),
        config,
    )
}

/// Deletes `key` on `server`, as an operator (or a bug elsewhere) would.
fn delete(server: &RedisServer, key: &str) {
    let n: i64 = redis::cmd("DEL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(n, 1, "{key} was there");
}

#[test]
fn each_kind_of_hold_is_counted_acquired_and_ended_once() {
    let _serial = serial();
    let server = RedisServer::start();
    let dsn = server.dsn();
    let counts = Counts::now();

    let mut alone = Lock::new(lock_lease(&server, "", "kinds_w"), SEC * 30);
    assert!(alone.acquire(Duration::ZERO).unwrap());
    assert!(alone.release().unwrap());
    assert_eq!(counts.rose(Counter::LockAcquired), 1);
    assert_eq!(counts.rose(Counter::LockReleased), 1);
    assert_eq!(counts.observed(Timing::LockHold), 1);

    let mut reader = Lock::new(lock_lease(&server, "", "kinds_r"), SEC * 30);
    assert!(reader.acquire_read(Duration::ZERO).unwrap());
    assert_eq!(counts.rose(Counter::ReadLocksAcquired), 1);
    // An upgrade ends the read hold (released) and begins a hold alone.
    assert!(reader.acquire(Duration::ZERO).unwrap());
    assert!(!reader.shared());
    assert_eq!(counts.rose(Counter::LockAcquired), 2);
    assert_eq!(counts.rose(Counter::LockReleased), 2);
    // A downgrade: a reader's hold again, counted as one.
    assert!(reader.acquire_read(Duration::ZERO).unwrap());
    assert!(reader.shared());
    assert_eq!(counts.rose(Counter::ReadLocksAcquired), 2);
    assert_eq!(counts.rose(Counter::LockAcquired), 2);
    assert_eq!(counts.rose(Counter::LockReleased), 3);
    assert!(reader.release().unwrap());

    let keys = LeaseKeys::for_semaphore(b"lock:", b"kinds_s");
    let mut permit = Lock::semaphore(lease_at(&dsn, keys), 2, SEC * 30);
    assert!(permit.acquire(Duration::ZERO).unwrap());
    assert_eq!(counts.rose(Counter::PermitsAcquired), 1);
    assert!(permit.release().unwrap());

    let (acquired, ended) = counts.lock_holds();
    assert_eq!(
        (acquired, ended),
        (5, 5),
        "each hold acquired and ended once"
    );
    assert_eq!(counts.rose(Counter::LockLost), 0);

    let store = session_store(&dsn, SessionConfig::default());
    let (mut s, _) = store.open("kinds").unwrap();
    assert_eq!(counts.rose(Counter::SessionLocked), 1);
    store.write(&mut s, b"a|i:1;", SEC * 60).unwrap();
    assert_eq!(counts.observed(Timing::SessionHold), 1);
    let (mut s, _) = store.open("kinds").unwrap();
    assert!(store.close(&mut s).unwrap());
    assert_eq!(counts.rose(Counter::SessionLocked), 2);
    assert_eq!(counts.observed(Timing::SessionHold), 2);
    assert_eq!(counts.rose(Counter::SessionLost), 0);
}

/// A hold found gone is lost once, whoever finds it first: a refresh and then
/// the release (before, each counted it), a fencing token's request, an
/// inspect (before, uncounted).
#[test]
fn a_hold_found_gone_is_counted_lost_once() {
    let _serial = serial();
    let server = RedisServer::start();
    let counts = Counts::now();

    let l = lock_lease(&server, "", "gone_refresh");
    let mut hold = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    delete(&server, "lock:{gone_refresh}");
    assert!(!l.refresh(&mut hold, SEC * 30).unwrap());
    assert!(!l.release(&hold, false).unwrap());
    assert_eq!(counts.rose(Counter::LockLost), 1);

    let l = lock_lease(&server, "", "gone_fence");
    let mut hold = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    delete(&server, "lock:{gone_fence}");
    assert_eq!(l.fence(&mut hold).unwrap(), None);
    assert!(!l.release(&hold, false).unwrap());
    assert_eq!(counts.rose(Counter::LockLost), 2);

    let mut lock = Lock::new(lock_lease(&server, "", "gone_inspect"), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    delete(&server, "lock:{gone_inspect}");
    assert!(lock.inspect().unwrap().is_none());
    assert!(!lock.release().unwrap());
    assert_eq!(counts.rose(Counter::LockLost), 3);

    assert_eq!(counts.lock_holds(), (3, 3));
    assert_eq!(counts.rose(Counter::LockReleased), 0);
}

/// An upgrade of a read hold that ran out has nothing to convert: the read
/// hold ends lost (before, uncounted), and nothing new was acquired.
#[test]
fn a_conversion_of_a_hold_that_ran_out_counts_it_lost() {
    let _serial = serial();
    let server = RedisServer::start();
    let counts = Counts::now();
    let mut reader = Lock::new(lock_lease(&server, "", "lapsed_up"), MS * 200);
    assert!(reader.acquire_read(Duration::ZERO).unwrap());
    let mut raw = server.conn();
    await_until(SEC * 10, "the read lease to run out", || {
        let now = support::server_ms(&mut raw);
        let end: Option<f64> = redis::cmd("ZSCORE")
            .arg("lock:{lapsed_up}:holders")
            .arg(reader.token().unwrap().as_str())
            .query(&mut raw)
            .unwrap();
        end.is_none_or(|end| end <= now as f64)
    });
    assert!(
        !reader.acquire(Duration::ZERO).unwrap(),
        "nothing to convert"
    );
    assert_eq!(counts.rose(Counter::ReadLocksAcquired), 1);
    assert_eq!(counts.rose(Counter::LockAcquired), 0);
    assert_eq!(counts.rose(Counter::LockLost), 1);
    assert_eq!(counts.lock_holds(), (1, 1));
}

/// The watchdog gives up a hold whose renewals go unanswered: counted lost
/// then (its holder is told so). Its release may still find Redis keeping it
/// (and free it for the next holder): that is no second end. Before, it also
/// counted as released. Released at once, and (as `Lock::release` does when
/// the renewal got no answer at all) by the next call to the endpoint.
#[test]
fn a_hold_the_watchdog_gave_up_is_not_counted_released_too() {
    let _serial = serial();
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let dsn = format!("redis://127.0.0.1:{}?read_timeout=30", proxy.port);
    let ttl = MS * 2777;
    let counts = Counts::now();
    let l = lease_at(&dsn, LeaseKeys::for_lock(b"lock:", b"given_up"));
    let mut hold = l.acquire(ttl, Duration::ZERO).unwrap().unwrap();
    let keys = LeaseKeys::for_lock(b"lock:", b"given_up_too");
    let mut lock = Lock::new(lease_at(&dsn, keys), ttl).with_auto_renew(true);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    // Renewals (by their ttl, as sent) go unanswered; Redis keeps the leases.
    proxy.hold_command(b"\r\n2777\r\n");
    l.watch(&mut hold, Kind::Lock, true, 0);
    for key in ["lock:{given_up}", "lock:{given_up_too}"] {
        let _: () = redis::cmd("PEXPIRE")
            .arg(key)
            .arg(60_000)
            .query(&mut server.conn())
            .unwrap();
    }
    await_until(SEC * 10, "the watchdog to give the holds up", || {
        hold.lost() && lock.hold().is_none()
    });
    assert_eq!(counts.rose(Counter::LockLost), 2);
    assert!(l.release(&hold, false).unwrap(), "Redis still had it");
    assert!(!lock.release().unwrap(), "not ours throughout");
    // Sent now, or (the watchdog's renewal went unanswered) left to the next
    // call to the endpoint.
    let keys = LeaseKeys::for_lock(b"lock:", b"given_up_next");
    let mut next = Lock::new(lease_at(&dsn, keys), SEC * 30);
    assert!(next.acquire(Duration::ZERO).unwrap());
    assert!(next.release().unwrap());
    for key in ["lock:{given_up}", "lock:{given_up_too}"] {
        assert!(!exists(&mut server.conn(), key), "{key} freed all the same");
    }
    assert_eq!(counts.rose(Counter::LockReleased), 1, "the next lock's");
    assert_eq!(counts.lock_holds(), (3, 3));
    proxy.hold(false);
}

/// A release whose reply never came is left to the process's next call, and
/// counted when that settles it: released (the release held back here ran,
/// late). Before, uncounted.
#[test]
fn a_release_left_for_the_next_call_is_counted_when_it_settles() {
    let _serial = serial();
    let server = RedisServer::start();
    load_scripts(&server);
    let proxy = HoldingProxy::start(server.port);
    let dsn = format!("redis://127.0.0.1:{}?read_timeout=1", proxy.port);
    let mut lock = Lock::new(
        lease_at(&dsn, LeaseKeys::for_lock(b"lock:", b"deferred")),
        SEC * 30,
    );
    let counts = Counts::now();
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold(true);
    lock.close(false);
    assert_eq!(counts.lock_holds(), (1, 0), "not known yet");
    proxy.hold(false);
    await_until(SEC * 10, "the held release to run", || {
        !exists(&mut server.conn(), "lock:{deferred}")
    });
    // The next call to the endpoint settles what was left.
    let mut next = Lock::new(
        lease_at(&dsn, LeaseKeys::for_lock(b"lock:", b"deferred_next")),
        SEC * 30,
    );
    assert!(next.acquire(Duration::ZERO).unwrap());
    assert!(next.release().unwrap());
    assert_eq!(counts.rose(Counter::LockReleased), 2);
    assert_eq!(counts.lock_holds(), (2, 2));
}

/// Locks and sessions that nobody renews (the default for sessions) on an
/// endpoint that follows failovers: their lease runs out, and the holder's
/// release or save finds it gone. Before, neither counted it (the watch that
/// follows failovers had ended without counting, and the holder took it for
/// counted).
fn unrenewed_holds_that_run_out_are_counted_lost(dsn: &str, master: impl Fn(&str) -> i64) {
    let counts = Counts::now();
    let ttl = MS * 300;
    let keys = LeaseKeys::for_lock(b"lock:", b"ran_out");
    let mut lock = Lock::new(lease_at(dsn, keys), ttl);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    assert!(
        lock.hold().unwrap().watch.is_some(),
        "followed across failovers"
    );
    await_until(SEC * 10, "the lease to run out", || {
        master("lock:{ran_out}") == -2
    });
    assert!(!lock.release().unwrap());
    assert_eq!(counts.rose(Counter::LockLost), 1);
    assert_eq!(counts.lock_holds(), (1, 1));

    let config = SessionConfig {
        lock_ttl: ttl,
        ..SessionConfig::default()
    };
    let store = session_store(dsn, config);
    let (mut s, _) = store.open("ran-out").unwrap();
    await_until(SEC * 10, "the session's lease to run out", || {
        master("{PHPREDIS_SESSION:ran-out}:lock") == -2
    });
    assert!(matches!(
        store.write(&mut s, b"a|i:1;", SEC * 60).unwrap(),
        Saved::LeaseLost
    ));
    assert_eq!(counts.rose(Counter::SessionLocked), 1);
    assert_eq!(counts.rose(Counter::SessionLost), 1);
    assert_eq!(counts.observed(Timing::SessionHold), 0);
}

#[test]
fn an_unrenewed_hold_that_runs_out_on_sentinel_is_counted_lost() {
    let _serial = serial();
    let set = SentinelSet::start("counts");
    let dsn = set.dsn("counts", "");
    unrenewed_holds_that_run_out_are_counted_lost(&dsn, |key| pttl(&set.master, key));
}

#[test]
fn an_unrenewed_hold_that_runs_out_on_a_cluster_is_counted_lost() {
    let _serial = serial();
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("");
    unrenewed_holds_that_run_out_are_counted_lost(&dsn, |key| pttl(set.owner_of(key), key));
}
