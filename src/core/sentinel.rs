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

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
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
    last_used: Instant,
}

impl Known {
    fn is(&self, ep: &Endpoint) -> bool {
        self.topology == ep.topology && self.sentinel_auth == ep.sentinel_auth && self.tls == ep.tls
    }
}

static KNOWN: PerProcess<Mutex<Vec<Known>>> = PerProcess::new();

fn with_known<T>(f: impl FnOnce(&mut Vec<Known>) -> T) -> T {
    let known = KNOWN.get(|| Mutex::new(Vec::new()), |_| {});
    f(&mut known.lock())
}

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
                generation: 1,
                subscribed: false,
                last_used: Instant::now(),
            });
            known.len() - 1
        }
    };
    &mut known[i]
}

fn is_sentinel(ep: &Endpoint) -> bool {
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
        if k.generation != generation {
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
    let older = match (epoch, k.epoch) {
        (Some(e), Some(known)) => e < known,
        // Without epochs (a sentinel that does not say), the latest answer counts,
        // unless epochs were seen: then only a newer epoch moves the master.
        (None, Some(_)) => k.master.as_ref() != Some(addr),
        _ => false,
    };
    match &k.master {
        Some(m) if older => return (m.clone(), k.generation),
        Some(m) if m == addr => {}
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
    (addr.clone(), k.generation)
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
    KNOWN.current().is_some_and(|k| !k.lock().is_empty())
}

/// The services used within `idle`: what the watchdog subscribes to. Services
/// unused for longer are forgotten (their links are closed by then too).
pub(crate) fn in_use(idle: Duration) -> Vec<Endpoint> {
    with_known(|known| {
        known.retain(|k| k.last_used.elapsed() < idle);
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
}

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
        sub.send(redis::cmd("SUBSCRIBE").arg("+switch-master"))?;
        match sub.next()? {
            Value::Array(v) if v.len() == 3 => {}
            _ => return Err(std::io::ErrorKind::InvalidData.into()),
        }
        sub.stream.set_nonblocking(true)?;
        Ok(sub)
    }

    fn send(&mut self, cmd: &redis::Cmd) -> std::io::Result<()> {
        self.stream.write_all(&cmd.get_packed_command())
    }

    fn next(&mut self) -> std::io::Result<Value> {
        self.parser.parse_value(&mut self.stream).map_err(|e| {
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

    /// The announcements that arrived, as (service, new master). An error: the
    /// subscription is gone (closed, or out of step).
    pub(crate) fn read(&mut self) -> std::io::Result<Vec<(String, Addr)>> {
        let mut out = Vec::new();
        loop {
            match self.next() {
                Ok(Value::Array(parts)) => {
                    if let Some(switch) = parse_switch(&parts) {
                        out.push(switch);
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(out),
                Err(e) => return Err(e),
            }
        }
    }
}

/// `["message", "+switch-master", "<service> <old-ip> <old-port> <new-ip> <new-port>"]`.
fn parse_switch(parts: &[Value]) -> Option<(String, Addr)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok().map(str::to_string),
        _ => None,
    };
    if parts.len() != 3 || text(&parts[0])? != "message" {
        return None;
    }
    let payload = text(&parts[2])?;
    let fields: Vec<&str> = payload.split(' ').collect();
    let [service, _, _, host, port] = fields[..] else {
        return None;
    };
    Some((
        service.to_string(),
        Addr::Tcp {
            host: host.to_string(),
            port: port.parse().ok()?,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn switch_announcements_parse() {
        let msg = [
            bulk("message"),
            bulk("+switch-master"),
            bulk("mymaster 127.0.0.1 6379 127.0.0.1 6380"),
        ];
        let (service, addr) = parse_switch(&msg).unwrap();
        assert_eq!(service, "mymaster");
        assert_eq!(
            addr,
            Addr::Tcp {
                host: "127.0.0.1".into(),
                port: 6380
            }
        );
        assert!(
            parse_switch(&[bulk("subscribe"), bulk("+switch-master"), Value::Int(1)]).is_none()
        );
        assert!(parse_switch(&[bulk("message"), bulk("x"), bulk("too few")]).is_none());
    }
}
