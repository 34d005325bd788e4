//! Redis Cluster: locks and sessions on a real cluster (three masters, one
//! replica each), through slot migration and a master's failover.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lease::{Hold, Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::session::{Saved, SessionConfig, SessionStore};
use support::{await_until, exists, info_count, migrate, ClusterSet};

const SEC: Duration = Duration::from_secs(1);

fn lease(dsn: &str, name: &str) -> Lease {
    let ep = Endpoint::parse(dsn, Timeouts::default()).unwrap();
    Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

/// Lock names whose keys live on `n` different masters.
fn names_on_every_master(set: &ClusterSet, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut owners = Vec::new();
    for i in 0.. {
        let name = format!("spread{i}");
        let port = set.owner_of(&format!("lock:{{{name}}}")).port;
        if !owners.contains(&port) {
            owners.push(port);
            names.push(name);
        }
        if names.len() == n {
            break;
        }
    }
    names
}

/// Locks on `names`, renewed by the watchdog, each taken.
fn renewed_locks(dsn: &str, names: &[String], ttl: Duration) -> Vec<redis_lease::core::lock::Lock> {
    let mut locks: Vec<redis_lease::core::lock::Lock> = names
        .iter()
        .map(|n| redis_lease::core::lock::Lock::new(lease(dsn, n), ttl).with_auto_renew(true))
        .collect();
    for l in &mut locks {
        assert!(l.acquire(Duration::ZERO).unwrap());
    }
    locks
}

/// The slot of `key`, and a master other than the one serving it.
fn slot_and_another_master<'a>(set: &'a ClusterSet, key: &str) -> (i64, &'a support::RedisServer) {
    let slot = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut set.any().conn())
        .unwrap();
    let owner = set.owner_of(key).port;
    (slot, set.nodes.iter().find(|n| n.port != owner).unwrap())
}

#[test]
fn locks_and_sessions_on_a_cluster() {
    let set = ClusterSet::start(3, 1);
    let dsn = set.dsn("?timeout=1&read_timeout=1");
    for name in names_on_every_master(&set, 3) {
        let l = lease(&dsn, &name);
        let mut h = l.acquire(SEC * 10, Duration::ZERO).unwrap().expect("free");
        l.fence(&mut h).unwrap();
        let key = format!("lock:{{{name}}}");
        assert!(
            exists(&mut set.owner_of(&key).conn(), &key),
            "{key} on its master"
        );
        // A waiter on another thread is handed the lock on release.
        let waiter = {
            let l = lease(&dsn, &name);
            std::thread::spawn(move || l.acquire(SEC * 10, SEC * 10).unwrap())
        };
        let mut raw = set.owner_of(&key).conn();
        await_until(SEC * 5, "the waiter to queue", || {
            exists(&mut raw, &format!("{key}:waiters"))
        });
        assert!(l.release(&h, false).unwrap());
        let handed: Hold = waiter.join().unwrap().expect("handed over");
        assert!(handed.fence > h.fence);
        assert!(l.release(&handed, false).unwrap());
        assert!(
            !l.release(&handed, false).unwrap(),
            "a second release finds it gone"
        );
        assert!(
            !exists(&mut raw, &format!("{key}:done:{}", handed.token.as_str())),
            "no done marker: nothing is sent twice"
        );
        let stranger = redis_lease::core::lease::Token::generate();
        assert!(
            !l.release_token(&stranger).unwrap(),
            "another token's unlock is refused"
        );
    }
    let ep = Arc::new(Endpoint::parse(&dsn, Timeouts::default()).unwrap());
    let store = SessionStore::new(ep, SessionConfig::default());
    for id in ["clustersessiona", "clustersessionb", "clustersessionc"] {
        let (mut s, data) = store.open(id).unwrap();
        assert_eq!(data, None);
        assert_eq!(
            store.write(&mut s, b"a|i:1;", SEC * 60).unwrap(),
            Saved::Yes
        );
        let (mut s, data) = store.open(id).unwrap();
        assert_eq!(data.as_deref(), Some(&b"a|i:1;"[..]));
        assert!(store.close(&mut s).unwrap());
    }
}

#[test]
fn contending_threads_on_three_masters_never_overlap() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("");
    let names = names_on_every_master(&set, 3);
    let counters: Arc<Vec<std::sync::atomic::AtomicI64>> = Arc::new(
        (0..3)
            .map(|_| std::sync::atomic::AtomicI64::new(0))
            .collect(),
    );
    let mut threads = Vec::new();
    for t in 0..6 {
        let (dsn, names, counters) = (dsn.clone(), names.clone(), counters.clone());
        threads.push(std::thread::spawn(move || {
            let mut fences = vec![Vec::new(); 3];
            for round in 0..60 {
                let i = (t + round) % 3;
                let l = lease(&dsn, &names[i]);
                let mut h = l.acquire(SEC * 5, SEC * 20).unwrap().expect("in time");
                l.fence(&mut h).unwrap();
                let v = counters[i].load(std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(200));
                counters[i].store(v + 1, std::sync::atomic::Ordering::SeqCst);
                fences[i].push((Instant::now(), h.fence));
                assert!(l.release(&h, false).unwrap());
            }
            fences
        }));
    }
    let mut per_name = vec![Vec::new(); 3];
    for t in threads {
        for (i, f) in t.join().unwrap().into_iter().enumerate() {
            per_name[i].extend(f);
        }
    }
    let total: i64 = counters
        .iter()
        .map(|c| c.load(std::sync::atomic::Ordering::SeqCst))
        .sum();
    assert_eq!(total, 360, "no lost update");
    for mut f in per_name {
        f.sort();
        assert!(
            f.windows(2).all(|w| w[0].1 < w[1].1),
            "fences rise with every grant of a name"
        );
    }
}

#[test]
fn a_slot_migrates_under_a_held_lock_and_a_waiter() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=1&read_timeout=1");
    let l = lease(&dsn, "migrating");
    let mut h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    l.fence(&mut h).unwrap();
    let key = "lock:{migrating}";
    let (slot, to) = slot_and_another_master(&set, key);
    let waiter = {
        let l = lease(&dsn, "migrating");
        std::thread::spawn(move || l.acquire(SEC * 30, SEC * 15).unwrap())
    };
    let mut raw = set.owner_of(key).conn();
    await_until(SEC * 5, "the waiter to queue", || {
        exists(&mut raw, "lock:{migrating}:waiters")
    });
    set.move_slot(slot, to);
    assert_eq!(set.owner_of(key).port, to.port, "the slot moved");
    // The holder, its lease and the queue moved with the slot: the holder extends
    // and releases on the new master, which hands the lock to the waiter.
    let mut h2 = h.clone();
    assert!(l.refresh(&mut h2, SEC * 30).unwrap());
    assert!(l.release(&h2, false).unwrap());
    let handed = waiter.join().unwrap().expect("the waiter got it");
    assert!(handed.fence > h.fence);
    assert!(exists(&mut to.conn(), key));
    assert!(l.release(&handed, false).unwrap());
}

#[test]
fn a_script_whose_keys_all_moved_mid_migration_follows_the_ask() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=1&read_timeout=2");
    let l = lease(&dsn, "asked");
    // A fencing counter (from an earlier holder), and a holder whose fence is
    // still unassigned: the fence script's two keys.
    let mut first = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    let earlier = l.fence(&mut first).unwrap().expect("held");
    assert!(l.release(&first, false).unwrap());
    let mut h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    let key = "lock:{asked}";
    let (slot, to) = slot_and_another_master(&set, key);
    let from = set.begin_move(slot, to);
    // Both keys are on the importing node, the slot still the old master's: it
    // answers ASK, and the script runs there only after an ASKING.
    support::migrate_rest(&set, from, to, slot);
    assert!(set.keys_in_slot(from, slot).is_empty());
    let asked = info_count(&mut to.conn(), "cmdstat_asking:calls=");
    let fence = l.fence(&mut h).unwrap().expect("still held");
    assert!(fence > earlier, "{fence} after {earlier}");
    assert_eq!(
        info_count(&mut to.conn(), "cmdstat_asking:calls=") - asked,
        1,
        "asked once"
    );
    set.finish_move(slot, to);
    assert!(l.release(&h, false).unwrap(), "released on the new master");
    assert!(!exists(&mut to.conn(), key));
}

/// The fault of a node that answers late: stopped now, it goes on after more
/// than one read timeout (0.5 s) but less than two, so that a copy of a command
/// resent on a fresh link (as redis-rs's cluster client did) would be answered
/// too. Join the handle to know it goes on.
fn stall(node: &support::RedisServer) -> std::thread::JoinHandle<()> {
    let pid = node.pid();
    node.signal("STOP");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(750));
        support::signal_pid(pid, "CONT");
    })
}

#[test]
fn a_release_whose_reply_is_late_runs_once_and_is_reported_unresolved() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=0.5&read_timeout=0.5");
    let l = lease(&dsn, "once");
    let h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    let owner = set.owner_of("lock:{once}");
    let before = info_count(&mut owner.conn(), "cmdstat_fcall:calls=");
    let resume = stall(owner);
    let first = l.release(&h, false);
    resume.join().unwrap();
    match first {
        Err(redis_lease::core::error::Error::Unresolved { token, .. }) => {
            assert_eq!(token.as_str(), h.token.as_str())
        }
        other => panic!("a late reply is an unresolved release, not {other:?}"),
    }
    await_until(SEC * 5, "the release to run", || {
        !exists(&mut owner.conn(), "lock:{once}")
    });
    assert_eq!(
        info_count(&mut owner.conn(), "cmdstat_fcall:calls=") - before,
        1,
        "sent once, never again"
    );
    // Asked again, as the error tells callers to: released (by the first run).
    assert!(l.release(&h, true).unwrap());
}

#[test]
fn a_script_caught_mid_migration_waits_for_it_to_finish() {
    let set = ClusterSet::start(3, 0);
    // The read timeout is how long a command may keep being sent back.
    let dsn = set.dsn("?timeout=1&read_timeout=5");
    let holder = lease(&dsn, "split");
    let mut h = holder
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap()
        .expect("free");
    // Its fencing token: the counter is a second key in the slot.
    holder.fence(&mut h).unwrap();
    let key = "lock:{split}";
    let (slot, to) = slot_and_another_master(&set, key);
    let from = set.begin_move(slot, to);
    // Half-way: the lease has moved, its fence counter has not. Scripts that
    // touch both are refused with TRYAGAIN until the move is over.
    migrate(from, to, vec![key.as_bytes().to_vec()]);
    assert!(!set.keys_in_slot(from, slot).is_empty(), "keys left behind");
    let refused = info_count(&mut from.conn(), "errorstat_TRYAGAIN:count=");
    let contender = {
        let l = lease(&dsn, "split");
        std::thread::spawn(move || l.acquire(SEC * 30, Duration::ZERO))
    };
    // redis-rs alone tries twice (CLUSTER_RETRIES = 1), then gives up.
    await_until(
        SEC * 4,
        "the contender to be refused again and again",
        || info_count(&mut from.conn(), "errorstat_TRYAGAIN:count=") >= refused + 4,
    );
    assert!(!contender.is_finished(), "still waiting for the move");
    support::migrate_rest(&set, from, to, slot);
    set.finish_move(slot, to);
    let got = contender
        .join()
        .unwrap()
        .expect("no error: the move finished in time");
    assert!(got.is_none(), "the lock is still held");
    assert!(
        holder.release(&h, false).unwrap(),
        "released on the new master"
    );
}

/// A free lock's slot begins to move and stays open: the old master holds
/// none of the script's keys and answers ASK, the new one, asked, holds not all
/// of them and answers TRYAGAIN, over and over until the move ends. That is
/// followed for the read timeout, not cut off after 16 ASKs (~0.7 s) with the
/// ASK as the answer (review, stop 58).
#[test]
fn a_free_locks_slot_left_half_moved_is_asked_about_until_the_move_ends() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=1&read_timeout=8");
    let key = "lock:{asking}";
    let (slot, to) = slot_and_another_master(&set, key);
    set.begin_move(slot, to);
    let asked = info_count(&mut to.conn(), "cmdstat_asking:calls=");
    let contender = {
        let l = lease(&dsn, "asking");
        std::thread::spawn(move || l.acquire(SEC * 30, Duration::ZERO))
    };
    await_until(SEC * 6, "the contender to ask 20 times", || {
        contender.is_finished() || info_count(&mut to.conn(), "cmdstat_asking:calls=") >= asked + 20
    });
    assert!(!contender.is_finished(), "still following the move");
    set.finish_move(slot, to);
    let got = contender
        .join()
        .unwrap()
        .expect("no error: the move ended in time");
    let h = got.expect("the lock was free");
    assert!(exists(&mut to.conn(), key), "taken on the new master");
    assert!(lease(&dsn, "asking").release(&h, false).unwrap());
}

#[test]
fn a_master_fails_over_and_locks_go_on_with_rising_fences() {
    let mut set = ClusterSet::start(3, 1);
    let dsn = set.dsn("?timeout=0.5&read_timeout=0.5");
    let l = lease(&dsn, "failover");
    let mut h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    l.fence(&mut h).unwrap();
    assert!(l.release(&h, false).unwrap());
    let key = "lock:{failover}";
    let port = set.owner_of(key).port;
    let i = set.nodes.iter().position(|n| n.port == port).unwrap();
    set.nodes[i].kill_and_hold_port();
    // Calls fail (fast) until the replica is promoted, then succeed.
    let mut next = None;
    await_until(SEC * 30, "a replica to take over", || {
        next = l.acquire(SEC * 30, Duration::ZERO).ok().flatten();
        next.is_some()
    });
    let mut next = next.unwrap();
    l.fence(&mut next).unwrap();
    assert!(next.fence > h.fence, "fences rise across the failover");
    assert_ne!(set.owner_of(key).port, port, "a replica took over");
    assert!(l.release(&next, false).unwrap());
}

#[test]
fn wait_replicas_on_a_cluster_waits_on_the_keys_master() {
    let set = ClusterSet::start(3, 1);
    let mut masters = 0;
    support::await_until(SEC * 20, "replicas in sync", || {
        masters = 0;
        set.nodes.iter().all(|n| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut n.conn())
                .unwrap();
            if info.contains("role:master") {
                masters += 1;
                info.contains("state=online")
            } else {
                true
            }
        })
    });
    let dsn = set.dsn("?wait_replicas=1&wait_timeout=1000");
    for name in names_on_every_master(&set, 3) {
        let l = lease(&dsn, &name);
        let h = l
            .acquire(SEC * 10, Duration::ZERO)
            .unwrap()
            .expect("acknowledged");
        assert!(l.release(&h, false).unwrap());
    }
    let ep = Arc::new(Endpoint::parse(&dsn, Timeouts::default()).unwrap());
    let store = SessionStore::new(ep, SessionConfig::default());
    for i in 0..20 {
        let id = format!("waitsession{i}");
        let (mut s, _) = store.open(&id).unwrap();
        assert_eq!(
            store.write(&mut s, b"a|i:1;", SEC * 60).unwrap(),
            Saved::Yes,
            "{id}"
        );
    }
    // Renewals are waited for too, each on its own key's master.
    let ttl = Duration::from_millis(600);
    let mut locks = renewed_locks(&dsn, &names_on_every_master(&set, 3), ttl);
    // Four ttls of doing nothing: only acknowledged renewals keep them held.
    // (Each hold says so: the process-wide shortfall count is shared with the
    // other tests of this binary that run beside this one.)
    std::thread::sleep(ttl * 4);
    for l in &mut locks {
        assert!(l.hold().is_some(), "renewed and acknowledged");
        assert!(l.release().unwrap());
    }
}

#[test]
fn renewed_locks_on_every_master_outlive_their_ttl() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=1&read_timeout=1");
    let ttl = Duration::from_millis(400);
    let names = names_on_every_master(&set, 3);
    let mut locks = renewed_locks(&dsn, &names, ttl);
    // Four ttls of doing nothing; the first renewal meets NOSCRIPT (refresh.lua
    // was never run there) and is sent again as EVAL.
    std::thread::sleep(ttl * 4);
    for n in &names {
        let other = lease(&dsn, n);
        assert!(
            other.acquire(ttl, Duration::ZERO).unwrap().is_none(),
            "{n} still held"
        );
    }
    for l in &mut locks {
        assert!(l.release().unwrap());
    }
}

#[test]
fn a_reply_later_than_the_read_timeout_never_answers_another_command() {
    let set = ClusterSet::start(3, 0);
    let dsn = set.dsn("?timeout=0.5&read_timeout=0.5");
    let l = lease(&dsn, "late");
    let h = l.acquire(SEC * 30, Duration::ZERO).unwrap().expect("free");
    assert!(l.release(&h, false).unwrap());
    let owner = set.owner_of("lock:{late}");
    // Later calls go to the same node (so to the same connection of the link).
    let other = (0..)
        .map(|i| format!("late{i}"))
        .find(|n| set.owner_of(&format!("lock:{{{n}}}")).port == owner.port)
        .unwrap();
    let resume = stall(owner);
    let first = l.acquire(SEC * 30, Duration::ZERO);
    resume.join().unwrap();
    if let Ok(Some(h)) = &first {
        assert!(l.release(h, false).unwrap(), "its own reply");
    }
    // Whatever that call said, every later call gets its own reply.
    let next = lease(&dsn, &other);
    for _ in 0..20 {
        let mut h = next
            .acquire(SEC * 30, Duration::ZERO)
            .unwrap()
            .expect("free");
        next.fence(&mut h).unwrap();
        assert!(h.fence > 0);
        assert!(next.release(&h, false).unwrap());
    }
}

/// Every node goes on serving its slots when a dead master is marked failed.
fn partial_coverage(set: &ClusterSet) {
    for n in &set.nodes {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-require-full-coverage")
            .arg("no")
            .query(&mut n.conn())
            .unwrap();
    }
}

/// A master that cannot be reached, before anything of the call went out: the
/// call fails as a failed connection does (nothing ran, nothing to settle), not
/// as one whose outcome is unknown, and the link, in step with the masters it
/// reached, stays pooled.
#[test]
fn a_master_that_cannot_be_reached_fails_the_call_as_nothing_sent() {
    let set = ClusterSet::start(3, 0);
    partial_coverage(&set);
    let names = names_on_every_master(&set, 2);
    let near_port = set.owner_of(&format!("lock:{{{}}}", names[0])).port;
    let far_port = set.owner_of(&format!("lock:{{{}}}", names[1])).port;
    // The functions loaded on every master, by another link.
    let warm = lease(&set.dsn("?timeout=0.5"), &names[1]);
    let w = warm
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap()
        .expect("free");
    assert!(warm.release(&w, false).unwrap());
    // Seeded with near's master alone: the pooled link learns the slot map there
    // and holds a connection to it, none yet to far's.
    let dsn = format!("redis-cluster://127.0.0.1:{near_port}?timeout=0.5&read_timeout=0.5");
    let (near, far) = (lease(&dsn, &names[0]), lease(&dsn, &names[1]));
    let h = near
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap()
        .expect("free");
    let i = set.nodes.iter().position(|n| n.port == far_port).unwrap();
    set.nodes[i].signal("KILL");
    await_until(SEC * 5, "the killed master's port to close", || {
        std::net::TcpStream::connect(("127.0.0.1", far_port)).is_err()
    });
    let near_node = set.nodes.iter().find(|n| n.port == near_port).unwrap();
    let before = info_count(&mut near_node.conn(), "total_connections_received:");
    match far.acquire(SEC * 30, Duration::ZERO) {
        Err(redis_lease::core::error::Error::Connection(m)) => {
            assert!(m.contains("Cannot reach"), "{m}")
        }
        other => panic!("nothing was sent: a connection error, not {other:?}"),
    }
    // The release reuses the pooled link: near's master sees one connection more,
    // the INFO's own.
    assert!(near.release(&h, false).unwrap());
    assert_eq!(
        info_count(&mut near_node.conn(), "total_connections_received:") - before,
        1,
        "the link stayed pooled"
    );
}

/// A master that lost the library (flushed, restarted, a node new to the
/// Cluster) while another master cannot be reached: the library is loaded on
/// the masters that answer, and the call runs (review, stop 58: the load, sent
/// to every master, failed with the unreachable one's error, and so did the
/// call).
#[test]
fn a_library_is_loaded_past_a_master_that_cannot_be_reached() {
    let set = ClusterSet::start(3, 0);
    partial_coverage(&set);
    let names = names_on_every_master(&set, 2);
    let near_node = set.owner_of(&format!("lock:{{{}}}", names[0]));
    let far_port = set.owner_of(&format!("lock:{{{}}}", names[1])).port;
    let dsn = set.dsn("?timeout=0.5&read_timeout=0.5");
    let near = lease(&dsn, &names[0]);
    let h = near
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap()
        .expect("free");
    assert!(near.release(&h, false).unwrap());
    let i = set.nodes.iter().position(|n| n.port == far_port).unwrap();
    set.nodes[i].signal("KILL");
    await_until(SEC * 5, "the killed master's port to close", || {
        std::net::TcpStream::connect(("127.0.0.1", far_port)).is_err()
    });
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut near_node.conn())
        .unwrap();
    let h = near
        .acquire(SEC * 30, Duration::ZERO)
        .unwrap()
        .expect("free, and run as a function again");
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut near_node.conn())
        .unwrap();
    assert_eq!(
        libraries.len(),
        1,
        "loaded again on the master that lost it"
    );
    assert!(near.release(&h, false).unwrap());
}

/// A renewal whose scripts one master lost (flushed, restarted, promoted: its
/// script cache is not replicated) is sent again by EVAL in a second round;
/// the WAIT that follows still covers the renewals of the first round, on
/// the other masters. Before, the second round forgot where the first one
/// wrote: the WAIT failed, and the locks on healthy masters were lost.
#[test]
fn renewals_sent_again_on_one_master_are_still_waited_for_on_the_others() {
    let set = ClusterSet::start(3, 1);
    support::await_until(SEC * 20, "replicas in sync", || {
        set.nodes.iter().all(|n| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut n.conn())
                .unwrap();
            !info.contains("role:master") || info.contains("state=online")
        })
    });
    let dsn = set.dsn("?wait_replicas=1&wait_timeout=1000&functions=0");
    let ttl = Duration::from_millis(1500);
    let names = names_on_every_master(&set, 2);
    let mut locks = renewed_locks(&dsn, &names, ttl);
    // The second lock's master forgets its scripts every 100 ms.
    let flushed = set.owner_of(&format!("lock:{{{}}}", names[1])).port;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{flushed}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            let mut flushes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).unwrap();
                flushes += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
            flushes
        })
    };
    let until = Instant::now() + ttl * 4;
    await_until(ttl * 8, "four ttls to pass", || Instant::now() >= until);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(flusher.join().unwrap() > 20);
    for (l, n) in locks.iter_mut().zip(&names) {
        assert!(l.hold().is_some(), "{n}: renewed and acknowledged");
        assert!(l.release().unwrap(), "{n}: held throughout");
    }
}

/// The replica serving as `master`'s, per CLUSTER REPLICAS (once it has one).
fn replica_of<'a>(set: &'a ClusterSet, master: &support::RedisServer) -> &'a support::RedisServer {
    let id = set.node_id(master);
    let mut port = None;
    await_until(SEC * 10, "the master to list its replica", || {
        let lines: Vec<String> = redis::cmd("CLUSTER")
            .arg("REPLICAS")
            .arg(&id)
            .query(&mut master.conn())
            .unwrap();
        port = lines
            .first()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|a| a.split(['@', ':']).nth(1))
            .and_then(|p| p.parse::<u16>().ok());
        port.is_some()
    });
    set.nodes.iter().find(|n| Some(n.port) == port).unwrap()
}

/// A Cluster announces no failover. Before, nothing checked a hold on the
/// promoted replica (no Sentinel generation: every check inert), and a holder
/// that sent nothing counted on a lock the new master did not have for its
/// whole ttl (two holders; review of stop 61). Now the watchdog asks for the
/// slot map while it watches holds: a slot served by another master counts as
/// a failover, a hold the new master lacks is lost to its holder, who sent
/// nothing, and one it keeps for less is counted on no longer than it keeps it.
#[test]
fn a_failover_nobody_called_through_is_learned_and_holds_the_new_master_lacks_are_lost() {
    let mut set = ClusterSet::start(3, 1);
    let dsn = set.dsn("?timeout=0.5&read_timeout=1");
    // Two locks on one master, not renewed: only the failover check watches them.
    let first = "kept";
    let master_port = set.owner_of(&format!("lock:{{{first}}}")).port;
    let second = (0..)
        .map(|i| format!("gone{i}"))
        .find(|n| set.owner_of(&format!("lock:{{{n}}}")).port == master_port)
        .unwrap();
    let (kept_key, gone_key) = (format!("lock:{{{first}}}"), format!("lock:{{{second}}}"));
    let m = set
        .nodes
        .iter()
        .position(|n| n.port == master_port)
        .unwrap();
    let replica_port = replica_of(&set, &set.nodes[m]).port;
    let r = set
        .nodes
        .iter()
        .position(|n| n.port == replica_port)
        .unwrap();
    let mut kept = Lock::new(lease(&dsn, first), SEC * 30);
    let mut gone = Lock::new(lease(&dsn, &second), SEC * 30);
    assert!(kept.acquire(Duration::ZERO).unwrap());
    await_until(SEC * 5, "the replica to have the first", || {
        let mut c = set.nodes[r].conn();
        let _: () = redis::cmd("READONLY").query(&mut c).unwrap();
        exists(&mut c, &kept_key)
    });
    // The replica stops hearing from its master, which then grants the second
    // lock and extends the first (neither reaches the replica), and dies.
    // (Its link closed by the master: what it had sent stays in the kernel's
    // buffers, and a stopped replica would read it on waking.)
    set.nodes[r].signal("STOP");
    let dropped: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica")
        .query(&mut set.nodes[m].conn())
        .unwrap();
    assert_eq!(dropped, 1, "the replica's link");
    assert!(gone.acquire(Duration::ZERO).unwrap());
    assert!(kept.refresh(SEC * 60).unwrap());
    assert!(kept.hold().unwrap().safe_until() > Instant::now() + SEC * 55);
    set.nodes[m].kill_and_hold_port();
    set.nodes[r].signal("CONT");
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("FORCE")
        .query(&mut set.nodes[r].conn())
        .unwrap();
    await_until(SEC * 15, "the replica to take over", || {
        set.owner_of(&kept_key).port == replica_port
    });
    assert!(
        !exists(&mut set.nodes[r].conn(), &gone_key),
        "the promoted replica never had the second lock"
    );
    // Neither holder sends anything: the watchdog learns of it within its poll.
    await_until(SEC * 10, "the missing hold to be reported lost", || {
        gone.hold().is_none()
    });
    assert!(
        kept.hold().is_some(),
        "a hold the new master has stays held"
    );
    await_until(SEC * 10, "the extended hold to be checked", || {
        kept.hold().unwrap().safe_until() < Instant::now() + SEC * 31
    });
    assert!(kept.release().unwrap());
    assert!(!gone.release().unwrap());
}
