//! The lease engine against a real redis-server.

mod support;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Attempt, Lease, LeaseKeys};
use support::{await_until, exists, RedisServer};

fn lease(server: &RedisServer, name: &str) -> Lease {
    let ep = Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

const SEC: Duration = Duration::from_secs(1);

#[test]
fn acquire_sets_token_and_fence_then_release_frees() {
    let server = RedisServer::start();
    let l = lease(&server, "basic");
    let hold = l
        .acquire(SEC * 10, Duration::ZERO)
        .unwrap()
        .expect("free lock");
    let mut raw = server.conn();
    let value: String = redis::cmd("GET")
        .arg("lock:{basic}")
        .query(&mut raw)
        .unwrap();
    assert_eq!(value, format!("{}:{}", hold.token.as_str(), hold.fence));
    assert_eq!(hold.token.as_str().len(), 32);
    let pttl: i64 = redis::cmd("PTTL")
        .arg("lock:{basic}")
        .query(&mut raw)
        .unwrap();
    assert!(pttl > 9_000 && pttl <= 10_000, "pttl {pttl}");

    // Busy for anyone else, and not stealable.
    let other = lease(&server, "basic");
    assert!(other.acquire(SEC, Duration::ZERO).unwrap().is_none());

    assert!(l.release(&hold, false).unwrap());
    assert!(!exists(&mut raw, "lock:{basic}"));
    assert!(
        !l.release(&hold, false).unwrap(),
        "a second release must report the lease gone"
    );

    let next = other.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(next.fence > hold.fence);
    assert_ne!(next.token, hold.token);
}

#[test]
fn fencing_tokens_rise_even_when_the_counter_is_lost() {
    let server = RedisServer::start();
    let l = lease(&server, "fence");
    let mut last = 0;
    for _ in 0..50 {
        let h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
        assert!(h.fence > last, "{} after {last}", h.fence);
        last = h.fence;
        assert!(l.release(&h, false).unwrap());
    }
    // A Redis restart without persistence loses the counter; tokens still rise.
    let mut raw = server.conn();
    let _: () = redis::cmd("FLUSHALL").query(&mut raw).unwrap();
    let h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(
        h.fence > last,
        "{} after losing the counter, last was {last}",
        h.fence
    );
}

#[test]
fn an_expired_holder_cannot_touch_the_new_holders_lock() {
    let server = RedisServer::start();
    let a = lease(&server, "expiry");
    let b = lease(&server, "expiry");
    let mut ha = a
        .acquire(Duration::from_millis(50), Duration::ZERO)
        .unwrap()
        .unwrap();
    let mut raw = server.conn();
    await_until(SEC * 5, "the lease to expire", || {
        !exists(&mut raw, "lock:{expiry}")
    });
    let hb = b
        .acquire(SEC * 10, Duration::ZERO)
        .unwrap()
        .expect("free after expiry");
    assert!(!a.release(&ha, false).unwrap());
    assert!(!a.refresh(&mut ha, SEC * 10).unwrap());
    assert!(a.inspect(&ha.token).unwrap().is_none());
    let (left, fence) = b.inspect(&hb.token).unwrap().expect("b still holds");
    assert_eq!(fence, hb.fence);
    assert!(left.unwrap() > SEC * 9);
}

#[test]
fn refresh_extends_only_our_lease() {
    let server = RedisServer::start();
    let l = lease(&server, "refresh");
    let mut h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(l.refresh(&mut h, SEC * 60).unwrap());
    let (left, _) = l.inspect(&h.token).unwrap().unwrap();
    assert!(left.unwrap() > SEC * 59);
    assert_eq!(h.ttl, SEC * 60);
}

#[test]
fn a_waiter_is_woken_by_release_not_by_the_lease_running_out() {
    let server = RedisServer::start();
    let holder = lease(&server, "wake");
    let h = holder.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let waiter = lease(&server, "wake");
    let barrier = Arc::new(Barrier::new(2));
    let b2 = barrier.clone();
    let t = std::thread::spawn(move || {
        b2.wait();
        let start = Instant::now();
        let got = waiter.acquire(SEC * 30, SEC * 20).unwrap();
        (got.is_some(), Instant::now(), start)
    });
    barrier.wait();
    // Let the waiter reach BLPOP: the waiter marker appears when it has been told "busy".
    let mut raw = server.conn();
    await_until(SEC * 5, "the waiter to register", || {
        exists(&mut raw, "lock:{wake}:waiters")
    });
    let released_at = Instant::now();
    assert!(holder.release(&h, false).unwrap());
    let (got, acquired_at, _) = t.join().unwrap();
    assert!(got);
    let gap = acquired_at.saturating_duration_since(released_at);
    assert!(
        gap < Duration::from_millis(500),
        "handoff took {gap:?}; the lease had 30 s left"
    );
}

#[test]
fn a_crashed_holder_blocks_no_longer_than_its_lease() {
    let server = RedisServer::start();
    let crashed = lease(&server, "crash");
    let _never_released = crashed
        .acquire(Duration::from_millis(300), Duration::ZERO)
        .unwrap()
        .unwrap();
    let start = Instant::now();
    let got = lease(&server, "crash").acquire(SEC, SEC * 10).unwrap();
    let took = start.elapsed();
    assert!(got.is_some());
    assert!(
        took >= Duration::from_millis(250),
        "took {took:?}: acquired before the lease ended"
    );
    assert!(
        took < Duration::from_millis(600),
        "took {took:?}: waited well past the lease"
    );
}

#[test]
fn waiting_is_bounded_by_the_deadline() {
    let server = RedisServer::start();
    let l = lease(&server, "deadline");
    let _h = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let start = Instant::now();
    assert!(lease(&server, "deadline")
        .acquire(SEC, Duration::from_millis(200))
        .unwrap()
        .is_none());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(200),
        "gave up early: {took:?}"
    );
    assert!(
        took < Duration::from_millis(400),
        "overran the wait: {took:?}"
    );
}

#[test]
fn threads_contending_never_overlap() {
    let server = RedisServer::start();
    let counter = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut threads = Vec::new();
    for _ in 0..6 {
        let l = lease(&server, "threads");
        let counter = counter.clone();
        threads.push(std::thread::spawn(move || {
            let mut fences = Vec::new();
            for _ in 0..50 {
                let h = l
                    .acquire(SEC * 5, SEC * 20)
                    .unwrap()
                    .expect("acquired within 20 s");
                // A non-atomic read-modify-write: lost updates would show overlap.
                let v = counter.load(std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(100));
                counter.store(v + 1, std::sync::atomic::Ordering::SeqCst);
                fences.push(h.fence);
                assert!(l.release(&h, false).unwrap());
            }
            fences
        }));
    }
    let mut all: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 300);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 300, "fencing tokens must be unique");
}

#[test]
fn script_flush_falls_back_to_eval() {
    let server = RedisServer::start();
    let l = lease(&server, "flush");
    let h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    let mut raw = server.conn();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut raw).unwrap();
    assert!(l.release(&h, false).unwrap());
}

#[test]
fn a_broken_pooled_connection_is_replaced_and_the_outcome_checked() {
    let server = RedisServer::start();
    let l = lease(&server, "broken");
    let h = l.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    // Cut every client connection, our pooled one included.
    server.kill_clients();
    assert!(
        l.release(&h, false).unwrap(),
        "the release must go through on a fresh connection"
    );
    let h2 = l.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    server.kill_clients();
    assert!(l.inspect(&h2.token).unwrap().is_some());
}

#[test]
fn redis_down_is_an_error_not_contention() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = Endpoint::parse(
        &format!("redis://:hunter2@127.0.0.1:{port}?timeout=0.5"),
        Timeouts::default(),
    )
    .unwrap();
    let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"down"));
    let start = Instant::now();
    let err = l.acquire(SEC, SEC * 5).unwrap_err();
    assert!(start.elapsed() < SEC * 2, "took {:?}", start.elapsed());
    match err {
        Error::Connection(msg) => {
            assert!(msg.contains(&port.to_string()), "{msg}");
            assert!(!msg.contains("hunter2"), "{msg}");
        }
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[test]
fn a_foreign_value_in_the_lock_key_is_an_error() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    let _: i64 = redis::cmd("RPUSH")
        .arg("lock:{typed}")
        .arg("x")
        .query(&mut raw)
        .unwrap();
    let err = lease(&server, "typed")
        .try_acquire(SEC, Duration::ZERO)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Connection(m) if m.contains("WRONGTYPE")),
        "{err:?}"
    );
    // A lock key without expiry (set by hand) is contention with no end in sight.
    let _: () = redis::cmd("SET")
        .arg("lock:{plain}")
        .arg("someone")
        .query(&mut raw)
        .unwrap();
    assert!(matches!(
        lease(&server, "plain")
            .try_acquire(SEC, Duration::ZERO)
            .unwrap(),
        Attempt::Busy(None)
    ));
}

#[test]
fn a_timed_out_acquire_is_reported_unresolved_then_resolved() {
    let server = RedisServer::start();
    let ep = Endpoint::parse(
        &format!("{}?read_timeout=0.2", server.dsn()),
        Timeouts::default(),
    )
    .unwrap();
    let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"stopped"));
    // Warm the pooled connection so the stop hits a command, not the connect.
    assert!(l
        .inspect(&redis_lease::core::lease::Token::generate())
        .unwrap()
        .is_none());
    server.signal("STOP");
    let start = Instant::now();
    let err = l.acquire(SEC * 30, Duration::ZERO).unwrap_err();
    let took = start.elapsed();
    server.signal("CONT");
    // Bounded by one read timeout: a stopped Redis is not asked again at once.
    assert!(took < Duration::from_millis(600), "took {took:?}");
    let Error::Unresolved { token, message } = err else {
        panic!("expected an unresolved outcome, got {err:?}");
    };
    assert!(message.contains("unknown"), "{message}");
    // The script sat in Redis's socket buffer when it stopped, and runs on resume,
    // before or after the question below (Redis serves the two connections in
    // either order). Either way the answer must stay true once all has run.
    let found = l.resolve(&token, SEC * 30).unwrap();
    let mut raw = server.conn();
    await_until(
        SEC * 5,
        "Redis to process and close the abandoned connection",
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut raw).unwrap();
            list.lines().count() <= 2 // this raw connection and the pool's
        },
    );
    let value: Option<String> = redis::cmd("GET")
        .arg("lock:{stopped}")
        .query(&mut raw)
        .unwrap();
    let held_by_token = value.is_some_and(|v| v.starts_with(token.as_str()));
    assert_eq!(
        found.is_some(),
        held_by_token,
        "resolve said {found:?}, Redis has the lock: {held_by_token}"
    );
    l.abandon(&token, SEC * 30).unwrap();
    assert!(!exists(&mut raw, "lock:{stopped}"));
}

#[test]
fn a_voided_token_takes_nothing_when_its_attempt_arrives_late() {
    let server = RedisServer::start();
    let l = lease(&server, "late");
    let token = redis_lease::core::lease::Token::generate();
    // We gave up on an attempt: resolving finds nothing and voids the token.
    assert!(l.resolve(&token, SEC * 30).unwrap().is_none());
    // Now the lost attempt reaches Redis.
    let mut raw = server.conn();
    let reply: (i64, i64) = redis::Script::new(include_str!("../src/core/scripts/acquire.lua"))
        .key("lock:{late}")
        .key("lock:{late}:fence")
        .key("lock:{late}:waiters")
        .key(l.keys.void(&token))
        .arg(token.as_str())
        .arg(30_000)
        .arg(0)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(reply.0, 0, "a voided attempt must not take the lock");
    assert!(!exists(&mut raw, "lock:{late}"));
    // Everyone else is unaffected.
    assert!(l.acquire(SEC, Duration::ZERO).unwrap().is_some());
}
