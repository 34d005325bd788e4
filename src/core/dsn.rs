//! Where Redis is and how to talk to it, parsed from one DSN string.
//!
//! Accepted forms (a demanding user's existing `session.save_path` must work):
//! - `redis://[[user]:password@]host[:port][/db][?query]`
//! - `unix:///path/to.sock[?query]`, or a bare absolute path `/path/to.sock`
//! - phpredis style `tcp://host:port?auth=..&database=..&timeout=..&read_timeout=..`
//! - a bare `host[:port]`
//!
//! Query parameters (all forms): `auth` (password, or `auth[]=user&auth[]=pass`),
//! `user`, `database`/`db`, `timeout`/`connect_timeout`, `read_timeout`, `prefix`,
//! and phpredis's `persistent`, `weight`, `retry_interval`, accepted for
//! compatibility (connections are always kept per worker, and there is one endpoint).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::core::error::{Error, Result};

/// Longest timeout we accept, in seconds. An infinite timeout would let one dead
/// Redis hang every php-fpm worker, so there is none.
pub const MAX_TIMEOUT_SECS: f64 = 3600.0;

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

/// One Redis endpoint with credentials and timeouts. `Debug` and `Display` never
/// show the password.
#[derive(Clone, PartialEq)]
pub struct Endpoint {
    pub addr: Addr,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
    pub timeouts: Timeouts,
    /// Key prefix given in the DSN (phpredis's `prefix=`), for the session store.
    pub prefix: Option<String>,
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
    /// Parses `dsn`, taking timeouts it does not set from `defaults`.
    pub fn parse(dsn: &str, defaults: Timeouts) -> Result<Endpoint> {
        Parser { dsn: dsn.trim() }.parse(defaults)
    }

    /// The DSN with the password replaced by `***`: safe for messages and phpinfo.
    pub fn redacted(&self) -> String {
        let auth = match (&self.username, &self.password) {
            (Some(u), Some(_)) => format!("{u}:***@"),
            (None, Some(_)) => ":***@".to_string(),
            (Some(u), None) => format!("{u}@"),
            (None, None) => String::new(),
        };
        match &self.addr {
            Addr::Tcp { .. } => format!("redis://{auth}{}/{}", self.addr, self.db),
            Addr::Unix(path) if auth.is_empty() => {
                format!("unix://{}?database={}", path.display(), self.db)
            }
            Addr::Unix(path) => format!("unix://{}?database={}&auth=***", path.display(), self.db),
        }
    }

    /// Identity of the connection: two endpoints with the same key can share one.
    pub(crate) fn connection_key(&self) -> (Addr, Option<String>, Option<String>, i64) {
        (
            self.addr.clone(),
            self.username.clone(),
            self.password.clone(),
            self.db,
        )
    }
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
        if dsn.contains(',') {
            return Err(self.fail(
                "several endpoints separated by commas are not supported; give exactly one",
            ));
        }
        if dsn.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(self.fail("it contains spaces or control characters"));
        }
        let (rest, query) = match dsn.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (dsn, None),
        };
        let mut ep = Endpoint {
            addr: Addr::Tcp {
                host: String::new(),
                port: 6379,
            },
            username: None,
            password: None,
            db: 0,
            timeouts: defaults,
            prefix: None,
        };
        if let Some(path) = rest.strip_prefix("unix://") {
            self.unix_path(&mut ep, path)?;
        } else if rest.starts_with('/') {
            self.unix_path(&mut ep, rest)?;
        } else if let Some(r) = rest.strip_prefix("redis://") {
            self.authority_and_db(&mut ep, r)?;
        } else if let Some(r) = rest.strip_prefix("tcp://") {
            self.authority_and_db(&mut ep, r)?;
        } else if rest.starts_with("rediss://") || rest.starts_with("tls://") {
            return Err(self.fail("TLS endpoints (rediss://, tls://) are not supported yet"));
        } else if rest.contains("://") {
            return Err(self.fail("unknown scheme; use redis://, tcp:// or unix://"));
        } else {
            self.authority_and_db(&mut ep, rest)?;
        }
        if let Some(q) = query {
            self.query(&mut ep, q)?;
        }
        Ok(ep)
    }

    fn unix_path(&self, ep: &mut Endpoint, path: &str) -> Result<()> {
        if !path.starts_with('/') || path.len() < 2 {
            return Err(
                self.fail("a unix socket needs an absolute path, as in unix:///run/redis.sock")
            );
        }
        ep.addr = Addr::Unix(PathBuf::from(
            percent_decode(path).map_err(|e| self.fail(e))?,
        ));
        Ok(())
    }

    fn authority_and_db(&self, ep: &mut Endpoint, s: &str) -> Result<()> {
        let (authority, db) = match s.split_once('/') {
            Some((a, d)) => (a, Some(d)),
            None => (s, None),
        };
        // The password may itself contain '@' when not percent-encoded: split at the last one.
        let hostport = match authority.rsplit_once('@') {
            Some((userinfo, hp)) => {
                self.userinfo(ep, userinfo)?;
                hp
            }
            None => authority,
        };
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
            None => 6379,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(self.fail("the port is not a number from 1 to 65535")),
            },
        };
        ep.addr = Addr::Tcp {
            host: host.to_string(),
            port,
        };
        match db {
            None | Some("") => {}
            Some(d) => ep.db = self.db_number(d)?,
        }
        Ok(())
    }

    fn userinfo(&self, ep: &mut Endpoint, userinfo: &str) -> Result<()> {
        let (user, pass) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            ep.username = Some(percent_decode(user).map_err(|e| self.fail(e))?);
        }
        match pass {
            Some("") | None if user.is_empty() => {
                return Err(self.fail("'@' is given but no user name or password before it"));
            }
            Some(p) if !p.is_empty() => {
                ep.password = Some(percent_decode(p).map_err(|e| self.fail(e))?);
            }
            _ => {}
        }
        Ok(())
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

    fn query(&self, ep: &mut Endpoint, q: &str) -> Result<()> {
        let mut auth_parts: Vec<String> = Vec::new();
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_decode(v).map_err(|e| self.fail(e))?;
            match k {
                "auth" => ep.password = Some(v).filter(|p| !p.is_empty()),
                "auth[]" | "auth%5B%5D" => auth_parts.push(v),
                "user" | "username" => ep.username = Some(v).filter(|u| !u.is_empty()),
                "database" | "db" => ep.db = self.db_number(&v)?,
                "timeout" | "connect_timeout" => {
                    if let Some(t) = self.timeout(k, &v)? {
                        ep.timeouts.connect = t;
                    }
                }
                "read_timeout" => {
                    if let Some(t) = self.timeout(k, &v)? {
                        ep.timeouts.read = t;
                    }
                }
                "prefix" => ep.prefix = Some(v),
                "persistent" | "weight" | "retry_interval" => {
                    if !v.is_empty() && v.parse::<f64>().is_err() {
                        return Err(self.fail(&format!("'{k}' must be a number")));
                    }
                }
                _ => {
                    return Err(self.fail(
                        "an unknown query parameter (known: auth, user, database, timeout, \
                         connect_timeout, read_timeout, prefix, persistent, weight, retry_interval)",
                    ))
                }
            }
        }
        match auth_parts.len() {
            0 => {}
            1 => ep.password = Some(auth_parts.remove(0)).filter(|p| !p.is_empty()),
            2 => {
                let pass = auth_parts.remove(1);
                ep.username = Some(auth_parts.remove(0)).filter(|u| !u.is_empty());
                ep.password = Some(pass).filter(|p| !p.is_empty());
            }
            _ => return Err(self.fail("auth[] takes a user and a password, no more")),
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

    #[test]
    fn redis_urls() {
        let e = parse("redis://127.0.0.1").unwrap();
        assert_eq!(e.addr, tcp("127.0.0.1", 6379));
        assert_eq!(
            (e.db, e.username.clone(), e.password.clone()),
            (0, None, None)
        );

        let e = parse("redis://app:s%40cret@cache.local:6380/3?read_timeout=0.5").unwrap();
        assert_eq!(e.addr, tcp("cache.local", 6380));
        assert_eq!(e.username.as_deref(), Some("app"));
        assert_eq!(e.password.as_deref(), Some("s@cret"));
        assert_eq!(e.db, 3);
        assert_eq!(e.timeouts.read, Duration::from_millis(500));

        let e = parse("redis://:pw@[::1]:7000/").unwrap();
        assert_eq!(e.addr, tcp("::1", 7000));
        assert_eq!(
            (e.username.clone(), e.password.as_deref()),
            (None, Some("pw"))
        );
        assert_eq!(e.to_string(), "redis://:***@[::1]:7000/0");
    }

    #[test]
    fn phpredis_save_paths() {
        let e = parse("tcp://10.0.0.1:6379?auth=secret&database=2&timeout=2.5&prefix=SESS_&persistent=1&weight=1")
            .unwrap();
        assert_eq!(e.addr, tcp("10.0.0.1", 6379));
        assert_eq!(e.password.as_deref(), Some("secret"));
        assert_eq!(e.db, 2);
        assert_eq!(e.timeouts.connect, Duration::from_millis(2500));
        assert_eq!(e.prefix.as_deref(), Some("SESS_"));

        let e = parse("tcp://h:1?auth[]=alice&auth[]=pw").unwrap();
        assert_eq!(
            (e.username.as_deref(), e.password.as_deref()),
            (Some("alice"), Some("pw"))
        );

        // phpredis's timeout=0 means "forever"; we keep the finite default instead.
        let e = parse("tcp://h:1?timeout=0").unwrap();
        assert_eq!(e.timeouts.connect, Timeouts::default().connect);
    }

    #[test]
    fn unix_sockets() {
        let e = parse("unix:///run/redis/redis.sock?database=1").unwrap();
        assert_eq!(e.addr, Addr::Unix("/run/redis/redis.sock".into()));
        assert_eq!(e.db, 1);
        assert_eq!(
            parse("/tmp/r.sock").unwrap().addr,
            Addr::Unix("/tmp/r.sock".into())
        );
    }

    #[test]
    fn bare_host_port() {
        assert_eq!(
            parse("localhost:6390").unwrap().addr,
            tcp("localhost", 6390)
        );
        assert_eq!(parse("localhost").unwrap().addr, tcp("localhost", 6379));
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
            "ftp://x",
            "rediss://h",
            "unix://relative.sock",
            "redis://h?bogus=1",
            "redis://h?timeout=-1",
            "redis://h?timeout=NaN",
            "redis://h?read_timeout=inf",
            "redis://h?database=x",
            "tcp://a:1,tcp://b:2",
            "redis://[::1",
            "redis://h%zz",
            "redis://u:p%4@h",
            "redis://h o",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err:?}");
        }
    }

    #[test]
    fn password_never_in_messages() {
        let e = parse("redis://bob:hunter2@h:1/0").unwrap();
        assert!(!format!("{e} {e:?}").contains("hunter2"));
        let e = parse("tcp://h:1?auth=hunter2").unwrap();
        assert!(!e.redacted().contains("hunter2"));
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
        let alphabet: Vec<char> = "redis:/unixtcp@[]?&=%:0123456789abcdef.,-_ \u{0}é{}"
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
