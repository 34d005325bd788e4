//! What a client does: the user calls it may make, and how it reacts to each
//! reply or failure, as `lease.rs`, `lock.rs`, `session.rs`, `hold.rs` and
//! `watchdog.rs` do (each function names what it mirrors).

use crate::client::{
    Call, Claim, Hold, Link, Outcome, Pc, Program, Renewal, Req, Step, Via, Watch, WatchState,
};
use crate::redis::{Data, Reply, Time, Token, NAP};
use crate::system::{say, show, Action, Op, State, System};

impl System {
    /// The calls the user may make now.
    pub fn user_ops(&self, s: &State, c: u8, actions: &mut Vec<Action>) {
        let cfg = &self.config;
        let client = s.client(c);
        let program = cfg.clients[usize::from(c)];
        let busy = client.link.is_some();
        match (program, client.pc) {
            (Program::Lock { acquires, .. }, Pc::Idle) if !busy && client.ops < acquires => {
                actions.push(Action::User(c, Op::Acquire));
            }
            (Program::Lock { refreshes, .. }, Pc::Held) => {
                let counting = client.hold.is_some_and(|h| h.watch.counting(s.now));
                if counting && client.refreshes < refreshes {
                    for &ttl in &cfg.refresh_ttls {
                        actions.push(Action::User(c, Op::Refresh(ttl)));
                    }
                }
                if counting && cfg.fence_ops && client.hold.is_some_and(|h| h.fence == 0) {
                    actions.push(Action::User(c, Op::Fence));
                }
                actions.push(Action::User(c, Op::Release));
            }
            (Program::Session { opens }, Pc::Idle) if !busy && client.ops < opens => {
                actions.push(Action::User(c, Op::Open));
            }
            (Program::Session { .. }, Pc::Held) => actions.push(Action::User(c, Op::Write)),
            (Program::Revoker { revokes }, Pc::Idle) if !busy && client.ops < revokes => {
                actions.push(Action::User(c, Op::Revoke));
            }
            _ => {}
        }
        let crashable = !matches!(program, Program::Revoker { .. });
        if s.crashes > 0 && crashable && client.pc != Pc::Idle {
            actions.push(Action::User(c, Op::Crash));
        }
    }

    pub fn user(&self, s: &mut State, c: u8, op: Op) {
        let cfg = &self.config;
        match op {
            Op::Acquire => {
                s.client_mut(c).ops += 1;
                self.lock_acquire(s, c);
            }
            Op::Refresh(ttl) => {
                s.client_mut(c).refreshes += 1;
                self.refresh(s, c, ttl, false);
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
                self.claim(s, c);
            }
            Op::Write => {
                let client = s.client_mut(c);
                let token = client.hold.expect("held").token;
                let write = c * 4 + client.ops;
                let lineage = client.read.map_or(0, |d| d.lineage) | 1 << write;
                let data = Data { write, lineage };
                client.pc = Pc::Saving {
                    data,
                    generation: client.generation,
                    second: false,
                };
                self.send(s, c, Link::Request, Req::Save { token, data });
            }
            Op::Revoke => {
                let client = s.client_mut(c);
                client.ops += 1;
                let nonce = c * 4 + client.ops;
                client.pc = Pc::Revoking {
                    nonce,
                    second: false,
                };
                self.send(s, c, Link::Request, Req::Revoke { nonce });
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

    /// `Lock::acquire`: settle what an earlier call left open, extend a hold we
    /// still have (`renew_held`), let go of one the watchdog gave up on, then
    /// claim.
    fn lock_acquire(&self, s: &mut State, c: u8) {
        let now = s.now;
        let client = s.client_mut(c);
        if let Some(token) = client.unresolved {
            client.pc = Pc::Settling {
                asked: now,
                generation: client.generation,
                second: false,
            };
            self.send(s, c, Link::Request, Req::Resolve { token });
            return;
        }
        match client.hold {
            Some(h) if h.watch.state == WatchState::Watching => {
                self.refresh(s, c, self.config.ttl, true);
            }
            Some(h) => {
                client.hold = None;
                let node = client.generation - 1;
                s.orphan(&self.config, node, Req::Release { token: h.token });
                self.claim(s, c);
            }
            None => self.claim(s, c),
        }
    }

    /// `Lease::claim` begins: a fresh token, the deadline, the first attempt.
    fn claim(&self, s: &mut State, c: u8) {
        let now = s.now;
        let client = s.client_mut(c);
        let token = new_token(client, c);
        client.pc = Pc::Claim(Claim {
            token,
            generation: client.generation,
            deadline: now + self.config.wait,
            retried: false,
            busy_since: None,
            sent: now,
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
            },
        };
        s.client_mut(c).pc = Pc::Claim(claim);
        self.send(s, c, Link::Request, req);
    }

    /// `Lease::refresh`: nothing is counted on past what it may leave
    /// (`Hold::refreshing`), then refresh.lua sets the expiry.
    fn refresh(&self, s: &mut State, c: u8, ttl: Time, renew_held: bool) {
        let now = s.now;
        let client = s.client_mut(c);
        let hold = client.hold.as_mut().expect("held");
        let token = hold.token;
        let w = &mut hold.watch;
        w.setting = Some((now, ttl));
        w.ttl = ttl;
        w.end = w.end.min(now + ttl);
        client.pc = Pc::Refreshing {
            sent: now,
            ttl,
            second: false,
            renew_held,
        };
        self.send(
            s,
            c,
            Link::Request,
            Req::Refresh {
                token,
                ttl,
                at_least: false,
            },
        );
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
            } => match outcome {
                // `Lock::settle`: the lease, if ours, was set before we asked.
                Outcome::Reply(Reply::Owned(Some(owned)), _) => {
                    let client = s.client_mut(c);
                    let token = client.unresolved.take().expect("unresolved");
                    client.hold = Some(new_hold(
                        cfg.ttl,
                        token,
                        owned.fence.unwrap_or(0),
                        asked + owned.pttl,
                        cfg.renew,
                        generation,
                        Via::Settled,
                    ));
                    // With wait_replicas settle refreshes (the acquire's WAIT never
                    // ran), and `renew_held` refreshes anyway: one refresh, whose
                    // result is the acquire's.
                    self.refresh(s, c, cfg.ttl, true);
                }
                Outcome::Reply(..) => {
                    s.client_mut(c).unresolved = None;
                    self.claim(s, c);
                }
                Outcome::Broken if !second => self.again(
                    s,
                    c,
                    call,
                    Pc::Settling {
                        asked,
                        generation,
                        second: true,
                    },
                ),
                Outcome::Broken | Outcome::TimedOut => s.client_mut(c).pc = Pc::Idle,
            },
            Pc::Refreshing {
                sent,
                ttl,
                second,
                renew_held,
            } => {
                let extended = match outcome {
                    Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => Some(true),
                    Outcome::Reply(Reply::Int(1), _) => None,
                    Outcome::Reply(..) => Some(false),
                    Outcome::Broken if !second => {
                        let pc = Pc::Refreshing {
                            sent,
                            ttl,
                            second: true,
                            renew_held,
                        };
                        return self.again(s, c, call, pc);
                    }
                    Outcome::Broken | Outcome::TimedOut => None,
                };
                refreshed(s, c, sent, ttl, extended);
                let client = s.client_mut(c);
                match extended {
                    Some(true) => client.pc = Pc::Held,
                    Some(false) => {
                        // Not ours: `Lock::refresh` forgets it; `Lock::acquire`
                        // goes on to claim.
                        client.hold = None;
                        client.pc = Pc::Idle;
                        if renew_held {
                            self.claim(s, c);
                        }
                    }
                    // An error: `acquire()` throws (the hold is kept for the next
                    // call); after `refresh()` the user still holds what it had.
                    None if renew_held => client.pc = Pc::Idle,
                    None => client.pc = Pc::Held,
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
                generation,
                second,
            } => self.on_save(s, c, call, outcome, data, generation, second),
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
                let (reply, acks) = match outcome {
                    Outcome::Reply(reply, acks) => (reply, acks),
                    Outcome::Broken => return self.resolve_broken(s, c, claim),
                    Outcome::TimedOut => return self.unresolved(s, c, token),
                };
                // `claim_replicated`: too few replicas for a grant.
                if acks == Some(false) {
                    if self.switched_since(s, c, claim.generation) {
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
                            // That attempt did not queue us: busy.
                            s.client_mut(c).pc = Pc::Idle;
                            return;
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
                Outcome::Reply(Reply::Owned(Some(owned)), _) => {
                    let since = claim.busy_since.unwrap_or(claim.sent);
                    let fence = owned.fence.unwrap_or(0);
                    self.grant(s, c, claim, since, fence, owned.data, Via::Adopted)
                }
                Outcome::Reply(..) if !claim.retried => {
                    // Voided: a fresh token tries once more.
                    claim.retried = true;
                    claim.token = new_token(s.client_mut(c), c);
                    claim.busy_since = None;
                    s.client_mut(c).pc = Pc::Claim(claim);
                    self.attempt(s, c);
                }
                Outcome::Reply(..) => s.client_mut(c).pc = Pc::Idle,
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
            } => match outcome {
                Outcome::Reply(Reply::Int(1), acks) if acks != Some(false) => {
                    self.won(s, c, claim, since, fence, data, via)
                }
                Outcome::Reply(..) => {
                    // Too few replicas, or no longer ours: given back (unless
                    // the master changed meanwhile), and given up.
                    if !self.switched_since(s, c, claim.generation) {
                        self.release_token(s, c, token);
                    }
                    self.give_up(s, c, token, true)
                }
                Outcome::Broken | Outcome::TimedOut => self.give_up(s, c, token, true),
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
        claim.step = Step::Grant {
            since,
            fence,
            data,
            via,
        };
        s.client_mut(c).pc = Pc::Claim(claim);
        let req = Req::Refresh {
            token: claim.token,
            ttl: cfg.ttl,
            at_least: false,
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
        let client = s.client_mut(c);
        client.hold = Some(new_hold(
            cfg.ttl,
            claim.token,
            fence,
            since + cfg.ttl,
            cfg.renew,
            claim.generation,
            via,
        ));
        client.read = data;
        client.pc = Pc::Held;
        say(|| {
            format!(
                "c{c} holds {:?} ({via:?}), counting until {}",
                claim.token,
                since + cfg.ttl
            )
        });
        note_fence(s, c);
    }

    /// `Lease::give_up`: a token that may be queued (or hold the lease) is
    /// abandoned (`Lease::abandon`, left to run by itself).
    fn give_up(&self, s: &mut State, c: u8, token: Token, queued: bool) {
        say(|| format!("c{c} gives up {token:?}"));
        if queued {
            let node = s.client(c).generation - 1;
            s.orphan(&self.config, node, Req::Abandon { token });
        }
        s.client_mut(c).pc = Pc::Idle;
    }

    /// `Lease::release_token`, whose result nobody reads.
    fn release_token(&self, s: &mut State, c: u8, token: Token) {
        let node = s.client(c).generation - 1;
        s.orphan(&self.config, node, Req::Release { token });
    }

    /// `Error::Unresolved`: a lock keeps the token for its next call to settle
    /// (`Lock::settle`); a session leaves it to the process's next call
    /// (`Lease::defer`).
    fn unresolved(&self, s: &mut State, c: u8, token: Token) {
        say(|| format!("c{c}: unresolved {token:?}, settled later"));
        match self.config.clients[usize::from(c)] {
            Program::Lock { .. } => s.client_mut(c).unresolved = Some(token),
            _ => {
                let node = s.client(c).generation - 1;
                s.orphan(&self.config, node, Req::Abandon { token });
            }
        }
        s.client_mut(c).pc = Pc::Idle;
    }

    /// `Lease::switched_since`: asks the sentinels, and so learns of a switch.
    fn switched_since(&self, s: &mut State, c: u8, generation: u8) -> bool {
        let now = s.redis.generation;
        s.client_mut(c).generation = now;
        generation != now
    }

    /// `SessionStore::save` for a write.
    #[allow(clippy::too_many_arguments)]
    fn on_save(
        &self,
        s: &mut State,
        c: u8,
        call: Call,
        outcome: Outcome,
        data: Data,
        generation: u8,
        second: bool,
    ) {
        let again = Pc::Saving {
            data,
            generation,
            second: true,
        };
        match outcome {
            // Saved on a master that could not replicate it, and a failover named
            // a new master meanwhile: run again there, as after a broken link.
            Outcome::Reply(Reply::Int(1), Some(false))
                if !second && self.switched_since(s, c, generation) =>
            {
                self.again(s, c, call, again)
            }
            Outcome::Reply(Reply::Int(n), acks) if !second || n == 1 => {
                save_done(s, c, n == 1, acks)
            }
            // The second run found the lock gone: did our first run do it?
            Outcome::Reply(..) => {
                s.client_mut(c).pc = Pc::Confirming { data };
                self.send(s, c, Link::Request, Req::SavedBefore { data });
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
            at_least: true,
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
            Outcome::Reply(Reply::Int(0), _) => {
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

/// `Watch::renewed`: the lease lasts at least `ttl` from when the renewal was
/// sent, unless a refresh of the holder's is on its way (then no more than that
/// leaves), or was answered after the renewal was sent (then nothing is proved).
/// False when it proved nothing.
fn renewed(w: &mut Watch, now: Time, r: Renewal) -> bool {
    if !w.counting(now) {
        return false;
    }
    w.retry = false;
    let mut bound = r.sent + r.ttl;
    if let Some((at, ttl)) = w.setting {
        bound = bound.min(at + ttl);
    } else if r.stale {
        return false;
    }
    if bound > w.end {
        w.end = bound;
    }
    true
}

/// `Hold::refreshed` / `Watch::set`.
fn refreshed(s: &mut State, c: u8, sent: Time, ttl: Time, extended: Option<bool>) {
    let now = s.now;
    let client = s.client_mut(c);
    let Some(hold) = &mut client.hold else {
        return;
    };
    let w = &mut hold.watch;
    match extended {
        Some(true) if w.counting(now) => {
            w.setting = None;
            w.retry = false;
            w.end = sent + ttl;
            // A renewal sent before this answer may have run before the refresh.
            if let Some(r) = &mut client.renewal {
                r.stale = true;
            }
        }
        Some(true) => w.setting = None,
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
    let data = match client.pc {
        Pc::Saving { data, .. } | Pc::Confirming { data } => data,
        pc => unreachable!("save_done in {pc:?}"),
    };
    stop_watch(client);
    client.hold = None;
    client.pc = Pc::Idle;
    if ok && acks != Some(false) {
        s.ghost.acked |= 1 << data.write;
    }
    say(|| match (ok, acks) {
        (true, Some(false)) => format!("c{c}: save of {data:?} reported failed (too few replicas)"),
        (true, _) => format!("c{c}: {data:?} reported saved"),
        (false, _) => format!("c{c}: save of {data:?} refused (lease lost)"),
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
        fence,
        watch: Watch {
            end,
            state: WatchState::Watching,
            ttl,
            renew,
            setting: None,
            generation,
            retry: false,
        },
        via,
        fence_noted: false,
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
    if fence <= ghost.last_fence {
        ghost.fence_regressed = true;
    }
    ghost.last_fence = ghost.last_fence.max(fence);
    // Outside the failover window: a hold the current master granted or was
    // checked against.
    if hold.watch.generation == generation {
        if fence <= ghost.last_fence_outside_window {
            ghost.fence_regressed_outside_window = true;
        }
        ghost.last_fence_outside_window = ghost.last_fence_outside_window.max(fence);
    }
}
