//! Resources of a process after its work is done: one background thread at most,
//! whatever the number of DSNs, and every connection closed once idle. Its own
//! test binary: it counts the threads and descriptors of the whole process.

mod support;

use std::sync::Arc;
use std::time::Duration;

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::lock::Lock;
use redis_lease::core::{pool, watchdog};
use support::{await_until, RedisServer};

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn sixteen_dsns_use_one_thread_and_close_their_connections_when_idle() {
    let server = RedisServer::start();
    pool::set_idle_timeout(Some(Duration::from_millis(300)));
    let threads_before = count("/proc/self/task");
    let fds_before = count("/proc/self/fd");
    // 16 databases: 16 endpoints to the pool and to the watchdog.
    let mut locks: Vec<Lock> = (0..16)
        .map(|db| {
            let dsn = format!("{}/{db}", server.dsn());
            let ep = Endpoint::parse(&dsn, Timeouts::default()).unwrap();
            let lease = Lease::new(Arc::new(ep), LeaseKeys::for_lock(b"lock:", b"idle"));
            Lock::new(lease, Duration::from_millis(600)).with_auto_renew(true)
        })
        .collect();
    for l in &mut locks {
        assert!(l.acquire(Duration::ZERO).unwrap());
    }
    // Renewed while held (a third of the ttl), all by one thread.
    std::thread::sleep(Duration::from_millis(700));
    assert!(locks.iter().all(|l| l.hold().is_some()), "all renewed");
    assert_eq!(watchdog::threads(), 1);
    assert_eq!(count("/proc/self/task"), threads_before + 1, "one thread");
    for l in &mut locks {
        assert!(l.release().unwrap());
    }
    let busy_fds = count("/proc/self/fd");
    assert!(busy_fds >= fds_before + 16, "{busy_fds} fds while in use");
    // What a request's end does (the PHP layer calls it): the thread stays to
    // close what becomes idle, then ends.
    watchdog::keep_watch();
    await_until(
        Duration::from_secs(10),
        "the idle links to close and the thread to end",
        || {
            watchdog::threads() == 0
                && count("/proc/self/task") == threads_before
                && count("/proc/self/fd") == fds_before
        },
    );
    eprintln!(
        "threads {threads_before} -> {} -> {threads_before}, fds {fds_before} -> {busy_fds} -> {}",
        threads_before + 1,
        count("/proc/self/fd")
    );
    assert_eq!(pool::idle_links(), 0);
}
