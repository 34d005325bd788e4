//! A PHP worker as the model sees it: what its request thread is doing (a
//! `DistributedLock`, a session request, or a logout), the command each of its
//! two links has in flight (the request's, the watchdog's), and the hold it
//! counts on.
//!
//! The reactions to replies and failures are `src/core/lease.rs` (the claim
//! loop), `lock.rs` (settling an unresolved acquire), `session.rs` (save, its
//! retry and `saved_before`, revoke), `hold.rs` and `watchdog.rs` (the bound a
//! holder counts on, renewals, the check after a failover), in the same order of
//! cases.

use crate::redis::{Data, How, Mode, Reply, Time, Token};
use crate::slots::Slots;

/// What a client's user code does, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// `DistributedLock`: acquire (with a wait), hold, maybe refresh and ask for
    /// the fencing token, release.
    Lock { acquires: u8, refreshes: u8 },
    /// `DistributedLock::acquireRead()` (with a wait), hold; then maybe an
    /// upgrade (`acquire()` on the read hold, with a wait) or a `detach()`
    /// (the token left for a `Restorer`); release.
    Reader {
        acquires: u8,
        upgrade: bool,
        detach: bool,
        /// After an upgrade that threw, acquire() once more (`Op::Retry`).
        retry: bool,
        /// `refresh()` the read hold once (a ttl of `refresh_ttls`) before
        /// converting it: a refresh left unanswered is carried by the upgrade.
        refresh: bool,
    },
    /// `acquire()`, hold, maybe a downgrade (`acquireRead()` on the write
    /// hold) or a `detach()`, release.
    Writer {
        acquires: u8,
        downgrade: bool,
        /// After a downgrade that threw, acquireRead() once more.
        retry: bool,
        /// After a downgrade that threw, acquire() once more.
        retry_alone: bool,
        /// `detach()` the write hold (the token left for a `Restorer`).
        detach: bool,
        /// `refresh()` the write hold once (a ttl of `refresh_ttls`) before
        /// converting it: a refresh left unanswered is carried by the downgrade.
        refresh: bool,
        /// After a downgrade that held, acquire() again (an upgrade).
        reupgrade: bool,
    },
    /// `DistributedSemaphore` of `limit` permits: acquire `weight` of them at
    /// once (with a wait), hold, maybe refresh or `detach()` (the token left
    /// for a `Restorer`), release.
    Permit {
        acquires: u8,
        limit: u8,
        weight: u8,
        refreshes: u8,
        detach: bool,
    },
    /// `restore()` of the token another client detached, into an object of
    /// the class that detached it, then release. A lock's: `synchronized()`
    /// (the lock alone) on it. A semaphore's: `acquire()` of `permits` on it,
    /// which extends the hold when it is of that many and throws when not.
    Restorer { permits: u8 },
    /// A locking session request: open (lock and read), write (save and unlock).
    /// `logout`: its last request destroys the session instead (a locked
    /// destroy, `SessionStore::destroy`).
    Session { opens: u8, logout: bool },
    /// A logout of a session another request holds (`SessionStore::delete`).
    Revoker { revokes: u8 },
    /// `DistributedLock::forceRelease()` (`Lease::force_release`), once: the
    /// lock taken from whoever holds it, handed to the head of the queue.
    Forcer,
    /// A request that moved to the session's id from another it read (a fresh
    /// id after regenerate()) and writes it without holding it, once
    /// (`SessionStore::put`, session_put.lua: `Handler::write_unopened`).
    Putter,
}

/// What a claim asks for (`lease.rs` `Want`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Want {
    Alone,
    Shared,
    /// The lock alone, for the token that reads (its own hold).
    Upgrade,
    /// Shared, for the token that has it alone.
    Downgrade,
    /// (Of this many permits, how many at once.)
    Permit(u8, u8),
}

impl Want {
    /// acquire.lua's mode.
    pub fn mode(self) -> Mode {
        match self {
            Want::Alone => Mode::W,
            Want::Shared => Mode::R,
            Want::Upgrade => Mode::U,
            Want::Downgrade => Mode::D,
            Want::Permit(limit, weight) => Mode::P(limit, weight),
        }
    }

    /// What a hold it gets is.
    pub fn kind(self) -> Kind {
        match self {
            Want::Alone | Want::Upgrade => Kind::Alone,
            Want::Shared | Want::Downgrade => Kind::Shared,
            Want::Permit(..) => Kind::Permit,
        }
    }
}

/// What a hold is, as its holder knows it (`Hold::shared`, and the object's
/// being a lock or a semaphore).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The lock alone: a writer.
    Alone,
    /// A reader's.
    Shared,
    Permit,
    /// Restored from a token and not asked about yet (`Lock::unverified`).
    Unknown,
}

/// Which of a client's two connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// The request thread's.
    Request,
    /// The watchdog thread's (renewals).
    Watchdog,
}

/// The commands a link sends: each is one script (or command) and, with
/// `wait_replicas`, the WAIT after it on the same link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    /// acquire.lua, then `Lease::replicate_claim`.
    Acquire {
        token: Token,
        wait: Time,
        mode: Mode,
    },
    /// inspect.lua (a restored hold asked about).
    Inspect { token: Token },
    /// session_open.lua, then `Lease::replicate_claim`.
    Open { token: Token, wait: Time },
    /// BLPOP on our wake-up list (`Lease::wait_for_handoff`).
    Blpop { token: Token },
    /// resolve.lua.
    Resolve { token: Token },
    /// refresh.lua (and WAIT), run as `how` says.
    Refresh { token: Token, ttl: Time, how: How },
    /// fence.lua.
    Fence { token: Token },
    /// release.lua, or session_save.lua 'unlock'. Its WAIT is left out: a
    /// release's shortfall is counted, never reported, so it changes nothing.
    Release { token: Token },
    /// session_save.lua 'write' (and WAIT).
    Save { token: Token, data: Data },
    /// session.rs `saved_before` for a write (and WAIT).
    SavedBefore { data: Data },
    /// session_save.lua 'destroy' (and WAIT).
    Destroy { token: Token },
    /// Fix (z) reverted: session.rs `saved_before` for a destroy (is the data
    /// gone?).
    DestroyedBefore,
    /// session_put.lua of `data` (and WAIT), with this write's marker `nonce`.
    Put { nonce: u8, data: Data },
    /// session_revoke.lua (and WAIT: `SessionStore::revoke` reports a logout
    /// done only once the replica has it).
    Revoke { nonce: u8 },
    /// force_release.lua with its marker `nonce` (and WAIT).
    Force { nonce: u8 },
    /// `Lease::abandon` left to later (`pending`, `give_up`): resolve.lua, and
    /// release.lua when the token holds the lease. Only ever an orphan.
    Abandon { token: Token },
}

/// Only fills the unused slots of a `Slots`.
impl Default for Req {
    fn default() -> Self {
        Req::Release {
            token: Token::default(),
        }
    }
}

/// A command in the network that nobody waits for any more.
pub type Orphans = Slots<(u8, Req), 2>;

/// Where a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// On its way, or in Redis's socket buffer.
    Sent,
    /// The script ran; its WAIT waits for the replica to apply `behind` more
    /// entries of the replication stream (`None`: nothing replicates them).
    Waiting { reply: Reply, behind: Option<u8> },
    /// The reply is on its way; `acks`: what WAIT said, if one was asked for.
    Answered { reply: Reply, acks: Option<bool> },
}

/// A command on a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Call {
    pub req: Req,
    /// The node it was sent to: the master of the generation the client knew.
    pub node: u8,
    /// That generation: a reply that arrives after the client learned of a
    /// switch is a broken link (`Lease::call`, `conn.outdated`).
    pub generation: u8,
    pub stage: Stage,
}

/// How a command ended for the client (`lease.rs` `Failure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The reply, and whether WAIT saw enough replicas (`None`: not asked).
    Reply(Reply, Option<bool>),
    /// The link broke after sending: the command may have run.
    Broken,
    /// No reply in time: the command may have run, or may still run.
    TimedOut,
}

/// `hold.rs` `Watch` states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchState {
    Watching,
    /// Redis said it is not ours (or the new master does not have it).
    Lost,
    /// No renewal was confirmed before the lease would have ended.
    Expired,
    /// Its holder let go.
    Stopped,
}

/// `hold.rs` `Watch`: the bound a holder counts on, shared with the watchdog.
/// Every hold has one: on a Sentinel service the watchdog checks each hold after
/// a failover, renewed or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Watch {
    /// `safe_until`: until then nobody else can have the lease (drift is taken
    /// as zero: `hold.rs` `drift` covers the clocks' difference, outside the
    /// model).
    pub end: Time,
    pub state: WatchState,
    /// What renewals extend the lease to.
    pub ttl: Time,
    pub renew: bool,
    /// The holder's refreshes on their way (or never answered): when the last
    /// was sent, and the shortest ttl among them.
    pub setting: Option<(Time, Time)>,
    /// The generation of the master the hold is known to be on.
    pub generation: u8,
    /// The last renewal failed: the next one is due at once.
    pub retry: bool,
    /// False for a hold restored and not asked about yet: `Lock::restored`
    /// watches nothing, so nothing ends it, and a refresh sets its bound.
    pub watched: bool,
}

impl Watch {
    pub fn counting(&self, now: Time) -> bool {
        self.state == WatchState::Watching && now < self.end
    }
}

/// How a hold was had (for the `sometimes` properties and the traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Via {
    /// acquire.lua / session_open.lua took it (status 1).
    Took,
    /// Found handed to us by a later attempt (status 2).
    Found,
    /// Popped from our wake-up list.
    Woken,
    /// resolve.lua said it is ours after a broken link.
    Adopted,
    /// `Lock::settle` found an unresolved acquire's token holding it.
    Settled,
    /// `DistributedLock::restore()` of another's detached token.
    Restored,
    /// Its conversion ended in an error: let go, its release owed (fix (s)).
    LetGo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    pub token: Token,
    pub kind: Kind,
    /// 0 until assigned.
    pub fence: u16,
    pub watch: Watch,
    pub via: Via,
    /// Its fence was counted in the fence history already.
    pub fence_noted: bool,
    /// How many permits it counts on: a restored one's, what Redis said (fix
    /// (g) reverted: what its restorer asked for); others', their program's.
    pub weight: u8,
    /// How many refreshes it sent (the next one's id).
    pub refreshes_sent: u8,
    /// `Hold::unanswered_refreshes`: the ids (bits) of its refreshes that got
    /// no answer, for the next one to void. (Their bound is the watch's
    /// `setting`, kept until a refresh is answered, and carried by a
    /// conversion: `Hold::carry_unanswered`.)
    pub unanswered: u8,
}

/// The watchdog's renewal on its way (`watchdog.rs` `renew_on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Renewal {
    pub sent: Time,
    pub ttl: Time,
    /// The holder's refresh was answered since it was sent: it may have run
    /// before that refresh, and proves nothing beyond it (`Watch::renewed`'s
    /// `sent < set_at`).
    pub stale: bool,
}

/// `Lease::claim`'s loop variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    pub token: Token,
    pub want: Want,
    /// A holder converting its own hold (an upgrade, a downgrade): the token is
    /// its hold's, and the hold stays while it waits.
    pub convert: bool,
    /// The Sentinel generation when the claim began.
    pub generation: u8,
    pub deadline: Time,
    pub retried: bool,
    pub busy_since: Option<Time>,
    /// When the current attempt was sent.
    pub sent: Time,
    /// A conversion: when its first attempt was sent, plus the ttl. Redis may
    /// have converted the hold already, into a lease of the ttl from the grant
    /// (no earlier than that send; a refresh of the old hold still on its way
    /// may end it sooner, which its bound in `watch.end` already allows), so
    /// the old hold, whose bound a refresh may have made longer, is counted on
    /// while the claim lasts only until then. (The code counts on nothing
    /// during the call; after it, on the converted hold, or on the old one if
    /// Redis did not convert it.)
    pub converted_by: Time,
    pub step: Step,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// acquire.lua / session_open.lua on its way.
    Attempt,
    /// BLPOP on our wake-up list.
    Nap,
    /// resolve.lua after a broken link (`second`: its `call_idempotent` retry).
    Resolve { second: bool },
    /// `Lease::replicate_grant`: the lease handed to us or adopted, extended on
    /// our own link and WAITed for; then it is ours from `since`. `voided`:
    /// resolve.lua ran for it (adopted, or re-read on a new master).
    Grant {
        since: Time,
        fence: u16,
        data: Option<Data>,
        via: Via,
        voided: bool,
    },
    /// `Lease::confirm_grant`: we learned of another master since the grant
    /// was told; resolve.lua there says what our token holds (`second`: its
    /// `call_idempotent` retry), and the grant is extended and WAITed for there.
    Reread { since: Time, via: Via, second: bool },
    /// `Lease::give_up` (with `give_ups_apart`): resolve.lua for a token that
    /// may be queued or hold the lease (`second`: its `call_idempotent` retry).
    GiveUp { second: bool },
    /// `Lease::reconfirm` (fix (w)): a grant read only once its bound had
    /// passed, extended (owner-checked, sent at `sent`, the `tries`-th time)
    /// and WAITed for; then it is ours from `sent`.
    Reconfirm {
        sent: Time,
        fence: u16,
        data: Option<Data>,
        via: Via,
        tries: u8,
    },
}

/// What the request thread is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pc {
    #[default]
    Idle,
    /// Inside `Lease::claim` (an acquire, or a session open).
    Claim(Claim),
    /// `Lock::settle`: resolve.lua for an acquire left unresolved, asked at
    /// `asked` under generation `generation`.
    Settling {
        asked: Time,
        generation: u8,
        second: bool,
        want: Want,
    },
    /// The user holds the lock, or the session is open.
    Held,
    /// `Lease::refresh`, for `then`.
    Refreshing {
        sent: Time,
        ttl: Time,
        second: bool,
        then: Then,
    },
    /// `Lock::ask_restored` (inspect.lua), asked at `asked`, before a
    /// restored hold's `synchronized()` relies on its kind (`then` `None`), or
    /// before `Lock::acquire` (`acquire_read`) goes on with a hold whose kind a
    /// failed conversion left unknown (`then`: what it asks for).
    Verifying {
        asked: Time,
        second: bool,
        then: Option<Want>,
    },
    Fencing {
        second: bool,
    },
    Releasing {
        second: bool,
    },
    /// `SessionStore::save` of `data` (or a destroy), begun under `generation`.
    Saving {
        data: Data,
        destroy: bool,
        generation: u8,
        second: bool,
    },
    /// `saved_before` after a second run found the lock gone.
    Confirming {
        data: Data,
        destroy: bool,
    },
    Revoking {
        nonce: u8,
        second: bool,
    },
    /// `Lease::force_release` (run again once after a broken link, by its
    /// marker).
    Forcing {
        nonce: u8,
        second: bool,
    },
    /// `SessionStore::put` of `data` (run again once after a broken link).
    Putting {
        data: Data,
        second: bool,
    },
    Crashed,
}

/// Whose call a refresh is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Then {
    /// The user's `refresh()`.
    User,
    /// `renew_held` inside an acquire of `Want`, whose result it is: not ours
    /// any more, and the acquire goes on to claim.
    Acquire(Want),
    /// `Lock::adopt_unresolved`'s refresh of a token resolve.lua found holding,
    /// asked under generation `.1`; then as `Acquire`.
    Settled(Want, u8),
    /// `renew_held` of a `synchronized()` nested in the hold: not ours, and it
    /// throws (the lease was lost).
    Sync,
    /// `Lock::recount` (fix (x)): a converted hold carrying a refresh left
    /// unanswered, read after that refresh's bound, extended first (the
    /// `.0`-th time); reported held only if counted on after it.
    Recount(u8),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Client {
    /// The Sentinel generation this process knows.
    pub generation: u8,
    pub pc: Pc,
    /// The request thread's command in flight.
    pub link: Option<Call>,
    /// The watchdog's renewal in flight.
    pub dog: Option<Call>,
    pub renewal: Option<Renewal>,
    pub hold: Option<Hold>,
    /// `Lock::unresolved`: an acquire whose outcome Redis did not confirm.
    pub unresolved: Option<Token>,
    /// The last token this process gave back (`Lease::release_token`): the
    /// give-back may still run, or be due (`pending::left_to_settle`).
    pub given_back: Option<Token>,
    /// Tokens generated so far (the next one's number).
    pub tokens: u8,
    /// User operations begun (acquires, opens, revocations).
    pub ops: u8,
    pub refreshes: u8,
    /// The session data this request read when it opened the session.
    pub read: Option<Data>,
}

impl Client {
    pub fn new() -> Client {
        Client {
            generation: 1,
            pc: Pc::Idle,
            link: None,
            dog: None,
            renewal: None,
            hold: None,
            unresolved: None,
            given_back: None,
            tokens: 0,
            ops: 0,
            refreshes: 0,
            read: None,
        }
    }

    /// The user is inside its critical section, counting on its hold: the lock
    /// is held (or a call that keeps it is under way) and the hold's bound is
    /// still ahead by the client's clock.
    pub fn counts_on_hold(&self, now: Time) -> bool {
        let inside = match self.pc {
            Pc::Held | Pc::Refreshing { .. } | Pc::Fencing { .. } => true,
            // Converting its hold: it keeps what it has while it waits, as
            // long as a lease the conversion may have become lasts.
            Pc::Claim(c) => c.convert && now < c.converted_by,
            _ => false,
        };
        inside && self.hold.is_some_and(|h| h.watch.counting(now))
    }

    /// The hold it counts on, and what it is: from the moment it asks for a
    /// downgrade, a writer counts only on reading (Redis may let readers in
    /// before it hears the answer).
    pub fn counted(&self, now: Time) -> Option<Kind> {
        let hold = self.hold.filter(|_| self.counts_on_hold(now))?;
        match self.pc {
            Pc::Claim(c) if c.convert && c.want == Want::Downgrade => Some(Kind::Shared),
            _ => Some(hold.kind),
        }
    }

    pub fn call(&self, link: Link) -> Option<&Call> {
        match link {
            Link::Request => self.link.as_ref(),
            Link::Watchdog => self.dog.as_ref(),
        }
    }

    pub fn call_mut(&mut self, link: Link) -> &mut Option<Call> {
        match link {
            Link::Request => &mut self.link,
            Link::Watchdog => &mut self.dog,
        }
    }
}
