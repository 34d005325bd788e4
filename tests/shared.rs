//! Read/write locks and semaphores: shared holds with the lock's guarantees
//! (FIFO queue with handoff, fencing for writers, renewal, owner checks).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use support::{await_until, server_ms, RedisServer};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn lease(server: &RedisServer, name: &str) -> Lease {
    let ep = Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

fn lock(server: &RedisServer, name: &str) -> Lock {
    Lock::new(lease(server, name), SEC * 30)
}

fn semaphore(server: &RedisServer, name: &str, limit: u32, ttl: Duration) -> Lock {
    let ep = Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap();
    let lease = Lease::new(
        Arc::new(ep),
        LeaseKeys::for_semaphore(b"lock:", name.as_bytes()),
    );
    Lock::semaphore(lease, limit, ttl)
}

fn waiters(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("ZCARD")
        .arg(format!("{key}:waiters"))
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn readers_share_a_writer_waits_and_later_readers_queue_behind_it() {
    let server = RedisServer::start();
    let (mut r1, mut r2) = (lock(&server, "rw"), lock(&server, "rw"));
    assert!(r1.acquire_read(Duration::ZERO).unwrap());
    assert!(r2.acquire_read(Duration::ZERO).unwrap(), "readers share");
    assert!(r1.shared() && r2.shared());
    assert_eq!(
        r1.fence().unwrap(),
        None,
        "a read hold has no fencing token"
    );
    assert!(
        !lock(&server, "rw").acquire(Duration::ZERO).unwrap(),
        "no writer while read"
    );
    // A writer queues; a reader that comes after it must not overtake it.
    let order = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (server_dsn, order) = (server.dsn(), order.clone());
        std::thread::spawn(move || {
            let ep = Endpoint::parse(&server_dsn, Timeouts::default()).unwrap();
            let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"rw"));
            let mut w = Lock::new(l, SEC * 30);
            assert!(w.acquire(SEC * 10).unwrap());
            order.lock().unwrap().push("writer in");
            let fence = w.fence().unwrap().expect("a writer has a fence");
            std::thread::sleep(MS * 100);
            order.lock().unwrap().push("writer out");
            assert!(w.release().unwrap());
            fence
        })
    };
    await_until(SEC * 5, "the writer to queue", || {
        waiters(&server, "lock:{rw}") == 1
    });
    let late = {
        let (server_dsn, order) = (server.dsn(), order.clone());
        std::thread::spawn(move || {
            let ep = Endpoint::parse(&server_dsn, Timeouts::default()).unwrap();
            let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"rw"));
            let mut r = Lock::new(l, SEC * 30);
            assert!(r.acquire_read(SEC * 10).unwrap());
            order.lock().unwrap().push("late reader in");
            assert!(r.release().unwrap());
        })
    };
    await_until(SEC * 5, "the late reader to queue behind it", || {
        waiters(&server, "lock:{rw}") == 2
    });
    assert!(r1.release().unwrap());
    assert!(
        order.lock().unwrap().is_empty(),
        "one reader still holds it"
    );
    assert!(r2.release().unwrap());
    let fence = writer.join().unwrap();
    late.join().unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        ["writer in", "writer out", "late reader in"],
        "first come, first served across readers and writers"
    );
    let mut w2 = lock(&server, "rw");
    assert!(w2.acquire(Duration::ZERO).unwrap());
    assert!(
        w2.fence().unwrap().unwrap() > fence,
        "writers' fences keep rising"
    );
    assert!(w2.release().unwrap());
}

#[test]
fn consecutive_queued_readers_are_woken_together() {
    let server = RedisServer::start();
    let mut w = lock(&server, "batch");
    assert!(w.acquire(Duration::ZERO).unwrap());
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let dsn = server.dsn();
            std::thread::spawn(move || {
                let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
                let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"batch"));
                let mut r = Lock::new(l, SEC * 30);
                assert!(r.acquire_read(SEC * 10).unwrap());
                let at = Instant::now();
                // Held together: each waits until all three are in.
                (r, at)
            })
        })
        .collect();
    await_until(SEC * 5, "three readers to queue", || {
        waiters(&server, "lock:{batch}") == 3
    });
    let released = Instant::now();
    assert!(w.release().unwrap());
    let mut held: Vec<(Lock, Instant)> = readers.into_iter().map(|t| t.join().unwrap()).collect();
    for (_, at) in &held {
        assert!(
            at.duration_since(released) < MS * 500,
            "woken by the release, not a nap"
        );
    }
    let in_redis: i64 = redis::cmd("ZCARD")
        .arg("lock:{batch}:holders")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(in_redis, 3, "all three hold it at once");
    for (r, _) in &mut held {
        assert!(r.release().unwrap());
    }
}

#[test]
fn an_upgrade_waits_for_the_other_readers_and_lets_nobody_in_between() {
    let server = RedisServer::start();
    let (mut a, mut b) = (lock(&server, "up"), lock(&server, "up"));
    assert!(a.acquire_read(Duration::ZERO).unwrap());
    assert!(b.acquire_read(Duration::ZERO).unwrap());
    // With another reader in, the upgrade waits (here: not at all) and a stays a reader.
    assert!(!a.acquire(Duration::ZERO).unwrap());
    assert!(a.shared(), "still a reader");
    let upgrader = std::thread::spawn(move || {
        assert!(a.acquire(SEC * 10).unwrap(), "upgraded once b left");
        assert!(!a.shared());
        let fence = a.fence().unwrap().expect("a writer's fence");
        assert!(a.release().unwrap());
        fence
    });
    await_until(SEC * 5, "the upgrade to queue", || {
        waiters(&server, "lock:{up}") == 1
    });
    // Nobody comes in between: a new reader queues behind the upgrade.
    let mut c = lock(&server, "up");
    assert!(
        !c.acquire_read(Duration::ZERO).unwrap(),
        "no reader overtakes an upgrade"
    );
    // b, also a reader, cannot upgrade meanwhile: both would wait for ever.
    assert!(
        !b.acquire(SEC * 5).unwrap(),
        "a second upgrade is refused at once"
    );
    assert!(b.shared(), "b keeps its read hold");
    assert!(b.release().unwrap());
    let fence = upgrader.join().unwrap();
    assert!(fence > 0);
    assert!(c.acquire_read(Duration::ZERO).unwrap());
    assert!(c.release().unwrap());
}

#[test]
fn a_downgrade_keeps_the_lock_and_lets_queued_readers_in() {
    let server = RedisServer::start();
    let mut w = lock(&server, "down");
    assert!(w.acquire(Duration::ZERO).unwrap());
    assert!(w.fence().unwrap().is_some());
    let reader = {
        let dsn = server.dsn();
        std::thread::spawn(move || {
            let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
            let l = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"down"));
            let mut r = Lock::new(l, SEC * 30);
            let got = r.acquire_read(SEC * 10).unwrap();
            (got, r)
        })
    };
    await_until(SEC * 5, "the reader to queue", || {
        waiters(&server, "lock:{down}") == 1
    });
    assert!(w.acquire_read(Duration::ZERO).unwrap(), "downgraded");
    assert!(w.shared());
    let (got, mut r) = reader.join().unwrap();
    assert!(got, "the queued reader got in at the downgrade");
    assert!(
        !lock(&server, "down").acquire(Duration::ZERO).unwrap(),
        "still no writer"
    );
    assert!(r.release().unwrap() && w.release().unwrap());
}

#[test]
fn read_holds_are_renewed_and_refreshed_and_released_owner_checked() {
    let server = RedisServer::start();
    let ttl = MS * 600;
    let mut r = Lock::new(lease(&server, "renewr"), ttl).with_auto_renew(true);
    assert!(r.acquire_read(Duration::ZERO).unwrap());
    std::thread::sleep(ttl * 2);
    assert!(r.hold().is_some(), "renewed past its ttl");
    assert!(r.inspect().unwrap().is_some());
    assert!(r.refresh(SEC * 30).unwrap());
    let score: f64 = redis::cmd("ZSCORE")
        .arg("lock:{renewr}:holders")
        .arg(r.token().unwrap().as_str())
        .query(&mut server.conn())
        .unwrap();
    let left = score - server_ms(&mut server.conn()) as f64;
    assert!(left > 29_000.0, "refresh set 30 s, {left} ms left");
    assert!(r.release().unwrap());
    assert!(!r.release().unwrap(), "released once");
    let mut w = lock(&server, "renewr");
    assert!(
        w.acquire(Duration::ZERO).unwrap(),
        "free after the last reader"
    );
    assert!(w.release().unwrap());
}

#[test]
fn a_semaphore_admits_its_limit_and_hands_permits_on_in_order() {
    let server = RedisServer::start();
    let mut held: Vec<Lock> = (0..3)
        .map(|_| semaphore(&server, "sem", 3, SEC * 30))
        .collect();
    for s in &mut held {
        assert!(s.acquire(Duration::ZERO).unwrap());
        assert!(s.shared() && s.fence().unwrap().is_none());
    }
    let mut fourth = semaphore(&server, "sem", 3, SEC * 30);
    assert!(!fourth.acquire(Duration::ZERO).unwrap(), "no fourth permit");
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters_threads: Vec<_> = (0..2)
        .map(|i| {
            let (dsn, order) = (server.dsn(), order.clone());
            let t = std::thread::spawn(move || {
                let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
                let l = Lease::new(Arc::new(ep), LeaseKeys::for_semaphore(b"lock:", b"sem"));
                let mut s = Lock::semaphore(l, 3, SEC * 30);
                assert!(s.acquire(SEC * 10).unwrap());
                order.lock().unwrap().push(i);
                s
            });
            // Arrival order: the second only after the first queued.
            let server_waiters = || waiters(&server, "lock:{sem}:semaphore");
            await_until(SEC * 5, "the waiter to queue", || server_waiters() == i + 1);
            t
        })
        .collect();
    assert!(held[0].release().unwrap());
    await_until(SEC * 5, "the first waiter to get the freed permit", || {
        order.lock().unwrap().len() == 1
    });
    assert_eq!(*order.lock().unwrap(), [0]);
    assert!(held[1].release().unwrap());
    let mut got: Vec<Lock> = waiters_threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert_eq!(
        *order.lock().unwrap(),
        [0, 1],
        "permits go in arrival order"
    );
    for s in got.iter_mut().chain(held[2..].iter_mut()) {
        assert!(s.release().unwrap());
    }
}

#[test]
fn a_crashed_holders_permit_frees_at_its_ttl() {
    let server = RedisServer::start();
    let ttl = MS * 300;
    let mut crashed = semaphore(&server, "crash", 1, ttl);
    assert!(crashed.acquire(Duration::ZERO).unwrap());
    // A process that dies never releases: leak the object (no destructor).
    std::mem::forget(crashed);
    let mut next = semaphore(&server, "crash", 1, SEC * 30);
    let start = Instant::now();
    assert!(next.acquire(SEC * 5).unwrap());
    let took = start.elapsed();
    assert!(
        took < ttl + MS * 1200,
        "free within about its ttl: {took:?}"
    );
    assert!(next.release().unwrap());
}

#[test]
fn a_conversion_of_a_hold_that_ran_out_is_refused_and_the_hold_is_gone() {
    let server = RedisServer::start();
    let short = MS * 150;
    // Upgrade: our read lease runs out, a writer comes and goes: there is no
    // "nobody in between" to give any more.
    let mut r = Lock::new(lease(&server, "lapsed"), short);
    assert!(r.acquire_read(Duration::ZERO).unwrap());
    std::thread::sleep(short * 2);
    let mut w = lock(&server, "lapsed");
    assert!(w.acquire(Duration::ZERO).unwrap(), "the writer gets in");
    assert!(w.release().unwrap());
    assert!(
        !r.acquire(Duration::ZERO).unwrap(),
        "no upgrade of a hold that ran out"
    );
    assert!(r.hold().is_none(), "and the read hold is gone");
    // Downgrade: our write lease runs out and another writer comes and goes.
    let mut w1 = Lock::new(lease(&server, "lapsed2"), short);
    assert!(w1.acquire(Duration::ZERO).unwrap());
    std::thread::sleep(short * 2);
    let mut w2 = lock(&server, "lapsed2");
    assert!(w2.acquire(Duration::ZERO).unwrap());
    assert!(w2.release().unwrap());
    assert!(
        !w1.acquire_read(Duration::ZERO).unwrap(),
        "no downgrade of a hold that ran out"
    );
    assert!(w1.hold().is_none());
    assert!(
        w1.acquire_read(Duration::ZERO).unwrap(),
        "a fresh read hold then"
    );
    assert!(w1.release().unwrap());
}

#[test]
fn a_shared_hold_that_ran_out_is_not_released_as_ours() {
    // Another reader's longer lease keeps the holders set alive, with our
    // expired entry still in it: release() must not count it as ours.
    let server = RedisServer::start();
    let mut short = Lock::new(lease(&server, "expired-read"), MS * 150);
    let mut long = lock(&server, "expired-read");
    assert!(short.acquire_read(Duration::ZERO).unwrap());
    assert!(long.acquire_read(Duration::ZERO).unwrap());
    std::thread::sleep(MS * 300);
    assert!(!short.release().unwrap(), "its lease had run out");
    assert!(long.release().unwrap());
    let mut s1 = semaphore(&server, "expired-permit", 2, MS * 150);
    let mut s2 = semaphore(&server, "expired-permit", 2, SEC * 30);
    assert!(s1.acquire(Duration::ZERO).unwrap() && s2.acquire(Duration::ZERO).unwrap());
    std::thread::sleep(MS * 300);
    assert!(!s1.release().unwrap(), "a permit whose lease ran out");
    assert!(s2.release().unwrap());
}

/// Mixed weights, mixed leases: while a hold of several permits lives, the
/// weights' key (its weight, and the sum under '') lives at least as long, and
/// the live permits never pass the limit. (A permit's fast path skips the
/// weights' key when it is not there: it must never skip it when it is.)
#[test]
fn the_weights_outlive_every_weighted_permit_whatever_the_mix() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    let base = "lock:{mix}:semaphore";
    let ttls = [MS * 150, MS * 400, SEC * 2, SEC * 30];
    let mut sems: Vec<Lock> = (0..8)
        .map(|i| semaphore(&server, "mix", 6, ttls[i % ttls.len()]))
        .collect();
    // Each hold's weight as we took it: not read from the key under test.
    let mut taken: HashMap<String, i64> = HashMap::new();
    // Seeded draws (which branch runs still depends on short leases lapsing).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % n
    };
    let (mut weighted, mut plain) = (0, 0);
    for step in 0..300 {
        let i = next(sems.len() as u64) as usize;
        let s = &mut sems[i];
        if s.token().is_some() && next(2) == 0 {
            s.release().unwrap();
        } else if s.token().is_none() {
            let weight = [1, 2, 2, 3][next(4) as usize];
            if s.acquire_permits(Duration::ZERO, weight).unwrap() {
                taken.insert(s.token().unwrap().as_str().to_string(), i64::from(weight));
                if weight > 1 {
                    weighted += 1;
                } else {
                    plain += 1;
                }
            }
        }
        check_weights(&mut raw, base, &taken, 6, &format!("step {step}"));
    }
    assert!(
        weighted >= 10 && plain >= 10,
        "{weighted} weighted and {plain} plain acquires"
    );
    for s in &mut sems {
        let _ = s.release();
    }
    // A hold of several permits handed to a waiter (grant's path), for longer
    // than anything else held.
    let mut short = semaphore(&server, "mix", 6, SEC * 10);
    assert!(short.acquire_permits(Duration::ZERO, 5).unwrap());
    taken.insert(short.token().unwrap().as_str().to_string(), 5);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let mut long = semaphore(&server, "mix", 6, SEC * 30);
            assert!(long.acquire_permits(SEC * 5, 2).unwrap());
            long
        });
        await_until(SEC * 5, "the waiter to queue", || {
            waiters(&server, base) == 1
        });
        assert!(short.release().unwrap());
        let long = waiter.join().unwrap();
        taken.insert(long.token().unwrap().as_str().to_string(), 2);
        check_weights(&mut raw, base, &taken, 6, "handed");
    });
}

/// The live permits of the semaphore at `base` stay within `limit`, and each
/// live hold of several permits has its weight in the weights' key, which
/// expires no earlier than the hold. `taken`: each token's weight as taken.
fn check_weights(
    raw: &mut redis::Connection,
    base: &str,
    taken: &HashMap<String, i64>,
    limit: i64,
    at: &str,
) {
    // An absolute expiry (ms), -2: no key. Redis 7.2+ sets a script's expiries
    // from the time it started: a few ms of slack.
    let expires: i64 = redis::cmd("PEXPIRETIME")
        .arg(format!("{base}:weights"))
        .query(raw)
        .unwrap();
    let holds: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(format!("{base}:holders"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(raw)
        .unwrap();
    let weights: HashMap<String, i64> = redis::cmd("HGETALL")
        .arg(format!("{base}:weights"))
        .query(raw)
        .unwrap();
    let now = server_ms(raw);
    let mut live = 0;
    for (token, end) in &holds {
        let end = *end as i64;
        if end <= now {
            continue;
        }
        let w = *taken
            .get(token)
            .unwrap_or_else(|| panic!("{at}: a hold nobody took: {token}"));
        live += w;
        if w > 1 {
            assert_eq!(
                weights.get(token),
                Some(&w),
                "{at}: the weight of a live hold"
            );
            assert!(
                expires >= end - 5,
                "{at}: a hold of {w} permits ends at {end}, the weights' key at {expires}"
            );
        }
    }
    assert!(live <= limit, "{at}: {live} permits live, limit {limit}");
}

/// Queues `token` as a waiter that asks again in time and will wait 20 s more,
/// as join_queue writes it (`mode`: the terms' tail, e.g. "p 1", "r").
fn plant_waiter(server: &RedisServer, keys: &LeaseKeys, token: &str, mode: &str) {
    let mut conn = server.conn();
    let now = server_ms(&mut conn);
    let until = now + 20_000;
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(keys.waiters())
        .arg(now * 1000)
        .arg(token)
        .cmd("HSET")
        .arg(keys.terms())
        .arg(token)
        .arg(format!("30000 {until} {until} {mode}"))
        .cmd("PEXPIRE")
        .arg(keys.waiters())
        .arg(30_000)
        .cmd("PEXPIRE")
        .arg(keys.terms())
        .arg(30_000)
        .query(&mut conn)
        .unwrap();
}

/// A newcomer whose attempt hands a shared hold to the waiter at the head of
/// the queue (the holder before it ran out) is told the lease is busy, not
/// that its token was voided: acquire.lua answered `{0, -2}` (`live` counted
/// before the grant, no lock key), and the client threw and left its token
/// queued, to be granted a permit or the lock for nobody (review, stop 58).
#[test]
fn a_newcomer_behind_a_shared_grant_is_told_busy_and_leaves_no_entry() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let ttl = MS * 300;

    // A semaphore of one permit: its holder crashed; a waiter is queued.
    let keys = LeaseKeys::for_semaphore(b"lock:", b"voidless");
    let mut crashed = semaphore(&server, "voidless", 1, ttl);
    assert!(crashed.acquire(Duration::ZERO).unwrap());
    std::mem::forget(crashed);
    plant_waiter(&server, &keys, "W", "p 1");
    let holders = String::from_utf8(keys.holders().to_vec()).unwrap();
    await_until(SEC * 5, "the crashed permit to run out", || {
        !support::exists(&mut conn, &holders)
    });
    let mut newcomer = semaphore(&server, "voidless", 1, SEC * 30);
    assert!(!newcomer.acquire(Duration::ZERO).unwrap());
    assert!(!newcomer.acquire(MS * 200).unwrap());
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(&holders)
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(members, ["W"], "the waiter was handed the permit");
    assert_eq!(waiters(&server, "lock:{voidless}:semaphore"), 0);

    // A read/write lock: its writer crashed; a reader is queued.
    let keys = LeaseKeys::for_lock(b"lock:", b"rw-voidless");
    let mut writer = Lock::new(lease(&server, "rw-voidless"), ttl);
    assert!(writer.acquire(Duration::ZERO).unwrap());
    std::mem::forget(writer);
    plant_waiter(&server, &keys, "R", "r");
    let lock_key = String::from_utf8(keys.lock().to_vec()).unwrap();
    await_until(SEC * 5, "the crashed writer's lease to run out", || {
        !support::exists(&mut conn, &lock_key)
    });
    let mut newcomer = lock(&server, "rw-voidless");
    assert!(!newcomer.acquire(MS * 200).unwrap());
    let waiting = String::from_utf8(keys.waiters().to_vec()).unwrap();
    let queued: Vec<String> = redis::cmd("ZRANGE")
        .arg(&waiting)
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert!(queued.is_empty(), "nobody's token left queued: {queued:?}");
}
