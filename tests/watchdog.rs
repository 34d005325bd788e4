//! The lease watchdog against a real redis-server: renewed leases outlive their
//! ttl while the holder does nothing, a lease found gone is reported lost, a
//! stopped Redis makes it expire on time without ever blocking the holder, and
//! many leases share one round trip.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lock::Lock;
use redis_lease::core::metrics::{self, Counter};
use redis_lease::core::session::{SessionConfig, SessionStore};
use redis_lease::core::watchdog::{self, Kind};
use support::{await_until, lock_lease as lease, pttl, RedisServer};

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_renewed_lease_outlives_its_ttl_while_the_holder_does_nothing() {
    let server = RedisServer::start();
    let ttl = MS * 300;
    let mut holder = Lock::new(lease(&server, "", "renewed"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let fence = holder.fence().unwrap().expect("held");
    let other = lease(&server, "", "renewed");
    // Five ttls of doing nothing (the point of the test, not a synchronization).
    let until = Instant::now() + ttl * 5;
    while Instant::now() < until {
        assert!(
            other.acquire(ttl, Duration::ZERO).unwrap().is_none(),
            "never free"
        );
        std::thread::sleep(MS * 20);
    }
    assert!(pttl(&server, "lock:{renewed}") > 0);
    assert_eq!(
        holder.fence().unwrap(),
        Some(fence),
        "renewal keeps the fence"
    );
    assert!(holder.release().unwrap());
    assert!(
        other.acquire(ttl, Duration::ZERO).unwrap().is_some(),
        "free after release"
    );
}

#[test]
fn release_stops_renewal_at_once() {
    let server = RedisServer::start();
    let ttl = MS * 300;
    let mut holder = Lock::new(lease(&server, "", "stops"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let renewal = holder.hold().unwrap().watch.clone().expect("renewed");
    assert!(renewal.watching());
    assert!(watchdog::watched() >= 1);
    assert!(holder.release().unwrap());
    assert!(!renewal.watching(), "no longer renewed");
    // A lease of the same name taken without renewal now ends at its ttl.
    let other = lease(&server, "", "stops");
    let h = other.acquire(ttl, Duration::ZERO).unwrap().unwrap();
    await_until(ttl * 3, "the unrenewed lease to end", || {
        pttl(&server, "lock:{stops}") < 0
    });
    assert!(!other.release(&h, false).unwrap());
}

#[test]
fn a_renewal_that_finds_the_lease_gone_marks_it_lost() {
    let server = RedisServer::start();
    let ttl = MS * 600;
    let lost_before = metrics::get(Counter::LockLost);
    let mut holder = Lock::new(lease(&server, "", "taken"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    // An operator (or a bug elsewhere) deletes the key; another holder takes it.
    let _: () = redis::cmd("DEL")
        .arg("lock:{taken}")
        .query(&mut server.conn())
        .unwrap();
    let other = lease(&server, "", "taken");
    let theirs = other.acquire(ttl * 10, Duration::ZERO).unwrap().unwrap();
    await_until(ttl, "the watchdog to notice", || holder.hold().is_none());
    assert!(metrics::get(Counter::LockLost) > lost_before);
    assert!(!holder.release().unwrap(), "release reports the loss");
    assert!(
        pttl(&server, "lock:{taken}") > 0,
        "the new holder's lease is untouched"
    );
    assert!(other.release(&theirs, false).unwrap());
}

#[test]
fn a_stopped_redis_makes_the_lease_expire_on_time_without_blocking_the_holder() {
    let server = RedisServer::start();
    let ttl = MS * 600;
    let mut holder =
        Lock::new(lease(&server, "?read_timeout=5", "stalled"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    // Right after a renewal, so the lease is ttl long when Redis stops.
    let renewals = metrics::get(Counter::AutoRenewals);
    await_until(ttl, "a renewal", || {
        metrics::get(Counter::AutoRenewals) > renewals
    });
    server.signal("STOP");
    let stopped = Instant::now();
    let mut slowest = Duration::ZERO;
    while holder.hold().is_some() {
        let t = Instant::now();
        let _ = holder.hold();
        slowest = slowest.max(t.elapsed());
        assert!(
            stopped.elapsed() < ttl * 2,
            "reported lost no later than its expiry"
        );
        std::thread::sleep(MS);
    }
    let lost_after = stopped.elapsed();
    server.signal("CONT");
    assert!(
        lost_after <= ttl + MS * 50,
        "lost after {lost_after:?}, ttl {ttl:?}"
    );
    assert!(
        lost_after >= ttl / 2,
        "not before the lease could end: {lost_after:?}"
    );
    assert!(
        slowest < MS * 20,
        "the holder was never blocked: {slowest:?}"
    );
    assert!(!holder.release().unwrap());
    // Released all the same, on this process's next call there (Redis may have
    // kept it a moment longer than we could count on it): the next holder does
    // not wait.
    let next = lease(&server, "?read_timeout=5", "stalled");
    let h = next.acquire(ttl, Duration::ZERO).unwrap().expect("free");
    assert!(next.release(&h, false).unwrap());
}

#[test]
fn many_leases_are_renewed_in_few_round_trips() {
    let server = RedisServer::start();
    let ttl = MS * 900;
    let n = 1000;
    let mut locks: Vec<Lock> = (0..n)
        .map(|i| Lock::new(lease(&server, "", &format!("many{i}")), ttl).with_auto_renew(true))
        .collect();
    for l in &mut locks {
        assert!(l.acquire(Duration::ZERO).unwrap());
    }
    let (renewed, trips) = (
        metrics::get(Counter::AutoRenewals),
        metrics::get(Counter::RenewalRoundTrips),
    );
    let t = Instant::now();
    std::thread::sleep(ttl * 3);
    let renewals = metrics::get(Counter::AutoRenewals) - renewed;
    let round_trips = metrics::get(Counter::RenewalRoundTrips) - trips;
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "{n} leases, ttl {ttl:?}: {:.0} renewals/s in {:.1} round trips/s",
        renewals as f64 / secs,
        round_trips as f64 / secs
    );
    assert!(
        renewals >= (n as u64) * 6,
        "each renewed about every ttl/3: {renewals}"
    );
    assert!(
        round_trips * 50 < renewals,
        "pipelined: {round_trips} round trips"
    );
    for l in &mut locks {
        assert!(l.release().unwrap(), "every lease held throughout");
    }
}

#[test]
fn a_session_lock_is_renewed_until_saved() {
    let server = RedisServer::start();
    let ep = Endpoint::parse(&server.dsn(), Timeouts::default()).unwrap();
    let config = SessionConfig {
        lock_ttl: MS * 300,
        lock_renew: true,
        lock_wait: Duration::ZERO,
        ..SessionConfig::default()
    };
    let store = SessionStore::new(Arc::new(ep), config);
    let (mut s, _) = store.open("renewedsession").unwrap();
    std::thread::sleep(MS * 1000);
    assert!(
        store.open("renewedsession").is_err(),
        "still locked after three ttls"
    );
    assert_eq!(
        store
            .write(&mut s, b"data", Duration::from_secs(60))
            .unwrap(),
        redis_lease::core::session::Saved::Yes
    );
    let (mut again, data) = store.open("renewedsession").unwrap();
    assert_eq!(data.as_deref(), Some(&b"data"[..]));
    store.close(&mut again).unwrap();
}

#[test]
fn a_lease_renewed_directly_through_the_core() {
    // `Lease::watch` on a bare Lease hold, as the session store does.
    let server = RedisServer::start();
    let l = lease(&server, "", "bare");
    let mut hold = l.acquire(MS * 300, Duration::ZERO).unwrap().unwrap();
    l.watch(&mut hold, Kind::Lock, true, 0);
    std::thread::sleep(MS * 900);
    assert!(
        hold.safe_until() > Instant::now(),
        "extended by the watchdog"
    );
    assert!(l.release(&hold, false).unwrap());
}

#[test]
fn with_wait_replicas_a_renewal_counts_only_once_replicated() {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    // Online is not enough: right after its first sync a replica may not
    // acknowledge for a moment. Wait until it acknowledges a write.
    support::await_acknowledged(&master);
    // Long enough that a loaded machine still confirms a renewal in time.
    let ttl = MS * 1500;
    let query = "?wait_replicas=1&wait_timeout=1000";
    // First, a lease on the same Redis that does not ask for WAIT: both share
    // one renewal thread, and each keeps its own rule.
    let mut plain = Lock::new(lease(&master, "", "plain"), ttl).with_auto_renew(true);
    assert!(plain.acquire(Duration::ZERO).unwrap());
    let mut holder = Lock::new(lease(&master, query, "durable"), ttl).with_auto_renew(true);
    let mut second = Lock::new(lease(&master, query, "second"), ttl).with_auto_renew(true);
    let acquired = Instant::now();
    assert!(holder.acquire(Duration::ZERO).unwrap());
    assert!(second.acquire(Duration::ZERO).unwrap());
    // A renewal the replica acknowledged moves the lease's end past the first one.
    await_until(ttl * 2, "an acknowledged renewal", || {
        holder
            .hold()
            .is_some_and(|h| h.safe_until() > acquired + ttl + MS * 100)
    });
    assert!(holder.hold().is_some(), "renewed while replicated");

    // A replica that stops answering: the master still extends the lease, but a
    // failover could lose that extension, so it is not counted and the hold ends
    // when the last replicated one does.
    let shortfalls = metrics::get(Counter::WaitShortfalls);
    replica.signal("STOP");
    let stopped = Instant::now();
    await_until(ttl * 2, "the hold to end", || holder.hold().is_none());
    let lost_after = stopped.elapsed();
    let extended_on_master = pttl(&master, "lock:{durable}");
    // The WAIT that came back short may end after the hold did (Redis ends a
    // WAIT on its 100 ms tick): it is counted when it does.
    await_until(MS * 3000, "the shortfall to be counted", || {
        metrics::get(Counter::WaitShortfalls) > shortfalls
    });
    replica.signal("CONT");
    assert!(
        lost_after <= ttl + MS * 50,
        "lost after {lost_after:?}, ttl {ttl:?}"
    );
    assert!(extended_on_master > 0, "the master alone kept extending it");
    assert!(second.hold().is_none(), "the other one given up too");
    // acquire() on a hold given up on lets it go first instead of queueing
    // behind its own old lease (which the master kept extending).
    let again = Instant::now();
    assert!(second.acquire(ttl).unwrap(), "taken again");
    assert!(
        again.elapsed() < ttl / 2,
        "not behind itself: {:?}",
        again.elapsed()
    );
    assert!(second.release().unwrap());
    assert!(!holder.release().unwrap_or(false), "not reported as held");
    // Given up by our reckoning is not taken by someone else: the release still
    // deletes it, so the next holder need not wait for the master's expiry.
    let mut next = Lock::new(lease(&master, "", "durable"), ttl);
    assert!(next.acquire(Duration::ZERO).unwrap(), "free at once");
    assert!(next.release().unwrap());
    assert!(plain.hold().is_some(), "renewed without WAIT throughout");
    assert!(plain.release().unwrap());
}

#[test]
fn a_renewal_never_shortens_a_lease_the_holder_made_longer() {
    // The watchdog's renewal (ttl 30 s) may be overtaken by the holder's own
    // refresh(60 s) on another link: arriving second, it must not cut the lease
    // back to 30 s while the holder counts on 60.
    use redis_lease::core::scripts::REFRESH;
    let server = RedisServer::start();
    let l = lease(&server, "", "longer");
    let mut hold = l.acquire(MS * 30_000, Duration::ZERO).unwrap().unwrap();
    assert!(l.refresh(&mut hold, MS * 60_000).unwrap());
    let stale = format!("lock:{{longer}}:stale:{}", hold.token.as_str());
    let n: i64 = REFRESH
        .key("lock:{longer}")
        .key("lock:{longer}:holders")
        .key("lock:{longer}:weights")
        .key(stale.as_bytes())
        .arg(hold.token.as_str())
        .arg(30_000)
        .arg("at_least")
        .invoke(&mut server.conn())
        .unwrap();
    assert_eq!(n, 1, "still ours");
    assert!(pttl(&server, "lock:{longer}") > 55_000, "not cut back");
    // The holder's own refresh sets it exactly, shorter too.
    assert!(l.refresh(&mut hold, MS * 5_000).unwrap());
    assert!(pttl(&server, "lock:{longer}") <= 5_000);
    assert!(l.release(&hold, false).unwrap());
}

/// Calls of FCALL, EVALSHA, EVAL and FUNCTION LOAD on `admin`'s server since its
/// last CONFIG RESETSTAT.
fn script_calls(admin: &mut redis::Connection) -> [u64; 4] {
    [
        "cmdstat_fcall:calls=",
        "cmdstat_evalsha:calls=",
        "cmdstat_eval:calls=",
        "cmdstat_function|load:calls=",
    ]
    .map(|p| support::info_count(admin, p))
}

fn reset_stats(admin: &mut redis::Connection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(admin)
        .unwrap();
}

/// Renewals run as the library's function (which a failover or restart keeps,
/// unlike the script cache); a flushed library is loaded again and the renewal
/// sent again as a function; an FCALL the user may not run falls back to the
/// script (EVAL, then EVALSHA for the link's life); `functions=0` renews by
/// EVALSHA. The lease outlives its ttl through each.
#[test]
fn renewals_run_as_functions_and_fall_back_to_scripts() {
    let server = RedisServer::start();
    let mut admin = server.conn();
    let ttl = MS * 300;
    let mut holder = Lock::new(lease(&server, "", "forms"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    let held = |what: &str| assert!(pttl(&server, "lock:{forms}") > 0, "{what}: still held");

    reset_stats(&mut admin);
    await_until(ttl * 10, "three renewals", || {
        script_calls(&mut admin)[0] >= 3
    });
    let [_, evalsha, eval, _] = script_calls(&mut admin);
    assert_eq!((evalsha, eval), (0, 0), "renewed as a function only");
    held("as functions");

    // FUNCTION FLUSH (or a new empty master): loaded again, then sent again.
    reset_stats(&mut admin);
    redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query::<()>(&mut admin)
        .unwrap();
    await_until(
        ttl * 10,
        "the library loaded again and two renewals",
        || {
            let [fcall, _, _, load] = script_calls(&mut admin);
            load >= 1 && fcall >= 3
        },
    );
    let [_, evalsha, eval, _] = script_calls(&mut admin);
    assert_eq!((evalsha, eval), (0, 0), "no script after a flushed library");
    held("after FUNCTION FLUSH");

    // FCALL refused by the user's ACL: the script, from then on.
    reset_stats(&mut admin);
    redis::cmd("ACL")
        .arg(&["SETUSER", "default", "-fcall"])
        .query::<()>(&mut admin)
        .unwrap();
    await_until(ttl * 10, "renewals by EVALSHA", || {
        script_calls(&mut admin)[1] >= 2
    });
    let [_, _, eval, _] = script_calls(&mut admin);
    assert!(eval >= 1, "the first refused renewal went by EVAL: {eval}");
    held("with FCALL refused");
    redis::cmd("ACL")
        .arg(&["SETUSER", "default", "+fcall"])
        .query::<()>(&mut admin)
        .unwrap();
    assert!(holder.release().unwrap(), "held throughout");

    // functions=0: EVALSHA only.
    let other = RedisServer::start();
    let mut admin = other.conn();
    let mut holder = Lock::new(lease(&other, "?functions=0", "forms0"), ttl).with_auto_renew(true);
    assert!(holder.acquire(Duration::ZERO).unwrap());
    reset_stats(&mut admin);
    await_until(ttl * 10, "three renewals", || {
        script_calls(&mut admin)[1] >= 3
    });
    let [fcall, _, _, load] = script_calls(&mut admin);
    assert_eq!((fcall, load), (0, 0), "functions=0: no function");
    assert!(pttl(&other, "lock:{forms0}") > 0, "functions=0: still held");
    assert!(holder.release().unwrap(), "held throughout");
}

/// A stand-in for Redis on a free port that answers every FCALL "Function not
/// found" (a library flushed again as soon as it is loaded, or a node the load
/// never reached), FUNCTION LOAD with a library's name, EVAL with 1, EVALSHA
/// NOSCRIPT and anything else +OK; it logs each command's name.
fn always_unloaded_redis(log: Arc<std::sync::Mutex<Vec<String>>>) -> u16 {
    support::stand_in(move |args| {
        let name = args[0].to_ascii_uppercase();
        let reply: &[u8] = match name.as_str() {
            "FCALL" => b"-ERR Function not found\r\n",
            "FUNCTION" => b"+redis_lease_x\r\n",
            "EVAL" => b":1\r\n",
            "EVALSHA" => b"-NOSCRIPT No matching script\r\n",
            _ => b"+OK\r\n",
        };
        log.lock().unwrap().push(name);
        reply.to_vec()
    })
}

/// A library loaded but missing again at once: the renewal loads it once, then
/// goes by the script (EVAL), and the lease is renewed; it never loops on
/// FUNCTION LOAD.
#[test]
fn a_library_missing_again_after_its_load_renews_by_the_script() {
    let server = RedisServer::start();
    let l = lease(&server, "", "unloaded");
    let ttl = MS * 300;
    let mut hold = l.acquire(ttl, Duration::ZERO).unwrap().unwrap();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let port = always_unloaded_redis(log.clone());
    let ep = Endpoint::parse(&format!("redis://127.0.0.1:{port}"), Timeouts::default()).unwrap();
    let fake = redis_lease::core::lease::Lease::new(Arc::new(ep), l.keys.clone());
    fake.watch(&mut hold, Kind::Lock, true, 0);
    await_until(ttl * 10, "three renewals by EVAL", || {
        log.lock().unwrap().iter().filter(|c| *c == "EVAL").count() >= 3
    });
    assert!(hold.safe_until() > Instant::now(), "renewed (by EVAL)");
    assert!(!hold.lost(), "never given up");
    let calls: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|c| ["FCALL", "FUNCTION", "EVAL", "EVALSHA"].contains(&c.as_str()))
        .cloned()
        .collect();
    // Each round: FCALL, FUNCTION (the load), FCALL, EVAL.
    let rounds: Vec<&[String]> = calls.chunks(4).filter(|r| r.len() == 4).collect();
    assert!(rounds.len() >= 3, "{calls:?}");
    for r in rounds {
        assert_eq!(r, ["FCALL", "FUNCTION", "FCALL", "EVAL"], "{calls:?}");
    }
    hold.stop_watch();
}
