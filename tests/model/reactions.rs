//! What a client does: the user calls it may make, and how it reacts to each
//! reply or failure, as `lease.rs`, `lock.rs`, `session.rs`, `hold.rs` and
//! `watchdog.rs` do (each function names what it mirrors).

use crate::client::{
    Call, Claim, Hold, Kind, Link, Outcome, Pc, Program, Renewal, Req, Step, Then, Via, Want,
    Watch, WatchState,
};
use crate::redis::{Data, How, Reply, Time, Token, NAP};
use crate::system::{say, show, Action, Config, Op, State, System};

impl System {
    /// The calls the user may make now.
    pub fn user_ops(&self, s: &State, c: u8, actions: &mut Vec<Action>) {
        let cfg = &self.config;
        let client = s.client(c);
        let program = cfg.clients[usize::from(c)];
        let busy = client.link.is_some();
        let counting = client.hold.is_some_and(|h| h.watch.counting(s.now));
        let kind = client.hold.map(|h| h.kind);
        let mut ops = Vec::new();
        match (program, client.pc) {
            (Program::Lock { acquires, .. }, Pc::Idle) if !busy && client.ops < acquires => {
                ops.push(Op::Acquire);
            }
            (Program::Lock { refreshes, .. }, Pc::Held) => {
                if counting && client.refreshes < refreshes {
                    for &ttl in &cfg.refresh_ttls {
                        ops.push(Op::Refresh(ttl));
                    }
                }
                if counting && cfg.fence_ops && client.hold.is_some_and(|h| h.fence == 0) {
                    ops.push(Op::Fence);
                }
                ops.push(Op::Release);
            }
            (Program::Reader { acquires, .. }, Pc::Idle) if !busy && client.ops < acquires => {
                ops.push(Op::AcquireRead);
            }
            // The upgrade threw and let its given-back hold go: acquire() again.
            (Program::Reader { retry: true, .. }, Pc::Idle)
                if !busy && client.given_back.is_some() && client.refreshes == client.ops =>
            {
                ops.push(Op::Retry(Want::Alone));
            }
            (
                Program::Reader {
                    upgrade,
                    detach,
                    retry,
                    refresh,
                    ..
                },
                Pc::Held,
            ) => {
                // One conversion (or detach) per hold.
                if kind == Some(Kind::Shared) && client.refreshes < client.ops {
                    refresh_first(&mut ops, cfg, client, refresh && counting);
                    if upgrade {
                        ops.push(Op::Upgrade);
                    }
                    if detach {
                        ops.push(Op::Detach);
                    }
                }
                // The upgrade threw: acquire() once more, with the same object.
                if retry && kind == Some(Kind::Unknown) && client.refreshes == client.ops {
                    ops.push(Op::Retry(Want::Alone));
                }
                ops.push(Op::Release);
            }
            (Program::Writer { acquires, .. }, Pc::Idle) if !busy && client.ops < acquires => {
                ops.push(Op::Acquire);
            }
            (Program::Writer { retry: true, .. }, Pc::Idle)
                if !busy && client.given_back.is_some() && client.refreshes == client.ops =>
            {
                ops.push(Op::Retry(Want::Shared));
            }
            (
                Program::Writer {
                    downgrade,
                    retry,
                    retry_alone,
                    detach,
                    refresh,
                    reupgrade,
                    ..
                },
                Pc::Held,
            ) => {
                // The downgrade held: acquire() again, once.
                if reupgrade && kind == Some(Kind::Shared) && client.refreshes == client.ops {
                    ops.push(Op::Upgrade);
                }
                // One conversion (or detach) per hold.
                if kind == Some(Kind::Alone) && client.refreshes < client.ops {
                    refresh_first(&mut ops, cfg, client, refresh && counting);
                    if downgrade {
                        ops.push(Op::Downgrade);
                    }
                    if detach {
                        ops.push(Op::Detach);
                    }
                }
                // The downgrade threw: acquireRead() once more.
                if retry && kind == Some(Kind::Unknown) && client.refreshes == client.ops {
                    ops.push(Op::Retry(Want::Shared));
                }
                // ... or acquire().
                if retry_alone && kind == Some(Kind::Unknown) && client.refreshes == client.ops {
                    ops.push(Op::Retry(Want::Alone));
                }
                let unfenced = client.hold.is_some_and(|h| h.fence == 0);
                if counting && cfg.fence_ops && kind == Some(Kind::Alone) && unfenced {
                    ops.push(Op::Fence);
                }
                ops.push(Op::Release);
            }
            (Program::Permit { acquires, .. }, Pc::Idle) if !busy && client.ops < acquires => {
                ops.push(Op::Acquire);
            }
            (
                Program::Permit {
                    refreshes, detach, ..
                },
                Pc::Held,
            ) => {
                if counting && client.refreshes < refreshes {
                    for &ttl in &cfg.refresh_ttls {
                        ops.push(Op::Refresh(ttl));
                    }
                }
                // Once, before any refresh.
                if detach && client.refreshes == 0 {
                    ops.push(Op::Detach);
                }
                ops.push(Op::Release);
            }
            (Program::Restorer { .. }, Pc::Idle)
                if !busy && client.ops == 0 && s.ghost.detached.is_some() =>
            {
                ops.push(Op::Restore);
            }
            (Program::Restorer { .. }, Pc::Held) => {
                // synchronized() on a lock's token, acquire() on a permit's.
                if client.refreshes == 0 {
                    ops.push(Op::Sync);
                }
                // Refused (a read hold): it may upgrade instead.
                if client.refreshes == 1 && kind == Some(Kind::Shared) {
                    ops.push(Op::Upgrade);
                }
                ops.push(Op::Release);
            }
            (Program::Session { opens, .. }, Pc::Idle) if !busy && client.ops < opens => {
                ops.push(Op::Open);
            }
            (Program::Session { opens, logout }, Pc::Held) => {
                ops.push(if logout && client.ops == opens {
                    Op::Destroy
                } else {
                    Op::Write
                })
            }
            (Program::Revoker { revokes }, Pc::Idle) if !busy && client.ops < revokes => {
                ops.push(Op::Revoke);
            }
            (Program::Forcer, Pc::Idle) if !busy && client.ops == 0 => ops.push(Op::Force),
            (Program::Putter, Pc::Idle) if !busy && client.ops == 0 => ops.push(Op::Put),
            _ => {}
        }
        // A logout, a restore and a fresh id's write are one call each: a
        // crash in it is a broken link that never comes back (in the faults).
        let crashable = !matches!(
            program,
            Program::Revoker { .. } | Program::Restorer { .. } | Program::Putter | Program::Forcer
        );
        if s.crashes > 0 && crashable && client.pc != Pc::Idle {
            ops.push(Op::Crash);
        }
        actions.extend(ops.into_iter().map(|op| Action::User(c, op)));
    }

    pub fn user(&self, s: &mut State, c: u8, op: Op) {
        let cfg = &self.config;
        match op {
            Op::Acquire => {
                s.client_mut(c).ops += 1;
                let want = match cfg.clients[usize::from(c)] {
                    Program::Permit { limit, weight, .. } => Want::Permit(limit, weight),
                    _ => Want::Alone,
                };
                self.lock_acquire(s, c, want);
            }
            Op::AcquireRead => {
                s.client_mut(c).ops += 1;
                self.lock_acquire(s, c, Want::Shared);
            }
            Op::Upgrade => {
                s.client_mut(c).refreshes += 1;
                self.convert(s, c, Want::Upgrade, cfg.wait);
            }
            Op::Retry(want) => {
                s.client_mut(c).refreshes += 1;
                self.lock_acquire(s, c, want);
            }
            Op::Downgrade => {
                s.client_mut(c).refreshes += 1;
                self.convert(s, c, Want::Downgrade, 0);
            }
            Op::Detach => {
                // `Lock::detach`: no release, no renewal; the token lives on in
                // Redis until its ttl, for whoever restores it.
                let client = s.client_mut(c);
                client.refreshes += 1;
                let token = stop_watch(client).expect("held");
                client.hold = None;
                client.pc = Pc::Idle;
                s.ghost.detached = Some(token);
                say(|| format!("c{c} detaches {token:?}"));
            }
            Op::Restore => {
                // `Lock::restored`: believed held, counted on for nothing, its
                // kind unknown until asked.
                let now = s.now;
                let token = s.ghost.detached.expect("a detached token");
                let client = s.client_mut(c);
                client.ops += 1;
                let mut hold = new_hold(
                    cfg.ttl,
                    token,
                    0,
                    now,
                    false,
                    client.generation,
                    Via::Restored,
                );
                hold.kind = Kind::Unknown;
                hold.watch.watched = false;
                client.hold = Some(hold);
                client.pc = Pc::Held;
            }
            Op::Sync => {
                // `synchronized()` on a restored lock object (a semaphore's:
                // `acquire()`): `holding()` (`held_weight()`) asks Redis what
                // the hold is before relying on it. With the fix reverted, it
                // takes the lock alone (as many permits as it asks) for granted.
                let now = s.now;
                let client = s.client_mut(c);
                client.refreshes += 1;
                let hold = client.hold.as_mut().expect("restored");
                if hold.kind == Kind::Unknown && !cfg.fixes.restore_verifies {
                    hold.kind = self.restored_kind(hold.token, false);
                    if let Program::Restorer { permits } = cfg.clients[usize::from(c)] {
                        hold.weight = permits;
                    }
                }
                if hold.kind == Kind::Unknown {
                    let token = hold.token;
                    client.pc = Pc::Verifying {
                        asked: now,
                        second: false,
                        then: None,
                    };
                    self.send(s, c, Link::Request, Req::Inspect { token });
                } else {
                    self.restored_call(s, c);
                }
            }
            Op::Refresh(ttl) => {
                let converts = matches!(
                    cfg.clients[usize::from(c)],
                    Program::Reader { .. } | Program::Writer { .. }
                );
                // A reader's or writer's refresh is bounded by its hold's
                // `refreshes_sent`: `refreshes` counts their conversions.
                if !converts {
                    s.client_mut(c).refreshes += 1;
                }
                self.refresh(s, c, ttl, Then::User);
            }
            Op::Fence => {
                let token = s.client(c).hold.expect("held").token;
                s.client_mut(c).pc = Pc::Fencing { second: false };
                self.send(s, c, Link::Request, Req::Fence { token });
            }
            Op::Release => {
                let client = s.client_mut(c);
                let token = stop_watch(client).expect("held");
                client.pc = Pc::Releasing { second: false };
                self.send(s, c, Link::Request, Req::Release { token });
            }
            Op::Open => {
                s.client_mut(c).ops += 1;
                self.claim(s, c, Want::Alone, None, cfg.wait);
            }
            Op::Write => {
                let client = s.client_mut(c);
                // `SessionStore::save` stops renewing before it sends.
                let token = stop_watch(client).expect("held");
                let write = c * 4 + client.ops;
                let lineage = client.read.map_or(0, |d| d.lineage) | 1 << write;
                let data = Data { write, lineage };
                client.pc = Pc::Saving {
                    data,
                    destroy: false,
                    generation: client.generation,
                    second: false,
                };
                self.send(s, c, Link::Request, Req::Save { token, data });
            }
            Op::Destroy => {
                let client = s.client_mut(c);
                let token = stop_watch(client).expect("held");
                client.pc = Pc::Saving {
                    data: Data::default(),
                    destroy: true,
                    generation: client.generation,
                    second: false,
                };
                self.send(s, c, Link::Request, Req::Destroy { token });
            }
            // One call each, with a marker of its own (its nonce).
            Op::Revoke | Op::Force => {
                let client = s.client_mut(c);
                client.ops += 1;
                let nonce = c * 4 + client.ops;
                let second = false;
                let (pc, req) = match op {
                    Op::Revoke => (Pc::Revoking { nonce, second }, Req::Revoke { nonce }),
                    _ => (Pc::Forcing { nonce, second }, Req::Force { nonce }),
                };
                client.pc = pc;
                self.send(s, c, Link::Request, req);
            }
            Op::Put => {
                let client = s.client_mut(c);
                client.ops += 1;
                let write = c * 4 + client.ops;
                let data = Data {
                    write,
                    lineage: 1 << write,
                };
                client.pc = Pc::Putting {
                    data,
                    second: false,
                };
                self.send(s, c, Link::Request, Req::Put { nonce: write, data });
            }
            Op::Crash => {
                s.crashes -= 1;
                let client = s.client_mut(c);
                client.pc = Pc::Crashed;
                stop_watch(client);
                let calls = [client.link.take(), client.dog.take()];
                client.renewal = None;
                for call in calls.into_iter().flatten() {
                    if call.stage == crate::client::Stage::Sent
                        && !matches!(call.req, Req::Blpop { .. })
                    {
                        s.orphan(cfg, call.node, call.req);
                    }
                }
            }
        }
    }

    /// `Lock::acquire` / `acquire_read` (and a semaphore's acquire), holding
    /// nothing of that kind: settle what an earlier call left open, extend a
    /// hold we still have (`renew_held`), let go of one the watchdog gave up on,
    /// then claim.
    fn lock_acquire(&self, s: &mut State, c: u8, want: Want) {
        let now = s.now;
        let client = s.client_mut(c);
        if let Some(token) = client.unresolved {
            if self.config.fixes.given_back_dropped && client.given_back == Some(token) {
                // `Lock::settle`: its give-back runs (or ran) by itself, so
                // resolve.lua's answer is not ours to adopt.
                say(|| format!("c{c} drops unresolved given-back {token:?}"));
                client.unresolved = None;
                return self.claim(s, c, want, None, self.config.wait);
            }
            client.pc = Pc::Settling {
                asked: now,
                generation: client.generation,
                second: false,
                want,
            };
            self.send(s, c, Link::Request, Req::Resolve { token });
            return;
        }
        match client.hold {
            // (s) A failed conversion's hold is let go: released (what the
            // attempt still on its way makes of it is freed too, or finds
            // nothing), and the lock claimed afresh.
            Some(h) if h.via == Via::LetGo => {
                say(|| format!("c{c} lets go of {:?}, its conversion failed", h.token));
                client.hold = None;
                let node = client.generation - 1;
                s.orphan(&self.config, node, Req::Release { token: h.token });
                self.claim(s, c, want, None, self.config.wait);
            }
            // A failed conversion's hold (one given back was let go at once:
            // `claim_failed`), or a restored one: `verify` first.
            Some(h) if h.kind == Kind::Unknown => {
                client.pc = Pc::Verifying {
                    asked: now,
                    second: false,
                    then: Some(want),
                };
                self.send(s, c, Link::Request, Req::Inspect { token: h.token });
            }
            Some(h) if h.watch.state == WatchState::Watching => {
                self.refresh(s, c, self.config.ttl, Then::Acquire(want));
            }
            Some(h) => {
                client.hold = None;
                let node = client.generation - 1;
                s.orphan(&self.config, node, Req::Release { token: h.token });
                self.claim(s, c, want, None, self.config.wait);
            }
            None => self.claim(s, c, want, None, self.config.wait),
        }
    }

    /// `Lock::acquire` (`acquire_read`) once `verify` said what the hold is:
    /// converted if it is the other kind, extended if it is this one
    /// (`renew_held`), claimed afresh if there is none.
    fn acquire_verified(&self, s: &mut State, c: u8, want: Want) {
        match (want, s.client(c).hold.map(|h| h.kind)) {
            (_, None) => self.claim(s, c, want, None, self.config.wait),
            (Want::Alone, Some(Kind::Shared)) => {
                self.convert(s, c, Want::Upgrade, self.config.wait)
            }
            (Want::Shared, Some(Kind::Alone)) => self.convert(s, c, Want::Downgrade, 0),
            _ => self.refresh(s, c, self.config.ttl, Then::Acquire(want)),
        }
    }

    /// `Lock::convert`: the same token asks for the other kind of hold, which it
    /// keeps while it waits (up to `wait`).
    fn convert(&self, s: &mut State, c: u8, want: Want, wait: Time) {
        let token = s.client(c).hold.expect("held").token;
        self.claim(s, c, want, Some(token), wait);
    }

    /// What Redis says a restored token holds (`Lock::ask_restored`): a
    /// semaphore's is a permit; a lock's, the lock alone or a read hold.
    fn restored_kind(&self, token: Token, shared: bool) -> Kind {
        match self.config.clients[usize::from(token.client)] {
            Program::Permit { .. } => Kind::Permit,
            _ if shared => Kind::Shared,
            _ => Kind::Alone,
        }
    }

    /// A `Restorer`'s call once its hold's kind is known: `synchronized()` on
    /// a lock's; on a semaphore's, `acquire()` of its `permits`, which refuses
    /// (a `ValueError`) a hold of another weight and extends (`renew_held`)
    /// one of this weight. (A permit no longer held would be claimed afresh:
    /// an ordinary acquire, left to the other configurations.)
    fn restored_call(&self, s: &mut State, c: u8) {
        let Program::Restorer { permits } = self.config.clients[usize::from(c)] else {
            unreachable!("a restorer's call")
        };
        let permit = self.restores_permit(s);
        match s.client(c).hold {
            Some(h) if h.kind != Kind::Permit => self.synchronized(s, c),
            None if !permit => self.synchronized(s, c),
            None => s.client_mut(c).pc = Pc::Idle,
            Some(h) if h.weight != permits => {
                say(|| format!("c{c}: acquire({permits}) refused, it holds {}", h.weight));
                s.client_mut(c).pc = Pc::Held;
            }
            // (`Then::Sync`: not ours any more, and it stops.)
            Some(_) => self.refresh(s, c, self.config.ttl, Then::Sync),
        }
    }

    /// The token restored is a semaphore's.
    fn restores_permit(&self, s: &State) -> bool {
        s.ghost
            .detached
            .is_some_and(|t| self.restored_kind(t, true) == Kind::Permit)
    }

    /// `synchronized()` on a hold whose kind is known: nested in a read hold it
    /// refuses (it would need an upgrade); in the lock alone it extends it
    /// (`renew_held`) and runs the callback.
    fn synchronized(&self, s: &mut State, c: u8) {
        let client = s.client_mut(c);
        match client.hold.map(|h| h.kind) {
            Some(Kind::Alone) => self.refresh(s, c, self.config.ttl, Then::Sync),
            Some(_) => {
                say(|| format!("c{c}: synchronized() inside a read hold refuses"));
                client.pc = Pc::Held;
            }
            // Not held (any more): it takes the lock afresh.
            None => self.claim(s, c, Want::Alone, None, self.config.wait),
        }
    }

    /// `Lease::claim` begins: a fresh token (or the hold's own, for a
    /// conversion), the deadline, the first attempt.
    fn claim(&self, s: &mut State, c: u8, want: Want, token: Option<Token>, wait: Time) {
        let now = s.now;
        let client = s.client_mut(c);
        let convert = token.is_some();
        let token = token.unwrap_or_else(|| new_token(client, c));
        client.pc = Pc::Claim(Claim {
            token,
            want,
            convert,
            generation: client.generation,
            deadline: now + wait,
            retried: false,
            busy_since: None,
            sent: now,
            converted_by: now + self.config.ttl,
            step: Step::Attempt,
        });
        self.attempt(s, c);
    }

    /// One turn of the claim loop: send the claim script for what is left of the
    /// wait.
    fn attempt(&self, s: &mut State, c: u8) {
        let now = s.now;
        let Pc::Claim(mut claim) = s.client(c).pc else {
            unreachable!("attempt outside a claim")
        };
        claim.sent = now;
        claim.step = Step::Attempt;
        let wait = claim.deadline.saturating_sub(now);
        let req = match self.config.clients[usize::from(c)] {
            Program::Session { .. } => Req::Open {
                token: claim.token,
                wait,
            },
            _ => Req::Acquire {
                token: claim.token,
                wait,
                mode: claim.want.mode(),
            },
        };
        s.client_mut(c).pc = Pc::Claim(claim);
        self.send(s, c, Link::Request, req);
    }

    /// `Lease::refresh`: nothing is counted on past what it may leave
    /// (`Hold::refreshing`), then refresh.lua sets the expiry.
    fn refresh(&self, s: &mut State, c: u8, ttl: Time, then: Then) {
        let now = s.now;
        let client = s.client_mut(c);
        let hold = client.hold.as_mut().expect("held");
        let token = hold.token;
        let how = How::Holder {
            id: 1 << hold.refreshes_sent,
            voids: hold.unanswered,
        };
        hold.refreshes_sent += 1;
        let w = &mut hold.watch;
        // Of the refreshes on their way (or never answered), the shortest counts.
        w.setting = Some((now, w.setting.map_or(ttl, |(_, t)| t.min(ttl))));
        w.ttl = ttl;
        w.end = w.end.min(now + ttl);
        client.pc = Pc::Refreshing {
            sent: now,
            ttl,
            second: false,
            then,
        };
        self.send(s, c, Link::Request, Req::Refresh { token, ttl, how });
    }

    /// Sends the same command again on a fresh link (`call_idempotent`, or the
    /// explicit second try of release and save).
    fn again(&self, s: &mut State, c: u8, call: Call, pc: Pc) {
        say(|| format!("c{c} sends {} again", show(call.req)));
        s.client_mut(c).pc = pc;
        self.send(s, c, Link::Request, call.req);
    }

    pub fn react(&self, s: &mut State, c: u8, link: Link, call: Call, outcome: Outcome) {
        say(|| match outcome {
            Outcome::Reply(..) if call.generation != s.client(c).generation => unreachable!(),
            Outcome::Reply(reply, _) => format!("c{c} reads {reply:?} ({})", show(call.req)),
            Outcome::Broken => format!("c{c}: link broken ({})", show(call.req)),
            Outcome::TimedOut => format!("c{c}: no reply in time ({})", show(call.req)),
        });
        match link {
            Link::Request => self.on_request(s, c, call, outcome),
            Link::Watchdog => self.on_renewal(s, c, call, outcome),
        }
    }

    fn on_request(&self, s: &mut State, c: u8, call: Call, outcome: Outcome) {
        let cfg = &self.config;
        let pc = s.client(c).pc;
        match pc {
            Pc::Claim(claim) => self.on_claim(s, c, claim, call, outcome),
            Pc::Settling {
                asked,
                generation,
                second,
                want,
            } => match outcome {
                // `Lock::settle`: the lease, if ours, was set before we asked.
                Outcome::Reply(Reply::Owned(Some(owned)), _) => {
                    let client = s.client_mut(c);
                    let token = client.unresolved.take().expect("unresolved");
                    let mut hold = new_hold(
                        cfg.ttl,
                        token,
                        owned.fence.unwrap_or(0),
                        asked + owned.pttl,
                        cfg.renew,
                        generation,
                        Via::Settled,
                    );
                    hold.kind = if owned.shared {
                        want.kind()
                    } else {
                        Kind::Alone
                    };
                    client.hold = Some(hold);
                    // With wait_replicas settle refreshes (the acquire's WAIT never
                    // ran), and `renew_held` refreshes anyway: one refresh, whose
                    // result is the acquire's.
                    self.refresh(s, c, cfg.ttl, Then::Settled(want, generation));
                }
                Outcome::Reply(..) => {
                    s.client_mut(c).unresolved = None;
                    self.claim(s, c, want, None, cfg.wait);
                }
                Outcome::Broken if !second => self.again(
                    s,
                    c,
                    call,
                    Pc::Settling {
                        asked,
                        generation,
                        second: true,
                        want,
                    },
                ),
                Outcome::Broken | Outcome::TimedOut => s.client_mut(c).pc = Pc::Idle,
            },
            Pc::Verifying {
                asked,
                second,
                then,
            } => match outcome {
                // `Lock::ask_restored`: the hold takes on what Redis says it is
                // (and, with wait_replicas, the replica has: fix (af)).
                Outcome::Reply(Reply::Owned(found), acks) if acks != Some(false) => {
                    let generation = s.client(c).generation;
                    let client = s.client_mut(c);
                    let token = client.hold.expect("restored").token;
                    client.hold = found.map(|o| {
                        let mut hold = new_hold(
                            cfg.ttl,
                            token,
                            o.fence.unwrap_or(0),
                            asked + o.pttl,
                            cfg.renew,
                            generation,
                            Via::Restored,
                        );
                        hold.kind = self.restored_kind(token, o.shared);
                        hold.weight = o.weight;
                        hold
                    });
                    say(|| format!("c{c}'s restored hold is {:?}", client.hold.map(|h| h.kind)));
                    match then {
                        None => self.restored_call(s, c),
                        Some(want) => self.acquire_verified(s, c, want),
                    }
                    note_fence(s, c);
                }
                Outcome::Broken if !second => self.again(
                    s,
                    c,
                    call,
                    Pc::Verifying {
                        asked,
                        second: true,
                        then,
                    },
                ),
                // An error: synchronized() throws, the hold still unverified.
                _ => s.client_mut(c).pc = Pc::Held,
            },
            Pc::Refreshing {
                sent,
                ttl,
                second,
                then,
            } => {
                // It ran, and voided the earlier ones (or they went with the
                // lease); unanswered, it may still run, to be voided by the next.
                // So may a first run whose link broke, even when the second
                // was answered (fix (u), found by this model).
                if let (Some(hold), Req::Refresh { how, .. }) =
                    (&mut s.client_mut(c).hold, call.req)
                {
                    let id = match how {
                        How::Holder { id, .. } => id,
                        _ => 0,
                    };
                    match outcome {
                        // Voided where too few replicas heard of it: listed still.
                        Outcome::Reply(Reply::Int(1), Some(false)) => {
                            if second {
                                hold.unanswered |= id;
                            }
                        }
                        Outcome::Reply(Reply::Int(0 | 1), _) => {
                            hold.unanswered = if second { id } else { 0 };
                        }
                        Outcome::Reply(..) => {}
                        Outcome::Broken if !second => {}
                        Outcome::Broken | Outcome::TimedOut => hold.unanswered |= id,
                    }
                }
                let extended = match outcome {
                    Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => Some(true),
                    Outcome::Reply(Reply::Int(1), _) => None,
                    // Voided by a later refresh: never read by a live link.
                    Outcome::Reply(Reply::Int(3), _) => unreachable!("a voided refresh read"),
                    Outcome::Reply(..) => Some(false),
                    Outcome::Broken if !second => {
                        let pc = Pc::Refreshing {
                            sent,
                            ttl,
                            second: true,
                            then,
                        };
                        return self.again(s, c, call, pc);
                    }
                    Outcome::Broken | Outcome::TimedOut => None,
                };
                let fix_v = self.config.fixes.answered_retry_on_its_way;
                refreshed(s, c, sent, ttl, extended, fix_v);
                if let Then::Recount(tries) = then {
                    return self.recounted(s, c, extended, tries);
                }
                let now = s.now;
                let client = s.client_mut(c);
                // `Lock::adopt_unresolved`: not ours on a master learned of
                // after resolve.lua answered, which may still queue the token.
                let abandon = match then {
                    Then::Settled(_, asked)
                        if extended == Some(false) && client.generation != asked =>
                    {
                        client.hold.map(|h| h.token)
                    }
                    _ => None,
                };
                let then = match then {
                    // (r) in `Lock::settle`: refreshed on a master learned of
                    // after resolve.lua answered: asked there what the token is.
                    Then::Settled(want, asked)
                        if extended == Some(true)
                            && cfg.wait_replicas
                            && cfg.fixes.grant_rereads_after_switch
                            && client.generation != asked =>
                    {
                        // `Lock::adopt_unresolved`'s loop: settled again there.
                        let token = client.hold.take().expect("settled").token;
                        client.unresolved = Some(token);
                        client.pc = Pc::Settling {
                            asked: now,
                            generation: client.generation,
                            second: false,
                            want,
                        };
                        return self.send(s, c, Link::Request, Req::Resolve { token });
                    }
                    Then::Settled(want, _) => Then::Acquire(want),
                    then => then,
                };
                match (extended, then) {
                    (Some(true), _) => client.pc = Pc::Held,
                    (Some(false), _) => {
                        // Not ours: `Lock::refresh` forgets it; `Lock::acquire`
                        // goes on to claim; a nested synchronized() throws.
                        client.hold = None;
                        client.pc = Pc::Idle;
                        if let Some(token) = abandon {
                            let node = s.client(c).generation - 1;
                            s.orphan(cfg, node, Req::Abandon { token });
                        }
                        if let Then::Acquire(want) = then {
                            self.claim(s, c, want, None, cfg.wait);
                        }
                    }
                    // An error: `acquire()` throws (the hold is kept for the next
                    // call); after `refresh()` or in synchronized() the user still
                    // holds what it had.
                    (None, Then::Acquire(_)) => client.pc = Pc::Idle,
                    (None, _) => client.pc = Pc::Held,
                }
                note_fence(s, c);
            }
            Pc::Fencing { second } => match outcome {
                Outcome::Reply(Reply::Fence(Some(fence)), _) => {
                    let client = s.client_mut(c);
                    client.hold.as_mut().expect("held").fence = fence;
                    client.pc = Pc::Held;
                    note_fence(s, c);
                }
                Outcome::Reply(..) => {
                    let client = s.client_mut(c);
                    stop_watch(client);
                    client.hold = None;
                    client.pc = Pc::Idle;
                }
                Outcome::Broken if !second => self.again(s, c, call, Pc::Fencing { second: true }),
                Outcome::Broken | Outcome::TimedOut => s.client_mut(c).pc = Pc::Held,
            },
            Pc::Releasing { second } => match outcome {
                Outcome::Broken if !second => {
                    self.again(s, c, call, Pc::Releasing { second: true })
                }
                _ => {
                    let client = s.client_mut(c);
                    client.hold = None;
                    client.pc = Pc::Idle;
                }
            },
            Pc::Saving {
                data,
                destroy,
                generation,
                second,
            } => self.on_save(s, c, call, outcome, (data, destroy), generation, second),
            // A destroy not found done: `Saved::LeaseLost`, and a logout always
            // takes effect (`SessionStore::destroy` revokes).
            Pc::Confirming { destroy: true, .. }
                if matches!(outcome, Outcome::Reply(Reply::Found(false), _)) =>
            {
                self.revoke_lost(s, c)
            }
            Pc::Confirming { .. } => match outcome {
                Outcome::Reply(Reply::Found(ours), acks) => save_done(s, c, ours, acks),
                _ => {
                    let client = s.client_mut(c);
                    stop_watch(client);
                    client.hold = None;
                    client.pc = Pc::Idle;
                }
            },
            Pc::Revoking { nonce, second } => match outcome {
                Outcome::Broken if !second => self.again(
                    s,
                    c,
                    call,
                    Pc::Revoking {
                        nonce,
                        second: true,
                    },
                ),
                Outcome::Reply(_, acks) => {
                    // Reported done (`lease.replicated`): a request's destroy
                    // that fell back on it removed the data it read.
                    if acks != Some(false) {
                        let gone = match self.config.clients[usize::from(c)] {
                            Program::Revoker { .. } => s.ghost.revoker_deleted,
                            _ => s.client(c).read.map_or(0, Data::bit),
                        };
                        s.ghost.logged_out |= gone;
                    }
                    s.client_mut(c).pc = Pc::Idle;
                }
                _ => s.client_mut(c).pc = Pc::Idle,
            },
            // `call_idempotent`: sent again once, by the same marker.
            Pc::Forcing { nonce, second } => match outcome {
                Outcome::Broken if !second => self.again(
                    s,
                    c,
                    call,
                    Pc::Forcing {
                        nonce,
                        second: true,
                    },
                ),
                _ => s.client_mut(c).pc = Pc::Idle,
            },
            Pc::Putting { data, second } => match outcome {
                Outcome::Broken if !second => {
                    self.again(s, c, call, Pc::Putting { data, second: true })
                }
                Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => {
                    say(|| format!("c{c}: {data:?} reported written"));
                    s.ghost.acked |= data.bit();
                    s.client_mut(c).pc = Pc::Idle;
                }
                _ => s.client_mut(c).pc = Pc::Idle,
            },
            Pc::Idle | Pc::Held | Pc::Crashed => unreachable!("no call on the link in {pc:?}"),
        }
    }

    /// `Lease::claim`'s loop, from the outcome of its current step.
    fn on_claim(&self, s: &mut State, c: u8, mut claim: Claim, call: Call, outcome: Outcome) {
        let now = s.now;
        let token = claim.token;
        match claim.step {
            Step::Attempt => {
                // (y) A conversion's token cannot be voided: an attempt whose
                // link broke may still run, late. Let go, as after a timeout.
                let lets_go = claim.convert && self.config.fixes.broken_conversion_lets_go;
                let (reply, acks) = match outcome {
                    Outcome::Reply(reply, acks) => (reply, acks),
                    Outcome::Broken if lets_go => return self.unresolved(s, c, token),
                    Outcome::Broken => return self.resolve_broken(s, c, claim),
                    Outcome::TimedOut => return self.unresolved(s, c, token),
                };
                // `claim_replicated`: too few replicas for a grant.
                if acks == Some(false) {
                    if self.switched_since(s, c, claim.generation) {
                        if lets_go {
                            return self.unresolved(s, c, token);
                        }
                        return self.resolve_broken(s, c, claim);
                    }
                    self.release_token(s, c, token);
                    return self.give_up(s, c, token, claim.busy_since.is_some());
                }
                match reply {
                    // `parse_attempt`: taken (since this attempt was sent), or
                    // handed (since the last attempt that found it held).
                    Reply::Took { fence, data } => {
                        self.won(s, c, claim, claim.sent, fence.unwrap_or(0), data, Via::Took)
                    }
                    Reply::Handed { fence, data } => {
                        let since = claim.busy_since.unwrap_or(claim.sent);
                        self.won(s, c, claim, since, fence.unwrap_or(0), data, Via::Found)
                    }
                    Reply::Busy { pttl } => {
                        if claim.deadline <= claim.sent {
                            // That attempt did not queue us: busy (a conversion
                            // keeps its hold).
                            return self.claim_over(s, c, claim);
                        }
                        claim.busy_since = Some(claim.sent);
                        let left = claim.deadline.saturating_sub(now);
                        let nap = pttl.min(NAP).min(left);
                        s.client_mut(c).pc = Pc::Claim(claim);
                        if nap == 0 {
                            return self.attempt(s, c);
                        }
                        claim.step = Step::Nap;
                        s.client_mut(c).pc = Pc::Claim(claim);
                        self.send(s, c, Link::Request, Req::Blpop { token });
                    }
                    // Another reader waits to upgrade: refused at once, and
                    // (the script saw to it) out of the queue.
                    Reply::Refused => self.claim_over(s, c, claim),
                    // A conversion whose own hold ran out: nothing to convert.
                    Reply::Lapsed => {
                        say(|| format!("c{c}: its hold ran out; the conversion is over"));
                        s.ghost.lapsed = true;
                        // Released all the same (`Lock::convert`): a late run of
                        // an earlier attempt of it may have left a hold.
                        self.release_token(s, c, token);
                        let client = s.client_mut(c);
                        stop_watch(client);
                        client.hold = None;
                        client.pc = Pc::Idle;
                    }
                    // Voided (only a token we gave up on), or anything else.
                    _ => self.give_up(s, c, token, claim.busy_since.is_some()),
                }
            }
            Step::Nap => match outcome {
                Outcome::Reply(Reply::Popped(payload), _) => self.grant(
                    s,
                    c,
                    claim,
                    claim.sent,
                    payload.fence,
                    payload.data,
                    Via::Woken,
                ),
                // A wake-up from a master since replaced is not trusted, and a
                // broken link only costs a wake-up: the next attempt asks.
                _ => self.attempt(s, c),
            },
            Step::Resolve { second } => match outcome {
                Outcome::Reply(Reply::Owned(Some(owned)), _) if self.adopts(c, claim, owned) => {
                    let since = claim.busy_since.unwrap_or(claim.sent);
                    let fence = owned.fence.unwrap_or(0);
                    self.grant(s, c, claim, since, fence, owned.data, Via::Adopted)
                }
                Outcome::Reply(..) if !claim.retried => {
                    // Nothing (or, for an upgrade, still just a reader): the
                    // attempt took nothing, and a fresh token (a conversion: its
                    // own) tries once more.
                    claim.retried = true;
                    if !claim.convert {
                        claim.token = new_token(s.client_mut(c), c);
                    }
                    claim.busy_since = None;
                    s.client_mut(c).pc = Pc::Claim(claim);
                    self.attempt(s, c);
                }
                Outcome::Reply(..) => self.claim_failed(s, c),
                Outcome::Broken if !second => {
                    claim.step = Step::Resolve { second: true };
                    self.again(s, c, call, Pc::Claim(claim));
                }
                Outcome::Broken | Outcome::TimedOut => self.unresolved(s, c, token),
            },
            Step::Grant {
                since,
                fence,
                data,
                via,
                voided,
            } => match outcome {
                Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => {
                    let now = s.client(c).generation;
                    if self.config.fixes.grant_rereads_after_switch && now != claim.generation {
                        claim.step = Step::Reread {
                            since,
                            via,
                            second: false,
                        };
                        s.client_mut(c).pc = Pc::Claim(claim);
                        return self.send(s, c, Link::Request, Req::Resolve { token });
                    }
                    self.won(s, c, claim, since, fence, data, via)
                }
                // No longer ours: it ran out before this extension (the waiter
                // stalled), or the master that granted it was replaced. Never
                // counted on, and no replica fell short (`Confirmed::Lapsed`): the
                // claim asks again, in its place; with a fresh token only where
                // resolve.lua voided the old one (a conversion keeps its own, and
                // finds its hold gone), once the old one is out of the current
                // master's queue (`Lease::replace_voided`, its withdraw in flight
                // here); after a broken link only once.
                Outcome::Reply(Reply::Int(0), _) => {
                    if via == Via::Adopted {
                        if claim.retried {
                            // Given up, out of the current master's queue too.
                            return self.give_up(s, c, token, true);
                        }
                        claim.retried = true;
                    }
                    say(|| format!("c{c}: the grant ran out before it was extended; asking again"));
                    if voided && !claim.convert {
                        let node = s.client(c).generation - 1;
                        s.orphan(&self.config, node, Req::Abandon { token });
                        claim.token = new_token(s.client_mut(c), c);
                        claim.busy_since = None;
                    }
                    s.client_mut(c).pc = Pc::Claim(claim);
                    self.attempt(s, c);
                }
                Outcome::Reply(..) => {
                    // Too few replicas: given back (unless the master changed
                    // meanwhile), and given up.
                    if !self.switched_since(s, c, claim.generation) {
                        self.release_token(s, c, token);
                    }
                    self.give_up(s, c, token, true)
                }
                Outcome::Broken | Outcome::TimedOut => self.give_up(s, c, token, true),
            },
            Step::Reconfirm {
                sent,
                fence,
                data,
                via,
                ..
            } => match outcome {
                Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => {
                    self.won(s, c, claim, sent, fence, data, via)
                }
                Outcome::Reply(Reply::Int(0), _) => self.grant_lapsed(s, c, claim),
                // Too few replicas (`claim_replicated`): given back, unless the
                // master changed meanwhile, and given up.
                Outcome::Reply(..) => {
                    if !self.switched_since(s, c, claim.generation) {
                        self.release_token(s, c, token);
                    }
                    self.give_up(s, c, token, true)
                }
                Outcome::Broken | Outcome::TimedOut => self.give_up(s, c, token, true),
            },
            Step::Reread { since, via, second } => match outcome {
                Outcome::Reply(Reply::Owned(Some(owned)), _) if self.adopts(c, claim, owned) => {
                    claim.generation = s.client(c).generation;
                    let fence = owned.fence.unwrap_or(0);
                    self.grant(s, c, claim, since, fence, owned.data, via)
                }
                Outcome::Broken if !second => {
                    claim.step = Step::Reread {
                        since,
                        via,
                        second: true,
                    };
                    self.again(s, c, call, Pc::Claim(claim));
                }
                _ => self.give_up(s, c, token, true),
            },
            Step::GiveUp { second } => match outcome {
                // Found holding: released, and that release's reply is lost
                // (`Lease::give_up` defers the token). Never adopted again.
                Outcome::Reply(Reply::Owned(Some(_)), _) => {
                    let node = s.client(c).generation - 1;
                    s.orphan(&self.config, node, Req::Release { token });
                    if self.config.fixes.give_up_defers_release {
                        self.claim_failed(s, c);
                    } else {
                        self.unresolved(s, c, token);
                    }
                }
                // Nothing held, and voided: out of the queue for good.
                Outcome::Reply(..) => self.claim_failed(s, c),
                Outcome::Broken if !second => {
                    claim.step = Step::GiveUp { second: true };
                    self.again(s, c, call, Pc::Claim(claim));
                }
                Outcome::Broken | Outcome::TimedOut => self.unresolved(s, c, token),
            },
        }
    }

    /// A broken link after an attempt: resolve.lua says what our token holds.
    fn resolve_broken(&self, s: &mut State, c: u8, mut claim: Claim) {
        claim.step = Step::Resolve { second: false };
        s.client_mut(c).pc = Pc::Claim(claim);
        self.send(s, c, Link::Request, Req::Resolve { token: claim.token });
    }

    /// A lease handed to us or adopted: `replicate_grant` extends it on our own
    /// link and WAITs (with fix (a) reverted, a handed one is ours at once).
    #[allow(clippy::too_many_arguments)]
    fn grant(
        &self,
        s: &mut State,
        c: u8,
        mut claim: Claim,
        since: Time,
        fence: u16,
        data: Option<Data>,
        via: Via,
    ) {
        let cfg = &self.config;
        let waits = via == Via::Adopted || cfg.fixes.grant_waits;
        if !(cfg.wait_replicas && waits) {
            return self.won(s, c, claim, since, fence, data, via);
        }
        let voided = matches!(claim.step, Step::Resolve { .. } | Step::Reread { .. });
        claim.step = Step::Grant {
            since,
            fence,
            data,
            via,
            voided,
        };
        s.client_mut(c).pc = Pc::Claim(claim);
        let req = Req::Refresh {
            token: claim.token,
            ttl: cfg.ttl,
            how: How::Grant,
        };
        self.send(s, c, Link::Request, req);
    }

    /// The claim got the lease: a hold from `since`, watched (`Lease::watch`,
    /// with the generation the claim began under).
    #[allow(clippy::too_many_arguments)]
    fn won(
        &self,
        s: &mut State,
        c: u8,
        claim: Claim,
        since: Time,
        fence: u16,
        data: Option<Data>,
        via: Via,
    ) {
        let cfg = &self.config;
        // Read only once its bound had passed: (w) extended first.
        if since + cfg.ttl <= s.now {
            let tries = match claim.step {
                Step::Reconfirm { tries, .. } => tries,
                _ => 0,
            };
            match (cfg.fixes.grant_reconfirms, tries) {
                (true, 0 | 1) => return self.reconfirm(s, c, claim, fence, data, via, tries),
                (true, _) => return self.grant_lapsed(s, c, claim),
                (false, _) => {}
            }
        }
        if matches!(claim.step, Step::Reconfirm { .. }) {
            s.ghost.reconfirmed = true;
        }
        let now = s.now;
        let client = s.client_mut(c);
        let mut hold = new_hold(
            cfg.ttl,
            claim.token,
            fence,
            since + cfg.ttl,
            cfg.renew,
            claim.generation,
            via,
        );
        hold.kind = claim.want.kind();
        // `Hold::carry_unanswered`: the old hold's refreshes left unanswered
        // may still run, after the conversion, no earlier than its grant.
        let carried = client
            .hold
            .filter(|h| claim.convert && h.token == claim.token && h.unanswered != 0);
        if let Some(old) = carried {
            hold.unanswered = old.unanswered;
            hold.refreshes_sent = old.refreshes_sent;
            if let Some((sent, ttl)) = old.watch.setting {
                let sent = sent.max(since);
                hold.watch.setting = Some((sent, ttl));
                hold.watch.end = hold.watch.end.min(sent + ttl);
            }
        }
        // (x) Read after that bound: extended first (`Lock::recount`), not
        // watched until it is counted on (`Lock::set_hold` comes after).
        let recount =
            carried.is_some() && !hold.watch.counting(now) && cfg.fixes.conversion_recounts;
        hold.watch.watched = !recount;
        client.hold = Some(hold);
        client.read = data;
        if recount {
            say(|| format!("c{c}: its conversion was read after a carried refresh's bound"));
            return self.refresh(s, c, cfg.ttl, Then::Recount(1));
        }
        client.pc = Pc::Held;
        // Told it holds, the user counts on it: checked on the hold itself.
        let lapsed = !client.counts_on_hold(now);
        say(|| {
            format!(
                "c{c} holds {:?} ({via:?}), counting until {}",
                claim.token,
                since + cfg.ttl
            )
        });
        s.ghost.reported_lapsed |= lapsed;
        note_fence(s, c);
    }

    /// `Lease::reconfirm`: the grant extended now (owner-checked) and WAITed
    /// for, to be counted on from this send.
    #[allow(clippy::too_many_arguments)]
    fn reconfirm(
        &self,
        s: &mut State,
        c: u8,
        mut claim: Claim,
        fence: u16,
        data: Option<Data>,
        via: Via,
        tries: u8,
    ) {
        say(|| format!("c{c}: the grant was read after its bound; extended first"));
        claim.step = Step::Reconfirm {
            sent: s.now,
            fence,
            data,
            via,
            tries: tries + 1,
        };
        s.client_mut(c).pc = Pc::Claim(claim);
        let req = Req::Refresh {
            token: claim.token,
            ttl: self.config.ttl,
            how: How::Grant,
        };
        self.send(s, c, Link::Request, req);
    }

    /// `Lock::recount`'s extension answered (`extended`: as `Hold::refreshed`
    /// reads it) after its `tries`-th send: counted on from its send if that
    /// is still ahead; late, sent again once; then the conversion is over, as
    /// when it is not ours (`Got::Lapsed`). Unanswered, `Lock::convert` lets
    /// the hold go (the conversion threw: fix (i)).
    fn recounted(&self, s: &mut State, c: u8, extended: Option<bool>, tries: u8) {
        let now = s.now;
        let client = s.client_mut(c);
        let counted = client.hold.is_some_and(|h| h.watch.counting(now));
        match extended {
            Some(true) if counted => {
                client.pc = Pc::Held;
                if let Some(h) = client.hold.as_mut() {
                    h.watch.watched = true;
                }
                s.ghost.recounted = true;
                say(|| format!("c{c} holds its converted hold, extended"));
                note_fence(s, c);
            }
            Some(true) if tries < 2 => self.refresh(s, c, self.config.ttl, Then::Recount(2)),
            Some(_) => {
                say(|| format!("c{c}: its converted hold is not counted on; let go"));
                let token = stop_watch(client).expect("held");
                client.hold = None;
                client.pc = Pc::Idle;
                self.release_token(s, c, token);
            }
            None => {
                client.pc = Pc::Held;
                if let Some(h) = client.hold.as_mut() {
                    uncounted(h, now, true);
                }
            }
        }
    }

    /// The grant read late is not ours (or not in time): a conversion's hold
    /// is let go (`Lock::convert`'s `Got::Lapsed`); a fresh claim's token is
    /// withdrawn (`Lease::replace_voided`, its withdraw in flight here) and a
    /// fresh one asks again while the wait lasts (the code asks once: a
    /// subset of what the model lets happen).
    fn grant_lapsed(&self, s: &mut State, c: u8, mut claim: Claim) {
        let token = claim.token;
        if claim.convert {
            say(|| format!("c{c}: its converted hold ran out; the conversion is over"));
            self.release_token(s, c, token);
            let client = s.client_mut(c);
            stop_watch(client);
            client.hold = None;
            client.pc = Pc::Idle;
            return;
        }
        let node = s.client(c).generation - 1;
        s.orphan(&self.config, node, Req::Abandon { token });
        claim.token = new_token(s.client_mut(c), c);
        claim.busy_since = None;
        if claim.deadline <= s.now {
            return self.claim_over(s, c, claim);
        }
        s.client_mut(c).pc = Pc::Claim(claim);
        self.attempt(s, c);
    }

    /// `LockClaim::adopts`: what resolve.lua found our token holding is what
    /// the claim wanted (an upgrade that finds its token still a reader did not
    /// happen).
    fn adopts(&self, c: u8, claim: Claim, owned: crate::redis::Owned) -> bool {
        match self.config.clients[usize::from(c)] {
            Program::Session { .. } => true,
            _ => owned.shared == (claim.want.kind() != Kind::Alone),
        }
    }

    /// The claim ends without what it asked for, and without an error: a fresh
    /// claim leaves the client holding nothing; a conversion keeps its hold
    /// (`Lock::convert`: `Got::Busy`).
    fn claim_over(&self, s: &mut State, c: u8, claim: Claim) {
        s.client_mut(c).pc = if claim.convert { Pc::Held } else { Pc::Idle };
    }

    /// The claim ends in an error: a conversion keeps the hold object (for its
    /// release), but what it is now is unknown until Redis is asked (the attempt
    /// may have converted it, or a WAIT shortfall released it), so nothing is
    /// counted on (`Lock::convert`, with fix (i); reverted: it counts on the
    /// kind and bound it had).
    fn claim_failed(&self, s: &mut State, c: u8) {
        let now = s.now;
        let fix = self.config.fixes.failed_conversion_asks;
        let client = s.client_mut(c);
        let Pc::Claim(claim) = client.pc else {
            client.pc = Pc::Idle;
            return;
        };
        if !claim.convert {
            client.pc = Pc::Idle;
            return;
        }
        client.pc = Pc::Held;
        // (q) Given back: `Lock::convert` lets the hold go (its give-back frees
        // it), the user holds nothing.
        let given_back = client
            .hold
            .is_some_and(|h| client.given_back == Some(h.token));
        if fix && given_back && self.config.fixes.given_back_dropped {
            stop_watch(client);
            client.hold = None;
            client.pc = Pc::Idle;
            return;
        }
        let lets_go = self.config.fixes.failed_conversion_lets_go;
        if let Some(h) = client.hold.as_mut().filter(|_| fix) {
            uncounted(h, now, lets_go);
        }
    }

    /// `Lease::give_up`: a token that may be queued (or hold the lease) is
    /// abandoned (`Lease::abandon`, left to run by itself); a conversion's only
    /// leaves the queue (`resolve`: its hold stays).
    fn give_up(&self, s: &mut State, c: u8, token: Token, queued: bool) {
        say(|| format!("c{c} gives up {token:?}"));
        if queued {
            let node = s.client(c).generation - 1;
            let convert = matches!(s.client(c).pc, Pc::Claim(cl) if cl.convert);
            let req = if convert {
                Req::Resolve { token }
            } else if self.config.abandons_fail {
                // Its resolve sent, no reply: `Error::Unresolved`.
                s.orphan(&self.config, node, Req::Resolve { token });
                return self.unresolved(s, c, token);
            } else if self.config.give_ups_apart {
                if let Pc::Claim(mut claim) = s.client(c).pc {
                    claim.step = Step::GiveUp { second: false };
                    s.client_mut(c).pc = Pc::Claim(claim);
                    return self.send(s, c, Link::Request, Req::Resolve { token });
                }
                Req::Abandon { token }
            } else {
                Req::Abandon { token }
            };
            s.orphan(&self.config, node, req);
        }
        self.claim_failed(s, c);
    }

    /// `Lease::release_token`, whose result nobody reads.
    fn release_token(&self, s: &mut State, c: u8, token: Token) {
        let node = s.client(c).generation - 1;
        if self.config.give_backs_answered && s.node_up(node) {
            // Answered: nothing is left pending (`left_to_settle` is false).
            s.execute(&self.config, node, Req::Release { token });
            return;
        }
        s.client_mut(c).given_back = Some(token);
        s.orphan(&self.config, node, Req::Release { token });
    }

    /// `Error::Unresolved`: a lock keeps the token for its next call to settle
    /// (`Lock::settle`); a session leaves it to the process's next call
    /// (`Lease::defer`).
    fn unresolved(&self, s: &mut State, c: u8, token: Token) {
        say(|| format!("c{c}: unresolved {token:?}, settled later"));
        if matches!(s.client(c).pc, Pc::Claim(cl) if cl.convert) {
            // `Lock::convert` keeps no unresolved token: the hold's own token,
            // released (whatever it holds) by the hold's release.
            return self.claim_failed(s, c);
        }
        match self.config.clients[usize::from(c)] {
            Program::Session { .. } | Program::Revoker { .. } => {
                let node = s.client(c).generation - 1;
                s.orphan(&self.config, node, Req::Abandon { token });
            }
            _ => s.client_mut(c).unresolved = Some(token),
        }
        s.client_mut(c).pc = Pc::Idle;
    }

    /// `Lease::switched_since`: asks the sentinels, and so learns of a switch.
    fn switched_since(&self, s: &mut State, c: u8, generation: u8) -> bool {
        let now = s.redis.generation;
        s.client_mut(c).generation = now;
        generation != now
    }

    /// `SessionStore::destroy` after its save said `LeaseLost`: the logout
    /// takes effect all the same, by session_revoke.lua.
    fn revoke_lost(&self, s: &mut State, c: u8) {
        let client = s.client_mut(c);
        stop_watch(client);
        client.hold = None;
        let nonce = c * 4 + client.ops;
        client.pc = Pc::Revoking {
            nonce,
            second: false,
        };
        self.send(s, c, Link::Request, Req::Revoke { nonce });
    }

    /// `SessionStore::save` for a write, or a destroy.
    #[allow(clippy::too_many_arguments)]
    fn on_save(
        &self,
        s: &mut State,
        c: u8,
        call: Call,
        outcome: Outcome,
        (data, destroy): (Data, bool),
        generation: u8,
        second: bool,
    ) {
        let again = Pc::Saving {
            data,
            destroy,
            generation,
            second: true,
        };
        match outcome {
            // Saved (or told "revoked") on a master that could not replicate
            // it, and a failover named a new master meanwhile: run again
            // there, as after a broken link.
            Outcome::Reply(Reply::Int(n @ (1 | 2)), Some(false))
                if !second && self.switched_since(s, c, generation) =>
            {
                s.ghost.revoked_destroy_rerun |= destroy && n == 2;
                self.again(s, c, call, again)
            }
            // A destroy that found the lock not ours (run again: nor its first
            // run's marker, session_save.lua): `LeaseLost`.
            Outcome::Reply(Reply::Int(0), _)
                if destroy && (!second || self.config.fixes.scripts.destroy_marker) =>
            {
                self.revoke_lost(s, c)
            }
            // Revoked (2): the revocation found this hold, so no earlier run
            // of ours saved. (A destroy of a revoked session is done, once
            // that logout is replicated: fix (ae).)
            Outcome::Reply(Reply::Int(n), acks) if !second || n >= 1 => {
                if n == 2 && acks != Some(false) {
                    if destroy {
                        s.ghost.destroy_counted_on_logout = true;
                    } else {
                        // Reported done, quietly (fix (ah)): the session is
                        // logged out, and what the write read is gone.
                        s.ghost.write_counted_on_logout = true;
                        s.ghost.logged_out |= s.client(c).read.map_or(0, Data::bit);
                    }
                }
                save_done(s, c, n == 1 || destroy, acks)
            }
            // The second run found the lock gone: did our first run do it?
            Outcome::Reply(..) => {
                s.client_mut(c).pc = Pc::Confirming { data, destroy };
                let req = if destroy {
                    Req::DestroyedBefore
                } else {
                    Req::SavedBefore { data }
                };
                self.send(s, c, Link::Request, req);
            }
            Outcome::Broken if !second => self.again(s, c, call, again),
            Outcome::Broken | Outcome::TimedOut => {
                // `SessionStore::abandon`: the unlock is left for later.
                let client = s.client_mut(c);
                let token = stop_watch(client).expect("held");
                client.hold = None;
                client.pc = Pc::Idle;
                let node = client.generation - 1;
                s.orphan(&self.config, node, Req::Abandon { token });
            }
        }
    }

    /// BLPOP's nap ran out (`Ok(None)`): the claim loop asks again.
    pub fn nap_over(&self, s: &mut State, c: u8, _call: Call) {
        self.attempt(s, c);
    }

    /// The watchdog renews a hold (`renew_on`): refresh.lua 'at_least' to the
    /// watch's ttl, on the watchdog's own link.
    pub fn renew(&self, s: &mut State, c: u8) {
        let now = s.now;
        let client = s.client_mut(c);
        let hold = client.hold.expect("watched");
        client.renewal = Some(Renewal {
            sent: now,
            ttl: hold.watch.ttl,
            stale: false,
        });
        let req = Req::Refresh {
            token: hold.token,
            ttl: hold.watch.ttl,
            how: How::Renewal,
        };
        say(|| format!("c{c}'s watchdog sends {}", show(req)));
        self.send(s, c, Link::Watchdog, req);
    }

    /// `settle` and `confirm` for one renewal.
    fn on_renewal(&self, s: &mut State, c: u8, call: Call, outcome: Outcome) {
        let now = s.now;
        let client = s.client_mut(c);
        let Some(r) = client.renewal.take() else {
            return;
        };
        let straddled = call.generation != client.generation;
        let Some(hold) = &mut client.hold else {
            return;
        };
        let w = &mut hold.watch;
        match outcome {
            // Lost, or revoked (2): ended either way (the code counts them apart).
            Outcome::Reply(Reply::Int(0 | 2), _) => {
                if w.state == WatchState::Watching {
                    w.state = WatchState::Lost;
                }
            }
            // A switch while we waited: what the old master answered does not
            // count. Too few replicas: not confirmed.
            Outcome::Reply(Reply::Int(1), acks) if !straddled && acks != Some(false) => {
                let counted = renewed(w, now, r);
                let end = w.end;
                say(|| match counted {
                    true => format!("c{c}'s watchdog: renewal confirmed, counting until {end}"),
                    false => {
                        format!("c{c}'s watchdog: renewal proves nothing, counting until {end}")
                    }
                });
            }
            _ => {
                if w.counting(now) {
                    w.retry = true;
                }
            }
        }
    }

    /// `Watch::failed` / `unanswered`: tried again at once (while the lease lasts).
    pub fn renewal_failed(&self, s: &mut State, c: u8) {
        let now = s.now;
        let client = s.client_mut(c);
        client.renewal = None;
        if let Some(h) = &mut client.hold {
            if h.watch.counting(now) {
                h.watch.retry = true;
            }
        }
    }
}

/// A conversion that ended in an error: its hold is of an unknown kind and
/// counted on no longer; `let_go` (`Lock::let_hold_go`): released by the next
/// call.
fn uncounted(h: &mut Hold, now: Time, let_go: bool) {
    h.kind = Kind::Unknown;
    h.watch.end = h.watch.end.min(now);
    if let_go {
        h.via = Via::LetGo;
    }
}

/// A reader's or writer's refresh of its hold, offered once before its
/// conversion (its hold's own count: the client's `refreshes` counts the
/// conversions), when `wanted` and the hold is counted on.
fn refresh_first(ops: &mut Vec<Op>, cfg: &Config, client: &crate::client::Client, wanted: bool) {
    if wanted && client.hold.is_some_and(|h| h.refreshes_sent == 0) {
        for &ttl in &cfg.refresh_ttls {
            ops.push(Op::Refresh(ttl));
        }
    }
}

/// `Watch::renewed`: the lease lasts at least `ttl` from when the renewal was
/// sent, unless a refresh of the holder's was answered after the renewal was
/// sent (then nothing is proved), or one is on its way (or never answered: it
/// may run after the renewal, but no earlier than it was sent, so its ttl from
/// then). False when it proved nothing.
fn renewed(w: &mut Watch, now: Time, r: Renewal) -> bool {
    if !w.counting(now) {
        return false;
    }
    w.retry = false;
    if r.stale {
        return false;
    }
    let bound = r.sent + w.setting.map_or(r.ttl, |(_, ttl)| ttl.min(r.ttl));
    if bound > w.end {
        w.end = bound;
    }
    true
}

/// `Hold::refreshed` / `Watch::set` (`fix_v`: fix (v)).
fn refreshed(s: &mut State, c: u8, sent: Time, ttl: Time, extended: Option<bool>, fix_v: bool) {
    let now = s.now;
    let client = s.client_mut(c);
    let Some(hold) = &mut client.hold else {
        return;
    };
    // Its own first run, whose link broke, may still come (and after a
    // renewal): it counts as one on its way.
    let on_its_way = (hold.unanswered != 0 && fix_v).then_some((sent, ttl));
    let w = &mut hold.watch;
    match extended {
        Some(true) if w.counting(now) || !w.watched => {
            w.setting = on_its_way;
            w.retry = false;
            w.end = sent + ttl;
            // A renewal sent before this answer may have run before the refresh.
            if let Some(r) = &mut client.renewal {
                r.stale = true;
            }
        }
        Some(true) => w.setting = on_its_way,
        Some(false) => {
            w.setting = None;
            if w.state == WatchState::Watching {
                w.state = WatchState::Lost;
            }
        }
        None => {}
    }
}

/// The end of a save: reported saved only when it ran and, with wait_replicas,
/// was replicated (`replicated(acks)?`).
fn save_done(s: &mut State, c: u8, ok: bool, acks: Option<bool>) {
    let client = s.client_mut(c);
    let (data, destroy) = match client.pc {
        Pc::Saving { data, destroy, .. } | Pc::Confirming { data, destroy } => (data, destroy),
        pc => unreachable!("save_done in {pc:?}"),
    };
    stop_watch(client);
    client.hold = None;
    client.pc = Pc::Idle;
    if destroy {
        // What it read is gone (fix (ae): a logout that revoked it, once
        // replicated), unless too few replicas acknowledged it (an error).
        if acks != Some(false) {
            s.ghost.logged_out |= client.read.map_or(0, Data::bit);
        }
        say(|| format!("c{c}: destroy reported done ({acks:?})"));
        return;
    }
    if ok && acks != Some(false) {
        s.ghost.acked |= data.bit();
    }
    say(|| match (ok, acks) {
        (true, Some(false)) => format!("c{c}: save of {data:?} reported failed (too few replicas)"),
        (true, _) => format!("c{c}: {data:?} reported saved"),
        (false, _) => format!("c{c}: save of {data:?} refused (lease lost, or revoked)"),
    });
}

fn new_token(client: &mut crate::client::Client, c: u8) -> Token {
    client.tokens += 1;
    Token {
        client: c,
        n: client.tokens,
    }
}

fn new_hold(
    ttl: Time,
    token: Token,
    fence: u16,
    end: Time,
    renew: bool,
    generation: u8,
    via: Via,
) -> Hold {
    Hold {
        token,
        kind: Kind::Alone,
        fence,
        watch: Watch {
            end,
            state: WatchState::Watching,
            ttl,
            renew,
            setting: None,
            generation,
            retry: false,
            watched: true,
        },
        via,
        fence_noted: false,
        weight: 1,
        refreshes_sent: 0,
        unanswered: 0,
    }
}

/// `Hold::stop_watch`: the holder lets go. The hold's token.
fn stop_watch(client: &mut crate::client::Client) -> Option<Token> {
    let hold = client.hold.as_mut()?;
    if hold.watch.state == WatchState::Watching {
        hold.watch.state = WatchState::Stopped;
    }
    Some(hold.token)
}

/// Adds the fence of a hold the client now counts on to the history, which
/// must rise strictly.
fn note_fence(s: &mut State, c: u8) {
    let now = s.now;
    let generation = s.redis.generation;
    let client = &mut s.clients[usize::from(c)];
    if !client.counts_on_hold(now) {
        return;
    }
    let Some(hold) = &mut client.hold else {
        return;
    };
    if hold.fence == 0 || hold.fence_noted {
        return;
    }
    hold.fence_noted = true;
    let fence = hold.fence;
    let ghost = &mut s.ghost;
    // The same grant, counted on again by another object (restore()), is not a
    // new one.
    let again = fence == ghost.last_fence && hold.token == ghost.last_fence_token;
    if fence <= ghost.last_fence && !again {
        ghost.fence_regressed = true;
    }
    ghost.last_fence = ghost.last_fence.max(fence);
    ghost.last_fence_token = hold.token;
    // Outside the failover window: a hold the current master granted or was
    // checked against.
    if hold.watch.generation == generation {
        if fence <= ghost.last_fence_outside_window && !again {
            ghost.fence_regressed_outside_window = true;
        }
        ghost.last_fence_outside_window = ghost.last_fence_outside_window.max(fence);
    }
}
