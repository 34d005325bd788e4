//! One link per Redis endpoint per process, kept across requests.
//!
//! A php-fpm worker serves thousands of requests; reconnecting for each would add
//! a TCP (and TLS) handshake, AUTH and SELECT to every request. Links are made
//! lazily (never in MINIT, which runs in the php-fpm master before it forks),
//! replaced when broken, and forgotten in a forked child: parent and child must
//! never share one socket, or their replies interleave. What a link is (one node,
//! a Sentinel's master, a Cluster) is `topology`'s business.
//!
//! A link is taken out of the pool for the duration of one command. If the
//! command fails mid-way, the caller drops it instead of returning it, so a link
//! with an unread reply pending is never reused.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::dsn::{Endpoint, Identity};
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter};
use crate::core::topology::{self, Link};

struct Pool {
    pid: u32,
    /// A worker talks to one or two endpoints: a short list beats hashing.
    idle: Vec<(Identity, Link, Duration)>,
    /// When each endpoint last failed to connect or answer (see `recently_failed`).
    failed: Vec<(Identity, Instant)>,
}

impl Pool {
    fn new(pid: u32) -> Pool {
        Pool {
            pid,
            idle: Vec::new(),
            failed: Vec::new(),
        }
    }
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// Runs `f` on this process's pool (a fresh one after fork).
fn with_pool<T>(f: impl FnOnce(&mut Pool) -> T) -> T {
    let mut guard = POOL.lock();
    let pid = crate::core::pid::current();
    if guard.as_ref().is_none_or(|p| p.pid != pid) {
        // First use, or first use after fork(): the inherited sockets belong to the
        // parent. Dropping them only closes this process's copies of the
        // descriptors (redis-rs sends nothing and calls no shutdown() on drop), so
        // the parent's connections are untouched.
        drop(guard.take());
        *guard = Some(Pool::new(pid));
    }
    f(guard.as_mut().expect("just set"))
}

/// A link borrowed from the pool. Give it back with [`Conn::recycle`] once its
/// last reply has been read; dropping it closes it.
pub struct Conn {
    id: Identity,
    pub(crate) inner: Link,
    read_timeout: Duration,
}

impl Conn {
    /// Takes this process's link to `ep`, connecting if there is none.
    pub fn checkout(ep: &Endpoint) -> Result<Conn> {
        let pooled = with_pool(|pool| {
            pool.idle
                .iter()
                .position(|(id, _, _)| ep.is(id))
                .map(|i| pool.idle.swap_remove(i))
        });
        let mut conn = match pooled {
            Some((id, inner, read_timeout)) => Conn {
                id,
                inner,
                read_timeout,
            },
            None => {
                let inner = topology::open(ep).inspect_err(|_| {
                    metrics::incr(Counter::ConnectionErrors);
                    note_failure(ep);
                })?;
                Conn {
                    id: ep.identity(),
                    inner,
                    read_timeout: ep.timeouts.read,
                }
            }
        };
        // Two DSNs for one Redis share a link; each call has its own read timeout.
        if conn.read_timeout != ep.timeouts.read {
            conn.read_timeout = ep.timeouts.read;
            conn.reset_read_timeout()
                .map_err(|e| connection_error(ep, "Cannot configure the connection to", &e))?;
        }
        Ok(conn)
    }

    /// Returns the link to the pool for the next command: its endpoint answered,
    /// so it has not failed recently any more.
    pub fn recycle(self) {
        let mut guard = POOL.lock();
        if let Some(pool) = guard.as_mut() {
            if pool.pid == crate::core::pid::current() {
                if !pool.failed.is_empty() {
                    pool.failed.retain(|(id, _)| *id != self.id);
                }
                pool.idle.push((self.id, self.inner, self.read_timeout));
            }
        }
    }

    /// Sets the read timeout for the next command (a blocking one waits longer).
    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(timeout)
    }

    pub(crate) fn reset_read_timeout(&mut self) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(self.read_timeout)
    }
}

/// Notes that `ep` could not be reached or did not answer in time.
pub(crate) fn note_failure(ep: &Endpoint) {
    let now = Instant::now();
    with_pool(
        |pool| match pool.failed.iter_mut().find(|(id, _)| ep.is(id)) {
            Some(entry) => entry.1 = now,
            None => pool.failed.push((ep.identity(), now)),
        },
    );
}

/// Whether `ep` failed within the last connect + read timeout and has not
/// answered since. Cleanup at the end of a request then leaves its work for later
/// instead of waiting a whole timeout again for every lease it still has to free.
pub fn recently_failed(ep: &Endpoint) -> bool {
    let window = ep.timeouts.connect + ep.timeouts.read;
    with_pool(|pool| {
        pool.failed
            .iter()
            .any(|(id, at)| ep.is(id) && at.elapsed() < window)
    })
}

/// A message for a failed Redis call, as "`context` Redis at <where>: detail". It
/// names the endpoint without its password; redis-rs's own messages never contain
/// the password either.
pub(crate) fn connection_error(ep: &Endpoint, context: &str, e: &redis::RedisError) -> Error {
    Error::Connection(format!(
        "{context} Redis at {}: {}",
        ep.location(),
        topology::describe(e, ep)
    ))
}
