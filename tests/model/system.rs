//! The whole system as one stateright `Model`: a master and a replica behind
//! Sentinel, the replication stream between them, a failover, the network
//! between the clients and Redis, the clock, and the clients.
//!
//! Every step is one action: a tick of the clock, a user call, Redis running one
//! command (a script is one atomic step), WAIT being acknowledged or running out,
//! a reply arriving, a link failing, a command left in the network running late
//! or being lost, the failover's steps, a client hearing of the switch, and the
//! watchdog's renewals. The checker explores every interleaving of them. What
//! the clients do is in `reactions.rs`.
//!
//! Time, pauses. Leases expire on the server clock (`now`, in ticks). A client
//! reads the same clock (drift is `hold.rs`'s business) each time it acts, as
//! the extension reads `Instant::now()`. A pause (GC, SIGSTOP) is a stretch of
//! ticks in which a client and its watchdog take no step: every schedule has
//! them, so none is a separate action; what counts is that a paused client's
//! bounds were timed from before it sent.
//!
//! The failover window. With wait_replicas=1 mutual exclusion must hold
//! throughout. Without it, two holds may overlap from the promotion until each
//! client heard of the switch and its watchdog checked its hold on the new
//! master: a hold is outside the window once the current master granted it
//! (its claim began under the current generation) or was checked to have it.
//!
//! Reductions (each keeps every behaviour that could break a property):
//! - A request thread's command that cannot fail runs when it is sent, and a
//!   reply that nothing can come between is read when it is made (`send`,
//!   `read_reply`): its thread does nothing meanwhile, and a client's bounds are
//!   timed from when it sent, so a later run or read only shrinks them.
//!   Commands whose link may fail, the watchdog's renewals (which the holder's
//!   refresh may overtake) and replies sent before a switch wait in the network.
//! - The replica applies the stream only when someone looks: a WAIT acknowledged
//!   (up to that write) and the promotion (any prefix of what is left). Nothing
//!   else reads the replica.
//! - A client that hears of a switch has its hold checked at once (`Learn`);
//!   one that learns it otherwise (READONLY, asking the sentinels) is checked by
//!   a separate `Check`.
//!
//! Bounds: `Config` (clients and their calls, the horizon, faults, crashes,
//! the replica's lag, commands left in the network, one failover).

use std::cell::RefCell;
use std::fmt::Write as _;

use stateright::{Model, Property};

use crate::client::{
    Call, Client, Kind, Link, Orphans, Outcome, Pc, Program, Req, Stage, Want, WatchState,
};
use crate::redis::{
    owns, Data, How, Mode, Reply, RevokeMarker, Script, Scripts, Store, Time, Token, WAKE_KEEP,
};
use crate::slots::Slots;

thread_local! {
    static NARRATION: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Notes what a step does, while a trace is being printed (never while
/// checking: `line` is not even called then).
pub fn say(line: impl FnOnce() -> String) {
    NARRATION.with(|n| {
        if let Some(lines) = n.borrow_mut().as_mut() {
            lines.push(line());
        }
    });
}

/// Runs `f`, and returns what it said.
pub fn narrated<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    NARRATION.with(|n| *n.borrow_mut() = Some(Vec::new()));
    let out = f();
    let lines = NARRATION
        .with(|n| n.borrow_mut().take())
        .unwrap_or_default();
    (out, lines)
}

/// A command as the trace shows it.
pub fn show(req: Req) -> String {
    match req {
        Req::Acquire { token, wait, mode } => {
            format!("acquire.lua({token:?}, wait {wait}, {mode:?})")
        }
        Req::Inspect { token } => format!("inspect.lua({token:?})"),
        Req::Open { token, wait } => format!("session_open.lua({token:?}, wait {wait})"),
        Req::Blpop { token } => format!("BLPOP wake:{token:?}"),
        Req::Resolve { token } => format!("resolve.lua({token:?})"),
        Req::Refresh { token, ttl, how } => match how {
            How::Renewal | How::Grant => format!("refresh.lua({token:?}, {ttl}, at_least)"),
            How::Holder { id, voids } => {
                format!("refresh.lua({token:?}, {ttl}, id {id}, voiding {voids})")
            }
        },
        Req::Fence { token } => format!("fence.lua({token:?})"),
        Req::Release { token } => format!("release.lua({token:?})"),
        Req::Save { token, data } => format!("session_save.lua({token:?}, write {data:?})"),
        Req::Put { nonce, data } => format!("session_put.lua(#{nonce}, {data:?})"),
        Req::SavedBefore { data } => format!("GET data == {data:?}? (saved_before)"),
        Req::Destroy { token } => format!("session_save.lua({token:?}, destroy)"),
        Req::DestroyedBefore => "EXISTS data? (saved_before, destroy; (z) reverted)".into(),
        Req::Revoke { nonce } => format!("session_revoke.lua(nonce {nonce})"),
        Req::Force { nonce } => format!("force_release.lua(nonce {nonce})"),
        Req::Abandon { token } => format!("resolve.lua + release.lua({token:?}) (abandon)"),
    }
}

/// The session data stored before any request runs (`Config::stored`): write
/// 15, a bit no client's write id uses.
pub const STORED: Data = Data {
    write: 15,
    lineage: 1 << 15,
};

/// What a run of the model may do.
#[derive(Clone, Debug)]
pub struct Config {
    pub clients: Vec<Program>,
    /// The lease ttl of every acquire and open.
    pub ttl: Time,
    /// The ttls a holder's `refresh()` may ask for.
    pub refresh_ttls: Vec<Time>,
    /// How long an acquire or open waits for the lock.
    pub wait: Time,
    /// The clock stops here.
    pub horizon: Time,
    /// `wait_replicas=1`.
    pub wait_replicas: bool,
    /// The failovers that may happen (at most one per run).
    pub failovers: Vec<Failover>,
    /// Links that may fail (replies lost, commands left in the network).
    pub faults: u8,
    /// The commands whose links may fail.
    pub faulty: fn(Req) -> bool,
    /// Clients that may crash.
    pub crashes: u8,
    /// How far the replica may lag behind, in entries of the stream.
    pub max_lag: u8,
    /// How many commands may be in the network with nobody waiting for them.
    pub max_orphans: u8,
    /// The watchdog renews every hold (`autoRenew`, `lock_renew`).
    pub renew: bool,
    /// The lock holder may ask for its fencing token (fence.lua).
    pub fence_ops: bool,
    /// A give-back (the release after a WAIT shortfall) is answered: it ran,
    /// and the process leaves nothing pending for it, so the object keeps the
    /// hold of unknown kind (`Lock::convert`'s `forget_kind`). Off: it goes
    /// unanswered, left in the network and to the process's next call.
    pub give_backs_answered: bool,
    /// A fresh claim's give-up (`Lease::abandon`) gets no reply: its resolve
    /// is left in the network and the token to the lock's next call
    /// (`Error::Unresolved`, `Lock::settle`). Off: the abandon is sent and
    /// runs by itself.
    pub abandons_fail: bool,
    /// A fresh claim's give-up is the code's two steps: resolve.lua, answered
    /// (or not: `Error::Unresolved`), then, for a token it found holding, a
    /// release whose reply is lost (it runs late, or never: the process's next
    /// call would). Off: both run together, by themselves (`Req::Abandon`).
    pub give_ups_apart: bool,
    /// The session is stored before any request runs (`STORED`, acknowledged,
    /// on both nodes).
    pub stored: bool,
    pub fixes: Fixes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failover {
    /// The master dies; the replica is promoted; the old master may come back
    /// as the new one's replica.
    Crash,
    /// `SENTINEL FAILOVER`: the replica is promoted while the old master keeps
    /// taking writes from the clients that have not learned of the switch, until
    /// the sentinels demote it.
    Planned,
}

/// The fixes the tests revert, one at a time (`true`/`at_least`/`Always`: fixed).
#[derive(Clone, Copy, Debug)]
pub struct Fixes {
    /// (a) A lock handed to a waiter is WAITed for by the waiter, whether it
    /// finds it handed (status 2: `Lease::replicate_claim`) or pops it from its
    /// wake-up list (`replicate_grant`). Off: only a direct acquire (status 1)
    /// WAITs, as before the fix. (The same fix made a lease adopted after a
    /// broken link WAIT too; that part stays.)
    pub grant_waits: bool,
    /// (b) session_revoke.lua's marker; (c) refresh.lua's 'at_least'.
    pub scripts: Scripts,
    /// (d) With wait_replicas, a renewal counts once WAIT says the replica has
    /// it (`watchdog.rs` `confirm`). Off: at once, as before that fix.
    pub renewals_wait: bool,
    /// (e) After a failover the watchdog's check (`watchdog.rs` `check`) also
    /// reads the lease's PTTL on the new master (atomically with the token) and
    /// lowers the hold's bound to it. Off: it only looks for the token, as
    /// before that fix.
    pub check_reads_pttl: bool,
    /// (g) `synchronized()` on a restored hold asks Redis what it is
    /// (`Lock::holding`) before relying on its kind. Off: a restored hold passes
    /// for the lock alone (issue 27's first bug).
    pub restore_verifies: bool,
    /// (i) A conversion that ends in an error (no reply, too few replicas)
    /// leaves its hold's kind unknown until asked (`Lock::convert`). Off: it
    /// goes on counting on the hold it had, which the attempt may have changed
    /// or released.
    pub failed_conversion_asks: bool,
    /// (q) A token whose give-back (a WAIT shortfall's) was sent or is due is
    /// never counted on again: `Lock::convert` lets the hold go, and
    /// `Lock::settle` (`ask_restored` too) drops such a token unasked
    /// (`Lease::left_to_settle`). Off: the hold's kind is left unknown, a
    /// retried acquire() asks Redis about it (or resolve.lua adopts the
    /// unresolved token) and keeps it, and the give-back frees the lock behind
    /// it.
    pub given_back_dropped: bool,
    /// (r) A grant we were told of by one master (a wake-up's fence and data,
    /// resolve.lua's answer) whose refresh ran on a master we learned of since
    /// is asked about again there (`Lease::confirm_grant`). Off: the old
    /// master's fence is counted on, beside the new master's own grant of the
    /// token with a fence of its own.
    pub grant_rereads_after_switch: bool,
    /// (s) A conversion that ends in an error lets the hold go: its next call
    /// releases the token (owner-checked, whatever the attempt, which may
    /// still be on its way, makes of it) and claims afresh (`Lock::let_go`).
    /// Off: it asks Redis what the hold is (`verify`) and counts on the
    /// answer, which a late downgrade then changes.
    pub failed_conversion_lets_go: bool,
    /// (t) A give-up whose resolve found its token holding, and whose release
    /// then went unanswered, leaves that release to the process (`pending`,
    /// `left_to_settle`): the claim fails, and no call adopts the token again.
    /// Off: it is the caller's to settle (`Error::Unresolved`), and the lock's
    /// next acquire() adopts what resolve.lua still finds, which the late
    /// release then frees behind it.
    pub give_up_defers_release: bool,
    /// (v) A refresh answered on its second run (the first one's link broke)
    /// leaves that first run as one on its way (`Hold::refreshed`): until the
    /// next refresh voids it, a renewal counts no more than its ttl from the
    /// renewal's start. Off: the answer cleared it, and a renewal counted its
    /// whole ttl (found by review of (u)).
    pub answered_retry_on_its_way: bool,
    /// (w) A grant read only once its bound had passed by our clock (a WAIT,
    /// a slow reply, a stall) is extended, owner-checked, and WAITed for
    /// before it is reported, and counted on from that extension
    /// (`Lease::reconfirm`, twice at most); not ours any more, the claim asks
    /// again with a fresh token (a conversion's hold is let go). Off: it is
    /// reported held, as before the fix (found by review, stop 55).
    pub grant_reconfirms: bool,
    /// (x) A conversion carries its old hold's refreshes left unanswered, which
    /// may still run and end the converted lease at their own ttl: read after
    /// that bound, the converted hold is extended first (owner-checked, voiding
    /// them), twice at most, and counted on from that send (`Lock::recount`).
    /// Off: it is reported held with the carried bound passed, as before the
    /// fix (found by review, stop 55).
    pub conversion_recounts: bool,
    /// (y) A conversion whose link broke after it was sent is not asked about
    /// again: its token cannot be voided, so the attempt may still run, late
    /// (after a retry, after the claim, after later conversions), whatever
    /// resolve.lua finds now; the hold is let go, as after a timeout. Off: the
    /// conversion asks resolve.lua and, finding it not done, again with its
    /// token, as before the fix (found by review, stop 56).
    pub broken_conversion_lets_go: bool,
    /// (af) With wait_replicas, `Lock::ask_restored`'s read of a restored
    /// token is followed by an owner-checked refresh that shortens nothing (to
    /// at least what was read), WAITed for: the hold counts on no more lease
    /// than the replica has. Off: on the master's word alone, as before stop
    /// 60 (a holder's refresh whose WAIT fell short left the master's lease
    /// longer than the replica's: two holders after a crash).
    pub restore_waits: bool,
    /// (ah) A session write told "revoked" (reported done: the session is
    /// logged out, the write's changes dropped) counts on the logout that
    /// revoked it, as a destroy does (fix (ae)): session_save.lua writes after
    /// it, and the write WAITs. Off: reported at once, as before stop 65; a
    /// crash then promotes a replica without the logout, and the session is
    /// back without the write's changes.
    pub revoked_write_waits: bool,
}

/// Where the failover is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Node 0 is the master, node 1 its replica.
    Steady,
    /// Node 0 died; node 1 is the master, without a replica.
    Crashed,
    /// Node 0 is back, as node 1's replica (after a full sync).
    Restarted,
    /// Node 1 is the master; node 0 still takes writes from whoever sends them.
    Promoted,
    /// Node 0 is node 1's replica (after a full sync).
    Demoted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub store: Store,
    pub up: bool,
    /// A master (or an old master nobody told yet); a replica answers READONLY.
    pub writable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cluster {
    pub nodes: [Node; 2],
    /// The sentinels' generation: 1 while node 0 is the master, 2 after the switch.
    pub generation: u8,
    /// The replication stream: what the master wrote that its replica has not
    /// applied yet, oldest first (each entry the keys after one write: scripts
    /// replicate as their effects, expiries as absolute times).
    pub stream: Slots<Store, 3>,
    /// The node that follows the master, if any.
    pub replica: Option<u8>,
    /// The server clock in microseconds (see `redis::MICROS_PER_TICK`).
    pub micros: u16,
    pub phase: Phase,
}

impl Cluster {
    pub fn master(&self) -> u8 {
        self.generation - 1
    }
}

/// Facts about the run that the properties need and Redis does not keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// The last fencing token a client got while counting on its hold.
    pub last_fence: u16,
    pub fence_regressed: bool,
    /// The same, for holds outside the failover window only.
    pub last_fence_outside_window: u16,
    pub fence_regressed_outside_window: bool,
    /// Session writes reported saved (bits: write ids).
    pub acked: u16,
    /// Session writes deleted by the first run of a revocation (a logout that
    /// took effect then), or by a session request's destroy.
    pub deleted: u16,
    /// A destroy run again found its first run's marker.
    pub logout_confirmed: bool,
    /// A fresh id's write run again (or late) found its first run's marker.
    pub put_by_marker: bool,
    /// The session data (bits: the write ids that stored them) a logout
    /// reported done removed: the data a request's destroy read, or what a
    /// `Revoker`'s runs deleted on the master.
    pub logged_out: u16,
    /// What the `Revoker`'s runs deleted on the master (bits: write ids).
    pub revoker_deleted: u16,
    /// A destroy told "revoked" counted on another request's logout.
    pub destroy_counted_on_logout: bool,
    /// A write told "revoked" counted on another request's logout.
    pub write_counted_on_logout: bool,
    /// A destroy told "revoked", short of replicas, ran again after a switch.
    pub revoked_destroy_rerun: bool,
    /// Each revocation that ran: its nonce, and the token its first run handed
    /// the lock to.
    pub revokes: Slots<(u8, Option<Token>), 2>,
    /// A revocation's second run revoked the lease its first run handed on.
    pub revoked_own_handoff: bool,
    /// The token of the hold behind `last_fence` (a restored object counts on
    /// the same grant again).
    pub last_fence_token: Token,
    /// A token a client detached, for another to restore.
    pub detached: Option<Token>,
    /// The limit of the semaphore object whose claim admitted the last permit.
    pub last_limit: u8,
    /// Tokens whose cleanup (an abandon, a release left to run) was lost in the
    /// network: Redis may keep what they hold until it expires.
    pub forsaken: Slots<Token, 6>,
    /// A script run granted shared holds to two waiters or more at once.
    pub woken_together: bool,
    /// A conversion found its own hold ran out.
    pub lapsed: bool,
    /// A claim reported a hold whose bound had passed (fix (w) reverted).
    pub reported_lapsed: bool,
    /// A grant read after its bound was extended before it was reported.
    pub reconfirmed: bool,
    /// A conversion read after a carried refresh's bound was extended before
    /// it was reported (fix (x)).
    pub recounted: bool,
    /// A script run gave a token a hold (the lock, a read hold, a permit) that
    /// nobody wanted any more (see `State::wanted`).
    pub unwanted_grant: Option<Token>,
    /// How many tokens each client had made when the replica was promoted: a
    /// promoted replica may lack their release or their leaving the queue (not
    /// WAITed for: a lost release only delays the next holder until the lease
    /// ends by itself), and grant them again.
    pub before_failover: [u8; 3],
    /// A release that answered 1 left the lock free while a waiter could have
    /// had it (lib.lua's `grant`, run again right after, would hand it on).
    pub stranded: bool,
    /// A waiter popped a grant that a logout had revoked before it woke: the
    /// session as it was before the logout (fix (ac)).
    pub popped_revoked: bool,
    /// A waiter popped a grant that a forced release had taken before it
    /// woke (fix (ag)).
    pub popped_forced: bool,
    /// A forced release took a grant its waiter had not read yet.
    pub forced_unread: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub now: Time,
    pub redis: Cluster,
    pub clients: Slots<Client, 3>,
    /// Commands in the network that nobody waits for any more: a link broke
    /// before they reached Redis, or a call was left to run by itself.
    pub orphans: Orphans,
    pub faults: u8,
    pub crashes: u8,
    pub ghost: Ghost,
}

/// A user call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Acquire,
    AcquireRead,
    Upgrade,
    Downgrade,
    Detach,
    Restore,
    Sync,
    Refresh(Time),
    Fence,
    Release,
    Open,
    Write,
    /// A locked destroy (a logout of the session this request holds).
    Destroy,
    Revoke,
    Force,
    Put,
    Crash,
    /// acquire() (or acquireRead()) again, after a conversion that threw: the
    /// user retries with the same object (`Lock::acquire`'s `verify`).
    Retry(Want),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    Broken,
    TimedOut,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    User(u8, Op),
    /// Redis runs the command on this link (a script: atomically).
    Run(u8, Link),
    /// WAIT returns: the replica has it.
    Ack(u8, Link),
    /// WAIT runs out with too few replicas.
    Shortfall(u8, Link),
    /// The reply reaches the client.
    Receive(u8, Link),
    /// The link fails: a reply lost, or a command left in the network.
    Break(u8, Link, Fault),
    /// BLPOP's nap ends with nothing popped.
    NapEnds(u8),
    /// The watchdog sends a renewal.
    Renew(u8),
    /// The watchdog looks for the hold on the new master (after a switch).
    Check(u8),
    /// The client hears of the switch (its subscription to the sentinels), and
    /// its watchdog checks its hold at once.
    Learn(u8),
    RunOrphan(u8),
    DropOrphan(u8),
    /// The master dies and the replica is promoted, having applied this many
    /// entries of the stream.
    Crash(u8),
    /// `SENTINEL FAILOVER` promotes the replica, having applied this many
    /// entries of the stream.
    Promote(u8),
    Demote,
    Restart,
}

pub struct System {
    pub config: Config,
}

impl System {
    pub fn max_ttl(&self) -> Time {
        let c = &self.config;
        c.refresh_ttls.iter().copied().fold(c.ttl, Time::max)
    }
}

impl State {
    pub fn client(&self, c: u8) -> &Client {
        &self.clients[usize::from(c)]
    }

    pub fn client_mut(&mut self, c: u8) -> &mut Client {
        &mut self.clients[usize::from(c)]
    }

    /// The store of the master the sentinels name.
    pub fn master(&self) -> &Store {
        &self.redis.nodes[usize::from(self.redis.master())].store
    }

    /// Runs `req` on `node`: one atomic script, then what the client's call
    /// does on the same link before WAIT (`Lease::replicate_claim` refreshes a
    /// lease found handed). `None`: the command blocks (BLPOP on an empty list).
    pub fn execute(&mut self, cfg: &Config, node: u8, req: Req) -> Option<(Reply, bool)> {
        let now = self.now;
        let n = usize::from(node);
        let before = self.redis.nodes[n].store;
        let Cluster { nodes, micros, .. } = &mut self.redis;
        let mut script = Script {
            db: &mut nodes[n].store,
            now,
            micros,
            touched: false,
            scripts: cfg.fixes.scripts,
        };
        let session =
            |t: Token| matches!(cfg.clients[usize::from(t.client)], Program::Session { .. });
        let permit =
            |t: Token| matches!(cfg.clients[usize::from(t.client)], Program::Permit { .. });
        let reply = match req {
            Req::Acquire { token, wait, mode } => {
                let reply = script.acquire(token, cfg.ttl, wait, mode);
                if cfg.wait_replicas && cfg.fixes.grant_waits {
                    if let Reply::Handed { .. } = reply {
                        script.refresh(token, cfg.ttl, How::Grant, false);
                    }
                }
                reply
            }
            Req::Open { token, wait } => {
                let reply = script.session_open(token, cfg.ttl, wait);
                if cfg.wait_replicas && cfg.fixes.grant_waits {
                    if let Reply::Handed { .. } = reply {
                        script.refresh(token, cfg.ttl, How::Grant, false);
                    }
                }
                reply
            }
            Req::Blpop { token } => script.blpop(token)?,
            Req::Resolve { token } => script.resolve(token, session(token)),
            Req::Refresh { token, ttl, how } => {
                script.refresh(token, ttl, how, how == How::Renewal && session(token))
            }
            Req::Fence { token } => script.fence(token),
            Req::Inspect { token } => {
                let reply = script.inspect(token);
                if cfg.wait_replicas && cfg.fixes.restore_waits {
                    if let Reply::Owned(Some(o)) = reply {
                        script.refresh(token, o.pttl.max(1), How::Grant, false);
                    }
                }
                reply
            }
            Req::Release { token } => script.release(token, session(token), permit(token)),
            Req::Save { token, data } => script.session_save(token, data),
            Req::SavedBefore { data } => script.saved_before(data),
            Req::Destroy { token } => script.session_destroy(token),
            Req::DestroyedBefore => script.destroyed_before(),
            Req::Revoke { nonce } => script.session_revoke(nonce),
            Req::Force { nonce } => script.force_release(nonce),
            Req::Put { nonce, data } => script.session_put(nonce, data),
            Req::Abandon { token } => {
                if let Reply::Owned(Some(_)) = script.resolve(token, session(token)) {
                    script.release(token, session(token), permit(token));
                }
                Reply::Int(0)
            }
        };
        let wrote = script.touched || self.redis.nodes[n].store != before;
        if let (Req::Release { token }, Reply::Int(1)) = (req, reply) {
            if !session(token) && node == self.redis.master() {
                self.note_handoff(cfg, node);
            }
        }
        say(|| format!("{} runs {} -> {reply:?}", ["A", "B"][n], show(req)));
        if let Req::Revoke { nonce } = req {
            self.note_revoke(cfg, nonce, &before, node);
        }
        if let Req::Force { .. } = req {
            let after = &self.redis.nodes[n].store;
            self.ghost.forced_unread |= after
                .forced
                .iter()
                .any(|t| !before.forced.contains(t) && before.wake.iter().any(|w| w.token == *t));
        }
        if let Req::Put { nonce, .. } = req {
            self.ghost.put_by_marker |= before.put.contains(&nonce);
        }
        if let (Req::Blpop { token }, Reply::Popped(_)) = (req, reply) {
            self.ghost.popped_revoked |= before.ousted.contains(&token);
            if before.forced.contains(&token) {
                // Counted on from now (in mutual exclusion too): it learned
                // of the grant after the forced release took it.
                self.ghost.popped_forced = true;
                self.redis.nodes[n].store.forced.retain(|t| *t != token);
            }
        }
        if let (Req::Destroy { token }, Reply::Int(1)) = (req, reply) {
            if owns(before.lock, token) {
                // The logout's one effect: what it deleted may be gone (on a
                // deposed master it is undone with that master's writes).
                if node == self.redis.master() {
                    self.ghost.deleted |= before.data.map_or(0, |d| d.lineage);
                }
                self.redis.nodes[n].store.logged_out |= 1 << token.client;
            } else {
                // Run again, it found its first run's marker.
                self.ghost.logout_confirmed = true;
            }
        }
        self.note_shared(cfg, &before, node);
        self.note_grants(&before, node);
        if wrote && self.redis.replica.is_some() && node == self.redis.master() {
            let after = self.redis.nodes[n].store;
            self.redis.stream.push(after);
            if self.redis.stream.len() > usize::from(cfg.max_lag) {
                self.replicate();
            }
        }
        Some((reply, wrote))
    }

    /// Whether a write just made on `node` can ever be acknowledged by WAIT,
    /// and after how many more entries.
    fn behind(&self, node: u8) -> Option<u8> {
        (self.redis.replica.is_some() && node == self.redis.master())
            .then(|| self.redis.stream.len() as u8)
    }

    /// The replica applies the oldest entry of the stream.
    pub fn replicate(&mut self) {
        let Some(replica) = self.redis.replica else {
            return;
        };
        let mut store = self.redis.stream.remove(0);
        store.expire(self.now);
        self.redis.nodes[usize::from(replica)].store = store;
        let master = self.redis.master();
        for client in self.clients.iter_mut() {
            for call in [&mut client.link, &mut client.dog].into_iter().flatten() {
                if let Stage::Waiting {
                    behind: Some(k), ..
                } = &mut call.stage
                {
                    if call.node == master && *k > 0 {
                        *k -= 1;
                    }
                }
            }
        }
    }

    /// The master's stream is gone (a promotion): no WAIT on it can succeed.
    fn cut_replication(&mut self) {
        self.redis.stream.clear();
        self.redis.replica = None;
        for client in self.clients.iter_mut() {
            for call in [&mut client.link, &mut client.dog].into_iter().flatten() {
                if let Stage::Waiting { behind, .. } = &mut call.stage {
                    if *behind != Some(0) {
                        *behind = None;
                    }
                }
            }
        }
    }

    /// Node 0 becomes the new master's replica, by a full sync.
    fn follow(&mut self) {
        self.redis.nodes[0].store = self.redis.nodes[1].store;
        self.redis.nodes[0].up = true;
        self.redis.nodes[0].writable = false;
        self.redis.replica = Some(0);
    }

    /// Shared holds a script run added: the limit of the object whose claim
    /// admitted the last permit, and whether readers were woken together.
    fn note_shared(&mut self, cfg: &Config, before: &Store, node: u8) {
        // An old master's writes (until the sentinels demote it) are thrown away.
        if node != self.redis.master() {
            return;
        }
        let after = &self.redis.nodes[usize::from(node)].store;
        let mut granted = 0;
        for h in after.holders.iter() {
            if before.holders.iter().any(|b| b.token == h.token) {
                continue;
            }
            if let Program::Permit { limit, .. } = cfg.clients[usize::from(h.token.client)] {
                self.ghost.last_limit = limit;
            }
            if after.wake.iter().any(|w| w.token == h.token) {
                granted += 1;
            }
        }
        if granted >= 2 {
            self.ghost.woken_together = true;
        }
    }

    fn note_revoke(&mut self, cfg: &Config, nonce: u8, before: &Store, node: u8) {
        let after = &self.redis.nodes[usize::from(node)].store;
        // A session request's logout (its destroy's fallback) takes effect
        // once in the master's history: a deletion after its destroy or an
        // earlier run deletes what others wrote since, which is kept. A
        // `Revoker`'s acts where its marker is not (its first run, or one
        // after a failover that lost the first); without a marker on every
        // run (fixes (b), (f) reverted, no failover), its first run does.
        let client = nonce / 4;
        let session = matches!(cfg.clients[usize::from(client)], Program::Session { .. });
        let earlier = self.ghost.revokes.iter().find(|(n, _)| *n == nonce);
        let first = match session {
            true => before.logged_out & 1 << client == 0,
            false if cfg.fixes.scripts.revoke_marker == RevokeMarker::Always => {
                !before.revoked.contains(&nonce)
            }
            false => earlier.is_none(),
        };
        // Only on the master: a deposed master's deletion is undone with its
        // writes, and crediting it would excuse the loss of what it deleted.
        if first && after.data.is_none() && node == self.redis.master() {
            self.ghost.deleted |= before.data.map_or(0, |d| d.lineage);
        }
        if !session && after.data.is_none() && node == self.redis.master() {
            self.ghost.revoker_deleted |= before.data.map_or(0, Data::bit);
        }
        let holder = |s: &Store| s.lock.map(|l| l.token);
        let (was, is) = (holder(before), holder(after));
        match earlier {
            None => {
                let handed = is.filter(|_| is != was);
                self.ghost.revokes.push((nonce, handed));
            }
            Some(&(_, handed)) => {
                if was.is_some() && was == handed && is != was {
                    self.ghost.revoked_own_handoff = true;
                }
            }
        }
        if session {
            self.redis.nodes[usize::from(node)].store.logged_out |= 1 << client;
        }
    }

    /// Sends `req` on a client's link, to the master it knows.
    pub fn send(&mut self, c: u8, link: Link, req: Req) {
        let client = self.client_mut(c);
        let generation = client.generation;
        *client.call_mut(link) = Some(Call {
            req,
            node: generation - 1,
            generation,
            stage: Stage::Sent,
        });
    }

    /// Leaves a command in the network (or loses it, when too many are there).
    pub fn orphan(&mut self, cfg: &Config, node: u8, req: Req) {
        if self.orphans.contains(&(node, req)) {
            return;
        }
        if self.orphans.len() < usize::from(cfg.max_orphans) {
            self.orphans.push((node, req));
        } else {
            self.forsake(req);
        }
    }

    /// A command about a token is lost: nobody will clean up after it.
    pub fn forsake(&mut self, req: Req) {
        if let Some(token) = req_token(req) {
            if !self.ghost.forsaken.contains(&token) {
                self.ghost.forsaken.push(token);
            }
        }
    }

    pub fn node_up(&self, node: u8) -> bool {
        self.redis.nodes[usize::from(node)].up
    }

    /// A one-line picture of the state, for traces.
    pub fn summary(&self) -> String {
        let mut s = format!("t={}", self.now);
        for (i, node) in self.redis.nodes.iter().enumerate() {
            let name = ["A", "B"][i];
            let role = if !node.up {
                "down"
            } else if usize::from(self.redis.master()) == i {
                "master"
            } else if node.writable {
                "old master"
            } else {
                "replica"
            };
            let _ = write!(s, " | {name} {role}: lock={:?}", node.store.lock);
            if !node.store.holders.is_empty() {
                let holders: Vec<String> = node
                    .store
                    .holders
                    .iter()
                    .map(|h| format!("{:?}<{}", h.token, h.until))
                    .collect();
                let _ = write!(s, " holders={holders:?}");
            }
            if !node.store.waiters.is_empty() {
                let queue: Vec<String> = node
                    .store
                    .waiters
                    .iter()
                    .map(|w| format!("{:?}{:?}", w.token, w.mode))
                    .collect();
                let _ = write!(s, " queue={queue:?}");
            }
            if node.store.data.is_some() {
                let _ = write!(s, " data={:?}", node.store.data);
            }
        }
        if !self.redis.stream.is_empty() {
            let _ = write!(s, " | lag {}", self.redis.stream.len());
        }
        for (i, client) in self.clients.iter().enumerate() {
            let _ = write!(s, " | c{i}: {}", describe(client, self.now));
        }
        if !self.orphans.is_empty() {
            let _ = write!(s, " | in the network: {:?}", self.orphans);
        }
        if let Some(t) = self.ghost.unwanted_grant {
            let _ = write!(s, " | UNWANTED GRANT to {t:?}");
        }
        s
    }
}

/// The token a command is about.
pub fn req_token(req: Req) -> Option<Token> {
    match req {
        Req::Acquire { token, .. }
        | Req::Open { token, .. }
        | Req::Blpop { token }
        | Req::Resolve { token }
        | Req::Refresh { token, .. }
        | Req::Fence { token }
        | Req::Inspect { token }
        | Req::Release { token }
        | Req::Save { token, .. }
        | Req::Destroy { token }
        | Req::Abandon { token } => Some(token),
        Req::SavedBefore { .. }
        | Req::DestroyedBefore
        | Req::Revoke { .. }
        | Req::Force { .. }
        | Req::Put { .. } => None,
    }
}

fn describe(client: &Client, now: Time) -> String {
    let mut s = match client.pc {
        Pc::Claim(c) => format!("claim {:?} {:?}", c.token, c.step),
        pc => format!("{pc:?}"),
    };
    if let Some(h) = client.hold {
        let counting = if h.watch.counting(now) {
            "COUNTS ON IT"
        } else {
            "not counting"
        };
        let _ = write!(
            s,
            " hold {:?} {:?} fence {} until {} ({:?}, gen {}, {counting})",
            h.token, h.kind, h.fence, h.watch.end, h.watch.state, h.watch.generation
        );
        if h.weight != 1 {
            let _ = write!(s, " of {} permits", h.weight);
        }
    }
    if client.generation > 1 {
        let _ = write!(s, " knows gen {}", client.generation);
    }
    s
}

impl Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let cfg = &self.config;
        let store = Store {
            data: cfg.stored.then_some(STORED),
            ..Store::default()
        };
        let node = |writable| Node {
            store,
            up: true,
            writable,
        };
        vec![State {
            now: 0,
            redis: Cluster {
                nodes: [node(true), node(false)],
                generation: 1,
                stream: Slots::new(),
                replica: Some(1),
                micros: 0,
                phase: Phase::Steady,
            },
            clients: cfg.clients.iter().map(|_| Client::new()).collect(),
            orphans: Slots::new(),
            faults: cfg.faults,
            crashes: cfg.crashes,
            ghost: Ghost {
                acked: if cfg.stored { STORED.lineage } else { 0 },
                ..Ghost::default()
            },
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.config;
        if s.now < cfg.horizon {
            actions.push(Action::Tick);
        }
        for (i, client) in s.clients.iter().enumerate() {
            let c = i as u8;
            if client.pc == Pc::Crashed {
                continue;
            }
            self.user_ops(s, c, actions);
            for link in [Link::Request, Link::Watchdog] {
                let Some(call) = client.call(link) else {
                    continue;
                };
                let up = s.node_up(call.node);
                let fault = (s.faults > 0 && (cfg.faulty)(call.req)) || !up;
                match call.stage {
                    Stage::Sent => {
                        if let Req::Blpop { token } = call.req {
                            let node = &s.redis.nodes[usize::from(call.node)];
                            if node.up
                                && node.writable
                                && node.store.wake.iter().any(|w| w.token == token)
                            {
                                actions.push(Action::Run(c, link));
                            }
                            actions.push(Action::NapEnds(c));
                            continue;
                        }
                        if up {
                            actions.push(Action::Run(c, link));
                        }
                    }
                    Stage::Waiting { behind, .. } => {
                        if behind.is_some() {
                            actions.push(Action::Ack(c, link));
                        }
                        if behind != Some(0) {
                            actions.push(Action::Shortfall(c, link));
                        }
                    }
                    Stage::Answered { .. } => actions.push(Action::Receive(c, link)),
                }
                if fault {
                    actions.push(Action::Break(c, link, Fault::Broken));
                    actions.push(Action::Break(c, link, Fault::TimedOut));
                }
            }
            if let Some(h) = client.hold {
                let w = h.watch;
                // `Watch::due`: by the shortest ttl a refresh on its way may leave.
                let ttl = w.setting.map_or(w.ttl, |(_, t)| t.min(w.ttl));
                let due = w.retry || w.end.saturating_sub(s.now) <= ttl * 2 / 3;
                if w.renew && w.counting(s.now) && client.dog.is_none() && due {
                    actions.push(Action::Renew(c));
                }
                if w.state == WatchState::Watching
                    && w.watched
                    && w.generation < client.generation
                    && s.node_up(client.generation - 1)
                {
                    actions.push(Action::Check(c));
                }
            }
            if client.generation < s.redis.generation {
                actions.push(Action::Learn(c));
            }
        }
        for (i, &(node, _)) in s.orphans.iter().enumerate() {
            if s.node_up(node) {
                actions.push(Action::RunOrphan(i as u8));
            }
            actions.push(Action::DropOrphan(i as u8));
        }
        match s.redis.phase {
            Phase::Steady => {
                // The replica may have applied any part of the stream by then.
                for applied in 0..=s.redis.stream.len() as u8 {
                    if cfg.failovers.contains(&Failover::Crash) {
                        actions.push(Action::Crash(applied));
                    }
                    if cfg.failovers.contains(&Failover::Planned) {
                        actions.push(Action::Promote(applied));
                    }
                }
            }
            Phase::Crashed => actions.push(Action::Restart),
            Phase::Promoted => actions.push(Action::Demote),
            Phase::Restarted | Phase::Demoted => {}
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let cfg = &self.config;
        let mut s = *last;
        match action {
            Action::Tick => {
                s.now += 1;
                let now = s.now;
                for node in s.redis.nodes.iter_mut() {
                    node.store.expire(now);
                }
                for store in s.redis.stream.iter_mut() {
                    store.expire(now);
                }
                for client in s.clients.iter_mut() {
                    if let Some(h) = &mut client.hold {
                        if h.watch.state == WatchState::Watching
                            && h.watch.watched
                            && now >= h.watch.end
                        {
                            h.watch.state = WatchState::Expired;
                        }
                    }
                }
            }
            Action::User(c, op) => self.user(&mut s, c, op),
            Action::Run(c, link) => self.run(&mut s, c, link),
            Action::Ack(c, link) | Action::Shortfall(c, link) => {
                let call = s.client_mut(c).call_mut(link).as_mut()?;
                let Stage::Waiting { reply, behind } = call.stage else {
                    return None;
                };
                let acked = matches!(action, Action::Ack(..));
                say(|| match acked {
                    true => format!("c{c}: WAIT 1 -> 1 (the replica has it)"),
                    false => format!("c{c}: WAIT 1 -> 0 (timed out: too few replicas)"),
                });
                call.stage = Stage::Answered {
                    reply,
                    acks: Some(acked),
                };
                if let (Action::Ack(..), Some(k)) = (action, behind) {
                    // The replica applies the stream up to this write.
                    for _ in 0..k {
                        s.replicate();
                    }
                }
                self.read_reply(&mut s, c, link);
            }
            Action::Receive(c, link) => {
                let call = s.client_mut(c).call_mut(link).take()?;
                let Stage::Answered { reply, acks } = call.stage else {
                    return None;
                };
                // A reply that straddles a switch is a broken link.
                let outcome = if call.generation != s.client(c).generation {
                    Outcome::Broken
                } else {
                    Outcome::Reply(reply, acks)
                };
                self.react(&mut s, c, link, call, outcome);
            }
            Action::Break(c, link, fault) => {
                let call = s.client_mut(c).call_mut(link).take()?;
                if s.node_up(call.node) {
                    s.faults -= 1;
                }
                if call.stage == Stage::Sent && !matches!(call.req, Req::Blpop { .. }) {
                    s.orphan(cfg, call.node, call.req);
                }
                let outcome = match fault {
                    Fault::Broken => Outcome::Broken,
                    Fault::TimedOut => Outcome::TimedOut,
                };
                self.react(&mut s, c, link, call, outcome);
            }
            Action::NapEnds(c) => {
                let call = s.client_mut(c).link.take()?;
                self.nap_over(&mut s, c, call);
            }
            Action::Renew(c) => self.renew(&mut s, c),
            Action::Check(c) => self.check(&mut s, c),
            Action::Learn(c) => {
                say(|| format!("c{c} hears of the switch"));
                s.client_mut(c).generation = s.redis.generation;
                self.check(&mut s, c);
            }
            Action::RunOrphan(i) => {
                let (node, req) = s.orphans.remove(usize::from(i));
                say(|| format!("{} arrives late, nobody waits for its reply", show(req)));
                if s.redis.nodes[usize::from(node)].writable {
                    s.execute(cfg, node, req);
                } else {
                    // READONLY: lost (a deferred cleanup runs again at its
                    // process's next call, which the model's client never makes).
                    s.forsake(req);
                }
            }
            Action::DropOrphan(i) => {
                let (_, req) = s.orphans.remove(usize::from(i));
                s.forsake(req);
            }
            Action::Crash(applied) => {
                say(|| format!("A dies; B, having applied {applied} entries, is promoted"));
                for _ in 0..applied {
                    s.replicate();
                }
                s.note_failover();
                s.redis.nodes[0].up = false;
                s.redis.nodes[0].writable = false;
                s.redis.generation = 2;
                s.redis.nodes[1].writable = true;
                s.cut_replication();
                s.redis.phase = Phase::Crashed;
            }
            Action::Promote(applied) => {
                say(|| {
                    format!(
                        "B, having applied {applied} entries, is promoted; A still takes writes"
                    )
                });
                for _ in 0..applied {
                    s.replicate();
                }
                s.note_failover();
                s.redis.generation = 2;
                s.redis.nodes[1].writable = true;
                s.cut_replication();
                s.redis.phase = Phase::Promoted;
            }
            Action::Demote => {
                say(|| "A is demoted: a replica of B (full sync)".to_string());
                s.follow();
                s.redis.phase = Phase::Demoted;
            }
            Action::Restart => {
                say(|| "A comes back as a replica of B (full sync)".to_string());
                s.follow();
                s.redis.phase = Phase::Restarted;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |m: &System, s: &State| {
                m.exclusive(s, |_, _| true)
            }),
            Property::always(
                "mutual exclusion outside the failover window",
                |m: &System, s: &State| {
                    m.exclusive(s, |s, c| {
                        c.hold
                            .is_some_and(|h| h.watch.generation == s.redis.generation)
                    })
                },
            ),
            Property::always(
                "never more permits than the limit that admitted the last one",
                |m: &System, s: &State| {
                    let counted = m.permits_counted(s);
                    // Redis's own count too, until a failover: a promoted replica
                    // may lack releases (not WAITed for), which only keeps
                    // permits out longer.
                    let live = match s.redis.generation {
                        1 => s
                            .master()
                            .holders
                            .iter()
                            .filter(|h| h.until > s.now)
                            .map(|h| usize::from(h.weight))
                            .sum(),
                        _ => 0,
                    };
                    let permits = m
                        .config
                        .clients
                        .iter()
                        .any(|p| matches!(p, Program::Permit { .. }));
                    !permits || (counted.max(live) <= usize::from(s.ghost.last_limit))
                },
            ),
            Property::always(
                "a claim reports a hold only while it counts on it",
                |_, s: &State| !s.ghost.reported_lapsed,
            ),
            Property::always("no grant outlives its holder's interest", |_, s: &State| {
                s.ghost.unwanted_grant.is_none()
            }),
            Property::always("no hold outlives its holder's interest", |_, s: &State| {
                let db = s.master();
                db.lock
                    .filter(|l| l.until > s.now)
                    .map(|l| l.token)
                    .into_iter()
                    .chain(
                        db.holders
                            .iter()
                            .filter(|h| h.until > s.now)
                            .map(|h| h.token),
                    )
                    .all(|t| s.wanted(t))
            }),
            Property::always(
                "a release leaves nobody waiting for what it freed",
                |_, s: &State| !s.ghost.stranded,
            ),
            Property::always("fencing tokens increase", |_, s: &State| {
                !s.ghost.fence_regressed
            }),
            Property::always(
                "fencing tokens increase outside the failover window",
                |_, s: &State| !s.ghost.fence_regressed_outside_window,
            ),
            Property::always("acknowledged session writes are kept", |_, s: &State| {
                let kept = s.master().data.map_or(0, |d| d.lineage) | s.ghost.deleted;
                s.ghost.acked & !kept == 0
            }),
            Property::always("a logout reported done stays done", |_, s: &State| {
                // Nor data built on it (a revoked holder's save let in).
                s.master()
                    .data
                    .is_none_or(|d| s.ghost.logged_out & d.lineage == 0)
            }),
            Property::always(
                "a revocation spares the lease it handed on",
                |_, s: &State| !s.ghost.revoked_own_handoff,
            ),
            // A save of a live hold told "revoked" is not a logout's doing:
            // the hold came after it (fix (ab)).
            Property::always("a live session hold is never revoked", |_, s: &State| {
                let db = s.master();
                db.lock
                    .is_none_or(|l| l.until <= s.now || !db.ousted.contains(&l.token))
            }),
            Property::always(
                "no waiter wakes to a grant a logout revoked",
                |_, s: &State| !s.ghost.popped_revoked,
            ),
            Property::always(
                "no waiter wakes to a grant a forced release took",
                |_, s: &State| !s.ghost.popped_forced,
            ),
            Property::always(
                "every key of a lease expires in time",
                |m: &System, s: &State| {
                    let cfg = &m.config;
                    let keep = s.now + cfg.wait + WAKE_KEEP;
                    s.redis.nodes.iter().filter(|n| n.up).all(|n| {
                        let db = &n.store;
                        db.lock.is_none_or(|l| l.until <= s.now + m.max_ttl())
                            && db.holders_until <= s.now + m.max_ttl()
                            && db.holders.iter().all(|h| h.until <= db.holders_until)
                            && db.waiters_until <= keep
                            && db.waiters.iter().all(|w| w.deadline <= s.now + cfg.wait)
                            && db.wake.iter().all(|w| w.until <= keep)
                    })
                },
            ),
            Property::sometimes(
                "a forced release takes a grant before its waiter woke",
                |_, s: &State| s.ghost.forced_unread,
            ),
            Property::sometimes("a waiter is handed the lock", |_, s: &State| {
                s.clients.iter().any(|c| {
                    c.counts_on_hold(s.now)
                        && c.hold.is_some_and(|h| h.via == crate::client::Via::Woken)
                })
            }),
            Property::sometimes("a hold on the promoted master", |_, s: &State| {
                s.clients.iter().any(|c| {
                    c.counts_on_hold(s.now) && c.hold.is_some_and(|h| h.watch.generation == 2)
                })
            }),
            Property::sometimes("a session write acknowledged", |_, s: &State| {
                s.ghost.acked != 0
            }),
            Property::sometimes("a logout run again finds it took effect", |_, s: &State| {
                s.ghost.logout_confirmed
            }),
            Property::sometimes("a destroy counts on another's logout", |_, s: &State| {
                s.ghost.destroy_counted_on_logout
            }),
            Property::sometimes("a write counts on another's logout", |_, s: &State| {
                s.ghost.write_counted_on_logout
            }),
            Property::sometimes(
                "a destroy told revoked runs again after a switch",
                |_, s: &State| s.ghost.revoked_destroy_rerun,
            ),
            Property::sometimes(
                "a fresh id's write answered by its marker",
                |_, s: &State| s.ghost.put_by_marker,
            ),
            Property::sometimes("readers share the lock", |m: &System, s: &State| {
                m.counting(s, |_, _| true, |k| k == Kind::Shared) >= 2
            }),
            Property::sometimes("readers woken together", |_, s: &State| {
                s.ghost.woken_together
            }),
            Property::sometimes("a writer queued ahead of a later reader", |_, s: &State| {
                let q = &s.master().waiters;
                q.iter()
                    .position(|w| matches!(w.mode, Mode::W | Mode::U))
                    .is_some_and(|i| q[i..].iter().any(|w| w.mode == Mode::R))
            }),
            Property::sometimes("an upgrade granted", |m: &System, s: &State| {
                s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                    matches!(p, Program::Reader { .. }) && c.counted(s.now) == Some(Kind::Alone)
                })
            }),
            Property::sometimes("a downgrade", |m: &System, s: &State| {
                s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                    matches!(p, Program::Writer { .. }) && c.counted(s.now) == Some(Kind::Shared)
                })
            }),
            // acquire() again after a downgrade that held (`reupgrade`).
            Property::sometimes(
                "a downgraded writer upgraded again",
                |m: &System, s: &State| {
                    s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                        matches!(
                            p,
                            Program::Writer {
                                reupgrade: true,
                                ..
                            }
                        ) && c.refreshes > c.ops
                            && c.counted(s.now) == Some(Kind::Alone)
                    })
                },
            ),
            // acquire() again after an upgrade that threw (`Op::Retry`).
            Property::sometimes(
                "a retried upgrade holds the lock alone",
                |m: &System, s: &State| {
                    s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                        matches!(p, Program::Reader { .. })
                            && c.refreshes > c.ops
                            && c.counted(s.now) == Some(Kind::Alone)
                    })
                },
            ),
            // acquireRead() again after a downgrade that threw.
            Property::sometimes(
                "a retried downgrade holds the lock shared",
                |m: &System, s: &State| {
                    s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                        matches!(p, Program::Writer { .. })
                            && c.refreshes > c.ops
                            && c.counted(s.now) == Some(Kind::Shared)
                    })
                },
            ),
            Property::sometimes("a conversion whose hold ran out", |_, s: &State| {
                s.ghost.lapsed
            }),
            Property::sometimes("permits at the limit", |m: &System, s: &State| {
                let n = m.permits_counted(s);
                n >= 2 && n == usize::from(s.ghost.last_limit)
            }),
            Property::sometimes(
                "several permits at once, beside another holder",
                |m: &System, s: &State| {
                    let heavy = s.clients.iter().zip(&m.config.clients).any(|(c, p)| {
                        matches!(p, Program::Permit { weight, .. } if *weight > 1)
                            && c.counted(s.now) == Some(Kind::Permit)
                    });
                    heavy && m.counting(s, |_, _| true, |k| k == Kind::Permit) >= 2
                },
            ),
            Property::sometimes("a permit handed to a waiter", |_, s: &State| {
                s.clients.iter().any(|c| {
                    c.counted(s.now) == Some(Kind::Permit)
                        && c.hold.is_some_and(|h| h.via == crate::client::Via::Woken)
                })
            }),
            Property::sometimes(
                "a grant read after its bound extended before it was reported",
                |_, s: &State| s.ghost.reconfirmed,
            ),
            Property::sometimes(
                "a conversion read after a carried refresh's bound extended before it was reported",
                |_, s: &State| s.ghost.recounted,
            ),
            Property::sometimes("a restored hold relied on", |_, s: &State| {
                s.clients.iter().any(|c| {
                    c.counted(s.now).is_some()
                        && c.hold
                            .is_some_and(|h| h.via == crate::client::Via::Restored)
                })
            }),
        ]
    }
}

impl System {
    /// How many clients (of locks and semaphores) count on a hold that `counts`,
    /// of a kind that `kind` takes.
    fn counting(
        &self,
        s: &State,
        counts: fn(&State, &Client) -> bool,
        kind: impl Fn(Kind) -> bool,
    ) -> usize {
        s.clients
            .iter()
            .zip(&self.config.clients)
            .filter(|(c, p)| {
                !matches!(
                    p,
                    Program::Session { .. } | Program::Revoker { .. } | Program::Forcer
                ) && c.counted(s.now).is_some_and(&kind)
                    && counts(s, c)
                    // Taken by a forced release: its holder learns so at its
                    // next call (owner-checked), by design.
                    && !c.hold.is_some_and(|h| s.master().forced.contains(&h.token))
            })
            .count()
    }

    /// How many permits clients count on (each its weight).
    fn permits_counted(&self, s: &State) -> usize {
        s.clients
            .iter()
            .zip(&self.config.clients)
            .filter_map(|(c, p)| match p {
                Program::Permit { weight, .. } if c.counted(s.now) == Some(Kind::Permit) => {
                    Some(usize::from(*weight))
                }
                // A restored permit: the weight its token took.
                Program::Restorer { .. } if c.counted(s.now) == Some(Kind::Permit) => {
                    c.hold.map(|h| usize::from(h.weight))
                }
                _ => None,
            })
            .sum()
    }

    /// No writer beside any other holder (among the holds that `counts`).
    fn exclusive(&self, s: &State, counts: fn(&State, &Client) -> bool) -> bool {
        let writers = self.counting(s, counts, |k| k == Kind::Alone);
        writers == 0 || (writers == 1 && self.counting(s, counts, |_| true) == 1)
    }

    /// What follows a command's run on its link: WAIT (with `wait_replicas`,
    /// after a write that grants or keeps what the caller will count on), or the
    /// reply.
    fn after_run(&self, req: Req, reply: Reply, wrote: bool, behind: Option<u8>) -> Stage {
        let cfg = &self.config;
        let wait = cfg.wait_replicas
            && wrote
            && match (req, reply) {
                (Req::Acquire { .. } | Req::Open { .. }, Reply::Took { .. }) => true,
                // Found handed: `replicate_claim` refreshed it on this link (in
                // the same step: it cannot have gone in between), and WAITs.
                (Req::Acquire { .. } | Req::Open { .. }, Reply::Handed { .. }) => {
                    cfg.fixes.grant_waits
                }
                // With fix (d) reverted, a renewal counts without WAIT.
                (
                    Req::Refresh {
                        how: How::Renewal, ..
                    },
                    Reply::Int(1),
                ) => cfg.fixes.renewals_wait,
                (
                    Req::Refresh { .. } | Req::Save { .. } | Req::Destroy { .. } | Req::Put { .. },
                    Reply::Int(1),
                ) => true,
                (Req::SavedBefore { .. } | Req::DestroyedBefore, Reply::Found(true)) => true,
                // `Lease::inspect_replicated` (fix (af)).
                (Req::Inspect { .. }, Reply::Owned(Some(_))) => cfg.fixes.restore_waits,
                // Told "revoked": a destroy counts on that logout (fix (ae)),
                // and so does a write (fix (ah)).
                (Req::Destroy { .. }, Reply::Int(2)) => true,
                (Req::Save { .. }, Reply::Int(2)) => cfg.fixes.revoked_write_waits,
                // `SessionStore::revoke` WAITs after every run, as
                // `Lease::force_release` does.
                (Req::Revoke { .. } | Req::Force { .. }, _) => true,
                _ => false,
            };
        if wait {
            return Stage::Waiting { reply, behind };
        }
        Stage::Answered { reply, acks: None }
    }

    /// Sends `req` on a client's link. A request thread's command that cannot
    /// fail runs at once: its thread sends nothing else meanwhile, so a command
    /// that waits in the network is one sent later, except for its client's
    /// bounds, which are timed from when it was sent and only shrink with the
    /// wait. One that may fail waits, so that its link can fail first and leave
    /// it to run late (the void marker's case). The watchdog's renewals always
    /// wait: one sent before the holder's refresh may run after it.
    ///
    /// A dead node's connections fail at once (a reset): the command never runs.
    pub fn send(&self, s: &mut State, c: u8, link: Link, req: Req) {
        s.send(c, link, req);
        let node = s.client(c).generation - 1;
        if !s.node_up(node) {
            say(|| format!("c{c}: {} to a dead node: the link breaks", show(req)));
            let call = s.client_mut(c).call_mut(link).take().expect("just sent");
            return self.react(s, c, link, call, Outcome::Broken);
        }
        let may_fail = s.faults > 0 && (self.config.faulty)(req);
        if link == Link::Request && !may_fail && !matches!(req, Req::Blpop { .. }) {
            self.run(s, c, link);
        }
    }

    /// Redis runs the command on a client's link.
    fn run(&self, s: &mut State, c: u8, link: Link) {
        let cfg = &self.config;
        let Some(mut call) = s.client(c).call(link).copied() else {
            return;
        };
        if !s.redis.nodes[usize::from(call.node)].writable {
            // READONLY: a demoted master; the command did not run. The request's
            // link asks the sentinels and sends it once more to the master they
            // name (`Lease::call`); the watchdog's renewal fails, to be tried
            // again.
            say(|| format!("c{c}: {} answered READONLY", show(call.req)));
            match link {
                Link::Request => {
                    let generation = s.redis.generation;
                    let client = s.client_mut(c);
                    client.generation = generation;
                    call.node = generation - 1;
                    call.generation = generation;
                    client.link = Some(call);
                    if s.faults == 0 {
                        self.run(s, c, link);
                    }
                }
                Link::Watchdog => {
                    s.client_mut(c).dog = None;
                    self.renewal_failed(s, c);
                }
            }
            return;
        }
        let Some((reply, wrote)) = s.execute(cfg, call.node, call.req) else {
            return;
        };
        let behind = s.behind(call.node);
        call.stage = self.after_run(call.req, reply, wrote, behind);
        *s.client_mut(c).call_mut(link) = Some(call);
        self.read_reply(s, c, link);
    }

    /// A reply reaches its client at once, unless something can come between:
    /// a fault (the reply lost) or a switch (the client may hear of it first, and
    /// then takes the reply for a broken link). Reading a reply later changes
    /// nothing else: what a client counts on is timed from when it sent.
    fn read_reply(&self, s: &mut State, c: u8, link: Link) {
        let Some(call) = s.client(c).call(link).copied() else {
            return;
        };
        let Stage::Answered { reply, acks } = call.stage else {
            return;
        };
        let may_fail = s.faults > 0 && (self.config.faulty)(call.req);
        if may_fail || call.generation != s.redis.generation {
            return;
        }
        *s.client_mut(c).call_mut(link) = None;
        self.react(s, c, link, call, Outcome::Reply(reply, acks));
    }

    /// The watchdog's check after a switch (`watchdog.rs` `check`): GET the lock
    /// on the master this client now knows.
    fn check(&self, s: &mut State, c: u8) {
        let now = s.now;
        let generation = s.client(c).generation;
        let watched = s.client(c).hold.is_some_and(|h| {
            h.watch.state == WatchState::Watching
                && h.watch.watched
                && h.watch.generation < generation
        });
        if !watched || !s.node_up(generation - 1) {
            return;
        }
        let store = s.redis.nodes[usize::from(generation - 1)].store;
        let fix = self.config.fixes.check_reads_pttl;
        let Some(h) = &mut s.client_mut(c).hold else {
            return;
        };
        // GET the lock (and its PTTL), or a shared hold's ZSCORE and TIME.
        let found = match h.kind {
            Kind::Shared | Kind::Permit => store
                .holders
                .iter()
                .find(|x| x.token == h.token && x.until > now)
                .map(|x| x.until),
            Kind::Alone | Kind::Unknown => store
                .lock
                .filter(|l| owns(Some(*l), h.token))
                .map(|l| l.until),
        };
        let node = ["A", "B"][usize::from(generation - 1)];
        say(|| match found {
            Some(_) => format!("c{c}'s watchdog finds {:?} on {node}: still ours", h.token),
            None => format!(
                "c{c}'s watchdog does not find {:?} on {node}: lost",
                h.token
            ),
        });
        if let Some(until) = found {
            h.watch.generation = h.watch.generation.max(generation);
            if fix {
                h.watch.end = h.watch.end.min(until);
            }
        } else if h.watch.state == WatchState::Watching {
            h.watch.state = WatchState::Lost;
        }
    }
}

impl State {
    fn note_failover(&mut self) {
        for (i, c) in self.clients.iter().enumerate() {
            self.ghost.before_failover[i] = c.tokens;
        }
    }

    /// Whether anybody still wants what `token` may be granted: its client
    /// counts on it, waits for it, or has it to settle or release; or crashed
    /// (a dead waiter is passed over once not heard from: the queue's own
    /// bound); or it was made before a failover (see `Ghost::before_failover`);
    /// or it was detached (left to live out its ttl on purpose); or a
    /// command about it is on its way, or was lost on the way (a lease nobody
    /// cleans up after ends by its ttl).
    fn wanted(&self, token: Token) -> bool {
        let c = self.client(token.client);
        c.hold.is_some_and(|h| h.token == token)
            || matches!(c.pc, Pc::Claim(cl) if cl.token == token)
            || c.unresolved == Some(token)
            || c.pc == Pc::Crashed
            || token.n <= self.ghost.before_failover[usize::from(token.client)]
            || self.ghost.detached == Some(token)
            || self.ghost.forsaken.contains(&token)
            || self
                .orphans
                .iter()
                .any(|&(_, r)| req_token(r) == Some(token))
            || [c.link, c.dog]
                .iter()
                .flatten()
                .any(|call| req_token(call.req) == Some(token))
    }

    /// After a script ran on the master: a token that holds something now and
    /// did not before must be wanted (the late run of an orphan included: a
    /// voided token takes nothing).
    /// After a release on the master: `grant` run on a copy of what it left
    /// must hand nothing (what it freed went to the waiters at the head).
    fn note_handoff(&mut self, cfg: &Config, node: u8) {
        let mut store = self.redis.nodes[usize::from(node)].store;
        let mut micros = self.redis.micros;
        let mut script = Script {
            db: &mut store,
            now: self.now,
            micros: &mut micros,
            touched: false,
            scripts: cfg.fixes.scripts,
        };
        if script.grant(true, true, |_| None, None) {
            self.ghost.stranded = true;
        }
    }

    fn note_grants(&mut self, before: &Store, node: u8) {
        // An old master's writes (until the sentinels demote it) are thrown away.
        if node != self.redis.master() {
            return;
        }
        let after = self.redis.nodes[usize::from(node)].store;
        let holds = |db: &Store, t: Token| {
            owns(db.lock, t)
                || db
                    .holders
                    .iter()
                    .any(|h| h.token == t && h.until > self.now)
        };
        let fresh = after
            .lock
            .map(|l| l.token)
            .into_iter()
            .chain(after.holders.iter().map(|h| h.token))
            .filter(|&t| holds(&after, t) && !holds(before, t));
        for token in fresh {
            if !self.wanted(token) && self.ghost.unwanted_grant.is_none() {
                self.ghost.unwanted_grant = Some(token);
            }
        }
    }
}
