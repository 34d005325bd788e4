//! The lease watchdog: renews auto-renewed leases from a thread of the process,
//! while the request thread is busy in a slow query, a `sleep()` or a curl call
//! and runs no PHP code at all. A lease can then be short (a dead holder frees it
//! quickly) and still outlast the slowest legitimate holder.
//!
//! The thread never calls into PHP. It starts with the first renewed lease of a
//! process (never in the php-fpm master, which holds none), talks to Redis over
//! its own connections (never the request's), and holds its queue's mutex only
//! for bookkeeping, never across I/O, so the request thread never waits for it.
//! A forked child starts its own thread for its own leases: the parent's
//! watchdog is left alone in the child (its mutex may have been held at the fork).
//!
//! Every `ttl / 3` each lease is extended to its full ttl by the owner-checked
//! refresh script; the leases due on one endpoint go in one pipeline. Each
//! endpoint has its own thread (a worker usually talks to one), so one that
//! stops answering never delays the renewals of another. A renewal
//! that finds the lease gone marks it lost. When Redis does not answer, renewal
//! is tried again until the lease would end, and then it is marked expired: from
//! that moment nobody can say it is still ours. With `wait_replicas`, a renewal
//! counts only once that many replicas acknowledged it (one WAIT per round
//! trip): the master alone having it would not survive a failover.

use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::{Cmd, Value};

use crate::core::dsn::{Endpoint, Identity, Wait};
use crate::core::lease::{lease_end, millis, Hold, Lease, Token};
use crate::core::metrics::{self, Counter};
use crate::core::scripts;
use crate::core::topology::{self, Link};

/// Which counters a lost lease goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lock,
    Session,
}

const RENEWING: u8 = 0;
/// Redis said the lease is no longer ours.
const LOST: u8 = 1;
/// Redis did not confirm a renewal before the lease would have ended.
const EXPIRED: u8 = 2;
/// Its holder let go (release, close, the request's end).
const STOPPED: u8 = 3;

/// After a failed renewal, the next try comes this soon (or earlier, when the
/// lease would end first).
const RETRY: Duration = Duration::from_millis(100);

/// Leases due this close together go in the same round trip.
const COALESCE: Duration = Duration::from_millis(50);

/// One lease being renewed, shared by every copy of its `Hold` and the
/// watchdog (which keeps only a weak reference: when the last `Hold` is gone,
/// renewal stops without being told).
pub struct Renewal {
    key: Vec<u8>,
    token: Token,
    kind: Kind,
    /// Its endpoint's `wait_replicas` (a lane serves every DSN naming one Redis,
    /// whatever each asks of WAIT).
    wait: Option<Wait>,
    state: AtomicU8,
    schedule: Mutex<Schedule>,
    /// The schedule's lease end (ns after `epoch()`), readable without its mutex:
    /// the holder checks it on every call, also in a forked child, where the
    /// mutex may have been copied locked.
    end: AtomicU64,
}

/// The origin of `Renewal::end`: an `Instant` cannot live in an atomic.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

struct Schedule {
    /// No later than the moment Redis last set or extended the lease.
    sent: Instant,
    ttl: Duration,
    /// After a failed renewal: when to try again.
    retry_at: Option<Instant>,
}

impl std::fmt::Debug for Renewal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renewal")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Renewal {
    /// Until when, by our clock, the lease is ours as far as renewals know.
    pub fn safe_until(&self) -> Instant {
        epoch() + Duration::from_nanos(self.end.load(Ordering::Acquire))
    }

    /// Lost, or no renewal was confirmed in time. Past the last confirmed end it
    /// is expired at once, even while the thread still waits for an answer (a
    /// slow reply, a WAIT that Redis ends only on its 100 ms tick) that could
    /// only come too late.
    pub fn ended(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            LOST | EXPIRED => true,
            RENEWING if Instant::now() >= self.safe_until() => {
                self.end(EXPIRED);
                true
            }
            _ => false,
        }
    }

    /// No more renewals (the holder let go). Takes effect at once: a renewal
    /// already on its way is owner-checked, so it cannot touch a next holder's lease.
    pub fn stop(&self) {
        let _ = self
            .state
            .compare_exchange(RENEWING, STOPPED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The lease was extended to `ttl` no earlier than `sent` (by the watchdog or
    /// by the holder's own refresh).
    pub(crate) fn extended(&self, sent: Instant, ttl: Duration) {
        let mut s = self.schedule.lock();
        if sent >= s.sent {
            s.sent = sent;
            s.ttl = ttl;
            self.end
                .store(since_epoch(lease_end(sent, ttl)), Ordering::Release);
        }
        s.retry_at = None;
    }

    /// Still being renewed: not ended, not stopped.
    pub fn renewing(&self) -> bool {
        self.state.load(Ordering::Acquire) == RENEWING
    }

    fn due(&self) -> Instant {
        let s = self.schedule.lock();
        s.retry_at.unwrap_or(s.sent + s.ttl / 3)
    }

    fn ttl(&self) -> Duration {
        self.schedule.lock().ttl
    }

    fn end(&self, state: u8) {
        if self
            .state
            .compare_exchange(RENEWING, state, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            metrics::incr(match self.kind {
                Kind::Lock => Counter::LockLost,
                Kind::Session => Counter::SessionLost,
            });
        }
    }

    /// A renewal failed (no answer, an error): try again soon, unless the lease
    /// may have ended already.
    fn failed(&self) {
        metrics::incr(Counter::RenewalErrors);
        if self.ended() {
            return;
        }
        let next = (Instant::now() + RETRY).min(self.safe_until());
        self.schedule.lock().retry_at = Some(next);
    }
}

/// Renews `hold` (a lease on `lease`) from the watchdog until it is released,
/// lost, or every copy of it is dropped.
pub fn renew(lease: &Lease, hold: &mut Hold, kind: Kind) {
    if hold.renewal.as_ref().is_some_and(|r| r.renewing()) {
        return;
    }
    let renewal = Arc::new(Renewal {
        key: lease.keys.lock.clone(),
        token: hold.token.clone(),
        kind,
        wait: lease.endpoint.wait,
        state: AtomicU8::new(RENEWING),
        end: AtomicU64::new(since_epoch(lease_end(hold.sent, hold.ttl))),
        schedule: Mutex::new(Schedule {
            sent: hold.sent,
            ttl: hold.ttl,
            retry_at: None,
        }),
    });
    hold.renewal = Some(renewal.clone());
    Watchdog::current(true)
        .expect("created on demand")
        .lane(&lease.endpoint)
        .watch(Arc::downgrade(&renewal));
}

/// Stops this process's renewal threads and waits for them (module shutdown:
/// the code they run is about to be unloaded). Bounded by a read timeout: a
/// thread may be waiting for a reply.
pub fn shutdown() {
    let Some(w) = Watchdog::current(false) else {
        return;
    };
    let lanes: Vec<&'static Lane> = w.lanes.lock().clone();
    for lane in &lanes {
        lane.queue.lock().stop = true;
        lane.wake.notify_all();
    }
    for lane in lanes {
        if let Some(thread) = lane.thread.lock().take() {
            let _ = thread.join();
        }
        // A later renewed lease (none, after MSHUTDOWN) would start it again.
        lane.queue.lock().stop = false;
    }
}

/// A queue entry whose lease still wants renewing (held, not ended or stopped).
fn still_renewing(r: &Weak<Renewal>) -> bool {
    r.upgrade().is_some_and(|r| r.renewing())
}

/// How many leases this process's watchdog renews (for tests).
pub fn watched() -> usize {
    Watchdog::current(false).map_or(0, |w| {
        w.lanes
            .lock()
            .iter()
            .map(|lane| {
                lane.queue
                    .lock()
                    .leases
                    .iter()
                    .filter(|r| still_renewing(r))
                    .count()
            })
            .sum()
    })
}

/// How many renewal threads run in this process (for tests).
pub fn threads() -> usize {
    Watchdog::current(false).map_or(0, |w| {
        w.lanes
            .lock()
            .iter()
            .filter(|lane| lane.thread.lock().is_some())
            .count()
    })
}

/// One process's watchdog: a lane (a thread with its own connection) per Redis
/// endpoint, so that an endpoint that stops answering delays only its own leases.
struct Watchdog {
    pid: u32,
    lanes: Mutex<Vec<&'static Lane>>,
}

struct Lane {
    endpoint: Arc<Endpoint>,
    identity: Identity,
    queue: Mutex<Queue>,
    wake: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Queue {
    leases: Vec<Weak<Renewal>>,
    stop: bool,
    /// When the sleeping thread wakes up by itself; `None` while it works.
    wake_at: Option<Instant>,
}

/// The longest the thread sleeps with nothing due: it then finds leases
/// registered meanwhile by itself, so that registering one (every locked session
/// request does) rarely has to wake it.
const IDLE: Duration = Duration::from_millis(500);

/// This process's watchdog; one made in a parent before fork() is never used by
/// the child.
static CURRENT: AtomicPtr<Watchdog> = AtomicPtr::new(std::ptr::null_mut());

impl Watchdog {
    fn current(create: bool) -> Option<&'static Watchdog> {
        let pid = crate::core::pid::current();
        let seen = CURRENT.load(Ordering::Acquire);
        // SAFETY: CURRENT only ever points to a leaked (never freed) Watchdog.
        if let Some(w) = unsafe { seen.as_ref() } {
            if w.pid == pid {
                return Some(w);
            }
        }
        if !create {
            return None;
        }
        // Leaked on purpose, lanes included: a parent's watchdog, seen after
        // fork(), may have its mutexes locked for ever in the child; it is
        // replaced, never touched. A process makes one (a child, one more).
        let fresh: &'static Watchdog = Box::leak(Box::new(Watchdog {
            pid,
            lanes: Mutex::new(Vec::new()),
        }));
        let fresh_ptr = fresh as *const Watchdog as *mut Watchdog;
        match CURRENT.compare_exchange(seen, fresh_ptr, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(fresh),
            // Another thread of this process made one first (ZTS): use it.
            // SAFETY: as above.
            Err(other) => unsafe { other.as_ref() },
        }
    }

    fn lane(&self, ep: &Arc<Endpoint>) -> &'static Lane {
        let mut lanes = self.lanes.lock();
        if let Some(lane) = lanes.iter().find(|l| ep.is(&l.identity)) {
            return lane;
        }
        let lane: &'static Lane = Box::leak(Box::new(Lane {
            endpoint: ep.clone(),
            identity: ep.identity(),
            queue: Mutex::new(Queue {
                leases: Vec::new(),
                stop: false,
                wake_at: None,
            }),
            wake: Condvar::new(),
            thread: Mutex::new(None),
        }));
        lanes.push(lane);
        lane
    }
}

impl Lane {
    fn watch(&'static self, renewal: Weak<Renewal>) {
        let due = renewal.upgrade().map(|r| r.due());
        let wake = {
            let mut q = self.queue.lock();
            q.leases.retain(still_renewing);
            q.leases.push(renewal);
            // Sleeping past this lease's first renewal: wake it (else it finds
            // the lease when it wakes, or before it sleeps again).
            matches!((q.wake_at, due), (Some(at), Some(due)) if due < at)
        };
        let mut thread = self.thread.lock();
        if thread.is_none() {
            *thread = std::thread::Builder::new()
                .name("redis_lease renew".into())
                .stack_size(256 * 1024)
                .spawn(move || self.run())
                .ok();
            // Could not start a thread: the lease then simply ends at its ttl,
            // and its holder learns it on release, as without renewal.
        }
        drop(thread);
        if wake {
            self.wake.notify_all();
        }
    }

    fn run(&'static self) {
        let mut link: Option<Link> = None;
        while let Some(due) = self.next_due() {
            renew_on(&self.endpoint, &mut link, &due);
        }
    }

    /// Waits until some lease is due (or the lane is stopped: `None`), and takes
    /// those due now or soon.
    fn next_due(&self) -> Option<Vec<Arc<Renewal>>> {
        let mut q = self.queue.lock();
        loop {
            q.wake_at = None;
            if q.stop {
                return None;
            }
            q.leases.retain(still_renewing);
            let live: Vec<Arc<Renewal>> = q.leases.iter().filter_map(Weak::upgrade).collect();
            let now = Instant::now();
            let first = live.iter().map(|r| r.due()).min();
            if first.is_some_and(|f| f <= now) {
                return Some(
                    live.into_iter()
                        .filter(|r| r.due() <= now + COALESCE)
                        .collect(),
                );
            }
            drop(live);
            let at = first.map_or(now + IDLE, |f| f.min(now + IDLE));
            q.wake_at = Some(at);
            self.wake.wait_until(&mut q, at);
        }
    }
}

/// Renews `group` in one round trip on the lane's own link to `ep`.
fn renew_on(ep: &Endpoint, link: &mut Option<Link>, group: &[Arc<Renewal>]) {
    // A lease past its last confirmed end stays ended: a late renewal must not
    // revive what its holder may already have been told it lost.
    let group: Vec<Arc<Renewal>> = group.iter().filter(|r| !r.ended()).cloned().collect();
    if group.is_empty() {
        return;
    }
    if link.is_none() {
        match topology::open(ep) {
            Ok(l) => *link = Some(l),
            Err(_) => {
                metrics::incr(Counter::ConnectionErrors);
                group.iter().for_each(|r| r.failed());
                return;
            }
        }
    }
    let conn = link.as_mut().expect("just opened");
    // Never wait for a reply much past the moment the first lease could end.
    let now = Instant::now();
    let first_end = group.iter().map(|r| r.safe_until()).min().unwrap_or(now);
    let timeout = ep
        .timeouts
        .read
        .min(first_end.saturating_duration_since(now))
        .max(Duration::from_millis(5));
    let ttls: Vec<Duration> = group.iter().map(|r| r.ttl()).collect();
    let sent = Instant::now();
    metrics::incr(Counter::RenewalRoundTrips);
    let mut replies = conn
        .set_read_timeout(timeout)
        .and_then(|_| conn.pipeline(commands(&group, &ttls, false)));
    if replies
        .as_ref()
        .is_err_and(|e| e.code() == Some("NOSCRIPT"))
    {
        // A Cluster pipeline fails whole when a node does not know the script.
        replies = conn.pipeline(commands(&group, &ttls, true));
    }
    let Ok(replies) = replies else {
        // The link may hold a late reply: never reuse it.
        *link = None;
        metrics::incr(Counter::ConnectionErrors);
        group.iter().for_each(|r| r.failed());
        return;
    };
    let mut unknown = Vec::new();
    let mut renewed = Vec::new();
    let mut moved = false;
    for (i, reply) in replies.into_iter().enumerate() {
        match reply {
            Value::ServerError(e) if e.code() == "NOSCRIPT" => unknown.push(i),
            reply => {
                // A demoted or restarting master (a Sentinel failover): the next
                // round asks the sentinels for the master again.
                moved |= matches!(&reply, Value::ServerError(e)
                    if matches!(e.code(), "READONLY" | "LOADING" | "MASTERDOWN"));
                if settle(&group[i], &reply) {
                    renewed.push(i);
                }
            }
        }
    }
    let mut usable = !moved;
    if !unknown.is_empty() {
        // After a restart or SCRIPT FLUSH: EVAL once, which also loads it.
        let again: Vec<Arc<Renewal>> = unknown.iter().map(|&i| group[i].clone()).collect();
        let again_ttls: Vec<Duration> = unknown.iter().map(|&i| ttls[i]).collect();
        let replies = if usable {
            conn.pipeline(commands(&again, &again_ttls, true)).ok()
        } else {
            None
        };
        match replies {
            Some(replies) => {
                for (&i, reply) in unknown.iter().zip(&replies) {
                    if settle(&group[i], reply) {
                        renewed.push(i);
                    }
                }
            }
            None => {
                if usable {
                    metrics::incr(Counter::ConnectionErrors);
                }
                usable = false;
                again.iter().for_each(|r| r.failed());
            }
        }
    }
    let conn = link.as_mut().filter(|_| usable);
    let confirmed = confirm(ep, conn, &group, &ttls, &renewed, sent, timeout).is_ok();
    if !confirmed || !usable {
        *link = None;
    }
}

/// Counts the renewals `renewed` (indexes into `group`; extended to `ttls`, sent
/// no earlier than `sent`) as done. Those whose lease asked for `wait_replicas`
/// count only once enough replicas acknowledged them on `conn` (an extension a
/// failover could lose would have the holder trust a lease the new master ends
/// sooner); the others are tried again until the lease would end, as when Redis
/// does not answer. `conn` `None`: the link cannot be asked (those fail). An
/// error: the link broke.
fn confirm(
    ep: &Endpoint,
    conn: Option<&mut Link>,
    group: &[Arc<Renewal>],
    ttls: &[Duration],
    renewed: &[usize],
    sent: Instant,
    timeout: Duration,
) -> Result<(), ()> {
    // Those that need no acknowledgement count at once, before a WAIT that may
    // take until the others would end.
    let mut waited = Vec::new();
    for &i in renewed {
        match group[i].wait {
            Some(_) => waited.push(i),
            None => credit(&group[i], sent, ttls[i]),
        }
    }
    // One WAIT for them all: the most replicas and the longest wait any asks for.
    let asked = |w: Wait| (w.replicas, w.timeout.unwrap_or(ep.timeouts.read));
    let most = waited
        .iter()
        .filter_map(|&i| group[i].wait.map(asked))
        .reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)));
    let mut acks: Vec<i64> = vec![0; waited.len()];
    let mut broken = false;
    match (most, conn) {
        (None, _) => {}
        (Some(_), None) => broken = true,
        (Some((replicas, wait)), Some(conn)) => {
            let keys: Vec<&[u8]> = waited.iter().map(|&i| &group[i].key[..]).collect();
            // WAIT no longer than the first lease could end (as the renewal
            // itself), nor than a renewal period: the thread has other leases
            // to renew. Redis ends a WAIT only on its 100 ms tick, so the reply
            // may come that much later than asked.
            let period = waited.iter().map(|&i| ttls[i] / 3).min().unwrap_or(wait);
            let wait = wait.min(timeout).min(period);
            let result = conn
                .set_read_timeout(wait + timeout.max(Duration::from_millis(250)))
                .and_then(|_| conn.wait_each(&keys, replicas, wait));
            match result {
                Ok(a) => acks = a,
                Err(_) => {
                    metrics::incr(Counter::ConnectionErrors);
                    broken = true;
                }
            }
        }
    }
    for (n, &i) in waited.iter().enumerate() {
        let r = &group[i];
        if r.wait.is_some_and(|w| acks[n] >= i64::from(w.replicas)) {
            credit(r, sent, ttls[i]);
        } else {
            if !broken {
                metrics::incr(Counter::WaitShortfalls);
            }
            r.failed();
        }
    }
    if broken {
        Err(())
    } else {
        Ok(())
    }
}

/// `r` was extended to `ttl` no earlier than `sent`, unless it ended meanwhile
/// (its holder may have been told so: it stays ended).
fn credit(r: &Renewal, sent: Instant, ttl: Duration) {
    if !r.ended() {
        r.extended(sent, ttl);
        metrics::incr(Counter::AutoRenewals);
    }
}

/// What refresh.lua answered for `r`: true when it extended the lease (still to
/// be confirmed); else the lease is marked lost or the renewal failed.
fn settle(r: &Renewal, reply: &Value) -> bool {
    match reply {
        Value::Int(1) => true,
        Value::Int(0) => {
            r.end(LOST);
            false
        }
        _ => {
            r.failed();
            false
        }
    }
}

fn commands(group: &[Arc<Renewal>], ttls: &[Duration], eval: bool) -> Vec<Cmd> {
    group
        .iter()
        .zip(ttls)
        .map(|(r, ttl)| {
            // EVAL (which also loads it) when Redis does not know the script.
            let mut c = redis::cmd(if eval { "EVAL" } else { "EVALSHA" });
            c.arg(if eval {
                scripts::REFRESH_SOURCE
            } else {
                scripts::REFRESH.get_hash()
            })
            .arg(1)
            .arg(&r.key)
            .arg(r.token.as_str())
            .arg(millis(*ttl));
            c
        })
        .collect()
}
