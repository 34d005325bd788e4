//! One link per Redis endpoint per process, kept across requests.
//!
//! A php-fpm worker serves thousands of requests; reconnecting for each would add
//! a TCP (and TLS) handshake, AUTH and SELECT to every request. Links are made
//! lazily (never in MINIT, which runs in the php-fpm master before it forks),
//! replaced when broken, closed once idle for `idle_timeout` (by the watchdog
//! thread, see `sweep`), and forgotten in a forked child: parent and child must
//! never share one socket, or their replies interleave. What a link is (one
//! node, a Sentinel's master, a Cluster) is `topology`'s business; whether a
//! link to a Sentinel master still goes to the master is `sentinel`'s.
//!
//! A link is taken out of the pool for the duration of one command. If the
//! command fails mid-way, the caller drops it instead of returning it, so a link
//! with an unread reply pending is never reused.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::dsn::{Endpoint, Identity};
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter};
use crate::core::pid::PerProcess;
use crate::core::sentinel::{self, Trust};
use crate::core::topology::{self, Link};

struct Idle {
    id: Identity,
    /// Boxed, as in `Conn`: a link is moved in and out of the pool on every call.
    link: Box<Link>,
    read_timeout: Duration,
    since: Instant,
    /// Closed once unused this long (`None`: kept).
    timeout: Option<Duration>,
}

impl Idle {
    fn closes_at(&self) -> Option<Instant> {
        self.timeout.map(|t| self.since + t)
    }
}

#[derive(Default)]
struct Pool {
    /// A worker talks to one or two endpoints: a short list beats hashing.
    idle: Vec<Idle>,
    /// When each endpoint last failed to connect or answer (see `recently_failed`).
    failed: Vec<(Identity, Instant)>,
}

static POOL: PerProcess<Mutex<Pool>> = PerProcess::new();

/// Runs `f` on this process's pool (a fresh one after fork).
fn with_pool<T>(f: impl FnOnce(&mut Pool) -> T) -> T {
    let pool = POOL.get(
        || Mutex::new(Pool::default()),
        |parent| {
            // The parent's sockets: closing this process's copies of the
            // descriptors (redis-rs sends nothing and calls no shutdown() on drop)
            // leaves the parent's connections untouched. Its pool may have been
            // locked by its watchdog thread at the fork: then they are leaked.
            if let Some(mut p) = parent.try_lock() {
                p.idle.clear();
            }
        },
    );
    f(&mut pool.lock())
}

/// The idle timeout in ms as stored: 0 unset, `u64::MAX` for ever.
const UNSET: u64 = 0;
const FOREVER: u64 = u64::MAX;
const DEFAULT_IDLE_MS: u64 = 60_000;

/// The longest idle timeout any request of this process asked for: the
/// watchdog's own links (renewals, subscriptions) serve every request.
static LONGEST_IDLE_MS: AtomicU64 = AtomicU64::new(UNSET);

thread_local! {
    /// This thread's request's idle timeout: under ZTS, threads of one process
    /// serve requests with settings of their own (Apache's per-vhost
    /// `php_admin_value`), and each link keeps the one of the request that
    /// last gave it back.
    static REQUEST_IDLE_MS: Cell<u64> = const { Cell::new(UNSET) };
}

fn encode(t: Option<Duration>) -> u64 {
    t.map_or(FOREVER, |t| {
        (u64::try_from(t.as_millis()).unwrap_or(FOREVER - 1)).clamp(1, FOREVER - 1)
    })
}

fn decode(ms: u64) -> Option<Duration> {
    match ms {
        UNSET => Some(Duration::from_millis(DEFAULT_IDLE_MS)),
        FOREVER => None,
        ms => Some(Duration::from_millis(ms)),
    }
}

/// Sets how long an unused link stays open (`None`: for ever) for the links
/// this thread gives back (a request's start sets it).
pub fn set_idle_timeout(t: Option<Duration>) {
    let ms = encode(t);
    let _ = REQUEST_IDLE_MS.try_with(|c| c.set(ms));
    LONGEST_IDLE_MS.fetch_max(ms, Ordering::Relaxed);
}

/// The idle timeout of the links this thread gives back.
fn request_idle_ms() -> u64 {
    match REQUEST_IDLE_MS.try_with(Cell::get).unwrap_or(UNSET) {
        UNSET => LONGEST_IDLE_MS.load(Ordering::Relaxed),
        ms => ms,
    }
}

/// The longest idle timeout asked for in this process (`None`: for ever): how
/// long the watchdog keeps its own links.
pub fn idle_timeout() -> Option<Duration> {
    decode(LONGEST_IDLE_MS.load(Ordering::Relaxed))
}

/// A link borrowed from the pool. Give it back with [`Conn::recycle`] once its
/// last reply has been read; dropping it closes it.
pub struct Conn {
    id: Identity,
    /// Boxed: a link is a large value (redis-rs's parser and socket state), moved
    /// in and out of the pool on every call.
    pub(crate) inner: Box<Link>,
    read_timeout: Duration,
}

impl Conn {
    /// Takes this process's link to `ep`, connecting if there is none (or if the
    /// one there goes to a Sentinel master that is no longer the master).
    pub fn checkout(ep: &Endpoint) -> Result<Conn> {
        // A Sentinel failover under way: the old master may still take writes it
        // will drop. Nothing is sent until the new master is named.
        if sentinel::switching(ep) {
            let deadline = Instant::now() + ep.timeouts.connect + ep.timeouts.read;
            if !sentinel::wait_switch(ep, deadline) {
                return Err(Error::Connection(format!(
                    "A Redis failover is under way at {}: no new master was named within \
                     the timeouts (connect_timeout + read_timeout)",
                    ep.location()
                )));
            }
        }
        let pooled = with_pool(|pool| {
            pool.idle
                .iter()
                .position(|i| ep.is(&i.id))
                .map(|i| pool.idle.swap_remove(i))
        });
        let pooled = pooled.and_then(|mut i| still_master(ep, &mut i.link).then_some(i));
        let mut conn = match pooled {
            Some(i) => Conn {
                id: i.id,
                inner: i.link,
                read_timeout: i.read_timeout,
            },
            None => {
                let inner = topology::open(ep).inspect_err(|_| {
                    metrics::incr(Counter::ConnectionErrors);
                    note_failure(ep);
                })?;
                Conn {
                    id: ep.identity(),
                    inner: Box::new(inner),
                    read_timeout: ep.timeouts.read,
                }
            }
        };
        conn.inner.functions.off = !ep.functions;
        conn.inner.begin();
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
        let Some(pool) = POOL.current() else {
            return;
        };
        let mut pool = pool.lock();
        if !pool.failed.is_empty() {
            pool.failed.retain(|(id, _)| *id != self.id);
        }
        pool.idle.push(Idle {
            id: self.id,
            link: self.inner,
            read_timeout: self.read_timeout,
            since: Instant::now(),
            timeout: decode(request_idle_ms()),
        });
    }

    /// Sets the read timeout for the next command (a blocking one waits longer).
    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(timeout)
    }

    pub(crate) fn reset_read_timeout(&mut self) -> redis::RedisResult<()> {
        self.inner.set_read_timeout(self.read_timeout)
    }

    /// Whether the Sentinel master this link goes to was replaced since it was
    /// checked out: what it answered may not survive (see `sentinel`).
    pub(crate) fn outdated(&self, ep: &Endpoint) -> bool {
        self.inner
            .master
            .as_ref()
            .is_some_and(|m| m.generation != sentinel::generation(ep))
    }
}

/// Whether a pooled `link` to `ep` may be used as it is: for a Sentinel master,
/// only while it is still the master (asking the sentinels when no subscription
/// vouches for it; when none answers, the link is kept: nobody knows better).
pub(crate) fn still_master(ep: &Endpoint, link: &mut Link) -> bool {
    let Some(m) = &mut link.master else {
        return true;
    };
    match sentinel::trust(ep, m.generation, m.verified) {
        Trust::Yes => true,
        Trust::Stale => false,
        Trust::Verify => match topology::ask_master(ep) {
            Some((addr, generation)) if addr == m.addr && generation == m.generation => {
                m.verified = Instant::now();
                true
            }
            Some(_) => false,
            None => true,
        },
    }
}

/// Closes links unused for their idle timeout. When links remain that will
/// close: the moment the next one does (for the watchdog's next sweep).
pub fn sweep() -> Option<Instant> {
    let pool = POOL.current()?;
    let now = Instant::now();
    let closed: Vec<Idle> = {
        let mut pool = pool.lock();
        let (old, young) = std::mem::take(&mut pool.idle)
            .into_iter()
            .partition(|i| i.closes_at().is_some_and(|at| at <= now));
        pool.idle = young;
        old
    };
    // Closed outside the lock.
    drop(closed);
    next_close()
}

/// When the first pooled link is due to close (`None`: none is).
pub fn next_close() -> Option<Instant> {
    POOL.current()?
        .lock()
        .idle
        .iter()
        .filter_map(Idle::closes_at)
        .min()
}

/// How many links the pool keeps (for tests and the watchdog).
pub fn idle_links() -> usize {
    POOL.current().map_or(0, |p| p.lock().idle.len())
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
