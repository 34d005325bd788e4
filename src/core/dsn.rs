//! Where Redis is and how to talk to it, parsed from one DSN string.
//!
//! One grammar for every place a DSN is given (`DistributedLock`, the session
//! handler class, `redis_lease.dsn`, `session.save_path`); an existing phpredis
//! `session.save_path` must work as it is:
//! - one node: `redis://[[user]:password@]host[:port][/db][?query]`, `rediss://...`
//!   (TLS), phpredis's `tcp://host:port?auth=..` and `tls://` (or `ssl://`),
//!   `unix:///path/to.sock` or a bare absolute path, or a bare `host[:port]`;
//! - Sentinel: `redis-sentinel://[user:pass@]h1:26379,h2:26379/SERVICE[?query]`,
//!   `rediss-sentinel://` (TLS to the sentinels and to the master);
//! - Cluster: `redis-cluster://[user:pass@]h1:p1,h2:p2[?query]`, `rediss-cluster://`,
//!   and phpredis's rediscluster save_path `seed[]=h1:p1&seed[]=h2:p2&...`.
//!
//! Query parameters: `auth` (password, `auth[]=user&auth[]=pass`, or
//! `auth[user]=..&auth[pass]=..`), `user`, `database`/`db`,
//! `timeout`/`connect_timeout`, `read_timeout`, `prefix`; TLS: `cafile`, `cert`,
//! `key`, `verify_peer`, `verify_peer_name` (phpredis: `stream[cafile]`,
//! `stream[local_cert]`, `stream[local_pk]`, `stream[verify_peer]`,
//! `stream[verify_peer_name]`); Sentinel: `sentinel_auth` (password, or
//! `sentinel_auth[]=user&sentinel_auth[]=pass`); durability: `wait_replicas`,
//! `wait_timeout` (ms); phpredis's `persistent`, `weight`, `retry_interval` and
//! rediscluster's `failover` are accepted and ignored.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::core::error::{Error, Result};

/// Longest timeout we accept, in seconds. An infinite timeout would let one dead
/// Redis hang every php-fpm worker, so there is none.
pub const MAX_TIMEOUT_SECS: f64 = 3600.0;

/// Redis's AUTH names a user only with a password; a user without one would
/// silently connect as `default`.
const EMPTY_PASSWORD: &str = "a user name is given without a password (AUTH needs both; \
                              for a nopass user, give any)";

/// The session key prefix of phpredis's `rediscluster` save handler, the default
/// of a save_path in its `seed[]=` form.
pub const PHPREDIS_CLUSTER_PREFIX: &str = "PHPREDIS_CLUSTER_SESSION:";

/// Most replicas a `wait_replicas` may ask for, and the longest `wait_timeout` (ms).
const MAX_WAIT_REPLICAS: u32 = 64;
const MAX_WAIT_TIMEOUT_MS: u64 = 60_000;

/// One node's address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Addr::Tcp { host, port } => write!(f, "{host}:{port}"),
            Addr::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// Where Redis is: one node, a master found through Sentinel, or a Cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Topology {
    Node(Addr),
    /// The master of `service`, as the sentinels at these addresses (TCP) say.
    Sentinel {
        sentinels: Vec<Addr>,
        service: String,
    },
    /// A Redis Cluster, discovered from any of these nodes (TCP).
    Cluster {
        seeds: Vec<Addr>,
    },
}

/// `host:port,host:port,...`
fn list(addrs: &[Addr]) -> String {
    addrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Topology::Node(addr) => write!(f, "{addr}"),
            Topology::Sentinel { sentinels, service } => {
                write!(
                    f,
                    "the master of '{service}' (sentinels {})",
                    list(sentinels)
                )
            }
            Topology::Cluster { seeds } => write!(f, "the cluster of {}", list(seeds)),
        }
    }
}

/// TLS settings. Certificates are read from their files when a connection is
/// made (once per worker), never when a DSN is parsed (every request).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tls {
    /// CA certificates (PEM) to trust instead of the system's roots.
    pub cafile: Option<PathBuf>,
    /// Client certificate and its private key (PEM), for mutual TLS.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Off: no certificate check at all (an explicit opt-out).
    pub verify_peer: bool,
    /// Off: the certificate chain is checked, the host name is not.
    pub verify_peer_name: bool,
}

impl Tls {
    fn new() -> Tls {
        Tls {
            cafile: None,
            cert: None,
            key: None,
            verify_peer: true,
            verify_peer_name: true,
        }
    }
}

/// A user name and password (either may be absent).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credentials({:?}, {})",
            self.username,
            if self.password.is_some() { "***" } else { "-" }
        )
    }
}

/// Writes that must reach `replicas` replicas (WAIT) before they are reported done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wait {
    pub replicas: u32,
    /// How long WAIT may block; `None`: the read timeout.
    pub timeout: Option<Duration>,
}

/// Timeouts used when the DSN does not set its own (from ini settings).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(1),
            read: Duration::from_secs(2),
        }
    }
}

/// Redis with credentials, TLS and timeouts. `Debug` and `Display` never show a
/// password.
#[derive(Clone, PartialEq)]
pub struct Endpoint {
    pub topology: Topology,
    /// The data nodes' credentials (the master's, with Sentinel).
    pub auth: Credentials,
    /// The sentinels' own credentials.
    pub sentinel_auth: Credentials,
    pub db: i64,
    pub tls: Option<Tls>,
    pub timeouts: Timeouts,
    /// Key prefix given in the DSN (phpredis's `prefix=`), for the session store.
    pub prefix: Option<String>,
    pub wait: Option<Wait>,
    /// Whether scripts may run as Redis Functions (`functions=0`: by EVALSHA only).
    pub functions: bool,
}

/// What makes two endpoints the same Redis, to the connection pool: timeouts,
/// prefix and WAIT settings are per call, not per connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    topology: Topology,
    auth: Credentials,
    sentinel_auth: Credentials,
    db: i64,
    tls: Option<Tls>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Endpoint {
    /// [`Endpoint::parse`], remembering the last few results in this thread:
    /// applications make a new lock object for every lock, with the same DSN.
    pub fn parse_shared(dsn: &str, defaults: Timeouts) -> Result<std::sync::Arc<Endpoint>> {
        use std::cell::RefCell;
        use std::sync::Arc;
        type Seen = Vec<(String, Timeouts, Arc<Endpoint>)>;
        thread_local! {
            static SEEN: RefCell<Seen> = const { RefCell::new(Vec::new()) };
        }
        let hit = SEEN.with(|seen| {
            seen.borrow()
                .iter()
                .find(|(d, t, _)| d == dsn && *t == defaults)
                .map(|(_, _, ep)| ep.clone())
        });
        if let Some(ep) = hit {
            return Ok(ep);
        }
        let ep = Arc::new(Endpoint::parse(dsn, defaults)?);
        SEEN.with(|seen| {
            let mut seen = seen.borrow_mut();
            if seen.len() == 8 {
                seen.remove(0);
            }
            seen.push((dsn.to_string(), defaults, ep.clone()));
        });
        Ok(ep)
    }

    /// Parses `dsn`, taking timeouts it does not set from `defaults`.
    pub fn parse(dsn: &str, defaults: Timeouts) -> Result<Endpoint> {
        Parser { dsn: dsn.trim() }.parse(defaults)
    }

    pub fn identity(&self) -> Identity {
        Identity {
            topology: self.topology.clone(),
            auth: self.auth.clone(),
            sentinel_auth: self.sentinel_auth.clone(),
            db: self.db,
            tls: self.tls.clone(),
        }
    }

    /// Whether this endpoint is `id` (cheaper than building an identity).
    pub fn is(&self, id: &Identity) -> bool {
        self.topology == id.topology
            && self.auth == id.auth
            && self.db == id.db
            && self.sentinel_auth == id.sentinel_auth
            && self.tls == id.tls
    }

    /// Where Redis is, for messages: `host:port`, or the Sentinel service or
    /// Cluster seeds. Never a password.
    pub fn location(&self) -> String {
        let tls = if self.tls.is_some() { " (TLS)" } else { "" };
        format!("{}{tls}", self.topology)
    }

    /// Which Redis this is, as text that never carries a secret and is the
    /// same for every spelling of one (timeouts, WAIT and other per-call
    /// options, credentials left out): `host:port/db`, the socket, the
    /// Sentinel service or the Cluster's seeds, and whether over TLS.
    pub fn server(&self) -> String {
        // A format of its own (not the messages' wording, which may change), hosts
        // in lower case, and a service's sentinels or a Cluster's seeds sorted,
        // once each: any of them names the same Redis.
        let hosts = |addrs: &[Addr]| {
            let mut names: Vec<String> =
                addrs.iter().map(|a| a.to_string().to_lowercase()).collect();
            names.sort();
            names.dedup();
            names.join(",")
        };
        let place = match &self.topology {
            Topology::Node(Addr::Unix(path)) => format!("unix:{}", path.display()),
            Topology::Node(addr) => addr.to_string().to_lowercase(),
            Topology::Sentinel { sentinels, service } => {
                format!("sentinel:{service}@{}", hosts(sentinels))
            }
            Topology::Cluster { seeds } => format!("cluster:{}", hosts(seeds)),
        };
        let tls = if self.tls.is_some() { " tls" } else { "" };
        format!("{place}/{}{tls}", self.db)
    }

    /// The DSN with passwords replaced by `***`: safe for messages and phpinfo
    /// (certificate paths are shown, their contents never read here).
    pub fn redacted(&self) -> String {
        let userinfo = |c: &Credentials| match (&c.username, &c.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (None, Some(_)) => ":***@".to_string(),
            (Some(u), None) => format!("{u}@"),
            (None, None) => String::new(),
        };
        let s = if self.tls.is_some() { "s" } else { "" };
        let mut query: Vec<String> = Vec::new();
        let mut out = match &self.topology {
            Topology::Node(Addr::Unix(path)) => {
                query.push(format!("database={}", self.db));
                if self.auth.password.is_some() {
                    query.push("auth=***".into());
                }
                format!("unix://{}", path.display())
            }
            Topology::Node(addr) => {
                format!("redis{s}://{}{addr}/{}", userinfo(&self.auth), self.db)
            }
            Topology::Sentinel { sentinels, service } => {
                if self.db != 0 {
                    query.push(format!("database={}", self.db));
                }
                if self.sentinel_auth != Credentials::default() {
                    query.push(format!(
                        "sentinel_auth={}",
                        userinfo(&self.sentinel_auth).trim_end_matches('@')
                    ));
                }
                format!(
                    "redis{s}-sentinel://{}{}/{service}",
                    userinfo(&self.auth),
                    list(sentinels)
                )
            }
            Topology::Cluster { seeds } => {
                format!("redis{s}-cluster://{}{}", userinfo(&self.auth), list(seeds))
            }
        };
        if let Some(tls) = &self.tls {
            let path = |name: &str, p: &Option<PathBuf>| {
                p.as_ref().map(|p| format!("{name}={}", p.display()))
            };
            query.extend(path("cafile", &tls.cafile));
            query.extend(path("cert", &tls.cert));
            query.extend(path("key", &tls.key));
            if !tls.verify_peer {
                query.push("verify_peer=0".into());
            } else if !tls.verify_peer_name {
                query.push("verify_peer_name=0".into());
            }
        }
        if let Some(w) = &self.wait {
            query.push(format!("wait_replicas={}", w.replicas));
            if let Some(t) = w.timeout {
                query.push(format!("wait_timeout={}", t.as_millis()));
            }
        }
        if !self.functions {
            query.push("functions=0".into());
        }
        if !query.is_empty() {
            out.push('?');
            out.push_str(&query.join("&"));
        }
        out
    }
}

/// The scheme of a DSN.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Node,
    Sentinel,
    Cluster,
    /// phpredis's rediscluster save_path: no scheme, seeds in the query.
    ClusterSeeds,
}

struct Parser<'a> {
    dsn: &'a str,
}

impl Parser<'_> {
    fn fail(&self, why: &str) -> Error {
        // The DSN may hold a password anywhere (a mistyped `auth=`, a missing '@'),
        // so no part of it is ever echoed back: messages name the component only.
        Error::invalid(format!("Invalid Redis DSN: {why}"))
    }

    fn parse(&self, defaults: Timeouts) -> Result<Endpoint> {
        let dsn = self.dsn;
        if dsn.is_empty() {
            return Err(self.fail("it is empty"));
        }
        if dsn.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(self.fail("it contains spaces or control characters"));
        }
        let (rest, query) = match dsn.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (dsn, None),
        };
        let mut ep = Endpoint {
            topology: Topology::Node(Addr::Tcp {
                host: String::new(),
                port: 6379,
            }),
            auth: Credentials::default(),
            sentinel_auth: Credentials::default(),
            db: 0,
            tls: None,
            timeouts: defaults,
            prefix: None,
            wait: None,
            functions: true,
        };
        let scheme = if let Some(path) = rest.strip_prefix("unix://") {
            self.unix_path(&mut ep, path)?;
            Scheme::Node
        } else if rest.starts_with('/') {
            self.unix_path(&mut ep, rest)?;
            Scheme::Node
        } else if let Some((scheme, after)) = rest.split_once("://") {
            let (kind, secure) = match scheme {
                "redis" | "tcp" => (Scheme::Node, false),
                "rediss" | "tls" | "ssl" => (Scheme::Node, true),
                "redis-sentinel" => (Scheme::Sentinel, false),
                "rediss-sentinel" => (Scheme::Sentinel, true),
                "redis-cluster" => (Scheme::Cluster, false),
                "rediss-cluster" => (Scheme::Cluster, true),
                _ => {
                    return Err(self.fail(
                        "unknown scheme; use redis://, rediss://, tcp://, tls://, unix://, \
                         redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://",
                    ))
                }
            };
            if secure {
                ep.tls = Some(Tls::new());
            }
            match kind {
                Scheme::Node => self.node(&mut ep, after)?,
                Scheme::Sentinel => self.sentinel(&mut ep, after)?,
                _ => self.cluster(&mut ep, after)?,
            }
            kind
        } else if rest.is_empty() && query.is_some_and(|q| q.starts_with("seed")) {
            return self.seeds_form(ep, query.unwrap_or_default());
        } else if rest.starts_with("seed[]=") || rest.starts_with("seed%5B%5D=") {
            // A rediscluster save_path has no '?': the whole of it is the query.
            return self.seeds_form(ep, dsn);
        } else {
            self.node(&mut ep, rest)?;
            Scheme::Node
        };
        if let Some(q) = query {
            self.query(&mut ep, q, scheme)?;
        }
        self.check(ep)
    }

    fn seeds_form(&self, mut ep: Endpoint, query: &str) -> Result<Endpoint> {
        self.query(&mut ep, query, Scheme::ClusterSeeds)?;
        self.check(ep)
    }

    /// phpredis's `auth[]=...` list (the same for `sentinel_auth[]`, named
    /// `name`): a password, or a user and a password.
    fn credential_list(
        &self,
        mut parts: Vec<String>,
        c: &mut Credentials,
        name: &str,
    ) -> Result<()> {
        // Each part is non-empty (`given`).
        match parts.len() {
            0 => {}
            1 => c.password = Some(parts.remove(0)),
            2 => {
                c.password = parts.pop();
                c.username = parts.pop();
            }
            _ => return Err(self.fail(&format!("{name} takes a user and a password, no more"))),
        }
        Ok(())
    }

    /// Checks what only the whole DSN can tell.
    fn check(&self, ep: Endpoint) -> Result<Endpoint> {
        if let Topology::Cluster { seeds } = &ep.topology {
            if seeds.is_empty() {
                return Err(self.fail("a cluster needs at least one seed node (seed[]=host:port)"));
            }
            if ep.db != 0 {
                return Err(self
                    .fail("Redis Cluster has one database (0); remove database/db from the DSN"));
            }
        }
        if !matches!(ep.topology, Topology::Sentinel { .. })
            && ep.sentinel_auth != Credentials::default()
        {
            return Err(self.fail("sentinel_auth is for redis-sentinel:// DSNs only"));
        }
        if ep.auth.username.is_some() && ep.auth.password.is_none()
            || ep.sentinel_auth.username.is_some() && ep.sentinel_auth.password.is_none()
        {
            return Err(self.fail(EMPTY_PASSWORD));
        }
        if let Some(tls) = &ep.tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return Err(self.fail(
                    "a client certificate needs its key, and a key its certificate (cert= and key=, \
                     or stream[local_cert] and stream[local_pk])",
                ));
            }
        }
        Ok(ep)
    }

    fn unix_path(&self, ep: &mut Endpoint, path: &str) -> Result<()> {
        if !path.starts_with('/') || path.len() < 2 {
            return Err(
                self.fail("a unix socket needs an absolute path, as in unix:///run/redis.sock")
            );
        }
        ep.topology = Topology::Node(Addr::Unix(PathBuf::from(
            percent_decode(path).map_err(|e| self.fail(e))?,
        )));
        Ok(())
    }

    /// `[userinfo@]host[:port][/db]`
    fn node(&self, ep: &mut Endpoint, s: &str) -> Result<()> {
        let (authority, db) = match s.split_once('/') {
            Some((a, d)) => (a, Some(d)),
            None => (s, None),
        };
        let hostport = self.userinfo_then(ep, authority)?;
        if hostport.contains(',') {
            return Err(self.fail(
                "several hosts separated by commas need redis-sentinel:// or redis-cluster://",
            ));
        }
        ep.topology = Topology::Node(self.host_port(hostport, 6379)?);
        match db {
            None | Some("") => {}
            Some(d) => ep.db = self.db_number(d)?,
        }
        Ok(())
    }

    /// `[userinfo@]h1:p1,h2:p2/SERVICE`
    fn sentinel(&self, ep: &mut Endpoint, s: &str) -> Result<()> {
        let (authority, service) = s.split_once('/').unwrap_or((s, ""));
        let hosts = self.userinfo_then(ep, authority)?;
        // A '/' left unencoded in a password splits it: the rest would pass for
        // the service, and show (in messages, phpinfo) as its name. (A real
        // name with '@' is written %40.)
        if service.contains('@') {
            return Err(self.fail(
                "a Sentinel service name has no bare '@': percent-encode a '/' in the password as \
                 %2F (and an '@' in the name as %40)",
            ));
        }
        let service = percent_decode(service).map_err(|e| self.fail(e))?;
        if service.is_empty() || service.contains('/') {
            return Err(self.fail(
                "a Sentinel DSN names its service (master name) after the hosts, as in \
                 redis-sentinel://h1:26379,h2:26379/mymaster",
            ));
        }
        ep.topology = Topology::Sentinel {
            sentinels: self.host_list(hosts, 26379)?,
            service,
        };
        Ok(())
    }

    /// `[userinfo@]h1:p1,h2:p2[/]`
    fn cluster(&self, ep: &mut Endpoint, s: &str) -> Result<()> {
        let (authority, db) = s.split_once('/').unwrap_or((s, ""));
        if !db.is_empty() {
            return Err(
                self.fail("Redis Cluster has one database (0); remove the /database from the DSN")
            );
        }
        let hosts = self.userinfo_then(ep, authority)?;
        ep.topology = Topology::Cluster {
            seeds: self.host_list(hosts, 6379)?,
        };
        Ok(())
    }

    /// Takes the userinfo off an authority; returns what follows it.
    fn userinfo_then<'a>(&self, ep: &mut Endpoint, authority: &'a str) -> Result<&'a str> {
        // The password may itself contain '@' when not percent-encoded: split at the last one.
        match authority.rsplit_once('@') {
            Some((userinfo, rest)) => {
                ep.auth = self.userinfo(userinfo)?;
                Ok(rest)
            }
            None => Ok(authority),
        }
    }

    fn host_list(&self, s: &str, default_port: u16) -> Result<Vec<Addr>> {
        let list: Vec<Addr> = s
            .split(',')
            .map(|h| self.host_port(h, default_port))
            .collect::<Result<_>>()?;
        if list.len() > 64 {
            return Err(self.fail("more than 64 hosts"));
        }
        Ok(list)
    }

    fn host_port(&self, hostport: &str, default_port: u16) -> Result<Addr> {
        let (host, port) = if let Some(r) = hostport.strip_prefix('[') {
            let (h, after) = r
                .split_once(']')
                .ok_or_else(|| self.fail("an IPv6 address is missing its closing ']'"))?;
            match after {
                "" => (h, None),
                p => (
                    h,
                    Some(
                        p.strip_prefix(':')
                            .ok_or_else(|| self.fail("expected ':' after ']'"))?,
                    ),
                ),
            }
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(self.fail("the host is missing"));
        }
        let bracketed = hostport.starts_with('[');
        let host_ok = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b) || (bracketed && b == b':'));
        if !host_ok {
            return Err(self.fail("the host name is malformed"));
        }
        let port = match port {
            None => default_port,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(self.fail("the port is not a number from 1 to 65535")),
            },
        };
        Ok(Addr::Tcp {
            host: host.to_string(),
            port,
        })
    }

    /// `user:password`, `:password`, or `password` alone (as Symfony's and
    /// Predis's DSNs read it: a userinfo without ':' is a password, never shown).
    fn userinfo(&self, userinfo: &str) -> Result<Credentials> {
        let (user, pass) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => ("", Some(userinfo)),
        };
        let mut c = Credentials::default();
        if !user.is_empty() {
            c.username = Some(percent_decode(user).map_err(|e| self.fail(e))?);
        }
        match pass {
            Some("") | None if user.is_empty() => {
                return Err(self.fail("'@' is given but no user name or password before it"));
            }
            Some(p) if !p.is_empty() => {
                c.password = Some(percent_decode(p).map_err(|e| self.fail(e))?);
            }
            // Without a password Redis is never told the user: the link would
            // silently run as the `default` user.
            _ => return Err(self.fail(EMPTY_PASSWORD)),
        }
        Ok(c)
    }

    fn db_number(&self, d: &str) -> Result<i64> {
        match d.parse::<i64>() {
            Ok(n)
                if (0..=i64::from(i32::MAX)).contains(&n)
                    && d.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Ok(n)
            }
            _ => Err(self.fail("the database is not a number from 0 to 2147483647")),
        }
    }

    /// A credential or a prefix, which must not be empty (`?auth=`: a template
    /// variable left unset): never connect without the password, or as another
    /// user, or store sessions under no prefix, because a value went missing.
    fn given(&self, name: &str, v: String) -> Result<String> {
        if v.is_empty() {
            return Err(self.fail(&format!(
                "'{name}' is given without a value (leave it out of the DSN if none is meant)"
            )));
        }
        Ok(v)
    }

    /// A boolean option. An empty value (`?verify_peer`, `?verify_peer=`: a
    /// template variable left unset) is refused: it must never turn a security
    /// check off by accident.
    fn flag(&self, name: &str, v: &str) -> Result<bool> {
        match v {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            "" => Err(self.fail(&format!("'{name}' needs a value, 0 or 1"))),
            _ => Err(self.fail(&format!("'{name}' must be 0 or 1"))),
        }
    }

    fn query(&self, ep: &mut Endpoint, q: &str, scheme: Scheme) -> Result<()> {
        let mut auth_parts: Vec<String> = Vec::new();
        let mut sentinel_parts: Vec<String> = Vec::new();
        let mut seeds: Vec<Addr> = Vec::new();
        let mut tls_options = false;
        let mut tls = ep.tls.clone().unwrap_or_else(Tls::new);
        let mut wait_timeout = None;
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            // phpredis writes array keys with brackets, browsers and http_build_query
            // percent-encode them.
            let k = k
                .replace("%5B", "[")
                .replace("%5D", "]")
                .replace("%5b", "[")
                .replace("%5d", "]");
            let v = percent_decode(v).map_err(|e| self.fail(e))?;
            let path = |v: &str| Some(PathBuf::from(v)).filter(|p| !p.as_os_str().is_empty());
            match k.as_str() {
                "auth" | "auth[pass]" => ep.auth.password = Some(self.given(&k, v)?),
                "auth[]" => auth_parts.push(self.given(&k, v)?),
                "auth[user]" | "user" | "username" => ep.auth.username = Some(self.given(&k, v)?),
                "database" | "db" => ep.db = self.db_number(&v)?,
                "timeout" | "connect_timeout" => {
                    if let Some(t) = self.timeout(&k, &v)? {
                        ep.timeouts.connect = t;
                    }
                }
                "read_timeout" => {
                    if let Some(t) = self.timeout(&k, &v)? {
                        ep.timeouts.read = t;
                    }
                }
                // An empty prefix would put sessions among the application's own
                // keys (a session id `config` reads and overwrites `config`).
                "prefix" => ep.prefix = Some(self.given(&k, v)?),
                "persistent" | "weight" | "retry_interval" => {
                    if !v.is_empty() && v.parse::<f64>().is_err() {
                        return Err(self.fail(&format!("'{k}' must be a number")));
                    }
                }
                "cafile" | "stream[cafile]" => {
                    tls_options = true;
                    tls.cafile = path(&v);
                }
                "cert" | "stream[local_cert]" => {
                    tls_options = true;
                    tls.cert = path(&v);
                }
                "key" | "stream[local_pk]" => {
                    tls_options = true;
                    tls.key = path(&v);
                }
                "verify_peer" | "stream[verify_peer]" => {
                    tls_options = true;
                    tls.verify_peer = self.flag(&k, &v)?;
                }
                "verify_peer_name" | "stream[verify_peer_name]" => {
                    tls_options = true;
                    tls.verify_peer_name = self.flag(&k, &v)?;
                }
                "stream[allow_self_signed]" => {
                    tls_options = true;
                    if self.flag(&k, &v)? {
                        return Err(self.fail(
                            "stream[allow_self_signed]=1 is not supported: give the server's \
                             certificate (or its CA) as stream[cafile] (or opt out with \
                             stream[verify_peer]=0)",
                        ));
                    }
                }
                "stream[peer_name]" => {
                    return Err(self.fail(
                        "stream[peer_name] is not supported: connect by the host name the \
                         certificate names (or set stream[verify_peer_name]=0)",
                    ))
                }
                "sentinel_auth" => ep.sentinel_auth.password = Some(self.given(&k, v)?),
                "sentinel_auth[]" => sentinel_parts.push(self.given(&k, v)?),
                "seed[]" if scheme == Scheme::ClusterSeeds => seeds.push(self.host_port(&v, 6379)?),
                "failover" if matches!(scheme, Scheme::Cluster | Scheme::ClusterSeeds) => {
                    // Reading from replicas: redis_lease reads and writes the primaries only.
                    if !["none", "error", "distribute", "distribute_slaves"].contains(&v.as_str()) {
                        return Err(self.fail(
                            "'failover' must be none, error, distribute or distribute_slaves",
                        ));
                    }
                }
                "wait_replicas" => {
                    let n = v
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n <= MAX_WAIT_REPLICAS)
                        .ok_or_else(|| {
                            self.fail(&format!("'wait_replicas' must be a number of replicas from 0 to {MAX_WAIT_REPLICAS}"))
                        })?;
                    ep.wait = (n > 0).then_some(Wait {
                        replicas: n,
                        timeout: None,
                    });
                }
                "functions" => ep.functions = self.flag(&k, &v)?,
                "wait_timeout" => {
                    let ms = v
                        .parse::<u64>()
                        .ok()
                        .filter(|ms| (1..=MAX_WAIT_TIMEOUT_MS).contains(ms))
                        .ok_or_else(|| {
                            self.fail(&format!("'wait_timeout' must be milliseconds from 1 to {MAX_WAIT_TIMEOUT_MS}"))
                        })?;
                    wait_timeout = Some(Duration::from_millis(ms));
                }
                _ => {
                    return Err(self.fail(
                        "an unknown query parameter (known: auth, user, database, timeout, \
                         connect_timeout, read_timeout, prefix, cafile, cert, key, verify_peer, \
                         verify_peer_name, stream[...], sentinel_auth, seed[], wait_replicas, \
                         wait_timeout, functions, persistent, weight, retry_interval, failover)",
                    ))
                }
            }
        }
        self.credential_list(auth_parts, &mut ep.auth, "auth[]")?;
        self.credential_list(sentinel_parts, &mut ep.sentinel_auth, "sentinel_auth[]")?;
        if scheme == Scheme::ClusterSeeds {
            ep.topology = Topology::Cluster { seeds };
            // phpredis's rediscluster handler keeps sessions under its own prefix:
            // the same save_path must find them.
            ep.prefix
                .get_or_insert_with(|| PHPREDIS_CLUSTER_PREFIX.to_string());
            // phpredis: any stream[...] option turns TLS on for every node.
            if tls_options {
                ep.tls = Some(tls);
            }
        } else if tls_options {
            if ep.tls.is_none() {
                return Err(self.fail(
                    "TLS options (cafile, cert, key, verify_peer, stream[...]) need a TLS scheme: \
                     rediss://, tls://, rediss-sentinel:// or rediss-cluster://",
                ));
            }
            ep.tls = Some(tls);
        }
        if let Some(w) = &mut ep.wait {
            w.timeout = wait_timeout;
        } else if wait_timeout.is_some() {
            return Err(self.fail("'wait_timeout' needs 'wait_replicas'"));
        }
        Ok(())
    }

    /// A timeout in seconds. `0` keeps the default (phpredis means "no timeout" by
    /// it, which we never allow).
    fn timeout(&self, name: &str, v: &str) -> Result<Option<Duration>> {
        match v.parse::<f64>() {
            Ok(0.0) => Ok(None),
            Ok(t) if t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_SECS => {
                Ok(Some(Duration::from_secs_f64(t)))
            }
            _ => Err(self.fail(&format!(
                "'{name}' must be a number of seconds between 0 and {MAX_TIMEOUT_SECS}"
            ))),
        }
    }
}

fn percent_decode(s: &str) -> std::result::Result<String, &'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a '%' escape is not followed by two hex digits")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a percent-escape decodes to invalid UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Endpoint> {
        Endpoint::parse(s, Timeouts::default())
    }

    fn tcp(host: &str, port: u16) -> Addr {
        Addr::Tcp {
            host: host.into(),
            port,
        }
    }

    fn node(host: &str, port: u16) -> Topology {
        Topology::Node(tcp(host, port))
    }

    /// `server()`: one answer for every spelling of one Redis, another for
    /// another, never a secret.
    #[test]
    fn a_server_is_named_the_same_whatever_the_spelling() {
        let server = |dsn: &str| parse(dsn).unwrap().server();
        let one = server("redis://Cache.Example:6379/2");
        for same in [
            "redis://:Secret@cache.example:6379/2?timeout=1&read_timeout=3",
            "redis://app:Secret@cache.example/2?wait_replicas=1&functions=0",
            "tcp://cache.example:6379?database=2&auth=Secret&prefix=S:",
        ] {
            assert_eq!(server(same), one, "{same}");
        }
        assert!(!one.contains("Secret"), "{one}");
        let sentinels = server("redis-sentinel://:Secret@s1:26379,S2:26379/svc");
        assert_eq!(
            server("redis-sentinel://s2:26379,s1:26379,s1:26379/svc"),
            sentinels
        );
        assert!(!sentinels.contains("Secret"), "{sentinels}");
        let seeds = server("redis-cluster://n2:7000,n1:7000");
        assert_eq!(server("redis-cluster://n1:7000,n2:7000"), seeds);
        let others = [
            server("redis://cache.example:6379/3"),
            server("redis://cache.example:6380/2"),
            server("rediss://cache.example:6379/2"),
            server("redis-sentinel://s1:26379,s2:26379/other"),
            sentinels,
            seeds,
        ];
        let mut all: Vec<&String> = others.iter().chain([&one]).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 7, "{all:?}");
    }

    #[test]
    fn redis_urls() {
        let e = parse("redis://127.0.0.1").unwrap();
        assert_eq!(e.topology, node("127.0.0.1", 6379));
        assert_eq!(
            (e.db, e.auth.clone(), e.tls.clone()),
            (0, Credentials::default(), None)
        );

        let e = parse("redis://app:s%40cret@cache.local:6380/3?read_timeout=0.5").unwrap();
        assert_eq!(e.topology, node("cache.local", 6380));
        assert_eq!(e.auth.username.as_deref(), Some("app"));
        assert_eq!(e.auth.password.as_deref(), Some("s@cret"));
        assert_eq!(e.db, 3);
        assert_eq!(e.timeouts.read, Duration::from_millis(500));

        let e = parse("redis://:pw@[::1]:7000/").unwrap();
        assert_eq!(e.topology, node("::1", 7000));
        assert_eq!(
            (e.auth.username.clone(), e.auth.password.as_deref()),
            (None, Some("pw"))
        );
        assert_eq!(e.to_string(), "redis://:***@[::1]:7000/0");

        // A userinfo without ':' is a password (Symfony, Predis), never a user name.
        let e = parse("redis://S3cretPass@127.0.0.1").unwrap();
        assert_eq!(
            (e.auth.username.clone(), e.auth.password.as_deref()),
            (None, Some("S3cretPass"))
        );
        assert_eq!(e.to_string(), "redis://:***@127.0.0.1:6379/0");
        assert!(!e.redacted().contains("S3cret"));
    }

    #[test]
    fn phpredis_save_paths() {
        let e = parse("tcp://10.0.0.1:6379?auth=secret&database=2&timeout=2.5&prefix=SESS_&persistent=1&weight=1")
            .unwrap();
        assert_eq!(e.topology, node("10.0.0.1", 6379));
        assert_eq!(e.auth.password.as_deref(), Some("secret"));
        assert_eq!(e.db, 2);
        assert_eq!(e.timeouts.connect, Duration::from_millis(2500));
        assert_eq!(e.prefix.as_deref(), Some("SESS_"));

        for dsn in [
            "tcp://h:1?auth[]=alice&auth[]=pw",
            "tcp://h:1?auth%5B%5D=alice&auth%5B%5D=pw",
            "tcp://h:1?auth[user]=alice&auth[pass]=pw",
        ] {
            let e = parse(dsn).unwrap();
            assert_eq!(
                (e.auth.username.as_deref(), e.auth.password.as_deref()),
                (Some("alice"), Some("pw")),
                "{dsn}"
            );
        }

        // phpredis's timeout=0 means "forever"; we keep the finite default instead.
        let e = parse("tcp://h:1?timeout=0").unwrap();
        assert_eq!(e.timeouts.connect, Timeouts::default().connect);
    }

    #[test]
    fn tls_forms() {
        let e = parse(
            "rediss://default:pw@cache.example:6380/1?cafile=/etc/ca.pem&cert=/c.pem&key=/k.pem",
        )
        .unwrap();
        assert_eq!(e.topology, node("cache.example", 6380));
        let tls = e.tls.clone().unwrap();
        assert_eq!(tls.cafile, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(tls.cert, Some(PathBuf::from("/c.pem")));
        assert_eq!(tls.key, Some(PathBuf::from("/k.pem")));
        assert!(
            tls.verify_peer && tls.verify_peer_name,
            "verification is on by default"
        );
        assert_eq!(
            e.to_string(),
            "rediss://default:***@cache.example:6380/1?cafile=/etc/ca.pem&cert=/c.pem&key=/k.pem"
        );

        // phpredis's form; ssl:// is tls://.
        for scheme in ["tls", "ssl"] {
            let e = parse(&format!(
                "{scheme}://h:6380?auth[]=u&auth[]=p&stream[cafile]=/ca.pem&stream[local_cert]=/c&stream[local_pk]=/k&stream[verify_peer_name]=0"
            ))
            .unwrap();
            let tls = e.tls.unwrap();
            assert_eq!(tls.cafile, Some(PathBuf::from("/ca.pem")));
            assert!(tls.verify_peer && !tls.verify_peer_name);
            assert_eq!(e.auth.username.as_deref(), Some("u"));
        }
        assert!(
            !parse("rediss://h?verify_peer=0")
                .unwrap()
                .tls
                .unwrap()
                .verify_peer
        );
        assert!(parse("rediss://h").unwrap().tls.is_some());
    }

    #[test]
    fn sentinel_forms() {
        let e = parse("redis-sentinel://app:pw@s1:26379,s2,[::1]:26380/mymaster?database=2&sentinel_auth[]=sen&sentinel_auth[]=spw")
            .unwrap();
        assert_eq!(
            e.topology,
            Topology::Sentinel {
                sentinels: vec![tcp("s1", 26379), tcp("s2", 26379), tcp("::1", 26380)],
                service: "mymaster".into()
            }
        );
        assert_eq!(e.auth.password.as_deref(), Some("pw"));
        assert_eq!(e.sentinel_auth.username.as_deref(), Some("sen"));
        assert_eq!(e.sentinel_auth.password.as_deref(), Some("spw"));
        assert_eq!(e.db, 2);
        let shown = e.to_string();
        assert!(!shown.contains("pw") || shown.contains("***"), "{shown}");
        assert!(!shown.contains("spw"), "{shown}");
        let e = parse("rediss-sentinel://s1/svc?sentinel_auth=x&cafile=/ca").unwrap();
        assert!(e.tls.is_some());
        assert_eq!(e.sentinel_auth.password.as_deref(), Some("x"));
    }

    #[test]
    fn cluster_forms() {
        let e = parse("redis-cluster://u:p@n1:7000,n2:7001?timeout=2&read_timeout=2&prefix=S_")
            .unwrap();
        assert_eq!(
            e.topology,
            Topology::Cluster {
                seeds: vec![tcp("n1", 7000), tcp("n2", 7001)]
            }
        );
        assert_eq!(e.prefix.as_deref(), Some("S_"));
        // phpredis's rediscluster save_path: seeds in the query; stream[] turns TLS on.
        let e = parse("seed[]=n1:7000&seed[]=n2:7001&timeout=2&read_timeout=2&auth=pw&prefix=P_")
            .unwrap();
        assert!(matches!(&e.topology, Topology::Cluster { seeds } if seeds.len() == 2));
        assert_eq!(e.auth.password.as_deref(), Some("pw"));
        assert_eq!(e.prefix.as_deref(), Some("P_"));
        assert!(e.tls.is_none());
        // Without a prefix, phpredis's rediscluster handler's, so its sessions carry over.
        let e = parse("seed[]=n1:7000").unwrap();
        assert_eq!(e.prefix.as_deref(), Some(PHPREDIS_CLUSTER_PREFIX));
        assert_eq!(parse("redis-cluster://n1:7000").unwrap().prefix, None);
        let e = parse("seed[]=n1:7000&stream[verify_peer]=0&auth[]=u&auth[]=p").unwrap();
        assert!(!e.tls.unwrap().verify_peer);
        assert!(parse("rediss-cluster://n1:7000").unwrap().tls.is_some());
    }

    #[test]
    fn wait_replicas() {
        let e = parse("redis://h?wait_replicas=1&wait_timeout=250").unwrap();
        assert_eq!(
            e.wait,
            Some(Wait {
                replicas: 1,
                timeout: Some(Duration::from_millis(250))
            })
        );
        assert_eq!(parse("redis://h?wait_replicas=0").unwrap().wait, None);
    }

    #[test]
    fn functions() {
        assert!(parse("redis://h").unwrap().functions);
        assert!(parse("redis://h?functions=1").unwrap().functions);
        let off = parse("redis://h?functions=0").unwrap();
        assert!(!off.functions);
        assert_eq!(off.redacted(), "redis://h:6379/0?functions=0");
        // An unset template variable never changes how scripts run.
        assert!(parse("redis://h?functions=").is_err());
        assert!(parse("redis://h?functions=maybe").is_err());
    }

    #[test]
    fn unix_sockets() {
        let e = parse("unix:///run/redis/redis.sock?database=1").unwrap();
        assert_eq!(
            e.topology,
            Topology::Node(Addr::Unix("/run/redis/redis.sock".into()))
        );
        assert_eq!(e.db, 1);
        assert_eq!(
            parse("/tmp/r.sock").unwrap().topology,
            Topology::Node(Addr::Unix("/tmp/r.sock".into()))
        );
    }

    #[test]
    fn bare_host_port() {
        assert_eq!(
            parse("localhost:6390").unwrap().topology,
            node("localhost", 6390)
        );
        assert_eq!(
            parse("localhost").unwrap().topology,
            node("localhost", 6379)
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "redis://",
            "redis://host:notaport",
            "redis://host:0",
            "redis://host:70000",
            "redis://h/abc",
            "redis://h/-1",
            "redis://:@h",
            "redis://@h",
            // An empty credential or prefix (an unset template variable) never
            // connects as another user, without a password, or unprefixed.
            "redis://app:@h",
            "redis://app:pw@h?auth=",
            "tcp://h?user=app&auth=",
            "tcp://h?user=app",
            "tcp://h?user=&auth=pw",
            "tcp://h?auth=pw&username=",
            "tcp://h?auth[user]=app&auth[pass]=",
            "tcp://h?auth[]=app&auth[]=",
            "tcp://h?auth[]=",
            "tcp://h?auth",
            "tcp://h?prefix=",
            "tcp://h?prefix",
            "redis-sentinel://s1:26379/m?sentinel_auth=",
            "redis-sentinel://s1:26379/m?sentinel_auth[]=u&sentinel_auth[]=",
            "ftp://x",
            "unix://relative.sock",
            "redis://h?bogus=1",
            "redis://h?timeout=-1",
            "redis://h?timeout=NaN",
            "redis://h?read_timeout=inf",
            "redis://h?database=x",
            "tcp://a:1,tcp://b:2",
            "redis://a:1,b:2",
            "redis://[::1",
            "redis://h%zz",
            "redis://u:p%4@h",
            "redis://h o",
            // TLS options without TLS, half a client certificate, unsupported phpredis options.
            "redis://h?cafile=/ca",
            "tcp://h?stream[verify_peer]=0",
            "rediss://h?cert=/c",
            "rediss://h?key=/k",
            "tls://h?stream[allow_self_signed]=1",
            "tls://h?stream[peer_name]=x",
            "rediss://h?verify_peer=maybe",
            // A bare or empty boolean (an unset template variable) never turns a
            // check off.
            "rediss://h?verify_peer",
            "rediss://h?verify_peer=",
            "rediss://h?verify_peer_name",
            "rediss://h?verify_peer_name=",
            "tls://h?stream[verify_peer]=",
            "tls://h?stream[verify_peer_name]",
            "tls://h?stream[allow_self_signed]=",
            // Sentinel without a service; sentinel_auth elsewhere.
            "redis-sentinel://s1:26379",
            "redis-sentinel://s1:26379/",
            // A '/' left unencoded in the password.
            "redis-sentinel://s3cr/et@h1:26379",
            "redis://h?sentinel_auth=x",
            // Cluster with a database; no seeds.
            "redis-cluster://n1:7000/2",
            "redis-cluster://n1:7000?database=1",
            "seed[]=n1:7000&database=3",
            "seed[]=",
            "redis-cluster://n1:7000?seed[]=n2:7001",
            // WAIT.
            "redis://h?wait_replicas=-1",
            "redis://h?wait_replicas=100",
            "redis://h?wait_replicas=1&wait_timeout=0",
            "redis://h?wait_timeout=10",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err:?}");
        }
    }

    /// A bare '@' after the hosts is a password's '/' left unencoded (refused,
    /// with the bad DSNs); a service named with '@' writes it %40.
    #[test]
    fn a_service_name_with_an_at_sign_is_written_encoded() {
        let e = parse("redis-sentinel://h1:26379/my%40master").unwrap();
        assert!(matches!(
            &e.topology,
            Topology::Sentinel { service, .. } if service == "my@master"
        ));
    }

    #[test]
    fn password_never_in_messages() {
        let e = parse("redis://bob:hunter2@h:1/0").unwrap();
        assert!(!format!("{e} {e:?} {}", e.location()).contains("hunter2"));
        let e = parse("tcp://h:1?auth=hunter2").unwrap();
        assert!(!e.redacted().contains("hunter2"));
        let e = parse("redis-sentinel://:hunter2@s/m?sentinel_auth=hunter3").unwrap();
        assert!(!format!("{e} {e:?} {}", e.location()).contains("hunter"));
        let err = parse("redis://bob:hunter2@h:bad").unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        let err = parse("redis://h?auth=hunter2&nope=1")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    /// Any string at all gives an endpoint or an InvalidArgument, never a panic.
    #[test]
    fn arbitrary_input_never_panics() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "redis:/unixtcpls-entr@[]?&=%:0123456789abcdef.,-_ \u{0}é{}"
            .chars()
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let len = rng.random_range(0..40);
            let s: String = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            match parse(&s) {
                Ok(_) | Err(Error::InvalidArgument(_)) => {}
                Err(other) => panic!("{s:?} gave {other:?}"),
            }
        }
    }
}
