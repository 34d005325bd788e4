//! The watchdog: one background thread per process that renews auto-renewed
//! leases while the request thread is busy (a slow query, a `sleep()`, a curl
//! call), follows Sentinel failovers (and a Cluster's, asking for its slot map
//! while it watches holds there), and closes links left idle.
//!
//! The thread never calls into PHP. It starts on demand (never in the php-fpm
//! master, which holds nothing), talks to Redis over its own connections (never
//! the request's), holds its state's mutex only for bookkeeping, never across
//! I/O that may wait (a subscription's keep-alive PING is a write to a socket
//! that never blocks), and ends once it has nothing left to do. A forked child starts its own:
//! the parent's is left alone in the child (its mutex may have been held at the
//! fork).
//!
//! - Renewals: every `ttl / 3` each lease is extended to at least its ttl by the
//!   owner-checked refresh script (as a function where the link runs them, see
//!   `scripts`); the leases due on one endpoint go in one pipeline. A renewal
//!   that finds the lease gone marks it lost. When Redis does
//!   not answer, renewal is tried again until the lease would end, and then it is
//!   marked expired: from that moment nobody can say it is still ours. With
//!   `wait_replicas`, a renewal counts only once that many replicas acknowledged
//!   it (one WAIT per round trip). One endpoint that stops answering delays the
//!   others' renewals by at most half of what is left of their leases.
//! - Failovers: for every Sentinel service in use, a subscription to each of its
//!   sentinels' `+switch-master` channel. A switch starts a new generation of the
//!   service (see `sentinel`): links to the old master are no longer used, and
//!   every hold on that service is looked for on the new master; one that is not
//!   there is marked lost, so its holder learns it at its next call.
//!   A subscription quiet for 5 s is sent a PING, and made again when it goes
//!   unanswered (a connection dropped without a word). Without a subscription,
//!   the thread's own links are checked against the sentinels as pooled links
//!   are (see `pool`).
//! - Idle links (the request pool's, and the thread's own) are closed after the
//!   pool's idle timeout.

use std::os::fd::RawFd;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{Cmd, Value};

use crate::core::dsn::{Addr, Endpoint, Identity, Topology, Wait};
pub use crate::core::hold::Kind;
use crate::core::hold::{self, millis, Hold, Watch};
use crate::core::metrics::{self, Counter};
use crate::core::pid::PerProcess;
use crate::core::pool;
use crate::core::scripts::{self, NotRun};
use crate::core::sentinel::{self, Event, Subscription};
use crate::core::topology::{self, Link};

/// Leases due this close together go in the same round trip.
const COALESCE: Duration = Duration::from_millis(50);

/// After a subscription failed, the next try comes this much later.
const RESUBSCRIBE: Duration = Duration::from_millis(500);

/// While a failover of a service with leases is under way, how often the thread
/// looks again.
const SWITCH_NAP: Duration = Duration::from_millis(50);

/// How often a Cluster's slot map is asked for while holds on it are watched:
/// a Cluster announces no failover (see `cluster`).
const CLUSTER_POLL: Duration = Duration::from_secs(1);

/// A poll of a Cluster's slot map given less time than this waits for the next.
const MIN_POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// How long after a check of holds that did not complete it is tried again.
const CHECK_AGAIN: Duration = Duration::from_millis(100);

/// With nothing else to do for this long, the thread ends.
const LINGER: Duration = Duration::from_secs(2);

/// Has the watchdog look after `hold` (a lease at `key` on `ep`) until it is
/// released, lost, or every copy of it is dropped: renewing it (`renew`), and,
/// on a Sentinel service, checking it after every failover. `generation`: the
/// service's generation when the hold's acquire was sent; a newer one now means
/// it may have been taken on a master since replaced, and it is checked at once.
pub fn watch(
    ep: &Arc<Endpoint>,
    (key, holders): (&[u8], &[u8]),
    hold: &mut Hold,
    kind: Kind,
    renew: bool,
    generation: u64,
) {
    // Watched already (an ended watch stays ended: the hold is not revived).
    if hold.watch.is_some() {
        return;
    }
    if !renew && generation == 0 {
        return;
    }
    let w = Arc::new(Watch::new(
        (key.to_vec(), holders.to_vec()),
        hold,
        kind,
        ep.wait,
        renew,
        generation,
    ));
    hold.watch = Some(w.clone());
    let stale = generation != 0 && generation != topology::generation(ep);
    let due = w.due();
    let wd = Watchdog::current();
    let mut st = wd.state.lock();
    let lane = st.lane(ep);
    lane.watches.retain(still_watched);
    lane.watches.push(Arc::downgrade(&w));
    lane.used = Instant::now();
    let poll_at = lane.polled + CLUSTER_POLL;
    st.watched += 1;
    wd.run(&mut st);
    // Sleeping past this lease's first renewal, or it needs checking now, or its
    // Sentinel service has no subscription yet, or past its Cluster's next poll
    // (the thread may sleep until an idle link closes, a minute).
    let unheard = sentinel::is_sentinel(ep) && !sentinel::subscribed(ep);
    let sleeps_past = |at: Instant| st.sleeping_until.is_some_and(|until| at < until);
    if stale || unheard || (renew && sleeps_past(due)) || (is_cluster(ep) && sleeps_past(poll_at)) {
        st.wake();
    }
}

fn is_cluster(ep: &Endpoint) -> bool {
    matches!(ep.topology, Topology::Cluster { .. })
}

/// Makes sure the thread runs while the pool keeps links or a Sentinel service
/// is in use: it closes the links once idle, and follows the service's failovers.
pub fn keep_watch() {
    if pool::idle_links() == 0 && !sentinel::any() {
        return;
    }
    let wd = Watchdog::current();
    let mut st = wd.state.lock();
    if !st.running {
        wd.run(&mut st);
    } else if let (Some(until), Some(close)) = (st.sleeping_until, pool::next_close()) {
        // A link this request gave back closes sooner than the thread planned
        // for (under ZTS each request has its own idle timeout).
        if close < until {
            st.wake();
        }
    }
}

/// Stops this process's watchdog thread and waits for it (module shutdown: the
/// code it runs is about to be unloaded). Bounded by a read timeout: the thread
/// may be waiting for a reply.
pub fn shutdown() {
    let Some(wd) = WATCHDOG.current() else {
        return;
    };
    let thread = {
        let mut st = wd.state.lock();
        st.stop = true;
        st.wake();
        st.thread.take()
    };
    if let Some(t) = thread {
        let _ = t.join();
    }
    // A later watched lease (none, after MSHUTDOWN) would start it again.
    wd.state.lock().stop = false;
}

/// How many leases this process's watchdog renews (for tests).
pub fn watched() -> usize {
    WATCHDOG.current().map_or(0, |wd| {
        wd.state
            .lock()
            .lanes
            .iter()
            .flat_map(|l| &l.watches)
            .filter_map(Weak::upgrade)
            .filter(|w| w.watching() && w.renew)
            .count()
    })
}

/// How many watchdog threads run in this process: 0 or 1 (for tests).
pub fn threads() -> usize {
    WATCHDOG
        .current()
        .map_or(0, |wd| usize::from(wd.state.lock().running))
}

/// Whether a subscription to some sentinel of `ep`'s service is up (for tests).
pub fn subscribed(ep: &Endpoint) -> bool {
    WATCHDOG
        .current()
        .is_some_and(|wd| wd.state.lock().vouched_for(ep))
}

fn still_watched(w: &Weak<Watch>) -> bool {
    w.upgrade().is_some_and(|w| w.watching())
}

static WATCHDOG: PerProcess<Watchdog> = PerProcess::new();

struct Watchdog {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    lanes: Vec<Lane>,
    subs: Vec<Sub>,
    thread: Option<JoinHandle<()>>,
    running: bool,
    /// While the thread runs: a pipe it polls with its subscriptions; a byte
    /// written wakes it. Closed by the thread as it ends.
    pipe: Option<(RawFd, RawFd)>,
    stop: bool,
    /// When the sleeping thread wakes up by itself; `None` while it works.
    sleeping_until: Option<Instant>,
    /// Holds given to watch so far (see `plan`).
    watched: u64,
}

impl State {
    /// Whether a subscription to a sentinel of `ep`'s service is up.
    fn vouched_for(&self, ep: &Endpoint) -> bool {
        self.subs
            .iter()
            .any(|s| sentinel::same_service(&s.service, ep) && s.conn.is_some())
    }
}

/// The leases watched on one endpoint, and the thread's link to it.
struct Lane {
    endpoint: Arc<Endpoint>,
    identity: Identity,
    watches: Vec<Weak<Watch>>,
    /// `None` while the thread uses it (or before it is needed).
    link: Option<Link>,
    /// When it last had leases to watch.
    used: Instant,
    /// When a Cluster's slot map was last asked for (see `CLUSTER_POLL`).
    polled: Instant,
    /// A check that did not complete (no link, no reply, a transaction aborted
    /// by a redirect mid-migration) is tried again from then, not at once.
    check_after: Instant,
}

/// A subscription to one sentinel of a service.
struct Sub {
    service: Endpoint,
    sentinel: Addr,
    conn: Option<Subscription>,
    retry_at: Instant,
}

impl State {
    fn wake(&self) {
        if let Some((_, tx)) = self.pipe {
            // SAFETY: writes one byte from a valid buffer to our own pipe, open
            // while the state says so; a full pipe already wakes the thread.
            unsafe { libc::write(tx, [1u8].as_ptr().cast(), 1) };
        }
    }

    /// Closes the wake-up pipe (the thread ends, or a forked child tidies up).
    fn close_pipe(&mut self) {
        if let Some((rx, tx)) = self.pipe.take() {
            // SAFETY: our own descriptors, never used again.
            unsafe {
                libc::close(rx);
                libc::close(tx);
            }
        }
    }

    fn lane(&mut self, ep: &Arc<Endpoint>) -> &mut Lane {
        let i = match self.lanes.iter().position(|l| ep.is(&l.identity)) {
            Some(i) => i,
            None => {
                self.lanes.push(Lane {
                    endpoint: ep.clone(),
                    identity: ep.identity(),
                    watches: Vec::new(),
                    link: None,
                    used: Instant::now(),
                    polled: Instant::now(),
                    check_after: Instant::now(),
                });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[i]
    }
}

impl Watchdog {
    fn current() -> &'static Watchdog {
        WATCHDOG.get(
            || Watchdog {
                state: Mutex::new(State::default()),
            },
            |parent| {
                // This process's copies of the parent's descriptors: closing them
                // leaves the parent's alone. Its state may be locked for ever:
                // then they leak, once.
                if let Some(mut st) = parent.state.try_lock() {
                    st.close_pipe();
                    st.subs.clear();
                    st.lanes.clear();
                }
            },
        )
    }

    /// Starts the thread if it is not running (with the state locked).
    fn run(&'static self, st: &mut State) {
        if st.running || st.stop {
            return;
        }
        if let Some(old) = st.thread.take() {
            // It ended by itself (running is false): joining returns at once.
            let _ = old.join();
        }
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return;
        }
        st.pipe = Some((fds[0], fds[1]));
        st.thread = std::thread::Builder::new()
            .name("redis_lease".into())
            .stack_size(128 * 1024)
            .spawn(move || self.main())
            .ok();
        // Could not start a thread: leases then simply end at their ttl, and
        // their holders learn it on release, as without renewal.
        st.running = st.thread.is_some();
        if !st.running {
            st.close_pipe();
        }
    }

    fn main(&'static self) {
        // A panic (a bug) must not leave the watchdog marked running with no
        // thread, which nothing would start again: no renewal, no failover
        // check for the rest of the process. It ends the thread as idling
        // does; the next hold to watch starts another.
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()));
        if served.is_err() {
            let mut st = self.state.lock();
            st.running = false;
            st.close_pipe();
        }
    }

    fn serve(&'static self) {
        let mut idle_since = Instant::now();
        loop {
            let Some(work) = self.plan(&mut idle_since) else {
                return;
            };
            work.run(self);
        }
    }

    /// What to do next, with the state locked; `None` when the thread ends.
    fn plan(&'static self, idle_since: &mut Instant) -> Option<Work> {
        let idle = pool::idle_timeout();
        let mut st = self.state.lock();
        let watched: Vec<&Endpoint> = st
            .lanes
            .iter()
            .filter(|l| l.watches.iter().any(still_watched))
            .map(|l| &*l.endpoint)
            .collect();
        let services = sentinel::in_use(idle.unwrap_or(Duration::MAX), &watched);
        st.sleeping_until = None;
        if st.stop {
            st.running = false;
            st.close_pipe();
            return None;
        }
        let now = Instant::now();
        // Subscriptions: one per sentinel of each service in use.
        st.subs.retain(|s| {
            services
                .iter()
                .any(|svc| sentinel::same_service(svc, &s.service))
        });
        for svc in &services {
            let Topology::Sentinel { sentinels, .. } = &svc.topology else {
                continue;
            };
            for addr in sentinels {
                let known = st
                    .subs
                    .iter()
                    .any(|s| sentinel::same_service(&s.service, svc) && s.sentinel == *addr);
                if !known {
                    st.subs.push(Sub {
                        service: svc.clone(),
                        sentinel: addr.clone(),
                        conn: None,
                        retry_at: now,
                    });
                }
            }
        }
        // Quiet subscriptions are asked whether they are still there (a PING:
        // a write that never blocks); one that does not answer is dropped by
        // `listen` and made again, which asks the sentinels for the master: a
        // failover it missed is learned then.
        let mut asked_by: Vec<Instant> = Vec::new();
        for i in 0..st.subs.len() {
            let Some(conn) = st.subs[i].conn.as_mut() else {
                continue;
            };
            match conn.keep_alive(now) {
                Ok(at) => asked_by.push(at),
                Err(_) => unsubscribe(&mut st, i),
            }
        }
        let mut work = Work::default();
        for (i, sub) in st.subs.iter().enumerate() {
            if sub.conn.is_none() && sub.retry_at <= now && sub.service.tls.is_none() {
                work.subscribe.push(i);
            }
        }
        // Lanes: renewals due, holds to look for after a failover, idle links.
        let mut first_end: Option<Instant> = None;
        for lane in &mut st.lanes {
            lane.watches.retain(still_watched);
            if !lane.watches.is_empty() {
                lane.used = now;
            }
            for w in lane.watches.iter().filter_map(Weak::upgrade) {
                if w.renew {
                    first_end = Some(first_end.map_or(w.safe_until(), |e| e.min(w.safe_until())));
                }
            }
        }
        for (i, lane) in st.lanes.iter_mut().enumerate() {
            // Nothing goes to a service while its failover is under way: renewals
            // wait for the new master (and end at their bound if it comes late).
            if sentinel::switching(&lane.endpoint) {
                continue;
            }
            let generation = topology::generation(&lane.endpoint);
            let live: Vec<Arc<Watch>> = lane.watches.iter().filter_map(Weak::upgrade).collect();
            let check: Vec<Arc<Watch>> = live
                .iter()
                .filter(|w| generation != 0 && w.generation() < generation)
                .filter(|_| lane.check_after <= now)
                .cloned()
                .collect();
            let renew: Vec<Arc<Watch>> = live
                .iter()
                .filter(|w| w.renew && w.due() <= now + COALESCE)
                .cloned()
                .collect();
            // The clock runs while the lane does, holds or not: a thread that
            // slept past it would be woken by every hold a loop takes.
            let due = is_cluster(&lane.endpoint) && lane.polled + CLUSTER_POLL <= now;
            if due {
                lane.polled = now;
            }
            let poll = due && live.iter().any(|w| !w.ended());
            if (!renew.is_empty() && renew.iter().any(|w| w.due() <= now))
                || !check.is_empty()
                || poll
            {
                work.lanes.push(LaneWork {
                    index: i,
                    endpoint: lane.endpoint.clone(),
                    link: lane.link.take(),
                    renew: if renew.iter().any(|w| w.due() <= now) {
                        renew
                    } else {
                        Vec::new()
                    },
                    check,
                    generation,
                    poll,
                });
            }
        }
        // The most urgent lane first; each may spend only half of what is left of
        // the other lanes' leases.
        // (A lane with only a poll to do, last.)
        work.lanes.sort_by_key(|l| {
            let first = l.renew.iter().chain(&l.check).map(|w| w.safe_until()).min();
            (first.is_none(), first)
        });
        work.first_end = first_end;
        if !work.is_empty() {
            *idle_since = now;
            return Some(work);
        }
        // Nothing due now: close what has been idle, then sleep until the next
        // thing due.
        let mut next: Vec<Instant> = Vec::new();
        for lane in &st.lanes {
            if sentinel::switching(&lane.endpoint) {
                // Its switch is announced on a subscription: a short nap covers
                // the case where it is missed.
                next.push(now + SWITCH_NAP);
                continue;
            }
            for w in lane.watches.iter().filter_map(Weak::upgrade) {
                if w.renew {
                    next.push(w.due());
                }
            }
            if is_cluster(&lane.endpoint) {
                next.push(lane.polled + CLUSTER_POLL);
            }
            if lane.check_after > now {
                next.push(lane.check_after);
            }
        }
        if let Some(idle) = idle {
            for lane in &mut st.lanes {
                if lane.watches.is_empty() && lane.used.elapsed() >= idle {
                    lane.link = None;
                }
            }
            // A Cluster's lane stays while used lately (its poll clock with it).
            st.lanes.retain(|l| {
                !l.watches.is_empty()
                    || l.link.is_some()
                    || (is_cluster(&l.endpoint) && l.used.elapsed() < idle)
            });
            for lane in &st.lanes {
                if lane.watches.is_empty() {
                    next.push(lane.used + idle);
                }
            }
        }
        for sub in &st.subs {
            if sub.conn.is_none() && sub.service.tls.is_none() {
                next.push(sub.retry_at);
            }
        }
        next.extend(asked_by);
        let watched = st.watched;
        drop(st);
        if let Some(at) = pool::sweep() {
            next.push(at);
        }
        let mut st = self.state.lock();
        // A hold watched while the lock was let go found the thread awake
        // (no wake-up): what it needs is planned now, not after a sleep that
        // did not count it (a renewal, a Cluster's poll).
        if st.watched != watched {
            next.push(now);
        }
        let busy = !st.lanes.is_empty() || !st.subs.is_empty() || pool::idle_links() > 0;
        if busy {
            *idle_since = now;
        } else if idle_since.elapsed() >= LINGER {
            st.running = false;
            st.close_pipe();
            return None;
        } else {
            next.push(*idle_since + LINGER);
        }
        let until = next.into_iter().min().unwrap_or(now + LINGER).max(now);
        st.sleeping_until = Some(until);
        let fds: Vec<(usize, RawFd)> = st
            .subs
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.conn.as_ref().map(|c| (i, c.fd())))
            .collect();
        Some(Work {
            sleep: Some(Sleep {
                until,
                pipe: st.pipe.map_or(-1, |(rx, _)| rx),
                subs: fds,
            }),
            ..Work::default()
        })
    }
}

#[derive(Default)]
struct Work {
    subscribe: Vec<usize>,
    lanes: Vec<LaneWork>,
    first_end: Option<Instant>,
    sleep: Option<Sleep>,
}

/// Until when to sleep, the wake-up pipe, and the subscriptions to listen to
/// (indexes into the state's list, and their sockets).
struct Sleep {
    until: Instant,
    pipe: RawFd,
    subs: Vec<(usize, RawFd)>,
}

struct LaneWork {
    index: usize,
    endpoint: Arc<Endpoint>,
    link: Option<Link>,
    renew: Vec<Arc<Watch>>,
    check: Vec<Arc<Watch>>,
    generation: u64,
    /// Ask a Cluster for its slot map (see `CLUSTER_POLL`).
    poll: bool,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.subscribe.is_empty() && self.lanes.is_empty()
    }

    fn run(self, wd: &'static Watchdog) {
        if let Some(sleep) = self.sleep {
            listen(wd, &sleep);
            return;
        }
        subscribe(wd, &self.subscribe);
        let first_end = self.first_end;
        for mut lw in self.lanes {
            let now = Instant::now();
            // Spend no more than half of what is left of the most urgent lease.
            let budget_at = |at: Instant| first_end.map(|e| e.saturating_duration_since(at) / 2);
            let budget = budget_at(now);
            if !lw.check.is_empty() {
                check(&lw.endpoint, &mut lw.link, &lw.check, lw.generation);
            }
            if !lw.renew.is_empty() {
                renew_on(&lw.endpoint, &mut lw.link, &lw.renew, budget);
            }
            // After the renewals, and within what is left of the budget (a
            // node that hangs rather than refuses would spend a read timeout);
            // when too little is left, the next poll asks.
            if lw.poll {
                let timeout = budget_at(Instant::now()).map_or(lw.endpoint.timeouts.read, |l| {
                    l.min(lw.endpoint.timeouts.read)
                });
                if timeout >= MIN_POLL_TIMEOUT {
                    learn_slots(&lw.endpoint, &mut lw.link, timeout);
                }
            }
            let unchecked = lw
                .check
                .iter()
                .any(|w| w.generation() < lw.generation && !w.ended());
            let mut st = wd.state.lock();
            if let Some(lane) = st.lanes.get_mut(lw.index) {
                if lw.endpoint.is(&lane.identity) {
                    if unchecked {
                        lane.check_after = Instant::now() + CHECK_AGAIN;
                    }
                    if lane.link.is_none() {
                        lane.link = lw.link;
                    }
                }
            }
        }
    }
}

/// Opens the subscriptions `which` (indexes into the state's list, which only
/// this thread shrinks), then asks which master is current, in case a switch
/// was announced before they were up.
fn subscribe(wd: &Watchdog, which: &[usize]) {
    for &i in which {
        let Some((service, sentinel_addr)) = ({
            let st = wd.state.lock();
            st.subs
                .get(i)
                .map(|s| (s.service.clone(), s.sentinel.clone()))
        }) else {
            continue;
        };
        let opened = Subscription::open(&service, &sentinel_addr);
        let caught_up = opened.is_ok() && topology::ask_master(&service).is_some();
        let mut st = wd.state.lock();
        if let Some(sub) = st.subs.get_mut(i) {
            match opened {
                Ok(conn) if caught_up => sub.conn = Some(conn),
                _ => {
                    metrics::incr(Counter::ConnectionErrors);
                    sub.retry_at = Instant::now() + RESUBSCRIBE;
                }
            }
        }
        let up = st.vouched_for(&service);
        sentinel::set_subscribed(&service, up);
    }
}

/// Drops subscription `i` (gone, or gone quiet): tried again after
/// RESUBSCRIBE; its service is no longer vouched for unless another is up.
fn unsubscribe(st: &mut State, i: usize) {
    let sub = &mut st.subs[i];
    sub.conn = None;
    sub.retry_at = Instant::now() + RESUBSCRIBE;
    let service = sub.service.clone();
    let up = st.vouched_for(&service);
    sentinel::set_subscribed(&service, up);
}

/// Sleeps until `until`, or until a subscription (`fds`) has something to say
/// or the thread is woken; then reads what the subscriptions say.
fn listen(wd: &Watchdog, sleep: &Sleep) {
    let (until, rx, fds) = (sleep.until, sleep.pipe, &sleep.subs);
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(_, fd)| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    polled.push(libc::pollfd {
        fd: rx,
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = until
        .saturating_duration_since(Instant::now())
        .as_millis()
        .clamp(0, i32::MAX as u128) as i32;
    // A wake-up that rounds down to 0 ms would spin: sleep at least 1 ms then.
    let ms = if ms == 0 && until > Instant::now() {
        1
    } else {
        ms
    };
    // SAFETY: `polled` is a valid array of pollfd for the duration of the call.
    unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    let woken = polled.last().is_some_and(|p| p.revents != 0);
    if woken {
        let mut buf = [0u8; 64];
        // SAFETY: reads into a valid buffer from our own non-blocking pipe.
        while unsafe { libc::read(rx, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }
    // Who announced a switch: asked for the master and its epoch right away (the
    // announcement itself carries no epoch, and a sentinel may lag behind).
    let mut announced: Vec<(Endpoint, Addr)> = Vec::new();
    let mut started: Vec<Endpoint> = Vec::new();
    let mut aborted: Vec<Endpoint> = Vec::new();
    {
        let mut st = wd.state.lock();
        for (p, &(i, _)) in polled.iter().zip(fds) {
            if p.revents == 0 {
                continue;
            }
            let Some(sub) = st.subs.get_mut(i) else {
                continue;
            };
            let Some(conn) = sub.conn.as_mut() else {
                continue;
            };
            let Topology::Sentinel { service: name, .. } = &sub.service.topology else {
                continue;
            };
            let Ok(events) = conn.read() else {
                unsubscribe(&mut st, i);
                continue;
            };
            for event in events {
                match event {
                    Event::Switched(svc, _) if svc == *name => {
                        announced.push((sub.service.clone(), sub.sentinel.clone()))
                    }
                    Event::Started(svc) if svc == *name => started.push(sub.service.clone()),
                    Event::Aborted(svc) if svc == *name => aborted.push(sub.service.clone()),
                    _ => {}
                }
            }
        }
        // A PING left unanswered past its time, with everything it had to say
        // read: gone quiet for good (judged here, after the read, so that an
        // answer waiting in the socket is never missed).
        let now = Instant::now();
        for i in 0..st.subs.len() {
            if st.subs[i].conn.as_ref().is_some_and(|c| c.overdue(now)) {
                unsubscribe(&mut st, i);
            }
        }
    }
    for service in started {
        sentinel::failover_started(&service);
    }
    for service in aborted {
        sentinel::failover_aborted(&service);
    }
    for (service, by) in announced {
        let Topology::Sentinel { service: name, .. } = &service.topology else {
            continue;
        };
        if let Ok((addr, epoch)) = topology::ask_sentinel(&service, &by, name) {
            sentinel::found(&service, &addr, epoch);
        }
    }
}

/// Asks a Cluster for its slot map on the lane's link: a slot served by
/// another master counts as a failover, and the holds watched there are
/// looked for on the new master at the next turn (`check`).
fn learn_slots(ep: &Endpoint, link: &mut Option<Link>, timeout: Duration) {
    let Some(l) = opened(ep, link) else {
        return;
    };
    // Its own timeout: a renewal's budget may have left a shorter one.
    if l.set_read_timeout(timeout).is_err() || !l.learn_slots() {
        *link = None;
        metrics::incr(Counter::ConnectionErrors);
    }
}

/// The lane's link, opened now if it has none (`None`: it could not be).
fn opened<'l>(ep: &Endpoint, link: &'l mut Option<Link>) -> Option<&'l mut Link> {
    if link.is_none() {
        match topology::open(ep) {
            Ok(l) => *link = Some(l),
            Err(_) => {
                metrics::incr(Counter::ConnectionErrors);
                return None;
            }
        }
    }
    link.as_mut()
}

/// Looks for the holds `group` on the current master of a Sentinel service or
/// a Cluster (generation `generation`): one that is not there is lost (it was taken on a
/// master since replaced, or a failover lost it), or, a session's, revoked by a
/// logout.
fn check(ep: &Endpoint, link: &mut Option<Link>, group: &[Arc<Watch>], generation: u64) {
    // The link to the old master is of no use now.
    if link
        .as_ref()
        .and_then(|l| l.master.as_ref())
        .is_some_and(|m| m.generation != generation)
    {
        *link = None;
    }
    let Some(conn) = opened(ep, link) else {
        return;
    };
    // Whether the hold is there, and until when, read atomically (MULTI): the new
    // master keeps the lease only as long as it last heard of it, which may be
    // short of an extension the old master never passed on; read apart, the
    // expiry could be the next holder's. A session's not there may have been
    // revoked by a logout before the switch: that is no lost hold.
    let mut cmds: Vec<Cmd> = Vec::with_capacity(group.len() * 5);
    // Where each hold's EXEC answers.
    let mut execs = Vec::with_capacity(group.len());
    for w in group {
        cmds.push(redis::cmd("MULTI"));
        if w.shared {
            cmds.push(
                redis::cmd("ZSCORE")
                    .arg(&w.holders)
                    .arg(w.token.as_str())
                    .clone(),
            );
            cmds.push(redis::cmd("TIME"));
        } else {
            cmds.push(redis::cmd("GET").arg(&w.key).clone());
            cmds.push(redis::cmd("PTTL").arg(&w.key).clone());
            if w.session() {
                cmds.push(
                    redis::cmd("SISMEMBER")
                        .arg(w.revoked_set())
                        .arg(w.token.as_str())
                        .clone(),
                );
            }
        }
        execs.push(cmds.len());
        cmds.push(redis::cmd("EXEC"));
    }
    let sent = Instant::now();
    let replies = conn
        .set_read_timeout(ep.timeouts.read)
        .and_then(|_| conn.pipeline(cmds));
    let Ok(replies) = replies else {
        *link = None;
        metrics::incr(Counter::ConnectionErrors);
        return;
    };
    // The link's master is of the generation asked about (or newer: checked again).
    let at = link
        .as_ref()
        .and_then(|l| l.master.as_ref())
        .map_or(generation, |m| m.generation);
    for (w, exec) in group.iter().zip(execs) {
        let Some(Value::Array(pair)) = replies.get(exec) else {
            continue;
        };
        let left = match (pair.first(), pair.get(1)) {
            (Some(Value::Nil), _) => None,
            // A shared hold: its score is when its lease ends, on the server's clock.
            (Some(end), Some(Value::Array(time))) if w.shared => {
                match (redis::from_redis_value::<f64>(end.clone()), &time[..]) {
                    (Ok(end), [secs, micros]) => {
                        let secs: u64 = redis::from_redis_value(secs.clone()).unwrap_or_default();
                        let micros: u64 =
                            redis::from_redis_value(micros.clone()).unwrap_or_default();
                        let now = secs as f64 * 1000.0 + micros as f64 / 1000.0;
                        Some(left_until(end, now))
                    }
                    _ => continue,
                }
            }
            (Some(Value::BulkString(v)), Some(Value::Int(pttl))) if !w.shared => {
                let token = w.token.as_str().as_bytes();
                if v.len() > token.len() && v.starts_with(token) && v[token.len()] == b':' {
                    // -1: no expiry (never set by us); nothing to lower then.
                    Some(u64::try_from(*pttl).map_or(Duration::MAX, Duration::from_millis))
                } else {
                    None
                }
            }
            _ => continue,
        };
        match left {
            Some(left) => {
                if left != Duration::MAX {
                    w.cap(hold::lease_end(sent, left));
                }
                w.checked(at);
            }
            None if matches!(pair.get(2), Some(Value::Int(1))) => w.revoke(),
            // (One let go, or run out, meanwhile is no failover's loss.)
            None => {
                if w.lose() {
                    metrics::incr(Counter::FailoverLost);
                }
            }
        }
    }
}

/// What is left of a shared hold whose lease ends at `end` (its score in
/// `…:holders`, ms on the server's clock) at `now`. A score no script of ours
/// wrote (`+inf`, or centuries ahead) is a lease with no end, as a lock's PTTL
/// of -1 is (no instant lies that far).
fn left_until(end: f64, now: f64) -> Duration {
    const FAR: Duration = Duration::from_secs(100 * 365 * 86_400);
    match Duration::try_from_secs_f64(((end - now) / 1000.0).max(0.0)) {
        Ok(left) if left < FAR => left,
        _ => Duration::MAX,
    }
}

/// Renews `group` in one round trip on the lane's own link to `ep`, spending at
/// most `budget` waiting for it (when other lanes' leases need the thread).
fn renew_on(
    ep: &Endpoint,
    link: &mut Option<Link>,
    group: &[Arc<Watch>],
    budget: Option<Duration>,
) {
    // A lease past its last confirmed end stays ended: a late renewal must not
    // revive what its holder may already have been told it lost.
    let group: Vec<Arc<Watch>> = group.iter().filter(|r| !r.ended()).cloned().collect();
    if group.is_empty() {
        return;
    }
    if link
        .as_ref()
        .and_then(|l| l.master.as_ref())
        .is_some_and(|m| m.generation != sentinel::generation(ep))
    {
        *link = None;
    }
    let Some(conn) = opened(ep, link) else {
        group.iter().for_each(|r| r.unanswered());
        return;
    };
    // Its rounds and the WAIT after them are one call (a Cluster link notes
    // where each renewal ran, for the WAIT).
    conn.begin();
    // Never wait for a reply much past the moment the first lease could end.
    let now = Instant::now();
    let first_end = group.iter().map(|r| r.safe_until()).min().unwrap_or(now);
    let mut timeout = ep
        .timeouts
        .read
        .min(first_end.saturating_duration_since(now));
    if let Some(b) = budget {
        timeout = timeout.min(b);
    }
    let timeout = timeout.max(Duration::from_millis(5));
    let ttls: Vec<Duration> = group.iter().map(|r| r.ttl()).collect();
    let sent = Instant::now();
    metrics::incr(Counter::RenewalRoundTrips);
    // As functions where the link runs them (the library survives a failover
    // and a restart, the script cache does not), else by EVALSHA.
    conn.functions.off = !ep.functions;
    let mut form = if conn.functions.usable() {
        Form::Function
    } else {
        Form::Sha
    };
    let mut pending: Vec<usize> = (0..group.len()).collect();
    let mut renewed = Vec::new();
    let mut usable = true;
    // Each round sends what the last one said did not run (each of those says
    // so before running anything: sending it again is safe): after a missing
    // library is loaded, as functions; else (a script missing, FCALL refused,
    // a library flushed again or not loadable) by EVAL, which also loads it.
    for round in 0..3 {
        let batch: Vec<Arc<Watch>> = pending.iter().map(|&i| group[i].clone()).collect();
        let batch_ttls: Vec<Duration> = pending.iter().map(|&i| ttls[i]).collect();
        let sent_ok = if round == 0 {
            conn.set_read_timeout(timeout)
                .and_then(|_| conn.pipeline(commands(&batch, &batch_ttls, form)))
        } else {
            conn.pipeline(commands(&batch, &batch_ttls, form))
        };
        let Ok(replies) = sent_ok else {
            // The link may hold a late reply: never reuse it.
            metrics::incr(Counter::ConnectionErrors);
            usable = false;
            pending.drain(..).for_each(|i| group[i].unanswered());
            break;
        };
        let mut not_run = Vec::new();
        let mut no_function = false;
        let mut moved = false;
        for (&i, reply) in pending.iter().zip(&replies) {
            match scripts::not_run(reply).filter(|_| form != Form::Eval) {
                Some(why) => {
                    match why {
                        NotRun::FcallRefused => conn.functions.refuse(),
                        NotRun::NoFunction => no_function = true,
                        NotRun::NoScript => {}
                    }
                    not_run.push(i);
                }
                None => {
                    // A demoted or restarting master (a Sentinel failover): the
                    // next round asks the sentinels for the master again.
                    moved |= matches!(reply, Value::ServerError(e)
                        if matches!(e.code(), "READONLY" | "LOADING" | "MASTERDOWN"));
                    if settle(&group[i], reply) {
                        renewed.push(i);
                    }
                }
            }
        }
        pending = not_run;
        if moved {
            usable = false;
            pending.drain(..).for_each(|i| group[i].failed());
        }
        if pending.is_empty() {
            break;
        }
        form = match form {
            // Loaded once: a library gone again by the next round (flushed in
            // between, or a Cluster node the load never reached) is left for
            // the script.
            Form::Function if round == 0 && no_function && conn.functions.usable() => {
                match scripts::load_library(conn) {
                    Ok(()) => Form::Function,
                    Err(e) if e.is_io_error() || e.is_timeout() => {
                        metrics::incr(Counter::ConnectionErrors);
                        usable = false;
                        pending.drain(..).for_each(|i| group[i].unanswered());
                        break;
                    }
                    Err(_) => Form::Eval,
                }
            }
            _ => Form::Eval,
        };
    }
    // (An EVAL round takes every reply as it is: nothing is left. Were anything
    // left, it would not have been renewed.)
    pending.iter().for_each(|&i| group[i].failed());
    // A switch while we waited: what the old master answered does not count.
    if link
        .as_ref()
        .and_then(|l| l.master.as_ref())
        .is_some_and(|m| m.generation != sentinel::generation(ep))
    {
        renewed.iter().for_each(|&i| group[i].failed());
        *link = None;
        return;
    }
    let conn = link.as_mut().filter(|_| usable);
    let confirmed = confirm(ep, conn, &group, &ttls, &renewed, sent, timeout).is_ok();
    if !confirmed || !usable {
        *link = None;
    }
    // Still the master, as a pooled link is checked; asked after the round, and
    // only while an ask that finds every sentinel silent (each one's connect
    // and read timeouts) takes less than a third of what is left of these
    // leases: the next round is due at a third of their ttl, and never waits
    // on the sentinels past their end. Where no subscription vouches for the
    // master (a TLS service, subscriptions down), they are asked at a round at
    // most every half second, and one that names another master raises the
    // generation: the holds are looked for there before the next round.
    // Before, only a new generation dropped this link, and without a
    // subscription nothing raised one: renewals went on to a replaced master
    // while the new one let the lease run out (review, stop 59).
    let left = group
        .iter()
        .map(|w| w.safe_until())
        .min()
        .map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(Instant::now())
        });
    if link.as_mut().is_some_and(|l| {
        sentinel_silence(ep).saturating_mul(3) < left && !pool::still_master(ep, l)
    }) {
        *link = None;
    }
}

/// The longest asking a Sentinel service's sentinels for its master takes
/// when none answers (each one's connect and read timeouts); zero for other
/// topologies.
fn sentinel_silence(ep: &Endpoint) -> Duration {
    match &ep.topology {
        Topology::Sentinel { sentinels, .. } => (ep.timeouts.connect + ep.timeouts.read)
            .saturating_mul(u32::try_from(sentinels.len()).unwrap_or(u32::MAX)),
        _ => Duration::ZERO,
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
    group: &[Arc<Watch>],
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
            None => group[i].renewed(sent, ttls[i]),
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
            r.renewed(sent, ttls[i]);
        } else if broken {
            r.unanswered();
        } else {
            metrics::incr(Counter::WaitShortfalls);
            r.failed();
        }
    }
    if broken {
        Err(())
    } else {
        Ok(())
    }
}

/// What refresh.lua answered for `r`: true when it extended the lease (still to
/// be confirmed); else the lease is marked lost or the renewal failed.
fn settle(r: &Watch, reply: &Value) -> bool {
    match reply {
        Value::Int(1) => true,
        Value::Int(0) => {
            r.lose();
            false
        }
        Value::Int(2) => {
            r.revoke();
            false
        }
        _ => {
            r.failed();
            false
        }
    }
}

/// How renewals are sent: as the library's function, by the script's SHA-1, or
/// with its source (EVAL, which also loads it).
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Function,
    Sha,
    Eval,
}

fn commands(group: &[Arc<Watch>], ttls: &[Duration], form: Form) -> Vec<Cmd> {
    let (command, target) = match form {
        Form::Function => ("FCALL", scripts::REFRESH.function_name()),
        Form::Sha => ("EVALSHA", scripts::REFRESH.get_hash()),
        Form::Eval => ("EVAL", scripts::REFRESH.source.as_str()),
    };
    group
        .iter()
        .zip(ttls)
        .map(|(r, ttl)| {
            let mut c = redis::cmd(command);
            c.arg(target)
                .arg(if r.session() { 5 } else { 4 })
                .arg(&r.key)
                .arg(&r.holders)
                .arg([&r.key[..], b":weights"].concat())
                .arg(r.stale_refreshes());
            if r.session() {
                c.arg(r.revoked_set());
            }
            c.arg(r.token.as_str())
                .arg(millis(*ttl))
                // Renewals only lengthen the lease (see `hold`).
                .arg("at_least");
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `+inf` score (review, stop 55: it panicked, and the renewal thread
    /// died with it for the rest of the process).
    #[test]
    fn a_shared_hold_with_no_end_is_read_as_no_end() {
        assert_eq!(left_until(f64::INFINITY, 1000.0), Duration::MAX);
        assert_eq!(left_until(1e22, 1000.0), Duration::MAX);
        assert_eq!(left_until(f64::NEG_INFINITY, 1000.0), Duration::ZERO);
        assert_eq!(left_until(3500.0, 1000.0), Duration::from_millis(2500));
        assert_eq!(left_until(500.0, 1000.0), Duration::ZERO);
    }
}
