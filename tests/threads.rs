//! Threads of one process serving requests, as a ZTS PHP runs them (Apache's
//! event MPM, FrankenPHP): a thread that ends in the middle of a request (no
//! shutdown hook runs for it) frees what it holds, and each thread's request
//! keeps its own idle timeout for the links it gives back. Its own test binary:
//! it counts the links of the whole process.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::session::{Mode, SessionConfig, SessionStore};
use redis_lease::core::{pool, request, watchdog};
use support::{await_until, exists, pttl, RedisServer};

fn endpoint(server: &RedisServer) -> Arc<Endpoint> {
    Arc::new(Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap())
}

#[test]
fn a_thread_that_ends_mid_request_frees_its_lock_and_its_session_lock() {
    let server = RedisServer::start();
    let ep = endpoint(&server);
    let thread_ep = ep.clone();
    let dead = std::thread::spawn(move || {
        // A thread that serves requests, as PHP's request startup marks it.
        request::begin();
        // A renewed lock and a renewed session lock, both with a ttl far longer
        // than the test waits: only a release frees them in time.
        let lease = Lease::new(thread_ep.clone(), LeaseKeys::for_lock(b"lock:", b"thread"));
        let mut lock = Lock::new(lease, Duration::from_secs(30)).with_auto_renew(true);
        assert!(lock.acquire(Duration::ZERO).unwrap());
        let store = SessionStore::new(
            thread_ep,
            SessionConfig {
                lock_ttl: Duration::from_secs(30),
                lock_renew: true,
                ..SessionConfig::default()
            },
        );
        let (session, _) = store.open("threadsession").unwrap();
        assert!(matches!(session.mode, Mode::Locked(_)));
        assert_eq!((request::held(), request::sessions_held()), (1, 1));
        // The thread ends with both objects alive (PHP's objects of a thread that
        // dies are never destroyed): nothing of theirs runs.
        std::mem::forget(lock);
        std::mem::forget(session);
        std::mem::forget(store);
    });
    dead.join().unwrap();
    let mut raw = server.conn();
    let t0 = Instant::now();
    await_until(
        Duration::from_secs(2),
        "the dead thread's lock and session lock to be freed",
        || {
            !exists(&mut raw, "lock:{thread}")
                && !exists(&mut raw, "{PHPREDIS_SESSION:threadsession}:lock")
        },
    );
    eprintln!("freed {:?} after the thread ended", t0.elapsed());
    // Nothing renews them any more: a new holder's lease keeps its own ttl.
    let mut next = Lock::new(
        Lease::new(ep, LeaseKeys::for_lock(b"lock:", b"thread")),
        Duration::from_secs(5),
    );
    assert!(next.acquire(Duration::ZERO).unwrap());
    assert_eq!(
        watchdog::watched(),
        0,
        "the watchdog watches nothing of the dead thread's"
    );
    assert!(next.release().unwrap());
    assert_eq!(pttl(&server, "lock:{thread}"), -2);
}

#[test]
fn a_session_closed_by_its_request_is_not_freed_again_when_its_thread_ends() {
    let server = RedisServer::start();
    let ep = endpoint(&server);
    let store = Arc::new(SessionStore::new(ep, SessionConfig::default()));
    let thread_store = store.clone();
    std::thread::spawn(move || {
        request::begin();
        let (mut session, _) = thread_store.open("closed").unwrap();
        thread_store
            .write(&mut session, b"a|i:1;", Duration::from_secs(60))
            .unwrap();
        assert_eq!(
            request::sessions_held(),
            0,
            "saved: no longer this thread's to free"
        );
    })
    .join()
    .unwrap();
    // The next request's lock is not touched by the first thread's end.
    let (mut next, data) = store.open("closed").unwrap();
    assert_eq!(data.as_deref(), Some(&b"a|i:1;"[..]));
    assert!(exists(&mut server.conn(), "{PHPREDIS_SESSION:closed}:lock"));
    assert!(store.close(&mut next).unwrap());
}

#[test]
fn each_threads_request_keeps_its_own_idle_timeout() {
    let server = RedisServer::start();
    let other = RedisServer::start();
    let link = |server: &RedisServer, idle: Option<Duration>| {
        let ep = endpoint(server);
        std::thread::spawn(move || {
            // What each request's start does with its own setting (under Apache,
            // a vhost's php_admin_value).
            pool::set_idle_timeout(idle);
            let mut lock = Lock::new(
                Lease::new(ep, LeaseKeys::for_lock(b"lock:", b"idle")),
                Duration::from_secs(5),
            );
            assert!(lock.acquire(Duration::ZERO).unwrap());
            assert!(lock.release().unwrap());
        })
        .join()
        .unwrap();
    };
    // The 30 s link first: the watchdog plans to sleep until it runs out; the 2 s
    // link comes back meanwhile, and nothing wakes the watchdog.
    // (2 s: the links are counted before it runs out, even on a loaded machine.)
    link(&other, Some(Duration::from_secs(30)));
    watchdog::keep_watch();
    link(&server, Some(Duration::from_secs(2)));
    // (What each request's end does.)
    watchdog::keep_watch();
    // (Each count includes the connection that asks. Other tests of this binary
    // share the pool, so its links are counted per server.)
    let clients = |s: &RedisServer| -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut s.conn())
            .unwrap();
        list.lines().count()
    };
    assert_eq!(
        (clients(&server), clients(&other)),
        (2, 2),
        "both links pooled"
    );
    // The short one closes; the other request's stays, although its request
    // started first and the short one's last.
    // The watchdog closes it by itself (no sweep from here): within its 2 s and a
    // quarter more.
    let given_back = Instant::now();
    await_until(Duration::from_secs(10), "the 2 s link to close", || {
        clients(&server) == 1
    });
    let closed_after = given_back.elapsed();
    assert!(
        closed_after < Duration::from_millis(3500),
        "closed {closed_after:?} after it was given back"
    );
    assert_eq!(clients(&other), 2, "the other request's link is kept");
    assert_eq!(
        pool::idle_timeout(),
        Some(Duration::from_secs(30)),
        "the watchdog's own links follow the longest setting"
    );
}

#[test]
fn a_thread_that_serves_no_requests_leaves_its_holds_to_their_objects() {
    // Outside PHP a holder may move to another thread: the thread that took it
    // ends, the hold goes on.
    let server = RedisServer::start();
    let ep = endpoint(&server);
    let mut lock = std::thread::spawn(move || {
        let mut lock = Lock::new(
            Lease::new(ep, LeaseKeys::for_lock(b"lock:", b"moved")),
            Duration::from_secs(30),
        );
        assert!(lock.acquire(Duration::ZERO).unwrap());
        lock
    })
    .join()
    .unwrap();
    assert!(
        lock.inspect().unwrap().is_some(),
        "still held after the thread ended"
    );
    assert!(lock.release().unwrap());
}
