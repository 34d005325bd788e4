//! The session store: PHP sessions in Redis, each request holding a lease on its
//! session from read to write.
//!
//! A locked request costs two round trips: `open` locks and reads in one script,
//! `save` writes (or renews, or deletes) and unlocks in another, only while our
//! lease still holds the lock, so a request whose lease ran out can never
//! overwrite what a newer request wrote. Keys stay compatible with phpredis: the
//! data lives at `<prefix><id>` (default prefix `PHPREDIS_SESSION:`) as the raw
//! string PHP's serializer produced; the lock at `{<prefix><id>}:lock` hashes to
//! the same Redis Cluster slot.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use crate::core::compress::{Codec, Undecodable, MAX_INFLATED};
use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::hold::{millis, Kind};
use crate::core::lease::{Claim, Failure, Hold, Lease, LeaseKeys, Owned, Token};
use crate::core::metrics::{self, Counter, Timing};
use crate::core::pool::Conn;
use crate::core::request;
use crate::core::scripts;
use crate::core::topology;

/// phpredis's default key prefix, so sessions survive a switch from it.
pub const DEFAULT_PREFIX: &str = "PHPREDIS_SESSION:";

/// Longest session id we accept (PHP's own maximum sid_length is 256).
pub const MAX_ID_LEN: usize = 256;

/// What a request does when the lock wait runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLockTimeout {
    /// session_start() fails; nothing is read or written.
    Fail,
    /// The data is read without the lock and this request's writes are discarded.
    Readonly,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    pub prefix: String,
    /// Off: last writer wins, as phpredis does by default.
    pub locking: bool,
    pub lock_ttl: Duration,
    pub lock_wait: Duration,
    pub on_lock_timeout: OnLockTimeout,
    /// Most requests that may wait for one session at once; 0: no cap.
    pub max_waiters: u32,
    /// The watchdog renews the lock while the request runs (see `watchdog`).
    pub lock_renew: bool,
    /// `lock_ttl` was not given (or given as 0): `finish()` derives it.
    pub lock_ttl_auto: bool,
    /// The data's ttl; `None`: session.gc_maxlifetime (what PHP passes).
    pub ttl: Option<Duration>,
    /// How the data is stored (phpredis's `redis.session.compression`).
    pub compression: Codec,
}

/// The lock ttl of a renewed session when none is configured: short, so that a
/// killed worker frees its user's session within seconds, and long enough that
/// most requests end before the first renewal (at a third of it).
pub const RENEWED_LOCK_TTL: Duration = Duration::from_secs(10);

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            prefix: DEFAULT_PREFIX.to_string(),
            locking: true,
            lock_ttl: Duration::from_secs(30),
            lock_wait: Duration::from_secs(10),
            on_lock_timeout: OnLockTimeout::Fail,
            max_waiters: 0,
            lock_renew: false,
            lock_ttl_auto: false,
            ttl: None,
            compression: Codec::default(),
        }
    }
}

/// Option names, for `SessionConfig::set` and the `redis_lease.session.*` ini settings.
pub const OPTION_NAMES: [&str; 10] = [
    "ttl",
    "locking",
    "lock_ttl",
    "lock_renew",
    "lock_wait",
    "on_lock_timeout",
    "max_waiters",
    "prefix",
    "compression",
    "compression_level",
];

impl SessionConfig {
    /// Sets option `name` from its text form (ini values and PHP scalars alike).
    /// `lock_ttl` 0 means "derive it": the caller passes `auto_ttl` for that case.
    pub fn set(&mut self, name: &str, value: &str, auto_ttl: Duration) -> Result<()> {
        let v = value.trim();
        let bad = |expected: &str| {
            Error::invalid(format!(
                "session option '{name}' must be {expected}, '{}' given",
                shown(v)
            ))
        };
        let secs = |allow_zero: bool| -> Result<Duration> {
            match v.parse::<f64>() {
                Ok(t)
                    if t.is_finite() && (t > 0.0 || (allow_zero && t == 0.0)) && t <= 86_400.0 =>
                {
                    Ok(Duration::from_secs_f64(t))
                }
                _ => Err(bad(if allow_zero {
                    "a number of seconds from 0 to 86400"
                } else {
                    "a number of seconds > 0 and <= 86400"
                })),
            }
        };
        let flag = || match v.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => Ok(true),
            "0" | "off" | "false" | "no" | "" => Ok(false),
            _ => Err(bad("on or off")),
        };
        match name {
            "locking" => self.locking = flag()?,
            "lock_renew" => self.lock_renew = flag()?,
            "lock_ttl" => {
                let t = secs(true)?;
                self.lock_ttl_auto = t.is_zero();
                self.lock_ttl = if t.is_zero() {
                    auto_ttl
                } else {
                    t.max(Duration::from_millis(1))
                };
            }
            "lock_wait" => self.lock_wait = secs(true)?,
            "ttl" => {
                let t = match v.parse::<f64>() {
                    // Whole seconds (Redis's EX), up to ten years.
                    Ok(t) if (0.0..=315_360_000.0).contains(&t) && t.fract() == 0.0 => t,
                    _ => return Err(bad(
                        "a whole number of seconds from 0 (session.gc_maxlifetime) to 315360000",
                    )),
                };
                self.ttl = (t > 0.0).then(|| Duration::from_secs(t as u64));
            }
            "on_lock_timeout" => {
                self.on_lock_timeout = match v {
                    "fail" => OnLockTimeout::Fail,
                    "readonly" => OnLockTimeout::Readonly,
                    _ => return Err(bad("'fail' or 'readonly'")),
                }
            }
            "max_waiters" => {
                self.max_waiters = v
                    .parse()
                    .map_err(|_| bad("an integer from 0 (no cap) to 4294967295"))?
            }
            "compression" => {
                let level = self.compression.level.to_string();
                self.compression = Codec::parse(v, &level)?;
            }
            "compression_level" => {
                let algorithm = self.compression.algorithm.map_or("none", |a| a.name());
                self.compression = Codec::parse(algorithm, v)?;
            }
            "prefix" => {
                // Empty, a session's key is its bare id: any key of the
                // application's is a session to a cookie naming it.
                if v.is_empty()
                    || v.len() > 256
                    || v.bytes()
                        .any(|b| b.is_ascii_control() || b == b'{' || b == b'}')
                {
                    return Err(bad("1 to 256 printable characters without '{' or '}'"));
                }
                self.prefix = v.to_string();
            }
            _ => {
                return Err(Error::invalid(format!(
                    "unknown session option '{}' (known: {})",
                    shown(name),
                    OPTION_NAMES.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// Settles what depends on several options: an unset lock ttl of a renewed
    /// session is `RENEWED_LOCK_TTL`.
    pub fn finish(&mut self) {
        if self.lock_renew && self.lock_ttl_auto {
            self.lock_ttl = RENEWED_LOCK_TTL;
        }
    }
}

/// How this request holds its session.
#[derive(Debug)]
pub enum Mode {
    /// We hold the session's lock.
    Locked(Hold),
    /// Locking is off: reads and writes go straight through.
    Unlocked,
    /// The lock wait ran out in readonly mode: writes are discarded.
    Readonly,
    /// Saved, destroyed or closed: nothing more to do.
    Done,
}

/// One request's open session.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub mode: Mode,
    /// The session's lock, with its data key.
    lease: Lease,
    /// The stored form of the data read, where it differs from the data
    /// (compressed): what a later write expects to find (`Expect::Data`).
    pub stored: Option<Vec<u8>>,
    /// The stored data could not be read (see `compress`): this request sees an
    /// empty session, and nothing it writes replaces the stored data.
    pub kept: Option<String>,
    /// A logout revoked its lock, as its save or unlock was told: nothing this
    /// request writes of it later may bring the session back.
    pub revoked: bool,
    /// Its destroy found its lease lost (and went on as a logout): another
    /// request may have changed the session since this one read it, whatever
    /// became of the logout.
    pub lease_lost: bool,
}

impl Drop for Session {
    /// A session dropped while locked (a save that failed with an error reply,
    /// a handler dropped mid-request) is no longer its thread's to free: its
    /// lock ends at its ttl, as it always did, and renewal stops with its hold.
    fn drop(&mut self) {
        if let Mode::Locked(hold) = &self.mode {
            request::session_unlocked(hold);
        }
    }
}

impl Session {
    fn data_key(&self) -> &[u8] {
        self.lease.keys.data.as_deref().unwrap_or_default()
    }
}

/// What a write of a session this request does not hold expects to find
/// (`SessionStore::put`).
#[derive(Clone, Copy, Debug)]
pub enum Expect<'a> {
    /// Anything (an id a handler that never reads writes: a write-only wrapper,
    /// as Symfony's MigratingSessionHandler makes of its new store).
    Any,
    /// No data at all (a fresh id this request moved to: a write that lands
    /// late, after another request saved under it, changes nothing).
    Absent,
    /// Exactly this data.
    Data(&'a [u8]),
}

/// The result of writing a session this request does not hold (`SessionStore::put`).
#[derive(Debug, PartialEq, Eq)]
pub enum Put {
    Written,
    /// Another request holds its lock or waits for it: nothing was written.
    Busy,
    /// Its data is no longer what was expected: nothing was written.
    Changed,
    /// A logout revoked the lock taken to write it: nothing was written.
    Revoked,
}

/// The result of saving a session.
#[derive(Debug, PartialEq, Eq)]
pub enum Saved {
    Yes,
    /// Our lease had expired (and perhaps another request took the lock): nothing
    /// was written, so newer data stays.
    LeaseLost,
    /// A logout (a destroy by another request) revoked our lock: nothing was
    /// written, so the session stays destroyed.
    Revoked,
    /// Readonly mode (the lock wait ran out): the write was discarded.
    Discarded,
    /// Readonly mode: destroyed, but another request had changed (or
    /// destroyed) the session since this request read it.
    Changed,
    /// Our lease had expired: destroyed all the same, as a logout (the request
    /// holding it now revoked), but another request may have written the
    /// session since this one read it: what this one holds is not to be
    /// written under a fresh id (`session_regenerate_id(true)`, `migrate(true)`).
    LostDestroyed,
}

/// How long the token of a hold a logout revoked is kept past the lock's ttl,
/// so that the revoked request's save is told apart from one whose lease ran
/// out (a later one is reported as that): past the longest a request runs in
/// practice.
const REVOKED_KEPT: Duration = Duration::from_secs(3600);

pub struct SessionStore {
    pub endpoint: Arc<Endpoint>,
    pub config: SessionConfig,
}

/// Claiming a session's lock: session_open.lua, which also reads the data.
struct SessionClaim<'a> {
    config: &'a SessionConfig,
    id: &'a str,
    /// An attempt of this claim queued: max_waiters counted it in already, and
    /// asking again (its grant lapsed, its token voided) is never refused by it.
    queued: Cell<bool>,
}

impl Claim for SessionClaim<'_> {
    type Won = (Hold, Option<Vec<u8>>);

    fn ttl(&self) -> Duration {
        self.config.lock_ttl
    }

    fn send(
        &self,
        lease: &Lease,
        token: &Token,
        will_wait: Duration,
        generation: u64,
    ) -> std::result::Result<Value, Failure> {
        let ttl = self.config.lock_ttl;
        let cap = if self.queued.get() {
            0
        } else {
            self.config.max_waiters
        };
        let (reply, acks) = lease.call(|c| {
            let mut reply: Value = scripts::SESSION_OPEN
                .key(lease.keys.data.as_deref().unwrap_or_default())
                .key(lease.keys.lock())
                .key(lease.keys.waiters())
                .key(lease.keys.terms())
                .key_of(&lease.keys.void_parts(token))
                .key_of(&lease.keys.revoked_parts())
                .arg(token.as_str())
                .arg(millis(ttl))
                .arg(millis(will_wait))
                .arg(cap)
                .call(&mut *c.inner)?;
            let acks = lease.replicate_claim(c, &mut reply, token, ttl)?;
            Ok((reply, acks))
        })?;
        lease.claim_replicated(acks, token, ttl, generation, "The session was locked")?;
        if !will_wait.is_zero()
            && matches!(&reply, Value::Array(v) if v.first() == Some(&Value::Int(0)))
        {
            self.queued.set(true);
        }
        Ok(reply)
    }

    fn won(
        &self,
        lease: &Lease,
        token: &Token,
        detail: Value,
        since: Instant,
    ) -> Result<Self::Won> {
        let data = Option::<Vec<u8>>::from_redis_value(detail).map_err(|e| bad_reply(lease, &e))?;
        let hold = Hold::new(token.clone(), 0, self.config.lock_ttl, since);
        Ok((hold, data))
    }

    /// Status -1: max_waiters requests already wait.
    fn refused(&self, _: &Lease, _: i64) -> Error {
        metrics::incr(Counter::SessionTooManyWaiters);
        Error::LockTimeout(format!(
            "the queue for session {} is full (max_waiters = {}); not waiting",
            short_id(self.id),
            self.config.max_waiters
        ))
    }

    fn adopt(&self, token: Token, owned: Owned, since: Instant) -> Self::Won {
        (Hold::new(token, 0, self.config.lock_ttl, since), owned.data)
    }

    fn handed(
        &self,
        lease: &Lease,
        token: Token,
        _fence: i64,
        payload: &[u8],
        since: Instant,
    ) -> Result<Self::Won> {
        let data = match payload.split_first() {
            Some((b'd', data)) => Some(data.to_vec()),
            Some((b'n', [])) => None,
            _ => return Err(bad_reply(lease, &"a malformed session handoff")),
        };
        Ok((Hold::new(token, 0, self.config.lock_ttl, since), data))
    }

    fn hold_of<'a>(&self, won: &'a mut Self::Won) -> &'a mut Hold {
        &mut won.0
    }
}

impl SessionStore {
    pub fn new(endpoint: Arc<Endpoint>, config: SessionConfig) -> SessionStore {
        SessionStore { endpoint, config }
    }

    fn data_key(&self, id: &str) -> Vec<u8> {
        [self.config.prefix.as_bytes(), id.as_bytes()].concat()
    }

    fn lease(&self, id: &str) -> Lease {
        Lease::new(self.endpoint.clone(), session_keys(&self.config.prefix, id))
    }

    /// Opens session `id`: locks it (waiting up to the lock wait, first come first
    /// served) and reads its data, `None` for a new session. Errors:
    /// `Error::LockTimeout` when the wait ran out, or max_waiters requests
    /// already wait, in fail mode (in readonly mode either opens the session
    /// read-only); `Error::Connection` when Redis failed (never reported as
    /// contention).
    pub fn open(&self, id: &str) -> Result<(Session, Option<Vec<u8>>)> {
        check_id(id)?;
        let lease = self.lease(id);
        let session = |mode| Session {
            id: id.to_string(),
            mode,
            lease: lease.clone(),
            stored: None,
            kept: None,
            revoked: false,
            lease_lost: false,
        };
        if !self.config.locking {
            let data = self.get(&lease)?;
            return Ok(self.unpacked(session(Mode::Unlocked), data));
        }
        let started = Instant::now();
        let generation = topology::generation(&self.endpoint);
        let claim = SessionClaim {
            config: &self.config,
            id,
            queued: Cell::new(false),
        };
        let waited = match lease.claim(&claim, self.config.lock_wait) {
            Ok(waited) => waited,
            Err(Error::Unresolved { message, token }) => {
                // Our token may hold the lock, or a place in the queue, and no later
                // call of this request will know it: settle it on the next call.
                lease.defer(token, self.config.lock_ttl);
                return Err(Error::Connection(message));
            }
            // max_waiters (the claim's only LockTimeout): as a wait run out at once.
            Err(Error::LockTimeout(_))
                if self.config.on_lock_timeout == OnLockTimeout::Readonly =>
            {
                metrics::incr(Counter::SessionReadonly);
                let data = self.get(&lease)?;
                return Ok(self.unpacked(session(Mode::Readonly), data));
            }
            Err(e) => return Err(e),
        };
        match waited.result {
            Some((mut hold, data)) => {
                hold.acquired_at = started;
                lease.watch(&mut hold, Kind::Session, self.config.lock_renew, generation);
                request::session_locked(&lease, &hold);
                metrics::incr(Counter::SessionLocked);
                if waited.contended {
                    metrics::incr(Counter::SessionContended);
                }
                metrics::observe(Timing::SessionWait, started.elapsed());
                Ok(self.unpacked(session(Mode::Locked(hold)), data))
            }
            None => {
                metrics::incr(Counter::SessionLockTimeouts);
                let why = format!(
                    "the session lock wait of {:.3} s ran out: another request of session {} \
                     still holds its lock",
                    self.config.lock_wait.as_secs_f64(),
                    short_id(id)
                );
                match self.config.on_lock_timeout {
                    OnLockTimeout::Fail => Err(Error::LockTimeout(why)),
                    OnLockTimeout::Readonly => {
                        metrics::incr(Counter::SessionReadonly);
                        let data = self.get(&lease)?;
                        Ok(self.unpacked(session(Mode::Readonly), data))
                    }
                }
            }
        }
    }

    /// Reads an open session's data again, keeping whatever lock it holds.
    pub fn reread(&self, s: &mut Session) -> Result<Option<Vec<u8>>> {
        let stored = self.get(&s.lease)?;
        let (s2, data) = self.unpacked(
            Session {
                id: std::mem::take(&mut s.id),
                mode: std::mem::replace(&mut s.mode, Mode::Done),
                lease: s.lease.clone(),
                stored: None,
                kept: None,
                revoked: s.revoked,
                lease_lost: s.lease_lost,
            },
            stored,
        );
        *s = s2;
        Ok(data)
    }

    /// The session data stored as `stored`, into `s`'s view of it: the data, and
    /// the stored form when it differs; data that cannot be read is kept as it is
    /// (`Session::kept`) and the request sees an empty session.
    fn unpacked(&self, mut s: Session, stored: Option<Vec<u8>>) -> (Session, Option<Vec<u8>>) {
        let Some(stored) = stored else {
            return (s, None);
        };
        let codec = self.config.compression;
        let data = match codec.unpack(&stored) {
            Ok(std::borrow::Cow::Borrowed(_)) => return (s, Some(stored)),
            Ok(std::borrow::Cow::Owned(data)) => data,
            Err(why) => {
                metrics::incr(Counter::SessionUndecodable);
                let algorithm = codec.algorithm.map_or("none", |a| a.name());
                s.kept = Some(match why {
                    Undecodable::TooLarge(n) => format!(
                        "session {} claims {n} bytes once inflated, more than the \
                         {MAX_INFLATED} allowed (compression {algorithm})",
                        short_id(&s.id)
                    ),
                    Undecodable::Garbage => format!(
                        "session {} holds data that is neither compressed (lzf, lz4, zstd) nor \
                         a serialized session (compression {algorithm})",
                        short_id(&s.id)
                    ),
                });
                return (s, None);
            }
        };
        s.stored = Some(stored);
        (s, Some(data))
    }

    /// The stored form of session data `data` (compressed as configured).
    pub fn packed<'a>(&self, data: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        self.config.compression.pack(data)
    }

    fn get(&self, lease: &Lease) -> Result<Option<Vec<u8>>> {
        let key = lease.keys.data.as_deref().unwrap_or_default();
        lease.call_idempotent(|c| redis::cmd("GET").arg(key).query(&mut c.inner))
    }

    /// Writes `data` with a ttl of `max_lifetime` and unlocks, in one round trip.
    /// Over stored data this request could not read, it only unlocks: that data
    /// is kept (see `Session::kept`).
    pub fn write(&self, s: &mut Session, data: &[u8], max_lifetime: Duration) -> Result<Saved> {
        self.write_packed(s, &self.packed(data), max_lifetime)
    }

    /// [`SessionStore::write`] of data already in its stored form (`packed`).
    pub fn write_packed(
        &self,
        s: &mut Session,
        stored: &[u8],
        max_lifetime: Duration,
    ) -> Result<Saved> {
        if s.kept.is_some() {
            self.close(s)?;
            return Ok(Saved::Discarded);
        }
        self.save(s, "write", stored, max_lifetime)
    }

    /// Renews the data's ttl and unlocks (lazy_write with unchanged data).
    pub fn touch(&self, s: &mut Session, max_lifetime: Duration) -> Result<Saved> {
        if s.kept.is_some() {
            self.close(s)?;
            return Ok(Saved::Discarded);
        }
        self.save(s, "touch", b"", max_lifetime)
    }

    /// Deletes the session's data and unlocks. In readonly mode (another request
    /// holds the lock), or when our lease was lost (another request may hold it
    /// now), it deletes the data and revokes that request's lease, so the
    /// session cannot be written back: a logout always takes effect. There,
    /// `read` is the data the request read (stored form), if any:
    /// `Saved::Changed` (readonly) or `Saved::LostDestroyed` (lease lost) says
    /// the session no longer held it, or, without `read`, may not have.
    pub fn destroy(&self, s: &mut Session, read: Option<&[u8]>) -> Result<Saved> {
        if matches!(s.mode, Mode::Readonly) {
            let same = self.revoke(&s.lease, Compare::read(read))?;
            s.mode = Mode::Done;
            return Ok(if same { Saved::Yes } else { Saved::Changed });
        }
        match self.save(s, "destroy", b"", Duration::ZERO)? {
            Saved::LeaseLost => {
                s.lease_lost = true;
                let same = self.revoke(&s.lease, Compare::read(read))? && read.is_some();
                Ok(if same {
                    Saved::Yes
                } else {
                    Saved::LostDestroyed
                })
            }
            saved => Ok(saved),
        }
    }

    fn save(
        &self,
        s: &mut Session,
        op: &str,
        data: &[u8],
        max_lifetime: Duration,
    ) -> Result<Saved> {
        // Redis's EX takes whole seconds, at least 1.
        let secs = max_lifetime.as_secs().max(1);
        match &s.mode {
            Mode::Locked(hold) => {
                let hold = hold.clone();
                // No renewal from here on: the save unlocks, and one that ran
                // after it would find the lock gone and give the hold up as
                // lost (counted, and taken for a lost lease by a touch run
                // again). Review, stop 57; as a release does.
                hold.stop_watch();
                // Told "revoked", what it reports (true) says the session is
                // logged out: once that logout is replicated.
                let counts_on_logout = matches!(op, "destroy" | "write");
                let run = |c: &mut Conn| {
                    let n: i64 = s
                        .lease
                        .save_script(s.data_key(), &hold.token, data, secs, op)
                        .call::<i64>(&mut *c.inner)?;
                    // Revoked (2): a destroy or a write counts on the logout
                    // that did it; a touch changed nothing, and is not kept
                    // waiting.
                    let acks = s
                        .lease
                        .wait_replicas(c, n == 1 || (n == 2 && counts_on_logout))?;
                    Ok((n, acks))
                };
                let generation = topology::generation(&s.lease.endpoint);
                let first = match s.lease.call(run) {
                    // Saved (or, a destroy or a write, told of a logout) on a
                    // master that could not replicate it, and a failover named
                    // a new master meanwhile: as after a broken link, the save
                    // runs again there (where our lease is, if it was
                    // replicated, or the logout). A touch told of a logout is
                    // done with, quietly.
                    Ok((n @ (1 | 2), acks))
                        if (n == 1 || counts_on_logout)
                            && s.lease.short(acks)
                            && s.lease.switched_since(generation) =>
                    {
                        Err(Failure::Broken(Error::Connection(String::new())))
                    }
                    other => other,
                };
                let (n, acks) = match first {
                    Ok(reply) => reply,
                    Err(Failure::Broken(_)) => {
                        // The script may have run. Run it again: it is owner-checked, so
                        // it can never apply twice.
                        metrics::incr(Counter::Retries);
                        let (n, mut acks) = match s.lease.call(run) {
                            Ok(reply) => reply,
                            Err(f) => return Err(Self::abandon(s, hold, f, true)),
                        };
                        metrics::incr(Counter::UncertainResolved);
                        // Found unlocked: maybe by our first run. (Revoked: the
                        // revocation found us holding, so that run did nothing.)
                        // A touch found unlocked on a master named since (a
                        // failover) says nothing of our first run: that master
                        // may never have had our lock, and another request may
                        // have held the session there. Before, it counted as done
                        // (review, stop 59). A write's data and a destroy's marker
                        // say it across a failover too. (Asked last: it may ask
                        // the sentinels.)
                        let saved = n == 0
                            && (matches!(op, "write" | "destroy")
                                || !s
                                    .lease
                                    .switched_since(hold.known_generation().unwrap_or(generation)))
                            && self.saved_before(s, op, data, secs, &hold, &mut acks)?;
                        (if saved { 1 } else { n }, acks)
                    }
                    Err(Failure::Reply(e)) => {
                        // Redis answered with an error: nothing ran, the lock is still
                        // ours (renewed no longer) and close() frees it.
                        return Err(e);
                    }
                    Err(f) => {
                        // Redis did not answer (or could not be reached): the save may
                        // still run. Asking again now would only double the wait; the
                        // unlock is left for this process's next call (or the lease's end).
                        let sent = !matches!(f, Failure::NotSent(_));
                        return Err(Self::abandon(s, hold, f, sent));
                    }
                };
                s.mode = Mode::Done;
                unlocked(&hold);
                hold.count_session_end(n, Instant::now());
                match n {
                    1 => {
                        let what = if op == "destroy" {
                            "The session was destroyed"
                        } else {
                            "The session was saved"
                        };
                        s.lease.replicated(acks, what)?;
                        Ok(Saved::Yes)
                    }
                    2 => {
                        s.revoked = true;
                        // A destroy or a write counts on the logout that revoked
                        // it, which a failover could undo (the revoking request's
                        // own WAIT may have fallen short): not reported done until
                        // replicated. Before, it was at once (review, stop 61, a
                        // destroy; stop 65, a write: its changes were dropped,
                        // answered true, and the session came back without them).
                        // Replicated, it stays quiet (a warning is an HTTP 500 in
                        // the frameworks); a touch told so waits for nothing.
                        s.lease.replicated(acks, "A logout revoked this session")?;
                        Ok(Saved::Revoked)
                    }
                    _ => Ok(Saved::LeaseLost),
                }
            }
            // A logout: whatever lease a request with locking on holds on the
            // session is revoked, so that its save cannot write the session
            // back (review, stop 65: a DEL left it to). The revocation's marker
            // makes a run sent again act once, and is a write of its own for
            // the WAIT to count, after whatever deleted the data before (our
            // first run, whose reply was lost, or another request's logout,
            // whose own WAIT may have fallen short), under maxmemory too.
            Mode::Unlocked if op == "destroy" => {
                self.revoke(&s.lease, Compare::Nothing)?;
                Ok(Saved::Yes)
            }
            Mode::Unlocked => {
                let key = s.data_key();
                // A write or a touch.
                let acks = s.lease.call_idempotent(|c| {
                    let mut cmd = redis::cmd(if op == "write" { "SET" } else { "EXPIRE" });
                    cmd.arg(key);
                    if op == "write" {
                        cmd.arg(data).arg("EX");
                    }
                    cmd.arg(secs).query::<Value>(&mut c.inner)?;
                    s.lease.wait_replicas(c, true)
                })?;
                s.lease.replicated(acks, "The session was saved")?;
                Ok(Saved::Yes)
            }
            Mode::Readonly => Ok(Saved::Discarded),
            Mode::Done => Err(Error::invalid(format!(
                "session {} was already saved, destroyed or closed in this request",
                short_id(&s.id)
            ))),
        }
    }

    /// A save whose outcome is unknown: the session is done in this request, and
    /// its unlock is left to this process's next call (or the lease's end).
    /// `maybe_sent`: a run of it may have reached Redis.
    fn abandon(s: &mut Session, hold: Hold, f: Failure, maybe_sent: bool) -> Error {
        s.mode = Mode::Done;
        unlocked(&hold);
        s.lease.defer_end(&hold, maybe_sent);
        f.into_error()
    }

    /// A save ran again after a broken connection and found the lock no longer
    /// ours: did our first run do it? Not if the connection broke because the
    /// master changed (a failover): the new master never had our lock, nor our
    /// write. So the data decides: a write is ours if the master holds exactly our
    /// data. A destroy's run again asked for its first run's marker itself
    /// (session_save.lua): here, it did not destroy. A touch changed no data, and counts as
    /// done while our lease cannot have run out (only our own first run could
    /// have freed the lock then; the caller asks this only when no failover
    /// came since the save was first sent). With wait_replicas, a write of ours on this link
    /// after that is waited for, and covers what the master holds (the
    /// replication stream is in order): the data touched, for a write; else a
    /// marker (`marked`).
    fn saved_before(
        &self,
        s: &Session,
        op: &str,
        data: &[u8],
        secs: u64,
        hold: &Hold,
        acks: &mut Option<i64>,
    ) -> Result<bool> {
        let key = s.data_key();
        let wait = s.lease.endpoint.wait.is_some();
        let confirmed = match op {
            "write" => s.lease.call_idempotent(|c| {
                let now: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(&mut c.inner)?;
                if now.as_deref() != Some(data) {
                    return Ok(None);
                }
                redis::cmd("EXPIRE")
                    .arg(key)
                    .arg(secs)
                    .query::<i64>(&mut c.inner)?;
                s.lease.wait_replicas(c, true).map(Some)
            })?,
            // The run again asked for our first run's marker itself
            // (session_save.lua): not there, it did not destroy. Not "the data
            // is gone": another request may have written since, and a logout
            // run again would destroy that (review, stop 56; asked in the
            // script since stop 57: one round trip sooner, within the marker's
            // time).
            "destroy" => return Ok(false),
            _ if hold.run_out() => return Ok(false),
            _ if !wait => return Ok(true),
            _ => Some(self.marked(s, hold)?),
        };
        if let Some(a) = confirmed {
            *acks = a;
        }
        Ok(confirmed.is_some())
    }

    /// For [`SessionStore::saved_before`], with wait_replicas: writes a marker
    /// of `hold`'s spent token (in the session's slot; nothing reads it) and
    /// WAITs for it. Its acknowledgements.
    fn marked(&self, s: &Session, hold: &Hold) -> Result<Option<i64>> {
        s.lease.call_idempotent(|c| {
            s.lease.set_marker(c, b"saved", &hold.token)?;
            s.lease.wait_replicas(c, true)
        })
    }

    /// Unlocks without writing (session_abort(), read_and_close, close after a
    /// failed write); the next waiting request gets the lock and the data. True
    /// when there was nothing to do or our lease was freed.
    pub fn close(&self, s: &mut Session) -> Result<bool> {
        let mode = std::mem::replace(&mut s.mode, Mode::Done);
        let Mode::Locked(hold) = mode else {
            return Ok(true);
        };
        request::session_unlocked(&hold);
        match s.lease.release_answer(&hold, false) {
            Ok(n) => {
                s.revoked |= n == 2;
                Ok(n == 1)
            }
            Err(e) => {
                s.lease
                    .defer_end(&hold, matches!(e, Error::Unresolved { .. }));
                Err(e)
            }
        }
    }

    /// [`SessionStore::close`] as cleanup (a handler dropped with its session
    /// open), like `Lease::release_or_defer`.
    pub fn close_or_defer(&self, s: &mut Session, teardown: bool) {
        if let Mode::Locked(hold) = std::mem::replace(&mut s.mode, Mode::Done) {
            request::session_unlocked(&hold);
            s.lease.release_or_defer(&hold, false, teardown);
        }
    }

    /// Writes session `id`, which this request does not hold (a new id it never
    /// read, as Laravel's regenerate() writes it; or one it saved already), in one
    /// step: only while no request holds or waits for its lock, and only if its
    /// data is still as `expected` (in its stored form).
    pub fn put(
        &self,
        id: &str,
        data: &[u8],
        max_lifetime: Duration,
        expected: Expect<'_>,
    ) -> Result<Put> {
        self.put_packed(id, &self.packed(data), max_lifetime, expected)
    }

    /// Extends session `id`'s data to `max_lifetime`, if it is stored (not
    /// a write: a newer save is never undone).
    pub fn expire(&self, id: &str, max_lifetime: Duration) -> Result<()> {
        check_id(id)?;
        let lease = self.lease(id);
        let key = self.data_key(id);
        let secs = max_lifetime.as_secs().max(1);
        lease.call_idempotent(|c| {
            redis::cmd("EXPIRE")
                .arg(&key)
                .arg(secs)
                .query::<i64>(&mut c.inner)
        })?;
        Ok(())
    }

    /// [`SessionStore::put`] of data already in its stored form (`packed`).
    pub fn put_packed(
        &self,
        id: &str,
        data: &[u8],
        max_lifetime: Duration,
        expected: Expect<'_>,
    ) -> Result<Put> {
        check_id(id)?;
        let lease = self.lease(id);
        let secs = max_lifetime.as_secs().max(1);
        // A retry after a lost reply answers as the first run did, by its marker
        // (see session_put.lua): it never writes over what came in between.
        let nonce = Token::generate();
        let (n, acks) = lease.call_idempotent(|c| {
            let n: i64 = scripts::SESSION_PUT
                .key(lease.keys.data.as_deref().unwrap_or_default())
                .key(lease.keys.lock())
                .key(lease.keys.waiters())
                .key(lease.keys.marker(b"put", &nonce))
                .arg(data)
                .arg(secs)
                .arg(match expected {
                    Expect::Any => "any",
                    Expect::Absent => "absent",
                    Expect::Data(_) => "if",
                })
                .arg(match expected {
                    Expect::Data(d) => d,
                    _ => b"",
                })
                .arg(millis(self.marker_ttl()))
                .call(&mut *c.inner)?;
            let acks = lease.wait_replicas(c, n == 1)?;
            Ok((n, acks))
        })?;
        lease.replicated(acks, "The session was saved")?;
        Ok(match n {
            1 => Put::Written,
            0 => Put::Busy,
            _ => Put::Changed,
        })
    }

    /// How long the marker of a write or a revocation of a session the
    /// request does not hold lasts (see `Lease::marker_ttl`).
    fn marker_ttl(&self) -> Duration {
        crate::core::lease::marker_ttl(&self.endpoint)
    }

    /// Whether session `id` has data (for session.use_strict_mode).
    pub fn exists(&self, id: &str) -> Result<bool> {
        if check_id(id).is_err() {
            return Ok(false);
        }
        let lease = self.lease(id);
        let key = self.data_key(id);
        let n: i64 =
            lease.call_idempotent(|c| redis::cmd("EXISTS").arg(&key).query(&mut c.inner))?;
        Ok(n == 1)
    }

    /// Destroys session `id`, which this request does not hold open: its data is
    /// deleted and any lease on it revoked (see `session_revoke.lua`).
    /// With `read`, as for `destroy`: whether the session still held it.
    pub fn delete(&self, id: &str, read: Option<&[u8]>) -> Result<bool> {
        check_id(id)?;
        self.revoke(&self.lease(id), Compare::read(read))
    }

    /// As `delete`: whether the session had data when deleted (one this
    /// request saved and moved on from: gone, another request logged out).
    pub fn delete_existing(&self, id: &str) -> Result<bool> {
        check_id(id)?;
        self.revoke(&self.lease(id), Compare::Exists)
    }

    /// Deletes a session's data and revokes any lease on it. Whether the
    /// session held what `compare` says when deleted.
    fn revoke(&self, lease: &Lease, compare: Compare<'_>) -> Result<bool> {
        // One marker per revocation, so that running it again (after a lost reply)
        // does not revoke the next holder as well.
        let nonce = Token::generate();
        let (n, acks) = lease.call_idempotent(|c| {
            let mut script =
                scripts::SESSION_REVOKE.key(lease.keys.data.as_deref().unwrap_or_default());
            script
                .key(lease.keys.lock())
                .key(lease.keys.waiters())
                .key(lease.keys.terms())
                .key(lease.keys.marker(b"revoked", &nonce))
                .key_of(&lease.keys.revoked_parts())
                .arg(millis(self.marker_ttl()))
                .arg(millis(self.config.lock_ttl + REVOKED_KEPT));
            match compare {
                Compare::Nothing => {}
                Compare::Data(read) => {
                    script.arg(read);
                }
                Compare::Exists => {
                    script.arg("").arg("exists");
                }
            }
            let n = script.call::<i64>(&mut *c.inner)?;
            // A logout a failover could undo (the data back, the revoked
            // holder's save accepted) is not reported done.
            Ok((n, lease.wait_replicas(c, true)?))
        })?;
        lease.replicated(acks, "The session was destroyed")?;
        Ok(n > 0)
    }

    /// Whether session `id` holds exactly `stored` (data in its stored form).
    pub fn holds(&self, id: &str, stored: &[u8]) -> Result<bool> {
        let lease = self.lease(id);
        Ok(self.get(&lease)?.as_deref() == Some(stored))
    }

    /// A new session id of `length` characters of `bits` bits each (PHP's
    /// session.sid_length and session.sid_bits_per_character), not in use.
    pub fn create_id(&self, length: usize, bits: u8) -> Result<String> {
        for _ in 0..3 {
            let id = generate_id(length, bits)?;
            if !self.exists(&id)? {
                return Ok(id);
            }
        }
        Err(Error::Connection(
            "three fresh session ids in a row were already in use; is the random source broken?"
                .into(),
        ))
    }
}

/// The alphabet PHP uses for session ids, by bits per character.
const ID_CHARS: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,-";

/// What a revocation compares the session's data with (`SessionStore::revoke`).
#[derive(Clone, Copy)]
enum Compare<'a> {
    Nothing,
    /// The data a read-only request read (stored form).
    Data(&'a [u8]),
    /// Any data at all.
    Exists,
}

impl<'a> Compare<'a> {
    /// With the data read, if any.
    fn read(read: Option<&'a [u8]>) -> Compare<'a> {
        read.map_or(Compare::Nothing, Compare::Data)
    }
}

/// A session lock is no longer this request's to free: not renewed, and not
/// freed by its thread's end.
fn unlocked(hold: &Hold) {
    hold.stop_watch();
    request::session_unlocked(hold);
}

/// A random id as PHP's `php_session_create_id` makes it: `bits` (4, 5 or 6) random
/// bits per character, drawn from the OS.
pub fn generate_id(length: usize, bits: u8) -> Result<String> {
    if !(4..=6).contains(&bits) {
        return Err(Error::invalid(format!(
            "session.sid_bits_per_character must be 4, 5 or 6, {bits} given"
        )));
    }
    if !(22..=MAX_ID_LEN).contains(&length) {
        return Err(Error::invalid(format!(
            "session.sid_length must be between 22 and 256, {length} given"
        )));
    }
    let mask = (1u8 << bits) - 1;
    let mut id = String::with_capacity(length);
    while id.len() < length {
        let raw = Token::generate();
        for pair in raw.as_str().as_bytes().chunks(2) {
            let byte =
                u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("00"), 16).unwrap_or(0);
            id.push(ID_CHARS[(byte & mask) as usize] as char);
            if id.len() == length {
                break;
            }
        }
    }
    Ok(id)
}

/// Session ids become part of Redis keys: only PHP's own id characters, bounded.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ID_LEN || !id.bytes().all(|b| ID_CHARS.contains(&b)) {
        return Err(Error::invalid(format!(
            "invalid session id {}: use 1 to {MAX_ID_LEN} characters of a-z, A-Z, 0-9, ',' and '-'",
            short_id(id)
        )));
    }
    Ok(())
}

/// User text in a message: at most 40 characters, control characters (NUL
/// included, which PHP cannot put in an exception message) escaped.
fn shown(text: &str) -> String {
    text.chars()
        .take(40)
        .flat_map(char::escape_default)
        .collect()
}

/// The start of a session id, for messages: enough to correlate, not to hijack.
/// The keys of session `id` under `prefix`: its data at `<prefix><id>`, its lock
/// at `{<prefix><id>}:lock` (one slot on a Cluster).
pub fn session_keys(prefix: &str, id: &str) -> LeaseKeys {
    let data = [prefix.as_bytes(), id.as_bytes()].concat();
    let lock = [b"{", data.as_slice(), b"}:lock"].concat();
    LeaseKeys::with_base(lock, Some(data))
}

pub fn short_id(id: &str) -> String {
    let shown: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == ',' || *c == '-')
        .take(6)
        .collect();
    format!("'{shown}…'")
}

fn bad_reply(lease: &Lease, what: &dyn std::fmt::Display) -> Error {
    Error::Connection(format!(
        "Redis at {} gave an unexpected reply to a session command ({what}); is something else using the session's keys?",
        lease.endpoint.location()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_php_settings() {
        let id = generate_id(32, 4).unwrap();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{id}"
        );
        let id = generate_id(48, 6).unwrap();
        assert_eq!(id.len(), 48);
        assert!(check_id(&id).is_ok());
        assert_ne!(generate_id(32, 5).unwrap(), generate_id(32, 5).unwrap());
        assert!(generate_id(32, 3).is_err());
        assert!(generate_id(300, 4).is_err());
    }

    #[test]
    fn options_parse_or_explain() {
        let mut c = SessionConfig::default();
        let auto = Duration::from_secs(45);
        c.set("locking", "off", auto).unwrap();
        assert!(!c.locking);
        c.set("lock_ttl", "0", auto).unwrap();
        assert_eq!(c.lock_ttl, auto);
        c.set("lock_ttl", "2.5", auto).unwrap();
        assert_eq!(c.lock_ttl, Duration::from_millis(2500));
        c.set("on_lock_timeout", "readonly", auto).unwrap();
        assert_eq!(c.on_lock_timeout, OnLockTimeout::Readonly);
        c.set("max_waiters", "8", auto).unwrap();
        assert_eq!(c.max_waiters, 8);
        for (name, value) in [
            ("locking", "maybe"),
            ("lock_ttl", "-1"),
            ("lock_wait", "NaN"),
            ("lock_wait", "1e9"),
            ("on_lock_timeout", "ignore"),
            ("max_waiters", "-2"),
            ("prefix", "a{b}"),
            ("no_such", "1"),
        ] {
            let err = c.set(name, value, auto).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{name}={value}");
        }
    }

    #[test]
    fn ids_are_confined_to_safe_characters() {
        for bad in ["", "a b", "../x", "x\0y", "{tag}", &"a".repeat(257)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_id("abc,-XYZ019").is_ok());
        assert_eq!(short_id("0123456789abcdef"), "'012345…'");
    }
}
