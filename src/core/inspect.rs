//! What operators see of leases: who holds one, who waits behind it and for how
//! long (`RedisLease\inspect()`, `RedisLease\leases()`, the `redis-lease` tool).
//! Read only: nothing here writes to Redis.
//!
//! Nothing shown lets a reader act on a lease: tokens are cut to their first 8
//! characters (a whole one could release or renew the hold), and session ids,
//! which log a user in, to their first 6.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use redis::{ErrorKind, FromRedisValue, Value};

use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::lease::{Lease, LeaseKeys};
use crate::core::pool::Conn;
use crate::core::scripts;
use crate::core::session::{check_id, short_id};

/// How many holders and waiters of one lease are listed (the totals are counted).
pub const MAX_LISTED: usize = 1000;

/// What kind of lease a key is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A `DistributedLock`: held alone, or shared by readers.
    Lock,
    /// A `DistributedSemaphore`'s permits.
    Semaphore,
    /// A session's lock, with its data.
    Session,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Semaphore => "semaphore",
            Kind::Session => "session",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "lock" => Some(Kind::Lock),
            "semaphore" => Some(Kind::Semaphore),
            "session" => Some(Kind::Session),
            _ => None,
        }
    }
}

/// One hold on a lease.
#[derive(Clone, Debug)]
pub struct Holder {
    /// "write" (alone), "read" (shared) or "permits".
    pub mode: &'static str,
    /// The token's first 8 characters.
    pub token: String,
    /// A writer's fencing token, once assigned.
    pub fence: Option<i64>,
    /// Lease left; `None` when the key has no expiry (not one of ours).
    pub left: Option<Duration>,
    /// How long it has been held, where Redis knows: since its fencing token was
    /// assigned (at a handoff; on an uncontended lock, when first asked for).
    pub held: Option<Duration>,
    pub permits: u32,
}

/// One waiter, in queue order.
#[derive(Clone, Debug)]
pub struct Waiter {
    /// "write", "read", "upgrade" (a reader waiting to hold it alone) or "permits".
    pub mode: &'static str,
    pub token: String,
    /// Since it joined the queue (`None` for an entry queued by a version that did
    /// not record it).
    pub waited: Option<Duration>,
    /// Until it gives up.
    pub gives_up_in: Duration,
    /// The lease it asks for.
    pub ttl: Duration,
    pub permits: u32,
    /// A semaphore's limit, as the waiter's object has it.
    pub limit: Option<u32>,
    /// Not heard from lately (it may have died in its wait): passed over by grants
    /// until its deadline.
    pub stale: bool,
}

/// A session's data beside its lock.
#[derive(Clone, Debug)]
pub struct SessionData {
    /// Bytes stored (compressed, where compression is on); `None`: no data.
    pub size: Option<u64>,
    pub left: Option<Duration>,
}

/// One lease as Redis has it at one moment.
#[derive(Clone, Debug)]
pub struct Survey {
    pub kind: Kind,
    /// The lease's Redis key, as it may be shown (a session's id cut short).
    pub key: String,
    /// Live holders: the one writer, or the shared holds, first to expire first.
    pub holders: Vec<Holder>,
    pub waiters: Vec<Waiter>,
    pub holders_total: u64,
    pub waiters_total: u64,
    /// Shared holds whose lease ran out, not yet dropped by a script.
    pub expired: u64,
    /// Permits held (a semaphore), readers (a read lock), or 1 (a writer).
    pub permits: u64,
    /// A semaphore's limit, where a waiter carries it (Redis keeps no limit: each
    /// `DistributedSemaphore` has its own).
    pub limit: Option<u32>,
    /// The last fencing token granted.
    pub last_fence: Option<i64>,
    pub session: Option<SessionData>,
}

impl Survey {
    /// Held by someone, or waited for.
    pub fn live(&self) -> bool {
        !self.holders.is_empty() || self.waiters_total > 0
    }

    /// The longest any listed waiter has waited.
    pub fn longest_wait(&self) -> Option<Duration> {
        self.waiters.iter().filter_map(|w| w.waited).max()
    }

    /// The longest a holder has held it, where known.
    pub fn longest_hold(&self) -> Option<Duration> {
        self.holders.iter().filter_map(|h| h.held).max()
    }

    /// The shortest lease left among the holders.
    pub fn lease_left(&self) -> Option<Duration> {
        self.holders.iter().filter_map(|h| h.left).min()
    }
}

/// Surveys one lease in one round trip (see survey.lua).
pub fn survey(lease: &Lease, kind: Kind) -> Result<Survey> {
    survey_found(lease, kind)?.map_err(|why| {
        Error::refused(format!(
            "{} at {} is not a redis_lease {}: {why}",
            shown_key(&lease.keys, kind),
            lease.endpoint.location(),
            kind.name()
        ))
    })
}

/// `survey`, with a key that is not a lease of this kind told apart from a
/// failure: `Ok(Err(why))`.
fn survey_found(lease: &Lease, kind: Kind) -> Result<Parsed<Survey>> {
    let keys = &lease.keys;
    let v: Value = lease.call_idempotent(|c| {
        let mut inv = scripts::SURVEY.key(keys.lock());
        inv.key(keys.holders())
            .key(keys.weights())
            .key(keys.waiters())
            .key(keys.terms())
            .key(keys.fence());
        if let Some(data) = &keys.data {
            inv.key(data);
        }
        inv.arg(MAX_LISTED).call(&mut *c.inner)
    })?;
    Ok(read_survey(v, kind, shown_key(keys, kind)))
}

/// A lease's key as it may be shown: a session's id cut to its first 6 characters.
fn shown_key(keys: &LeaseKeys, kind: Kind) -> String {
    let text = String::from_utf8_lossy(keys.lock()).into_owned();
    if kind != Kind::Session {
        return text;
    }
    // {<prefix><id>}:lock
    let Some(data) = &keys.data else { return text };
    let data = String::from_utf8_lossy(data);
    let prefix_len = data.len().saturating_sub(session_id_len(&data));
    let (prefix, id) = data.split_at(prefix_len);
    format!("{{{prefix}{}}}:lock", short_id(id).trim_matches('\''))
}

/// How many characters at the end of a session's data key are its id (ids are
/// `[a-zA-Z0-9,-]`, see `session::check_id`).
fn session_id_len(data_key: &str) -> usize {
    data_key
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b',' | b'-'))
        .count()
}

type Parsed<T> = std::result::Result<T, String>;

fn items(v: Value) -> Parsed<Vec<Value>> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Nil => Ok(Vec::new()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

fn int(v: &Value) -> Parsed<i64> {
    i64::from_redis_value_ref(v).map_err(|e| e.to_string())
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}

/// The first 8 characters of a token (tokens are 32 hex digits).
fn token_head(token: &str) -> Parsed<String> {
    let ok = token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err("a holder or waiter that is not a redis_lease token".to_string());
    }
    Ok(token[..8].to_string())
}

/// A fencing token taken from the server clock (µs) tells when it was assigned.
fn held_since(fence: i64, now_ms: i64) -> Option<Duration> {
    // Plausible only after 2001 and not in the future (a counter that moved past
    // the clock tells nothing).
    let at_ms = fence / 1000;
    (fence > 1_000_000_000_000_000 && at_ms <= now_ms + 1000).then(|| ms(now_ms - at_ms))
}

fn read_survey(v: Value, kind: Kind, key: String) -> Parsed<Survey> {
    let mut it = items(v)?.into_iter();
    let mut next = || it.next().unwrap_or(Value::Nil);
    let now = int(&next())?;
    let types: Vec<String> = items(next())?.iter().filter_map(text).collect();
    let expected = ["string", "zset", "hash", "zset", "hash", "string", "string"];
    for (t, e) in types.iter().zip(expected) {
        if t != "none" && t != e {
            return Err(format!("a part of it is a {t}, not a {e}"));
        }
    }
    let value = text(&next());
    let pttl = int(&next())?;
    let holders = items(next())?;
    let weights = items(next())?;
    let waiters = items(next())?;
    let terms = items(next())?;
    let counts = items(next())?;
    let fence = text(&next()).and_then(|f| f.parse().ok());
    let size = int(&next())?;
    let data_pttl = int(&next())?;

    let mut s = Survey {
        kind,
        key,
        holders: Vec::new(),
        waiters: Vec::new(),
        holders_total: 0,
        waiters_total: counts.get(1).map(int).transpose()?.unwrap_or(0) as u64,
        expired: 0,
        permits: 0,
        limit: None,
        last_fence: fence,
        session: (kind == Kind::Session).then(|| SessionData {
            size: (size >= 0 && data_pttl != -2).then_some(size as u64),
            left: (data_pttl >= 0).then(|| ms(data_pttl)),
        }),
    };
    if let Some(value) = value {
        let (token, f) = value
            .split_once(':')
            .ok_or("its value is not a lease ('<token>:<fence>')")?;
        let fence: Option<i64> = f.parse().ok().filter(|&f| f > 0);
        s.holders.push(Holder {
            mode: "write",
            token: token_head(token)?,
            fence,
            left: (pttl >= 0).then(|| ms(pttl)),
            held: fence.and_then(|f| held_since(f, now)),
            permits: 1,
        });
        s.permits = 1;
    }
    let shared_total = counts.first().map(int).transpose()?.unwrap_or(0) as u64;
    let writer = s.holders.len() as u64;
    for (pair, weight) in holders.chunks(2).zip(&weights) {
        let token = text(&pair[0]).unwrap_or_default();
        let ends = text(&pair[1])
            .and_then(|e| e.parse::<f64>().ok())
            .ok_or("a shared hold without its end")? as i64;
        if ends <= now {
            s.expired += 1;
            continue;
        }
        let permits: u32 = text(weight).and_then(|w| w.parse().ok()).unwrap_or(1);
        s.permits += u64::from(permits);
        s.holders.push(Holder {
            mode: if kind == Kind::Semaphore {
                "permits"
            } else {
                "read"
            },
            token: token_head(&token)?,
            fence: None,
            left: Some(ms(ends - now)),
            held: None,
            permits,
        });
    }
    // Counted by Redis: the list stops at MAX_LISTED.
    if let Some(expired) = counts.get(2).map(int).transpose()? {
        s.expired = expired as u64;
    }
    s.holders_total = writer + shared_total.saturating_sub(s.expired);
    for (pair, terms) in waiters.chunks(2).zip(&terms) {
        let token = text(&pair[0]).unwrap_or_default();
        let score = text(&pair[1])
            .and_then(|e| e.parse::<f64>().ok())
            .unwrap_or(0.0);
        let terms = text(terms).unwrap_or_default();
        let w = parse_terms(&terms).ok_or("a waiter without its terms")?;
        if w.deadline <= now {
            // Gone: dropped by the next script that walks the queue.
            s.waiters_total = s.waiters_total.saturating_sub(1);
            continue;
        }
        // Arrival in µs of the server clock (see lib.lua's join_queue); older
        // entries were scored 1, 2, 3...
        let waited = (score > 1e15).then(|| ms(now - (score / 1000.0) as i64));
        if w.limit.is_some() {
            s.limit = s.limit.max(w.limit);
        }
        s.waiters.push(Waiter {
            mode: match w.mode {
                "r" => "read",
                "u" => "upgrade",
                "p" => "permits",
                _ => "write",
            },
            token: token_head(&token)?,
            waited,
            gives_up_in: ms(w.deadline - now),
            ttl: ms(w.ttl),
            permits: w.weight,
            limit: w.limit,
            stale: w.heard <= now,
        });
    }
    Ok(s)
}

struct Terms<'a> {
    ttl: i64,
    deadline: i64,
    heard: i64,
    mode: &'a str,
    limit: Option<u32>,
    weight: u32,
}

/// A waiter's terms: '<ttl> <deadline> <heard until>[ <mode>[ <limit>[ <weight>]]]'.
fn parse_terms(t: &str) -> Option<Terms<'_>> {
    let mut f = t.split(' ');
    Some(Terms {
        ttl: f.next()?.parse().ok()?,
        deadline: f.next()?.parse().ok()?,
        heard: f.next()?.parse().ok()?,
        mode: f.next().unwrap_or("w"),
        limit: f.next().and_then(|l| l.parse().ok()),
        weight: f.next().and_then(|w| w.parse().ok()).unwrap_or(1),
    })
}

/// Where to look for leases, and how far.
#[derive(Clone, Debug)]
pub struct Search {
    /// Key prefixes to scan: a lock prefix (`lock:`) finds locks, read/write locks
    /// and semaphores; `{` and a session prefix finds sessions.
    pub prefixes: Vec<Vec<u8>>,
    /// The session prefix, to tell a session's lock by its key.
    pub session_prefix: Vec<u8>,
    /// How many leases to return, the busiest first.
    pub limit: usize,
    /// How long to look, in all.
    pub budget: Duration,
}

/// The live leases found, the busiest first.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub leases: Vec<Survey>,
    /// How many live leases were found (`leases` holds the busiest `limit`).
    pub total: usize,
    /// Keys SCAN returned.
    pub scanned: u64,
    /// Not everything was looked at (the budget ran out, more leases than were
    /// surveyed, a node failed): each reason, once.
    pub partial: Vec<String>,
}

/// How many refused surveys are said in `Found::partial` (the count is said
/// past that).
const SAID_REFUSALS: usize = 5;

/// How many candidate leases are surveyed at most, whatever the limit.
const MAX_SURVEYED: usize = 10_000;

/// Finds the live leases under `search.prefixes` with SCAN (never KEYS), on every
/// master of a Cluster, within `search.budget`, and surveys each.
pub fn leases(endpoint: &std::sync::Arc<Endpoint>, search: &Search) -> Result<Found> {
    let deadline = Instant::now() + search.budget;
    let mut found = Found::default();
    let mut bases: Vec<(Vec<u8>, Kind)> = Vec::new();
    let mut seen = HashSet::new();
    let mut conn = Conn::checkout(endpoint)?;
    let nodes = conn
        .inner
        .scan_targets()
        .map_err(|e| Error::refused(format!("Cannot list the nodes to scan: {e}")))?;
    let mut failures = 0;
    let mut broken = false;
    'nodes: for node in &nodes {
        for prefix in &search.prefixes {
            let pattern = [glob_escape(prefix).as_slice(), b"*"].concat();
            let mut cursor = 0u64;
            loop {
                if Instant::now() >= deadline {
                    found.partial.push(format!(
                        "the time allowed ({:.1} s) ran out before every key was scanned",
                        search.budget.as_secs_f64()
                    ));
                    break 'nodes;
                }
                let reply = conn.inner.scan(node.as_ref(), cursor, &pattern, 1000);
                let (next, keys) = match reply {
                    Ok(r) => r,
                    Err(e) => {
                        // A reply (NOPERM...) leaves the link in step; a failed
                        // round trip does not.
                        broken |= !matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension);
                        failures += 1;
                        let at = node
                            .as_ref()
                            .map_or_else(|| endpoint.location(), |(h, p)| format!("{h}:{p}"));
                        found.partial.push(format!("SCAN failed at {at}: {e}"));
                        continue 'nodes;
                    }
                };
                found.scanned += keys.len() as u64;
                for key in keys {
                    if let Some((base, kind)) = classify(&key, &search.session_prefix) {
                        if bases.len() < MAX_SURVEYED && seen.insert(base.clone()) {
                            bases.push((base, kind));
                        } else if bases.len() >= MAX_SURVEYED && !seen.contains(&base) {
                            found.partial.push(format!(
                                "more than {MAX_SURVEYED} leases: the first found were surveyed"
                            ));
                            break 'nodes;
                        }
                    }
                }
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
    }
    if broken {
        drop(conn);
    } else {
        conn.recycle();
    }
    if failures == nodes.len() && failures > 0 {
        return Err(Error::refused(found.partial.join("; ")));
    }
    let mut refused = 0;
    for (base, kind) in bases {
        if Instant::now() >= deadline {
            found.partial.push(format!(
                "the time allowed ({:.1} s) ran out before every lease found was surveyed",
                search.budget.as_secs_f64()
            ));
            break;
        }
        let data = (kind == Kind::Session).then(|| session_data_key(&base));
        let lease = Lease::new(endpoint.clone(), LeaseKeys::with_base(base, data));
        match survey_found(&lease, kind) {
            Ok(Ok(s)) if s.live() => found.leases.push(s),
            // A key that only looks like ours is no lease: not a failure.
            Ok(_) => {}
            // Refused (NOPERM, scripts disabled, a slot moving): what it would
            // show is missing, and the others may still be shown. Before, a
            // refusal was taken for a foreign key: an ACL that refused every
            // survey gave an empty answer that said it was complete. A few
            // reasons are said (a redirect names its slot: each differs).
            Err(e @ Error::Reply { .. }) => {
                refused += 1;
                if refused <= SAID_REFUSALS {
                    found.partial.push(e.to_string());
                }
            }
            // Redis no longer answers: the rest would wait for it in turn.
            Err(e) => {
                found.partial.push(e.to_string());
                break;
            }
        }
    }
    if refused > SAID_REFUSALS {
        found
            .partial
            .push(format!("{refused} leases in all could not be surveyed"));
    }
    found.total = found.leases.len();
    found.leases.sort_by_key(|s| {
        (
            Reverse(s.waiters_total),
            Reverse(s.longest_wait()),
            Reverse(s.longest_hold()),
            s.key.clone(),
        )
    });
    found.leases.truncate(search.limit);
    // Each reason once (a refusal repeats for every lease), in the order met.
    let mut said = HashSet::new();
    found.partial.retain(|p| said.insert(p.clone()));
    Ok(found)
}

/// `{<prefix><id>}:lock` -> `<prefix><id>`.
fn session_data_key(lock: &[u8]) -> Vec<u8> {
    lock[1..lock.len() - b"}:lock".len()].to_vec()
}

/// The lease a scanned key belongs to, and its kind; `None` for its other parts
/// (fencing counter, terms, weights, wake-up lists, markers) and foreign keys.
fn classify(key: &[u8], session_prefix: &[u8]) -> Option<(Vec<u8>, Kind)> {
    let base = key
        .strip_suffix(b":waiters")
        .or_else(|| key.strip_suffix(b":holders"))
        .unwrap_or(key);
    if base.starts_with(b"{") && base.ends_with(b"}:lock") {
        let inner = &base[1..base.len() - b"}:lock".len()];
        let id = inner.strip_prefix(session_prefix)?;
        let ok = std::str::from_utf8(id).is_ok_and(|id| check_id(id).is_ok());
        return ok.then(|| (base.to_vec(), Kind::Session));
    }
    if base.ends_with(b"}:semaphore") {
        return Some((base.to_vec(), Kind::Semaphore));
    }
    (base.ends_with(b"}") && base.contains(&b'{')).then(|| (base.to_vec(), Kind::Lock))
}

/// `s` as a SCAN pattern matching itself.
fn glob_escape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 4);
    for &b in s {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_told_apart() {
        let s = b"PHPREDIS_SESSION:";
        let k = |key: &[u8]| classify(key, s).map(|(b, k)| (String::from_utf8(b).unwrap(), k));
        assert_eq!(k(b"lock:{a}"), Some(("lock:{a}".into(), Kind::Lock)));
        assert_eq!(
            k(b"lock:{a}:waiters"),
            Some(("lock:{a}".into(), Kind::Lock))
        );
        assert_eq!(
            k(b"lock:{a}:holders"),
            Some(("lock:{a}".into(), Kind::Lock))
        );
        assert_eq!(
            k(b"lock:{a}:semaphore:holders"),
            Some(("lock:{a}:semaphore".into(), Kind::Semaphore))
        );
        assert_eq!(
            k(b"{PHPREDIS_SESSION:abc123}:lock"),
            Some(("{PHPREDIS_SESSION:abc123}:lock".into(), Kind::Session))
        );
        assert_eq!(
            k(b"{PHPREDIS_SESSION:abc123}:lock:waiters"),
            Some(("{PHPREDIS_SESSION:abc123}:lock".into(), Kind::Session))
        );
        for other in [
            &b"lock:{a}:fence"[..],
            b"lock:{a}:terms",
            b"lock:{a}:weights",
            b"lock:{a}:wake:0123",
            b"PHPREDIS_SESSION:abc123",
            b"{other:abc}:lock",
            b"plain",
        ] {
            assert_eq!(k(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn session_ids_are_cut_short_in_keys() {
        let keys = LeaseKeys::with_base(
            b"{PHPREDIS_SESSION:abcdefghijkl}:lock".to_vec(),
            Some(b"PHPREDIS_SESSION:abcdefghijkl".to_vec()),
        );
        let shown = shown_key(&keys, Kind::Session);
        assert!(!shown.contains("abcdefghijkl"), "{shown}");
        assert!(shown.starts_with("{PHPREDIS_SESSION:abcdef"), "{shown}");
    }

    #[test]
    fn patterns_match_only_themselves() {
        assert_eq!(glob_escape(b"a*b?[c]\\"), b"a\\*b\\?\\[c\\]\\\\".to_vec());
    }

    #[test]
    fn terms_parse_as_lib_lua_writes_them() {
        let t = parse_terms("30000 1700 1600 p 5 2").unwrap();
        assert_eq!(
            (t.ttl, t.deadline, t.heard, t.mode),
            (30000, 1700, 1600, "p")
        );
        assert_eq!((t.limit, t.weight), (Some(5), 2));
        let t = parse_terms("30000 1700 1600").unwrap();
        assert_eq!((t.mode, t.limit, t.weight), ("w", None, 1));
        assert!(parse_terms("x").is_none());
    }
}
