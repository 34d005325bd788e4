//! Opening a link to Redis wherever the DSN says it is: one node (TCP, TLS or a
//! unix socket), the master a set of sentinels names, or a Redis Cluster. The
//! lease and session code never branch on this: they run their commands and
//! scripts on a `Link`, and a broken link is simply opened again (for Sentinel,
//! that asks the sentinels again).
//!
//! Every step is bounded by the endpoint's timeouts: connecting (TCP and the TLS
//! handshake) by the connect timeout, every question by the read timeout.

use std::path::Path;
use std::sync::Once;
use std::time::{Duration, Instant};

use redis::{
    ClientTlsConfig, Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind,
    IntoConnectionInfo, RedisConnectionInfo, RedisResult, Role, TlsCertificates, Value,
};

use crate::core::cluster::{Cluster, Request};
use crate::core::dsn::{Addr, Credentials, Endpoint, Tls, Topology};
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter};
use crate::core::scripts::{Functions, Scripted};
use crate::core::sentinel;

/// A connection to Redis: to one node, or to a whole Cluster (each command
/// routed to the node that serves its key: see `cluster`).
pub(crate) struct Link {
    conn: Inner,
    /// For a Sentinel master: which node, and the service's generation then.
    pub(crate) master: Option<Master>,
    pub(crate) functions: Functions,
}

enum Inner {
    Node(redis::Connection),
    Cluster(Box<Cluster>),
}

/// The master a link to a Sentinel service goes to (see `sentinel`).
#[derive(Clone, Debug)]
pub(crate) struct Master {
    pub(crate) addr: Addr,
    pub(crate) generation: u64,
    /// When the sentinels last named it (or a subscription vouched for it).
    pub(crate) verified: Instant,
}

impl Link {
    fn node(conn: redis::Connection) -> Link {
        Link {
            conn: Inner::Node(conn),
            master: None,
            functions: Functions::default(),
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn, Inner::Cluster(_))
    }

    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        match &mut self.conn {
            Inner::Node(c) => c.set_read_timeout(Some(timeout)),
            Inner::Cluster(c) => c.set_read_timeout(timeout),
        }
    }

    /// WAIT for `replicas` replicas to acknowledge this link's writes, at most
    /// `timeout`: how many did. On a Cluster, on the connection to the master
    /// serving `key` that wrote it.
    pub(crate) fn wait(
        &mut self,
        key: &[u8],
        replicas: u32,
        timeout: Duration,
    ) -> RedisResult<i64> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout.as_millis().max(1) as u64);
        match &mut self.conn {
            Inner::Node(c) => cmd.query(c),
            Inner::Cluster(c) => {
                let v = c.wait(key, &cmd)?.extract_error()?;
                redis::FromRedisValue::from_redis_value(v).map_err(Into::into)
            }
        }
    }
}

impl Link {
    /// WAIT after writes to each of `keys` on this link: one WAIT per slot written
    /// (one in all on a single node), all within `timeout`. The acknowledgements
    /// each key's write got, in `keys`' order; an error reply (a master demoted
    /// while we waited answers -UNBLOCKED) counts as none, a broken link is an error.
    pub(crate) fn wait_each(
        &mut self,
        keys: &[&[u8]],
        replicas: u32,
        timeout: Duration,
    ) -> RedisResult<Vec<i64>> {
        let deadline = Instant::now() + timeout;
        let cluster = self.is_cluster();
        let shard = |key: &[u8]| cluster.then(|| crate::core::cluster::slot(key));
        let mut asked: Vec<(Option<u16>, i64)> = Vec::new();
        let mut acks = Vec::with_capacity(keys.len());
        let mut result = Ok(());
        for key in keys {
            let slot = shard(key);
            let n = match asked.iter().find(|(s, _)| *s == slot) {
                Some(&(_, n)) => n,
                None => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let reply = if left.is_zero() {
                        Ok(0)
                    } else {
                        self.wait(key, replicas, left)
                    };
                    let n = match reply {
                        Ok(n) => n,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) =>
                        {
                            0
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    };
                    asked.push((slot, n));
                    n
                }
            };
            acks.push(n);
        }
        result.map(|_| acks)
    }

    /// Sends `cmds` in one round trip (one per node on a Cluster: see
    /// `Cluster::pipeline`). An error reply stays in its command's place; a
    /// failed round trip fails them all.
    pub(crate) fn pipeline(&mut self, cmds: Vec<Cmd>) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            Inner::Node(c) => {
                let mut p = redis::pipe();
                p.ignore_errors();
                for cmd in cmds {
                    p.add_command(cmd);
                }
                p.query(c)
            }
            Inner::Cluster(c) => c.pipeline(&cmds),
        }
    }
}

impl Link {
    /// A caller's call begins on this link (see `sent_nothing`).
    pub(crate) fn begin(&mut self) {
        if let Inner::Cluster(c) = &mut self.conn {
            c.begin();
        }
    }

    /// Whether nothing was written since `begin`, for sure: a Cluster node the
    /// call needed could not be reached before any command went out. (One
    /// node's link is connected before the call, so its failures come later.)
    pub(crate) fn sent_nothing(&self) -> bool {
        matches!(&self.conn, Inner::Cluster(c) if !c.wrote())
    }

    /// Asks a Cluster for its slot map now (the watchdog's stand-in for a
    /// failover announcement: a change counts in `cluster::generation`).
    /// Whether a node answered; a link to one node has nothing to ask.
    pub(crate) fn learn_slots(&mut self) -> bool {
        match &mut self.conn {
            Inner::Cluster(c) => c.learn_slots(),
            Inner::Node(_) => true,
        }
    }

    /// Where a SCAN must run to see every key: this node (`None`), or each master
    /// of a Cluster, as the Cluster names them now.
    pub(crate) fn scan_targets(&mut self) -> RedisResult<Vec<Option<(String, u16)>>> {
        let Inner::Cluster(c) = &mut self.conn else {
            return Ok(vec![None]);
        };
        let masters: Vec<Option<(String, u16)>> = c
            .master_addrs()
            .into_iter()
            .filter_map(|a| match a {
                Addr::Tcp { host, port } => Some(Some((host, port))),
                Addr::Unix(_) => None,
            })
            .collect();
        if masters.is_empty() {
            return Err(redis::RedisError::from((
                ErrorKind::Io,
                "No master of the Cluster answered",
            )));
        }
        Ok(masters)
    }

    /// One SCAN step on `node` (see `scan_targets`): the next cursor and the keys.
    pub(crate) fn scan(
        &mut self,
        node: Option<&(String, u16)>,
        cursor: u64,
        pattern: &[u8],
        count: usize,
    ) -> RedisResult<(u64, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let v = match (&mut self.conn, node) {
            (Inner::Cluster(c), Some((host, port))) => {
                let addr = Addr::Tcp {
                    host: host.clone(),
                    port: *port,
                };
                c.run_at(addr, &cmd)?.extract_error()?
            }
            (Inner::Cluster(_), None) => {
                return Err(redis::RedisError::from((
                    ErrorKind::Client,
                    "a Cluster is scanned node by node",
                )))
            }
            (Inner::Node(c), _) => cmd.query(c)?,
        };
        redis::FromRedisValue::from_redis_value(v).map_err(Into::into)
    }
}

impl Scripted for Link {
    fn functions(&mut self) -> &mut Functions {
        &mut self.functions
    }
}

impl ConnectionLike for Link {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match &mut self.conn {
            Inner::Node(c) => c.req_packed_command(cmd),
            Inner::Cluster(c) => c.run(Request::Packed(cmd)),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            Inner::Node(c) => c.req_packed_commands(cmd, offset, count),
            Inner::Cluster(_) => Err(packed_on_cluster()),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.conn {
            Inner::Node(c) => c.req_command(cmd),
            Inner::Cluster(c) => c.run(Request::Built(cmd)),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.conn {
            Inner::Node(c) => c.get_db(),
            Inner::Cluster(_) => 0,
        }
    }

    fn check_connection(&mut self) -> bool {
        match &mut self.conn {
            Inner::Node(c) => c.check_connection(),
            Inner::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match &self.conn {
            Inner::Node(c) => c.is_open(),
            Inner::Cluster(c) => c.is_open(),
        }
    }
}

/// A Cluster link takes pipelines through `Link::pipeline`, which routes each
/// command by its keys.
fn packed_on_cluster() -> redis::RedisError {
    redis::RedisError::from((
        ErrorKind::Client,
        "A Cluster link routes commands, not packed bytes",
    ))
}

/// Installs rustls's crypto provider (ring) for the process, once. Called at
/// startup and before any TLS connection (for the core's own tests).
pub fn init_tls() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: another part of the process installed one first; it serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Opens a link to `ep`: connected, authenticated and, for TLS, with its
/// handshake done.
pub(crate) fn open(ep: &Endpoint) -> Result<Link> {
    match &ep.topology {
        Topology::Node(addr) => node(ep, addr, &ep.auth, ep.db).map(Link::node),
        Topology::Sentinel { sentinels, service } => master(ep, sentinels, service),
        Topology::Cluster { seeds } => {
            init_tls();
            let cluster = Cluster::open(ep, seeds, cluster_node).map_err(|why| {
                Error::Connection(format!("Cannot connect to {}: {why}", ep.location()))
            })?;
            Ok(Link {
                conn: Inner::Cluster(Box::new(cluster)),
                master: None,
                functions: Functions::default(),
            })
        }
    }
}

/// Connects to a node of a Cluster (its databases are all 0).
fn cluster_node(ep: &Endpoint, addr: &Addr) -> Result<redis::Connection> {
    node(ep, addr, &ep.auth, 0)
}

/// Connects to one node, with `auth` and `db`.
fn node(ep: &Endpoint, addr: &Addr, auth: &Credentials, db: i64) -> Result<redis::Connection> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Error::Connection(format!("{what} Redis at {addr}{}: {e}", tls_label(ep)))
    };
    let info = connection_info(ep, addr, auth, db).map_err(|e| fail("Cannot use", &e))?;
    let client = client(info, ep.tls.as_ref())?;
    let started = Instant::now();
    let mut conn = client
        .get_connection_with_timeout(ep.timeouts.connect)
        .map_err(|e| fail("Cannot connect to", &describe(&e, ep)))?;
    if ep.tls.is_some() {
        // The handshake happens on the first command: do it now, within what is
        // left of the connect timeout, so that a certificate problem shows as
        // such, at connect time.
        let left = ep
            .timeouts
            .connect
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1));
        conn.set_read_timeout(Some(left))
            .and_then(|_| conn.set_write_timeout(Some(left)))
            .and_then(|_| redis::cmd("PING").query::<String>(&mut conn))
            .map_err(|e| fail("Cannot connect (TLS) to", &describe(&e, ep)))?;
    }
    conn.set_read_timeout(Some(ep.timeouts.read))
        .and_then(|_| conn.set_write_timeout(Some(ep.timeouts.read)))
        .map_err(|e| fail("Cannot configure the connection to", &e))?;
    metrics::incr(Counter::Connects);
    Ok(conn)
}

fn tls_label(ep: &Endpoint) -> &'static str {
    if ep.tls.is_some() {
        " (TLS)"
    } else {
        ""
    }
}

fn connection_info(
    ep: &Endpoint,
    addr: &Addr,
    auth: &Credentials,
    db: i64,
) -> RedisResult<ConnectionInfo> {
    let addr = match (addr, &ep.tls) {
        (Addr::Tcp { host, port }, None) => ConnectionAddr::Tcp(host.clone(), *port),
        (Addr::Tcp { host, port }, Some(tls)) => ConnectionAddr::TcpTls {
            host: host.clone(),
            port: *port,
            insecure: !tls.verify_peer,
            tls_params: None,
        },
        (Addr::Unix(path), _) => ConnectionAddr::Unix(path.clone()),
    };
    // No CLIENT SETINFO: two more replies to wait for on every connect.
    let mut redis = RedisConnectionInfo::default()
        .set_db(db)
        .set_skip_set_lib_name();
    if let Some(u) = &auth.username {
        redis = redis.set_username(u);
    }
    if let Some(p) = &auth.password {
        redis = redis.set_password(p);
    }
    Ok(addr.into_connection_info()?.set_redis_settings(redis))
}

/// A client for `info`, with the DSN's CA and client certificate when it names
/// them (read now: once per connection, i.e. once per worker).
fn client(info: ConnectionInfo, tls: Option<&Tls>) -> Result<redis::Client> {
    init_tls();
    let bad =
        |e: &dyn std::fmt::Display| Error::Connection(format!("Cannot use the TLS settings: {e}"));
    let Some(tls) = tls else {
        return redis::Client::open(info).map_err(|e| bad(&e));
    };
    let client = match certificates(tls)? {
        Some(certs) => redis::Client::build_with_tls(info, certs).map_err(|e| bad(&e))?,
        None => redis::Client::open(info).map_err(|e| bad(&e))?,
    };
    if tls.verify_peer && !tls.verify_peer_name {
        let info = client.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        return redis::Client::open(info.set_addr(addr)).map_err(|e| bad(&e));
    }
    Ok(client)
}

/// The PEM files a TLS setting names, read, or the system's trust store when it
/// names no CA and verifies the server. Messages name the files (paths are
/// configuration, not secrets), never their contents.
fn certificates(tls: &Tls) -> Result<Option<TlsCertificates>> {
    let read = |path: &Path, what: &str| {
        std::fs::read(path).map_err(|e| {
            Error::Connection(format!(
                "Cannot read the TLS {what} {}: {e}",
                path.display()
            ))
        })
    };
    let root_cert = match &tls.cafile {
        Some(p) => Some(read(p, "CA file (cafile)")?),
        None if tls.verify_peer => Some(system_roots()?.to_vec()),
        None => None,
    };
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: read(cert, "client certificate (cert)")?,
            client_key: read(key, "client key (key)")?,
        }),
        _ => None,
    };
    if root_cert.is_none() && client_tls.is_none() {
        return Ok(None);
    }
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// The system's trust store (what redis-rs, and OpenSSL for phpredis, trust when
/// no CA is named), as PEM. Read once per process: redis-rs would read every
/// file of it again on each connect. Certificates that cannot be read are left
/// out, as long as some can.
fn system_roots() -> Result<&'static [u8]> {
    static ROOTS: std::sync::OnceLock<std::result::Result<Vec<u8>, String>> =
        std::sync::OnceLock::new();
    let roots = ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            return Err(match found.errors.first() {
                Some(e) => format!("Cannot read the system's TLS trust store: {e}"),
                None => "The system's TLS trust store is empty: name a CA with cafile".into(),
            });
        }
        let mut pem = String::new();
        for cert in &found.certs {
            let block =
                pem_rfc7468::encode_string("CERTIFICATE", pem_rfc7468::LineEnding::LF, cert)
                    .map_err(|e| format!("Cannot use the system's TLS trust store: {e}"))?;
            pem.push_str(&block);
        }
        Ok(pem.into_bytes())
    });
    roots
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| Error::Connection(e.clone()))
}

/// A redis-rs error as a message: what went wrong, with the timeouts when it was
/// a timeout. redis-rs's messages never contain the password.
pub(crate) fn describe(e: &redis::RedisError, ep: &Endpoint) -> String {
    if e.is_timeout() {
        format!(
            "timed out (connect_timeout {:.3}s, read_timeout {:.3}s)",
            ep.timeouts.connect.as_secs_f64(),
            ep.timeouts.read.as_secs_f64()
        )
    } else {
        e.to_string()
    }
}

/// The master of `service`, per the first sentinel that names one that then says
/// it is a master (ROLE). redis-rs's own sync Sentinel client is not used here: it
/// connects and queries without any timeout, so one stopped sentinel would hang
/// the worker for good. The steps are those of the Sentinel client spec.
fn master(ep: &Endpoint, sentinels: &[Addr], service: &str) -> Result<Link> {
    let mut why: Vec<String> = Vec::new();
    for sentinel in sentinels {
        let (named, epoch) = match ask_sentinel(ep, sentinel, service) {
            Ok(found) => found,
            Err(e) => {
                why.push(e);
                continue;
            }
        };
        // A sentinel that has not heard of the last failover yet names the old
        // master: the one this process knows of is used instead.
        let (addr, generation) = sentinel::found(ep, &named, epoch);
        let confirmed = node(ep, &addr, &ep.auth, ep.db).and_then(|mut conn| {
            match redis::cmd("ROLE").query::<Role>(&mut conn) {
                Ok(Role::Primary { .. }) => Ok(conn),
                Ok(_) => Err(Error::Connection(format!("{addr} is not a master (yet)"))),
                Err(e) => Err(Error::Connection(format!("{addr}: {}", describe(&e, ep)))),
            }
        });
        match confirmed {
            Ok(conn) => {
                return Ok(Link {
                    conn: Inner::Node(conn),
                    master: Some(Master {
                        addr,
                        generation,
                        verified: Instant::now(),
                    }),
                    functions: Functions::default(),
                });
            }
            Err(e) => why.push(format!("{sentinel} named {e}")),
        }
    }
    Err(Error::Connection(format!(
        "Cannot find the master of '{service}' through its sentinels ({})",
        why.join("; ")
    )))
}

/// The master `sentinel` names for `service`, with its config epoch (SENTINEL
/// MASTER; a sentinel that refuses that command is asked for the address
/// alone). The error says why not, for a message.
pub(crate) fn ask_sentinel(
    ep: &Endpoint,
    sentinel: &Addr,
    service: &str,
) -> std::result::Result<(Addr, Option<u64>), String> {
    let mut conn =
        node(ep, sentinel, &ep.sentinel_auth, 0).map_err(|e| format!("{sentinel}: {e}"))?;
    let fields: RedisResult<Vec<String>> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(service)
        .query(&mut conn);
    match fields {
        Ok(fields) => {
            let get = |name: &str| {
                fields
                    .chunks(2)
                    .find(|kv| kv.len() == 2 && kv[0] == name)
                    .map(|kv| kv[1].clone())
            };
            // The leader of a failover under way names the old master with the
            // new epoch until it is done: ask another sentinel.
            if get("flags").is_some_and(|f| f.contains("failover_in_progress")) {
                return Err(format!(
                    "{sentinel}: a failover of '{service}' is under way"
                ));
            }
            let port = get("port").and_then(|p| p.parse().ok());
            let epoch = get("config-epoch").and_then(|e| e.parse().ok());
            match (get("ip"), port) {
                (Some(host), Some(port)) => Ok((Addr::Tcp { host, port }, epoch)),
                _ => Err(format!("{sentinel}: gave no address for '{service}'")),
            }
        }
        Err(e) if e.kind() == ErrorKind::Io || e.is_timeout() => {
            Err(format!("{sentinel}: {}", describe(&e, ep)))
        }
        // Unknown master name ("No such master with that name"), or a sentinel
        // that does not allow SENTINEL MASTER: ask for the address alone.
        Err(_) => match redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(service)
            .query::<Option<(String, u16)>>(&mut conn)
        {
            Ok(Some((host, port))) => Ok((Addr::Tcp { host, port }, None)),
            Ok(None) => Err(format!("{sentinel}: does not know '{service}'")),
            Err(e) => Err(format!("{sentinel}: {}", describe(&e, ep))),
        },
    }
}

/// How many failovers of `ep` this process has learned of, plus one: a
/// Sentinel service's generation, a Cluster's (see `cluster`); 0 for one node,
/// which has none.
pub fn generation(ep: &Endpoint) -> u64 {
    match ep.topology {
        Topology::Sentinel { .. } => sentinel::generation(ep),
        Topology::Cluster { .. } => crate::core::cluster::generation(ep),
        _ => 0,
    }
}

/// The master of `ep`'s service per the first sentinel that answers (for
/// checking a link made earlier), as `sentinel::found` settles it; `None` when
/// no sentinel answers.
pub(crate) fn ask_master(ep: &Endpoint) -> Option<(Addr, u64)> {
    let Topology::Sentinel { sentinels, service } = &ep.topology else {
        return None;
    };
    sentinels.iter().find_map(|s| {
        let (addr, epoch) = ask_sentinel(ep, s, service).ok()?;
        Some(sentinel::found(ep, &addr, epoch))
    })
}
