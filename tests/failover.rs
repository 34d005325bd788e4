//! Failovers: a Sentinel switch is followed through the sentinels' announcements
//! within a bound, holds a new master lacks are reported lost, every grant is
//! WAITed for (a handed-over lock too), and a demoted master's READONLY is
//! handled on a link that stays open.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::metrics::{self, Counter};
use redis_lease::core::{sentinel, watchdog};
use support::{await_until, exists, RedisServer, SentinelSet};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn lease(dsn: &str, name: &str) -> Lease {
    let ep = Endpoint::parse(dsn, Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

/// A connection to a sentinel, for the test's own subscription to its
/// +switch-master channel (the test's clock of when the switch was announced).
fn sentinel_conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn a_switch_is_followed_within_the_bound_and_holds_the_new_master_lacks_are_lost() {
    let set = SentinelSet::start("follow");
    let dsn = set.dsn("follow", "?timeout=0.5&read_timeout=1");
    let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
    // Two holds taken on the master and replicated; the replica then loses one of
    // them (a write to a replica does not travel back): the new master will
    // have only the other.
    let mut kept = Lock::new(lease(&dsn, "kept"), SEC * 30);
    let mut gone = Lock::new(lease(&dsn, "gone"), SEC * 30);
    let mut reader = Lock::new(lease(&dsn, "reader"), SEC * 30);
    assert!(kept.acquire(Duration::ZERO).unwrap());
    assert!(gone.acquire(Duration::ZERO).unwrap());
    assert!(reader.acquire_read(Duration::ZERO).unwrap());
    await_until(SEC * 5, "the replica to have them", || {
        let mut r = set.replica.conn();
        exists(&mut r, "lock:{kept}")
            && exists(&mut r, "lock:{gone}")
            && exists(&mut r, "lock:{reader}:holders")
    });
    let mut r = set.replica.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("replica-read-only")
        .arg("no")
        .query(&mut r)
        .unwrap();
    let _: i64 = redis::cmd("DEL").arg("lock:{gone}").query(&mut r).unwrap();
    // And it keeps the other two for less than their holders count on (as if an
    // extension had not reached it): after the switch they count on no more than
    // the new master keeps.
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("lock:{kept}")
        .arg(15_000)
        .query(&mut r)
        .unwrap();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut r).unwrap();
    let token = reader.hold().unwrap().token.as_str().to_string();
    let _: i64 = redis::cmd("ZADD")
        .arg("lock:{reader}:holders")
        .arg(secs * 1000 + micros / 1000 + 15_000)
        .arg(&token)
        .query(&mut r)
        .unwrap();
    for l in [&kept, &reader] {
        assert!(l.hold().unwrap().safe_until() > Instant::now() + SEC * 25);
    }
    await_until(SEC * 10, "the watchdog to subscribe", || {
        watchdog::subscribed(&ep)
    });
    let generation = sentinel::generation(&ep);
    let mut conn = sentinel_conn(set.sentinels[1].port);
    let mut heard = conn.as_pubsub();
    heard.subscribe("+switch-master").unwrap();
    heard.set_read_timeout(Some(SEC * 30)).unwrap();
    set.failover("follow");
    // The test hears the announcement on its own subscription...
    let msg = heard.get_message().unwrap();
    let announced = Instant::now();
    assert_eq!(msg.get_channel_name(), "+switch-master");
    // ... and this process must have moved on no later than half a second after.
    await_until(SEC * 2, "the process to follow the switch", || {
        sentinel::generation(&ep) != generation
    });
    let followed = announced.elapsed();
    assert!(
        followed < MS * 500,
        "followed {followed:?} after the announcement"
    );
    eprintln!("switch followed {followed:?} after +switch-master");
    // The hold the new master lacks is lost (the holder learns it without asking
    // Redis), the other is not.
    await_until(SEC, "the missing hold to be reported lost", || {
        gone.hold().is_none()
    });
    assert!(
        kept.hold().is_some(),
        "a hold the new master has stays held"
    );
    await_until(SEC, "the reader's hold to be checked", || {
        reader.hold().unwrap().safe_until() < Instant::now() + SEC * 15
    });
    for (what, l) in [("alone", &kept), ("shared", &reader)] {
        let left = l.hold().unwrap().safe_until() - Instant::now();
        assert!(
            left < SEC * 15 && left > SEC * 5,
            "{what}: counted on for {left:?} more, the new master keeps it < 15 s"
        );
    }
    // New work goes to the new master at once: the old one is still a master
    // for a while, and must not be written to.
    let start = Instant::now();
    let mut third = Lock::new(lease(&dsn, "third"), SEC * 30);
    assert!(third.acquire(Duration::ZERO).unwrap());
    assert!(start.elapsed() < SEC, "no stall: {:?}", start.elapsed());
    assert!(
        exists(&mut set.replica.conn(), "lock:{third}"),
        "on the new master"
    );
    assert!(
        !exists(&mut set.master.conn(), "lock:{third}"),
        "not on the old master"
    );
    assert!(kept.release().unwrap());
    assert!(!gone.release().unwrap());
    assert!(reader.release().unwrap());
    assert!(third.release().unwrap());
}

#[test]
fn a_lock_handed_to_a_waiter_is_not_held_until_replicated() {
    // The reproduction: A holds, B queues, the replica stops; A's release
    // hands the lock to B. B's acquire must not return true: a failover now
    // would promote a replica that never heard of B's grant.
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    await_until(SEC * 10, "the replica to acknowledge writes", || {
        let mut c = master.conn();
        let _: () = redis::cmd("SET").arg("probe").arg(1).query(&mut c).unwrap();
        redis::cmd("WAIT")
            .arg(1)
            .arg(200)
            .query::<i64>(&mut c)
            .unwrap()
            >= 1
    });
    let dsn = format!(
        "redis://127.0.0.1:{}?wait_replicas=1&wait_timeout=1000",
        master.port
    );
    let a = lease(&dsn, "handed");
    let held = a.acquire(SEC * 3, Duration::ZERO).unwrap().expect("free");
    let waiter = {
        let dsn = dsn.clone();
        std::thread::spawn(move || lease(&dsn, "handed").acquire(SEC * 30, SEC * 10))
    };
    await_until(SEC * 5, "B to queue", || {
        redis::cmd("ZCARD")
            .arg("lock:{handed}:waiters")
            .query::<i64>(&mut master.conn())
            .unwrap()
            == 1
    });
    replica.signal("STOP");
    let shortfalls = metrics::get(Counter::WaitShortfalls);
    assert!(a.release(&held, false).unwrap());
    let got = waiter.join().unwrap();
    replica.signal("CONT");
    match got {
        Err(Error::Connection(m)) => assert!(m.contains("wait_replicas"), "{m}"),
        other => panic!("B must not hold an unreplicated grant: {other:?}"),
    }
    assert!(metrics::get(Counter::WaitShortfalls) > shortfalls);
    assert!(
        !exists(&mut master.conn(), "lock:{handed}"),
        "B gave the lock back"
    );
}

#[test]
fn a_demoted_master_answering_readonly_on_an_open_link() {
    // A coordinated FAILOVER leaves the old master's clients connected: its next
    // answer on those links is READONLY. The request path tries once more on a
    // fresh link and reports the refusal; the watchdog drops its link and lets
    // the lease end at its bound (it cannot be renewed anywhere).
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    await_until(SEC * 10, "the replica to acknowledge writes", || {
        let mut c = master.conn();
        let _: () = redis::cmd("SET").arg("probe").arg(1).query(&mut c).unwrap();
        redis::cmd("WAIT")
            .arg(1)
            .arg(200)
            .query::<i64>(&mut c)
            .unwrap()
            >= 1
    });
    let dsn = format!(
        "redis://127.0.0.1:{}?timeout=0.5&read_timeout=1",
        master.port
    );
    let ttl = MS * 900;
    let mut renewed = Lock::new(lease(&dsn, "renewed"), ttl).with_auto_renew(true);
    assert!(renewed.acquire(Duration::ZERO).unwrap());
    let plain = lease(&dsn, "plain");
    let h = plain.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let _: String = redis::cmd("FAILOVER").query(&mut master.conn()).unwrap();
    await_until(SEC * 10, "the roles to swap", || {
        let role = |s: &RedisServer| -> String {
            let v: Vec<redis::Value> = redis::cmd("ROLE").query(&mut s.conn()).unwrap();
            match &v[0] {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            }
        };
        role(&master) == "slave" && role(&replica) == "master"
    });
    let retries = metrics::get(Counter::Retries);
    let err = plain.release(&h, false).unwrap_err();
    assert!(
        matches!(&err, Error::Reply(m) if m.contains("READONLY")),
        "{err:?}"
    );
    assert!(metrics::get(Counter::Retries) > retries, "tried once more");
    let started = Instant::now();
    await_until(ttl * 2, "the renewed hold to end", || {
        renewed.hold().is_none()
    });
    assert!(
        started.elapsed() <= ttl + MS * 100,
        "{:?}",
        started.elapsed()
    );
}
