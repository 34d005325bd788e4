//! What operators see (core::inspect): holders and waiters as Redis has them,
//! found by SCAN, with no whole token shown.

mod support;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::inspect::{leases, survey, Kind, Search};
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use support::{await_until, RedisServer};

const SEC: Duration = Duration::from_secs(1);

fn endpoint(server: &RedisServer) -> Arc<Endpoint> {
    Arc::new(Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap())
}

fn lease(server: &RedisServer, name: &str) -> Lease {
    Lease::new(
        endpoint(server),
        LeaseKeys::for_lock(b"lock:", name.as_bytes()),
    )
}

/// Up to 10 leases under `lock:`, within 5 s.
fn locks_search() -> Search {
    Search {
        prefixes: vec![b"lock:".to_vec()],
        session_prefix: b"PHPREDIS_SESSION:".to_vec(),
        limit: 10,
        budget: SEC * 5,
    }
}

fn queued(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("ZCARD")
        .arg(format!("{key}:waiters"))
        .query(&mut server.conn())
        .unwrap()
}

#[test]
fn a_holder_and_its_waiters_in_queue_order() {
    let server = RedisServer::start();
    let mut holder = Lock::new(lease(&server, "busy"), SEC * 30);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let fence = holder.fence().unwrap().expect("a writer's fence");
    let token = holder.token().unwrap().as_str().to_string();
    let mut waiting = Vec::new();
    for (i, read) in [false, true].into_iter().enumerate() {
        let l = lease(&server, "busy");
        waiting.push(thread::spawn(move || {
            let mut w = Lock::new(l, SEC * 20);
            if read {
                w.acquire_read(SEC * 5).unwrap()
            } else {
                w.acquire(SEC * 5).unwrap()
            }
        }));
        await_until(SEC * 5, "the waiter queues", || {
            queued(&server, "lock:{busy}") == i as i64 + 1
        });
        thread::sleep(Duration::from_millis(5)); // arrivals apart by more than the clock's ms
    }
    let s = survey(&lease(&server, "busy"), Kind::Lock).unwrap();
    assert_eq!(s.holders.len(), 1);
    let h = &s.holders[0];
    assert_eq!(
        (h.mode, h.fence, h.token.as_str()),
        ("write", Some(fence), &token[..8])
    );
    assert!(h.left.unwrap() > SEC * 25, "{:?}", h.left);
    let modes: Vec<_> = s.waiters.iter().map(|w| w.mode).collect();
    assert_eq!(modes, ["write", "read"], "queue order");
    assert!(s.waiters[0].waited.unwrap() > s.waiters[1].waited.unwrap());
    assert!(s.waiters.iter().all(|w| w.ttl == SEC * 20 && !w.stale));
    assert!(!format!("{s:?}").contains(&token), "no whole token");

    let found = leases(&endpoint(&server), &locks_search()).unwrap();
    assert!(found.partial.is_empty(), "{:?}", found.partial);
    assert_eq!(found.leases.len(), 1);
    assert_eq!(found.leases[0].key, "lock:{busy}");
    assert_eq!(found.leases[0].waiters_total, 2);

    assert!(holder.release().unwrap());
    for w in waiting {
        assert!(w.join().unwrap(), "each waiter gets its turn");
    }
}

#[test]
fn a_semaphore_counts_weights_and_an_empty_key_is_free() {
    let server = RedisServer::start();
    let sem = || {
        Lock::semaphore(
            Lease::new(endpoint(&server), LeaseKeys::for_semaphore(b"lock:", b"s")),
            4,
            SEC * 30,
        )
    };
    let mut a = sem();
    assert!(a.acquire_permits(Duration::ZERO, 3).unwrap());
    let s = survey(
        &Lease::new(endpoint(&server), LeaseKeys::for_semaphore(b"lock:", b"s")),
        Kind::Semaphore,
    )
    .unwrap();
    assert_eq!(
        (s.permits, s.holders.len(), s.holders[0].permits),
        (3, 1, 3)
    );
    assert_eq!(s.holders[0].mode, "permits");
    let free = survey(&lease(&server, "none"), Kind::Lock).unwrap();
    assert!(!free.live() && free.holders.is_empty() && free.waiters.is_empty());
}

#[test]
fn a_key_of_another_type_is_refused() {
    let server = RedisServer::start();
    let _: () = redis::cmd("HSET")
        .arg("lock:{h}")
        .arg("a")
        .arg("b")
        .query(&mut server.conn())
        .unwrap();
    let e = survey(&lease(&server, "h"), Kind::Lock).unwrap_err();
    assert!(e.to_string().contains("is not a redis_lease lock"), "{e}");
}

/// Holds that ran out linger until a script drops them. Listed by rank, the
/// first to end first, a thousand of them filled the list: the live holder was
/// not shown, the semaphore not listed, and the count took them for live.
#[test]
fn crashed_permit_holders_past_the_list_hide_no_live_one() {
    let server = RedisServer::start();
    let keys = || LeaseKeys::for_semaphore(b"lock:", b"crashed");
    let mut live = Lock::semaphore(Lease::new(endpoint(&server), keys()), 4, SEC * 30);
    assert!(live.acquire_permits(Duration::ZERO, 2).unwrap());
    // Crashed holders, planted as acquire.lua writes them (ended long ago);
    // nothing has run since to drop them.
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(keys().holders());
    for i in 0..1001u32 {
        zadd.arg(1000 + i).arg(format!("{i:032x}"));
    }
    let _: () = zadd.query(&mut server.conn()).unwrap();
    let s = survey(&Lease::new(endpoint(&server), keys()), Kind::Semaphore).unwrap();
    assert_eq!(
        (s.holders.len(), s.permits, s.holders_total, s.expired),
        (1, 2, 1, 1001),
        "{:?}",
        (&s.holders, s.permits, s.holders_total, s.expired)
    );
    let found = leases(&endpoint(&server), &locks_search()).unwrap();
    assert_eq!((found.leases.len(), found.total), (1, 1));
    assert_eq!(found.leases[0].kind, Kind::Semaphore);
}

/// A survey Redis refuses (an ACL without the scripts) says the answer is
/// partial. Before, a refusal was taken for a key that only looks like a
/// lease: the answer was empty and said it was complete.
#[test]
fn a_refused_survey_makes_the_answer_partial() {
    let server = RedisServer::start();
    let mut holder = Lock::new(lease(&server, "seen"), SEC * 30);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("looker")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@all")
        .arg("-@scripting")
        .query(&mut server.conn())
        .unwrap();
    let looker = Arc::new(
        Endpoint::parse(
            &format!("redis://looker:pw@127.0.0.1:{}", server.port),
            Timeouts::default(),
        )
        .unwrap(),
    );
    let search = locks_search();
    let found = leases(&looker, &search).unwrap();
    assert!(found.leases.is_empty());
    assert!(
        found.partial.len() == 1 && found.partial[0].contains("NOPERM"),
        "{:?}",
        found.partial
    );
    // The default user sees it.
    let found = leases(&endpoint(&server), &search).unwrap();
    assert_eq!((found.leases.len(), found.partial.len()), (1, 0));
    assert!(holder.release().unwrap());
}
