//! One `DistributedLock`: its hold, and what it still has to settle with Redis.
//!
//! Two things can be left open by a call that Redis did not answer in time: an
//! acquire (its token may hold the lease, or a place in the queue) and a release
//! (it may still run). Every later call settles them first, so a token is never
//! used again once its release was sent, and an acquire's lease is never left
//! to nobody. A release that failed any other way, and a conversion (upgrade,
//! downgrade) that ended in an error, leave the hold the same way: let go, its
//! release completed by the next call.
//!
//! A hold the watchdog gave up on (a renewal it could not confirm in time, a
//! failover) is no longer counted on, but is kept until released: Redis may still
//! keep it, and only the owner-checked release hands it on at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::error::{Error, Result};
use crate::core::hold::{self, Kind};
use crate::core::lease::{Got, Hold, Lease, Owned, Token, Want};
use crate::core::metrics::{self, Counter};
use crate::core::request;
use crate::core::topology;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub struct Lock {
    id: u64,
    /// The process that took the hold (or left the acquire unresolved): a
    /// forked child never releases its parent's lock by dropping its copy, and
    /// always releases one it took itself.
    pid: u32,
    lease: Arc<Lease>,
    ttl: Duration,
    hold: Option<Hold>,
    /// An acquire whose outcome Redis could not confirm yet.
    unresolved: Option<Token>,
    /// `hold` is let go: its release failed, or is owed after a conversion
    /// that ended in an error. It is never counted on again; the next call (or
    /// the object's end) completes the release.
    let_go: bool,
    /// ... and a release of it timed out: it may have run, or may still run.
    release_sent: bool,
    /// A refresh of the hold of this token to this ttl got no answer: it may
    /// still run, and shorten the lease (see `settle_refresh`).
    refresh_sent: Option<(Token, Duration)>,
    /// Every hold is renewed by the watchdog until it ends.
    auto_renew: bool,
    /// A lock (taken alone, or shared by readers), or a semaphore of this many
    /// permits.
    permits: Option<u32>,
    /// How many permits a semaphore's hold takes at once (its weight): the next
    /// acquire's, and the current hold's (`None`: a restored hold's, unknown).
    weight: Option<u32>,
    /// A hold restored without asking Redis (see `restore`): whether it is held,
    /// alone or shared, and its fence are asked before anything depends on them.
    unverified: bool,
    /// The token of the hold last detached from this object (see `detach`).
    detached: Option<Token>,
    /// The token this object was given (`restored`): out there already, so
    /// `detach` hands it back whatever a refresh left (`unsettled_refresh`).
    given: Option<Token>,
    /// The last re-send of an unanswered refresh got no answer either:
    /// getToken() does not send it again (`settle_refresh`).
    resend_failed: bool,
}

impl Lock {
    pub fn new(lease: Lease, ttl: Duration) -> Lock {
        Lock {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            pid: crate::core::pid::current(),
            lease: Arc::new(lease),
            ttl,
            hold: None,
            unresolved: None,
            let_go: false,
            release_sent: false,
            refresh_sent: None,
            auto_renew: false,
            permits: None,
            weight: Some(1),
            unverified: false,
            detached: None,
            given: None,
            resend_failed: false,
        }
    }

    /// A semaphore of `limit` permits: each hold is one permit, a lease of its own.
    pub fn semaphore(lease: Lease, limit: u32, ttl: Duration) -> Lock {
        let mut lock = Lock::new(lease, ttl);
        lock.permits = Some(limit);
        lock
    }

    /// How many permits the semaphore's hold takes (its weight), when it holds
    /// one: a restored hold's is asked of Redis first.
    pub fn held_weight(&mut self) -> Result<Option<u32>> {
        self.settled()?;
        Ok(self.hold().and(self.weight))
    }

    /// Takes `weight` permits of a semaphore at once, as one hold (see
    /// `acquire`). A hold it has already is extended, whatever its weight: the
    /// caller checks the weight it asks for is the one held (`held_weight`).
    pub fn acquire_permits(&mut self, wait: Duration, weight: u32) -> Result<bool> {
        self.settled()?;
        if self.hold().is_none() {
            self.weight = Some(weight);
        }
        self.acquire(wait)
    }

    /// A lock object for a hold taken elsewhere (another object, another
    /// process) by `token` (see `restored`).
    pub fn restore(lease: Lease, ttl: Duration, token: Token, auto_renew: bool) -> Result<Lock> {
        Lock::new(lease, ttl)
            .with_auto_renew(auto_renew)
            .restored(token)
    }

    /// This object (a lock or a semaphore, not holding anything yet) for a hold
    /// taken elsewhere by `token`, believed held until a call says otherwise.
    /// Nothing is asked now: release() and refresh() are owner-checked anyway
    /// (one round trip each, as in the process that took it), and what depends
    /// on more (a conversion, the fencing token, renewals) asks first. With
    /// auto-renewal, whose renewals need the lease's end, Redis is asked at once.
    pub fn restored(mut self, token: Token) -> Result<Lock> {
        // No lease counted on until asked; not watched meanwhile (a watch of
        // this zero-length hold, with auto-renewal, ended at once, counted as a
        // lost lock: review, stop 57). `ask_restored` watches what Redis says.
        self.given = Some(token.clone());
        let hold = Hold::found(token, 0, self.ttl, Instant::now(), Some(Duration::ZERO));
        self.pid = crate::core::pid::current();
        self.hold = Some(hold);
        self.track();
        self.unverified = true;
        self.weight = None;
        if self.auto_renew {
            if let Err(e) = self.verify() {
                // The caller gets no object: the hold stays its giver's (or the
                // next restore's), not released as this one goes.
                // Let go of unasked (what the ask refreshed, with
                // wait_replicas, it never shortened).
                self.give_away();
                return Err(e);
            }
        }
        Ok(self)
    }

    /// Settles what earlier calls left open (see `settle`), then asks Redis
    /// what a restored hold is: what a call that counts on our hold, or takes a
    /// new one, starts from.
    fn settled(&mut self) -> Result<()> {
        self.settle(true)?;
        self.verify()
    }

    /// Asks Redis what a restored hold is (see `restore`), once.
    fn verify(&mut self) -> Result<()> {
        if self.unverified {
            self.ask_restored()?;
        }
        Ok(())
    }

    /// What Redis says of a restored hold: held or not, alone or shared, its
    /// fence and lease, which the hold takes on.
    fn ask_restored(&mut self) -> Result<Option<Owned>> {
        // A give-back of this token (a WAIT shortfall's) or a release (a dropped
        // object's) that was sent may still run, or is due to at this process's
        // next call: held now or not, it is never counted on again.
        self.drop_owed();
        let Some(token) = self.hold.as_ref().map(|h| h.token.clone()) else {
            self.unverified = false;
            return Ok(None);
        };
        let generation = topology::generation(&self.lease.endpoint);
        let asked = Instant::now();
        let found = self.lease.inspect_replicated(&token, self.ttl)?;
        self.unverified = false;
        // Replaced, not converted: the unwatched one goes first. The same token,
        // so the same process's to release.
        let pid = self.pid;
        let old = self.hold.take();
        let hold = found.as_ref().map(|o| {
            let mut hold = Hold::found(token, o.fence, self.ttl, asked, o.left);
            hold.shared = o.shared;
            // The token's refreshes that got no answer may still arrive.
            if let Some(old) = &old {
                hold.found_again(old);
            }
            hold
        });
        if let (Some(_), Some(o)) = (self.permits, &found) {
            self.weight = Some(o.weight);
        }
        self.set_hold(hold, generation);
        self.pid = pid;
        self.track();
        Ok(found)
    }

    /// Lets go of a hold (a restored one) whose token this process still owes
    /// a release or give-back: that may still run, or is due at the next call,
    /// and would free the lease under whoever counted on it, here (a refresh)
    /// or wherever the token is handed (detach(), getToken()).
    fn drop_owed(&mut self) {
        if self
            .hold
            .as_ref()
            .is_some_and(|h| self.lease.left_to_settle(&h.token))
        {
            self.unverified = false;
            self.set_hold(None, 0);
        }
    }

    /// Stops owning the hold here: no release when this object goes or the
    /// request ends, no renewal. It lives on until its ttl, or until released by
    /// its token (see `restore`). Its token, if there was a hold; an error, the
    /// hold kept here, while a refresh of it may still arrive
    /// (`unsettled_refresh`).
    pub fn detach(&mut self) -> Result<Option<Token>> {
        // A hold let go is not handed out: its release is owed, or may still
        // run (and free the lease under whoever restores the token).
        if self.let_go {
            return Ok(None);
        }
        self.drop_owed();
        self.settle_refresh(true);
        self.unsettled_refresh()?;
        Ok(self.give_away())
    }

    /// A refresh of the hold that Redis did not confirm (no answer, or too few
    /// replicas), sent again and not confirmed again (`settle_refresh`), may
    /// still reach Redis (a lossy network) and end the lease sooner than
    /// whoever the token is handed to reads it; their refreshes cannot void it
    /// (they do not know it): two holders. The token of a hold this object
    /// took is not handed out then (review, stop 65: it went as it was). One it
    /// was given (`restored`) is out there already: handed back as it is (a
    /// bridge's restore, refresh and detach; kept, its hold would be released
    /// under its owner as this object goes).
    fn unsettled_refresh(&mut self) -> Result<()> {
        let now = Instant::now();
        let given = self.given.as_ref();
        if self
            .hold
            .as_mut()
            .is_some_and(|h| Some(&h.token) != given && h.refresh_may_arrive(now))
        {
            return Err(Error::Connection(format!(
                "The token was not handed out: a refresh of the hold that Redis at {} did \
                 not confirm may still arrive and shorten the lease under whoever restores \
                 it; the hold stays with this object",
                self.lease.endpoint.location()
            )));
        }
        Ok(())
    }

    /// Stops owning the hold here, as it is (`detach`).
    fn give_away(&mut self) -> Option<Token> {
        let hold = self.hold.take()?;
        hold.stop_watch();
        request::untrack(self.id);
        self.release_sent = false;
        self.unverified = false;
        self.detached = Some(hold.token.clone());
        Some(hold.token)
    }

    /// Before the token leaves this object (`detach`, getToken()): a refresh of
    /// its hold that got no answer may still run (a lossy network delivers it
    /// late), and end the lease sooner than whoever restores the token reads it
    /// then. It is sent again first: answered, the re-send voids it (refresh.lua),
    /// and the restorer reads the lease as the re-send left it. Unanswered
    /// again, detach() does not hand the token out (`unsettled_refresh`:
    /// before stop 65 it went as it was), and sends it again when called
    /// again; getToken() (`again` false) hands it out as it is, and does not
    /// send it again (it is called to log the token, too: while Redis does not
    /// answer, it must not wait for it on every call).
    pub fn settle_refresh(&mut self, again: bool) {
        // A hold let go is not handed out (and its owed release is not this
        // getter's to complete).
        if self.let_go || (self.resend_failed && !again) {
            return;
        }
        // Sent again until one is answered whose own first run cannot come
        // late (its link did not break), a few times at most; once unanswered,
        // not again in this call (while Redis does not answer, a getter waits
        // for one timeout, not three).
        let inherited = self.pid != crate::core::pid::current();
        for _ in 0..3 {
            let Some((token, ttl)) = self.refresh_sent.clone() else {
                return;
            };
            let Some(hold) = self.hold.as_mut().filter(|h| h.token == token) else {
                self.refresh_sent = None;
                return;
            };
            // Refused unsent (see `Lease::refresh`): left for a later call.
            if hold.unanswered_full(Instant::now()) {
                return;
            }
            // A hold the watchdog gave up on is not refreshed for its holder
            // (refresh() says false unsent), but Redis may still keep it, and
            // its token leaves all the same: the re-send voids the unanswered
            // one, counted on by nobody. (Review, stop 57: unsent, the late
            // refresh cut the lease under the restorer's later refresh.)
            // Unanswered again: owed still, to the next detach().
            if hold.lost() {
                if self.lease.refresh_as(hold, ttl, inherited).is_err() {
                    self.resend_failed = true;
                    return;
                }
                self.refresh_sent = owed_resend(hold, ttl);
                self.resend_failed = false;
                continue;
            }
            let answered = self.refresh(ttl).is_ok();
            self.resend_failed = !answered;
            if !answered {
                return;
            }
        }
        // Three answered, each leaving a first run that may come late (its
        // link broke): owed still (`owed_resend`), to the next getter.
    }

    /// getToken(): the token of the hold this object counts on, its refresh
    /// left unanswered sent again first (`settle_refresh`, best effort: the
    /// object still owns the hold). A lost hold's is not handed out here, so
    /// nothing is sent for it (detach() does both).
    pub fn current_token(&mut self) -> Option<Token> {
        self.drop_owed();
        self.hold()?;
        self.settle_refresh(false);
        self.hold().map(|h| h.token.clone())
    }

    /// Whether `token` is the hold last detached from this object, and Redis
    /// says it still holds the lease (a token is granted once: holding now, it
    /// held throughout).
    pub fn detached_alive(&self, token: &Token) -> Result<Option<bool>> {
        if self.detached.as_ref() != Some(token) {
            return Ok(None);
        }
        self.token_alive(token).map(Some)
    }

    /// Whether Redis says `token` holds the lease now (a token is granted once:
    /// holding now, it held throughout).
    pub fn token_alive(&self, token: &Token) -> Result<bool> {
        Ok(self.lease.inspect(token)?.is_some())
    }

    /// Has the watchdog renew every hold of this lock (every ttl/3, until it ends).
    pub fn with_auto_renew(mut self, on: bool) -> Lock {
        self.auto_renew = on;
        self
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The hold we believe we have (Redis may have let it expire since), unless
    /// the watchdog found it lost or we let it go (see `let_go`).
    pub fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref().filter(|h| !h.lost() && !self.let_go)
    }

    pub fn token(&self) -> Option<&Token> {
        self.hold.as_ref().map(|h| &h.token)
    }

    /// What we hold (`Some(shared)`), as far as we know; a restored hold is
    /// asked about first, for its kind is unknown until then.
    pub fn holding(&mut self) -> Result<Option<bool>> {
        // A hold let go, or an acquire left unresolved, is none to nest in: the
        // caller's acquire() settles it, and releases what it then holds.
        if self.let_go || self.unresolved.is_some() {
            return Ok(None);
        }
        self.verify()?;
        Ok(self.hold().map(|h| h.shared))
    }

    /// Takes `hold` (taken or found while the failover generation was
    /// `generation`) as ours, watched as it needs.
    fn set_hold(&mut self, mut hold: Option<Hold>, generation: u64) {
        let old = self.hold.as_ref().map(|h| &h.token);
        if hold.as_ref().is_some_and(|h| Some(&h.token) != old) {
            // A hold this process took (or found): it is this process's to release.
            self.pid = crate::core::pid::current();
        }
        if let Some(old) = &self.hold {
            if hold.as_ref().is_none_or(|h| h.token != old.token) {
                old.stop_watch();
            }
        }
        if let Some(h) = &mut hold {
            self.lease.watch(h, Kind::Lock, self.auto_renew, generation);
        }
        self.hold = hold;
        self.track();
    }

    /// The request's end releases the hold only in the process whose it is: a
    /// forked child that used its parent's hold (a refresh, a fencing token)
    /// must not release it as its own request ends.
    fn track(&self) {
        match &self.hold {
            Some(h) if self.pid == crate::core::pid::current() => {
                request::track(self.id, &self.lease, h)
            }
            _ => {
                request::untrack(self.id);
            }
        }
    }

    /// `settle` for an acquire left unresolved: resolve.lua says whether `token`
    /// holds the lock, and a hold it has is adopted. With wait_replicas the
    /// acquire's WAIT never ran: the hold is extended and waited for (short of
    /// it, not granted, and not left in Redis either). As in
    /// `Lease::confirm_grant`, when that ran on a master we learned of after
    /// resolve.lua answered, which may have granted the token with a fence of its
    /// own, that master is asked in turn, until the master stays the same.
    fn adopt_unresolved(&mut self, token: Token) -> Result<()> {
        let ep = self.lease.endpoint.clone();
        let mut generation = topology::generation(&ep);
        loop {
            // The lease, if ours, was set before we asked: it ends no earlier than
            // `asked` plus what Redis says is left; renewals extend it to the ttl.
            let asked = Instant::now();
            let found = match self.lease.resolve(&token, self.ttl) {
                Ok(found) => found,
                Err(e) => return Err(self.let_go_settled(e)),
            };
            self.unresolved = None;
            let Some(found) = found else {
                // Gone from a master learned of since an earlier pass adopted it.
                if let Some(hold) = self.hold.as_ref().filter(|h| h.token == token) {
                    hold.count_lost(Kind::Lock);
                }
                self.set_hold(None, 0);
                return Ok(());
            };
            let mut hold = Hold::found(token.clone(), found.fence, self.ttl, asked, found.left);
            hold.shared = found.shared;
            // Asked again on a new master: the last pass's refresh may still
            // arrive; it is the same hold, counted once.
            match self.hold.as_ref().filter(|h| h.token == token) {
                Some(old) => hold.found_again(old),
                None => self.lease.count_acquired(&hold),
            }
            self.set_hold(Some(hold), generation);
            if ep.wait.is_none() {
                return Ok(());
            }
            match self.refresh(self.ttl) {
                Ok(true) => {}
                // Not ours (any more) where the extension ran. Where resolve.lua
                // ran, the token is void and out of the queue; a master learned
                // of since may still queue it, to hand it the lock for nobody:
                // it leaves for good there.
                Ok(false) => {
                    if topology::generation(&ep) != generation {
                        self.lease.abandon_or_defer(token, self.ttl, false);
                    }
                    return Ok(());
                }
                Err(e) => return Err(self.let_go_settled(e)),
            }
            let now = topology::generation(&ep);
            if now == generation {
                return Ok(());
            }
            generation = now;
        }
    }

    /// `adopt_unresolved` failed with `e` after it adopted a hold (its
    /// replication, or the new master's answer, unknown): the hold is not granted,
    /// and not left in Redis either (its release, if it fails, left to this
    /// process's next call). Before any adoption it keeps the token unresolved.
    fn let_go_settled(&mut self, e: Error) -> Error {
        if let Some(hold) = self.hold.clone() {
            self.lease.release_or_defer(&hold, false, false);
            self.set_hold(None, 0);
        }
        e
    }

    /// Settles what earlier calls left open: an acquire's lease is adopted (or its
    /// token voided); with `release`, a timed-out release is completed, so its
    /// token is never used again (the late release could otherwise delete the
    /// lease we believe we hold).
    fn settle(&mut self, release: bool) -> Result<()> {
        // An acquire the parent left unresolved is the parent's to settle: a
        // forked child adopting it would hold the lock beside the parent, and
        // release it as the child ends.
        if self.pid != crate::core::pid::current() {
            self.unresolved = None;
        }
        // As in `ask_restored`: a token left to be given back is that leftover's
        // to settle, not ours to adopt.
        if self
            .unresolved
            .as_ref()
            .is_some_and(|t| self.lease.left_to_settle(t))
        {
            self.unresolved = None;
        }
        if let Some(token) = self.unresolved.clone() {
            self.adopt_unresolved(token)?;
        }
        if release && self.let_go {
            if let Some(hold) = self.hold.clone() {
                if let Err(e) = self.lease.release(&hold, self.release_sent) {
                    self.release_sent |= matches!(e, Error::Unresolved { .. });
                    return Err(e);
                }
            }
            self.let_go = false;
            self.release_sent = false;
            self.set_hold(None, 0);
        }
        Ok(())
    }

    /// Whether anyone holds the lock (see `Lease::held`).
    pub fn held(&self) -> Result<bool> {
        self.lease.held()
    }

    /// Whether our hold is shared (a reader's, or a permit).
    pub fn shared(&self) -> bool {
        self.hold().is_some_and(|h| h.shared)
    }

    /// Extends a hold we believe we have to the full ttl. False when there is
    /// none, or Redis says it was lost (and then we forget it).
    pub fn renew_held(&mut self) -> Result<bool> {
        self.refresh(self.ttl)
    }

    /// True when we hold the lock alone (a hold we had is extended to the full ttl,
    /// as Symfony's acquire() does; a reader's hold is upgraded, with nobody let in
    /// between); false when others keep it past `wait` (a reader keeps its read
    /// hold). For a semaphore: one permit.
    pub fn acquire(&mut self, wait: Duration) -> Result<bool> {
        // An acquire left unresolved (of either kind) is settled first: the hold
        // it finds is then converted, not taken for what this call asks for.
        self.settled()?;
        let want = match self.permits {
            Some(n) => Want::Permit(n, self.weight.unwrap_or(1)),
            None => Want::Alone,
        };
        let upgrade = want == Want::Alone && self.hold().is_some_and(|h| h.shared);
        if upgrade {
            return self.convert(Want::Upgrade, wait);
        }
        if self.renew_held()? {
            return Ok(true);
        }
        self.take(want, wait)
    }

    /// True when we hold the lock as a reader, shared with other readers (a
    /// hold we had is extended to the full ttl; a writer's hold becomes a read
    /// hold, with nobody let in between); false when a writer keeps it (or is
    /// first in line) past `wait`.
    pub fn acquire_read(&mut self, wait: Duration) -> Result<bool> {
        self.settled()?;
        if self.hold().is_some_and(|h| !h.shared) {
            return self.convert(Want::Downgrade, wait);
        }
        if self.renew_held()? {
            return Ok(true);
        }
        self.take(Want::Shared, wait)
    }

    /// Takes a fresh hold (`want`), after letting go of one the watchdog gave up
    /// on: Redis may still keep it, and we would queue behind ourselves.
    fn take(&mut self, want: Want, wait: Duration) -> Result<bool> {
        if self.hold.is_some() {
            self.release()?;
        }
        let generation = topology::generation(&self.lease.endpoint);
        match self.lease.acquire_as(self.ttl, wait, want, None) {
            Ok(Got::Held(hold)) => {
                self.set_hold(Some(hold), generation);
                Ok(true)
            }
            Ok(Got::Busy | Got::Lapsed) => {
                self.set_hold(None, generation);
                Ok(false)
            }
            Err(Error::Unresolved { message, token }) => {
                self.pid = crate::core::pid::current();
                self.unresolved = Some(token.clone());
                Err(Error::Unresolved { message, token })
            }
            Err(e) => Err(e),
        }
    }

    /// Converts our hold (same token) into what `want` asks for: an upgrade of a
    /// reader, or a downgrade of a writer. False (for an upgrade) when the other
    /// readers keep it past `wait`, or another reader waits to upgrade: our read
    /// hold stays. False too when our hold had run out: someone may have come
    /// between, and what we read (or wrote) is not protected any more; the hold is
    /// gone then. False too when it was read after a carried refresh could have
    /// ended it and could not be extended in time (`recount`): released. False
    /// in a forked child (the hold, its parent's, stays).
    fn convert(&mut self, want: Want, wait: Duration) -> Result<bool> {
        // A forked child's copy of its parent's hold is the parent's, which
        // counts on it as what it is: converted here, an upgrade would hold the
        // lock alone beside the parent reading, a downgrade let readers in
        // beside the parent writing. The hold stays as it is.
        if self.pid != crate::core::pid::current() {
            return Ok(false);
        }
        self.settle(true)?;
        let Some(token) = self.hold.as_ref().map(|h| h.token.clone()) else {
            // A release left open finished: nothing to convert, a fresh hold to
            // take (an upgrade's `Want` asks for a hold its token already has).
            let fresh = match want {
                Want::Upgrade => Want::Alone,
                Want::Downgrade => Want::Shared,
                other => other,
            };
            return self.take(fresh, wait);
        };
        // A downgrade never waits: nobody else can hold what we hold alone.
        let wait = if want == Want::Downgrade {
            Duration::ZERO
        } else {
            wait
        };
        let generation = topology::generation(&self.lease.endpoint);
        let got = match self
            .lease
            .acquire_as(self.ttl, wait, want, Some(token.clone()))
        {
            Ok(Got::Held(mut hold)) => {
                // The token's refreshes left unanswered may still arrive, and set
                // the converted hold's expiry: its next refresh (or `recount`'s
                // extension) voids them.
                if let Some(old) = &self.hold {
                    hold.carry_unanswered(old);
                }
                // Not counted on after all: the grant, counted acquired, ends.
                match self.recount(&mut hold) {
                    Ok(true) => Ok(Got::Held(hold)),
                    Ok(false) => {
                        hold.count_lost(Kind::Lock);
                        Ok(Got::Lapsed)
                    }
                    Err(e) => {
                        hold.count_lost(Kind::Lock);
                        Err(e)
                    }
                }
            }
            other => other,
        };
        match got {
            Ok(Got::Held(hold)) => {
                // The converted hold ends, let go by its holder: counted as
                // released, as the new one is as acquired.
                if let Some(old) = &self.hold {
                    old.count_released(Instant::now());
                }
                // One still unanswered is sent again before the token leaves
                // (`settle_refresh`), for the lease the conversion granted, not
                // the old refresh's.
                self.refresh_sent = owed_resend(&hold, hold.ttl);
                self.resend_failed = false;
                self.set_hold(Some(hold), generation);
                Ok(true)
            }
            Ok(Got::Busy) => Ok(false),
            Ok(Got::Lapsed) => {
                // Not counted on: the claim found the hold run out (usually
                // nothing is left to free), or `recount` could not extend the
                // converted hold in time (Redis may keep it). Released
                // owner-checked, whatever the token holds now.
                if let Some(hold) = self.hold.clone() {
                    hold.stop_watch();
                    hold.count_lost(Kind::Lock);
                    if self.lease.release_token(&hold.token).is_err() {
                        self.lease.defer(hold.token.clone(), hold.ttl);
                    }
                }
                self.set_hold(None, generation);
                Ok(false)
            }
            // Given back (a WAIT shortfall) and the give-back left to the
            // process's next call: never counted on again, by refresh(),
            // getToken() or detach() either.
            Err(e) if self.lease.left_to_settle(&token) => {
                if let Some(hold) = &self.hold {
                    hold.count_lost(Kind::Lock);
                }
                self.set_hold(None, 0);
                Err(e)
            }
            Err(e) => {
                self.let_hold_go();
                Err(e)
            }
        }
    }

    /// A converted hold carries the old hold's unanswered refreshes, which the
    /// claim could not see when it checked its grant's bound (`Lease::reconfirm`):
    /// one may still run, after the conversion, and end the lease at its own
    /// ttl. Read after that (a long wait, a slow answer), the hold is extended
    /// first, owner-checked, which voids them, and counted on from that send,
    /// twice at most. False: not ours any more, or answered too late each time.
    /// (Review, stop 55: an upgrade said true while a refresh(0.2) left
    /// unanswered could still cut the lock to 200 ms under its new writer.)
    fn recount(&self, hold: &mut Hold) -> Result<bool> {
        let ttl = hold.ttl;
        match self.in_time(hold, ttl, false, Ok(true))? {
            Some(counted) => Ok(counted),
            None => {
                metrics::incr(Counter::GrantsLapsed);
                Ok(false)
            }
        }
    }

    /// While `answer` says `hold` is extended (or was granted) but only once its
    /// lease could have ended by our clock (a slow reply, a WAIT, a stall), an
    /// owner-checked extension is sent again, twice at most, and the hold is
    /// counted on from the send answered in time. `None`: late each time. (A ttl
    /// too short to be counted on at all is never answered in time; a watch that
    /// renews and has ended takes the answer as it is: `Hold::lost`.)
    fn in_time(
        &self,
        hold: &mut Hold,
        ttl: Duration,
        inherited: bool,
        mut answer: Result<bool>,
    ) -> Result<Option<bool>> {
        for sends in 0..=2 {
            let late = matches!(answer, Ok(true))
                && hold::countable(ttl)
                && hold.safe_until() <= Instant::now();
            if !late || hold.lost() {
                return answer.map(Some);
            }
            if sends == 2 {
                return Ok(None);
            }
            answer = self.lease.refresh_as(hold, ttl, inherited);
        }
        unreachable!("the loop returns on its last pass")
    }

    /// After a conversion that ended in an error (no reply in time, too few
    /// replicas), our hold may be what it was, converted, or released (a WAIT
    /// shortfall gives the grant back), and the attempt may still be on its way
    /// to Redis: a downgrade that runs after we asked would let readers in
    /// beside a holder told it holds alone. Nothing can rule that out, so the
    /// hold is let go: never counted on again, and its release (owner-checked,
    /// it frees whatever the late attempt made of it) completed by the next
    /// call, as after a release that timed out.
    fn let_hold_go(&mut self) {
        if let Some(hold) = &self.hold {
            hold.stop_watch();
            self.let_go = true;
        }
    }

    /// True when the lock was ours throughout and is now free (or handed to the
    /// next waiter); false when we had lost it or never held it. A hold the
    /// watchdog gave up on (false: we could not count on it to the end) is
    /// released all the same: Redis may still keep it, and the next holder should
    /// not wait for its expiry.
    pub fn release(&mut self) -> Result<bool> {
        self.settle(false)?;
        let Some(hold) = self.hold.clone() else {
            return Ok(false);
        };
        if hold.unanswered() {
            // Redis stopped answering the watchdog: the delete is left to this
            // process's next call there, rather than waiting for a timeout now.
            self.lease.release_or_defer(&hold, self.release_sent, false);
            self.let_go = false;
            self.release_sent = false;
            self.set_hold(None, 0);
            return Ok(false);
        }
        match self.lease.release(&hold, self.release_sent) {
            Ok(released) => {
                self.let_go = false;
                self.release_sent = false;
                self.set_hold(None, 0);
                Ok(released && !hold.lost())
            }
            Err(e) => {
                // Let go all the same (a release that failed before it ran
                // stopped the renewals): the next call completes it.
                self.let_go = true;
                self.release_sent |= matches!(e, Error::Unresolved { .. });
                Err(e)
            }
        }
    }

    /// Sets our lease to end `ttl` from now (in a forked child, on its parent's
    /// hold, no sooner than it would). False when it was no longer ours
    /// (then we forget it), or the watchdog gave it up (then it is kept for the
    /// release, but not extended: its holder may have been told it is lost).
    pub fn refresh(&mut self, ttl: Duration) -> Result<bool> {
        self.settle(true)?;
        self.drop_owed();
        let Some(mut hold) = self.hold.clone() else {
            return Ok(false);
        };
        if hold.lost() {
            return Ok(false);
        }
        // Refused unsent (as `Lease::refresh` would): nothing of it is to be
        // sent again, and the hold stays as it was.
        if hold.unanswered_full(Instant::now()) {
            return Err(self.lease.refresh_refused());
        }
        // In a forked child, the parent's hold (see `Lease::refresh_as`).
        let inherited = self.pid != crate::core::pid::current();
        let first = self.lease.refresh_as(&mut hold, ttl, inherited);
        // Answered too late to be counted on: a watch that renews has then
        // ended (lost: false below); otherwise it is sent again (`in_time`).
        let answer = self
            .in_time(&mut hold, ttl, inherited, first)
            .and_then(|ok| ok.ok_or_else(|| self.lease.refresh_late()));
        // A run that may still come (unanswered, or a first run whose link
        // broke) is sent again before the token leaves (`settle_refresh`).
        self.refresh_sent = owed_resend(&hold, ttl);
        self.resend_failed = false;
        let ok = match answer {
            Ok(ok) => ok,
            Err(e) => {
                // Unanswered, it may still run: the bound it lowered on the copy
                // (a shorter ttl) is ours to keep, or we would count on a lease
                // longer than Redis may now have. (An error reply ran nothing.)
                self.hold = Some(hold);
                // The request's end releases this copy, with its lowered bound.
                self.track();
                return Err(e);
            }
        };
        if ok && hold.lost() {
            // Kept for its release, not counted on (see `Hold::lost`).
            self.set_hold(Some(hold), 0);
            return Ok(false);
        }
        self.set_hold(ok.then_some(hold), 0);
        Ok(ok)
    }

    /// The fencing token of our hold (assigned on the first request, one round
    /// trip); `None` when we do not hold the lock, or Redis says it was lost.
    pub fn fence(&mut self) -> Result<Option<i64>> {
        self.settled()?;
        // A shared hold (a reader, a permit) has no fencing token.
        let Some(mut hold) = self.hold.clone().filter(|h| !h.lost() && !h.shared) else {
            return Ok(None);
        };
        if hold.fence != 0 {
            return Ok(Some(hold.fence));
        }
        let fence = self.lease.fence(&mut hold)?;
        self.set_hold(fence.is_some().then_some(hold), 0);
        Ok(fence)
    }

    /// What Redis says about our hold; `None` when we do not hold the lock (or
    /// the watchdog gave it up).
    pub fn inspect(&mut self) -> Result<Option<Owned>> {
        self.settle(true)?;
        if self.unverified {
            return self.ask_restored();
        }
        let Some(token) = self.hold().map(|h| h.token.clone()) else {
            return Ok(None);
        };
        let found = self.lease.inspect(&token)?;
        if found.is_none() {
            if let Some(hold) = &self.hold {
                hold.count_lost(Kind::Lock);
            }
            self.set_hold(None, 0);
        }
        Ok(found)
    }

    /// Whether our hold is a parent process's, copied into this `pcntl_fork()`
    /// child with the object: the parent counts on it, and releases it.
    pub fn inherited(&self) -> bool {
        self.hold.is_some() && self.pid != crate::core::pid::current()
    }

    /// Lets go of whatever the lock still holds or left open (see
    /// `Lease::release_or_defer` for `teardown`). For destructors; later calls do
    /// nothing.
    pub fn close(&mut self, teardown: bool) {
        if self.pid != crate::core::pid::current() {
            return;
        }
        let still_ours = request::untrack(self.id);
        if let Some(hold) = self.hold.take() {
            // Untracked already: the request's end or a bailout guard released it.
            if still_ours {
                self.lease
                    .release_or_defer(&hold, self.release_sent, teardown);
            }
        }
        if let Some(token) = self.unresolved.take() {
            self.lease.abandon_or_defer(token, self.ttl, teardown);
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.close(false);
    }
}

/// `Lock::refresh_sent` for `hold`: one of its refreshes may still run
/// (unanswered, or a first run whose link broke), so it is sent again, to
/// `ttl`, before its token leaves (`Lock::settle_refresh`).
fn owed_resend(hold: &Hold, ttl: Duration) -> Option<(Token, Duration)> {
    (!hold.unanswered_refreshes.is_empty()).then(|| (hold.token.clone(), ttl))
}
