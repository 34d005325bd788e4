//! The lease engine against a real redis-server.

mod support;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use redis::ConnectionLike;

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::scripts::{self, Functions, Scripted};
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
    let value = |raw: &mut redis::Connection| -> String {
        redis::cmd("GET").arg("lock:{basic}").query(raw).unwrap()
    };
    // Uncontended: the fencing token is assigned on the holder's first request.
    assert_eq!(hold.fence, 0);
    assert_eq!(value(&mut raw), format!("{}:", hold.token.as_str()));
    let mut hold = hold;
    let fence = l.fence(&mut hold).unwrap().expect("ours");
    assert_eq!(value(&mut raw), format!("{}:{fence}", hold.token.as_str()));
    assert_eq!(l.fence(&mut hold).unwrap(), Some(fence), "assigned once");
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

    let mut next = other.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(other.fence(&mut next).unwrap().unwrap() > hold.fence);
    assert_ne!(next.token, hold.token);
}

#[test]
fn fencing_tokens_rise_even_when_the_counter_is_lost() {
    let server = RedisServer::start();
    let l = lease(&server, "fence");
    let mut last = 0;
    for _ in 0..50 {
        let mut h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
        l.fence(&mut h).unwrap();
        assert!(h.fence > last, "{} after {last}", h.fence);
        last = h.fence;
        assert!(l.release(&h, false).unwrap());
    }
    // A Redis restart without persistence loses the counter; tokens still rise.
    let mut raw = server.conn();
    let _: () = redis::cmd("FLUSHALL").query(&mut raw).unwrap();
    let mut h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    l.fence(&mut h).unwrap();
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
        .acquire(Duration::from_millis(300), Duration::ZERO)
        .unwrap()
        .unwrap();
    let mut raw = server.conn();
    await_until(SEC * 5, "the lease to expire", || {
        !exists(&mut raw, "lock:{expiry}")
    });
    let mut hb = b
        .acquire(SEC * 10, Duration::ZERO)
        .unwrap()
        .expect("free after expiry");
    b.fence(&mut hb).unwrap();
    assert!(!a.release(&ha, false).unwrap());
    assert!(!a.refresh(&mut ha, SEC * 10).unwrap());
    assert!(a.inspect(&ha.token).unwrap().is_none());
    let owned = b.inspect(&hb.token).unwrap().expect("b still holds");
    assert_eq!(owned.fence, hb.fence);
    assert!(owned.left.unwrap() > SEC * 9);
}

#[test]
fn refresh_extends_only_our_lease() {
    let server = RedisServer::start();
    let l = lease(&server, "refresh");
    let mut h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(l.refresh(&mut h, SEC * 60).unwrap());
    let owned = l.inspect(&h.token).unwrap().unwrap();
    assert!(owned.left.unwrap() > SEC * 59);
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

/// An uncontended release is GET and DEL: a lock whose fence is still
/// unassigned was taken with nobody queued, and a waiter that joins gives it a
/// fence (acquire.lua), so its release hands the lock on, before it answers.
#[test]
fn a_waiter_behind_an_unfenced_lock_gives_it_a_fence_and_is_handed_it() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    let value = |raw: &mut redis::Connection| -> Option<String> {
        redis::cmd("GET").arg("lock:{fenced}").query(raw).unwrap()
    };
    let holder = lease(&server, "fenced");
    // Alone: the release looks for nobody.
    let h = holder.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    assert_eq!(value(&mut raw), Some(format!("{}:", h.token.as_str())));
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut raw)
        .unwrap();
    assert!(holder.release(&h, false).unwrap());
    assert_eq!(
        (
            calls(&mut raw, "get"),
            calls(&mut raw, "del"),
            calls(&mut raw, "exists")
        ),
        (1, 1, 0),
        "an unfenced lock's release reads it and deletes it, nothing more"
    );
    // A waiter joins: the lock gets a fence, above any earlier one.
    let mut h = holder.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let waiter = lease(&server, "fenced");
    // A ttl of its own, which the lock takes when it is handed on.
    let t = std::thread::spawn(move || waiter.acquire(SEC * 7, SEC * 20).unwrap());
    await_until(SEC * 5, "the waiter to queue", || {
        exists(&mut raw, "lock:{fenced}:waiters")
    });
    let fenced = value(&mut raw).unwrap();
    let (token, fence) = fenced.split_once(':').unwrap();
    assert_eq!(token, h.token.as_str());
    assert!(
        fence.parse::<i64>().unwrap() > 0,
        "fence assigned at the join: {fenced}"
    );
    assert_eq!(
        holder.fence(&mut h).unwrap().map(|f| f.to_string()),
        Some(fence.to_string()),
        "the holder's fencing token is the one the join assigned"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut raw)
        .unwrap();
    assert!(holder.release(&h, false).unwrap());
    let (time, scripts) = (calls(&mut raw, "time"), calls(&mut raw, "fcall"));
    assert!(scripts >= 1, "the release ran as a function");
    // The waiter re-asks at most every second: one that lands in this
    // millisecond's window runs a script of its own, and is not judged here.
    if scripts == 1 {
        assert_eq!(
            time, 1,
            "a release that hands the lock on reads the clock once (the fence's µs too)"
        );
    }
    let pttl: i64 = redis::cmd("PTTL")
        .arg("lock:{fenced}")
        .query(&mut raw)
        .unwrap();
    assert!(
        pttl > 6_000 && pttl <= 7_000,
        "the handed lock lasts the waiter's ttl: {pttl}"
    );
    // Handed on by the release itself: the lock is the waiter's already.
    let next = value(&mut raw).expect("the release handed the lock on");
    assert!(!next.starts_with(h.token.as_str()), "{next}");
    let got = t.join().unwrap().expect("the waiter holds it");
    assert!(next.starts_with(got.token.as_str()));
    assert!(got.fence > fence.parse::<i64>().unwrap());
}

/// The uncontended acquire is answered with a bare 1 (the cheapest reply for
/// Redis to build); every other answer keeps its `{status, detail}` pair.
#[test]
fn a_lock_taken_on_the_fast_path_is_answered_with_a_bare_number() {
    use redis::Value;
    use redis_lease::core::scripts::ACQUIRE;
    use redis_lease::core::token::Token;
    let server = RedisServer::start();
    let mut raw = server.conn();
    let keys = LeaseKeys::for_lock(b"lock:", b"bare");
    let attempt = |raw: &mut redis::Connection, token: &Token| -> Value {
        ACQUIRE
            .key(keys.lock())
            .key(keys.fence())
            .key(keys.waiters())
            .key(keys.terms())
            .key(keys.void(token))
            .key(keys.holders())
            // A lock's claim: no weights key, no limit or weight (permits only).
            .arg(token.as_str())
            .arg(30_000)
            .arg(0)
            .arg("w")
            .invoke(raw)
            .unwrap()
    };
    assert_eq!(attempt(&mut raw, &Token::generate()), Value::Int(1));
    match attempt(&mut raw, &Token::generate()) {
        Value::Array(pair) => assert_eq!(pair.first(), Some(&Value::Int(0)), "{pair:?}"),
        other => panic!("a busy lock's answer is a pair: {other:?}"),
    }
    // And the engine reads the bare 1 as taken, with no fence yet.
    let l = lease(&server, "bare2");
    let h = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    assert_eq!(h.fence, 0);
    assert!(l.release(&h, false).unwrap());
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
                let mut h = l
                    .acquire(SEC * 5, SEC * 20)
                    .unwrap()
                    .expect("acquired within 20 s");
                l.fence(&mut h).unwrap();
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

/// The calls of `name` in INFO commandstats.
fn calls(raw: &mut redis::Connection, name: &str) -> u64 {
    support::info_count(raw, &format!("cmdstat_{name}:calls="))
}

#[test]
fn a_function_that_failed_after_it_ran_is_never_sent_again() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    // The library loaded, so that the next acquire is one FCALL.
    let l = lease(&server, "warm");
    let h = l.acquire(SEC, Duration::ZERO).unwrap().unwrap();
    assert!(l.release(&h, false).unwrap());
    // The void marker's EXISTS passes, then the queue's key is of the wrong type
    // only for the slow path: the function fails part-way, after its reads.
    let _: () = redis::cmd("SET")
        .arg("lock:{ran}")
        .arg("someone:")
        .arg("PX")
        .arg(10_000)
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("lock:{ran}:waiters")
        .arg("not a sorted set")
        .query(&mut raw)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut raw)
        .unwrap();
    let err = lease(&server, "ran")
        .acquire(SEC, Duration::from_millis(500))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Reply { message: m, .. } if m.contains("WRONGTYPE")),
        "{err:?}"
    );
    assert_eq!(
        (
            calls(&mut raw, "fcall"),
            calls(&mut raw, "evalsha"),
            calls(&mut raw, "eval")
        ),
        (1, 0, 0),
        "one FCALL, not run again as a script"
    );
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
        .acquire(SEC, Duration::ZERO)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Reply { message: m, .. } if m.contains("WRONGTYPE")),
        "{err:?}"
    );
    // A lock key without expiry (set by hand) is contention with no end in sight:
    // a waiter sleeps until its own deadline, and gets nothing.
    let _: () = redis::cmd("SET")
        .arg("lock:{plain}")
        .arg("someone")
        .query(&mut raw)
        .unwrap();
    let start = Instant::now();
    assert!(lease(&server, "plain")
        .acquire(SEC, Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert!(start.elapsed() >= Duration::from_millis(200));
    let value: String = redis::cmd("GET")
        .arg("lock:{plain}")
        .query(&mut raw)
        .unwrap();
    assert_eq!(value, "someone", "never overwritten");
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
    let reply: (i64, i64) = redis_lease::core::scripts::ACQUIRE
        .key("lock:{late}")
        .key("lock:{late}:fence")
        .key("lock:{late}:waiters")
        .key("lock:{late}:terms")
        .key(l.keys.void(&token))
        .arg(token.as_str())
        .arg(30_000)
        .arg(5_000)
        .invoke(&mut raw)
        .unwrap();
    assert_eq!(reply, (0, -2), "a voided attempt must not take the lock");
    assert!(!exists(&mut raw, "lock:{late}"));
    assert!(!exists(&mut raw, "lock:{late}:waiters"), "nor queue for it");
    // Everyone else is unaffected.
    assert!(l.acquire(SEC, Duration::ZERO).unwrap().is_some());
}

/// Every key in Redis has an expiry (session data too: the gc lifetime).
fn assert_every_key_expires(server: &RedisServer, when: &str) {
    let mut raw = server.conn();
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    for key in keys {
        let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut raw).unwrap();
        assert!(
            pttl > 0 || pttl == -2,
            "{when}: {} has no expiry",
            String::from_utf8_lossy(&key)
        );
    }
}

#[test]
fn no_key_is_left_without_an_expiry() {
    use redis_lease::core::session::{SessionConfig, SessionStore};
    let server = RedisServer::start();
    let l = lease(&server, "expiring");
    let h = l.acquire(SEC * 5, Duration::ZERO).unwrap().unwrap();
    assert_every_key_expires(&server, "held");
    // A waiter that gives up, one that gets the lock handed over, a voided token.
    assert!(lease(&server, "expiring")
        .acquire(SEC, Duration::from_millis(50))
        .unwrap()
        .is_none());
    let waiter = {
        let l = lease(&server, "expiring");
        std::thread::spawn(move || l.acquire(SEC * 5, SEC * 5).unwrap())
    };
    let mut raw = server.conn();
    await_until(SEC * 5, "the waiter to queue", || {
        exists(&mut raw, "lock:{expiring}:waiters")
    });
    assert_every_key_expires(&server, "a waiter queued");
    assert!(l.release(&h, false).unwrap());
    let handed = waiter.join().unwrap().expect("handed over");
    assert_every_key_expires(&server, "handed over");
    assert!(l
        .resolve(&redis_lease::core::lease::Token::generate(), SEC)
        .unwrap()
        .is_none());
    assert!(l.release(&handed, false).unwrap());
    assert_every_key_expires(&server, "released");
    assert!(
        exists(&mut raw, "lock:{expiring}:fence"),
        "the fencing counter outlives the lease (for a while)"
    );

    // Sessions: a locked request, a waiting one, a destroy.
    let ep = Arc::new(Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap());
    let store = Arc::new(SessionStore::new(ep, SessionConfig::default()));
    let (mut first, _) = store.open("expiring1").unwrap();
    let second = {
        let store = store.clone();
        std::thread::spawn(move || store.open("expiring1").map(|(s, _)| s))
    };
    await_until(SEC * 5, "the second request to queue", || {
        exists(&mut raw, "{PHPREDIS_SESSION:expiring1}:lock:waiters")
    });
    assert_every_key_expires(&server, "a session request waiting");
    store.write(&mut first, b"a|i:1;", SEC * 60).unwrap();
    let mut second = second.join().unwrap().unwrap();
    store.destroy(&mut second, None).unwrap();
    store.delete("expiring2", None).unwrap();
    assert_every_key_expires(&server, "sessions written and destroyed");
}

#[test]
fn release_and_session_unlock_under_oom_finish_or_change_nothing() {
    use redis_lease::core::session::{Saved, SessionConfig, SessionStore};
    let server = RedisServer::start();
    let mut raw = server.conn();
    let l = lease(&server, "oom");
    let h = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let waiter = {
        let l = lease(&server, "oom");
        std::thread::spawn(move || l.acquire(SEC * 30, SEC * 10).unwrap())
    };
    await_until(SEC * 5, "the waiter to queue", || {
        exists(&mut raw, "lock:{oom}:waiters")
    });
    let ep = Arc::new(Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap());
    let store = Arc::new(SessionStore::new(ep, SessionConfig::default()));
    let _: () = redis::cmd("SET")
        .arg("PHPREDIS_SESSION:oom")
        .arg("old")
        .query(&mut raw)
        .unwrap();
    let (mut session, _) = store.open("oom").unwrap();
    let next = {
        let store = store.clone();
        std::thread::spawn(move || store.open("oom").map(|(_, data)| data))
    };
    await_until(SEC * 5, "the second request to queue", || {
        exists(&mut raw, "{PHPREDIS_SESSION:oom}:lock:waiters")
    });
    // Redis out of memory: writes that may grow it are refused.
    let _: () = redis::cmd("SET")
        .arg("ballast")
        .arg(vec![b'x'; 4 << 20])
        .query(&mut raw)
        .unwrap();
    for (k, v) in [("maxmemory-policy", "noeviction"), ("maxmemory", "1mb")] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query(&mut raw)
            .unwrap();
    }
    let refused = lease(&server, "oom-new").acquire(SEC, Duration::ZERO);
    assert!(
        matches!(&refused, Err(Error::Reply { message: m, .. }) if m.contains("OOM")),
        "{refused:?}"
    );
    assert!(
        !exists(&mut raw, "lock:{oom-new}"),
        "a refused acquire wrote nothing"
    );
    assert!(!exists(&mut raw, "lock:{oom-new}:fence"));

    // A release frees memory: it runs to the end, handing the lock over.
    assert!(l.release(&h, false).unwrap());
    let handed = waiter.join().unwrap().expect("the waiter got the lock");
    // A session write may grow memory: refused as a whole, the lock still ours.
    let err = store.write(&mut session, b"new", SEC * 60).unwrap_err();
    assert!(
        matches!(&err, Error::Reply { message: m, .. } if m.contains("OOM")),
        "{err:?}"
    );
    let data: String = redis::cmd("GET")
        .arg("PHPREDIS_SESSION:oom")
        .query(&mut raw)
        .unwrap();
    assert_eq!(data, "old", "nothing half-written");
    // Unlocking (after the failed write) frees: the next request gets lock and data.
    assert!(store.close(&mut session).unwrap());
    assert_eq!(next.join().unwrap().unwrap().as_deref(), Some(&b"old"[..]));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("0")
        .query(&mut raw)
        .unwrap();
    assert!(l.release(&handed, false).unwrap());
    let _ = Saved::Yes;
}

/// A release Redis refused for a moment (its master demoted to a replica, then
/// promoted back) is settled by the process's next call once the server takes
/// writes again: the lock is free for the next taker at once, not held for
/// nobody until its lease runs out. Before, the refusal met while settling
/// dropped the leftover for good.
#[test]
fn a_release_refused_for_now_is_settled_once_the_server_takes_writes() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    let mut replica_of = |host: &str, port: &str| {
        let _: () = redis::cmd("REPLICAOF")
            .arg(host)
            .arg(port)
            .query(&mut raw)
            .unwrap();
    };
    let l = lease(&server, "passing");
    let h = l.acquire(SEC * 60, Duration::ZERO).unwrap().unwrap();
    // A replica of a master that never answers its handshake (a port held by
    // this test, not one another test's server may take): it answers, and
    // refuses writes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    replica_of(
        "127.0.0.1",
        &silent.local_addr().unwrap().port().to_string(),
    );
    l.release_or_defer(&h, false, false);
    // The next call meets the refusal while settling, and then its own.
    let err = lease(&server, "passing-other")
        .acquire(SEC, Duration::ZERO)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Reply { message, passing: true } if message.contains("READONLY")),
        "{err:?}"
    );
    replica_of("NO", "ONE");
    let mut raw = server.conn();
    assert!(exists(&mut raw, "lock:{passing}"), "refused: still held");
    let next = lease(&server, "passing")
        .acquire(SEC * 10, Duration::ZERO)
        .unwrap();
    assert!(next.is_some(), "the release left over is settled first");
}

#[test]
fn waiters_get_the_lock_in_arrival_order_and_a_releaser_cannot_barge() {
    let server = RedisServer::start();
    let holder = lease(&server, "fifo");
    let h = holder.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut raw = server.conn();
    let mut threads = Vec::new();
    for id in 0..6 {
        let l = lease(&server, "fifo");
        let order = order.clone();
        let mut own = server.conn();
        threads.push(std::thread::spawn(move || {
            for _ in 0..3 {
                let h = l
                    .acquire(SEC * 30, SEC * 30)
                    .unwrap()
                    .expect("its turn came");
                let holds = {
                    let mut order = order.lock().unwrap();
                    order.push(id);
                    order.len()
                };
                // Everyone else who still wants the lock asks again at once on release;
                // release only once they all have (a preempted thread would
                // otherwise rightly come later).
                let others = 5.min(18 - holds) as i64;
                await_until(SEC * 5, "the others to queue", || {
                    redis::cmd("ZCARD")
                        .arg("lock:{fifo}:waiters")
                        .query::<i64>(&mut own)
                        .unwrap()
                        == others
                });
                assert!(l.release(&h, false).unwrap());
            }
        }));
        // The next one comes only once this one has queued.
        await_until(SEC * 5, "the waiter to queue", || {
            redis::cmd("ZCARD")
                .arg("lock:{fifo}:waiters")
                .query::<i64>(&mut raw)
                .unwrap()
                == id + 1
        });
    }
    assert!(holder.release(&h, false).unwrap());
    for t in threads {
        t.join().unwrap();
    }
    let expected: Vec<i64> = (0..3).flat_map(|_| 0..6).collect();
    assert_eq!(*order.lock().unwrap(), expected);
}

#[test]
fn fences_assigned_on_request_or_at_handoff_rise_in_the_order_of_holds() {
    let server = RedisServer::start();
    let a = lease(&server, "lazy");
    let mut ha = a.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    assert_eq!(ha.fence, 0, "uncontended: not assigned yet");
    let fa = a.fence(&mut ha).unwrap().unwrap();
    // B waits: the release hands it the lock with a fence assigned at once.
    let waiter = {
        let b = lease(&server, "lazy");
        std::thread::spawn(move || b.acquire(SEC * 10, SEC * 10).unwrap().unwrap())
    };
    let mut raw = server.conn();
    await_until(SEC * 5, "B to queue", || {
        exists(&mut raw, "lock:{lazy}:waiters")
    });
    assert!(a.release(&ha, false).unwrap());
    let hb = waiter.join().unwrap();
    assert!(hb.fence > fa, "handed: {} after {fa}", hb.fence);
    assert!(a.release(&hb, false).unwrap());
    // C never asks; D asks after C: still above every fence before.
    let hc = a.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    assert!(a.release(&hc, false).unwrap());
    let mut hd = a.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    assert!(a.fence(&mut hd).unwrap().unwrap() > hb.fence);
    assert!(a.release(&hd, false).unwrap());
}

#[test]
fn a_lost_lease_gets_no_fence() {
    let server = RedisServer::start();
    let a = lease(&server, "lostfence");
    let mut ha = a
        .acquire(Duration::from_millis(300), Duration::ZERO)
        .unwrap()
        .unwrap();
    let mut raw = server.conn();
    await_until(SEC * 5, "the lease to expire", || {
        !exists(&mut raw, "lock:{lostfence}")
    });
    let mut hb = a.acquire(SEC * 10, Duration::ZERO).unwrap().unwrap();
    assert_eq!(
        a.fence(&mut ha).unwrap(),
        None,
        "a late holder cannot get a token"
    );
    let fb = a.fence(&mut hb).unwrap().unwrap();
    assert!(fb > 0);
    assert!(a.release(&hb, false).unwrap());
}

#[test]
fn every_script_compiles_with_the_helpers_it_uses() {
    // Each script carries only the parts of lib.lua it uses (scripts.rs
    // `compose`): one left out would fail only when its path runs, as a call
    // of an undefined global. Redis compiles a script at SCRIPT LOAD, and
    // refuses a global's use at run time only, so the check here is the
    // source's: every name defined in lib.lua and used in a script is defined
    // in that script.
    use redis_lease::core::scripts::*;
    let lib = include_str!("../src/core/scripts/lib.lua");
    let defined: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            l.strip_prefix("local function ")
                .or_else(|| l.strip_prefix("local "))
        })
        .map(|rest| {
            rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap()
        })
        .collect();
    assert!(defined.len() > 20, "{defined:?}");
    let server = RedisServer::start();
    let mut raw = server.conn();
    let all = [
        &ACQUIRE,
        &RELEASE,
        &FORCE_RELEASE,
        &REFRESH,
        &INSPECT,
        &HELD,
        &FENCE,
        &RESOLVE,
        &SESSION_OPEN,
        &SESSION_SAVE,
        &SESSION_REVOKE,
        &SESSION_PUT,
    ];
    for script in all {
        let source = &script.source;
        let code: String = source
            .lines()
            .map(|l| l.split("--").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        for name in &defined {
            let used = code
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w == *name);
            let defines = source.contains(&format!("local function {name}("))
                || source.contains(&format!("local {name} ="));
            assert!(
                !used || defines,
                "a script uses {name} without defining it:\n{source}"
            );
        }
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source.as_str())
            .query(&mut raw)
            .unwrap();
        assert_eq!(sha, script.get_hash());
    }
    // Smaller than lib.lua and the script together, for the scripts that need
    // little of it.
    assert!(
        RELEASE.source.len() < lib.len(),
        "release carries all of lib.lua"
    );
}

/// A link that records the command names it sends and, after each of its first
/// `flushes` FUNCTION LOADs, empties both caches from another connection (as a
/// failover to an empty master, or an operator's FLUSH, could between our load
/// and our next call).
struct Flushing {
    conn: redis::Connection,
    side: redis::Connection,
    functions: Functions,
    flushes: usize,
    sent: Vec<String>,
}

impl ConnectionLike for Flushing {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        // "*N\r\n$len\r\nNAME\r\n...": the third line.
        let name = String::from_utf8_lossy(cmd.split(|&b| b == b'\n').nth(2).unwrap_or_default())
            .trim_end()
            .to_ascii_uppercase();
        let reply = self.conn.req_packed_command(cmd);
        if name == "FUNCTION" && self.flushes > 0 {
            self.flushes -= 1;
            redis::cmd("FUNCTION")
                .arg("FLUSH")
                .exec(&mut self.side)
                .unwrap();
            redis::cmd("SCRIPT")
                .arg("FLUSH")
                .exec(&mut self.side)
                .unwrap();
        }
        self.sent.push(name);
        reply
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        self.conn.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.conn.check_connection()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

impl Scripted for Flushing {
    fn functions(&mut self) -> &mut Functions {
        &mut self.functions
    }
}

#[test]
fn a_function_flushed_after_each_load_runs_once_as_a_script() {
    let server = RedisServer::start();
    let keys = LeaseKeys::for_lock(b"lock:", b"flushed");
    let mut link = Flushing {
        conn: server.conn(),
        side: server.conn(),
        functions: Functions::default(),
        flushes: 0,
        sent: Vec::new(),
    };
    // A release of a held lock: 1 when it deleted it, 0 when nothing was ours
    // (what a second run of the same release would answer).
    let release = |link: &mut Flushing, flushes: usize| -> (i64, Vec<String>) {
        redis::cmd("SET")
            .arg(keys.lock())
            .arg("tok:")
            .exec(&mut link.side)
            .unwrap();
        link.flushes = flushes;
        link.sent.clear();
        let mut inv = scripts::RELEASE.key(keys.lock());
        inv.key(keys.fence())
            .key(keys.waiters())
            .key(keys.terms())
            .key(keys.holders())
            .key(keys.weights())
            .arg("tok");
        let n: i64 = inv.call(link).unwrap();
        let left: bool = redis::cmd("EXISTS")
            .arg(keys.lock())
            .query(&mut link.side)
            .unwrap();
        assert!(!left, "the lock was not released");
        (n, std::mem::take(&mut link.sent))
    };
    let names = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // A server without our library: loaded, then called.
    assert_eq!(
        release(&mut link, 0),
        (1, names(&["FCALL", "FUNCTION", "FCALL"]))
    );
    // Loaded: one call.
    assert_eq!(release(&mut link, 0), (1, names(&["FCALL"])));
    // Flushed before the first call and after each load: after two loads it runs
    // as a script (EVAL after NOSCRIPT), once: a function that said "not found"
    // never ran.
    redis::cmd("FUNCTION")
        .arg("FLUSH")
        .exec(&mut link.side)
        .unwrap();
    assert_eq!(
        release(&mut link, 2),
        (
            1,
            names(&["FCALL", "FUNCTION", "FCALL", "FUNCTION", "EVALSHA", "EVAL"])
        )
    );
    // Still a function link afterwards: a flush is no refusal.
    assert_eq!(
        release(&mut link, 0),
        (1, names(&["FCALL", "FUNCTION", "FCALL"]))
    );
}

/// A grant its waiter never read (the waiter stalled past the lease it was
/// handed, which ran out) is cleared when the waiter's next attempt queues it
/// again: the BLPOP that follows must not take it for a grant beside the new
/// holder. For a lock alone ('w') and a shared hold ('r'); the model checks
/// both, and permits (fix (p)).
#[test]
fn a_grant_left_unread_is_cleared_when_its_waiter_queues_again() {
    use redis::Value;
    use redis_lease::core::scripts::ACQUIRE;
    use redis_lease::core::token::Token;
    let server = RedisServer::start();
    let mut raw = server.conn();
    for mode in ["w", "r"] {
        let name = format!("unread-{mode}");
        let l = lease(&server, &name);
        let keys = l.keys.clone();
        let waiter = Token::generate();
        // The waiter's attempt, as the engine sends it (a 200 ms lease, 5 s wait).
        let attempt = |raw: &mut redis::Connection| -> i64 {
            let reply: Value = ACQUIRE
                .key(keys.lock())
                .key(keys.fence())
                .key(keys.waiters())
                .key(keys.terms())
                .key(keys.void(&waiter))
                .key(keys.holders())
                .arg(waiter.as_str())
                .arg(200)
                .arg(5_000)
                .arg(mode)
                .invoke(raw)
                .unwrap();
            match reply {
                Value::Array(pair) => redis::from_redis_value(pair[0].clone()).unwrap(),
                other => panic!("{mode}: a pair: {other:?}"),
            }
        };
        let unread = |raw: &mut redis::Connection| -> i64 {
            redis::cmd("LLEN")
                .arg(keys.wake(&waiter))
                .query(raw)
                .unwrap()
        };
        let first = l.acquire(SEC * 30, Duration::ZERO).unwrap().unwrap();
        assert_eq!(attempt(&mut raw), 0, "{mode}: busy, queued");
        assert!(l.release(&first, false).unwrap());
        assert_eq!(unread(&mut raw), 1, "{mode}: handed to the waiter");
        // The waiter stalls: its 200 ms lease runs out unread (a shared hold
        // lingers in the set until a script drops it: the writer below does).
        let until = support::server_ms(&mut raw) + 250;
        await_until(SEC * 5, "the waiter's lease to run out", || {
            support::server_ms(&mut raw) > until
        });
        let next = l.acquire(SEC * 30, Duration::ZERO).unwrap();
        let next = next.unwrap_or_else(|| panic!("{mode}: free for another"));
        // Its stalled attempt arrives: the lock is another's, it queues again.
        assert_eq!(attempt(&mut raw), 0, "{mode}: busy again");
        assert_eq!(unread(&mut raw), 0, "{mode}: the old grant is gone");
        assert!(l.release(&next, false).unwrap());
    }
}
