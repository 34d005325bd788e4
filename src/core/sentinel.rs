//! What this process knows of the masters it reaches through Sentinel, and its
//! subscriptions to the sentinels' `+switch-master` announcements.
//!
//! A failover does not close the old master's connections: after a planned one
//! it keeps answering as a master, and taking writes it will later drop, until
//! the sentinels convert it (about ten seconds on a default setup). So a link
//! is trusted only while it goes to the master the sentinels name now: every
//! switch heard of, by subscription or by asking, starts a new *generation* of
//! the service, and a link (or a hold) of an older generation is not used as it
//! is. The watchdog thread keeps the subscriptions; while none is up, a pooled
//! link is checked against the sentinels at least every `VERIFY_EVERY`.
//!
//! A failover starts well before it is announced: the sentinels pick a replica
//! (`+selected-slave`) and promote it, and for about a second the old master
//! still takes writes that one of its other replicas acknowledges (a WAIT can
//! be met) and will then drop. So the start also begins a new generation, and
//! until the switch (or the failover's abort) nobody writes to the service:
//! `wait_switch` holds new work back, and what an old link answered after the
//! start is settled on the new master.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redis::Value;

use crate::core::dsn::{Addr, Credentials, Endpoint, Tls, Topology};
use crate::core::metrics::{self, Counter};
use crate::core::pid::PerProcess;

/// Without a subscription, how long a link to a Sentinel master is trusted
/// before the sentinels are asked again.
pub const VERIFY_EVERY: Duration = Duration::from_millis(500);

/// One Sentinel-monitored master, as this process knows it.
struct Known {
    /// The sentinels, the service, their credentials and TLS: what the key is.
    topology: Topology,
    sentinel_auth: Credentials,
    tls: Option<Tls>,
    /// An endpoint of the service, to reach its sentinels.
    endpoint: Endpoint,
    master: Option<Addr>,
    /// The sentinels' config epoch of `master`, when they told it: an answer of an
    /// older epoch (a sentinel that has not heard of a failover yet) is ignored.
    epoch: Option<u64>,
    generation: u64,
    /// A subscription to one of its sentinels is up (and caught up).
    subscribed: bool,
    /// A failover started (a sentinel picked a replica) and has not ended yet.
    switching: Option<Instant>,
    last_used: Instant,
}

impl Known {
    fn is(&self, ep: &Endpoint) -> bool {
        self.topology == ep.topology && self.sentinel_auth == ep.sentinel_auth && self.tls == ep.tls
    }
}

/// The services, and a condition waited on for the end of a failover.
static KNOWN: PerProcess<(Mutex<Vec<Known>>, Condvar)> = PerProcess::new();

fn registry() -> &'static (Mutex<Vec<Known>>, Condvar) {
    KNOWN.get(|| (Mutex::new(Vec::new()), Condvar::new()), |_| {})
}

fn with_known<T>(f: impl FnOnce(&mut Vec<Known>) -> T) -> T {
    f(&mut registry().0.lock())
}

/// The highest generation of a service this process forgot. A service known
/// again starts above it: a hold or link of the forgotten one's generations
/// is then older than the service's, and is looked for (or dropped) as after
/// a failover, which may have come while nothing listened. Started again at 1,
/// a hold taken before was taken as current, and the next failover missed.
static FORGOTTEN: AtomicU64 = AtomicU64::new(0);

fn entry<'a>(known: &'a mut Vec<Known>, ep: &Endpoint) -> &'a mut Known {
    let i = match known.iter().position(|k| k.is(ep)) {
        Some(i) => i,
        None => {
            known.push(Known {
                topology: ep.topology.clone(),
                sentinel_auth: ep.sentinel_auth.clone(),
                tls: ep.tls.clone(),
                endpoint: ep.clone(),
                master: None,
                epoch: None,
                generation: FORGOTTEN.load(Ordering::Acquire) + 1,
                subscribed: false,
                switching: None,
                last_used: Instant::now(),
            });
            known.len() - 1
        }
    };
    &mut known[i]
}

pub(crate) fn is_sentinel(ep: &Endpoint) -> bool {
    matches!(ep.topology, Topology::Sentinel { .. })
}

/// The current generation of `ep`'s service; 0 for an endpoint without Sentinel.
pub fn generation(ep: &Endpoint) -> u64 {
    if !is_sentinel(ep) {
        return 0;
    }
    with_known(|known| entry(known, ep).generation)
}

/// Whether a link to `ep` of generation `generation`, last confirmed at
/// `verified`, may be used as it is.
pub fn trust(ep: &Endpoint, generation: u64, verified: Instant) -> Trust {
    with_known(|known| {
        let k = entry(known, ep);
        k.last_used = Instant::now();
        if still_switching(k) || k.generation != generation {
            Trust::Stale
        } else if k.subscribed || verified.elapsed() < VERIFY_EVERY {
            Trust::Yes
        } else {
            Trust::Verify
        }
    })
}

#[derive(Debug, PartialEq, Eq)]
pub enum Trust {
    Yes,
    /// The master changed since the link was made.
    Stale,
    /// No subscription vouches for it: ask the sentinels.
    Verify,
}

/// A sentinel named `addr` as the master of `ep`'s service, in its config epoch
/// `epoch` (when it told it). The master to use, and its generation: a new one
/// when that is a change; the one known when the sentinel lags behind.
pub fn found(ep: &Endpoint, addr: &Addr, epoch: Option<u64>) -> (Addr, u64) {
    with_known(|known| {
        let k = entry(known, ep);
        k.last_used = Instant::now();
        note(k, addr, epoch)
    })
}

fn note(k: &mut Known, addr: &Addr, epoch: Option<u64>) -> (Addr, u64) {
    // Once epochs were seen, only a newer one moves the master: every failover
    // raises it, and a sentinel that answers with the known epoch and another
    // address lags behind (or is the leader in the middle of its failover).
    // Without epochs (a sentinel that does not say), the latest answer counts.
    let stays = match (epoch, k.epoch) {
        (Some(e), Some(known)) => e <= known,
        (None, Some(_)) => true,
        _ => false,
    };
    match &k.master {
        Some(m) if stays || m == addr => return (m.clone(), k.generation),
        Some(_) => {
            k.generation += 1;
            metrics::incr(Counter::MasterChanges);
        }
        None => {}
    }
    k.master = Some(addr.clone());
    if epoch.is_some() {
        k.epoch = epoch;
    }
    end_switch(k);
    (addr.clone(), k.generation)
}

/// A master is named again: whatever failover was under way has ended.
fn end_switch(k: &mut Known) {
    if k.switching.take().is_some() {
        registry().1.notify_all();
    }
}

/// A sentinel of `ep`'s service picked a replica to promote: a new generation,
/// and no writes until the switch is announced (or the failover aborted).
pub(crate) fn failover_started(ep: &Endpoint) {
    with_known(|known| {
        let k = entry(known, ep);
        if k.switching.is_none() {
            k.switching = Some(Instant::now());
            k.generation += 1;
        }
    });
}

/// The failover of `ep`'s service was aborted: the old master stays.
pub(crate) fn failover_aborted(ep: &Endpoint) {
    with_known(|known| end_switch(entry(known, ep)));
}

/// How long a failover that was started is waited for: past this, its end was
/// missed (an abort announced while no subscription was up) or it failed, and
/// the sentinels are asked again.
const SWITCH_PATIENCE: Duration = Duration::from_secs(10);

/// Whether a failover of `ep`'s service is under way.
pub(crate) fn switching(ep: &Endpoint) -> bool {
    is_sentinel(ep) && with_known(|known| still_switching(entry(known, ep)))
}

fn still_switching(k: &mut Known) -> bool {
    if k.switching
        .is_some_and(|at| at.elapsed() >= SWITCH_PATIENCE)
    {
        end_switch(k);
    }
    k.switching.is_some()
}

/// Waits until no failover of `ep`'s service is under way, at most until
/// `deadline`. False when one still is.
pub(crate) fn wait_switch(ep: &Endpoint, deadline: Instant) -> bool {
    let (lock, ended) = registry();
    let mut known = lock.lock();
    loop {
        if !still_switching(entry(&mut known, ep)) {
            return true;
        }
        if ended.wait_until(&mut known, deadline).timed_out() {
            return !still_switching(entry(&mut known, ep));
        }
    }
}

/// Whether a subscription vouches for `ep`'s service.
pub(crate) fn subscribed(ep: &Endpoint) -> bool {
    with_known(|known| entry(known, ep).subscribed)
}

pub(crate) fn set_subscribed(ep: &Endpoint, up: bool) {
    with_known(|known| entry(known, ep).subscribed = up);
}

/// Whether any Sentinel service was used in this process.
pub(crate) fn any() -> bool {
    KNOWN.current().is_some_and(|k| !k.0.lock().is_empty())
}

/// The services used within `idle`, or that `watched` holds are on: what the
/// watchdog subscribes to. Services unused for longer are forgotten (their
/// links are closed by then too). A watched hold keeps its service: renewals
/// on a link already open ask nothing of the registry, and a service
/// forgotten under them had no subscription to hear its next failover.
pub(crate) fn in_use(idle: Duration, watched: &[&Endpoint]) -> Vec<Endpoint> {
    with_known(|known| {
        known.retain(|k| {
            let keep = k.last_used.elapsed() < idle || watched.iter().any(|ep| k.is(ep));
            if !keep {
                FORGOTTEN.fetch_max(k.generation, Ordering::AcqRel);
            }
            keep
        });
        known.iter().map(|k| k.endpoint.clone()).collect()
    })
}

/// Whether `a` and `b` name the same service (same sentinels, credentials, TLS).
pub(crate) fn same_service(a: &Endpoint, b: &Endpoint) -> bool {
    is_sentinel(a)
        && a.topology == b.topology
        && a.sentinel_auth == b.sentinel_auth
        && a.tls == b.tls
}

/// A subscription to one sentinel's `+switch-master` channel, read without
/// blocking when `poll()` says it has data.
pub(crate) struct Subscription {
    stream: TcpStream,
    parser: redis::Parser,
    /// When the sentinel last said anything.
    heard: Instant,
    /// When a PING was sent that has not been answered yet.
    pinged: Option<Instant>,
    /// How long a PING may go unanswered (the read timeout, at least 1 s).
    patience: Duration,
}

/// How long a subscription stays quiet before the sentinel is asked whether it
/// is still there (PING). A connection dropped without a word (a NAT or a
/// firewall forgetting it: no FIN, no RST) reads as quiet for ever: it was
/// trusted to vouch for the master, and every failover after was missed. The
/// PING also keeps such a NAT's mapping alive.
const PING_EVERY: Duration = Duration::from_secs(5);

impl Subscription {
    /// Connects to `sentinel` (of `ep`'s service), authenticates and subscribes,
    /// within `ep`'s timeouts. Only plain TCP: over TLS the service is checked by
    /// asking (see `VERIFY_EVERY`).
    pub(crate) fn open(ep: &Endpoint, sentinel: &Addr) -> std::io::Result<Subscription> {
        let Addr::Tcp { host, port } = sentinel else {
            return Err(std::io::ErrorKind::Unsupported.into());
        };
        let addr = (host.as_str(), *port)
            .to_socket_addrs()?
            .next()
            .ok_or(std::io::ErrorKind::AddrNotAvailable)?;
        let stream = TcpStream::connect_timeout(&addr, ep.timeouts.connect)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(ep.timeouts.read))?;
        stream.set_write_timeout(Some(ep.timeouts.read))?;
        let mut sub = Subscription {
            stream,
            parser: redis::Parser::new(),
            heard: Instant::now(),
            pinged: None,
            patience: ep.timeouts.read.max(Duration::from_secs(1)),
        };
        let auth = &ep.sentinel_auth;
        if let Some(password) = &auth.password {
            let mut cmd = redis::cmd("AUTH");
            if let Some(user) = &auth.username {
                cmd.arg(user);
            }
            cmd.arg(password);
            sub.send(&cmd)?;
            if !matches!(sub.next()?, Value::Okay | Value::SimpleString(_)) {
                return Err(std::io::ErrorKind::PermissionDenied.into());
            }
        }
        sub.send(redis::cmd("SUBSCRIBE").arg(&CHANNELS[..]))?;
        for _ in CHANNELS {
            match sub.next()? {
                Value::Array(v) if v.len() == 3 => {}
                _ => return Err(std::io::ErrorKind::InvalidData.into()),
            }
        }
        sub.stream.set_nonblocking(true)?;
        Ok(sub)
    }

    fn send(&mut self, cmd: &redis::Cmd) -> std::io::Result<()> {
        self.stream.write_all(&cmd.get_packed_command())
    }

    /// Asks a quiet sentinel whether it is still there (a PING after
    /// `PING_EVERY` of quiet; any word answers it): when to look again (see
    /// `overdue`). An error when the PING could not be sent: the subscription
    /// is gone. The socket does not block: a PING is written, never waited for.
    pub(crate) fn keep_alive(&mut self, now: Instant) -> std::io::Result<Instant> {
        if let Some(at) = self.pinged {
            return Ok(at + self.patience);
        }
        if now >= self.heard + PING_EVERY {
            self.send(&redis::cmd("PING"))?;
            self.pinged = Some(now);
            return Ok(now + self.patience);
        }
        Ok(self.heard + PING_EVERY)
    }

    /// Whether a PING went unanswered for the read timeout (asked after all it
    /// had to say was read): the subscription is gone.
    pub(crate) fn overdue(&self, now: Instant) -> bool {
        self.pinged.is_some_and(|at| now >= at + self.patience)
    }

    fn next(&mut self) -> std::io::Result<Value> {
        let value = self.parser.parse_value(&mut self.stream);
        if value.is_ok() {
            self.heard = Instant::now();
            self.pinged = None;
        }
        value.map_err(|e| {
            let kind = if e.is_timeout() {
                // Also the end of what a non-blocking socket has for us.
                std::io::ErrorKind::WouldBlock
            } else if e.is_io_error() {
                std::io::ErrorKind::ConnectionAborted
            } else {
                std::io::ErrorKind::InvalidData
            };
            std::io::Error::new(kind, e.to_string())
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// The announcements that arrived. An error: the subscription is gone
    /// (closed, or out of step).
    pub(crate) fn read(&mut self) -> std::io::Result<Vec<Event>> {
        let mut out = Vec::new();
        loop {
            match self.next() {
                Ok(Value::Array(parts)) => {
                    if let Some(event) = parse_event(&parts) {
                        out.push(event);
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(out),
                Err(e) => return Err(e),
            }
        }
    }
}

/// The sentinels' channels followed: the switch, the start of a failover (a
/// replica picked for promotion), and the ways a failover ends without one.
const CHANNELS: [&str; 5] = [
    "+switch-master",
    "+selected-slave",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end-for-timeout",
];

/// What a sentinel announced about a service (named first).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The new master.
    Switched(String, Addr),
    /// A failover started: a replica was picked for promotion.
    Started(String),
    /// A failover ended without a switch.
    Aborted(String),
}

/// `["message", channel, payload]`: `+switch-master` has `<service> <old-ip>
/// <old-port> <new-ip> <new-port>`; `+selected-slave` has `slave <name> <ip>
/// <port> @ <service> <ip> <port>`; the aborts `master <service> <ip> <port>`.
fn parse_event(parts: &[Value]) -> Option<Event> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok().map(str::to_string),
        _ => None,
    };
    if parts.len() != 3 || text(&parts[0])? != "message" {
        return None;
    }
    let channel = text(&parts[1])?;
    let payload = text(&parts[2])?;
    let fields: Vec<&str> = payload.split(' ').collect();
    let service = |fields: &[&str]| match fields.iter().position(|f| *f == "@") {
        Some(at) => fields.get(at + 1).map(|s| s.to_string()),
        None if fields.first() == Some(&"master") => fields.get(1).map(|s| s.to_string()),
        None => None,
    };
    match channel.as_str() {
        "+switch-master" => {
            let [service, _, _, host, port] = fields[..] else {
                return None;
            };
            Some(Event::Switched(
                service.to_string(),
                Addr::Tcp {
                    host: host.to_string(),
                    port: port.parse().ok()?,
                },
            ))
        }
        "+selected-slave" => Some(Event::Started(service(&fields)?)),
        _ => Some(Event::Aborted(service(&fields)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service forgotten (unused past the idle timeout) and known again
    /// starts above every generation it had, so that a hold of the old ones
    /// is looked for on the master as after a failover. Before, it started at
    /// 1 again: a hold taken at 1 passed for current, and a failover heard of
    /// while nothing listened raised nothing. A service a hold is watched on
    /// is never forgotten.
    #[test]
    fn a_service_known_again_starts_above_its_forgotten_generations() {
        let ep = Endpoint::parse(
            "redis-sentinel://127.0.0.1:1/forgotten-in-a-unit-test",
            crate::core::dsn::Timeouts::default(),
        )
        .unwrap();
        let first = generation(&ep);
        failover_started(&ep);
        failover_aborted(&ep);
        let before = generation(&ep);
        assert_eq!(before, first + 1);
        in_use(Duration::ZERO, &[&ep]);
        assert_eq!(generation(&ep), before, "watched: kept");
        in_use(Duration::ZERO, &[]);
        assert!(
            generation(&ep) > before,
            "{} after {before}",
            generation(&ep)
        );
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn announcements_parse() {
        let msg = |channel: &str, payload: &str| [bulk("message"), bulk(channel), bulk(payload)];
        assert_eq!(
            parse_event(&msg(
                "+switch-master",
                "mymaster 127.0.0.1 6379 127.0.0.1 6380"
            )),
            Some(Event::Switched(
                "mymaster".into(),
                Addr::Tcp {
                    host: "127.0.0.1".into(),
                    port: 6380
                }
            ))
        );
        assert_eq!(
            parse_event(&msg(
                "+selected-slave",
                "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster 127.0.0.1 6379"
            )),
            Some(Event::Started("mymaster".into()))
        );
        assert_eq!(
            parse_event(&msg(
                "-failover-abort-no-good-slave",
                "master mymaster 127.0.0.1 6379"
            )),
            Some(Event::Aborted("mymaster".into()))
        );
        let subscribed = [bulk("subscribe"), bulk("+switch-master"), Value::Int(1)];
        assert!(parse_event(&subscribed).is_none());
        assert!(parse_event(&msg("+switch-master", "too few")).is_none());
    }
}
