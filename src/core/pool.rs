//! One connection per Redis endpoint per process, kept across requests.
//!
//! A php-fpm worker serves thousands of requests; reconnecting for each would add
//! a TCP handshake, AUTH and SELECT to every request. Connections are made lazily
//! (never in MINIT, which runs in the php-fpm master before it forks), replaced
//! when broken, and forgotten in a forked child: parent and child must never
//! share one socket, or their replies interleave.
//!
//! A connection is taken out of the pool for the duration of one command. If the
//! command fails mid-way, the caller drops it instead of returning it, so a
//! connection with an unread reply pending is never reused.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};

use crate::core::dsn::{Addr, Endpoint};
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter};

type Key = (Addr, Option<String>, Option<String>, i64);

struct Pool {
    pid: u32,
    /// A worker talks to one or two endpoints: a short list beats hashing the
    /// key (strings) on every command.
    idle: Vec<(Key, redis::Connection)>,
    /// When each endpoint last failed to connect or answer (see `recently_failed`).
    failed: Vec<(Key, Instant)>,
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

fn same(key: &Key, ep: &Endpoint) -> bool {
    key.0 == ep.addr && key.1 == ep.username && key.2 == ep.password && key.3 == ep.db
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// A connection borrowed from the pool. Give it back with [`Conn::recycle`] once
/// its last reply has been read; dropping it closes the socket.
pub struct Conn {
    key: Key,
    pub(crate) inner: redis::Connection,
    read_timeout: Duration,
}

impl Conn {
    /// Takes this process's connection to `ep`, connecting if there is none.
    pub fn checkout(ep: &Endpoint) -> Result<Conn> {
        let pooled = with_pool(|pool| {
            pool.idle
                .iter()
                .position(|(k, _)| same(k, ep))
                .map(|i| pool.idle.swap_remove(i))
        });
        let (key, inner) = match pooled {
            Some(entry) => entry,
            None => (ep.connection_key(), connect(ep)?),
        };
        Ok(Conn {
            key,
            inner,
            read_timeout: ep.timeouts.read,
        })
    }

    /// Returns the connection to the pool for the next command: its endpoint
    /// answered, so it has not failed recently any more.
    pub fn recycle(self) {
        let mut guard = POOL.lock();
        if let Some(pool) = guard.as_mut() {
            if pool.pid == std::process::id() {
                if !pool.failed.is_empty() {
                    pool.failed.retain(|(k, _)| *k != self.key);
                }
                pool.idle.push((self.key, self.inner));
            }
        }
    }

    /// Sets the read timeout for the next command (a blocking one waits longer).
    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(Some(timeout))
    }

    pub(crate) fn reset_read_timeout(&mut self) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(Some(self.read_timeout))
    }
}

/// Runs `f` on this process's pool (a fresh one after fork).
fn with_pool<T>(f: impl FnOnce(&mut Pool) -> T) -> T {
    let mut guard = POOL.lock();
    let pid = std::process::id();
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

/// Notes that `ep` could not be reached or did not answer in time.
pub(crate) fn note_failure(ep: &Endpoint) {
    let key = ep.connection_key();
    let now = Instant::now();
    with_pool(
        |pool| match pool.failed.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = now,
            None => pool.failed.push((key, now)),
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
            .any(|(k, at)| same(k, ep) && at.elapsed() < window)
    })
}

fn connect(ep: &Endpoint) -> Result<redis::Connection> {
    let addr = match &ep.addr {
        Addr::Tcp { host, port } => ConnectionAddr::Tcp(host.clone(), *port),
        Addr::Unix(path) => ConnectionAddr::Unix(path.clone()),
    };
    // No CLIENT SETINFO: two more replies to wait for on every connect, each
    // allowed the whole connect timeout by redis-rs.
    let mut redis_info = RedisConnectionInfo::default()
        .set_db(ep.db)
        .set_skip_set_lib_name();
    if let Some(u) = &ep.username {
        redis_info = redis_info.set_username(u);
    }
    if let Some(p) = &ep.password {
        redis_info = redis_info.set_password(p);
    }
    let info: ConnectionInfo = addr
        .into_connection_info()
        .map_err(|e| connection_error(ep, "Cannot use", &e))?
        .set_redis_settings(redis_info);
    let client = redis::Client::open(info).map_err(|e| connection_error(ep, "Cannot use", &e))?;
    let conn = client
        .get_connection_with_timeout(ep.timeouts.connect)
        .map_err(|e| {
            metrics::incr(Counter::ConnectionErrors);
            note_failure(ep);
            connection_error(ep, "Cannot connect to", &e)
        })?;
    conn.set_read_timeout(Some(ep.timeouts.read))
        .and_then(|_| conn.set_write_timeout(Some(ep.timeouts.read)))
        .map_err(|e| connection_error(ep, "Cannot configure the connection to", &e))?;
    metrics::incr(Counter::Connects);
    Ok(conn)
}

/// A message for a failed Redis call, as "`context` Redis at host:port: detail". It
/// names the endpoint without its password; redis-rs's own messages never contain
/// the password either.
pub(crate) fn connection_error(ep: &Endpoint, context: &str, e: &redis::RedisError) -> Error {
    let detail = if e.is_timeout() {
        format!("timed out ({})", describe_timeouts(ep))
    } else {
        e.to_string()
    };
    Error::Connection(format!("{context} Redis at {}: {detail}", ep.addr))
}

fn describe_timeouts(ep: &Endpoint) -> String {
    format!(
        "connect_timeout {:.3}s, read_timeout {:.3}s",
        ep.timeouts.connect.as_secs_f64(),
        ep.timeouts.read.as_secs_f64()
    )
}
