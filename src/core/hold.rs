//! A lease we hold, and how long we may count on it.
//!
//! A `Hold` is what an acquire gives its caller: the token, the fencing token,
//! and a lower bound of the moment Redis lets the lease go, by this host's clock.
//! A hold that the watchdog looks after (renewals, or the check after a Sentinel
//! failover) shares a `Watch` with it; the watch then carries that bound (with
//! the hold's own, when it only checks after a failover), and whether the hold
//! was found lost.
//!
//! The bound must never exceed what any command in flight could leave on Redis.
//! The holder's `refresh()` sets the expiry (it may shorten it); the watchdog's
//! renewals only ever lengthen it (refresh.lua's "at least" mode), so a renewal
//! that overtakes a refresh cannot cut it back, and a renewal confirmed while a
//! refresh is on its way counts for no more than that refresh will leave.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::dsn::Wait;
use crate::core::metrics::{self, Counter, Timing};
use crate::core::token::Token;

/// The suffix of a session's lock key that names the set of tokens a logout
/// revoked (see session_revoke.lua).
pub(crate) const REVOKED_SET: &[u8] = b":revoked";

/// How long a command may still be on its way to Redis after it was sent (a
/// lossy network, a socket buffer): what a void marker and a voided refresh are
/// kept for past their lease (refresh.lua's `LATE_MS`).
pub(crate) const LATE: Duration = Duration::from_secs(60);

/// How many of a hold's refreshes may be left unanswered at once (within
/// `LATE`): each later refresh names them all to Redis, so the list is kept
/// well below what a script's arguments can carry. Past it, a refresh is not
/// sent until the oldest is `LATE` old: Redis left this many unanswered.
pub(crate) const MAX_UNANSWERED: usize = 64;

/// `<lock>:stale:<token>`: the ids of the token's refreshes that a later one
/// voided (see refresh.lua), in the lock's slot.
pub(crate) fn stale_refreshes(lock: &[u8], token: &Token) -> Vec<u8> {
    [lock, b":stale:", token.as_str().as_bytes()].concat()
}

/// How much earlier than the lease we assume it may end, to cover the clock
/// difference between this host and Redis (Redlock's drift allowance).
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// Whether a lease of `ttl` outlasts our clock's allowance for drift, so that
/// a reply can arrive while it is surely still there. (Not: 2 ms or less,
/// which no hold ever counts on.)
pub(crate) fn countable(ttl: Duration) -> bool {
    ttl > drift(ttl)
}

/// Until when, by our clock, a lease set for `ttl` no earlier than `sent` is
/// surely still there.
pub(crate) fn lease_end(sent: Instant, ttl: Duration) -> Instant {
    sent + ttl.saturating_sub(drift(ttl))
}

pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Which counters a lost lease goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lock,
    Session,
}

impl Kind {
    fn lost(self) -> Counter {
        match self {
            Kind::Lock => Counter::LockLost,
            Kind::Session => Counter::SessionLost,
        }
    }
}

/// Whether how a hold ended was counted, shared by the hold, its copies and
/// its watch.
#[derive(Clone, Debug, Default)]
struct EndCount(Arc<AtomicBool>);

impl EndCount {
    /// True the first time it is asked: how the hold ended is then the
    /// caller's to count.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }
}

/// A lease we hold.
#[derive(Clone, Debug)]
pub struct Hold {
    pub token: Token,
    /// The fencing token; 0 until assigned (an uncontended acquire leaves it to
    /// `Lease::fence`, on the holder's first request).
    pub fence: i64,
    /// The lease's length: what a refresh or a renewal extends it to.
    pub ttl: Duration,
    /// A shared hold (a reader of a lock, a semaphore's permit), not the lock
    /// alone: it has no fencing token.
    pub shared: bool,
    /// No later than the moment Redis lets the lease go, by our clock (when no
    /// renewing watch keeps that bound instead).
    until: Instant,
    /// When we started to want the lease, for the wait-time metric.
    pub acquired_at: Instant,
    /// Set when the watchdog looks after this hold (see `watchdog::watch`).
    pub watch: Option<Arc<Watch>>,
    /// This hold's refreshes that got no answer (or whose first run's link
    /// broke): id, when sent, ttl. They may still run, late, until a later
    /// refresh that runs voids them (refresh.lua). Until then nothing is counted
    /// on past the end each may leave, whatever else extended the lease (a
    /// conversion's grant); a watched hold's renewals count each one's ttl from
    /// their own start (`Watch::renewed`).
    pub(crate) unanswered_refreshes: Vec<(Token, Instant, Duration)>,
    /// Whether how the hold ended was counted (released, lost, revoked): set
    /// by whoever counts it first, the watchdog, a refresh, the holder's release
    /// or save (and shared with its watch), so each hold ends once in the
    /// counters.
    end_counted: EndCount,
}

impl Hold {
    /// A hold that Redis set, for `ttl`, no earlier than `sent`.
    pub fn new(token: Token, fence: i64, ttl: Duration, sent: Instant) -> Hold {
        Hold {
            token,
            fence,
            ttl,
            shared: false,
            until: lease_end(sent, ttl),
            acquired_at: sent,
            watch: None,
            unanswered_refreshes: Vec::new(),
            end_counted: EndCount::default(),
        }
    }

    /// A hold found (by asking at `asked`) with `left` of its lease to run; `ttl`
    /// is still what renewals extend it to. `left` `None`: no expiry.
    pub fn found(
        token: Token,
        fence: i64,
        ttl: Duration,
        asked: Instant,
        left: Option<Duration>,
    ) -> Hold {
        let mut hold = Hold::new(token, fence, ttl, asked);
        hold.until = lease_end(asked, left.unwrap_or(ttl));
        hold
    }

    /// The watch of this process, if any: a forked child never touches its
    /// parent's (its mutex may have been copied locked), and counts on the
    /// hold's own bound instead.
    fn own_watch(&self) -> Option<&Watch> {
        self.watch
            .as_deref()
            .filter(|w| w.pid == crate::core::pid::current())
    }

    /// The failover generation (`topology::generation`) of the master the hold
    /// is last known to be on, when the watchdog looks after it (every hold on
    /// a Sentinel service or a Cluster).
    pub(crate) fn known_generation(&self) -> Option<u64> {
        self.own_watch().map(Watch::generation)
    }

    /// Until when, by our clock, nobody else can have this lease.
    pub fn safe_until(&self) -> Instant {
        match self.own_watch() {
            Some(w) if w.ended() => w.safe_until().min(Instant::now()),
            // (A renewing watch counts them itself: see `Watch::renewed`.)
            Some(w) if w.renew => w.safe_until(),
            // One that only follows failovers ends with the lease it was told
            // of; the holder's refreshes bound this hold, not the watch, so a
            // hold that ran out on one that got no answer is not lost: its next
            // refresh (owner-checked) may find it still ours.
            Some(w) => w.safe_until().min(self.bound()),
            None => self.bound(),
        }
    }

    /// Whether `safe_until` has passed. (An ended watch's is "now" as it is
    /// read: a `now` read before it would find it still ahead. Review, stop
    /// 57: a touch run again, and a release's second run, took a hold the
    /// watchdog had found lost for one that could not have run out.)
    pub fn run_out(&self) -> bool {
        let until = self.safe_until();
        Instant::now() >= until
    }

    /// What this hold counts on by itself: its lease, and no later than an
    /// unanswered refresh may leave.
    fn bound(&self) -> Instant {
        self.unanswered_end()
            .map_or(self.until, |end| end.min(self.until))
    }

    /// Takes over `old`'s unanswered refreshes (a hold of the same token, made
    /// anew: converted, verified, adopted). One that arrives after this hold
    /// was granted or asked about (`acquired_at`) arrives no earlier than that,
    /// so its ttl counts from then; one sent a command's longest delay ago
    /// cannot arrive any more.
    pub(crate) fn carry_unanswered(&mut self, old: &Hold) {
        self.unanswered_refreshes = old.unanswered_refreshes.clone();
        self.prune_unanswered(Instant::now());
        let since = self.acquired_at;
        for (_, sent, _) in &mut self.unanswered_refreshes {
            *sent = (*sent).max(since);
        }
    }

    /// This hold is `old` found again (asked about anew: restored, or on a
    /// new master): it carries `old`'s unanswered refreshes, and is the same
    /// hold in the counts. (A converted hold is a new one: `carry_unanswered`.)
    pub(crate) fn found_again(&mut self, old: &Hold) {
        self.carry_unanswered(old);
        self.end_counted = old.end_counted.clone();
    }

    /// Drops the unanswered refreshes sent `LATE` before `now`: they cannot
    /// arrive any more.
    fn prune_unanswered(&mut self, now: Instant) {
        self.unanswered_refreshes
            .retain(|&(_, sent, _)| now.saturating_duration_since(sent) < LATE);
    }

    /// Prunes the unanswered refreshes (`prune_unanswered`). True when as many
    /// are left as a refresh may name: the next is not sent (see
    /// `Lease::refresh`).
    pub(crate) fn unanswered_full(&mut self, now: Instant) -> bool {
        self.prune_unanswered(now);
        self.unanswered_refreshes.len() >= MAX_UNANSWERED
    }

    /// Whether a refresh that got no answer may still arrive (sent less than
    /// `LATE` before `now`, and voided by no refresh answered since).
    pub(crate) fn refresh_may_arrive(&mut self, now: Instant) -> bool {
        self.prune_unanswered(now);
        !self.unanswered_refreshes.is_empty()
    }

    /// The earliest end an unanswered refresh may leave.
    fn unanswered_end(&self) -> Option<Instant> {
        self.unanswered_refreshes
            .iter()
            .map(|&(_, sent, ttl)| lease_end(sent, ttl))
            .min()
    }

    /// The watchdog found the lease taken or gone, or could not renew it before
    /// it would end: it is not ours (any more than it is anybody's). Redis may
    /// still keep it: a release still sends the owner-checked delete.
    pub fn lost(&self) -> bool {
        self.own_watch().is_some_and(Watch::ended)
    }

    /// The watchdog found that a logout revoked it (a session's hold).
    pub fn revoked(&self) -> bool {
        self.own_watch()
            .is_some_and(|w| w.state.load(Ordering::Acquire) == REVOKED)
    }

    /// Counts the hold ended as `c`, unless its end was counted already.
    pub(crate) fn count_end(&self, c: Counter) {
        if self.end_counted.first() {
            metrics::incr(c);
        }
    }

    /// Counts the hold lost (`kind`'s counter), unless its end was counted
    /// already: the watchdog counts a hold it renews when it gives it up; one
    /// nobody renews (a watch that only follows failovers) is counted when its
    /// holder learns it ran out.
    pub(crate) fn count_lost(&self, kind: Kind) {
        self.count_end(kind.lost());
    }

    /// Counts a lock's hold released by its holder (or converted), who let go
    /// at `let_go`, unless its end was counted already (the watchdog gave it
    /// up: its holder was told it is lost, even if Redis still kept it for the
    /// release to free).
    pub(crate) fn count_released(&self, let_go: Instant) {
        if self.end_counted.first() {
            metrics::incr(Counter::LockReleased);
            metrics::observe(Timing::LockHold, self.held_until(let_go));
        }
    }

    /// Counts how a session's hold ended, by session_save.lua's answer when its
    /// holder let go (at `let_go`): 1 freed by its holder, 2 revoked by a logout
    /// (or 0 after the watchdog found it revoked), anything else lost; once (see
    /// `count_end`).
    pub(crate) fn count_session_end(&self, answer: i64, let_go: Instant) {
        match answer {
            1 => {
                if self.end_counted.first() {
                    metrics::observe(Timing::SessionHold, self.held_until(let_go));
                }
            }
            2 => self.count_end(Counter::SessionRevoked),
            _ if self.revoked() => self.count_end(Counter::SessionRevoked),
            _ => self.count_lost(Kind::Session),
        }
    }

    /// How long it was held, to its holder's letting go at `let_go`.
    fn held_until(&self, let_go: Instant) -> Duration {
        let_go.saturating_duration_since(self.acquired_at)
    }

    /// Given up because Redis stopped answering the watchdog: a release now would
    /// only wait for a timeout, so it is left for later (see `Lease::release`).
    pub fn unanswered(&self) -> bool {
        self.own_watch()
            .is_some_and(|w| w.ended() && w.silent.load(Ordering::Acquire))
    }

    /// Ends the watchdog's work on this hold, if any: the holder let go.
    pub fn stop_watch(&self) {
        if let Some(w) = self.own_watch() {
            w.stop();
        }
    }

    /// A refresh to `ttl` is about to be sent (at `sent`): it sets the expiry, and
    /// may shorten it, so nothing is counted on past it from now on.
    pub(crate) fn refreshing(&mut self, sent: Instant, ttl: Duration) {
        self.until = self.until.min(lease_end(sent, ttl));
        if let Some(w) = self.own_watch() {
            w.setting(sent, ttl);
        }
    }

    /// That refresh was answered: `Some(true)`, the lease is now `ttl` from no
    /// earlier than `sent`; `Some(false)`, not ours any more; `None`, no answer (it
    /// may still run, so its bound stays).
    pub(crate) fn refreshed(&mut self, sent: Instant, ttl: Duration, extended: Option<bool>) {
        if extended == Some(true) {
            self.ttl = ttl;
            self.until = lease_end(sent, ttl);
        }
        if let Some(w) = self.own_watch() {
            w.set(sent, ttl, extended, &self.unanswered_refreshes);
        }
    }
}

const WATCHING: u8 = 0;
/// Redis said the lease is no longer ours (or a new master does not have it).
const LOST: u8 = 1;
/// No renewal was confirmed before the lease would have ended.
const EXPIRED: u8 = 2;
/// Its holder let go (release, close, the request's end).
const STOPPED: u8 = 3;
/// A logout revoked it (a session's; see session_revoke.lua): ended on
/// purpose, and counted by its holder's save or close, not as lost.
const REVOKED: u8 = 4;

/// After a failed renewal, the next try comes this soon (or earlier, when the
/// lease would end first).
const RETRY: Duration = Duration::from_millis(100);

/// One hold the watchdog looks after, shared by every copy of its `Hold` and the
/// watchdog (which keeps only a weak reference: when the last `Hold` is gone,
/// the watch ends without being told).
pub struct Watch {
    pub(crate) key: Vec<u8>,
    /// The lease's shared holds (for a reader or a permit: where its lease is).
    pub(crate) holders: Vec<u8>,
    pub(crate) shared: bool,
    pub(crate) token: Token,
    kind: Kind,
    /// Shared with its hold (`Hold::end_counted`).
    end_counted: EndCount,
    /// Its endpoint's `wait_replicas` (one watchdog lane serves every DSN naming
    /// one Redis, whatever each asks of WAIT).
    pub(crate) wait: Option<Wait>,
    /// Renewed every ttl/3; otherwise only checked after a failover (Sentinel, Cluster).
    pub(crate) renew: bool,
    /// The process whose watchdog keeps it.
    pid: u32,
    /// The failover generation of the master the hold is known to be on (see
    /// `sentinel`): older than the current one, the new master must be asked.
    generation: AtomicU64,
    state: AtomicU8,
    /// The last renewal got no answer at all (as opposed to an error, too few
    /// replicas, or a refusal).
    silent: AtomicBool,
    /// The confirmed end (ns after `epoch()`), readable without the mutex.
    end: AtomicU64,
    sched: Mutex<Schedule>,
}

struct Schedule {
    ttl: Duration,
    /// After a failed renewal: when to try again.
    retry_at: Option<Instant>,
    /// The holder's refreshes on their way (or never answered): when each was
    /// sent, and its ttl. (Read by renewals only: a watch that does not renew
    /// keeps them unread.)
    setting: Vec<(Instant, Duration)>,
    /// When the holder's last refresh was answered: a renewal sent before then
    /// may have run before it, and proves nothing beyond it.
    set_at: Option<Instant>,
}

impl Schedule {
    /// Keeps a refresh of the holder's on its way, sent at `sent` to `ttl`. Past
    /// the hold's own limit, folded into the last one (the later send, the
    /// shorter ttl): the hold drops an entry a minute after its send, the watch
    /// only when a renewal is confirmed, so the watch may keep more.
    fn pend(&mut self, sent: Instant, ttl: Duration) {
        let full = self.setting.len() >= MAX_UNANSWERED;
        match self.setting.last_mut() {
            Some(last) if full => *last = (last.0.max(sent), last.1.min(ttl)),
            _ => self.setting.push((sent, ttl)),
        }
    }

    /// Keeps each of a hold's unanswered refreshes on its way (see `pend`).
    fn pend_all(&mut self, refreshes: &[(Token, Instant, Duration)]) {
        for &(_, sent, ttl) in refreshes {
            self.pend(sent, ttl);
        }
    }

    /// The shortest ttl a refresh on its way may leave, and `ttl`.
    fn shortest(&self, ttl: Duration) -> Duration {
        self.setting
            .iter()
            .map(|&(_, t)| t)
            .fold(ttl, Duration::min)
    }
}

/// The origin of `Watch::end`: an `Instant` cannot live in an atomic.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("state", &self.state.load(Ordering::Relaxed))
            .field("renew", &self.renew)
            .finish_non_exhaustive()
    }
}

impl Watch {
    pub(crate) fn new(
        (key, holders): (Vec<u8>, Vec<u8>),
        hold: &Hold,
        kind: Kind,
        wait: Option<Wait>,
        renew: bool,
        generation: u64,
    ) -> Watch {
        let mut w = Watch {
            key,
            holders,
            shared: hold.shared,
            token: hold.token.clone(),
            kind,
            end_counted: hold.end_counted.clone(),
            wait,
            renew,
            pid: crate::core::pid::current(),
            generation: AtomicU64::new(generation),
            state: AtomicU8::new(WATCHING),
            silent: AtomicBool::new(false),
            // A refresh of the token's that got no answer (before a conversion)
            // bounds renewals as one on its way does, until the next is answered.
            end: AtomicU64::new(since_epoch(if renew { hold.bound() } else { hold.until })),
            sched: Mutex::new(Schedule {
                ttl: hold.ttl,
                retry_at: None,
                setting: Vec::new(),
                set_at: None,
            }),
        };
        w.sched.get_mut().pend_all(&hold.unanswered_refreshes);
        w
    }

    /// Until when, by our clock, the lease is ours as far as we know; for a
    /// watch that only checks after a failover, leaving out the holder's
    /// unanswered refreshes (`Hold::safe_until` counts those).
    pub fn safe_until(&self) -> Instant {
        epoch() + Duration::from_nanos(self.end.load(Ordering::Acquire))
    }

    /// Lost, or past its last confirmed end. Past that end it is expired at once,
    /// even while the watchdog still waits for an answer (a slow reply, a WAIT that
    /// Redis ends only on its 100 ms tick) that could only come too late.
    pub fn ended(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            LOST | EXPIRED | REVOKED => true,
            WATCHING if Instant::now() >= self.safe_until() => {
                self.end_as(EXPIRED);
                true
            }
            _ => false,
        }
    }

    /// No more work on it (the holder let go). Takes effect at once: a renewal
    /// already on its way is owner-checked, so it cannot touch a next holder's lease.
    pub fn stop(&self) {
        let _ = self
            .state
            .compare_exchange(WATCHING, STOPPED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Still watched: not ended, not stopped.
    pub fn watching(&self) -> bool {
        self.state.load(Ordering::Acquire) == WATCHING
    }

    /// When the next renewal is due: a third of the ttl after the last extension
    /// (of the shortest a refresh on its way may leave, while one is).
    pub(crate) fn due(&self) -> Instant {
        let s = self.sched.lock();
        let ttl = s.shortest(s.ttl);
        s.retry_at.unwrap_or_else(|| {
            self.safe_until()
                .checked_sub(ttl * 2 / 3)
                .unwrap_or_else(Instant::now)
        })
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.sched.lock().ttl
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Counts on the lease no later than `bound` (what a new master says is left
    /// of it): never raises what was counted on.
    pub(crate) fn cap(&self, bound: Instant) {
        self.end.fetch_min(since_epoch(bound), Ordering::AcqRel);
    }

    /// Found on the master of generation `generation` (after a failover).
    pub(crate) fn checked(&self, generation: u64) {
        self.generation.fetch_max(generation, Ordering::AcqRel);
    }

    /// Redis says it is not ours (or a new master does not have it). True when
    /// that ended it (it was still watched: not let go, run out or revoked;
    /// a watch that only follows failovers runs out unseen until asked).
    pub(crate) fn lose(&self) -> bool {
        !self.ended() && self.end_as(LOST)
    }

    /// Redis says a logout revoked it.
    pub(crate) fn revoke(&self) {
        self.end_as(REVOKED);
    }

    /// A session's: its renewal tells a revoked hold apart (refresh.lua).
    pub(crate) fn session(&self) -> bool {
        self.kind == Kind::Session
    }

    /// A session's tokens a logout revoked (`LeaseKeys::revoked_parts`).
    pub(crate) fn revoked_set(&self) -> Vec<u8> {
        [&self.key[..], REVOKED_SET].concat()
    }

    /// Its token's voided refreshes (kept as long as the lease, see refresh.lua).
    pub(crate) fn stale_refreshes(&self) -> Vec<u8> {
        stale_refreshes(&self.key, &self.token)
    }

    fn end_as(&self, state: u8) -> bool {
        let ended = self
            .state
            .compare_exchange(WATCHING, state, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        // A hold nobody renews simply runs out: its holder counts that, when
        // it learns it (`Hold::count_lost`); a revoked one, its holder too.
        if ended && state != REVOKED && (self.renew || state == LOST) && self.end_counted.first() {
            metrics::incr(self.kind.lost());
        }
        ended
    }

    /// A renewal got no answer (Redis unreachable, stopped, too slow): as
    /// `failed`.
    pub(crate) fn unanswered(&self) {
        self.silent.store(true, Ordering::Release);
        self.retry();
    }

    /// A renewal failed with an answer (an error, too few replicas): try again
    /// soon, unless the lease may have ended already.
    pub(crate) fn failed(&self) {
        self.silent.store(false, Ordering::Release);
        self.retry();
    }

    fn retry(&self) {
        metrics::incr(Counter::RenewalErrors);
        if self.ended() {
            return;
        }
        let next = (Instant::now() + RETRY).min(self.safe_until());
        self.sched.lock().retry_at = Some(next);
    }

    /// A renewal sent at `sent` was confirmed: the lease lasts at least `ttl` from
    /// then. A refresh of the holder's that was answered after `sent` may have
    /// run after it (and shortened the lease): the renewal proves nothing beyond
    /// it. One on its way (or never answered) to `t` may run after it too, but
    /// no earlier than `sent`: `t` from then. A lease past its last confirmed
    /// end stays ended: its holder may have been told so.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        self.silent.store(false, Ordering::Release);
        if self.ended() {
            return;
        }
        let mut s = self.sched.lock();
        s.retry_at = None;
        if s.set_at.is_some_and(|at| sent < at) {
            return;
        }
        // Sent a command's longest delay after one of them, it ran after it.
        s.setting.retain(|&(at, _)| sent < at + LATE);
        let bound = lease_end(sent, s.shortest(ttl));
        if bound > self.safe_until() {
            self.end.store(since_epoch(bound), Ordering::Release);
        }
        metrics::incr(Counter::AutoRenewals);
    }

    /// The holder's refresh to `ttl` is on its way (sent at `sent`). Of those
    /// on their way (or never answered), the shortest counts. (A watch that
    /// only follows failovers is not lowered: see `Hold::safe_until`.)
    fn setting(&self, sent: Instant, ttl: Duration) {
        let mut s = self.sched.lock();
        s.pend(sent, ttl);
        s.ttl = ttl;
        let bound = lease_end(sent, ttl);
        if self.renew && bound < self.safe_until() {
            self.end.store(since_epoch(bound), Ordering::Release);
        }
    }

    /// The holder's refresh was answered (see `Hold::refreshed`). Its holder
    /// counts a refresh that found the lease gone. Answered, it voided every
    /// earlier one; but its own first run, whose link broke, may still come (and
    /// after a renewal): what is `left` of the hold's unanswered ones is kept
    /// on its way, in the same step (a renewal confirmed in between would count
    /// its whole ttl).
    fn set(
        &self,
        sent: Instant,
        ttl: Duration,
        extended: Option<bool>,
        left: &[(Token, Instant, Duration)],
    ) {
        let mut s = self.sched.lock();
        match extended {
            Some(true) if !self.ended() => {
                s.setting.clear();
                s.pend_all(left);
                s.set_at = Some(Instant::now());
                s.retry_at = None;
                // Answered too late to count on (`Lock::refresh` sends it
                // again): a watch that only follows failovers keeps what it
                // was told, and the hold's own bound stops counting on it.
                let end = lease_end(sent, ttl);
                if self.renew || end > Instant::now() {
                    self.end.store(since_epoch(end), Ordering::Release);
                }
            }
            Some(true) => s.setting.clear(),
            Some(false) => {
                s.setting.clear();
                let _ = self.state.compare_exchange(
                    WATCHING,
                    LOST,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    /// Has a renewing watch look after `hold`.
    fn watch(hold: &mut Hold) -> Arc<Watch> {
        watch_with(hold, true, 0)
    }

    /// Has a watch look after `hold`: one that renews it, or one that only
    /// follows failovers, on the master of failover generation `generation`.
    fn watch_with(hold: &mut Hold, renew: bool, generation: u64) -> Arc<Watch> {
        let w = Arc::new(Watch::new(
            (b"k".to_vec(), b"h".to_vec()),
            hold,
            Kind::Lock,
            None,
            renew,
            generation,
        ));
        hold.watch = Some(w.clone());
        w
    }

    fn watched(ttl: Duration) -> (Hold, Arc<Watch>) {
        let mut hold = Hold::new(Token::generate(), 0, ttl, Instant::now());
        let w = watch(&mut hold);
        (hold, w)
    }

    #[test]
    fn a_renewal_never_counts_past_a_refresh_on_its_way_or_answered_after_it() {
        let (mut hold, w) = watched(S * 30);
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(10);
        // The holder shortens its lease to 5 s while a renewal to 30 s is out.
        hold.refreshing(t1, S * 5);
        assert!(hold.safe_until() <= lease_end(t1, S * 5));
        w.renewed(t0, S * 30);
        assert!(
            hold.safe_until() <= lease_end(t1, S * 5),
            "a renewal answered while the refresh is out counts for no more than it"
        );
        hold.refreshed(t1, S * 5, Some(true));
        assert_eq!(hold.safe_until(), lease_end(t1, S * 5));
        // A renewal sent before the refresh was answered may have run before it.
        w.renewed(t0, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t1, S * 5));
        // One sent after it ran after it, and only ever lengthens.
        let t2 = Instant::now() + Duration::from_millis(20);
        w.renewed(t2, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t2, S * 30));
        // A refresh with no answer may still run, after any renewal: a renewal
        // proves its ttl from its own start, no more.
        let t3 = t2 + Duration::from_millis(5);
        hold.refreshing(t3, S * 2);
        hold.refreshed(t3, S * 2, None);
        assert!(hold.safe_until() <= lease_end(t3, S * 2));
        let t4 = t3 + Duration::from_millis(5);
        w.renewed(t4, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t4, S * 2));
        // A second one, longer, does not lift the first's bound.
        hold.refreshing(t4, S * 60);
        hold.refreshed(t4, S * 60, None);
        let t5 = t4 + Duration::from_millis(5);
        w.renewed(t5, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t5, S * 2));
    }

    /// A refresh whose first run's link broke, answered on its second: the first
    /// may still come, after a renewal too, and leave its ttl from then. Until
    /// the next refresh voids it, a renewal counts no more than that from its own
    /// start, and the next one is due as for that ttl.
    #[test]
    fn an_answered_refresh_whose_first_run_may_come_bounds_renewals() {
        let (mut hold, w) = watched(S * 30);
        let t0 = Instant::now();
        hold.refreshing(t0, S * 2);
        hold.unanswered_refreshes
            .push((Token::generate(), t0, S * 2));
        hold.refreshed(t0, S * 2, Some(true));
        let t1 = t0 + Duration::from_millis(10);
        w.renewed(t1, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t1, S * 2));
        assert!(
            w.due() <= lease_end(t1, S * 2) - S * 4 / 3,
            "renewed as for 2 s"
        );
        // Sent a command's longest delay after it, a renewal ran after it.
        let late = t0 + LATE;
        w.renewed(late, S * 30);
        assert_eq!(hold.safe_until(), lease_end(late, S * 30));
    }

    /// Carried to a hold made anew (a conversion's grant at `t1`), an unanswered
    /// refresh counts from then: one that arrives after the grant arrives no
    /// earlier (before, a refresh sent long ago to a short ttl left the new hold
    /// expired at once). One sent a command's longest delay ago is dropped.
    #[test]
    fn refreshes_carried_to_a_new_hold_count_from_its_grant() {
        let t0 = Instant::now();
        let mut old = Hold::new(Token::generate(), 0, S * 30, t0);
        old.unanswered_refreshes
            .push((Token::generate(), t0, S * 5));
        if let Some(long_ago) = t0.checked_sub(LATE + S) {
            old.unanswered_refreshes
                .push((Token::generate(), long_ago, S));
        }
        let t1 = t0 + S * 10;
        let mut hold = Hold::new(old.token.clone(), 0, S * 30, t1);
        hold.carry_unanswered(&old);
        assert_eq!(hold.unanswered_refreshes.len(), 1, "the old one dropped");
        assert_eq!(hold.safe_until(), lease_end(t1, S * 5));
        let w = watch(&mut hold);
        assert_eq!(w.safe_until(), lease_end(t1, S * 5), "not expired at once");
    }

    /// A conversion's grant makes a fresh hold of the same token: a refresh of
    /// the old one that got no answer may still run, and cut the lease. The new
    /// hold, and its watch, count on no more than it may leave; a renewal proves
    /// no more than its ttl from the renewal's own start, until the holder's next
    /// refresh is answered.
    #[test]
    fn a_refresh_unanswered_before_a_conversion_bounds_the_converted_hold() {
        let t0 = Instant::now();
        let mut hold = Hold::new(Token::generate(), 0, S * 30, t0);
        hold.unanswered_refreshes
            .push((Token::generate(), t0, S * 2));
        assert_eq!(hold.safe_until(), lease_end(t0, S * 2), "unwatched");
        let w = watch(&mut hold);
        assert_eq!(hold.safe_until(), lease_end(t0, S * 2), "watched");
        let t = t0 + Duration::from_millis(5);
        w.renewed(t, S * 30);
        assert_eq!(hold.safe_until(), lease_end(t, S * 2), "renewed");
        let t1 = t0 + Duration::from_millis(10);
        hold.refreshing(t1, S * 60);
        hold.unanswered_refreshes.clear();
        hold.refreshed(t1, S * 60, Some(true));
        assert_eq!(
            hold.safe_until(),
            lease_end(t1, S * 60),
            "voided by the next"
        );
    }

    /// Two refreshes left unanswered, a short one and a long one sent later:
    /// each bounds renewals until a command's longest delay after its own send.
    /// Before, the watch kept one (last send, shortest ttl): the short ttl
    /// bounded renewals until a minute after the long one.
    #[test]
    fn each_unanswered_refresh_bounds_renewals_until_it_cannot_arrive() {
        let (mut hold, w) = watched(S * 30);
        let t0 = Instant::now();
        hold.refreshing(t0, S * 2);
        hold.refreshed(t0, S * 2, None);
        let t1 = t0 + S * 50;
        hold.refreshing(t1, S * 60);
        hold.refreshed(t1, S * 60, None);
        // (Renewals extend to the last refresh's ttl.)
        assert_eq!(w.ttl(), S * 60);
        let t2 = t0 + S * 55;
        w.renewed(t2, w.ttl());
        assert_eq!(hold.safe_until(), lease_end(t2, S * 2), "the short one");
        let t3 = t0 + LATE + S;
        w.renewed(t3, w.ttl());
        let end = lease_end(t3, S * 60);
        assert_eq!(hold.safe_until(), end, "the short one gone");
        assert_eq!(w.due(), end - S * 40, "due as for 60 s");
    }

    /// A refresh answered only after the end it set had passed (a stall): a
    /// watch that only follows failovers is not ended by it (`Lock::refresh`
    /// sends the refresh again); the hold's own bound stops counting on it.
    /// A renewing watch counts the answer, and ends (review, stop 55).
    #[test]
    fn a_refresh_answered_past_its_end_ends_only_a_renewing_watch() {
        let long_ago = Instant::now()
            .checked_sub(S * 10)
            .expect("a monotonic clock 10 s past its origin");
        for renew in [false, true] {
            let mut hold = Hold::new(Token::generate(), 0, S * 30, Instant::now());
            let w = watch_with(&mut hold, renew, 1);
            hold.refreshed(long_ago, S * 2, Some(true));
            assert!(hold.safe_until() <= Instant::now(), "renew {renew}");
            assert_eq!(w.ended(), renew, "renew {renew}");
        }
    }

    /// A hold whose watch the watchdog ended (lost) while its bound was still
    /// ahead has run out. (An ended watch's `safe_until` is "now" as it is
    /// read: a `now` read before it found it still ahead, and a touch run again
    /// took a lost hold for one that could not have run out; review, stop 57.)
    #[test]
    fn a_lost_watch_has_run_out_though_its_bound_is_ahead() {
        let mut hold = Hold::new(Token::generate(), 0, S * 30, Instant::now());
        let w = watch_with(&mut hold, true, 1);
        assert!(!hold.run_out());
        w.lose();
        assert!(hold.run_out());
    }

    /// A watch that only follows failovers (a Sentinel endpoint, no renewals)
    /// ends with the lease. A refresh that got no answer bounds the hold, but
    /// does not end the watch: the hold is not lost, and the holder's next
    /// refresh (owner-checked) may find it still ours, as for a hold nobody
    /// watches. Before, the watch expired on it, and refresh() said false.
    #[test]
    fn an_unanswered_refresh_never_ends_a_watch_that_only_follows_failovers() {
        let check = |hold: &mut Hold| watch_with(hold, false, 1);
        let long_ago = Instant::now()
            .checked_sub(S * 10)
            .expect("a monotonic clock 10 s past its origin");
        // Its own refresh, unanswered (as `Lease::refresh` keeps it).
        let mut hold = Hold::new(Token::generate(), 0, S * 30, long_ago);
        let w = check(&mut hold);
        hold.refreshing(long_ago, S * 2);
        hold.unanswered_refreshes
            .push((Token::generate(), long_ago, S * 2));
        hold.refreshed(long_ago, S * 2, None);
        assert!(hold.safe_until() <= lease_end(long_ago, S * 2));
        assert!(!hold.lost() && !w.ended(), "not lost");
        let now = Instant::now();
        hold.refreshing(now, S * 30);
        hold.unanswered_refreshes.clear();
        hold.refreshed(now, S * 30, Some(true));
        assert_eq!(hold.safe_until(), lease_end(now, S * 30), "ours again");
        // Carried to a converted hold.
        let mut old = Hold::new(Token::generate(), 0, S * 30, long_ago);
        old.unanswered_refreshes
            .push((Token::generate(), long_ago, S * 2));
        let mut hold = Hold::new(old.token.clone(), 0, S * 30, long_ago);
        hold.carry_unanswered(&old);
        let w = check(&mut hold);
        assert!(hold.safe_until() <= lease_end(long_ago, S * 2));
        assert!(!hold.lost() && !w.ended(), "a converted hold not lost");
    }

    #[test]
    fn a_forked_child_never_takes_its_parents_watch_lock() {
        let (mut hold, w) = watched(S * 30);
        // As seen in a child: the watch is another process's, and its mutex may
        // have been copied locked.
        let foreign = Arc::new(Watch {
            pid: w.pid.wrapping_add(1),
            ..Watch::new(
                (b"k".to_vec(), b"h".to_vec()),
                &hold,
                Kind::Lock,
                None,
                true,
                0,
            )
        });
        hold.watch = Some(foreign.clone());
        let guard = foreign.sched.lock();
        let done = std::thread::spawn(move || {
            let now = Instant::now();
            hold.refreshing(now, S * 10);
            hold.refreshed(now, S * 10, Some(true));
            (hold.safe_until(), hold.lost())
        });
        let deadline = Instant::now() + S * 5;
        while !done.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the child waited for its parent's mutex"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(guard);
        let (until, lost) = done.join().unwrap();
        assert!(!lost);
        assert!(
            until > Instant::now() + S * 9,
            "the child counts on its own bound"
        );
    }

    /// A failover check that finds the hold gone counts `failover_lost` only
    /// when that is what ended it (`lose` true): not for a hold let go, run
    /// out or found lost before.
    #[test]
    fn only_a_watched_hold_is_lost_to_a_failover() {
        let (_hold, w) = watched(S);
        assert!(w.lose(), "watched until then");
        assert!(!w.lose(), "lost already");
        let (_hold, w) = watched(S);
        w.stop();
        assert!(!w.lose(), "let go");
        let mut hold = Hold::new(Token::generate(), 0, S, Instant::now() - S * 2);
        let w = watch_with(&mut hold, false, 1);
        assert!(w.watching(), "run out, unseen yet");
        assert!(!w.lose(), "run out");
        assert!(w.ended());
    }
}
