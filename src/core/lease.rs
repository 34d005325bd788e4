//! The lease engine: acquire, wait, refresh, inspect and release one lease.
//!
//! A lease is a Redis string `token:fence` with a millisecond expiry. The token is
//! 128 random bits, fresh for every attempt, so only the attempt that set it can
//! release, extend or claim it. The fence is a number that rises with every grant
//! of the key, for storage that must reject a paused holder's late writes.
//!
//! Uncertain outcomes are resolved, not guessed: when a connection fails after a
//! command may have reached Redis, the engine asks again on a fresh connection
//! what our token holds. A waiter sleeps in BLPOP on a per-key wake list that the
//! releaser pushes to, bounded by the holder's remaining lease (a crashed holder
//! never releases) and by the caller's deadline.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::TryRngCore;
use redis::{ErrorKind, FromRedisValue, Value};

use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter, Timing};
use crate::core::pool::{connection_error, Conn};
use crate::core::scripts;

/// Longest lease or wait we accept: 30 days. Longer values are almost surely a
/// unit mistake (milliseconds given as seconds), and would overflow Redis's PX.
pub const MAX_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

/// How long after its timeout we still listen for a BLPOP reply.
const BLPOP_SLACK: Duration = Duration::from_millis(5);

/// Shortest lease: Redis expiries are in milliseconds.
pub const MIN_TTL: Duration = Duration::from_millis(1);

/// How much earlier than the lease we assume it may end, to cover the clock
/// difference between this host and Redis (Redlock's drift allowance).
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// A lease token: 128 random bits as 32 hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Fresh randomness from the OS for every token: a user-space generator seeded
    /// once would repeat itself in both processes after fork().
    pub fn generate() -> Token {
        let mut bytes = [0u8; 16];
        rand::rngs::OsRng
            .try_fill_bytes(&mut bytes)
            .expect("the OS random number generator failed");
        Token(format!("{:032x}", u128::from_le_bytes(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Enough to correlate log lines, not enough to forge a release.
        write!(f, "Token({}…)", &self.0[..8])
    }
}

/// The Redis keys of one lease. They share a hash tag, so they live in one
/// Redis Cluster slot and one script may touch them all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseKeys {
    pub lock: Vec<u8>,
    pub fence: Vec<u8>,
    pub wake: Vec<u8>,
    pub waiters: Vec<u8>,
}

impl LeaseKeys {
    /// Keys of a named lock: `prefix{name}`, `prefix{name}:fence`, `:wake`, `:waiters`.
    pub fn for_lock(prefix: &[u8], name: &[u8]) -> LeaseKeys {
        let mut lock = Vec::with_capacity(prefix.len() + name.len() + 2);
        lock.extend_from_slice(prefix);
        lock.push(b'{');
        lock.extend_from_slice(name);
        lock.push(b'}');
        LeaseKeys::with_base(lock)
    }

    /// Keys built from an already hash-tagged lock key (sessions use their own).
    pub fn with_base(lock: Vec<u8>) -> LeaseKeys {
        let suffixed = |s: &[u8]| [lock.as_slice(), s].concat();
        LeaseKeys {
            fence: suffixed(b":fence"),
            wake: suffixed(b":wake"),
            waiters: suffixed(b":waiters"),
            lock,
        }
    }
}

impl LeaseKeys {
    /// Marks `token` as given up on (see resolve.lua).
    pub fn void(&self, token: &Token) -> Vec<u8> {
        [self.lock.as_slice(), b":void:", token.as_str().as_bytes()].concat()
    }
}

/// How long a voided token stays void: longer than any attempt can sit unread in
/// a socket buffer of a live Redis, in practice. Should one arrive even later, it
/// takes a lease nobody holds, which then ends by itself like a crashed holder's.
pub(crate) fn void_ttl(ttl: Duration) -> Duration {
    ttl + Duration::from_secs(60)
}

/// A lease we hold.
#[derive(Clone, Debug)]
pub struct Hold {
    pub token: Token,
    pub fence: i64,
    pub ttl: Duration,
    /// When the attempt that won (or last renewed) the lease was sent: the lease
    /// cannot end before `sent + ttl - drift` by this host's clock.
    pub sent: Instant,
    /// When we started to want the lease, for the wait-time metric.
    pub acquired_at: Instant,
}

impl Hold {
    /// A hold won by the attempt sent at `sent`.
    pub fn new(token: Token, fence: i64, ttl: Duration, sent: Instant) -> Hold {
        Hold {
            token,
            fence,
            ttl,
            sent,
            acquired_at: sent,
        }
    }

    /// Until when, by our clock, nobody else can have this lease.
    pub fn safe_until(&self) -> Instant {
        self.sent + self.ttl.saturating_sub(drift(self.ttl))
    }
}

/// What one acquire attempt found. `T` is what a successful attempt yields: the
/// hold, and for a session also its data.
#[derive(Debug)]
pub enum Attempt<T = Hold> {
    Acquired(T),
    /// Held by another; `Some(d)`: its lease ends in `d`; `None`: it has no expiry.
    Busy(Option<Duration>),
}

/// How a waiting acquire ended.
#[derive(Debug)]
pub struct Waited<T> {
    /// `None`: still held by another when the wait ran out.
    pub result: Option<T>,
    /// Whether any attempt found the lease held.
    pub contended: bool,
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
    pub(crate) fn call<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
    ) -> std::result::Result<T, Failure> {
        let mut conn = Conn::checkout(&self.endpoint).map_err(Failure::NotSent)?;
        match f(&mut conn) {
            Ok(v) => {
                conn.recycle();
                Ok(v)
            }
            Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
                // A complete error reply: the connection is still in step.
                conn.recycle();
                metrics::incr(Counter::ConnectionErrors);
                Err(Failure::Reply(Error::Connection(format!(
                    "Redis at {} answered with an error: {}{}",
                    self.endpoint.addr,
                    server_error_text(&e),
                    auth_hint(&e)
                ))))
            }
            Err(e) => {
                // The reply may still be on its way: this connection is out of step
                // and is dropped (closed) here, never reused.
                drop(conn);
                metrics::incr(Counter::ConnectionErrors);
                if e.is_timeout() {
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

    /// Sends the acquire script for `token`.
    fn send_acquire(
        &self,
        token: &Token,
        ttl: Duration,
        will_wait: Duration,
    ) -> std::result::Result<Value, Failure> {
        self.call(|c| {
            scripts::ACQUIRE
                .key(&self.keys.lock)
                .key(&self.keys.fence)
                .key(&self.keys.waiters)
                .key(self.keys.void(token))
                .arg(token.as_str())
                .arg(millis(ttl))
                .arg(millis(will_wait))
                .invoke(&mut c.inner)
        })
    }

    /// One acquire attempt with a fresh token. `will_wait` tells waiting releasers
    /// to wake us; it is how long we may still wait.
    pub fn try_acquire(&self, ttl: Duration, will_wait: Duration) -> Result<Attempt> {
        let token = Token::generate();
        let sent = Instant::now();
        match self.send_acquire(&token, ttl, will_wait) {
            Ok(v) => parse_attempt(v, token, ttl, sent),
            Err(Failure::TimedOut(e)) => Err(unresolved(&e, token)),
            Err(Failure::Broken(first)) => {
                // The script may have run. Only our token can tell: if it holds the
                // lock, the lease is ours; if not, the attempt did not take it (or
                // took it and it already expired, which leaves nothing to undo).
                metrics::incr(Counter::Retries);
                match self.resolve(&token, ttl) {
                    Ok(Some((_, fence))) => {
                        metrics::incr(Counter::UncertainResolved);
                        Ok(Attempt::Acquired(Hold::new(token, fence, ttl, sent)))
                    }
                    Ok(None) => {
                        // Not taken: try once more. A second failure in a row is
                        // reported, not retried again.
                        metrics::incr(Counter::UncertainResolved);
                        let token = Token::generate();
                        let sent = Instant::now();
                        match self.send_acquire(&token, ttl, will_wait) {
                            Ok(v) => parse_attempt(v, token, ttl, sent),
                            Err(Failure::Broken(e) | Failure::TimedOut(e)) => {
                                Err(unresolved(&e, token))
                            }
                            Err(f) => Err(f.into_error()),
                        }
                    }
                    Err(_) => Err(unresolved(&first, token)),
                }
            }
            Err(f) => Err(f.into_error()),
        }
    }

    /// Acquires the lease, waiting up to `wait` for the holder to release it or for
    /// its lease to run out. `Ok(None)`: still held by another after `wait`.
    pub fn acquire(&self, ttl: Duration, wait: Duration) -> Result<Option<Hold>> {
        let started = Instant::now();
        let waited = self.wait_loop(wait, |left| self.try_acquire(ttl, left))?;
        match waited.result {
            Some(mut hold) => {
                hold.acquired_at = started;
                metrics::incr(Counter::LockAcquired);
                if waited.contended {
                    metrics::incr(Counter::LockContended);
                }
                metrics::observe(Timing::LockWait, started.elapsed());
                Ok(Some(hold))
            }
            None => {
                metrics::incr(Counter::LockBusy);
                Ok(None)
            }
        }
    }

    /// Repeats `attempt` (given the time left) until it succeeds or `wait` runs
    /// out, sleeping between attempts until a release wakes us, the holder's lease
    /// ends, or the deadline comes, whichever is first. Never polls.
    pub fn wait_loop<T>(
        &self,
        wait: Duration,
        mut attempt: impl FnMut(Duration) -> Result<Attempt<T>>,
    ) -> Result<Waited<T>> {
        let deadline = Instant::now() + wait;
        let mut contended = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match attempt(left)? {
                Attempt::Acquired(t) => {
                    return Ok(Waited {
                        result: Some(t),
                        contended,
                    })
                }
                Attempt::Busy(holder_left) => {
                    contended = true;
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Waited {
                            result: None,
                            contended,
                        });
                    }
                    let nap = holder_left.map_or(left, |h| h.min(left));
                    if !nap.is_zero() && self.wait_for_wake(nap)? {
                        metrics::incr(Counter::Wakeups);
                    }
                }
            }
        }
    }

    /// Blocks in BLPOP on the wake list for at most `nap`. True when woken.
    fn wait_for_wake(&self, nap: Duration) -> Result<bool> {
        // Redis checks blocking timeouts only on its event-loop tick (100 ms at the
        // default hz 10), so its own BLPOP timeout may overshoot. We stop listening
        // at `nap` plus a little slack instead, and drop that connection: the reply
        // it still owes us must never be read as the answer to a later command.
        let mut conn = Conn::checkout(&self.endpoint)?;
        // BLPOP's timeout 0 means forever: never send it.
        let secs = format!("{:.3}", nap.as_secs_f64().max(0.001));
        let res = conn.set_read_timeout(nap + BLPOP_SLACK).and_then(|_| {
            redis::cmd("BLPOP")
                .arg(&self.keys.wake)
                .arg(&secs)
                .query::<Option<(Vec<u8>, Vec<u8>)>>(&mut conn.inner)
        });
        match res {
            Ok(popped) => {
                conn.reset_read_timeout()
                    .map_err(|e| connection_error(&self.endpoint, "Lost the connection to", &e))?;
                conn.recycle();
                Ok(popped.is_some())
            }
            // Our own deadline, not a failure.
            Err(e) if e.is_timeout() => Ok(false),
            Err(e) if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
                metrics::incr(Counter::ConnectionErrors);
                Err(Error::Connection(format!(
                    "Redis at {} answered with an error: {e}",
                    self.endpoint.addr
                )))
            }
            // A broken connection only costs a wake-up: the caller tries to acquire
            // again at once, on a fresh connection, which reports a real outage.
            Err(_) => {
                metrics::incr(Counter::ConnectionErrors);
                Ok(false)
            }
        }
    }

    /// Releases `hold`. True when it was ours and is now free; false when it had
    /// expired or been taken by another.
    ///
    /// `maybe_done`: an earlier release of this hold may have run (it timed out); a
    /// lease found gone before it could have expired is then ours, released.
    /// A release that times out is reported as `Error::Unresolved`.
    pub fn release(&self, hold: &Hold, maybe_done: bool) -> Result<bool> {
        let run = |c: &mut Conn| -> redis::RedisResult<i64> {
            scripts::RELEASE
                .key(&self.keys.lock)
                .key(&self.keys.wake)
                .key(&self.keys.waiters)
                .arg(hold.token.as_str())
                .invoke(&mut c.inner)
        };
        let released = match self.call(run) {
            Ok(n) => n == 1 || (maybe_done && Instant::now() < hold.safe_until()),
            Err(Failure::TimedOut(e)) => return Err(unresolved(&e, hold.token.clone())),
            Err(Failure::Broken(_)) => {
                metrics::incr(Counter::Retries);
                let again = match self.call(run) {
                    Ok(n) => n == 1,
                    // The first release may have run: say so, for the next release().
                    Err(f) => return Err(unresolved(&f.into_error(), hold.token.clone())),
                };
                metrics::incr(Counter::UncertainResolved);
                // Not ours any more: either our first release ran, or the lease ran
                // out. While it cannot have run out yet, only our release explains it.
                again || Instant::now() < hold.safe_until()
            }
            Err(f) => return Err(f.into_error()),
        };
        if released {
            metrics::incr(Counter::LockReleased);
            metrics::observe(Timing::LockHold, hold.acquired_at.elapsed());
        } else {
            metrics::incr(Counter::LockLost);
        }
        Ok(released)
    }

    /// Releases whatever lease `token` holds (an attempt whose outcome was unknown).
    pub fn release_token(&self, token: &Token) -> Result<bool> {
        self.call_idempotent(|c| {
            scripts::RELEASE
                .key(&self.keys.lock)
                .key(&self.keys.wake)
                .key(&self.keys.waiters)
                .arg(token.as_str())
                .invoke::<i64>(&mut c.inner)
        })
        .map(|n| n == 1)
    }

    /// Gives up an attempt of `token` whose outcome is unknown: frees the lease if
    /// it took it, and voids the token if it has not (yet).
    pub fn abandon(&self, token: &Token, ttl: Duration) -> Result<()> {
        if self.resolve(token, ttl)?.is_some() {
            self.release_token(token)?;
        }
        Ok(())
    }

    /// Extends `hold` to `ttl` from now. False when it was no longer ours.
    pub fn refresh(&self, hold: &mut Hold, ttl: Duration) -> Result<bool> {
        let sent = Instant::now();
        let ok = self.call_idempotent(|c| {
            scripts::REFRESH
                .key(&self.keys.lock)
                .arg(hold.token.as_str())
                .arg(millis(ttl))
                .invoke::<i64>(&mut c.inner)
        })? == 1;
        if ok {
            hold.ttl = ttl;
            hold.sent = sent;
            metrics::incr(Counter::LockRenewals);
        } else {
            metrics::incr(Counter::LockLost);
        }
        Ok(ok)
    }

    /// `Some((time left, fence))` when `token` holds the lease per Redis.
    pub fn inspect(&self, token: &Token) -> Result<Option<(Option<Duration>, i64)>> {
        let v: Value = self.call_idempotent(|c| {
            scripts::INSPECT
                .key(&self.keys.lock)
                .arg(token.as_str())
                .invoke(&mut c.inner)
        })?;
        self.parse_owned(v)
    }

    /// Settles an acquire attempt of `token` whose outcome is unknown:
    /// `Some((time left, fence))` when it holds the lease; otherwise the token is
    /// voided, so the attempt can never take the lease later.
    pub fn resolve(&self, token: &Token, ttl: Duration) -> Result<Option<(Option<Duration>, i64)>> {
        let v: Value = self.call_idempotent(|c| {
            scripts::RESOLVE
                .key(&self.keys.lock)
                .key(self.keys.void(token))
                .arg(token.as_str())
                .arg(millis(void_ttl(ttl)))
                .invoke(&mut c.inner)
        })?;
        self.parse_owned(v)
    }

    /// Reads the `{pttl, fence}`-or-nil reply of inspect.lua and resolve.lua.
    fn parse_owned(&self, v: Value) -> Result<Option<(Option<Duration>, i64)>> {
        match v {
            Value::Nil => Ok(None),
            other => {
                let (pttl, fence): (i64, String) =
                    FromRedisValue::from_redis_value(other).map_err(|e| self.unexpected(&e))?;
                let fence = fence.parse().map_err(|_| self.unexpected(&"bad fence"))?;
                Ok(Some((pttl_duration(pttl), fence)))
            }
        }
    }

    fn unexpected(&self, what: &dyn fmt::Display) -> Error {
        Error::Connection(format!(
            "Redis at {} gave an unexpected reply ({what}); is something else using the key?",
            self.endpoint.addr
        ))
    }
}

/// A server error as Redis sent it ("NOPERM this user has no permissions..."),
/// so operators can grep for Redis's own error codes.
fn server_error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
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
    Error::Unresolved {
        message: format!("{e}; whether the lock was taken is unknown until Redis answers again"),
        token,
    }
}

fn parse_attempt(v: Value, token: Token, ttl: Duration, sent: Instant) -> Result<Attempt> {
    let bad =
        |what: &str| Error::Connection(format!("unexpected reply to the acquire script: {what}"));
    let (taken, detail): (i64, String) =
        FromRedisValue::from_redis_value(v).map_err(|e| bad(&e.to_string()))?;
    if taken == 1 {
        let fence = detail.parse().map_err(|_| bad("fence is not a number"))?;
        Ok(Attempt::Acquired(Hold::new(token, fence, ttl, sent)))
    } else {
        let pttl: i64 = detail.parse().map_err(|_| bad("pttl is not a number"))?;
        Ok(Attempt::Busy(pttl_duration(pttl)))
    }
}

/// PTTL to a duration: -1 (no expiry) is `None`; -2 (gone) is zero.
fn pttl_duration(pttl: i64) -> Option<Duration> {
    match pttl {
        -1 => None,
        n => Some(Duration::from_millis(n.max(0) as u64)),
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Checks a ttl or wait given in seconds by a user.
pub fn seconds(name: &str, value: f64, allow_zero: bool) -> Result<Duration> {
    let ok = value.is_finite()
        && value <= MAX_SECONDS
        && if allow_zero {
            value >= 0.0
        } else {
            value > 0.0
        };
    // 1e300 written out in full would be a 300-digit message.
    let given = if value.is_finite() && value.abs() >= 1e9 {
        format!("{value:e}")
    } else {
        value.to_string()
    };
    if !ok {
        let range = if allow_zero { ">= 0" } else { "> 0" };
        return Err(Error::invalid(format!(
            "{name} must be a finite number of seconds {range} and <= {MAX_SECONDS}, {given} given"
        )));
    }
    let d = Duration::from_secs_f64(value);
    if !allow_zero && d < MIN_TTL {
        return Err(Error::invalid(format!(
            "{name} must be at least 0.001 seconds, {given} given"
        )));
    }
    Ok(d)
}
