//! The lease engine: claim, wait, refresh, inspect and release one lease.
//!
//! A lease is a Redis string `token:fence` with a millisecond expiry. The token is
//! 128 random bits, fresh for every acquire call, so only that call can release,
//! extend or claim it. The fence is a number that rises with every grant of the
//! key, for storage that must reject a paused holder's late writes.
//!
//! Waiting is a FIFO queue with direct handoff (see scripts/lib.lua): a waiter
//! queues its token and sleeps in BLPOP on its own list; a release sets the lock
//! to the first waiter's token and pushes onto that list, so the waiter wakes up
//! holding the lock, with no further round trip. A holder that dies never
//! releases: waiters sleep no longer than its remaining lease, then try again.
//!
//! Uncertain outcomes are resolved, not guessed: when a connection fails after a
//! command may have reached Redis, the engine asks on a fresh connection what our
//! token holds (and voids it if nothing, so a late arrival takes nothing).

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ErrorKind, FromRedisValue, Value};

use crate::core::dsn::Endpoint;
use crate::core::error::{passing_code, Error, Result};
pub use crate::core::hold::Hold;
use crate::core::hold::{self, millis, Kind, REVOKED_SET};
use crate::core::metrics::{self, Counter, Timing};
use crate::core::pending::{self, Leftover};
use crate::core::pool::{self, connection_error, Conn};
use crate::core::scripts;
pub use crate::core::token::Token;
use crate::core::topology;
use crate::core::watchdog;

/// Longest lease or wait we accept: 30 days. Longer values are almost surely a
/// unit mistake (milliseconds given as seconds), and would overflow Redis's PX.
pub const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

/// The longest a waiter sleeps before it asks again. Its question tells the
/// queue it is alive (lib.lua's NAP_MS), and catches a lock left free or held by
/// a lease that ended without a release (a holder, or a waiter it was handed to,
/// that died), whatever lease the waiter last saw.
const MAX_NAP: Duration = Duration::from_secs(1);

/// How long after its timeout we still listen for a BLPOP reply that ends the
/// wait: Redis checks blocking timeouts only on its event-loop tick (100 ms at the
/// default hz 10), so its own reply may come that much later. At the deadline we
/// stop listening after `BLPOP_SLACK` (dropping that connection); before it, a
/// nap waits for Redis's own timeout reply, and the connection stays.
const BLPOP_SLACK: Duration = Duration::from_millis(5);
const BLPOP_TICK: Duration = Duration::from_millis(150);

/// The Redis keys of one lease. They share a hash tag, so they live in one
/// Redis Cluster slot and one script may touch them all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseKeys {
    /// Every key, end to end: the lock key, then the lock key with each of
    /// `SUFFIXES` after it. One allocation: applications make a lease per lock.
    all: Vec<u8>,
    /// Where each key ends in `all`: the lock key's, then each suffixed one's.
    ends: [usize; 6],
    /// A session's data, when the lease locks a session: unlocking hands the data
    /// to the next waiter along with the lock.
    pub data: Option<Vec<u8>>,
    /// A semaphore's: its holds are all shared (permits), its lock key never set.
    semaphore: bool,
}

/// The keys after the lock key, in `LeaseKeys::ends` order.
const SUFFIXES: [&[u8]; 5] = [b":fence", b":waiters", b":terms", b":holders", b":weights"];

impl LeaseKeys {
    /// Keys of a named lock: `prefix{name}`, and `:fence`, `:waiters`, `:terms`
    /// after it. See [`check_lock_name`] for the names that fit.
    pub fn for_lock(prefix: &[u8], name: &[u8]) -> LeaseKeys {
        LeaseKeys::tagged(prefix, name, b"")
    }

    /// Keys of a named semaphore: `prefix{name}:semaphore` (never set: permits
    /// are shared holds), and `:holders`, `:waiters`, `:terms` after it.
    pub fn for_semaphore(prefix: &[u8], name: &[u8]) -> LeaseKeys {
        LeaseKeys {
            semaphore: true,
            ..LeaseKeys::tagged(prefix, name, b":semaphore")
        }
    }

    /// `prefix{name}tail` and the keys after it, in one allocation.
    fn tagged(prefix: &[u8], name: &[u8], tail: &[u8]) -> LeaseKeys {
        let base = prefix.len() + name.len() + 2 + tail.len();
        let mut lock = Vec::with_capacity(base + LeaseKeys::after(base));
        lock.extend_from_slice(prefix);
        lock.push(b'{');
        lock.extend_from_slice(name);
        lock.push(b'}');
        lock.extend_from_slice(tail);
        LeaseKeys::with_base(lock, None)
    }

    /// Keys built from an already hash-tagged lock key (sessions use their own).
    pub fn with_base(lock: Vec<u8>, data: Option<Vec<u8>>) -> LeaseKeys {
        let mut all = lock;
        let base = all.len();
        all.reserve(LeaseKeys::after(base));
        let mut ends = [base; 6];
        for (i, suffix) in SUFFIXES.iter().enumerate() {
            all.extend_from_within(..base);
            all.extend_from_slice(suffix);
            ends[i + 1] = all.len();
        }
        LeaseKeys {
            all,
            ends,
            data,
            semaphore: false,
        }
    }

    /// How many bytes the suffixed keys take after a lock key of `base` bytes.
    fn after(base: usize) -> usize {
        SUFFIXES.iter().map(|s| base + s.len()).sum()
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.all[start..self.ends[i]]
    }

    /// The lock: its holder's token and fence (a string).
    pub fn lock(&self) -> &[u8] {
        self.key(0)
    }

    /// The last fencing token given out (a number).
    pub fn fence(&self) -> &[u8] {
        self.key(1)
    }

    /// The queue: waiting tokens in arrival order (a sorted set).
    pub fn waiters(&self) -> &[u8] {
        self.key(2)
    }

    /// Each waiter's ttl and deadline (a hash).
    pub fn terms(&self) -> &[u8] {
        self.key(3)
    }

    /// Shared holds: readers of a lock, or a semaphore's permits (a sorted set of
    /// tokens by the moment their lease ends).
    pub fn holders(&self) -> &[u8] {
        self.key(4)
    }

    /// The weights of holds of several permits at once (a hash; see lib.lua).
    pub fn weights(&self) -> &[u8] {
        self.key(5)
    }

    /// Marks `token` as given up on (see resolve.lua).
    pub fn void(&self, token: &Token) -> Vec<u8> {
        self.void_parts(token).concat()
    }

    /// [`LeaseKeys::void`], in parts (for `Invocation::key_of`).
    pub fn void_parts<'a>(&'a self, token: &'a Token) -> [&'a [u8]; 3] {
        [self.lock(), b":void:", token.as_str().as_bytes()]
    }

    /// The list a waiting `token` sleeps on (see lib.lua's `hand_off`).
    pub fn wake(&self, token: &Token) -> Vec<u8> {
        [self.lock(), b":wake:", token.as_str().as_bytes()].concat()
    }

    /// The tokens of session holds a logout revoked (see session_revoke.lua), in
    /// parts (for `Invocation::key_of`).
    pub fn revoked_parts(&self) -> [&[u8]; 2] {
        [self.lock(), REVOKED_SET]
    }

    /// A short-lived marker `<lock>:<what>:<token>`, in the lock's slot.
    pub fn marker(&self, what: &[u8], token: &Token) -> Vec<u8> {
        [self.lock(), b":", what, b":", token.as_str().as_bytes()].concat()
    }
}

/// Checks a lock key prefix: braces would give the lock keys a hash tag of the
/// prefix's making (all locks in one Cluster slot) or an empty one (a lock's keys
/// spread over slots: CROSSSLOT).
pub fn check_lock_prefix(prefix: &[u8]) -> Result<()> {
    if prefix.len() > 256 || prefix.iter().any(|&b| b == b'{' || b == b'}' || b < 0x20) {
        return Err(Error::invalid(
            "the lock key prefix (redis_lease.lock_prefix) must be at most 256 printable \
             characters without '{' or '}'",
        ));
    }
    Ok(())
}

/// Checks a lock name. Names are binary-safe, except that the first byte cannot be
/// '}': the key `prefix{}…}` would have an empty hash tag, and Redis Cluster would
/// then spread the lock's keys over different slots.
pub fn check_lock_name(name: &[u8]) -> std::result::Result<(), &'static str> {
    match name.first() {
        None => Err("must not be empty"),
        Some(b'}') => Err("must not start with '}' (the Redis Cluster hash tag would be empty)"),
        _ => Ok(()),
    }
}

/// How long a voided token stays void: longer than any attempt can sit unread in
/// a socket buffer of a live Redis, in practice. Should one arrive even later, it
/// takes a lease nobody holds, which then ends by itself like a crashed holder's.
pub(crate) fn void_ttl(ttl: Duration) -> Duration {
    ttl + hold::LATE
}

/// What one attempt found.
#[derive(Debug)]
pub enum Attempt<T = Hold> {
    Acquired(T),
    /// Held by another; `Some(d)`: its lease ends in `d`; `None`: it has no expiry.
    Busy(Option<Duration>),
    /// Not to be had by waiting (an upgrade while another reader waits to upgrade).
    Refused,
    /// A conversion whose own hold ran out: there is nothing to convert.
    Lapsed,
    /// Handed to us, and run out before we extended it (we stalled): never
    /// ours to count on; asked again at once (`LAPSED_GRANT`).
    Again,
}

/// How refresh.lua sets a lease's expiry.
#[derive(Clone, Copy)]
enum Extend<'a> {
    /// A grant extended on our own link, for its WAIT: never shortened (a late
    /// run must not cut a longer refresh of the holder's).
    Grant,
    /// The holder's refresh `id`: exactly to its ttl (`at_least`: never
    /// shorter, in a forked child), voiding the hold's `earlier` refreshes that
    /// got no answer.
    Holder {
        id: &'a Token,
        earlier: &'a [(Token, Instant, Duration)],
        at_least: bool,
    },
}

/// Not a script's status: `Lease::replicate_claim`'s, in place of a handed
/// lease's (2) that ran out before its extension.
const LAPSED_GRANT: i64 = -100;

/// How a waiting claim ended.
#[derive(Debug)]
pub struct Waited<T> {
    /// `None`: still held by another when the wait ran out.
    pub result: Option<T>,
    /// Whether any attempt found the lease held.
    pub contended: bool,
    /// A conversion (upgrade, downgrade) found its own hold gone.
    pub lapsed: bool,
}

/// What Redis says a token holds (resolve.lua, inspect.lua).
#[derive(Debug)]
pub struct Owned {
    /// Time left on the lease; `None`: no expiry.
    pub left: Option<Duration>,
    pub fence: i64,
    /// A shared hold (a reader, a permit), not the lock alone.
    pub shared: bool,
    /// A session's data, when resolving a session's lease.
    pub data: Option<Vec<u8>>,
    /// How many permits a shared hold takes (inspect.lua; otherwise 1).
    pub weight: u32,
}

/// How a call to Redis failed.
pub(crate) enum Failure {
    /// Nothing was sent: the connection could not be made.
    NotSent(Error),
    /// The connection broke after sending: the command may have run. Likely a
    /// stale pooled connection (Redis restarted, idle timeout): worth one retry
    /// on a fresh connection at once.
    Broken(Error),
    /// No reply within the read timeout: the command may have run. Redis is slow
    /// or stopped; retrying now would only multiply the caller's wait, so the
    /// question is left for the next call.
    TimedOut(Error),
    /// Redis answered with an error: the command did not change anything.
    Reply(Error),
}

impl Failure {
    pub(crate) fn into_error(self) -> Error {
        match self {
            Failure::NotSent(e) | Failure::Broken(e) | Failure::TimedOut(e) | Failure::Reply(e) => {
                e
            }
        }
    }
}

/// What a grant we were told of came to, once extended on our own link
/// (`Lease::confirm_grant`).
enum Confirmed {
    /// As told.
    Stands,
    /// The new master's own grant of our token, to be taken instead.
    Newer(Owned),
    /// It ran out before we extended it: never ours to count on. `voided`:
    /// a re-read on a new master (resolve.lua) voided the token.
    Lapsed { voided: bool },
}

/// The claim-specific part of waiting for a lease: a lock (the fence is what the
/// caller gets) or a session (the data comes with the lock).
pub(crate) trait Claim {
    type Won;
    fn ttl(&self) -> Duration;
    /// The token the claim must use (a holder converting its own hold: an
    /// upgrade, a downgrade); `None`: a fresh one per attempt.
    fn token(&self) -> Option<&Token> {
        None
    }
    /// Whether what resolve.lua found our token holding is what the claim wanted
    /// (an upgrade that finds its token still a reader did not happen).
    fn adopts(&self, owned: &Owned) -> bool {
        let _ = owned;
        true
    }
    /// Sends the claim script for `token`, which will still wait `will_wait`,
    /// and WAITs for what it granted (see `Lease::replicate_claim`); `generation`:
    /// the failover generation (`topology::generation`) when the claim began.
    fn send(
        &self,
        lease: &Lease,
        token: &Token,
        will_wait: Duration,
        generation: u64,
    ) -> std::result::Result<Value, Failure>;
    /// What an attempt that got the lease (status 1 or 2) yields, from the script's
    /// `detail`; the lease was set no earlier than `since`.
    fn won(&self, lease: &Lease, token: &Token, detail: Value, since: Instant)
        -> Result<Self::Won>;
    /// The error for a status other than taken (1), handed (2) and busy (0).
    fn refused(&self, lease: &Lease, status: i64) -> Error {
        lease.unexpected(&format!("status {status}"))
    }
    /// The lease our token holds per resolve.lua, set no earlier than `since`.
    fn adopt(&self, token: Token, owned: Owned, since: Instant) -> Self::Won;
    /// The lease handed to us with `payload` (what follows the fence on the wake-up list).
    fn handed(
        &self,
        lease: &Lease,
        token: Token,
        fence: i64,
        payload: &[u8],
        since: Instant,
    ) -> Result<Self::Won>;
    /// The hold in what a claim won.
    fn hold_of<'a>(&self, won: &'a mut Self::Won) -> &'a mut Hold;
}

/// One lease on one endpoint.
#[derive(Clone, Debug)]
pub struct Lease {
    pub endpoint: Arc<Endpoint>,
    pub keys: LeaseKeys,
}

impl Lease {
    pub fn new(endpoint: Arc<Endpoint>, keys: LeaseKeys) -> Lease {
        Lease { endpoint, keys }
    }

    /// Runs `f` on this process's connection to the endpoint.
    ///
    /// A reply that says the command was refused because the node is not (or not
    /// yet) the writable master (READONLY: a demoted master; LOADING: a restarted
    /// one) means it did not run: that link is dropped, and `f` runs once more on a
    /// fresh one, which, with Sentinel, is the master the sentinels name now.
    pub(crate) fn call<T>(
        &self,
        f: impl Fn(&mut Conn) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, Failure> {
        let mut moved = false;
        loop {
            let mut conn = Conn::checkout(&self.endpoint).map_err(Failure::NotSent)?;
            return match f(&mut conn) {
                Ok(_) if conn.outdated(&self.endpoint) => {
                    // The Sentinel master was replaced while the command ran: what
                    // the old one answered may not survive. As after a broken link,
                    // the caller settles it on the new master.
                    drop(conn);
                    Err(Failure::Broken(Error::Connection(format!(
                        "A Sentinel failover replaced {} while a command ran",
                        self.endpoint.location()
                    ))))
                }
                Ok(v) => {
                    conn.recycle();
                    Ok(v)
                }
                Err(e)
                    if matches!(e.code(), Some("READONLY" | "LOADING" | "MASTERDOWN"))
                        && !moved =>
                {
                    drop(conn);
                    moved = true;
                    metrics::incr(Counter::Retries);
                    continue;
                }
                Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
                    // A complete error reply: the connection is still in step.
                    conn.recycle();
                    metrics::incr(Counter::ConnectionErrors);
                    Err(Failure::Reply(Error::Reply {
                        message: format!(
                            "Redis at {} answered with an error: {}{}{}",
                            self.endpoint.location(),
                            server_error_text(&e),
                            auth_hint(&e),
                            scripting_hint(&e)
                        ),
                        passing: passing_code(e.code()),
                    }))
                }
                Err(e) if conn.inner.sent_nothing() => {
                    // A Cluster master this call needed could not be reached before
                    // anything went out: as a failed checkout, nothing ran. The link
                    // is in step with the nodes it reached, and stays pooled; the
                    // endpoint is not marked failed for one node.
                    conn.recycle();
                    metrics::incr(Counter::ConnectionErrors);
                    Err(Failure::NotSent(connection_error(
                        &self.endpoint,
                        "Cannot reach",
                        &e,
                    )))
                }
                Err(e) => {
                    // The reply may still be on its way: this connection is out of step
                    // and is dropped (closed) here, never reused.
                    drop(conn);
                    metrics::incr(Counter::ConnectionErrors);
                    if e.is_timeout() {
                        pool::note_failure(&self.endpoint);
                        Err(Failure::TimedOut(connection_error(
                            &self.endpoint,
                            "No reply in time from",
                            &e,
                        )))
                    } else {
                        Err(Failure::Broken(connection_error(
                            &self.endpoint,
                            "Lost the connection to",
                            &e,
                        )))
                    }
                }
            };
        }
    }

    /// After a write on `c` (`wrote`): when the endpoint asks for it
    /// (`wait_replicas`), WAIT until that many replicas have it, on the same link
    /// (WAIT counts its own connection's writes). How many acknowledged; `None`
    /// when not asked for (see `Link::wait_each`).
    pub(crate) fn wait_replicas(
        &self,
        c: &mut Conn,
        wrote: bool,
    ) -> redis::RedisResult<Option<i64>> {
        let Some(w) = self.endpoint.wait.filter(|_| wrote) else {
            return Ok(None);
        };
        let timeout = w.timeout.unwrap_or(self.endpoint.timeouts.read);
        c.set_read_timeout(timeout + self.endpoint.timeouts.read)?;
        let acks = c
            .inner
            .wait_each(&[self.keys.lock()], w.replicas, timeout)?[0];
        c.reset_read_timeout()?;
        Ok(Some(acks))
    }

    /// With `wait_replicas`, after a claim script on `c` answered `reply`: a lease
    /// it granted us is WAITed for on this link. Taken by this run (1), the script's
    /// own SET is what WAIT counts. Handed to us earlier (2): this link wrote
    /// nothing, so the lease is first extended on it, owner-checked, and that
    /// write is what WAIT counts (the replication stream is in order: it covers
    /// the grant). A handed lease that ran out before that extension (we
    /// stalled) was never ours to count on, and no replica shortfall either:
    /// `reply` then says so (`LAPSED_GRANT`), and the claim asks again at once,
    /// whatever its wait left (a conversion then finds its own hold gone).
    pub(crate) fn replicate_claim(
        &self,
        c: &mut Conn,
        reply: &mut Value,
        token: &Token,
        ttl: Duration,
    ) -> redis::RedisResult<Option<i64>> {
        if self.endpoint.wait.is_none() {
            return Ok(None);
        }
        let status = match reply {
            Value::Array(v) => v.first(),
            _ => None,
        };
        match status {
            Some(Value::Int(1)) => self.wait_replicas(c, true),
            Some(Value::Int(2)) => {
                let (n, acks) = self.refresh_on(c, token, ttl, Extend::Grant)?;
                if n == 0 {
                    metrics::incr(Counter::GrantsLapsed);
                    *reply = Value::Array(vec![Value::Int(LAPSED_GRANT), Value::Int(0)]);
                }
                Ok(acks)
            }
            _ => Ok(None),
        }
    }

    /// With `wait_replicas`: a lease handed to us by a release (whose WAIT counted
    /// the releaser's link, not ours), or adopted after a lost reply (whose WAIT
    /// never ran), is extended on our own link and waited for, as in
    /// `replicate_claim`. `generation`: the failover generation when the claim began.
    /// False: the lease ran out before it was extended (we stalled past it), and
    /// was never ours to count on.
    fn replicate_grant(
        &self,
        token: &Token,
        ttl: Duration,
        generation: u64,
    ) -> std::result::Result<bool, Failure> {
        if self.endpoint.wait.is_none() {
            return Ok(true);
        }
        let (n, acks) = self.call(|c| self.refresh_on(c, token, ttl, Extend::Grant))?;
        if n == 0 {
            metrics::incr(Counter::GrantsLapsed);
            return Ok(false);
        }
        self.claim_replicated(acks, token, ttl, generation, "The lock was handed over")?;
        Ok(true)
    }

    /// [`Lease::replicate_grant`] for a grant we were told of (a wake-up's fence
    /// and data, resolve.lua's answer) by the master of `generation`. When we have
    /// learned of another master since, what we were told may be the old master's:
    /// a release there handed us the lease, and the new one may have handed it to
    /// us again, with a fence (and data) of its own. The new master is then asked
    /// what our token holds, and the lease extended and waited for there (so it is
    /// counted on from `since` no longer than that extension keeps it), until the
    /// master stays the same. `Newer`: its answer, to be taken instead. Without
    /// `wait_replicas` nothing is extended, and what we were told stands.
    fn confirm_grant<C: Claim>(
        &self,
        c: &C,
        token: &Token,
        generation: u64,
    ) -> std::result::Result<Confirmed, Failure> {
        if self.endpoint.wait.is_none() {
            return Ok(Confirmed::Stands);
        }
        let mut told = None;
        let mut generation = generation;
        loop {
            if !self.replicate_grant(token, c.ttl(), generation)? {
                let voided = told.is_some();
                return Ok(Confirmed::Lapsed { voided });
            }
            let now = topology::generation(&self.endpoint);
            if now == generation {
                return Ok(told.map_or(Confirmed::Stands, Confirmed::Newer));
            }
            metrics::incr(Counter::Retries);
            match self.resolve(token, c.ttl()) {
                Ok(Some(owned)) if c.adopts(&owned) => told = Some(owned),
                Ok(_) => {
                    return Err(Failure::Reply(Error::Connection(format!(
                        "A failover replaced the master while this claim was granted; \
                         the new master at {} does not grant it",
                        self.endpoint.location()
                    ))))
                }
                Err(e) => return Err(Failure::Reply(e)),
            }
            generation = now;
        }
    }

    /// A claim's WAIT came back with `acks`: too few, and the lease (of `ttl`) is
    /// given back (a failover could grant it again), unless the master was
    /// replaced meanwhile: then the outcome is settled on the new master, as after
    /// a broken link. A give-back that fails is left to this process's next call
    /// (see `pending`): the caller is told it has no lease, so nothing else would
    /// free it before its ttl.
    pub(crate) fn claim_replicated(
        &self,
        acks: Option<i64>,
        token: &Token,
        ttl: Duration,
        generation: u64,
        what: &str,
    ) -> std::result::Result<(), Failure> {
        match self.replicated(acks, what) {
            Ok(()) => Ok(()),
            Err(e) if self.switched_since(generation) => Err(Failure::Broken(e)),
            Err(e) => {
                if self.release_token(token).is_err() {
                    self.defer(token.clone(), ttl);
                }
                Err(Failure::Reply(e))
            }
        }
    }

    /// Whether the Sentinel master changed since `generation` (asking the
    /// sentinels, for a subscription may not have told us yet).
    pub(crate) fn switched_since(&self, generation: u64) -> bool {
        generation != 0
            && (topology::generation(&self.endpoint) != generation
                || topology::ask_master(&self.endpoint).is_some_and(|(_, g)| g != generation))
    }

    /// Has the watchdog look after `hold` (see `watchdog::watch`).
    pub fn watch(&self, hold: &mut Hold, kind: Kind, renew: bool, generation: u64) {
        let keys = (self.keys.lock(), self.keys.holders());
        watchdog::watch(&self.endpoint, keys, hold, kind, renew, generation);
    }

    /// Runs refresh.lua for `token` on `c` (1: extended to `ttl`, 0: not ours,
    /// 3: voided by a later refresh), then WAITs as `wait_replicas` asks.
    fn refresh_on(
        &self,
        c: &mut Conn,
        token: &Token,
        ttl: Duration,
        how: Extend,
    ) -> redis::RedisResult<(i64, Option<i64>)> {
        let stale = hold::stale_refreshes(self.keys.lock(), token);
        let mut call = scripts::REFRESH.key(self.keys.lock());
        call.key(self.keys.holders())
            .key(self.keys.weights())
            .key(&stale)
            .arg(token.as_str())
            .arg(millis(ttl));
        match how {
            Extend::Grant => {
                call.arg("at_least");
            }
            Extend::Holder {
                id,
                earlier,
                at_least,
            } => {
                call.arg(if at_least { "at_least" } else { "" })
                    .arg(id.as_str());
                for (e, ..) in earlier {
                    call.arg(e.as_str());
                }
            }
        }
        let n: i64 = call.call(&mut *c.inner)?;
        Ok((n, self.wait_replicas(c, n == 1)?))
    }

    /// Whether fewer replicas than `wait_replicas` acknowledged (`acks`).
    pub(crate) fn short(&self, acks: Option<i64>) -> bool {
        matches!((self.endpoint.wait, acks), (Some(w), Some(n)) if n < i64::from(w.replicas))
    }

    /// An error when fewer replicas than `wait_replicas` acknowledged `what`.
    pub(crate) fn replicated(&self, acks: Option<i64>, what: &str) -> Result<()> {
        match (self.endpoint.wait, acks) {
            (Some(w), Some(n)) if n < i64::from(w.replicas) => {
                metrics::incr(Counter::WaitShortfalls);
                Err(Error::Connection(format!(
                    "{what} on the master at {}, but only {n} of the {} replicas asked for \
                     (wait_replicas) acknowledged it within {} ms: a failover now could lose it",
                    self.endpoint.location(),
                    w.replicas,
                    w.timeout.unwrap_or(self.endpoint.timeouts.read).as_millis()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Runs an idempotent `f`; when its outcome is uncertain, runs it once more on a
    /// fresh connection, whose answer is then the truth.
    pub(crate) fn call_idempotent<T>(
        &self,
        f: impl Fn(&mut Conn) -> redis::RedisResult<T>,
    ) -> Result<T> {
        match self.call(&f) {
            Err(Failure::Broken(_)) => {
                metrics::incr(Counter::Retries);
                self.call(&f).map_err(Failure::into_error)
            }
            other => other.map_err(Failure::into_error),
        }
    }

    /// Claims the lease for one token, waiting up to `wait` in the queue.
    ///
    /// Every attempt either takes the lease, finds it ours (handed to us), or
    /// queues us; an attempt that says it will not wait leaves the queue, so a
    /// claim that returns has no place left in it. A claim that fails while its
    /// token may hold the lease or a place in the queue settles that first, or
    /// returns `Error::Unresolved` with the token for the caller to settle.
    pub(crate) fn claim<C: Claim>(&self, c: &C, wait: Duration) -> Result<Waited<C::Won>> {
        pending::settle(&self.endpoint)?;
        let generation = topology::generation(&self.endpoint);
        let deadline = Instant::now() + wait;
        let fresh = || c.token().cloned().unwrap_or_else(Token::generate);
        let mut token = fresh();
        let mut contended = false;
        let mut retried = false;
        // A grant read too late was let go, and a fresh token asked again.
        let mut lapsed_once = false;
        // When the last attempt that found the lease held was sent: a lease handed
        // to us later was set after it.
        let mut busy_since: Option<Instant> = None;
        // A lease handed to us, checked at the top of the loop as an attempt's.
        let mut handed: Option<C::Won> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let sent = Instant::now();
            let next = match handed.take() {
                Some(won) => Ok(Next::Handed(won)),
                None => c.send(self, &token, left, generation).map(Next::Reply),
            };
            let attempt = match next {
                Ok(Next::Handed(won)) => Ok(Attempt::Acquired(won)),
                Ok(Next::Reply(reply)) => {
                    self.parse_attempt(c, reply, &token, sent, busy_since.unwrap_or(sent))
                }
                Err(Failure::TimedOut(e)) => return Err(unresolved(&e, token)),
                // A conversion keeps its token, which resolve.lua cannot void (a
                // conversion's attempts act on what the token holds): an attempt
                // whose link broke may still run, after a retry, after the claim
                // and after later conversions (a late downgrade lets readers in
                // beside the writer it upgraded to again; a late upgrade takes the
                // lock alone for a reader), whatever resolve.lua finds now (an
                // upgrade handed the lock while its last attempt was on its way).
                // Not asked about: the hold is let go, as after a timeout
                // (`Lock::convert`). (Review, stop 56.)
                Err(Failure::Broken(first)) if c.token().is_some() => {
                    return Err(unresolved(&first, token))
                }
                Err(Failure::Broken(first)) => {
                    // The script may have run. Only our token can tell: if it holds
                    // the lease, the lease is ours; if not, the token is voided (and
                    // out of the queue), and a fresh one tries once more.
                    metrics::incr(Counter::Retries);
                    match self.resolve(&token, c.ttl()) {
                        Ok(Some(owned)) if c.adopts(&owned) => {
                            metrics::incr(Counter::UncertainResolved);
                            let since = busy_since.unwrap_or(sent);
                            let owned = match self.confirm_grant(c, &token, generation) {
                                Ok(Confirmed::Stands) => owned,
                                Ok(Confirmed::Newer(owned)) => owned,
                                // Ran out under us. resolve.lua voided the
                                // token it found holding: a fresh one asks
                                // again, once (as when it found nothing).
                                Ok(Confirmed::Lapsed { .. }) if !retried => {
                                    token = self.replace_voided(c, token, fresh)?;
                                    retried = true;
                                    busy_since = None;
                                    continue;
                                }
                                // Asked twice already: given up, out of the
                                // current master's queue too (as above).
                                Ok(Confirmed::Lapsed { .. }) => {
                                    return Err(self.give_up(c, &token, true, first))
                                }
                                Err(f) => {
                                    return Err(self.give_up(c, &token, true, f.into_error()))
                                }
                            };
                            Ok(Attempt::Acquired(c.adopt(token.clone(), owned, since)))
                        }
                        // Nothing: the attempt took nothing, and is tried once
                        // more. (A conversion never gets here: it returned above.)
                        Ok(_) if !retried => {
                            metrics::incr(Counter::UncertainResolved);
                            retried = true;
                            token = fresh();
                            busy_since = None;
                            continue;
                        }
                        Ok(_) => return Err(first),
                        Err(_) => return Err(unresolved(&first, token)),
                    }
                }
                Err(f) => Err(f.into_error()),
            };
            let attempt = match attempt {
                Ok(a) => a,
                // An error reply changed nothing in this attempt, but an earlier one
                // may have queued us.
                Err(e) => return Err(self.give_up(c, &token, busy_since.is_some(), e)),
            };
            match attempt {
                Attempt::Acquired(won) => match self.reconfirm(c, &token, won, generation) {
                    Ok(Some(won)) => {
                        return Ok(Waited {
                            result: Some(won),
                            contended,
                            lapsed: false,
                        })
                    }
                    // A conversion's hold ran out (the caller lets it go).
                    Ok(None) if c.token().is_some() => {
                        return Ok(Waited {
                            result: None,
                            contended: true,
                            lapsed: true,
                        })
                    }
                    // Let go (and voided), and asked for afresh while the wait
                    // lasts, once (a ttl too short for the link lapses each
                    // time: it is not asked for over and over).
                    Ok(None) => {
                        token = self.replace_voided(c, token, fresh)?;
                        busy_since = None;
                        if std::mem::replace(&mut lapsed_once, true) || Instant::now() >= deadline {
                            return Ok(Waited {
                                result: None,
                                contended: true,
                                lapsed: false,
                            });
                        }
                        continue;
                    }
                    // No answer: asking again now would only double the wait.
                    Err(Failure::TimedOut(e)) => return Err(unresolved(&e, token)),
                    Err(f) => return Err(self.give_up(c, &token, true, f.into_error())),
                },
                Attempt::Again => continue,
                Attempt::Refused | Attempt::Lapsed => {
                    return Ok(Waited {
                        result: None,
                        contended: true,
                        lapsed: matches!(attempt, Attempt::Lapsed),
                    })
                }
                Attempt::Busy(holder_left) => {
                    contended = true;
                    if left.is_zero() {
                        // That attempt did not queue us (or took us out of the queue).
                        return Ok(Waited {
                            result: None,
                            contended,
                            lapsed: false,
                        });
                    }
                    busy_since = Some(sent);
                    let left = deadline.saturating_duration_since(Instant::now());
                    let nap = holder_left.unwrap_or(MAX_NAP).min(MAX_NAP).min(left);
                    if nap.is_zero() {
                        continue;
                    }
                    match self.wait_for_handoff(&token, nap, nap == left) {
                        Ok(Some(payload)) => {
                            metrics::incr(Counter::Wakeups);
                            let won = match parse_handoff(&payload) {
                                Some((fence, rest)) => {
                                    match self.confirm_grant(c, &token, generation) {
                                        Ok(Confirmed::Stands) => {
                                            c.handed(self, token.clone(), fence, rest, sent)
                                        }
                                        Ok(Confirmed::Newer(owned)) => {
                                            Ok(c.adopt(token.clone(), owned, sent))
                                        }
                                        // Handed, and run out while we stalled: we
                                        // ask again, in our place if a new master
                                        // still queues us; with a fresh token if a
                                        // re-read there voided this one, once it is
                                        // out of the current master's queue (a
                                        // second switch may have kept it there). A
                                        // conversion, with its own, finds its hold
                                        // gone.
                                        Ok(Confirmed::Lapsed { voided }) => {
                                            if voided {
                                                token = self.replace_voided(c, token, fresh)?;
                                                busy_since = None;
                                            }
                                            continue;
                                        }
                                        Err(f) => Err(f.into_error()),
                                    }
                                }
                                None => Err(self.unexpected(&"a malformed wake-up")),
                            };
                            // Counted on from `sent` (handed after it): it may
                            // have run out by our clock while we napped.
                            match won {
                                Ok(won) => {
                                    handed = Some(won);
                                    continue;
                                }
                                Err(e) => return Err(self.give_up(c, &token, true, e)),
                            }
                        }
                        // Not handed yet: try again (a lost wake-up is found there).
                        Ok(None) => {}
                        Err(e) => return Err(self.give_up(c, &token, true, e)),
                    }
                }
            }
        }
    }

    /// A grant, counted on from when it was set by our clock, that we read only
    /// once that bound had passed (a WAIT, a slow reply or a process stalled
    /// past the ttl, a wake-up read late): Redis may have let it go, and granted
    /// it again. It is counted on only if an owner-checked extension sent now
    /// (and WAITed for, with wait_replicas) finds it still ours, from then;
    /// asked twice at most. `None`: not ours, or not in time.
    fn reconfirm<C: Claim>(
        &self,
        c: &C,
        token: &Token,
        mut won: C::Won,
        generation: u64,
    ) -> std::result::Result<Option<C::Won>, Failure> {
        // A lease too short to be counted on at all is never read in time.
        if !hold::countable(c.ttl()) {
            return Ok(Some(won));
        }
        for _ in 0..2 {
            if c.hold_of(&mut won).safe_until() > Instant::now() {
                return Ok(Some(won));
            }
            let sent = Instant::now();
            let (n, acks) =
                self.call(|conn| self.refresh_on(conn, token, c.ttl(), Extend::Grant))?;
            if n == 0 {
                metrics::incr(Counter::GrantsLapsed);
                return Ok(None);
            }
            self.claim_replicated(acks, token, c.ttl(), generation, "The lease was extended")?;
            c.hold_of(&mut won).refreshed(sent, c.ttl(), Some(true));
        }
        if c.hold_of(&mut won).safe_until() > Instant::now() {
            return Ok(Some(won));
        }
        metrics::incr(Counter::GrantsLapsed);
        Ok(None)
    }

    /// Reads a claim script's `{status, detail}`: 1, it took the lease (set no
    /// earlier than `taken`, when the attempt was sent); 2, the lease was handed to
    /// us while we waited (no earlier than `handed`, when the last attempt that found
    /// it held was sent); 0, busy (detail: the holder's pttl).
    fn parse_attempt<C: Claim>(
        &self,
        c: &C,
        reply: Value,
        token: &Token,
        taken: Instant,
        handed: Instant,
    ) -> Result<Attempt<C::Won>> {
        let (status, detail): (i64, Value) =
            FromRedisValue::from_redis_value(reply).map_err(|e| self.unexpected(&e))?;
        match status {
            1 => Ok(Attempt::Acquired(c.won(self, token, detail, taken)?)),
            2 => Ok(Attempt::Acquired(c.won(self, token, detail, handed)?)),
            0 => match i64::from_redis_value(detail).map_err(|e| self.unexpected(&e))? {
                // Only a token we voided gets this, and we never send one again.
                -2 => Err(self.unexpected(&"the attempt's token was voided")),
                pttl => Ok(Attempt::Busy(pttl_duration(pttl))),
            },
            -3 => Ok(Attempt::Refused),
            -4 => Ok(Attempt::Lapsed),
            LAPSED_GRANT => Ok(Attempt::Again),
            other => Err(c.refused(self, other)),
        }
    }

    /// A claim ends with `error` while `token` may be queued (or even hold the
    /// lease): take it out now, or leave that to the caller. A holder converting
    /// its own hold (an upgrade) only leaves the queue: its hold stays.
    fn give_up<C: Claim>(&self, c: &C, token: &Token, queued: bool, error: Error) -> Error {
        if !queued {
            return error;
        }
        match self.withdraw(c, token) {
            Ok(()) => error,
            Err(_) => unresolved(&error, token.clone()),
        }
    }

    /// A token resolve.lua voided, after its grant lapsed: out of the current
    /// master's queue first (a failover since may have kept it there, to be
    /// handed the lease for nobody), then the token that asks again in its place.
    fn replace_voided<C: Claim>(
        &self,
        c: &C,
        token: Token,
        fresh: impl Fn() -> Token,
    ) -> Result<Token> {
        match self.withdraw(c, &token) {
            Ok(()) => Ok(fresh()),
            Err(e) => Err(unresolved(&e, token)),
        }
    }

    /// Takes `token`, which may be queued (or even hold the lease), out of the
    /// current master's queue for good (`give_up`); a conversion's only leaves
    /// the queue. An error: it may still be queued or hold.
    fn withdraw<C: Claim>(&self, c: &C, token: &Token) -> Result<()> {
        match c.token() {
            Some(_) => self.resolve(token, c.ttl()).map(drop),
            None => self.resolve(token, c.ttl()).and_then(|found| match found {
                None => Ok(()),
                Some(_) => match self.release_token(token) {
                    // Refused: nothing ran, and the token still holds (the
                    // caller's to settle).
                    Err(e @ Error::Reply { .. }) => Err(e),
                    // Found holding, and its release may still run: never
                    // adopted as a hold again (`left_to_settle`), finished by
                    // the process's next call.
                    Err(_) => {
                        self.defer(token.clone(), c.ttl());
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                },
            }),
        }
    }

    /// Blocks in BLPOP on our wake-up list for at most `nap`: the payload a
    /// releaser pushed when it handed us the lease, or `None`. `last`: the nap
    /// ends the caller's wait, which must not overrun (see `BLPOP_SLACK`).
    fn wait_for_handoff(
        &self,
        token: &Token,
        nap: Duration,
        last: bool,
    ) -> Result<Option<Vec<u8>>> {
        // When we stop listening before Redis replies, that connection is dropped:
        // the reply it still owes us must never be read as the answer to a later
        // command (and a handoff it carried is found by our next attempt).
        let mut conn = Conn::checkout(&self.endpoint)?;
        // BLPOP's timeout 0 means forever: never send it.
        let secs = format!("{:.3}", nap.as_secs_f64().max(0.001));
        let listen = nap + if last { BLPOP_SLACK } else { BLPOP_TICK };
        let res = conn.set_read_timeout(listen).and_then(|_| {
            redis::cmd("BLPOP")
                .arg(self.keys.wake(token))
                .arg(&secs)
                .query::<Option<(Vec<u8>, Vec<u8>)>>(&mut conn.inner)
        });
        match res {
            // A grant made on a Sentinel master since replaced may not survive: the
            // next attempt asks the new one.
            Ok(_) if conn.outdated(&self.endpoint) => Ok(None),
            Ok(popped) => {
                conn.reset_read_timeout()
                    .map_err(|e| connection_error(&self.endpoint, "Lost the connection to", &e))?;
                conn.recycle();
                Ok(popped.map(|(_, payload)| payload))
            }
            // Our own deadline, not a failure.
            Err(e) if e.is_timeout() => Ok(None),
            Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
                metrics::incr(Counter::ConnectionErrors);
                // Not `{e}`: an unknown BLPOP echoes its key, which names the
                // session and the waiter's token.
                Err(Error::Reply {
                    message: format!(
                        "Redis at {} answered with an error: {}",
                        self.endpoint.location(),
                        server_error_text(&e)
                    ),
                    passing: passing_code(e.code()),
                })
            }
            // A broken connection only costs a wake-up: the caller tries again at
            // once, on a fresh connection, which reports a real outage.
            Err(_) => {
                metrics::incr(Counter::ConnectionErrors);
                Ok(None)
            }
        }
    }

    /// Acquires the lease, waiting up to `wait` for it to be handed to us (or for
    /// its holder's lease to run out). `Ok(None)`: still held by another after `wait`.
    pub fn acquire(&self, ttl: Duration, wait: Duration) -> Result<Option<Hold>> {
        Ok(match self.acquire_as(ttl, wait, Want::Alone, None)? {
            Got::Held(hold) => Some(hold),
            Got::Busy | Got::Lapsed => None,
        })
    }

    /// Counts `hold` acquired: granted by a claim (a downgrade's is a reader's),
    /// or found ours after an acquire was left unresolved.
    pub(crate) fn count_acquired(&self, hold: &Hold) {
        metrics::incr(if self.keys.semaphore {
            Counter::PermitsAcquired
        } else if hold.shared {
            Counter::ReadLocksAcquired
        } else {
            Counter::LockAcquired
        });
    }

    /// Acquires what `want` asks for, waiting up to `wait`; `token`: the hold of
    /// ours it converts (an upgrade or a downgrade), else a fresh token.
    pub fn acquire_as(
        &self,
        ttl: Duration,
        wait: Duration,
        want: Want,
        token: Option<Token>,
    ) -> Result<Got> {
        let permit = matches!(want, Want::Permit(..));
        // A semaphore's keys only for permits: their release skips the lock key
        // ('p'), so a lock taken on them would be left held.
        debug_assert_eq!(permit, self.keys.semaphore);
        let started = Instant::now();
        let waited = self.claim(&LockClaim { ttl, want, token }, wait)?;
        match waited.result {
            Some(mut hold) => {
                hold.acquired_at = started;
                self.count_acquired(&hold);
                if waited.contended && !permit {
                    metrics::incr(Counter::LockContended);
                }
                if !permit {
                    metrics::observe(Timing::LockWait, started.elapsed());
                }
                Ok(Got::Held(hold))
            }
            None if waited.lapsed => Ok(Got::Lapsed),
            None => {
                metrics::incr(if permit {
                    Counter::PermitsBusy
                } else {
                    Counter::LockBusy
                });
                Ok(Got::Busy)
            }
        }
    }

    /// Runs the unlock of `token` for this kind of lease: release.lua for a lock,
    /// session_save.lua's 'unlock' for a session (whose next waiter gets the data).
    /// 1: unlocked now; 0: not ours; 2: a session's hold a logout revoked.
    fn unlock(&self, c: &mut Conn, token: &Token) -> redis::RedisResult<i64> {
        match &self.keys.data {
            None => {
                let mut inv = scripts::RELEASE.key(self.keys.lock());
                inv.key(self.keys.fence())
                    .key(self.keys.waiters())
                    .key(self.keys.terms())
                    .key(self.keys.holders())
                    .key(self.keys.weights())
                    .arg(token.as_str());
                if self.keys.semaphore {
                    inv.arg("p");
                }
                inv.call(&mut *c.inner)
            }
            Some(data) => self
                .save_script(data, token, b"", 0, "unlock")
                .call(&mut *c.inner),
        }
    }

    /// Writes a marker of `token` (in the lease's slot; nothing reads it) on
    /// `c`, for a WAIT after it to count.
    pub(crate) fn set_marker(
        &self,
        c: &mut Conn,
        what: &[u8],
        token: &Token,
    ) -> redis::RedisResult<()> {
        redis::cmd("SET")
            .arg(self.keys.marker(what, token))
            .arg(1)
            .arg("PX")
            .arg(millis(marker_ttl(&self.endpoint)))
            .query(&mut c.inner)
    }

    /// session_save.lua's invocation for `op`.
    pub(crate) fn save_script<'a>(
        &'a self,
        data_key: &'a [u8],
        token: &'a Token,
        data: &'a [u8],
        secs: u64,
        op: &'a str,
    ) -> scripts::Invocation<'a> {
        // Only a write may be refused under maxmemory (see scripts.rs).
        let script = if op == "write" {
            &scripts::SESSION_SAVE
        } else {
            &scripts::SESSION_UNLOCK
        };
        let mut inv = script.key(data_key);
        inv.key(self.keys.lock())
            .key(self.keys.waiters())
            .key(self.keys.terms())
            .key_of(&self.keys.revoked_parts());
        let destroy = op == "destroy";
        if destroy {
            inv.key(self.keys.marker(b"destroyed", token));
        }
        inv.arg(token.as_str()).arg(data).arg(secs).arg(op);
        if destroy {
            inv.arg(hold::millis(marker_ttl(&self.endpoint)));
        }
        inv
    }

    /// Releases `hold`. True when it was ours and is now free (or handed to the
    /// next waiter); false when it had expired or been taken by another.
    ///
    /// `maybe_done`: an earlier release of this hold may have run (it timed out); a
    /// lease found gone before it could have expired is then ours, released.
    /// A release that times out is reported as `Error::Unresolved`.
    ///
    /// A hold the watchdog gave up on (it could not confirm a renewal in time) may
    /// still be ours on Redis: it is released all the same, and handed on.
    pub fn release(&self, hold: &Hold, maybe_done: bool) -> Result<bool> {
        self.release_answer(hold, maybe_done).map(|n| n == 1)
    }

    /// [`Lease::release`], answering as `unlock` does (2: a session's hold a
    /// logout revoked), and counted.
    pub(crate) fn release_answer(&self, hold: &Hold, maybe_done: bool) -> Result<i64> {
        hold.stop_watch();
        let n = self.unlock_hold(hold, maybe_done)?;
        let released = n == 1;
        if self.keys.data.is_some() {
            hold.count_session_end(n, Instant::now());
        } else {
            self.count_let_go(hold, released, Instant::now());
        }
        Ok(n)
    }

    /// Releases the lock whoever holds it, handing it to the first waiter (with a
    /// fresh fencing token, so the holder it was taken from is fenced off). True
    /// when it was held. Run again after a lost reply, it answers by its marker:
    /// a second run would free the lock the first handed to a waiter.
    pub fn force_release(&self) -> Result<bool> {
        let nonce = Token::generate();
        let marker = self.keys.marker(b"forced", &nonce);
        let ttl = marker_ttl(&self.endpoint).as_millis().to_string();
        let n: i64 = self.call_idempotent(|c| {
            let n: i64 = scripts::FORCE_RELEASE
                .key(self.keys.lock())
                .key(self.keys.fence())
                .key(self.keys.waiters())
                .key(self.keys.terms())
                .key(self.keys.holders())
                .key(&marker[..])
                .arg(&ttl)
                .call(&mut *c.inner)?;
            let acks = self.wait_replicas(c, n == 1)?;
            let _ = self.replicated(acks, "The lock was released");
            Ok(n)
        })?;
        Ok(n == 1)
    }

    /// Releases whatever lease `token` holds. True when it held one.
    pub fn release_token(&self, token: &Token) -> Result<bool> {
        self.call_idempotent(|c| self.unlock(c, token))
            .map(|n| n == 1)
    }

    /// Unlocks `hold`, answering as `unlock` does (2: a session's hold a logout
    /// revoked), uncounted; `maybe_done` as for [`Lease::release`]. Run again
    /// after a broken link (or after a release that timed out), a 0 while the
    /// lease cannot have run out yet, on a master known since the hold was, means
    /// the earlier run freed it (1), and a marker is WAITed for in its place. A WAIT shortfall is counted, not reported: an
    /// unlock a failover loses only delays the next holder (its lease ends by
    /// itself). One that times out is `Error::Unresolved`.
    fn unlock_hold(&self, hold: &Hold, maybe_done: bool) -> Result<i64> {
        // A 0 from a master learned of since the hold was last known to be on
        // one says a failover lost the lock, not that our first run freed it.
        let started = topology::generation(&self.endpoint);
        let generation = hold.known_generation().unwrap_or(started);
        let answered = Cell::new(None);
        let run = |c: &mut Conn, again: bool| {
            answered.set(None);
            let n = self.unlock(c, &hold.token)?;
            // From here the unlock's answer stands.
            answered.set(Some(n));
            // Run again and found nothing of ours: the first run, whose link
            // broke before its WAIT (or an earlier release that timed out:
            // `maybe_done`), may have freed it. A marker written on this link
            // is what WAIT counts then (the replication stream is in order), or
            // a failover could bring the lock back. (Not once the lease may
            // have run out or the master changed: the 0 is then reported as it
            // is; switched_since, which may ask the sentinels, asked last. A
            // full Redis refusing the marker leaves that unconfirmed, counted.)
            let marked = n == 0
                && self.endpoint.wait.is_some()
                && (again || maybe_done)
                && !hold.run_out()
                && !self.switched_since(generation)
                && {
                    match self.set_marker(c, b"unlocked", &hold.token) {
                        Ok(()) => true,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) =>
                        {
                            metrics::incr(Counter::WaitShortfalls);
                            false
                        }
                        Err(e) => return Err(e),
                    }
                };
            let acks = self.wait_replicas(c, n == 1 || marked)?;
            let _ = self.replicated(acks, "The lock was released");
            Ok(n)
        };
        // An unlock answered whose WAIT then got no answer in time (a master
        // stalled past the wait): the unlock's answer stands, its replication
        // unconfirmed, as a shortfall. (The link is dropped, as after any
        // failure.) A broken link is asked again, as ever, and so is a master
        // replaced meanwhile: the unlock is settled on the new one.
        let call = |again: bool| {
            answered.set(None);
            match self.call(|c| run(c, again)) {
                Err(Failure::TimedOut(e)) if answered.get().is_some() => {
                    if self.switched_since(started) {
                        return Err(Failure::Broken(e));
                    }
                    metrics::incr(Counter::WaitShortfalls);
                    Ok(answered.get().unwrap_or_default())
                }
                other => other,
            }
        };
        let (n, maybe_done) = match call(false) {
            Ok(n) => (n, maybe_done),
            Err(Failure::TimedOut(e)) => return Err(unknown(&e, hold.token.clone(), "released")),
            Err(Failure::Broken(_)) => {
                metrics::incr(Counter::Retries);
                let again = match call(true) {
                    Ok(n) => n,
                    // The first unlock may have run: say so, for the next release().
                    Err(f) => return Err(unknown(&f.into_error(), hold.token.clone(), "released")),
                };
                metrics::incr(Counter::UncertainResolved);
                (again, true)
            }
            Err(f) => return Err(f.into_error()),
        };
        let freed = n == 0 && maybe_done && !hold.run_out() && !self.switched_since(generation);
        Ok(if freed { 1 } else { n })
    }

    /// Gives up on `token`, whose state is unknown: frees the lease if it holds it,
    /// and otherwise takes it out of the queue and voids it.
    pub fn abandon(&self, token: &Token, ttl: Duration) -> Result<()> {
        self.abandoned(token, ttl).map(drop)
    }

    /// [`Lease::abandon`]; true when the token still held the lease, now freed.
    fn abandoned(&self, token: &Token, ttl: Duration) -> Result<bool> {
        if self.resolve(token, ttl)?.is_none() {
            return Ok(false);
        }
        self.release_token(token)?;
        Ok(true)
    }

    /// Cleanup: [`Lease::release`], except that what it cannot do now is left to
    /// this process's next call to the endpoint (see `pending`). In `teardown` (the
    /// end of a request, which may have many leases to free) it does not even try
    /// an endpoint that failed a moment ago, so K leftovers cost one timeout, not K.
    pub fn release_or_defer(&self, hold: &Hold, maybe_done: bool, teardown: bool) {
        hold.stop_watch();
        let skip = hold.unanswered() || (teardown && pool::recently_failed(&self.endpoint));
        let maybe_sent = if skip {
            maybe_done
        } else {
            match self.release(hold, maybe_done) {
                Ok(_) => return,
                Err(e) => maybe_done || matches!(e, Error::Unresolved { .. }),
            }
        };
        self.defer_end(hold, maybe_sent);
    }

    /// [`Lease::abandon`] as cleanup, like [`Lease::release_or_defer`].
    pub fn abandon_or_defer(&self, token: Token, ttl: Duration, teardown: bool) {
        let skip = teardown && pool::recently_failed(&self.endpoint);
        if skip || self.abandon(&token, ttl).is_err() {
            self.defer(token, ttl);
        }
    }

    /// Leaves `token` (of a lease of `ttl`) to be abandoned by this process's next
    /// call to the endpoint (see `pending`).
    pub(crate) fn defer(&self, token: Token, ttl: Duration) {
        self.defer_as(token, ttl, None);
    }

    /// Leaves `hold`'s release (or a session's unlock) to this process's next
    /// call to the endpoint, as `defer`, and counts how it ended then (see
    /// `Abandon::settle`). `maybe_sent`: a release or save of it may have run
    /// already, unanswered.
    pub(crate) fn defer_end(&self, hold: &Hold, maybe_sent: bool) {
        let end = (hold.clone(), maybe_sent);
        self.defer_as(hold.token.clone(), hold.ttl, Some(end));
    }

    fn defer_as(&self, token: Token, ttl: Duration, end: Option<(Hold, bool)>) {
        let left = Abandon {
            lease: self.clone(),
            token,
            ttl,
            end,
            at: Instant::now(),
        };
        pending::defer(Box::new(left), void_ttl(ttl));
    }

    /// Counts `hold` ended: `freed` by its holder (who let go at `let_go`), or
    /// else lost (for a session, as session_save.lua's answers 1 and 0).
    fn count_let_go(&self, hold: &Hold, freed: bool, let_go: Instant) {
        match (self.keys.data.is_some(), freed) {
            (true, _) => hold.count_session_end(i64::from(freed), let_go),
            (false, true) => hold.count_released(let_go),
            (false, false) => hold.count_lost(Kind::Lock),
        }
    }

    /// Whether `token` was left to be abandoned by this process (`defer`): a
    /// give-back or release that was sent, or is due, which may still run.
    pub(crate) fn left_to_settle(&self, token: &Token) -> bool {
        pending::left_to_settle(token)
    }

    /// Sets `hold` to end `ttl` from now. False when it was no longer ours.
    pub fn refresh(&self, hold: &mut Hold, ttl: Duration) -> Result<bool> {
        self.refresh_as(hold, ttl, false)
    }

    /// `refresh`; `inherited`: the hold is a forked child's copy of its
    /// parent's, which the parent counts on as it last set it: the lease is set
    /// to end no sooner than it would (a child's refresh that shortened it
    /// would leave the parent counting on more than Redis keeps).
    pub(crate) fn refresh_as(
        &self,
        hold: &mut Hold,
        ttl: Duration,
        inherited: bool,
    ) -> Result<bool> {
        let sent = Instant::now();
        // Each is named to Redis by every later refresh, until one is answered.
        if hold.unanswered_full(sent) {
            return Err(self.refresh_refused());
        }
        // Until answered (and, with wait_replicas, replicated), nothing is counted
        // on past what this refresh may leave, nor past what was there before.
        hold.refreshing(sent, ttl);
        let id = Token::generate();
        let how = Extend::Holder {
            id: &id,
            earlier: &hold.unanswered_refreshes,
            at_least: inherited,
        };
        // As `call_idempotent`, sent again once on a broken link, with the same
        // id (both runs set the expiry to `ttl` from no earlier than `sent`).
        let run = |c: &mut Conn| self.refresh_on(c, &hold.token, ttl, how);
        let mut may_run = false;
        let ran = match self.call(run) {
            Err(Failure::Broken(_)) => {
                metrics::incr(Counter::Retries);
                may_run = true;
                self.call(run)
            }
            other => other,
        };
        // It ran, and voided the earlier ones (or they went with the lease).
        // Unanswered, it may still run, until the next refresh voids it; so may
        // a first run whose link broke, even when the second was answered: it
        // may sit in a socket buffer, and come after the next refresh (found by
        // the model, tests/model.rs a_late_refresh_never_cuts_a_later_one).
        // Voided on a master that too few replicas heard from, they stay listed,
        // to be voided again (a failover behind one address could lose that).
        let unanswered = match &ran {
            Ok((0 | 1, acks)) => {
                if !self.short(*acks) {
                    hold.unanswered_refreshes.clear();
                }
                may_run
            }
            Ok(_) => false,
            // Never sent, or an error reply: nothing of this run comes later.
            Err(Failure::NotSent(_) | Failure::Reply(_)) => may_run,
            Err(_) => true,
        };
        if unanswered {
            hold.unanswered_refreshes.push((id.clone(), sent, ttl));
        }
        let answer = ran
            .map_err(Failure::into_error)
            .and_then(|(n, acks)| match n {
                0 | 1 => {
                    self.replicated(acks, "The lease was extended")?;
                    Ok(n == 1)
                }
                // Voided by a later refresh of this hold: only a copy of the
                // hold (a forked child's) could have sent one meanwhile.
                _ => Err(Error::Connection(format!(
                    "The refresh reached Redis at {} after a later refresh of the same \
                     hold, and changed nothing",
                    self.endpoint.location()
                ))),
            });
        hold.refreshed(sent, ttl, answer.as_ref().ok().copied());
        let ok = answer?;
        if ok {
            metrics::incr(Counter::LockRenewals);
        } else {
            hold.count_lost(Kind::Lock);
        }
        Ok(ok)
    }

    /// A refresh answered, each time it was sent, only once the lease it set
    /// could have ended by our clock.
    pub(crate) fn refresh_late(&self) -> Error {
        Error::Connection(format!(
            "The lease was extended, but Redis at {} answered each time only after it could \
             have ended: it is not counted on",
            self.endpoint.location()
        ))
    }

    /// A refresh not sent: too many of the hold's are unanswered (see
    /// `Hold::unanswered_full`).
    pub(crate) fn refresh_refused(&self) -> Error {
        Error::Connection(format!(
            "The lease was not extended (not sent): Redis at {} left {} of its refreshes \
             unanswered in the last {} s, and each may still arrive",
            self.endpoint.location(),
            hold::MAX_UNANSWERED,
            hold::LATE.as_secs()
        ))
    }

    /// The fencing token of `hold`, assigned now if it has none yet (fence.lua);
    /// `None` when the lease is no longer ours.
    pub fn fence(&self, hold: &mut Hold) -> Result<Option<i64>> {
        if hold.fence != 0 {
            return Ok(Some(hold.fence));
        }
        // Idempotent: a second run returns the fence the first one assigned.
        let v: Option<String> = self.call_idempotent(|c| {
            scripts::FENCE
                .key(self.keys.lock())
                .key(self.keys.fence())
                .arg(hold.token.as_str())
                .call(&mut *c.inner)
        })?;
        let Some(v) = v else {
            hold.count_lost(Kind::Lock);
            return Ok(None);
        };
        hold.fence = v
            .parse()
            .map_err(|_| self.unexpected(&"fence is not a number"))?;
        Ok(Some(hold.fence))
    }

    /// Whether anyone holds the lock: alone, or a reader whose lease has not run out.
    pub fn held(&self) -> Result<bool> {
        let n: i64 = self.call_idempotent(|c| {
            scripts::HELD
                .key(self.keys.lock())
                .key(self.keys.holders())
                .call(&mut *c.inner)
        })?;
        Ok(n == 1)
    }

    /// What `token` holds per Redis, if anything.
    pub fn inspect(&self, token: &Token) -> Result<Option<Owned>> {
        let v = self.call_idempotent(|c| self.inspect_on(c, token))?;
        self.parse_owned(v)
    }

    /// inspect.lua's reply for `token`, on `c`.
    fn inspect_on(&self, c: &mut Conn, token: &Token) -> redis::RedisResult<Value> {
        scripts::INSPECT
            .key(self.keys.lock())
            .key(self.keys.holders())
            .key(self.keys.weights())
            .arg(token.as_str())
            .call(&mut *c.inner)
    }

    /// What Redis says of a hold taken elsewhere (`Lock::restore`), to be counted
    /// on: with `wait_replicas`, only once the replicas have the lease as read. A
    /// refresh whose WAIT fell short leaves the master's lease longer than theirs
    /// (its holder counts on no more than they have); read from the master alone,
    /// the restored hold would count on the longer one, and a failover then gives
    /// the lock to another while it still does (review, stop 60). So the read is
    /// followed by an owner-checked refresh that shortens nothing and always
    /// writes (refresh.lua), WAITed for: the replicas then have every write
    /// before it, the lease as read included. To at least what was read, or,
    /// for a lock with no expiry (never set by us), `ttl`, which the hold then
    /// counts on (`Hold::found`).
    pub fn inspect_replicated(&self, token: &Token, ttl: Duration) -> Result<Option<Owned>> {
        let (v, acks) = self.call_idempotent(|c| {
            let v = self.inspect_on(c, token)?;
            if v == Value::Nil || self.endpoint.wait.is_none() {
                return Ok((v, None));
            }
            let read = self.parse_owned(v.clone()).ok().flatten();
            let at_least = read
                .and_then(|o| o.left)
                .unwrap_or(ttl)
                .max(Duration::from_millis(1));
            match self.refresh_on(c, token, at_least, Extend::Grant)? {
                (1, acks) => Ok((v, acks)),
                // Gone between the two: not ours to count on.
                _ => Ok((Value::Nil, None)),
            }
        })?;
        self.replicated(acks, "The restored lease was read")?;
        self.parse_owned(v)
    }

    /// Settles a claim of `token` whose outcome is unknown: what it holds (with a
    /// session's data); otherwise it leaves the queue and is voided, so the claim
    /// can never take the lease later.
    pub fn resolve(&self, token: &Token, ttl: Duration) -> Result<Option<Owned>> {
        let v: Value = self.call_idempotent(|c| {
            let mut inv = scripts::RESOLVE.key(self.keys.lock());
            inv.key(self.keys.waiters())
                .key(self.keys.terms())
                .key_of(&self.keys.void_parts(token))
                .key(self.keys.holders());
            if let Some(data) = &self.keys.data {
                inv.key(data);
            }
            inv.arg(token.as_str())
                .arg(millis(void_ttl(ttl)))
                .call(&mut *c.inner)
        })?;
        self.parse_owned(v)
    }

    /// Reads the `{pttl, fence[, data[, weight]]}`-or-nil reply of inspect.lua and
    /// resolve.lua.
    fn parse_owned(&self, v: Value) -> Result<Option<Owned>> {
        let items = match v {
            Value::Nil => return Ok(None),
            Value::Array(items) if (2..=4).contains(&items.len()) => items,
            other => return Err(self.unexpected(&format!("{other:?}"))),
        };
        let mut items = items.into_iter();
        let mut next = || items.next().unwrap_or(Value::Nil);
        let pttl = i64::from_redis_value(next()).map_err(|e| self.unexpected(&e))?;
        let fence = next();
        let shared = matches!(&fence, Value::BulkString(f) if f == b"-");
        let fence = if shared {
            0
        } else {
            parse_fence(fence).ok_or_else(|| self.unexpected(&"bad fence"))?
        };
        let data = Option::<Vec<u8>>::from_redis_value(next()).map_err(|e| self.unexpected(&e))?;
        let weight = Option::<u32>::from_redis_value(next())
            .map_err(|e| self.unexpected(&e))?
            .unwrap_or(1);
        Ok(Some(Owned {
            left: pttl_duration(pttl),
            fence,
            shared,
            data,
            weight,
        }))
    }

    pub(crate) fn unexpected(&self, what: &dyn fmt::Display) -> Error {
        Error::Connection(format!(
            "Redis at {} gave an unexpected reply ({what}); is something else using the key?",
            self.endpoint.location()
        ))
    }
}

/// A token to give up on when Redis answers again (see `pending`).
struct Abandon {
    lease: Lease,
    token: Token,
    ttl: Duration,
    /// The hold whose release (or save) this is, and whether one may have run
    /// already: its end is counted as it settles.
    end: Option<(Hold, bool)>,
    /// When it was left: its holder let go then (for the hold-time histograms).
    at: Instant,
}

impl Leftover for Abandon {
    fn endpoint(&self) -> &Endpoint {
        &self.lease.endpoint
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn settle(&self) -> Result<()> {
        let freed = self.lease.abandoned(&self.token, self.ttl)?;
        // Gone: it ran out before, or the release left unanswered freed it
        // (its holder let go; which came first is not known).
        if let Some((hold, maybe_sent)) = &self.end {
            self.lease.count_let_go(hold, freed || *maybe_sent, self.at);
        }
        Ok(())
    }
}

/// How long the marker of a script that may be sent again (a forced release;
/// a write or revocation of a session the request does not hold) lasts: past
/// the retry of `call_idempotent`, which may come after a connect, the first
/// run's reply and its WAIT, then its own connect, and a failover's sentinels
/// asked one after another (each a connect and a read, then the master's
/// ROLE): no less than a command may be on its way (`hold::LATE`). Expired
/// first, a retry would run again: a logout's would revoke the next holder.
pub(crate) fn marker_ttl(ep: &Endpoint) -> Duration {
    let t = &ep.timeouts;
    let wait = ep
        .wait
        .map_or(Duration::ZERO, |w| w.timeout.unwrap_or(t.read));
    ((t.connect + t.read + wait) * 2 + Duration::from_secs(1)).max(hold::LATE)
}

/// What an acquire got.
#[derive(Debug)]
pub enum Got {
    Held(Hold),
    /// Others still hold it after the wait (or, for an upgrade, another reader
    /// waits to upgrade).
    Busy,
    /// A conversion (upgrade, downgrade) whose own hold had run out: someone may
    /// have come between, so there was nothing to convert.
    Lapsed,
}

/// What a claim of a lock or semaphore wants (acquire.lua's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// The lock alone (a writer).
    Alone,
    /// The lock shared with other readers.
    Shared,
    /// The lock alone, for a holder that has it as a reader (an upgrade).
    Upgrade,
    /// The lock shared, for a holder that has it alone (a downgrade).
    Downgrade,
    /// Permits of a semaphore: (its limit, how many at once).
    Permit(u32, u32),
}

impl Want {
    fn mode(self) -> &'static str {
        match self {
            Want::Alone => "w",
            Want::Shared => "r",
            Want::Upgrade => "u",
            Want::Downgrade => "d",
            Want::Permit(..) => "p",
        }
    }

    /// Whether what it gets is a shared hold.
    fn shared(self) -> bool {
        matches!(self, Want::Shared | Want::Downgrade | Want::Permit(..))
    }
}

/// Claiming a named lock or a semaphore's permit: acquire.lua, and the fencing
/// token with a lock taken alone.
struct LockClaim {
    ttl: Duration,
    want: Want,
    /// A holder converting its own hold (upgrade, downgrade) keeps its token.
    token: Option<Token>,
}

impl LockClaim {
    fn hold(&self, token: Token, fence: i64, since: Instant) -> Hold {
        let mut hold = Hold::new(token, fence, self.ttl, since);
        hold.shared = self.want.shared();
        hold
    }
}

impl Claim for LockClaim {
    type Won = Hold;

    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    fn adopts(&self, owned: &Owned) -> bool {
        owned.shared == self.want.shared()
    }

    fn send(
        &self,
        lease: &Lease,
        token: &Token,
        will_wait: Duration,
        generation: u64,
    ) -> std::result::Result<Value, Failure> {
        // Only permits weigh: a lock's claim leaves the weights out (every key and
        // argument costs Redis time on each call).
        let permits = match self.want {
            Want::Permit(limit, weight) => Some((limit, weight)),
            _ => None,
        };
        let (reply, acks) = lease.call(|c| {
            let mut inv = scripts::ACQUIRE.key(lease.keys.lock());
            inv.key(lease.keys.fence())
                .key(lease.keys.waiters())
                .key(lease.keys.terms())
                .key_of(&lease.keys.void_parts(token))
                .key(lease.keys.holders());
            if permits.is_some() {
                inv.key(lease.keys.weights());
            }
            inv.arg(token.as_str())
                .arg(millis(self.ttl))
                .arg(millis(will_wait))
                .arg(self.want.mode());
            if let Some((limit, weight)) = permits {
                inv.arg(limit).arg(weight);
            }
            let mut reply = match inv.call(&mut *c.inner)? {
                // The fast path's bare 1 (the cheapest reply for Redis to build):
                // taken, its fence not assigned yet.
                Value::Int(1) => Value::Array(vec![Value::Int(1), Value::BulkString(Vec::new())]),
                reply => reply,
            };
            let acks = lease.replicate_claim(c, &mut reply, token, self.ttl)?;
            Ok((reply, acks))
        })?;
        lease.claim_replicated(acks, token, self.ttl, generation, "The lock was taken")?;
        Ok(reply)
    }

    fn won(&self, lease: &Lease, token: &Token, detail: Value, since: Instant) -> Result<Hold> {
        let fence =
            parse_fence(detail).ok_or_else(|| lease.unexpected(&"fence is not a number"))?;
        Ok(self.hold(token.clone(), fence, since))
    }

    fn adopt(&self, token: Token, owned: Owned, since: Instant) -> Hold {
        self.hold(token, owned.fence, since)
    }

    fn handed(
        &self,
        _: &Lease,
        token: Token,
        fence: i64,
        _: &[u8],
        since: Instant,
    ) -> Result<Hold> {
        Ok(self.hold(token, fence, since))
    }

    fn hold_of<'a>(&self, won: &'a mut Hold) -> &'a mut Hold {
        won
    }
}

/// What a turn of `Lease::claim`'s loop starts from.
enum Next<W> {
    /// A lease handed to us (a wake-up), to be checked as an attempt's grant.
    Handed(W),
    /// An attempt's reply.
    Reply(Value),
}

/// A fence as the scripts give it: digits, or empty while unassigned (0).
fn parse_fence(v: Value) -> Option<i64> {
    match String::from_redis_value(v).ok()?.as_str() {
        "" => Some(0),
        digits => digits.parse().ok(),
    }
}

/// A wake-up list entry: `<fence>:<payload>` (fence `0` for a shared hold).
fn parse_handoff(entry: &[u8]) -> Option<(i64, &[u8])> {
    let colon = entry.iter().position(|&b| b == b':')?;
    let fence = std::str::from_utf8(&entry[..colon]).ok()?.parse().ok()?;
    Some((fence, &entry[colon + 1..]))
}

/// A server error as Redis sent it ("NOPERM this user has no permissions..."),
/// so operators can grep for Redis's own error codes. Redis's "unknown command"
/// error goes on to echo the command's arguments (keys, a session id): cut off.
fn server_error_text(e: &redis::RedisError) -> String {
    let text = match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    };
    match text.find(", with args beginning with") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A server that cannot run our scripts (EVAL and EVALSHA renamed away or
/// disabled, a user without @scripting, Valkey without its Lua engine) answers
/// in its own words: say what they mean for us.
fn scripting_hint(e: &redis::RedisError) -> &'static str {
    let text = e.to_string().to_ascii_lowercase();
    let scripts = ["eval", "script", "lua", "fcall", "function"]
        .iter()
        .any(|w| text.contains(w));
    let refused = [
        "unknown command",
        "noperm",
        "no permissions",
        "engine",
        "not loaded",
        "disabled",
    ]
    .iter()
    .any(|w| text.contains(w));
    if scripts && refused {
        " (redis_lease runs Lua scripts, as functions (FCALL) or by EVALSHA and EVAL: this server \
         or user cannot run them; enable scripting, or grant the user @scripting)"
    } else {
        ""
    }
}

/// Redis's answers to a client that has not authenticated are cryptic (for a long
/// command: "Protocol error: unauthenticated multibulk length"): say what they mean.
fn auth_hint(e: &redis::RedisError) -> &'static str {
    let text = e.to_string();
    if text.contains("NOAUTH") || text.contains("unauthenticated") {
        " (Redis requires authentication: give a password, or user and password, in the DSN)"
    } else {
        ""
    }
}

/// An acquire whose outcome Redis could not confirm: the token lets the caller
/// check later.
pub(crate) fn unresolved(e: &Error, token: Token) -> Error {
    unknown(e, token, "taken")
}

/// An error after which whether `token`'s lock was `what` (taken, released)
/// is unknown: `Error::Unresolved`.
fn unknown(e: &Error, token: Token, what: &str) -> Error {
    if let Error::Unresolved { .. } = e {
        return Error::Unresolved {
            message: e.to_string(),
            token,
        };
    }
    Error::Unresolved {
        message: format!("{e}; whether the lock was {what} is unknown until Redis answers again"),
        token,
    }
}

/// PTTL to a duration: -1 (no expiry) is `None`; -2 (gone) is zero.
pub(crate) fn pttl_duration(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        n => Some(Duration::from_millis(n.max(0) as u64)),
    }
}

/// Checks a ttl or wait given in seconds by a user. A positive ttl shorter than a
/// millisecond is one millisecond (Redis's unit; Symfony's RedisStore rounds the
/// same way), and ttls are whole milliseconds, rounded up, so that the lease we
/// count on is exactly the one Redis keeps.
pub fn seconds(name: &str, value: f64, allow_zero: bool) -> Result<Duration> {
    seconds_named(|| name.to_string(), value, allow_zero)
}

/// [`seconds`], with the argument's name made only for an error message.
pub fn seconds_named(
    name: impl FnOnce() -> String,
    value: f64,
    allow_zero: bool,
) -> Result<Duration> {
    let ok = value.is_finite()
        && value <= MAX_SECONDS
        && if allow_zero {
            value >= 0.0
        } else {
            value > 0.0
        };
    if !ok {
        // 1e300 written out in full would be a 300-digit message.
        let given = if value.is_finite() && value.abs() >= 1e9 {
            format!("{value:e}")
        } else {
            value.to_string()
        };
        let range = if allow_zero { ">= 0" } else { "> 0" };
        return Err(Error::invalid(format!(
            "{} must be a finite number of seconds {range} and <= {MAX_SECONDS}, {given} given",
            name()
        )));
    }
    let d = Duration::from_secs_f64(value);
    if allow_zero {
        return Ok(d);
    }
    let ms = d.as_nanos().div_ceil(1_000_000).max(1);
    Ok(Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key is the lock key and its own suffix, whatever the lock key's length
    /// (they share one buffer: an off-by-one would run one key into the next).
    #[test]
    fn each_key_is_the_lock_key_and_its_suffix() {
        for len in [0, 1, 2, 7, 64, 300] {
            let name: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let keys = LeaseKeys::for_lock(b"p:", &name);
            let lock = [b"p:{".as_slice(), &name, b"}"].concat();
            assert_eq!(keys.lock(), lock.as_slice());
            let got = [
                keys.fence(),
                keys.waiters(),
                keys.terms(),
                keys.holders(),
                keys.weights(),
            ];
            for (key, suffix) in got.iter().zip(SUFFIXES) {
                assert_eq!(*key, [lock.as_slice(), suffix].concat().as_slice());
            }

            let sem = LeaseKeys::for_semaphore(b"p:", &name);
            let base = [lock.as_slice(), b":semaphore"].concat();
            assert_eq!(sem.lock(), base.as_slice());
            assert_eq!(
                sem.weights(),
                [base.as_slice(), b":weights"].concat().as_slice()
            );

            let session = LeaseKeys::with_base(lock.clone(), Some(b"d".to_vec()));
            assert_eq!(session.all, keys.all);
            assert_eq!(session.data.as_deref(), Some(b"d".as_slice()));
            // Only a semaphore's release skips the lock key ('p').
            assert!(sem.semaphore && !keys.semaphore && !session.semaphore);
        }
    }
}
