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
        let tls_port = free_port();
        let file = |name: &str| pki.join(name).to_string_lossy().into_owned();
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
        let mut server = RedisServer::start_with(&args);
        server.tls_port = tls_port;
        server
    }

    /// Starts a server with extra command-line arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
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
        let server = RedisServer {
            port_hold: None,
            port,
            tls_port: 0,
            child,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = server.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return server;
                }
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
pub fn signal_pid(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} failed");
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

/// A redis-server in Sentinel mode watching `service` on `master_port`, with a
/// private config file (sentinels rewrite theirs).
pub struct Sentinel {
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl Sentinel {
    pub fn start(service: &str, master_port: u16, extra: &str) -> Sentinel {
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
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {service} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {service} 1000\n\
                 sentinel failover-timeout {service} 3000\n\
                 sentinel parallel-syncs {service} 1\n{extra}",
                dir.display()
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
        let sentinel = Sentinel { port, child, dir };
        await_until(Duration::from_secs(10), "the sentinel to answer", || {
            sentinel.conn().is_some()
        });
        sentinel
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
        for s in &sentinels {
            await_until(
                Duration::from_secs(20),
                "sentinels to know the replica and each other",
                || {
                    let replicas: Vec<std::collections::HashMap<String, String>> =
                        s.ask(&["replicas", service]).unwrap_or_default();
                    let others: Vec<std::collections::HashMap<String, String>> =
                        s.ask(&["sentinels", service]).unwrap_or_default();
                    replicas
                        .iter()
                        .any(|r| r.get("flags").is_some_and(|f| f == "slave"))
                        && others.len() == 2
                },
            );
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

    /// The port of the master the sentinels name now.
    pub fn master_port(&self, service: &str) -> Option<u16> {
        let (_, port): (String, u16) = self.sentinels[0]
            .ask(&["get-master-addr-by-name", service])
            .ok()?;
        Some(port)
    }
}
