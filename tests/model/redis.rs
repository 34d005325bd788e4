//! Redis as the model sees it: the keys of one lease on one node (a lock, its
//! readers, or a semaphore's permits; or a session's lock and data), and the
//! Lua scripts of `src/core/scripts/` as atomic steps on them.
//!
//! Each script is a method of [`Script`] named after its `.lua` file, and each
//! function of `lib.lua` a method of the same name, with the same branches in the
//! same order, so that a reader can hold the two side by side. What is left out
//! says why where it would have been.
//!
//! Time is in ticks of one second (lib.lua's `NAP_MS`): a key lives while
//! `now < until`. Keys whose life outlasts any run of the model (the fencing
//! counter's hour, a void marker's ttl + 60 s, a token's voided refreshes
//! (kept 60 s past the lease), a revocation marker, session data with its
//! `gc_maxlifetime`) get [`FOREVER`].

use std::fmt;

use crate::slots::Slots;

pub type Time = u8;

/// An expiry past the end of every run.
pub const FOREVER: Time = Time::MAX;

/// lib.lua's `NAP_MS`: a waiter asks again at least this often.
pub const NAP: Time = 1;
/// lib.lua's `HEARD_SLACK_MS`.
pub const HEARD_SLACK: Time = 1;
/// lib.lua's `WAKE_KEEP_MS`.
pub const WAKE_KEEP: Time = 1;

/// The server clock in microseconds (Redis `TIME`), as `next_fence` reads it: one
/// clock for both nodes, strictly increasing from one call to the next. That is
/// the assumption fencing tokens rest on (README: "a server clock stepped
/// backwards" is not covered).
pub const MICROS_PER_TICK: u16 = 100;

/// A token: 128 random bits in the extension, fresh for every acquire call; here
/// the client and the number of its call.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    pub client: u8,
    pub n: u8,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}#{}", self.client, self.n)
    }
}

/// Session data: which write stored it, and every write it builds on (the
/// request that wrote it read the data those left). A write id is a bit.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Data {
    pub write: u8,
    pub lineage: u16,
}

impl Data {
    /// The bit of the write that stored it.
    pub fn bit(self) -> u16 {
        1 << self.write
    }
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w{}", self.write)
    }
}

/// The lock key's value `<token>:<fence>` and its expiry. `fence` `None` is the
/// empty fence an uncontended acquire leaves; a session's lock is `<token>:0`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockValue {
    pub token: Token,
    pub fence: Option<u16>,
    pub until: Time,
}

impl fmt::Debug for LockValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fence {
            Some(fence) => write!(f, "{:?}:{fence}<{}", self.token, self.until),
            None => write!(f, "{:?}:<{}", self.token, self.until),
        }
    }
}

/// acquire.lua's modes (ARGV[4]), with a permit's limit (ARGV[5]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// 'w': the lock alone.
    #[default]
    W,
    /// 'r': shared with other readers.
    R,
    /// 'u': alone, for a token that reads (an upgrade).
    U,
    /// 'd': shared, for a token that has it alone (a downgrade).
    D,
    /// 'p': (this many permits of a semaphore, how many at once).
    P(u8, u8),
}

/// One member of `<lock>:waiters` with its `<lock>:terms` entry. The two keys are
/// always written together (join_queue, leave_queue) and expire together, so the
/// model keeps them as one list in arrival order (an upgrade's entry goes first:
/// join_queue scores it below the first one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Waiter {
    pub token: Token,
    pub ttl: Time,
    pub deadline: Time,
    pub heard: Time,
    pub mode: Mode,
}

/// A member of `<lock>:holders` (read holds, permits), scored with the end of
/// its lease. One that ran out lingers until a script drops it (live_holders)
/// or the key expires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Shared {
    pub token: Token,
    pub until: Time,
    /// How many permits it holds (`<lock>:weights`; a reader: 1).
    pub weight: u8,
}

/// A wake-up list entry `<fence>:<payload>`: a lock's payload is empty, a
/// session's is its data (`d...`) or none (`n`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Payload {
    pub fence: u16,
    pub data: Option<Data>,
}

/// `<lock>:wake:<token>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Wake {
    pub token: Token,
    pub entries: Slots<Payload, 2>,
    pub until: Time,
}

/// The keys of one lease (and its session data) on one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Store {
    pub lock: Option<LockValue>,
    /// `<lock>:holders`, and the key's own expiry (keep_holders: the last
    /// member's end when it was last set).
    pub holders: Slots<Shared, 5>,
    pub holders_until: Time,
    /// `<lock>:fence`: the last fencing token, and its expiry.
    pub fence: Option<(u16, Time)>,
    /// `<lock>:waiters` and `<lock>:terms`; empty: neither key exists.
    pub waiters: Slots<Waiter, 3>,
    pub waiters_until: Time,
    pub wake: Slots<Wake, 4>,
    /// `<lock>:void:<token>` markers.
    pub void: Slots<Token, 6>,
    /// `<lock>:stale:<token>`: the ids (bits) of a token's refreshes that a
    /// later one voided.
    pub stale: Slots<(Token, u8), 2>,
    /// The session data (`PHPREDIS_SESSION:<id>`).
    pub data: Option<Data>,
    /// `<lock>:revoked:<nonce>` markers.
    pub revoked: Slots<u8, 2>,
    /// `<lock>:revoked`: the tokens of holds a revocation ended.
    pub ousted: Slots<Token, 3>,
    /// `<lock>:forced:<nonce>` markers, with what the run answered.
    pub forces: Slots<(u8, bool), 1>,
    /// Not a key: the tokens whose hold (or grant) a forced release took, and
    /// that hold nothing since. Their holders are told at their next call.
    pub forced: Slots<Token, 4>,
    /// `<lock>:destroyed:<token>` markers (kept past any run of the model).
    pub destroyed: Slots<Token, 2>,
    /// session_put.lua's markers (by nonce, kept past any run of the model).
    pub put: Slots<u8, 2>,
    /// Not a key: the session clients whose logout took effect in this
    /// node's history (bits: client ids), by their destroy or the revocation
    /// it fell back on. It replicates with the writes that did it.
    pub logged_out: u8,
}

impl Store {
    /// Drops what expired by `now`: Redis hides an expired key from every command
    /// and deletes it soon after, which is the same to every script.
    pub fn expire(&mut self, now: Time) {
        if self.lock.is_some_and(|l| l.until <= now) {
            self.lock = None;
        }
        if self.holders_until <= now {
            self.holders.clear();
            self.holders_until = 0;
        }
        if self.fence.is_some_and(|(_, until)| until <= now) {
            self.fence = None;
        }
        if self.waiters_until <= now {
            self.waiters.clear();
        }
        if self.waiters.is_empty() {
            self.waiters_until = 0;
        }
        self.wake.retain(|w| w.until > now);
    }
}

/// What a script answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// acquire.lua / session_open.lua `{1, fence or data}`.
    Took {
        fence: Option<u16>,
        data: Option<Data>,
    },
    /// `{2, fence or data}`: handed to us while we waited.
    Handed {
        fence: Option<u16>,
        data: Option<Data>,
    },
    /// `{0, pttl}`.
    Busy { pttl: Time },
    /// `{0, -2}`: this token was voided.
    Voided,
    /// `{-3, 0}`: an upgrade while another reader waits to upgrade.
    Refused,
    /// `{-4, 0}`: a conversion whose own hold ran out.
    Lapsed,
    /// An integer reply (release, refresh, session_save, session_revoke).
    Int(u8),
    /// resolve.lua, inspect.lua: `{pttl, fence[, data]}` when ours (`{pttl,
    /// '-'}` for a shared hold), nil otherwise.
    Owned(Option<Owned>),
    /// fence.lua: the fence, or false.
    Fence(Option<u16>),
    /// BLPOP on our wake-up list.
    Popped(Payload),
    /// session.rs `saved_before`: the master holds exactly our data (then it
    /// was touched, for the WAIT that follows).
    Found(bool),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owned {
    pub pttl: Time,
    pub fence: Option<u16>,
    pub data: Option<Data>,
    /// A read hold or a permit ('-'), not the lock alone.
    pub shared: bool,
    /// How many permits it takes (`<lock>:weights`; the lock alone, a
    /// reader: 1).
    pub weight: u8,
}

/// How session_revoke.lua leaves its marker: fixes (b) and (f).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RevokeMarker {
    /// No marker: a revocation run twice revokes twice (the old bug).
    Never,
    /// Only when the run handed the lock to a waiter (the bug (f) reverts to).
    OnHandoff,
    /// On every run, so that a second run never acts (as implemented).
    Always,
}

/// Whose refresh.lua run it is (`lease.rs` `Extend`, and the watchdog's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum How {
    /// The watchdog's renewal: 'at_least', it never shortens the lease.
    Renewal,
    /// A grant extended on the claimant's link for its WAIT: 'at_least' too.
    /// (A late one is out of the model's reach: an extension whose link broke
    /// gives the claim up, and the one `replicate_claim` sends on the claim's
    /// own link runs in the claim script's step.)
    Grant,
    /// The holder's refresh (`Lease::refresh`): exactly to its ttl. `id` is its
    /// bit, `voids` the bits of the hold's earlier refreshes that got no answer,
    /// which it voids (fix (u)).
    Holder { id: u8, voids: u8 },
}

/// The switches of the scripts themselves.
#[derive(Clone, Copy, Debug)]
pub struct Scripts {
    /// refresh.lua's 'at_least' mode for the watchdog's renewals (fix (c)).
    pub at_least: bool,
    /// (u) refresh.lua voids the holder's earlier refreshes that got no answer
    /// (ARGV[5...]), and a voided one that arrives late changes nothing. Off:
    /// it set the expiry to its own ttl, cutting a later, longer refresh the
    /// holder counted on (two holders).
    pub voids_refreshes: bool,
    pub revoke_marker: RevokeMarker,
    /// (h) acquire.lua's refusals of a conversion ({-3, 0}: another reader
    /// waits to upgrade; {-4, 0}: its read lease ran out) take the token out
    /// of the queue. Off: they leave an earlier attempt's entry there, as
    /// before the fix (issue 27's second bug).
    pub refusals_leave_queue: bool,
    /// (k) resolve.lua voids a token it finds holding, as one that holds
    /// nothing. Off: only the latter, so an attempt of an adopted token that
    /// arrived late took the lease again once it was released, for nobody
    /// (found by this model).
    pub resolve_voids_holder: bool,
    /// (l) lib.lua's `grant` drops an upgrade whose token no longer reads (its
    /// read hold ran out, or was released after the upgrade gave up with an
    /// error) instead of handing it the lock. Off: the lock went to a token
    /// nobody waited for (found by this model).
    pub grant_drops_lapsed_upgrade: bool,
    /// (m) lib.lua's `live_holders` counts a hold of several permits by its
    /// weight (`<lock>:weights`). Off: by its entry, as one.
    pub weights_counted: bool,
    /// (n) acquire.lua gives a lock taken on the fast path (its fence still
    /// unassigned) a fence when a waiter joins the queue behind it. Off: the
    /// fence stays empty, and a release that trusts it (o) strands the waiter.
    pub join_assigns_fence: bool,
    /// (o) lib.lua's `let_go`: a lock whose fence is still unassigned was taken
    /// on the fast path with nobody queued, and nobody has queued since (n):
    /// its release deletes it without looking for waiters to hand it to.
    pub release_trusts_empty_fence: bool,
    /// (p) acquire.lua and session_open.lua clear the token's wake-up list when
    /// it joins the queue: nothing is granted to it then, so what is there is a
    /// grant whose lease ran out unread (its waiter stalled past the ttl), or a
    /// reader's grant of an upgrading token's earlier claim, taken by another
    /// path. Off: the BLPOP that follows popped it as a grant, beside the lock's
    /// holder. (It replaces (j), which cleared it for upgrades only, and was
    /// found by this model.)
    pub join_clears_wake: bool,
    /// (z) session_save.lua's destroy leaves a marker of its token, and a
    /// destroy run again that finds the lock gone answers 1 if the marker is
    /// there. Off: `saved_before` asked whether the data was gone (before stop
    /// 56), and a logout whose first run had handed the lock on, to a request
    /// that saved since, revoked that acknowledged save.
    pub destroy_marker: bool,
    /// (aa) acquire.lua's busy answer reads the shared holds after its grant,
    /// and never says -2 (a voided token). Off: it counted them before the
    /// grant, and a newcomer whose attempt handed a shared hold to the head of
    /// the queue (no lock key) was told its token was voided: its client gave
    /// up without leaving the queue, and was granted a hold for nobody
    /// (review, stop 58).
    pub busy_after_grant: bool,
    /// (ab) session_open.lua takes the token out of `<lock>:revoked` when it
    /// takes the lock or queues: a token asking again after a grant it never
    /// counted on (a logout revoked it first) takes a new hold. Off: the
    /// revocation stayed on the token, and that hold's saves (its destroy) were
    /// told "revoked": the destroy then skipped its logout (review, stop 59).
    pub open_unrevokes: bool,
    /// (ac) session_revoke.lua clears the revoked holder's wake-up list: a
    /// waiter handed the lock with the data, not woken yet, finds nothing, and
    /// asks again after the logout. Off: it popped the session as it was
    /// before the logout (review, stop 59).
    pub revoke_unwakes: bool,
    /// (ag) force_release.lua clears the wake-up lists of the holds it takes:
    /// a waiter handed the lock (a reader its shared hold) by the release
    /// before it, not woken yet, finds nothing and asks again. Off: it popped
    /// the grant after the forced release and counted on it beside the next
    /// holder (review, stop 64).
    pub force_unwakes: bool,
    /// (ad) A request writes a fresh id it moved to (session_put.lua) only
    /// where nothing is stored ('absent'). Off: with 'any', whatever is there
    /// (a write that timed out and landed late wrote over a save the session's
    /// next request had acknowledged; review, stop 59).
    pub put_absent: bool,
    /// (ae) session_save.lua's destroy, told that a logout revoked the token,
    /// writes after that logout (the revoked set's expiry, set again), so that
    /// the destroy's WAIT counts the logout, which another link wrote. Off: it
    /// wrote nothing, a destroy told so was reported done at once, and a
    /// failover could bring the logged-out session back (review, stop 61).
    pub revoked_touches: bool,
}

/// One script running on one node: its keys, the clock, and whether it wrote
/// (what WAIT then has to see on the replica).
pub struct Script<'a> {
    pub db: &'a mut Store,
    pub now: Time,
    /// The server clock in microseconds, shared by the nodes (see
    /// `MICROS_PER_TICK`).
    pub micros: &'a mut u16,
    /// A write that changed nothing still replicates (refresh.lua's PEXPIRE).
    pub touched: bool,
    pub scripts: Scripts,
}

/// lib.lua's `owns`.
pub fn owns(value: Option<LockValue>, token: Token) -> bool {
    value.is_some_and(|v| v.token == token)
}

impl Script<'_> {
    fn pttl(&self, until: Time) -> Time {
        until - self.now
    }

    fn lock_pttl(&self) -> Time {
        self.db.lock.map_or(0, |l| self.pttl(l.until))
    }

    fn set_lock(&mut self, token: Token, fence: Option<u16>, ttl: Time) {
        self.db.forced.retain(|t| *t != token);
        self.db.lock = Some(LockValue {
            token,
            fence,
            until: self.now.saturating_add(ttl),
        });
    }

    fn exists_void(&self, token: Token) -> bool {
        self.db.void.contains(&token)
    }

    fn now_ms(&self) -> Time {
        self.now
    }

    /// lib.lua's `next_fence`. `TIME` is the shared microsecond clock (lib.lua's
    /// grant and acquire pass on the reading they took for `now` when they took
    /// one: within one atomic step that is the same clock); `keep` (ttl +
    /// FENCE_KEEP_MS, an hour) outlives every run.
    pub fn next_fence(&mut self) -> u16 {
        *self.micros = (*self.micros + 1).max((u16::from(self.now) + 1) * MICROS_PER_TICK);
        let mut fence = *self.micros;
        let last = self.db.fence.map(|(v, _)| v);
        self.db.fence = Some((fence, FOREVER));
        if let Some(last) = last.filter(|&last| last >= fence) {
            fence = last + 1;
            self.db.fence = Some((fence, FOREVER));
        }
        fence
    }

    /// lib.lua's `leave_queue`.
    pub fn leave_queue(&mut self, token: Token) {
        self.db.waiters.retain(|w| w.token != token);
        if self.db.waiters.is_empty() {
            self.db.waiters_until = 0;
        }
    }

    /// lib.lua's `waiter_from`: the first waiter at or after place `i` within
    /// its deadline and heard from lately, and its place. Those whose deadline
    /// passed are dropped on the way; those not heard from lately are passed over.
    pub fn waiter_from(&mut self, now: Time, mut i: usize) -> Option<(Waiter, usize)> {
        loop {
            let w = *self.db.waiters.get(i)?;
            if w.deadline <= now {
                self.leave_queue(w.token);
            } else if w.heard <= now {
                i += 1;
            } else {
                return Some((w, i));
            }
        }
    }

    /// lib.lua's `first_waiter`.
    pub fn first_waiter(&mut self, now: Time) -> Option<Waiter> {
        self.waiter_from(now, 0).map(|(w, _)| w)
    }

    /// lib.lua's `join_queue`: a new upgrade goes ahead of everyone.
    pub fn join_queue(&mut self, token: Token, ttl: Time, wait: Time, now: Time, mode: Mode) {
        let heard = now + wait.min(NAP) + HEARD_SLACK;
        let terms = Waiter {
            token,
            ttl,
            deadline: now + wait,
            heard,
            mode,
        };
        match self.db.waiters.iter_mut().find(|w| w.token == token) {
            Some(w) => *w = terms,
            None if mode == Mode::U => {
                self.db.waiters = std::iter::once(terms)
                    .chain(self.db.waiters.iter().copied())
                    .collect();
            }
            None => self.db.waiters.push(terms),
        }
        // The queue lasts as long as its longest waiter.
        let keep = wait + WAKE_KEEP;
        if self.db.waiters_until < now + keep {
            self.db.waiters_until = now + keep;
        }
    }

    /// lib.lua's `live_holders`: the shared holds (permits: their weights) alive
    /// at `now`; those that ran out are dropped (and their weights with them).
    pub fn live_holders(&mut self, now: Time) -> u8 {
        if self.db.holders.is_empty() {
            return 0;
        }
        self.db.holders.retain(|h| h.until > now);
        if self.db.holders.is_empty() {
            self.db.holders_until = 0;
        }
        match self.scripts.weights_counted {
            true => self.db.holders.iter().map(|h| h.weight).sum(),
            false => self.db.holders.len() as u8,
        }
    }

    /// lib.lua's `keep_holders`: the key lasts as long as its last lease.
    pub fn keep_holders(&mut self, now: Time) {
        let last = self.db.holders.iter().map(|h| h.until).max();
        if let Some(last) = last.filter(|&l| l > now) {
            self.db.holders_until = last;
        }
    }

    /// lib.lua's `add_holder` (and `weigh`, for a new one of several permits).
    pub fn add_holder(&mut self, token: Token, ttl: Time, now: Time, weight: u8) {
        self.db.forced.retain(|t| *t != token);
        let until = now.saturating_add(ttl);
        match self.db.holders.iter_mut().find(|h| h.token == token) {
            Some(h) => h.until = until,
            None => self.db.holders.push(Shared {
                token,
                until,
                weight,
            }),
        }
        self.keep_holders(now);
    }

    /// `ZSCORE <lock>:holders token`: the end of its shared hold, if a member.
    fn shared_end(&self, token: Token) -> Option<Time> {
        self.shared(token).map(|h| h.until)
    }

    /// The shared hold of `token`, if it has one.
    fn shared(&self, token: Token) -> Option<Shared> {
        self.db.holders.iter().find(|h| h.token == token).copied()
    }

    /// lib.lua's `wake_up`.
    fn wake_up(&mut self, token: Token, deadline: Time, entry: Payload) {
        let until = deadline + WAKE_KEEP;
        match self.db.wake.iter_mut().find(|w| w.token == token) {
            Some(w) => {
                w.entries.push(entry);
                w.until = until;
            }
            None => self.db.wake.push(Wake {
                token,
                entries: [entry].into_iter().collect(),
                until,
            }),
        }
    }

    /// lib.lua's `grant`: what is free goes to the waiters at the head of the
    /// queue, first come first served; `holders`: whether the script declared
    /// the shared holds (locks and semaphores do, sessions do not); `fence_key`:
    /// the fencing counter (locks do, sessions do not); `payload`: the body of a
    /// writer's wake-up entry (a session's data).
    pub fn grant(
        &mut self,
        holders: bool,
        fence_key: bool,
        payload: fn(&Store) -> Option<Data>,
        now: Option<Time>,
    ) -> bool {
        // lib.lua does not ask about the lock when its caller has just deleted it,
        // or released a permit (`freed`: nothing sets a semaphore's lock key): it
        // is None here then too (a permit's release asserts so).
        if self.db.waiters.is_empty() || self.db.lock.is_some() {
            return false;
        }
        let now = now.unwrap_or_else(|| self.now_ms());
        let mut live = if holders { self.live_holders(now) } else { 0 };
        let mut handed = false;
        let mut i = 0;
        loop {
            let Some((w, at)) = self.waiter_from(now, i) else {
                return handed;
            };
            // An upgrade is only ever a reader's: one whose read hold ended has
            // nothing to upgrade, and leaves (fix (l)).
            let mine = w.mode == Mode::U && holders && self.shared_end(w.token).is_some();
            if w.mode == Mode::U && !mine && self.scripts.grant_drops_lapsed_upgrade {
                self.leave_queue(w.token);
                i = at;
                continue;
            }
            match w.mode {
                Mode::W | Mode::U | Mode::D => {
                    // An upgrading reader may be the one holder left: it becomes
                    // the writer.
                    if live > u8::from(mine) {
                        return handed;
                    }
                    let body = payload(self.db);
                    self.leave_queue(w.token);
                    if mine {
                        self.db.holders.retain(|h| h.token != w.token);
                    }
                    let mut fence = 0;
                    if fence_key {
                        fence = self.next_fence();
                    }
                    self.set_lock(w.token, Some(fence), w.ttl);
                    self.wake_up(w.token, w.deadline, Payload { fence, data: body });
                    return true;
                }
                Mode::P(limit, weight) if live + weight > limit => return handed,
                Mode::R | Mode::P(..) => {
                    let weight = match w.mode {
                        Mode::P(_, weight) => weight,
                        _ => 1,
                    };
                    self.leave_queue(w.token);
                    self.add_holder(w.token, w.ttl, now, weight);
                    self.wake_up(
                        w.token,
                        w.deadline,
                        Payload {
                            fence: 0,
                            data: None,
                        },
                    );
                    live += weight;
                    handed = true;
                    // The next waiter now stands where this one stood.
                    i = at;
                }
            }
        }
    }

    /// lib.lua's `hand_off`: `grant` without shared holds (sessions).
    pub fn hand_off(
        &mut self,
        fence_key: bool,
        payload: fn(&Store) -> Option<Data>,
        now: Option<Time>,
    ) -> bool {
        self.grant(false, fence_key, payload, now)
    }

    /// lib.lua's `pass_on`.
    pub fn pass_on(&mut self, fence_key: bool, payload: fn(&Store) -> Option<Data>) {
        self.db.lock = None;
        self.hand_off(fence_key, payload, None);
    }

    /// lib.lua's `let_go`: the lock alone, or a live shared hold; what that
    /// frees goes to the head of the queue. True when the token held something.
    pub fn let_go(&mut self, token: Token, permit: bool) -> bool {
        let unfenced = self.db.lock.is_some_and(|l| l.fence.is_none());
        let held = !permit && owns(self.db.lock, token);
        if self.scripts.release_trusts_empty_fence && held && unfenced {
            self.db.lock = None;
            return true;
        }
        if held {
            // grant's `freed`: the lock was just deleted, so it is not asked about.
            self.db.lock = None;
            self.grant(true, true, |_| None, None);
            return true;
        }
        let Some(ends) = self.shared_end(token) else {
            return false;
        };
        self.db.holders.retain(|h| h.token != token);
        if self.db.holders.is_empty() {
            self.db.holders_until = 0;
        }
        let now = self.now_ms();
        if ends <= now {
            return false;
        }
        self.grant(true, true, |_| None, Some(now));
        true
    }

    /// lib.lua's `unwake`.
    pub fn unwake(&mut self, token: Token) {
        self.db.wake.retain(|w| w.token != token);
    }

    /// acquire.lua.
    pub fn acquire(&mut self, token: Token, ttl: Time, wait: Time, mode: Mode) -> Reply {
        // The common case first: nobody queues, this token was not voided, the
        // lock is free; a writer's fence is left unassigned (fence.lua).
        let took_shared = Reply::Took {
            fence: Some(0),
            data: None,
        };
        match mode {
            Mode::W => {
                if !self.exists_void(token)
                    && self.db.waiters.is_empty()
                    && self.db.holders.is_empty()
                    && self.db.lock.is_none()
                {
                    self.set_lock(token, None, ttl);
                    return Reply::Took {
                        fence: None,
                        data: None,
                    };
                }
            }
            Mode::R => {
                if !self.exists_void(token) && self.db.waiters.is_empty() && self.db.lock.is_none()
                {
                    let now = self.now_ms();
                    self.add_holder(token, ttl, now, 1);
                    return took_shared;
                }
            }
            Mode::P(limit, weight) => {
                // NX: a token that holds a permit already (handed to it while it
                // waited) is left to the path below.
                if !self.exists_void(token) && self.db.waiters.is_empty() {
                    let now = self.now_ms();
                    if self.live_holders(now) + weight <= limit && self.shared_end(token).is_none()
                    {
                        self.db.holders.push(Shared {
                            token,
                            until: now.saturating_add(ttl),
                            weight,
                        });
                        self.keep_holders(now);
                        return took_shared;
                    }
                }
            }
            Mode::U | Mode::D => {}
        }
        // A voided token's fresh claims take nothing; its conversions act only
        // on what it holds.
        if !matches!(mode, Mode::U | Mode::D) && self.exists_void(token) {
            return Reply::Voided;
        }
        let value = self.db.lock;
        if mode == Mode::D && !owns(value, token) {
            return Reply::Lapsed;
        }
        if owns(value, token) {
            if matches!(mode, Mode::R | Mode::D) {
                // A writer taking it as a reader (a downgrade): nobody can come
                // between, and readers queued at the head share it at once.
                self.db.lock = None;
                let now = self.now_ms();
                self.add_holder(token, ttl, now, 1);
                self.grant(true, true, |_| None, Some(now));
                return took_shared;
            }
            // Handed to us while we waited, and its wake-up was lost or not read yet.
            self.unwake(token);
            return Reply::Handed {
                fence: value.and_then(|v| v.fence),
                data: None,
            };
        }
        let now = self.now_ms();
        let live = self.live_holders(now);
        let reading = live > 0 && self.shared_end(token).is_some();
        if mode == Mode::U && !reading {
            if self.scripts.refusals_leave_queue {
                self.leave_queue(token);
            }
            return Reply::Lapsed;
        }
        if reading && mode != Mode::U {
            // A shared hold handed to us while we waited (or one we have: kept).
            self.unwake(token);
            return Reply::Handed {
                fence: Some(0),
                data: None,
            };
        }
        if value.is_none() {
            let first = self.first_waiter(now);
            if first.is_none_or(|w| w.token == token) {
                let alone = match mode {
                    Mode::W => live == 0,
                    Mode::U => live == u8::from(reading),
                    _ => false,
                };
                if alone {
                    let fence = self.next_fence();
                    self.set_lock(token, Some(fence), ttl);
                    if reading {
                        self.db.holders.retain(|h| h.token != token);
                    }
                    self.leave_queue(token);
                    return Reply::Took {
                        fence: Some(fence),
                        data: None,
                    };
                }
                let shares = match mode {
                    Mode::R => true,
                    Mode::P(limit, weight) => live + weight <= limit,
                    _ => false,
                };
                if shares {
                    let weight = match mode {
                        Mode::P(_, weight) => weight,
                        _ => 1,
                    };
                    self.add_holder(token, ttl, now, weight);
                    self.leave_queue(token);
                    return took_shared;
                }
            }
            // Free (or shareable) with others queued before us: first come, first
            // served. What that serves may be us.
            self.grant(true, true, |_| None, Some(now));
            let value = self.db.lock;
            if owns(value, token) {
                self.unwake(token);
                return Reply::Handed {
                    fence: value.and_then(|v| v.fence),
                    data: None,
                };
            }
            if mode != Mode::U && self.shared_end(token).is_some() {
                self.unwake(token);
                return Reply::Handed {
                    fence: Some(0),
                    data: None,
                };
            }
        }
        if mode == Mode::U {
            // Two readers each waiting for the other to leave would wait for
            // ever: an upgrade is refused while another reader waits to upgrade.
            if let Some(first) = self.first_waiter(now) {
                if first.token != token && first.mode == Mode::U {
                    if self.scripts.refusals_leave_queue {
                        self.leave_queue(token);
                    }
                    return Reply::Refused;
                }
            }
        }
        if wait > 0 {
            // A lock taken on the fast path has no fence yet, and its release
            // trusts that to mean nobody queued since (let_go): it gets one now.
            if self.scripts.join_assigns_fence && self.db.lock.is_some_and(|l| l.fence.is_none()) {
                let fence = self.next_fence();
                if let Some(lock) = &mut self.db.lock {
                    lock.fence = Some(fence);
                }
            }
            self.join_queue(token, ttl, wait, now, mode);
            if self.scripts.join_clears_wake {
                self.unwake(token);
            }
        } else {
            self.leave_queue(token);
        }
        // How long until a holder's lease ends: the lock's, else the first
        // shared one's (not by `live`: the grant may have handed some out).
        let pttl = match self.db.lock {
            Some(l) => self.pttl(l.until),
            None if !self.scripts.busy_after_grant && live == 0 => return Reply::Voided,
            None => self
                .db
                .holders
                .iter()
                .map(|h| h.until)
                .min()
                .map_or(0, |u| u.saturating_sub(now)),
        };
        Reply::Busy { pttl }
    }

    /// release.lua, by let_go (for a session, session_save.lua's 'unlock': the
    /// data goes with the lock to the next waiter). `permit`: a semaphore's
    /// release, whose 'p' has let_go and grant skip the lock key: right only
    /// while nothing holds the lock of a semaphore, which every permit release
    /// the checker reaches asserts (semaphores and locks never share keys in the
    /// code; in the model they share one db, so a config mixing them fails here).
    pub fn release(&mut self, token: Token, session: bool, permit: bool) -> Reply {
        assert!(
            !permit || self.db.lock.is_none(),
            "a permit's release ('p') with the lock set: release.lua would not see it"
        );
        if session {
            if !owns(self.db.lock, token) {
                return self.not_owned(token, true);
            }
            self.pass_on(false, |db| db.data);
            return Reply::Int(1);
        }
        if !self.let_go(token, permit) {
            return Reply::Int(0);
        }
        Reply::Int(1)
    }

    /// What session_save.lua (and refresh.lua given the `<lock>:revoked` key,
    /// `revoked`) answers a token that does not hold: 2 when a revocation ended
    /// its hold, else 0.
    fn not_owned(&self, token: Token, revoked: bool) -> Reply {
        Reply::Int(if revoked && self.db.ousted.contains(&token) {
            2
        } else {
            0
        })
    }

    /// session_save.lua's answer to a destroy or a write whose token does not
    /// hold: 2, and a write for its WAIT (fixes (ae), (ah)), when a logout
    /// revoked it.
    fn told_revoked(&mut self, token: Token) -> Reply {
        let reply = self.not_owned(token, true);
        if reply == Reply::Int(2) && self.scripts.revoked_touches {
            self.touched = true;
        }
        reply
    }

    /// refresh.lua: `at_least` for the watchdog's renewals and a grant's
    /// extension, which never shorten a lease (with `Scripts::at_least` off,
    /// renewals set it exactly: fix (c) reverted); the holder's refresh voids
    /// its earlier ones (fix (u)). `revoked`: given
    /// the `<lock>:revoked` key (the watchdog's renewal of a session).
    pub fn refresh(&mut self, token: Token, ttl: Time, how: How, revoked: bool) -> Reply {
        let (at_least, voids) = match how {
            How::Renewal => (self.scripts.at_least, 0),
            How::Grant => (true, 0),
            How::Holder { id, voids } if self.scripts.voids_refreshes => {
                if self
                    .db
                    .stale
                    .iter()
                    .any(|&(t, ids)| t == token && ids & id != 0)
                {
                    return Reply::Int(3);
                }
                (false, voids)
            }
            How::Holder { .. } => (false, 0),
        };
        if owns(self.db.lock, token) {
            let mut ttl = ttl;
            if at_least {
                ttl = ttl.max(self.lock_pttl());
            }
            self.void_earlier(token, voids);
            let until = self.now + ttl;
            if let Some(lock) = &mut self.db.lock {
                lock.until = until;
            }
            // Always a write when ours: the WAIT that follows must cover it.
            self.touched = true;
            return Reply::Int(1);
        }
        let ends = self.shared_end(token);
        let now = self.now_ms();
        let Some(ends) = ends.filter(|&e| e > now) else {
            return self.not_owned(token, revoked);
        };
        let mut ttl = ttl;
        if at_least {
            ttl = ttl.max(ends - now);
        }
        self.void_earlier(token, voids);
        self.add_holder(token, ttl, now, 1);
        self.touched = true;
        Reply::Int(1)
    }

    /// refresh.lua's `void_earlier`: the ids in `voids` join the token's
    /// voided refreshes (kept past any run of the model).
    fn void_earlier(&mut self, token: Token, voids: u8) {
        if voids == 0 {
            return;
        }
        match self.db.stale.iter().position(|&(t, _)| t == token) {
            Some(i) => {
                let (_, ids) = self.db.stale.remove(i);
                self.db.stale.push((token, ids | voids));
            }
            None => self.db.stale.push((token, voids)),
        }
    }

    /// fence.lua.
    pub fn fence(&mut self, token: Token) -> Reply {
        let value = self.db.lock;
        if !owns(value, token) {
            return Reply::Fence(None);
        }
        if let Some(fence) = value.and_then(|v| v.fence) {
            return Reply::Fence(Some(fence));
        }
        let fence = self.next_fence();
        if let Some(lock) = &mut self.db.lock {
            lock.fence = Some(fence);
        }
        Reply::Fence(Some(fence))
    }

    /// resolve.lua (`session`: KEYS[5], the data, is declared).
    pub fn resolve(&mut self, token: Token, session: bool) -> Reply {
        let value = self.db.lock;
        self.unwake(token);
        if let Some(v) = value.filter(|_| owns(value, token)) {
            self.void_holder(token);
            let data = if session { self.db.data } else { None };
            return Reply::Owned(Some(Owned {
                pttl: self.pttl(v.until),
                fence: v.fence,
                data,
                shared: false,
                weight: 1,
            }));
        }
        self.leave_queue(token);
        // A token with a shared hold is never voided: an upgrade that holds it as
        // a reader only leaves the queue.
        if let Some(h) = self.shared(token).filter(|h| h.until > self.now) {
            self.void_holder(token);
            return Reply::Owned(Some(Owned {
                pttl: h.until - self.now,
                fence: None,
                data: None,
                shared: true,
                weight: h.weight,
            }));
        }
        if !self.db.void.contains(&token) {
            self.db.void.push(token);
        }
        Reply::Owned(None)
    }

    /// resolve.lua's `void_holder` (fix (k)): a token found holding is voided
    /// too, so that a late attempt of it takes nothing once it is released.
    fn void_holder(&mut self, token: Token) {
        if self.scripts.resolve_voids_holder && !self.db.void.contains(&token) {
            self.db.void.push(token);
        }
    }

    /// inspect.lua: what our token holds, changing nothing.
    pub fn inspect(&mut self, token: Token) -> Reply {
        let value = self.db.lock;
        if let Some(v) = value.filter(|_| owns(value, token)) {
            return Reply::Owned(Some(Owned {
                pttl: self.pttl(v.until),
                fence: v.fence,
                data: None,
                shared: false,
                weight: 1,
            }));
        }
        let now = self.now_ms();
        Reply::Owned(self.shared(token).filter(|h| h.until > now).map(|h| Owned {
            pttl: h.until - now,
            fence: None,
            data: None,
            shared: true,
            weight: h.weight,
        }))
    }

    /// session_open.lua (no `max_waiters` cap: ARGV[4] is 0).
    pub fn session_open(&mut self, token: Token, ttl: Time, wait: Time) -> Reply {
        let unrevokes = self.scripts.open_unrevokes;
        if !self.exists_void(token)
            && self.db.waiters.is_empty()
            && self.db.lock.is_none()
            && (!unrevokes || self.db.ousted.is_empty())
        {
            let data = self.db.data;
            self.set_lock(token, Some(0), ttl);
            return Reply::Took { fence: None, data };
        }
        if self.exists_void(token) {
            return Reply::Voided;
        }
        let value = self.db.lock;
        if owns(value, token) {
            self.unwake(token);
            return Reply::Handed {
                fence: None,
                data: self.db.data,
            };
        }
        let now = self.now_ms();
        if value.is_none() {
            let first = self.first_waiter(now);
            if first.is_none_or(|w| w.token == token) {
                let data = self.db.data;
                self.set_lock(token, Some(0), ttl);
                self.leave_queue(token);
                if unrevokes {
                    self.db.ousted.retain(|t| *t != token);
                }
                return Reply::Took { fence: None, data };
            }
            self.hand_off(false, |db| db.data, Some(now));
        }
        if wait > 0 {
            self.join_queue(token, ttl, wait, now, Mode::W);
            if unrevokes {
                self.db.ousted.retain(|t| *t != token);
            }
            if self.scripts.join_clears_wake {
                self.unwake(token);
            }
        } else {
            self.leave_queue(token);
        }
        Reply::Busy {
            pttl: self.lock_pttl(),
        }
    }

    /// session_save.lua with op 'write'.
    pub fn session_save(&mut self, token: Token, data: Data) -> Reply {
        if !owns(self.db.lock, token) {
            return self.told_revoked(token);
        }
        self.db.data = Some(data);
        // payload(): 'd' .. ARGV[2], the data just written.
        self.pass_on(false, |db| db.data);
        Reply::Int(1)
    }

    /// session_save.lua with op 'destroy': the data goes, and the lock to the
    /// next waiter, with no data (`payload()`: 'n').
    pub fn session_destroy(&mut self, token: Token) -> Reply {
        if !owns(self.db.lock, token) {
            let reply = self.told_revoked(token);
            // Run again after a lost reply: our first run's marker says it
            // destroyed (PEXPIRE, a write for the WAIT that follows).
            if reply == Reply::Int(0)
                && self.scripts.destroy_marker
                && self.db.destroyed.contains(&token)
            {
                self.touched = true;
                return Reply::Int(1);
            }
            return reply;
        }
        self.db.data = None;
        if self.scripts.destroy_marker && !self.db.destroyed.contains(&token) {
            self.db.destroyed.push(token);
        }
        self.pass_on(false, |_| None);
        Reply::Int(1)
    }

    /// Fix (z) reverted: session.rs `saved_before` for a destroy run again
    /// that found the lock gone took "the data is gone" for done (then wrote a
    /// marker, for the WAIT after it).
    pub fn destroyed_before(&mut self) -> Reply {
        let done = self.db.data.is_none();
        self.touched |= done;
        Reply::Found(done)
    }

    /// session_put.lua: a write of a session the request does not hold, only
    /// while nobody holds or waits for its lock, and (`Scripts::put_absent`)
    /// only where nothing is stored (the same data again passes). 1 when
    /// written; 0 when not (busy, or data there: the script's 0 and -1). Sent
    /// again after a lost reply, it answers by its marker (touched: the WAIT
    /// that follows covers the first run).
    pub fn session_put(&mut self, nonce: u8, data: Data) -> Reply {
        if self.db.put.contains(&nonce) {
            self.touched = true;
            return Reply::Int(1);
        }
        if self.db.lock.is_some() || !self.db.waiters.is_empty() {
            return Reply::Int(0);
        }
        if self.scripts.put_absent && self.db.data.is_some_and(|d| d != data) {
            return Reply::Int(0);
        }
        self.db.data = Some(data);
        self.db.put.push(nonce);
        Reply::Int(1)
    }

    /// session_revoke.lua, with its marker as `Scripts::revoke_marker` says.
    pub fn session_revoke(&mut self, nonce: u8) -> Reply {
        let marker = self.scripts.revoke_marker;
        if marker != RevokeMarker::Never && self.db.revoked.contains(&nonce) {
            // The marker set again, for the WAIT that follows.
            self.touched = true;
            return Reply::Int(2);
        }
        self.db.data = None;
        if marker == RevokeMarker::Always {
            self.db.revoked.push(nonce);
        }
        let Some(holder) = self.db.lock.take() else {
            return Reply::Int(1);
        };
        self.db.ousted.push(holder.token);
        if self.scripts.revoke_unwakes {
            self.unwake(holder.token);
        }
        if self.hand_off(false, |_| None, None) && marker == RevokeMarker::OnHandoff {
            self.db.revoked.push(nonce);
        }
        Reply::Int(1)
    }

    /// force_release.lua: the lock and the shared holds deleted, whoever holds
    /// them, and what that frees handed to the head of the queue. Sent again
    /// after a lost reply, it answers by its marker (touched: the WAIT that
    /// follows covers the first run). 1 when something was held.
    pub fn force_release(&mut self, nonce: u8) -> Reply {
        if let Some(&(_, held)) = self.db.forces.iter().find(|(n, _)| *n == nonce) {
            self.touched = true;
            return Reply::Int(u8::from(held));
        }
        let taken: Slots<Token, 6> = self
            .db
            .lock
            .map(|l| l.token)
            .into_iter()
            .chain(self.db.holders.iter().map(|h| h.token))
            .collect();
        for &token in taken.iter() {
            if self.scripts.force_unwakes {
                self.unwake(token);
            }
            if !self.db.forced.contains(&token) {
                self.db.forced.push(token);
            }
        }
        let held = !taken.is_empty();
        self.db.lock = None;
        self.db.holders.clear();
        self.db.holders_until = 0;
        self.db.forces.push((nonce, held));
        if held {
            self.grant(true, true, |_| None, None);
        }
        Reply::Int(u8::from(held))
    }

    /// BLPOP on our wake-up list (one entry; `None` while it is empty: the
    /// command blocks).
    pub fn blpop(&mut self, token: Token) -> Option<Reply> {
        let i = self.db.wake.iter().position(|w| w.token == token)?;
        let entry = self.db.wake[i].entries.remove(0);
        if self.db.wake[i].entries.is_empty() {
            self.db.wake.remove(i);
        }
        Some(Reply::Popped(entry))
    }

    /// session.rs `saved_before` for a write: GET the data, and when it is
    /// exactly ours, EXPIRE it (a write on this link, for the WAIT after it).
    pub fn saved_before(&mut self, data: Data) -> Reply {
        let ours = self.db.data == Some(data);
        self.touched |= ours;
        Reply::Found(ours)
    }
}
