//! Redis as the model sees it: the keys of one lease on one node, and the Lua
//! scripts of `src/core/scripts/` as atomic steps on them.
//!
//! Each script is a method of [`Script`] named after its `.lua` file, and each
//! function of `lib.lua` a method of the same name, with the same branches in the
//! same order, so that a reader can hold the two side by side. What is left out
//! says why where it would have been.
//!
//! Time is in ticks of one second (lib.lua's `NAP_MS`): a key lives while
//! `now < until`. Keys whose life outlasts any run of the model (the fencing
//! counter's hour, a void marker's ttl + 60 s, a revocation marker, session data
//! with its `gc_maxlifetime`) get [`FOREVER`].

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

/// One member of `<lock>:waiters` with its `<lock>:terms` entry. The two keys are
/// always written together (join_queue, leave_queue) and expire together, so the
/// model keeps them as one list in arrival order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Waiter {
    pub token: Token,
    pub ttl: Time,
    pub deadline: Time,
    pub heard: Time,
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
    /// `<lock>:fence`: the last fencing token, and its expiry.
    pub fence: Option<(u16, Time)>,
    /// `<lock>:waiters` and `<lock>:terms`; empty: neither key exists.
    pub waiters: Slots<Waiter, 3>,
    pub waiters_until: Time,
    pub wake: Slots<Wake, 3>,
    /// `<lock>:void:<token>` markers.
    pub void: Slots<Token, 4>,
    /// The session data (`PHPREDIS_SESSION:<id>`).
    pub data: Option<Data>,
    /// `<lock>:revoked:<nonce>` markers.
    pub revoked: Slots<u8, 2>,
}

impl Store {
    /// Drops what expired by `now`: Redis hides an expired key from every command
    /// and deletes it soon after, which is the same to every script.
    pub fn expire(&mut self, now: Time) {
        if self.lock.is_some_and(|l| l.until <= now) {
            self.lock = None;
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
    /// An integer reply (release, refresh, session_save, session_revoke).
    Int(u8),
    /// resolve.lua: `{pttl, fence[, data]}` when ours, nil otherwise.
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

/// The switches of the scripts themselves.
#[derive(Clone, Copy, Debug)]
pub struct Scripts {
    /// refresh.lua's 'at_least' mode for the watchdog's renewals (fix (c)).
    pub at_least: bool,
    pub revoke_marker: RevokeMarker,
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

    /// lib.lua's `next_fence`. `TIME` is the shared microsecond clock; `keep`
    /// (ttl + FENCE_KEEP_MS, an hour) outlives every run.
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

    /// lib.lua's `first_waiter`.
    pub fn first_waiter(&mut self, now: Time) -> Option<Waiter> {
        let mut i = 0;
        loop {
            let w = *self.db.waiters.get(i)?;
            if w.deadline <= now {
                self.leave_queue(w.token);
            } else if w.heard <= now {
                i += 1;
            } else {
                return Some(w);
            }
        }
    }

    /// lib.lua's `join_queue`.
    pub fn join_queue(&mut self, token: Token, ttl: Time, wait: Time, now: Time) {
        let heard = now + wait.min(NAP) + HEARD_SLACK;
        let terms = Waiter {
            token,
            ttl,
            deadline: now + wait,
            heard,
        };
        match self.db.waiters.iter_mut().find(|w| w.token == token) {
            Some(w) => *w = terms,
            None => self.db.waiters.push(terms),
        }
        // The queue lasts as long as its longest waiter.
        let keep = wait + WAKE_KEEP;
        if self.db.waiters_until < now + keep {
            self.db.waiters_until = now + keep;
        }
    }

    /// lib.lua's `hand_off`: `fence_key` is whether the script declared the
    /// fencing counter (locks do, sessions do not); `payload` is the body of the
    /// wake-up entry (a session's data).
    pub fn hand_off(
        &mut self,
        fence_key: bool,
        payload: fn(&Store) -> Option<Data>,
        now: Option<Time>,
    ) -> bool {
        if self.db.waiters.is_empty() {
            return false;
        }
        let now = now.unwrap_or_else(|| self.now_ms());
        let Some(first) = self.first_waiter(now) else {
            return false;
        };
        let body = payload(self.db);
        self.leave_queue(first.token);
        let mut fence = 0;
        if fence_key {
            fence = self.next_fence();
        }
        self.set_lock(first.token, Some(fence), first.ttl);
        let entry = Payload { fence, data: body };
        let until = first.deadline + WAKE_KEEP;
        match self.db.wake.iter_mut().find(|w| w.token == first.token) {
            Some(w) => {
                w.entries.push(entry);
                w.until = until;
            }
            None => self.db.wake.push(Wake {
                token: first.token,
                entries: [entry].into_iter().collect(),
                until,
            }),
        }
        true
    }

    /// lib.lua's `pass_on`.
    pub fn pass_on(&mut self, fence_key: bool, payload: fn(&Store) -> Option<Data>) {
        if !self.hand_off(fence_key, payload, None) {
            self.db.lock = None;
        }
    }

    /// lib.lua's `done_before`. Its marker is declared only on a Redis Cluster,
    /// whose client resends commands; the model is a Sentinel setup (`marker` is
    /// always `None`), where the caller's own retry settles a second run.
    pub fn done_before(&mut self, marker: Option<()>) -> u8 {
        match marker {
            Some(()) => unreachable!("Cluster done markers are not modelled"),
            None => 0,
        }
    }

    /// lib.lua's `mark_done` (see `done_before`).
    pub fn mark_done(&mut self, marker: Option<()>) {
        debug_assert!(marker.is_none());
    }

    /// lib.lua's `unwake`.
    pub fn unwake(&mut self, token: Token) {
        self.db.wake.retain(|w| w.token != token);
    }

    /// acquire.lua.
    pub fn acquire(&mut self, token: Token, ttl: Time, wait: Time) -> Reply {
        // The common case first: nobody queues, this token was not voided, the
        // lock is free; the fence is left unassigned (fence.lua).
        if !self.exists_void(token) && self.db.waiters.is_empty() && self.db.lock.is_none() {
            self.set_lock(token, None, ttl);
            return Reply::Took {
                fence: None,
                data: None,
            };
        }
        if self.exists_void(token) {
            return Reply::Voided;
        }
        let value = self.db.lock;
        if owns(value, token) {
            self.unwake(token);
            return Reply::Handed {
                fence: value.and_then(|v| v.fence),
                data: None,
            };
        }
        let now = self.now_ms();
        if value.is_none() {
            let first = self.first_waiter(now);
            if first.is_none_or(|w| w.token == token) {
                let fence = self.next_fence();
                self.set_lock(token, Some(fence), ttl);
                self.leave_queue(token);
                return Reply::Took {
                    fence: Some(fence),
                    data: None,
                };
            }
            // Free with others queued before us: first come, first served.
            self.hand_off(true, |_| None, Some(now));
        }
        if wait > 0 {
            self.join_queue(token, ttl, wait, now);
        } else {
            self.leave_queue(token);
        }
        Reply::Busy {
            pttl: self.lock_pttl(),
        }
    }

    /// release.lua (for a session, session_save.lua's 'unlock': the data goes
    /// with the lock to the next waiter).
    pub fn release(&mut self, token: Token, session: bool) -> Reply {
        if !owns(self.db.lock, token) {
            return Reply::Int(self.done_before(None));
        }
        if session {
            self.pass_on(false, |db| db.data);
        } else {
            self.pass_on(true, |_| None);
        }
        self.mark_done(None);
        Reply::Int(1)
    }

    /// refresh.lua: `at_least` for the watchdog's renewals, which never shorten
    /// a lease (with `Scripts::at_least` off, they set it exactly: fix (c)
    /// reverted).
    pub fn refresh(&mut self, token: Token, ttl: Time, at_least: bool) -> Reply {
        if !owns(self.db.lock, token) {
            return Reply::Int(0);
        }
        let mut ttl = ttl;
        if at_least && self.scripts.at_least {
            ttl = ttl.max(self.lock_pttl());
        }
        let until = self.now + ttl;
        if let Some(lock) = &mut self.db.lock {
            lock.until = until;
        }
        // Always a write when ours: the WAIT that follows must cover it.
        self.touched = true;
        Reply::Int(1)
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
            let data = if session { self.db.data } else { None };
            return Reply::Owned(Some(Owned {
                pttl: self.pttl(v.until),
                fence: v.fence,
                data,
            }));
        }
        self.leave_queue(token);
        if !self.db.void.contains(&token) {
            self.db.void.push(token);
        }
        Reply::Owned(None)
    }

    /// session_open.lua (no `max_waiters` cap: ARGV[4] is 0).
    pub fn session_open(&mut self, token: Token, ttl: Time, wait: Time) -> Reply {
        if !self.exists_void(token) && self.db.waiters.is_empty() && self.db.lock.is_none() {
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
                return Reply::Took { fence: None, data };
            }
            self.hand_off(false, |db| db.data, Some(now));
        }
        if wait > 0 {
            self.join_queue(token, ttl, wait, now);
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
            return Reply::Int(self.done_before(None));
        }
        self.db.data = Some(data);
        // payload(): 'd' .. ARGV[2], the data just written.
        self.pass_on(false, |db| db.data);
        self.mark_done(None);
        Reply::Int(1)
    }

    /// session_revoke.lua, with its marker as `Scripts::revoke_marker` says.
    pub fn session_revoke(&mut self, nonce: u8) -> Reply {
        let marker = self.scripts.revoke_marker;
        if marker != RevokeMarker::Never && self.db.revoked.contains(&nonce) {
            return Reply::Int(2);
        }
        self.db.data = None;
        if marker == RevokeMarker::Always {
            self.db.revoked.push(nonce);
        }
        if self.db.lock.is_some() {
            if self.hand_off(false, |_| None, None) {
                if marker == RevokeMarker::OnHandoff {
                    self.db.revoked.push(nonce);
                }
            } else {
                self.db.lock = None;
            }
        }
        Reply::Int(1)
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
