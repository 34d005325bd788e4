//! A private redis-server for one test: a free port, no persistence, killed on drop.
#![allow(dead_code)] // each test binary uses a different part of it

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    /// Holds the port of a killed server (see `kill_and_hold_port`).
    port_hold: Option<TcpListener>,
    pub port: u16,
    /// The TLS port, for a server started with `start_tls`.
    pub tls_port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

/// A free loopback port (it may be taken again before it is used: tests retry).
/// Arguments of a standalone node in cluster mode (`RedisServer::start_with`).
pub const CLUSTER_MODE: &[&str] = &[
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
];

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A throwaway PKI (testing/make-pki.sh), shared by the tests of one binary.
pub fn pki() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("redis_lease_pki_{}", std::process::id()));
        let ok = Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/testing/make-pki.sh"))
            .arg(&dir)
            .status()
            .expect("bash runs")
            .success();
        assert!(ok, "testing/make-pki.sh failed (is openssl installed?)");
        dir
    })
    .clone()
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server with a plain port (for the test's own checks) and a TLS port
    /// serving certificate `cert` of the test PKI; `auth_clients`: mutual TLS.
    pub fn start_tls(cert: &str, auth_clients: bool, extra: &[&str]) -> RedisServer {
        let pki = pki();
        let file = |name: &str| pki.join(name).to_string_lossy().into_owned();
        // The TLS port is drawn again on each try: another test's server may take
        // it first, and ours then exits (as for the plain port, `start_with`).
        for _ in 0..5 {
            let tls_port = free_port();
            let mut args: Vec<String> = vec![
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                file(&format!("{cert}.pem")),
                "--tls-key-file".into(),
                file(&format!("{cert}.key")),
                "--tls-ca-cert-file".into(),
                file("ca.pem"),
                "--tls-auth-clients".into(),
                if auth_clients { "yes" } else { "no" }.into(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Some(mut server) = RedisServer::try_start(&args) {
                server.tls_port = tls_port;
                return server;
            }
        }
        panic!("redis-server did not start with TLS (5 port pairs tried)");
    }

    /// Starts a server with extra command-line arguments. A free port may be
    /// taken by another test's server before ours binds it (ours then exits):
    /// the server that answers must be our child (INFO's process_id), else it
    /// starts again on another port.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            if let Some(server) = RedisServer::try_start(extra) {
                return server;
            }
        }
        panic!("redis-server did not start (5 ports tried)");
    }

    /// A Cluster node. Its bus port is drawn again on each try, as `start_tls`'s
    /// TLS port: another test's server may take it first, and ours then exits.
    pub fn start_cluster_node() -> RedisServer {
        for _ in 0..5 {
            let bus = free_port().to_string();
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "2000",
                "--cluster-port",
                &bus,
                "--repl-diskless-sync-delay",
                "0",
            ];
            if let Some(server) = RedisServer::try_start(&args) {
                return server;
            }
        }
        panic!("redis-server did not start as a Cluster node (5 port pairs tried)");
    }

    fn try_start(extra: &[&str]) -> Option<RedisServer> {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("redis_lease_test_{}_{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        let mut server = RedisServer {
            port_hold: None,
            port,
            tls_port: 0,
            child,
            dir,
        };
        let pid = format!("process_id:{}\r", server.child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = server.client().get_connection() {
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                    // Another test's server on this port: ours could not bind it.
                    return info.contains(&pid).then_some(server);
                }
            }
            if server.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on port {}",
                port
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn dsn(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).unwrap()
    }

    /// Sends a signal (e.g. "STOP", "CONT") to the server process.
    pub fn signal(&self, sig: &str) {
        signal_pid(self.child.id(), sig);
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILLs the server and keeps its port bound until the end of the test:
    /// sentinels take whatever answers on a known address for that server, and
    /// would reconfigure another test's redis-server started on the freed port.
    pub fn kill_and_hold_port(&mut self) {
        self.signal("KILL");
        let _ = self.child.wait();
        await_until(Duration::from_secs(5), "the killed server's port", || {
            self.port_hold = TcpListener::bind(("127.0.0.1", self.port)).ok();
            self.port_hold.is_some()
        });
    }

    /// Cuts every client connection (CLIENT KILL TYPE normal), pooled ones included.
    pub fn kill_clients(&self) {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query(&mut self.conn())
            .unwrap();
    }

    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends signal `sig` ("STOP", "CONT", ...) to process `pid`.
/// A lock's lease (prefix "lock:") on `server`, with DSN options `query` ("" or "?...").
pub fn lock_lease(
    server: &RedisServer,
    query: &str,
    name: &str,
) -> redis_lease::core::lease::Lease {
    use redis_lease::core::dsn::{Endpoint, Timeouts};
    use redis_lease::core::lease::{Lease, LeaseKeys};
    let ep = Endpoint::parse(&format!("{}{query}", server.dsn()), Timeouts::default()).unwrap();
    Lease::new(
        std::sync::Arc::new(ep),
        LeaseKeys::for_lock(b"lock:", name.as_bytes()),
    )
}

/// Loads the scripts (or functions) on `server` on a link of their own, by a
/// lock taken and released: a proxy's counts and holds then see only the
/// test's own calls.
pub fn load_scripts(server: &RedisServer) {
    let mut warm = redis_lease::core::lock::Lock::new(
        lock_lease(server, "", "load_scripts"),
        Duration::from_secs(30),
    );
    assert!(warm.acquire(Duration::ZERO).unwrap());
    assert!(warm.release().unwrap());
}

/// Scripts the server has run (FCALL, EVALSHA, EVAL), per INFO commandstats.
pub fn scripts_run(raw: &mut redis::Connection) -> u64 {
    [
        "cmdstat_fcall:calls=",
        "cmdstat_evalsha:calls=",
        "cmdstat_eval:calls=",
    ]
    .iter()
    .map(|p| info_count(raw, p))
    .sum()
}

/// PTTL of `key` on `server`.
pub fn pttl(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.conn())
        .unwrap()
}

/// MIGRATEs what is left of `slot` on `from` to `to`.
pub fn migrate_rest(set: &ClusterSet, from: &RedisServer, to: &RedisServer, slot: i64) {
    loop {
        let keys = set.keys_in_slot(from, slot);
        if keys.is_empty() {
            break;
        }
        migrate(from, to, keys);
    }
}

pub fn signal_pid(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} failed");
}

/// A count from INFO (commandstats, errorstats...): the number after `prefix`
/// on its line, 0 when there is no such line.
pub fn info_count(conn: &mut redis::Connection, prefix: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("everything").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .map_or(0, |n| n.split(',').next().unwrap().trim().parse().unwrap())
}

/// Polls `cond` until it holds, failing the test after `limit`.
pub fn await_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether `key` exists, per a raw connection.
pub fn exists(conn: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(conn).unwrap() == 1
}

/// The server's clock in ms (TIME), as the scripts read it for leases.
pub fn server_ms(conn: &mut redis::Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(conn).unwrap();
    secs * 1000 + micros / 1000
}

/// A redis-server in Sentinel mode watching `service` on `master_port`, with a
/// private config file (sentinels rewrite theirs).
pub struct Sentinel {
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl Sentinel {
    /// As `RedisServer::start_with`: a free port may be taken by another test's
    /// server (a sentinel too) before ours binds it, and ours then exits; the
    /// sentinel that answers must be our child, else it starts on another port.
    pub fn start(service: &str, master_port: u16, extra: &str) -> Sentinel {
        for _ in 0..5 {
            if let Some(sentinel) = Sentinel::try_start(service, master_port, extra) {
                return sentinel;
            }
        }
        panic!("redis-server --sentinel did not start (5 ports tried)");
    }

    fn try_start(service: &str, master_port: u16, extra: &str) -> Option<Sentinel> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "redis_lease_sentinel_{}_{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile {}\n\
                 sentinel monitor {service} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {service} {SETUP_DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {service} 3000\n\
                 sentinel parallel-syncs {service} 1\n{extra}",
                dir.display(),
                dir.join("sentinel.log").display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server --sentinel");
        let mut sentinel = Sentinel { port, child, dir };
        let pid = format!("process_id:{}\r", sentinel.child.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(mut c) = sentinel.conn() {
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                    return info.contains(&pid).then_some(sentinel);
                }
            }
            if sentinel.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinel did not answer on port {port}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn conn(&self) -> Option<redis::Connection> {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .ok()?
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        redis::cmd("PING").query::<String>(&mut c).ok()?;
        Some(c)
    }

    /// SENTINEL <args...> on this sentinel.
    pub fn ask<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let mut c = self.conn().ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Io, "sentinel unreachable"))
        })?;
        let mut cmd = redis::cmd("SENTINEL");
        for a in args {
            cmd.arg(*a);
        }
        cmd.query(&mut c)
    }

    pub fn signal(&self, sig: &str) {
        signal_pid(self.child.id(), sig);
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// While sentinels meet: a loaded machine (parallel tests) can stall a server
/// for a second, and a failover during the set-up leaves the set not as the
/// test expects. Lowered to 1 s once they have met (`SentinelSet::start`).
const SETUP_DOWN_AFTER_MS: u64 = 5000;

/// A master, a replica and three sentinels that know each other: ready for a
/// failover.
pub struct SentinelSet {
    pub master: RedisServer,
    pub replica: RedisServer,
    pub sentinels: Vec<Sentinel>,
}

impl SentinelSet {
    pub fn start(service: &str) -> SentinelSet {
        // No 5 s pause before the replica's first sync (repl-diskless-sync-delay).
        let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let mut raw = master.conn();
        await_until(Duration::from_secs(20), "the replica to be in sync", || {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut raw)
                .unwrap();
            info.contains("state=online")
        });
        let sentinels: Vec<Sentinel> = (0..3)
            .map(|_| Sentinel::start(service, master.port, ""))
            .collect();
        type Instances = Vec<std::collections::HashMap<String, String>>;
        let met = |s: &Sentinel| {
            let replicas: Instances = s.ask(&["replicas", service]).unwrap_or_default();
            let others: Instances = s.ask(&["sentinels", service]).unwrap_or_default();
            replicas
                .iter()
                .any(|r| r.get("flags").is_some_and(|f| f == "slave"))
                && others.len() == 2
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !sentinels.iter().all(met) {
            if Instant::now() > deadline {
                // What each one saw, for the next run to go on from.
                let seen: Vec<String> = sentinels
                    .iter()
                    .map(|s| {
                        let master: redis::RedisResult<Vec<String>> = s.ask(&["master", service]);
                        let replicas: Instances =
                            s.ask(&["replicas", service]).unwrap_or_default();
                        let flags: Vec<_> = replicas.iter().filter_map(|r| r.get("flags")).collect();
                        let log = std::fs::read_to_string(s.dir.join("sentinel.log"))
                            .unwrap_or_default();
                        let tail: Vec<&str> = log.lines().rev().take(12).collect();
                        format!(
                            "sentinel {}: master {master:?}; replicas' flags {flags:?}; log, last first: {tail:?}",
                            s.port
                        )
                    })
                    .collect();
                panic!(
                    "timed out waiting for sentinels to know the replica and each other:\n{}",
                    seen.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for s in &sentinels {
            let ok: redis::RedisResult<String> =
                s.ask(&["set", service, "down-after-milliseconds", "1000"]);
            ok.expect("SENTINEL SET down-after-milliseconds");
        }
        SentinelSet {
            master,
            replica,
            sentinels,
        }
    }

    pub fn dsn(&self, service: &str, query: &str) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis-sentinel://{}/{service}{query}", hosts.join(","))
    }

    /// SENTINEL FAILOVER, asked again while a sentinel refuses it for a passing
    /// reason (a failover still in progress, a replica not yet seen as good).
    pub fn failover(&self, service: &str) {
        let mut last = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.sentinels[0].ask::<String>(&["failover", service]) {
                Ok(_) => return,
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("SENTINEL FAILOVER {service} refused: {last}");
    }

    /// The port of the master the sentinels name now.
    pub fn master_port(&self, service: &str) -> Option<u16> {
        let (_, port): (String, u16) = self.sentinels[0]
            .ask(&["get-master-addr-by-name", service])
            .ok()?;
        Some(port)
    }
}

/// A Redis Cluster of `masters` masters with `replicas` replicas each, on
/// loopback (cluster bus ports chosen freely: a node's default bus port, its
/// port + 10000, may be out of range or taken).
pub struct ClusterSet {
    pub nodes: Vec<RedisServer>,
}

impl ClusterSet {
    pub fn start(masters: usize, replicas: usize) -> ClusterSet {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| RedisServer::start_cluster_node())
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let set = ClusterSet { nodes };
        set.await_ok();
        set
    }

    /// Until every live node says cluster_state:ok and agrees on its masters.
    pub fn await_ok(&self) {
        await_until(Duration::from_secs(30), "the cluster to be ok", || {
            self.nodes
                .iter()
                .filter(|n| n.port_hold.is_none())
                .all(|n| {
                    n.client()
                        .get_connection_with_timeout(Duration::from_secs(1))
                        .ok()
                        .and_then(|mut c| {
                            redis::cmd("CLUSTER")
                                .arg("INFO")
                                .query::<String>(&mut c)
                                .ok()
                        })
                        .is_some_and(|i| i.contains("cluster_state:ok"))
                })
        });
    }

    pub fn dsn(&self, query: &str) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .take(3)
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis-cluster://{}{query}", seeds.join(","))
    }

    /// The node that serves `key` now (a master), by asking any node.
    pub fn owner_of(&self, key: &str) -> &RedisServer {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.any().conn())
            .unwrap();
        let port = self.master_port_of_slot(slot);
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a node of ours")
    }

    pub fn master_port_of_slot(&self, slot: i64) -> u16 {
        let shards: Vec<redis::Value> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut self.any().conn())
            .unwrap();
        for shard in shards {
            let redis::Value::Array(parts) = shard else {
                continue;
            };
            let num = |v: &redis::Value| match v {
                redis::Value::Int(n) => *n,
                _ => -1,
            };
            if num(&parts[0]) <= slot && slot <= num(&parts[1]) {
                if let redis::Value::Array(master) = &parts[2] {
                    return num(&master[1]) as u16;
                }
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// A live node.
    pub fn any(&self) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port_hold.is_none())
            .expect("a live node")
    }

    pub fn node_id(&self, node: &RedisServer) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut node.conn())
            .unwrap()
    }

    /// Moves `slot` (and its keys) from its master to `to`, as redis-cli
    /// --cluster reshard does: IMPORTING/MIGRATING, MIGRATE every key, then NODE.
    pub fn move_slot(&self, slot: i64, to: &RedisServer) {
        let from = self.begin_move(slot, to);
        migrate_rest(self, from, to, slot);
        self.finish_move(slot, to);
    }

    /// Marks `slot` as leaving its master for `to` (MIGRATING/IMPORTING); its
    /// master, which still holds the keys, is returned.
    pub fn begin_move(&self, slot: i64, to: &RedisServer) -> &RedisServer {
        let from_port = self.master_port_of_slot(slot);
        let from = self.nodes.iter().find(|n| n.port == from_port).unwrap();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let setslot = |node: &RedisServer, state: &str, id: &str| {
            let _: () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query(&mut node.conn())
                .unwrap();
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        from
    }

    pub fn keys_in_slot(&self, node: &RedisServer, slot: i64) -> Vec<Vec<u8>> {
        redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(100)
            .query(&mut node.conn())
            .unwrap()
    }

    /// Gives `slot` to `to` on every live node (the last step of a move).
    pub fn finish_move(&self, slot: i64, to: &RedisServer) {
        let to_id = self.node_id(to);
        for n in self.nodes.iter().filter(|n| n.port_hold.is_none()) {
            let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("NODE")
                .arg(&to_id)
                .query(&mut n.conn());
        }
    }
}

/// Moves `keys` from node `from` to node `to` (MIGRATE).
pub fn migrate(from: &RedisServer, to: &RedisServer, keys: Vec<Vec<u8>>) {
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(to.port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(keys)
        .query(&mut from.conn())
        .unwrap();
}

/// A stand-in for a Redis server (or a sentinel) on a free port: each command
/// (an array of bulk strings, as text) gets the RESP bytes `reply` makes of it.
/// Every connection gets a thread of its own; the server lives as long as the
/// test binary.
pub fn stand_in<F>(reply: F) -> u16
where
    F: Fn(&[String]) -> Vec<u8> + Send + Sync + 'static,
{
    use std::io::{BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reply = std::sync::Arc::new(reply);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                let mut parser = redis::Parser::new();
                while let Ok(redis::Value::Array(args)) = parser.parse_value(&mut reader) {
                    let args: Vec<String> = args
                        .iter()
                        .map(|a| match a {
                            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into(),
                            _ => String::new(),
                        })
                        .collect();
                    if args.is_empty() || writer.write_all(&reply(&args)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A TCP proxy to a local port whose scripts and functions (FCALL, EVALSHA,
/// EVAL), while held, wait (and are counted) until let through; everything
/// else goes through (a BLPOP of a waiter whose nap ran out just before the
/// hold, the ROLE of a new link). It can also cut a link after a command ran
/// (`cut_reply`).
pub struct HoldingProxy {
    pub port: u16,
    gate: std::sync::Arc<(std::sync::Mutex<Gate>, std::sync::Condvar)>,
}

#[derive(Debug, Default)]
pub struct Gate {
    on: bool,
    /// How many scripts go through before the hold takes effect.
    pass: usize,
    /// Bytes held so far.
    held: usize,
    /// The commands held so far.
    bytes: Vec<u8>,
    /// The next command that contains this runs, and its link is cut before
    /// its reply reaches the client.
    cut: Option<Vec<u8>>,
    /// What a hold holds: commands that contain this (`hold_command`), else
    /// scripts.
    only: Option<Vec<u8>>,
    /// Hold the first such command only, and break its link to the client
    /// (`hold_first_and_break`).
    first_and_break: bool,
}

impl HoldingProxy {
    pub fn start(target: u16) -> HoldingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let gate = std::sync::Arc::new((
            std::sync::Mutex::new(Gate::default()),
            std::sync::Condvar::new(),
        ));
        let shared = gate.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (mut from_server, mut to_client) =
                    (server.try_clone().unwrap(), client.try_clone().unwrap());
                // Set while the reply on its way is to be dropped, the link cut.
                let swallow = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let swallowing = swallow.clone();
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    use std::sync::atomic::Ordering;
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = from_server.read(&mut buf) {
                        if n == 0 || swallowing.load(Ordering::SeqCst) {
                            break;
                        }
                        if to_client.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_client.shutdown(std::net::Shutdown::Both);
                });
                let gate = shared.clone();
                let (mut from_client, mut to_server) = (client, server);
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = from_client.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let (lock, cv) = &*gate;
                        let mut state = lock.lock().unwrap();
                        let script = match &state.only {
                            Some(only) => buf[..n].windows(only.len()).any(|w| w == only),
                            None => [&b"FCALL"[..], b"EVALSHA", b"EVAL"]
                                .iter()
                                .any(|name| buf[..n].windows(name.len()).any(|w| w == *name)),
                        };
                        let cut = state
                            .cut
                            .as_ref()
                            .is_some_and(|c| buf[..n].windows(c.len()).any(|w| w == c));
                        if cut {
                            state.cut = None;
                            swallow.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                        let first = !state.first_and_break || state.held == 0;
                        if state.on && script && state.pass > 0 {
                            state.pass -= 1;
                        } else if state.on && script && first {
                            state.held += n;
                            state.bytes.extend_from_slice(&buf[..n]);
                            if state.first_and_break {
                                let _ = from_client.shutdown(std::net::Shutdown::Both);
                            }
                            cv.notify_all();
                            while state.on {
                                state = cv.wait(state).unwrap();
                            }
                        }
                        drop(state);
                        if to_server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        HoldingProxy { port, gate }
    }

    pub fn hold(&self, on: bool) {
        self.hold_after(on, 0);
    }

    /// Holds (or lets through) scripts, after `pass` more have gone through.
    /// What is held already stays held while `on`.
    pub fn hold_after(&self, on: bool, pass: usize) {
        self.set_gate(on, pass, None, false);
    }

    /// Holds every command that contains `needle` (until `hold(false)`).
    pub fn hold_command(&self, needle: &[u8]) {
        self.set_gate(true, 0, Some(needle.to_vec()), false);
    }

    /// Holds every command that contains `needle` after `pass` more of them
    /// have gone through (until `hold(false)`).
    pub fn hold_command_after(&self, needle: &[u8], pass: usize) {
        self.set_gate(true, pass, Some(needle.to_vec()), false);
    }

    /// Holds the first command that contains `needle`, to run when `hold(false)`
    /// lets it through, and breaks its link at once: its client sees the link
    /// broken after sending (and asks again on a fresh one, which goes through).
    pub fn hold_first_and_break(&self, needle: &[u8]) {
        self.set_gate(true, 0, Some(needle.to_vec()), true);
    }

    /// One step: what is held (`only`: else scripts), and a fresh count.
    fn set_gate(&self, on: bool, pass: usize, only: Option<Vec<u8>>, first_and_break: bool) {
        let (lock, cv) = &*self.gate;
        let mut gate = lock.lock().unwrap();
        gate.on = on;
        gate.pass = pass;
        gate.only = only;
        gate.first_and_break = first_and_break;
        gate.cut = None;
        gate.held = 0;
        gate.bytes.clear();
        cv.notify_all();
    }

    /// Lets the next command that contains `needle` run, and cuts its link
    /// before its reply reaches the client (a reply lost after the write).
    pub fn cut_reply(&self, needle: &[u8]) {
        let (lock, _) = &*self.gate;
        lock.lock().unwrap().cut = Some(needle.to_vec());
    }

    /// Whether the commands held (since `hold_after`) contain `needle`.
    pub fn held_contains(&self, needle: &[u8]) -> bool {
        let (lock, _) = &*self.gate;
        let gate = lock.lock().unwrap();
        gate.bytes.windows(needle.len()).any(|w| w == needle)
    }

    /// Holds scripts from a moment more clients than `before` are seen blocked
    /// (a waiter in BLPOP on `raw`'s server): a waiter's nap (at most 1 s) may
    /// end between the look and the hold, so it looks again after.
    pub fn hold_in_blpop(&self, raw: &mut redis::Connection, before: u64) {
        let blocked = |raw: &mut redis::Connection| info_count(raw, "blocked_clients:");
        loop {
            await_until(
                Duration::from_secs(10),
                "a waiter to wait for its wake-up",
                || blocked(raw) > before,
            );
            self.hold(true);
            if blocked(raw) > before {
                return;
            }
            self.hold(false);
        }
    }

    /// Blocks until some client bytes are held (since `hold_after`).
    pub fn await_held(&self, limit: Duration) {
        let (lock, cv) = &*self.gate;
        let (state, timeout) = cv
            .wait_timeout_while(lock.lock().unwrap(), limit, |s| s.held == 0)
            .unwrap();
        assert!(!timeout.timed_out(), "nothing held: {:?}", *state);
    }
}

/// Blocks until `master`'s replica acknowledges a write: online is not enough
/// (right after its first sync, or a SIGCONT, a replica may not acknowledge for
/// a moment).
pub fn await_acknowledged(master: &RedisServer) {
    let mut raw = master.conn();
    await_until(
        Duration::from_secs(10),
        "the replica to acknowledge writes",
        || {
            let _: () = redis::cmd("SET")
                .arg("probe")
                .arg(1)
                .query(&mut raw)
                .unwrap();
            redis::cmd("WAIT")
                .arg(1)
                .arg(200)
                .query::<i64>(&mut raw)
                .unwrap()
                >= 1
        },
    );
}

/// A master (A) and its replica (B), in sync: a WAIT on A is answered by B.
pub fn master_and_replica() -> (RedisServer, RedisServer) {
    let a = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let b = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &a.port.to_string(),
        "--repl-diskless-sync-delay",
        "0",
    ]);
    await_acknowledged(&a);
    (a, b)
}
