//! `RedisLease\inspect()` and `RedisLease\leases()`: PHP arrays of what
//! `core::inspect` finds. Durations are seconds (floats), as everywhere in the API.

use std::sync::Arc;
use std::time::Duration;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendHashTable, Zval};

use crate::core::dsn::Endpoint;
use crate::core::error::Error;
use crate::core::inspect::{self, Found, Kind, Search, Survey};
use crate::core::lease::{check_lock_name, check_lock_prefix, Lease, LeaseKeys};
use crate::core::session::{check_id, session_keys};
use crate::php::args::{Bytes, Float, Int};
use crate::php::ini;
use crate::php::lock::MAX_KEY_LEN;
use crate::php::session::default_prefix;

type Table = ZBox<ZendHashTable>;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn opt_secs(d: Option<Duration>) -> Zval {
    let mut z = Zval::new();
    match d {
        Some(d) => z.set_double(secs(d)),
        None => z.set_null(),
    }
    z
}

fn endpoint(fname: &str, dsn: Option<Bytes>, arg: u8) -> Result<Arc<Endpoint>, Error> {
    ini::endpoint(dsn, &format!("{fname}(): Argument #{arg} ($dsn)"))
}

fn survey_table(s: &Survey) -> PhpResult<Table> {
    let mut t = ZendHashTable::new();
    t.insert("key", s.key.as_str())?;
    t.insert("kind", s.kind.name())?;
    let mut holders = ZendHashTable::new();
    for h in &s.holders {
        let mut e = ZendHashTable::new();
        e.insert("mode", h.mode)?;
        e.insert("token", h.token.as_str())?;
        match h.fence {
            Some(f) => e.insert("fence", f)?,
            None => e.insert("fence", ())?,
        }
        e.insert("ttl", opt_secs(h.left))?;
        e.insert("held", opt_secs(h.held))?;
        e.insert("permits", i64::from(h.permits))?;
        holders.push(e)?;
    }
    t.insert("holders", holders)?;
    let mut waiters = ZendHashTable::new();
    for w in &s.waiters {
        let mut e = ZendHashTable::new();
        e.insert("mode", w.mode)?;
        e.insert("token", w.token.as_str())?;
        e.insert("waited", opt_secs(w.waited))?;
        e.insert("gives_up_in", secs(w.gives_up_in))?;
        e.insert("ttl", secs(w.ttl))?;
        e.insert("permits", i64::from(w.permits))?;
        match w.limit {
            Some(l) => e.insert("limit", i64::from(l))?,
            None => e.insert("limit", ())?,
        }
        e.insert("stale", w.stale)?;
        waiters.push(e)?;
    }
    t.insert("waiters", waiters)?;
    t.insert("holders_total", s.holders_total as i64)?;
    t.insert("waiters_total", s.waiters_total as i64)?;
    t.insert("expired_holds", s.expired as i64)?;
    t.insert("permits", s.permits as i64)?;
    match s.limit {
        Some(l) => t.insert("limit", i64::from(l))?,
        None => t.insert("limit", ())?,
    }
    match s.last_fence {
        Some(f) => t.insert("last_fence", f)?,
        None => t.insert("last_fence", ())?,
    }
    t.insert("longest_wait", opt_secs(s.longest_wait()))?;
    t.insert("longest_hold", opt_secs(s.longest_hold()))?;
    t.insert("lease_left", opt_secs(s.lease_left()))?;
    if let Some(d) = &s.session {
        let mut e = ZendHashTable::new();
        match d.size {
            Some(n) => e.insert("size", n as i64)?,
            None => e.insert("size", ())?,
        }
        e.insert("ttl", opt_secs(d.left))?;
        t.insert("session", e)?;
    }
    Ok(t)
}

/// `RedisLease\inspect(string $key, string $kind = 'lock', ?string $dsn = null,
/// ?string $prefix = null): array`: who holds the lease and who waits for it.
/// `$key` is the name given to `DistributedLock`/`DistributedSemaphore`, or a
/// session id; `$prefix` defaults to `redis_lease.lock_prefix` (locks,
/// semaphores) or, for sessions, the DSN's `prefix=`, else
/// `redis_lease.session.prefix`.
#[php_function]
#[php(name = "RedisLease\\inspect")]
#[php(defaults(kind = "lock".to_string()))]
pub fn inspect_lease(
    key: Bytes,
    kind: String,
    dsn: Option<Bytes>,
    prefix: Option<Bytes>,
) -> PhpResult<Table> {
    const F: &str = "RedisLease\\inspect";
    let kind = Kind::parse(&kind).ok_or_else(|| {
        Error::invalid(format!(
            "{F}(): Argument #2 ($kind) must be 'lock', 'semaphore' or 'session'"
        ))
    })?;
    let key = key.0;
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "{F}(): Argument #1 ($key) must be at most {MAX_KEY_LEN} bytes, {} given",
            key.len()
        ))
        .into());
    }
    let endpoint = endpoint(F, dsn, 3)?;
    let keys = match kind {
        Kind::Session => {
            let id = std::str::from_utf8(&key)
                .ok()
                .filter(|id| check_id(id).is_ok())
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{F}(): Argument #1 ($key) must be a session id (letters, digits, ',' and '-')"
                    ))
                })?;
            let prefix = match prefix {
                Some(p) => p.into_utf8(&format!("{F}(): Argument #4 ($prefix)"))?,
                None => default_prefix(&endpoint),
            };
            session_keys(&prefix, id)
        }
        Kind::Lock | Kind::Semaphore => {
            if let Err(why) = check_lock_name(&key) {
                return Err(Error::invalid(format!("{F}(): Argument #1 ($key) {why}")).into());
            }
            let prefix = match prefix {
                Some(p) => p.0,
                None => ini::get(ini::LOCK_PREFIX).into_bytes(),
            };
            check_lock_prefix(&prefix)?;
            if kind == Kind::Lock {
                LeaseKeys::for_lock(&prefix, &key)
            } else {
                LeaseKeys::for_semaphore(&prefix, &key)
            }
        }
    };
    let lease = Lease::new(endpoint, keys);
    let survey = inspect::survey(&lease, kind)?;
    survey_table(&survey)
}

/// `RedisLease\leases(?string $prefix = null, ?string $dsn = null, int $limit = 100,
/// float $timeout = 2.0): array`: the live leases, the busiest first (most
/// waiters, then the longest wait, then the longest hold), found with SCAN on
/// every master. `['leases' => [...], 'partial' => bool, 'why_partial' => [...],
/// 'found' => int, 'scanned' => int]` (`found`: live leases found, of which
/// `leases` holds the first `$limit`). `$prefix` null: the lock prefix of the
/// ini settings and the session prefix (the DSN's, else the ini's); else keys
/// starting with it.
#[php_function]
#[php(name = "RedisLease\\leases")]
#[php(defaults(limit = 100, timeout = 2.0))]
pub fn list_leases(
    prefix: Option<Bytes>,
    dsn: Option<Bytes>,
    limit: Int,
    timeout: Float,
) -> PhpResult<Table> {
    const F: &str = "RedisLease\\leases";
    let limit = limit.0;
    if !(1..=10_000).contains(&limit) {
        return Err(Error::invalid(format!(
            "{F}(): Argument #3 ($limit) must be between 1 and 10000, {limit} given"
        ))
        .into());
    }
    if !(timeout.0.is_finite() && timeout.0 > 0.0 && timeout.0 <= 3600.0) {
        return Err(Error::invalid(format!(
            "{F}(): Argument #4 ($timeout) must be a number of seconds above 0 and at most 3600"
        ))
        .into());
    }
    let endpoint = endpoint(F, dsn, 2)?;
    let session_prefix = default_prefix(&endpoint).into_bytes();
    let prefixes = match prefix {
        Some(p) => vec![p.0],
        None => vec![
            ini::get(ini::LOCK_PREFIX).into_bytes(),
            [b"{".as_slice(), &session_prefix].concat(),
        ],
    };
    let search = Search {
        prefixes,
        session_prefix,
        limit: limit as usize,
        budget: Duration::from_secs_f64(timeout.0),
    };
    let found: Found = inspect::leases(&endpoint, &search)?;
    let mut t = ZendHashTable::new();
    let mut list = ZendHashTable::new();
    for s in &found.leases {
        list.push(survey_table(s)?)?;
    }
    t.insert("leases", list)?;
    t.insert("partial", !found.partial.is_empty())?;
    let mut why = ZendHashTable::new();
    for p in &found.partial {
        why.push(p.as_str())?;
    }
    t.insert("why_partial", why)?;
    t.insert("found", found.total as i64)?;
    t.insert("scanned", found.scanned as i64)?;
    Ok(t)
}

/// Adds this module's functions to the extension.
pub fn functions(module: ModuleBuilder) -> ModuleBuilder {
    module
        .function(wrap_function!(inspect_lease))
        .function(wrap_function!(list_leases))
}
