//! One DistributedLock's state (`core::lock::Lock`) against a real redis-server:
//! what an unanswered call leaves open is settled by the next one, and what a
//! request holds is its own.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::request;
use support::{
    await_until, exists, info_count, load_scripts, lock_lease as lease, pttl, scripts_run,
    HoldingProxy, RedisServer,
};

const SEC: Duration = Duration::from_secs(1);

/// An acquire that Redis did not answer in time, whose script then ran: Redis
/// holds the lock for a token only the lock object knows. Returns the object and
/// when its acquire was sent. `read_timeout`: in seconds, as in a DSN.
fn unresolved_acquire(
    server: &RedisServer,
    name: &str,
    ttl: Duration,
    read_timeout: &str,
) -> (Lock, Instant) {
    let query = format!("?read_timeout={read_timeout}");
    let mut lock = Lock::new(lease(server, &query, name), ttl);
    // Warm up: the pooled connection made, the scripts loaded, so that what the
    // stop hits is the acquire script itself.
    assert!(lock.acquire(Duration::ZERO).unwrap());
    assert!(lock.release().unwrap());
    server.signal("STOP");
    let sent = Instant::now();
    let err = lock.acquire(Duration::ZERO).unwrap_err();
    server.signal("CONT");
    assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
    let key = format!("lock:{{{name}}}");
    let mut raw = server.conn();
    await_until(Duration::from_secs(5), "the late acquire to run", || {
        exists(&mut raw, &key)
    });
    (lock, sent)
}

#[test]
fn acquire_extends_an_adopted_lease_to_the_full_ttl() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(1500);
    let (mut lock, _) = unresolved_acquire(&server, "adopt", ttl, "1");
    // Let most of the adopted lease run out before asking again.
    await_until(Duration::from_secs(5), "the lease to run low", || {
        pttl(&server, "lock:{adopt}") < 600
    });
    assert!(lock.acquire(Duration::ZERO).unwrap(), "the lease is ours");
    let left = pttl(&server, "lock:{adopt}");
    assert!(
        left > 1300,
        "acquire() returned true with only {left} ms of a 1500 ms lease left"
    );
    let hold = lock.hold().unwrap();
    assert_eq!(hold.ttl, ttl);
    assert!(lock.release().unwrap());
}

#[test]
fn an_adopted_lease_the_replicas_never_get_is_neither_granted_nor_left_held() {
    // The acquire's reply was lost, so its WAIT never ran; the next call adopts
    // the lease and WAITs for it on its own. With no replica to answer, that
    // falls short: the call fails, and the lease is given back rather than kept
    // (by this object, or by Redis until its ttl).
    let server = RedisServer::start();
    let name = "adopt-unreplicated";
    let key = format!("lock:{{{name}}}");
    let mut lock = Lock::new(
        lease(
            &server,
            "?read_timeout=0.2&wait_replicas=1&wait_timeout=50",
            name,
        ),
        Duration::from_secs(30),
    );
    // The pooled connection made and the scripts loaded (no grant: it would WAIT).
    assert!(!lock.held().unwrap());
    let mut warm = Lock::new(lease(&server, "", name), Duration::from_secs(1));
    assert!(warm.acquire(Duration::ZERO).unwrap());
    assert!(warm.release().unwrap());
    server.signal("STOP");
    let err = lock.acquire(Duration::ZERO).unwrap_err();
    server.signal("CONT");
    assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
    let mut raw = server.conn();
    await_until(Duration::from_secs(5), "the late acquire to run", || {
        exists(&mut raw, &key)
    });
    let err = lock.acquire(Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("wait_replicas"), "{err}");
    assert!(lock.hold().is_none(), "not counted on");
    assert!(!exists(&mut raw, &key), "and not left held in Redis");
}

#[test]
fn an_adopted_lease_counts_from_before_the_question() {
    let server = RedisServer::start();
    // A read timeout well past the delay injected below, however late the
    // thread that ends it runs.
    let (mut lock, _) = unresolved_acquire(&server, "since", Duration::from_secs(2), "1");
    // Redis answers the question (resolve) 150 ms late: it measured the lease's
    // time left somewhere in between, so the lease surely lasts until the moment
    // of the question plus that time, not until the answer plus that time.
    let before = Instant::now();
    server.signal("STOP");
    let resume = {
        let pid = server.pid();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150)); // the injected delay
            support::signal_pid(pid, "CONT");
        })
    };
    let owned = lock.inspect().unwrap().expect("adopted");
    let answered = Instant::now();
    resume.join().unwrap();
    let hold = lock.hold().unwrap();
    // Redis ran the question 150 ms after it was sent and measured the time left
    // then: the lease is counted from the moment of the question.
    let expiry = answered + owned.left.unwrap();
    assert!(hold.safe_until() > before);
    assert!(
        hold.safe_until() + Duration::from_millis(100) < expiry,
        "counted from the answer: {:?} before the expiry",
        expiry - hold.safe_until()
    );
    // Renewals and refresh() extend it to the lock's ttl, not to what was left.
    assert_eq!(hold.ttl, Duration::from_secs(2));
}

#[test]
fn a_release_that_timed_out_is_completed_before_anything_else() {
    let server = RedisServer::start();
    let mut lock = Lock::new(
        lease(&server, "?read_timeout=0.2", "relsent"),
        Duration::from_secs(30),
    );
    assert!(lock.acquire(Duration::ZERO).unwrap());
    lock.fence().unwrap();
    let first = lock.hold().unwrap().clone();
    server.signal("STOP");
    assert!(matches!(lock.release(), Err(Error::Unresolved { .. })));
    server.signal("CONT");
    // Whenever the late release runs, the next acquire must not count on the old
    // token: it completes that release and takes a fresh lease.
    assert!(lock.acquire(Duration::ZERO).unwrap());
    lock.fence().unwrap();
    let now = lock.hold().unwrap().clone();
    assert_ne!(now.token, first.token);
    assert!(now.fence > first.fence);
    let mut raw = server.conn();
    await_until(
        Duration::from_secs(5),
        "Redis to run the late release",
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut raw).unwrap();
            list.lines().count() <= 2
        },
    );
    assert!(
        lock.inspect().unwrap().is_some(),
        "the late release deleted our new lease"
    );
    assert!(lock.release().unwrap());
}

#[test]
fn a_request_end_releases_only_its_own_threads_locks() {
    let server = RedisServer::start();
    // Two requests on two threads, as under ZTS: one ends while the other works.
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let ep = server.dsn();
    let other = std::thread::spawn(move || {
        let ep = Endpoint::parse(&ep, Timeouts::default()).unwrap();
        let mut lock = Lock::new(
            Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"theirs")),
            Duration::from_secs(30),
        );
        assert!(lock.acquire(Duration::ZERO).unwrap());
        tx.send(request::held()).unwrap();
        done_rx.recv().unwrap();
        let still = lock.inspect().unwrap().is_some();
        assert!(lock.release().unwrap());
        still
    });
    assert_eq!(rx.recv().unwrap(), 1, "the other request holds one lock");
    let mut mine = Lock::new(lease(&server, "", "mine"), Duration::from_secs(30));
    assert!(mine.acquire(Duration::ZERO).unwrap());
    assert_eq!(request::held(), 1, "this request holds its own one");
    request::end();
    let mut raw = server.conn();
    assert!(
        !exists(&mut raw, "lock:{mine}"),
        "our request's end released ours"
    );
    assert!(exists(&mut raw, "lock:{theirs}"), "and left theirs alone");
    done_tx.send(()).unwrap();
    assert!(
        other.join().unwrap(),
        "the other request still held its lock"
    );
    // Our object learns that its hold is gone without releasing anything again.
    assert!(!mine.release().unwrap());
}

/// An acquire of one kind left unresolved, then a call for the other kind: the
/// hold the settle finds is converted to what the call asks for. Before, an
/// acquire() after an unresolved acquire_read() adopted the read hold and said
/// true, beside another reader.
#[test]
fn a_call_after_an_unresolved_acquire_of_the_other_kind_converts_what_it_finds() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    for (first_read, name) in [(true, "mixed_r"), (false, "mixed_w")] {
        let mut lock = Lock::new(lease(&server, "?read_timeout=1", name), SEC * 30);
        // Warm up both kinds, so that what the stop hits is the script itself.
        assert!(lock.acquire_read(Duration::ZERO).unwrap());
        assert!(lock.acquire(Duration::ZERO).unwrap());
        assert!(lock.release().unwrap());
        server.signal("STOP");
        let err = if first_read {
            lock.acquire_read(Duration::ZERO).unwrap_err()
        } else {
            lock.acquire(Duration::ZERO).unwrap_err()
        };
        server.signal("CONT");
        assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
        let (key, holders) = (
            format!("lock:{{{name}}}"),
            format!("lock:{{{name}}}:holders"),
        );
        await_until(SEC * 5, "the late acquire to run", || {
            exists(&mut raw, &key) || exists(&mut raw, &holders)
        });
        let mut other = Lock::new(lease(&server, "", name), SEC * 30);
        if first_read {
            assert!(lock.acquire(Duration::ZERO).unwrap());
            assert!(!lock.shared(), "{name}: acquire() holds it alone");
            assert!(
                exists(&mut raw, &key) && !exists(&mut raw, &holders),
                "{name}"
            );
            assert!(
                !other.acquire_read(Duration::ZERO).unwrap(),
                "{name}: no reader beside it"
            );
        } else {
            assert!(lock.acquire_read(Duration::ZERO).unwrap());
            assert!(lock.shared(), "{name}: acquire_read() shares it");
            assert!(
                !exists(&mut raw, &key) && exists(&mut raw, &holders),
                "{name}"
            );
            assert!(
                other.acquire_read(Duration::ZERO).unwrap(),
                "{name}: another reader shares it"
            );
            assert!(other.release().unwrap());
        }
        assert!(lock.release().unwrap());
    }
}

/// A semaphore's acquire left unresolved: the next call settles it and learns
/// the adopted hold's weight from Redis. Before, `held_weight()` saw no hold,
/// and `acquire_permits(3)` adopted the 1-permit hold as 3 (Redis counting 1).
#[test]
fn an_unresolved_permit_is_adopted_with_its_own_weight() {
    let server = RedisServer::start();
    let mut raw = server.conn();
    let ep = Endpoint::parse(
        &format!("{}?read_timeout=1", server.dsn()),
        Timeouts::default(),
    );
    let keys = LeaseKeys::for_semaphore(b"lock:", b"weighed");
    let mut sem = Lock::semaphore(Lease::new(Arc::new(ep.unwrap()), keys), 5, SEC * 30);
    assert!(sem.acquire_permits(Duration::ZERO, 1).unwrap());
    assert!(sem.release().unwrap());
    server.signal("STOP");
    let err = sem.acquire_permits(Duration::ZERO, 1).unwrap_err();
    server.signal("CONT");
    assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
    await_until(SEC * 5, "the late acquire to run", || {
        exists(&mut raw, "lock:{weighed}:semaphore:holders")
    });
    assert_eq!(
        sem.held_weight().unwrap(),
        Some(1),
        "the adopted hold's weight"
    );
    assert!(sem.shared());
    assert!(sem.release().unwrap());
}

/// A lock on `name` reached through `proxy` (a read timeout of 1 s).
fn through(proxy: &HoldingProxy, name: &str) -> Lease {
    through_with(proxy, name, 1)
}

/// ... with a read timeout of `secs`.
fn through_with(proxy: &HoldingProxy, name: &str, secs: u32) -> Lease {
    let dsn = format!("redis://127.0.0.1:{}?read_timeout={secs}", proxy.port);
    let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

/// A downgrade whose reply never came may still run after the next call asked
/// Redis about the hold: a writer told it holds alone would then have readers
/// let in beside it. The hold is let go instead (review, issue 30): the next
/// acquire() releases it and takes the lock afresh, and the late downgrade
/// finds nothing of its token's to convert. Before, acquire() asked Redis
/// (alone, still), said true, and the late downgrade let a reader in.
#[test]
fn a_downgrade_left_unanswered_is_never_counted_on_as_the_lock_alone() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut lock = Lock::new(through(&proxy, "late_d"), SEC * 30);
    // Warm up: the link made, the library loaded.
    assert!(lock.acquire(Duration::ZERO).unwrap());
    assert!(lock.acquire_read(Duration::ZERO).unwrap());
    assert!(lock.release().unwrap());
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let first = lock.hold().unwrap().token.clone();
    proxy.hold(true);
    let err = lock.acquire_read(Duration::ZERO).unwrap_err();
    assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
    proxy.await_held(SEC * 5);
    assert!(lock.hold().is_none(), "the hold is let go");
    // The downgrade stays held; what comes next goes through.
    proxy.hold_after(true, 1000);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    assert_ne!(lock.hold().unwrap().token, first, "taken afresh");
    let mut raw = server.conn();
    let before = support::info_count(&mut raw, "cmdstat_fcall:calls=");
    proxy.hold(false);
    await_until(SEC * 5, "the late downgrade to run", || {
        support::info_count(&mut raw, "cmdstat_fcall:calls=") > before
    });
    let mut reader = Lock::new(lease(&server, "", "late_d"), SEC * 30);
    assert!(
        !reader.acquire_read(Duration::ZERO).unwrap(),
        "no reader beside the writer"
    );
    assert!(lock.release().unwrap());
}

/// A conversion whose link broke after it was sent may still run, late: its
/// token cannot be voided (a conversion's attempts act on what the token holds),
/// so it is not asked again; the hold is let go, as after a timeout (review,
/// stop 56). Before, the claim asked again with the same token and reported
/// what the second attempt did: a writer's downgrade said true, the writer
/// upgraded again and held the lock alone, then the first downgrade ran and let
/// a reader in beside it; a reader's upgrade said false (another reader held
/// it) and the reader kept reading, while the first upgrade, run once the other
/// reader left, gave its token the lock alone unknown to it.
#[test]
fn a_conversion_whose_link_broke_is_not_asked_again() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    // The writer's downgrade.
    let mut lock = Lock::new(through_with(&proxy, "broken_d", 3), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let first = lock.hold().unwrap().token.clone();
    proxy.hold_first_and_break(b"$1\r\nd\r\n");
    let took = lock.acquire_read(Duration::ZERO);
    let let_go = lock.hold().is_none();
    proxy.await_held(SEC * 5);
    // acquire() again: it releases the let-go token first (whatever the late
    // downgrade makes of it) and takes the lock afresh. (Before: the upgrade of
    // the read hold the retry made.)
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 5, "the late downgrade to run", || {
        scripts_run(&mut raw) > before
    });
    let mut reader = Lock::new(lease(&server, "", "broken_d"), SEC * 30);
    assert!(
        !reader.acquire_read(Duration::ZERO).unwrap(),
        "no reader beside the writer"
    );
    assert!(
        matches!(took, Err(Error::Unresolved { .. })) && let_go,
        "the downgrade is not asked again, its hold let go: {took:?}"
    );
    assert_ne!(lock.hold().unwrap().token, first, "taken afresh");
    assert!(lock.refresh(SEC * 30).unwrap());
    assert!(lock.release().unwrap());

    // A reader's upgrade, while another reader holds it.
    let mut lock = Lock::new(through_with(&proxy, "broken_u", 3), SEC * 30);
    let mut other = Lock::new(lease(&server, "", "broken_u"), SEC * 30);
    assert!(lock.acquire_read(Duration::ZERO).unwrap());
    assert!(other.acquire_read(Duration::ZERO).unwrap());
    let first = lock.hold().unwrap().token.clone();
    proxy.hold_first_and_break(b"$1\r\nu\r\n");
    let took = lock.acquire(Duration::ZERO);
    let let_go = lock.hold().is_none();
    proxy.await_held(SEC * 5);
    assert!(other.release().unwrap());
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 5, "the late upgrade to run", || {
        scripts_run(&mut raw) > before
    });
    // The late upgrade took the lock alone for the token. (Before: for an
    // object that went on counting on a read hold, and kept it from everyone
    // else until released or run out.)
    let value: Option<String> = redis::cmd("GET")
        .arg("lock:{broken_u}")
        .query(&mut raw)
        .unwrap();
    let alone = value.is_some_and(|v| v.starts_with(first.as_str()));
    assert!(
        !(alone && lock.hold().is_some()),
        "the object counts on a read hold its token holds alone"
    );
    // The next call releases the token, and takes a fresh hold, counted on no
    // longer than Redis keeps it.
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let counted = lock.hold().unwrap().safe_until();
    let kept = Duration::from_millis(pttl(&server, "lock:{broken_u}").max(0) as u64);
    assert!(
        counted <= Instant::now() + kept + Duration::from_millis(5),
        "counts on {:?}, Redis keeps it {kept:?}",
        counted - Instant::now()
    );
    assert!(
        matches!(took, Err(Error::Unresolved { .. })) && let_go,
        "the upgrade is not asked again, its hold let go: {took:?}"
    );
    assert_ne!(lock.hold().unwrap().token, first, "taken afresh");
    assert!(lock.release().unwrap());
}

/// Under maxmemory a renewal must still run (it grows nothing for good). Run by
/// EVAL (functions=0, as on Redis 6.2 or under an ACL without FUNCTION), a
/// script is refused at its first write that may grow memory: a reader's and a
/// permit's renewal began with ZADD, and were refused (their holds then lost),
/// while a lock held alone renewed (review, stop 51). A refresh that voids an
/// earlier one that got no answer (SADD) runs too: it extends the lease first.
#[test]
fn shared_holds_renew_under_maxmemory_when_run_by_eval() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let dsn = format!(
        "redis://127.0.0.1:{}?functions=0&read_timeout=1",
        proxy.port
    );
    let lease = |keys| {
        Lease::new(
            Arc::new(Endpoint::parse(&dsn, Timeouts::default()).unwrap()),
            keys,
        )
    };
    let mut reader = Lock::new(lease(LeaseKeys::for_lock(b"lock:", b"oom_r")), SEC * 30);
    let mut alone = Lock::new(lease(LeaseKeys::for_lock(b"lock:", b"oom_w")), SEC * 30);
    let keys = LeaseKeys::for_semaphore(b"lock:", b"oom_p");
    let mut permit = Lock::semaphore(lease(keys), 3, SEC * 30);
    assert!(reader.acquire_read(Duration::ZERO).unwrap());
    assert!(alone.acquire(Duration::ZERO).unwrap());
    assert!(permit.acquire_permits(Duration::ZERO, 2).unwrap());
    // Each renewed once before: the script is in Redis's cache.
    for l in [&mut reader, &mut alone, &mut permit] {
        assert!(l.refresh(SEC * 30).unwrap());
    }
    // Then a refresh of each gets no answer (and runs): the next one voids it.
    proxy.hold_command(b"\r\n20000\r\n");
    for l in [&mut reader, &mut alone, &mut permit] {
        assert!(l.refresh(SEC * 20).is_err(), "unanswered");
    }
    let mut raw = server.conn();
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 10, "the held refreshes to run", || {
        scripts_run(&mut raw) >= before + 3
    });
    let _: () = redis::cmd("SET")
        .arg("ballast")
        .arg(vec![b'x'; 4 << 20])
        .query(&mut raw)
        .unwrap();
    let config = |raw: &mut redis::Connection, k: &str, v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query(raw)
            .unwrap();
    };
    config(&mut raw, "maxmemory-policy", "noeviction");
    config(&mut raw, "maxmemory", "1mb");
    let refused: redis::RedisResult<()> = redis::cmd("SET").arg("more").arg("x").query(&mut raw);
    assert!(refused.is_err(), "Redis is out of memory");
    let renewed: Vec<_> = [&mut reader, &mut alone, &mut permit]
        .into_iter()
        .map(|l| l.refresh(SEC * 60).map_err(|e| e.to_string()))
        .collect();
    config(&mut raw, "maxmemory", "0");
    assert_eq!(
        renewed,
        vec![Ok(true), Ok(true), Ok(true)],
        "reader, alone, permit"
    );
    for key in ["lock:{oom_r}:holders", "lock:{oom_p}:semaphore:holders"] {
        let left = pttl(&server, key);
        assert!(left > 50_000, "{key} kept {left} ms");
    }
    for l in [&mut reader, &mut alone, &mut permit] {
        assert!(l.release().unwrap());
    }
}

/// A refresh that timed out may reach Redis late (a lossy network), and shorten
/// the lease after the token was detached and restored elsewhere, past the end
/// the restorer read: two holders. detach() sends the refresh again first
/// (review, stop 51): the restorer then reads the lease as the late refresh
/// leaves it. Before, it read the 30 s the late refresh then cut to 2 s.
#[test]
fn a_refresh_left_unanswered_is_sent_again_before_its_token_is_detached() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    // The re-send must be answered in time on a loaded machine: 3 s.
    let mut lock = Lock::new(through_with(&proxy, "late_refresh", 3), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold(true);
    assert!(lock.refresh(SEC * 2).is_err(), "unanswered");
    // The refresh stays held (late); what comes next goes through.
    proxy.hold_after(true, 1000);
    let token = lock.detach().unwrap().expect("held");
    let mut restored =
        Lock::restore(lease(&server, "", "late_refresh"), SEC * 30, token, false).unwrap();
    assert_eq!(restored.holding().unwrap(), Some(false), "held alone");
    let counted = restored.hold().unwrap().safe_until();
    proxy.hold(false);
    assert!(
        counted <= Instant::now() + SEC * 2,
        "counts on {:?} more, the late refresh leaves 2 s",
        counted - Instant::now()
    );
    let mut raw = server.conn();
    await_until(SEC * 10, "the lease to end", || {
        !exists(&mut raw, "lock:{late_refresh}")
    });
    assert!(
        Instant::now() >= counted,
        "the lease ended before its end as counted"
    );

    // Redis answers neither: the token is not handed out by detach(), the
    // hold kept here, while the late refresh may arrive (review, stop 65: it
    // went as it was, and the restorer counted on 30 s the late refresh then
    // cut to 2 s). getToken() still tells it (the object owns the hold);
    // detach() sends it again each time, and once that is answered the token
    // goes.
    let mut lock = Lock::new(through_with(&proxy, "late_refresh", 3), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold(true);
    assert!(lock.refresh(SEC * 2).is_err(), "unanswered");
    assert!(lock.current_token().is_some(), "told, the hold owned here");
    let refused = lock.detach();
    assert!(
        matches!(&refused, Err(Error::Connection(e)) if e.contains("not handed out")),
        "{refused:?}"
    );
    assert!(lock.hold().is_some(), "the hold stays with the object");
    proxy.hold(false);
    let token = lock.detach().unwrap().expect("sent again, answered");
    let mut restored =
        Lock::restore(lease(&server, "", "late_refresh"), SEC * 30, token, false).unwrap();
    assert_eq!(restored.holding().unwrap(), Some(false), "held alone");
    // The held refreshes, voided by the answered re-send, change nothing when
    // they run: what the restorer reads is what Redis keeps.
    let counted = restored.hold().unwrap().safe_until();
    assert!(
        Instant::now() + Duration::from_millis(pttl(&server, "lock:{late_refresh}") as u64 + 50)
            >= counted,
        "the restorer counts on no more than Redis keeps"
    );
    // A token an object was given goes back as it is: it is out there
    // already, and kept, its hold would be released under its owner as the
    // object goes (the bridges restore, refresh and detach).
    assert!(restored.refresh(SEC * 30).unwrap());
    let token = restored.detach().unwrap().expect("held");
    let mut given = Lock::restore(
        through_with(&proxy, "late_refresh", 1),
        SEC * 30,
        token.clone(),
        false,
    )
    .unwrap();
    proxy.hold(true);
    assert!(given.refresh(SEC * 30).is_err(), "unanswered");
    assert_eq!(given.detach().unwrap(), Some(token), "handed back");
    drop(given);
    proxy.hold(false);
    assert!(
        pttl(&server, "lock:{late_refresh}") > 20_000,
        "not released as the object went"
    );
}

/// A refresh that got no answer may still run after a later refresh of the
/// same hold was answered (a lossy network delivers it late). It set the
/// expiry to its own ttl, 2 s, under a holder counting on the later 60 s: two
/// holders. The later refresh voids it (refresh.lua), so its late run changes
/// nothing; until then the holder counts on no more than the 2 s it may leave,
/// across an upgrade too (the token's refresh as a reader could cut the lock it
/// then holds alone). For the lock alone, a read hold, a read hold upgraded
/// after its refresh went unanswered, and a refresh whose first run's link broke
/// (sent again and answered, the first run may still come: found by the model).
/// Before, each lease was cut to 2 s.
#[test]
fn a_late_refresh_voided_by_a_later_one_changes_nothing() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    for (name, read, upgrade, broken) in [
        ("late_void_w", false, false, false),
        ("late_void_r", true, false, false),
        ("late_void_u", true, true, false),
        ("late_void_b", false, false, true),
    ] {
        let mut lock = Lock::new(through_with(&proxy, name, 3), SEC * 30);
        let took = if read {
            lock.acquire_read(Duration::ZERO)
        } else {
            lock.acquire(Duration::ZERO)
        };
        assert!(took.unwrap(), "{name}");
        // Only the 2 s refresh is held (by its ttl, as sent).
        let sent = Instant::now();
        if broken {
            // Its link breaks: sent again at once, and answered.
            proxy.hold_first_and_break(b"\r\n2000\r\n");
            assert!(lock.refresh(SEC * 2).unwrap(), "{name}: sent again");
        } else {
            proxy.hold_command(b"\r\n2000\r\n");
            assert!(lock.refresh(SEC * 2).is_err(), "{name}: unanswered");
        }
        proxy.await_held(SEC);
        // Arriving after the upgrade was granted, the refresh leaves 2 s from then.
        let mut from = sent;
        if upgrade {
            assert!(lock.acquire(Duration::ZERO).unwrap(), "{name}: upgraded");
            assert!(!lock.hold().unwrap().shared, "{name}: alone");
            from = Instant::now();
        }
        let counted = lock.hold().unwrap().safe_until();
        assert!(
            counted <= from + SEC * 2,
            "{name}: counts on {:?} past the unanswered refresh's 2 s",
            counted - from
        );
        assert!(lock.refresh(SEC * 60).unwrap(), "{name}: answered");
        let counted = lock.hold().unwrap().safe_until();
        assert!(
            counted > Instant::now() + SEC * 50,
            "{name}: counts on 60 s"
        );
        let before = scripts_run(&mut raw);
        proxy.hold(false);
        await_until(SEC * 10, "the late refresh to run", || {
            scripts_run(&mut raw) > before
        });
        let key = format!("lock:{{{name}}}");
        let left = if read && !upgrade {
            let ends: i64 = redis::cmd("ZSCORE")
                .arg(format!("{key}:holders"))
                .arg(lock.hold().unwrap().token.as_str())
                .query(&mut raw)
                .unwrap();
            ends - support::server_ms(&mut raw)
        } else {
            pttl(&server, &key)
        };
        assert!(
            left > 50_000,
            "{name}: the late refresh cut the lease to {left} ms"
        );
        assert!(lock.release().unwrap(), "{name}");
    }
}

/// A refresh left unanswered is sent again before the token leaves the object
/// (detach(), getToken()), to void its late run. After an upgrade granted the
/// lease afresh, the re-send asks for the upgrade's ttl: the token is handed
/// out with the lease the upgrade gave it (review, stop 53). Before, the re-send
/// asked for the old refresh's 2 s.
#[test]
fn a_token_handed_out_after_an_upgrade_keeps_the_upgrades_lease() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    let mut lock = Lock::new(through_with(&proxy, "resend_upgraded", 3), SEC * 30);
    assert!(lock.acquire_read(Duration::ZERO).unwrap());
    proxy.hold_command(b"\r\n2000\r\n");
    assert!(lock.refresh(SEC * 2).is_err(), "unanswered");
    proxy.await_held(SEC);
    assert!(lock.acquire(Duration::ZERO).unwrap(), "upgraded");
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 10, "the late refresh to run", || {
        scripts_run(&mut raw) > before
    });
    assert!(lock.detach().unwrap().is_some());
    let left = pttl(&server, "lock:{resend_upgraded}");
    assert!(
        left > 20_000,
        "handed out with {left} ms, not the upgrade's 30 s"
    );
}

/// A hold the watchdog gave up on (a refresh unanswered past its own ttl, no
/// renewal confirmed meanwhile) may still be Redis's, and detach() hands its
/// token out: the unanswered refresh is sent again first, for its voiding,
/// though refresh() says false for a lost hold unsent (review, stop 57).
/// Before, nothing was sent, and the late refresh cut the lease to its 4 s under
/// the restorer, which had refreshed it to 60 s.
#[test]
fn a_lost_hold_handed_out_voids_its_unanswered_refresh_first() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    let name = "resend_lost";
    let mut lock = Lock::new(through_with(&proxy, name, 5), SEC * 30).with_auto_renew(true);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold_command(b"\r\n4000\r\n");
    assert!(lock.refresh(SEC * 4).is_err(), "unanswered");
    proxy.await_held(SEC);
    // Unanswered for 5 s, past its 4 s: the watch has ended. Redis keeps the
    // lock (the refresh is held).
    assert!(
        lock.hold().is_none() && lock.token().is_some(),
        "the watch gave the hold up, which the object keeps"
    );
    assert!(pttl(&server, &format!("lock:{{{name}}}")) > 20_000);
    // The re-send goes through (and leaves 4 s, the restorer's to read and
    // extend); what is held stays held.
    proxy.hold_after(true, 1);
    let token = lock
        .detach()
        .unwrap()
        .expect("a lost hold's token is handed out");
    let mut restorer = Lock::restore(lease(&server, "", name), SEC * 30, token, false).unwrap();
    assert!(
        restorer.refresh(SEC * 60).unwrap(),
        "the restorer's refresh"
    );
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 10, "the late refresh to run", || {
        scripts_run(&mut raw) > before
    });
    let left = pttl(&server, &format!("lock:{{{name}}}"));
    assert!(
        left > 50_000,
        "the late refresh cut the restorer's lease to {left} ms"
    );
    assert!(restorer.release().unwrap());
}

/// An upgrade is refused while another reader waits to upgrade (each would
/// wait for the other for ever), but not for a queued upgrade whose read hold
/// ended (its reader stopped asking: a stalled process, here its attempts held
/// by the proxy): the other reader's claim finds the lock free of writers and
/// serves the queue first, which drops that entry (fix (l)), and its upgrade
/// goes on. (Review, stop 57, asked whether it was refused until the dead entry
/// was no longer heard from: it is not.)
#[test]
fn a_queued_upgrade_whose_read_hold_ended_refuses_no_other() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    let name = "dead_upgrade";
    let key = format!("lock:{{{name}}}");
    // (A long read timeout: its attempt is held until the test lets it go.)
    let mut stalled = Lock::new(through_with(&proxy, name, 20), Duration::from_millis(300));
    let mut other = Lock::new(lease(&server, "", name), SEC * 30);
    assert!(stalled.acquire_read(Duration::ZERO).unwrap());
    assert!(other.acquire_read(Duration::ZERO).unwrap());
    let token = stalled.hold().unwrap().token.as_str().to_string();
    // Its first upgrade attempt queues it; the next ones are held.
    proxy.hold_command_after(b"$1\r\nu\r\n", 1);
    let upgrade = std::thread::spawn(move || stalled.acquire(SEC * 10));
    let score = |raw: &mut redis::Connection, set: &str| -> Option<i64> {
        redis::cmd("ZSCORE")
            .arg(format!("{key}:{set}"))
            .arg(&token)
            .query(raw)
            .unwrap()
    };
    await_until(SEC * 5, "the upgrade to queue", || {
        score(&mut raw, "waiters").is_some()
    });
    await_until(SEC * 5, "its read hold to run out", || {
        score(&mut raw, "holders").is_none_or(|end| end <= support::server_ms(&mut raw))
    });
    assert!(
        other.acquire(SEC * 10).unwrap(),
        "the other reader upgrades"
    );
    assert!(!other.shared(), "alone");
    assert!(other.release().unwrap());
    proxy.hold(false);
    assert!(
        !upgrade.join().unwrap().unwrap(),
        "the stalled upgrade, asking again, finds its read hold gone"
    );
}

/// Each refresh names to Redis every earlier one of its hold's left unanswered
/// (within a minute): past 64 of them (a link that breaks on every refresh, a
/// Redis that answers nothing), a refresh is refused before it is sent, so the
/// list, and the script's arguments, stay bounded. Before, it grew without end.
#[test]
fn a_hold_with_too_many_refreshes_unanswered_sends_no_more() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let dsn = format!("redis://127.0.0.1:{}?read_timeout=0.05", proxy.port);
    let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
    let lease = Lease::new(
        Arc::new(ep),
        LeaseKeys::for_lock(b"lock:", b"unanswered_cap"),
    );
    let mut lock = Lock::new(lease, SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold(true);
    for i in 0..64 {
        let e = lock.refresh(SEC * 30).unwrap_err();
        assert!(!e.to_string().contains("not sent"), "refresh {i}: {e}");
    }
    let e = lock.refresh(SEC * 30).unwrap_err();
    assert!(
        e.to_string().contains("not extended (not sent)") && e.to_string().contains("64"),
        "{e}"
    );
    proxy.hold(false);
    assert!(lock.release().unwrap());
}

/// The refresh left unanswered is its hold's: once that hold is gone and the
/// object holds a fresh lease, detach() hands its token out as it is, not cut
/// to the old refresh's ttl (review, stop 51).
#[test]
fn a_refresh_left_unanswered_is_not_sent_again_for_a_later_hold() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut giver = Lock::new(lease(&server, "", "late_refresh2"), SEC * 30);
    assert!(giver.acquire(Duration::ZERO).unwrap());
    let token = giver.detach().unwrap().expect("held");
    let mut lock = Lock::restore(through(&proxy, "late_refresh2"), SEC * 30, token, false).unwrap();
    proxy.hold(true);
    assert!(
        lock.refresh(Duration::from_millis(300)).is_err(),
        "unanswered"
    );
    proxy.hold(false);
    let mut raw = server.conn();
    await_until(SEC * 10, "the late refresh to end the lease", || {
        !exists(&mut raw, "lock:{late_refresh2}")
    });
    assert_eq!(lock.holding().unwrap(), None, "the restored hold is gone");
    assert!(lock.acquire(Duration::ZERO).unwrap());
    assert!(lock.detach().unwrap().is_some());
    let left = pttl(&server, "lock:{late_refresh2}");
    assert!(left > 20_000, "the fresh lease kept its 30 s: {left} ms");
}

/// A release that timed out may still run: the token is never handed out
/// (detach(), getToken()) for another object to count on, nor counted on here.
/// Before, detach() returned it.
#[test]
fn a_release_left_unanswered_hands_out_no_token() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut lock = Lock::new(through(&proxy, "late_release"), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    proxy.hold(true);
    let err = lock.release().unwrap_err();
    assert!(matches!(err, Error::Unresolved { .. }), "{err:?}");
    assert!(lock.hold().is_none(), "no token to hand out (getToken())");
    assert!(
        lock.detach().unwrap().is_none(),
        "detach() hands out nothing"
    );
    proxy.hold(false);
    // The next call completes the release (sent again, owner-checked, answered
    // after the late one); the lock is free.
    assert!(lock.inspect().unwrap().is_none());
    assert_eq!(lock.holding().unwrap(), None);
    let mut other = Lock::new(lease(&server, "", "late_release"), SEC * 30);
    assert!(other.acquire(Duration::ZERO).unwrap());
    assert!(other.release().unwrap());
}

/// A release refused with an error reply (here: ACL) stopped the hold's
/// renewals before it was sent. The hold is let go, and the next acquire()
/// takes a fresh one, renewed as ever. Before, acquire() refreshed the old
/// hold, whose renewals had stopped: its lease ran out under its holder.
#[test]
fn a_release_refused_leaves_no_unrenewed_hold_behind() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    let ttl = Duration::from_millis(1500);
    let mut lock = Lock::new(lease(&server, "", "refused"), ttl).with_auto_renew(true);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-@scripting"][..])
        .query(&mut admin)
        .unwrap();
    let err = lock.release().unwrap_err();
    assert!(matches!(err, Error::Reply { .. }), "{err:?}");
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "+@all"][..])
        .query(&mut admin)
        .unwrap();
    assert!(lock.acquire(Duration::ZERO).unwrap());
    // Three ttls on, still held: renewed.
    let until = Instant::now() + ttl * 3;
    await_until(ttl * 6, "three ttls to pass", || Instant::now() >= until);
    assert!(pttl(&server, "lock:{refused}") > 0, "renewed");
    assert!(lock.release().unwrap(), "held throughout");
}

/// A hold let go after a failed conversion (here: its downgrade refused by an
/// ACL, nothing ran) is no hold to count on: once another took the lock, its
/// release says false, as for any hold lost. (Review of the let-go: it counted
/// as a release that may have run.)
#[test]
fn a_hold_let_go_is_not_said_released_once_another_took_it() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    let mut lock = Lock::new(lease(&server, "", "let_go"), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    let acl = |conn: &mut redis::Connection, rule: &str| {
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "default", rule][..])
            .query(conn)
            .unwrap();
    };
    acl(&mut admin, "-@scripting");
    let err = lock.acquire_read(Duration::ZERO).unwrap_err();
    acl(&mut admin, "+@all");
    assert!(matches!(err, Error::Reply { .. }), "{err:?}");
    assert!(lease(&server, "", "let_go").force_release().unwrap());
    let mut other = Lock::new(lease(&server, "", "let_go"), SEC * 30);
    assert!(other.acquire(Duration::ZERO).unwrap());
    assert!(!lock.release().unwrap(), "not ours at the end");
    assert!(other.release().unwrap());
}

/// synchronized() asks `holding()` whether it runs nested in a hold of the
/// object: an acquire left unresolved is none (the call's own acquire()
/// adopts it, and its end releases it). Before, holding() adopted it and
/// synchronized() ran as if nested, leaving the lock held.
#[test]
fn an_unresolved_acquire_is_no_hold_to_nest_in() {
    let server = RedisServer::start();
    let (mut lock, _) = unresolved_acquire(&server, "nest", SEC * 30, "1");
    assert_eq!(lock.holding().unwrap(), None);
    assert!(
        lock.acquire(Duration::ZERO).unwrap(),
        "adopted by acquire()"
    );
    assert_eq!(lock.holding().unwrap(), Some(false));
    assert!(lock.release().unwrap());
}

/// A waiter handed the lock while it stalled (GC, SIGSTOP) past the grant's
/// ttl: with `wait_replicas`, the grant is extended on the waiter's own link
/// before it is counted on, and that finds it gone. It was never the waiter's
/// to count on, and no replica fell short (review, issue 30): the waiter asks
/// again, within its wait, and takes the lock, free by then. Before, acquire()
/// failed with "only 0 of the 1 replicas asked for acknowledged it", and
/// `wait_shortfalls`, an operator's alert, went up.
#[test]
fn a_grant_run_out_while_its_waiter_stalled_is_asked_for_again() {
    let (master, _replica) = support::master_and_replica();
    let mut raw = master.conn();
    let name = "stalled_waiter";
    let key = format!("lock:{{{name}}}");
    let proxy = HoldingProxy::start(master.port);
    let dsn = format!(
        "redis://127.0.0.1:{}?read_timeout=10&wait_replicas=1&wait_timeout=5000",
        proxy.port
    );
    let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
    let through = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()));
    let mut holder = Lock::new(lease(&master, "", name), SEC * 30);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let blocked = |raw: &mut redis::Connection| info_count(raw, "blocked_clients:");
    let before = blocked(&mut raw);
    let waiter = std::thread::spawn(move || {
        let mut lock = Lock::new(through, SEC);
        let got = lock.acquire(SEC * 30);
        let held = lock.hold().is_some();
        let _ = lock.release();
        (got, held)
    });
    // The waiter's next script (the grant's extension) is held, as if it
    // stalled right after its wake-up.
    proxy.hold_in_blpop(&mut raw, before);
    assert!(holder.release().unwrap());
    proxy.await_held(SEC * 10);
    assert!(
        proxy.held_contains(b"rl_refresh_"),
        "what is held is the grant's extension (not an attempt after the nap)"
    );
    await_until(SEC * 10, "the grant to run out", || !exists(&mut raw, &key));
    proxy.hold(false);
    let (got, held) = waiter.join().unwrap();
    assert!(got.unwrap(), "taken on asking again");
    assert!(held, "and counted on");
}

/// Runs `call` on `lock` (in a thread) with its script held by `proxy` past
/// `stall` by the caller's clock, then let through: what it answered, when it
/// was sent, and the lock.
fn stalled(
    proxy: &HoldingProxy,
    stall: Duration,
    mut lock: Lock,
    call: fn(&mut Lock) -> redis_lease::core::error::Result<bool>,
) -> (redis_lease::core::error::Result<bool>, Instant, Lock) {
    proxy.hold(true);
    let caller = std::thread::spawn(move || {
        let sent = Instant::now();
        (call(&mut lock), sent, lock)
    });
    proxy.await_held(SEC * 5);
    // The stall itself, not a wait for anything.
    std::thread::sleep(stall);
    proxy.hold(false);
    caller.join().unwrap()
}

/// An acquire whose script reached Redis only after its ttl had passed by our
/// clock (a stall on the way there: the lease is counted from the send): the
/// grant is counted on only once an owner-checked extension finds it still
/// ours, and then for a whole ttl from that extension. Before (review, stop
/// 55), acquire() said true for a hold whose bound had passed: with autoRenew
/// its watch ended at once, and the hold was reported lost.
#[test]
fn a_grant_read_after_its_ttl_is_extended_before_it_is_counted_on() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    // Long enough that the reconfirm, and the look at Redis after it, fit in
    // it on a loaded machine.
    let ttl = SEC;
    let lock = Lock::new(through_with(&proxy, "stalled-grant", 5), ttl).with_auto_renew(true);
    let stall = ttl + Duration::from_millis(200);
    let (got, sent, lock) = stalled(&proxy, stall, lock, |l| l.acquire(Duration::ZERO));
    assert!(got.unwrap(), "the lease the late script set is ours");
    let hold = lock.hold().expect("held, not lost at once");
    assert!(
        hold.safe_until() > sent + stall,
        "counted on from the extension, not from the send"
    );
    assert!(pttl(&server, "lock:{stalled-grant}") > 0);
}

/// A refresh answered only after the lease it set could have ended by our
/// clock (it stalled on its way): sent again, and counted on from the send
/// answered in time. Before (review, stop 55), refresh() said true for a hold
/// whose bound had passed.
#[test]
fn a_refresh_answered_after_its_ttl_is_sent_again_before_it_is_counted_on() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut lock = Lock::new(through_with(&proxy, "stalled-refresh", 5), SEC * 30);
    assert!(lock.acquire(Duration::ZERO).unwrap());
    // Long enough that the re-send, and the look at Redis after it, fit in
    // the lease on a loaded machine.
    let stall = Duration::from_millis(1200);
    let (got, sent, lock) = stalled(&proxy, stall, lock, |l| l.refresh(SEC));
    assert!(got.unwrap(), "the lease is still ours");
    let hold = lock.hold().expect("held");
    assert!(
        hold.safe_until() > sent + stall,
        "counted on from the send answered in time"
    );
    assert!(pttl(&server, "lock:{stalled-refresh}") > 0);
}

/// An upgrade of a read hold whose refresh got no answer: that refresh may
/// still run after the upgrade, and end the write lock at the refresh's ttl.
/// Read after that bound (here the upgrade waited for another reader), the
/// converted hold is extended first, which voids the refresh, and counted on
/// from then. Before (review, stop 55), acquire() said true for a hold whose
/// bound had passed: the late refresh could cut the lock to 300 ms under its
/// new writer.
#[test]
fn an_upgrade_read_after_a_carried_refresh_could_end_it_is_extended_first() {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut raw = server.conn();
    let mut lock = Lock::new(through_with(&proxy, "carried", 2), SEC * 30);
    let mut other = Lock::new(through_with(&proxy, "carried", 2), SEC * 30);
    assert!(lock.acquire_read(Duration::ZERO).unwrap());
    assert!(other.acquire_read(Duration::ZERO).unwrap());
    // Only the 300 ms refresh is held (by its ttl, as sent), until the end.
    proxy.hold_command(b"\r\n300\r\n");
    assert!(
        lock.refresh(Duration::from_millis(300)).is_err(),
        "unanswered"
    );
    proxy.await_held(SEC);
    let blocked = info_count(&mut raw, "blocked_clients:");
    let upgrade = std::thread::spawn(move || (lock.acquire(SEC * 10), lock));
    await_until(SEC * 10, "the upgrade to wait for its wake-up", || {
        info_count(&mut raw, "blocked_clients:") > blocked
    });
    // The stall itself, past the refresh's 300 ms from the upgrade's attempt,
    // not a wait for anything.
    std::thread::sleep(Duration::from_millis(500));
    assert!(other.release().unwrap());
    let (got, lock) = upgrade.join().unwrap();
    assert!(got.unwrap(), "the upgrade and the extension are ours");
    let hold = lock.hold().expect("held");
    assert!(!hold.shared, "upgraded");
    assert!(
        hold.safe_until() > Instant::now() + SEC * 20,
        "counted on from the extension (30 s), not up to the carried refresh's end"
    );
    // The refresh, let through now, was voided by the extension.
    let before = scripts_run(&mut raw);
    proxy.hold(false);
    await_until(SEC * 10, "the late refresh to run", || {
        scripts_run(&mut raw) > before
    });
    assert!(pttl(&server, "lock:{carried}") > 20_000);
}

/// A forced release takes the lock from whoever holds it, and a waiter the
/// release before it handed the lock (or a reader its shared hold), whose
/// wake-up it has not read yet, is such a holder: reading that grant after
/// the forced release, it must not count on it beside the next holder.
/// Before (review, stop 64), its BLPOP popped the stale wake-up and acquire()
/// answered true while another held the lock alone.
fn a_grant_read_after_a_forced_release_is_not_counted_on(name: &str, read: bool) {
    let server = RedisServer::start();
    let proxy = HoldingProxy::start(server.port);
    let mut holder = Lock::new(lease(&server, "", name), SEC * 30);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    // Only the waiter's link goes through the proxy: its wake-up is held.
    proxy.hold_command(b"BLPOP");
    let mut waiter = Lock::new(through_with(&proxy, name, 5), SEC * 30);
    let waiting = std::thread::spawn(move || {
        let got = if read {
            waiter.acquire_read(SEC * 5)
        } else {
            waiter.acquire(SEC * 5)
        };
        (got, waiter)
    });
    proxy.await_held(SEC * 10);
    assert!(holder.release().unwrap(), "handed to the waiter");
    assert!(lease(&server, "", name).force_release().unwrap());
    let mut other = Lock::new(lease(&server, "", name), SEC * 30);
    assert!(
        other.acquire(Duration::ZERO).unwrap(),
        "free after the forced release"
    );
    proxy.hold(false);
    let (got, waiter) = waiting.join().unwrap();
    assert!(!got.unwrap(), "the lock is another's alone");
    assert!(waiter.hold().is_none());
    assert!(other.release().unwrap());
}

#[test]
fn a_writer_granted_before_a_forced_release_does_not_count_on_it_after() {
    a_grant_read_after_a_forced_release_is_not_counted_on("forced_w", false);
}

#[test]
fn a_reader_granted_before_a_forced_release_does_not_count_on_it_after() {
    a_grant_read_after_a_forced_release_is_not_counted_on("forced_r", true);
}

/// A token whose release this process left for its next call (its reply
/// never came) may still be freed by it: restored, it is neither counted on
/// nor handed on. Before (review, stop 64), refresh() found it still held and
/// answered true, and detach() and getToken() handed it out, while the next
/// call's settle could free it under whoever counted on it.
#[test]
fn a_restored_token_whose_release_is_owed_is_not_refreshed() {
    let server = RedisServer::start();
    load_scripts(&server);
    let proxy = HoldingProxy::start(server.port);
    let dsn = format!("redis://127.0.0.1:{}?read_timeout=1", proxy.port);
    let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
    let keys = LeaseKeys::for_lock(b"lock:", b"owed");
    let mut first = Lock::new(Lease::new(Arc::new(ep), keys), SEC * 30);
    assert!(first.acquire(Duration::ZERO).unwrap());
    let token = first.token().unwrap().clone();
    proxy.hold(true);
    first.close(false);
    assert!(exists(&mut server.conn(), "lock:{owed}"), "not freed yet");
    let restore = || Lock::restore(lease(&server, "", "owed"), SEC * 30, token.clone(), false);
    let mut restored = restore().unwrap();
    assert!(!restored.refresh(SEC * 30).unwrap(), "its release is owed");
    assert!(restored.hold().is_none());
    assert_eq!(restore().unwrap().detach().unwrap(), None, "not handed on");
    assert_eq!(restore().unwrap().current_token(), None, "nor its token");
    proxy.hold(false);
}
