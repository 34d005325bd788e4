//! Sentinel: the master found through the sentinels, a failover followed without
//! a restart, fencing tokens that keep rising across it, WAIT, and sentinels that
//! cannot be reached.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::metrics::{self, Counter};
use support::{await_until, exists, SentinelSet};

const SEC: Duration = Duration::from_secs(1);

fn lease(dsn: &str, name: &str) -> Lease {
    let ep = Endpoint::parse(dsn, Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

/// The node's ROLE, or "" while it cannot say: Sentinel ends the clients of a
/// master it reconfigures (CLIENT KILL TYPE normal), so a reset is an answer to
/// poll again, not a failure.
fn role(port: u16) -> String {
    let ask = || -> redis::RedisResult<Vec<redis::Value>> {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?.get_connection()?;
        redis::cmd("ROLE").query(&mut c)
    };
    match ask().as_deref() {
        Ok([redis::Value::BulkString(b), ..]) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

#[test]
fn locks_follow_the_master_through_a_failover_with_rising_fences() {
    let set = SentinelSet::start("svc");
    let dsn = set.dsn("svc", "?timeout=0.5&read_timeout=1");
    let l = lease(&dsn, "failover");
    let mut first = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    l.fence(&mut first).unwrap();
    assert!(
        exists(&mut set.master.conn(), "lock:{failover}"),
        "taken on the master"
    );
    assert!(l.release(&first, false).unwrap());
    let changes = metrics::get(Counter::MasterChanges);

    // A planned failover: the replica becomes master, the old master its replica.
    let _: String = set.sentinels[0].ask(&["failover", "svc"]).unwrap();
    await_until(SEC * 20, "the replica to be promoted", || {
        set.master_port("svc") == Some(set.replica.port) && role(set.master.port) == "slave"
    });
    // The pooled link still goes to the old master, which now refuses writes
    // (READONLY): the next call asks the sentinels and goes on.
    let start = Instant::now();
    let mut second = l
        .acquire(SEC * 30, SEC * 5)
        .unwrap()
        .expect("free on the new master");
    l.fence(&mut second).unwrap();
    assert!(start.elapsed() < SEC * 3, "took {:?}", start.elapsed());
    assert!(
        exists(&mut set.replica.conn(), "lock:{failover}"),
        "taken on the new master"
    );
    assert!(
        second.fence > first.fence,
        "fencing tokens rise across the failover: {} then {}",
        first.fence,
        second.fence
    );
    assert!(
        metrics::get(Counter::MasterChanges) > changes,
        "the failover was counted"
    );
    assert!(l.release(&second, false).unwrap());
}

#[test]
fn a_killed_master_is_replaced_and_wait_replicas_guards_the_writes() {
    let mut set = SentinelSet::start("kill");
    let dsn = set.dsn(
        "kill",
        "?timeout=0.5&read_timeout=1&wait_replicas=1&wait_timeout=500",
    );
    let l = lease(&dsn, "durable");
    // WAIT: the replica acknowledged the lock before acquire() returned.
    let mut h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    l.fence(&mut h).unwrap();
    assert!(
        exists(&mut set.replica.conn(), "lock:{durable}"),
        "on the replica already"
    );
    let fence = h.fence;

    // A replica that does not answer: fewer acknowledgements than asked for, so the
    // lock is not held (nor left behind), and it is counted.
    set.replica.signal("STOP");
    let shortfalls = metrics::get(Counter::WaitShortfalls);
    let err = lease(&dsn, "short")
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap_err();
    set.replica.signal("CONT");
    assert!(
        matches!(&err, Error::Connection(m) if m.contains("wait_replicas")),
        "{err:?}"
    );
    assert_eq!(metrics::get(Counter::WaitShortfalls), shortfalls + 1);
    assert!(
        !exists(&mut set.master.conn(), "lock:{short}"),
        "given back"
    );

    // The master dies: the sentinels promote the replica, which has our lock.
    set.master.kill_and_hold_port();
    await_until(SEC * 30, "the replica to be promoted", || {
        set.master_port("kill") == Some(set.replica.port)
    });
    let owned = l
        .inspect(&h.token)
        .unwrap()
        .expect("the acknowledged lock survived");
    assert_eq!(owned.fence, fence);
    assert!(l.release(&h, false).unwrap());
    let next = l.acquire(SEC * 30, Duration::ZERO);
    // The new master has no replica now: wait_replicas=1 cannot be met.
    assert!(next.is_err(), "{next:?}");
}

#[test]
fn unreachable_sentinels_fail_within_the_timeouts() {
    let set = SentinelSet::start("down");
    let dsn = set.dsn("down", "?timeout=0.3&read_timeout=0.3");
    for s in &set.sentinels {
        s.signal("STOP");
    }
    let start = Instant::now();
    let err = lease(&dsn, "nobody")
        .acquire(SEC, Duration::ZERO)
        .unwrap_err();
    let took = start.elapsed();
    for s in &set.sentinels {
        s.signal("CONT");
    }
    match &err {
        Error::Connection(m) => assert!(m.contains("sentinels") && m.contains("'down'"), "{m}"),
        other => panic!("expected a connection error, got {other:?}"),
    }
    // Each of the three sentinels is given one connect and one read timeout.
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    lease(&dsn, "nobody")
        .acquire(SEC, Duration::ZERO)
        .unwrap()
        .expect("back");
}

#[test]
fn a_renewed_lock_is_renewed_on_the_new_master_after_a_failover() {
    let set = SentinelSet::start("renew");
    let dsn = set.dsn("renew", "?timeout=0.5&read_timeout=1");
    // Longer than a planned failover takes (writes are paused meanwhile).
    let ttl = Duration::from_secs(6);
    let mut holder =
        redis_lease::core::lock::Lock::new(lease(&dsn, "renewed"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    await_until(SEC * 5, "the replica to have the lock", || {
        exists(&mut set.replica.conn(), "lock:{renewed}")
    });
    let _: String = set.sentinels[0].ask(&["failover", "renew"]).unwrap();
    await_until(SEC * 20, "the replica to be promoted", || {
        set.master_port("renew") == Some(set.replica.port) && role(set.master.port) == "slave"
    });
    // The watchdog's link to the old master is refused (READONLY); it asks the
    // sentinels again and goes on renewing on the new master.
    assert!(holder.hold().is_some(), "not lost during the failover");
    let pttl = || -> i64 {
        redis::cmd("PTTL")
            .arg("lock:{renewed}")
            .query(&mut set.replica.conn())
            .unwrap()
    };
    let before = pttl();
    await_until(ttl, "a renewal on the new master", || pttl() > before);
    assert!(holder.hold().is_some(), "never lost");
    let other = lease(&dsn, "renewed");
    assert!(
        other.acquire(ttl, Duration::ZERO).unwrap().is_none(),
        "still held"
    );
    assert!(holder.release().unwrap());
}
