//! TLS (one-way and mutual) and ACL users against real TLS redis-servers, with a
//! PKI made by openssl at test time (testing/make-pki.sh).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_lease::core::dsn::{Endpoint, Timeouts};
use redis_lease::core::error::Error;
use redis_lease::core::lease::{Lease, LeaseKeys};
use redis_lease::core::session::{Saved, SessionConfig, SessionStore};
use support::{exists, pki, RedisServer};

const SEC: Duration = Duration::from_secs(1);

fn ep(dsn: &str) -> Arc<Endpoint> {
    Arc::new(Endpoint::parse(dsn, Timeouts::default()).unwrap())
}

fn lease(dsn: &str, name: &str) -> Lease {
    Lease::new(ep(dsn), LeaseKeys::for_lock(b"lock:", name.as_bytes()))
}

fn ca() -> String {
    pki().join("ca.pem").to_string_lossy().into_owned()
}

fn file(name: &str) -> String {
    pki().join(name).to_string_lossy().into_owned()
}

/// One acquire and release through `dsn`: the error, if any.
fn lock_cycle(dsn: &str, name: &str) -> Result<(), Error> {
    let l = lease(dsn, name);
    let h = l.acquire(SEC * 5, Duration::ZERO)?.expect("free");
    assert!(l.release(&h, false)?);
    Ok(())
}

#[test]
fn locks_and_sessions_over_tls_with_the_servers_ca() {
    let server = RedisServer::start_tls("server", false, &[]);
    let mut raw = server.conn();
    for dsn in [
        format!("rediss://localhost:{}?cafile={}", server.tls_port, ca()),
        // phpredis's form, as a session.save_path has it.
        format!(
            "tls://localhost:{}?stream[cafile]={}",
            server.tls_port,
            ca()
        ),
        format!(
            "ssl://127.0.0.1:{}?stream%5Bcafile%5D={}",
            server.tls_port,
            ca()
        ),
    ] {
        let l = lease(&dsn, "tls");
        let h = l.acquire(SEC * 5, Duration::ZERO).unwrap().expect("free");
        assert!(
            exists(&mut raw, "lock:{tls}"),
            "{dsn}: the lock is in Redis"
        );
        assert!(l.release(&h, false).unwrap());
        let store = SessionStore::new(ep(&dsn), SessionConfig::default());
        let (mut s, _) = store.open("tlssession").unwrap();
        assert_eq!(
            store.write(&mut s, b"a|i:1;", SEC * 60).unwrap(),
            Saved::Yes
        );
    }
    let data: String = redis::cmd("GET")
        .arg("PHPREDIS_SESSION:tlssession")
        .query(&mut raw)
        .unwrap();
    assert_eq!(data, "a|i:1;");
}

#[test]
fn the_handshake_is_paid_once_per_process_not_per_call() {
    let server = RedisServer::start_tls("server", false, &[]);
    let dsn = format!("rediss://localhost:{}?cafile={}", server.tls_port, ca());
    let accepted = |raw: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(raw).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("total_connections_received:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let mut raw = server.conn();
    lock_cycle(&dsn, "once").unwrap();
    let before = accepted(&mut raw);
    for _ in 0..20 {
        lock_cycle(&dsn, "once").unwrap();
    }
    assert_eq!(
        accepted(&mut raw),
        before,
        "20 lock cycles reused the TLS connection"
    );
}

#[test]
fn certificate_problems_fail_within_the_connect_timeout_naming_the_reason() {
    let good = RedisServer::start_tls("server", false, &[]);
    let wronghost = RedisServer::start_tls("wronghost", false, &[]);
    let expired = RedisServer::start_tls("expired", false, &[]);
    let cases = [
        (&good, String::new(), "UnknownIssuer"), // system roots do not know the test CA
        (
            &good,
            format!("cafile={}", file("other-ca.pem")),
            "UnknownIssuer",
        ),
        (&wronghost, format!("cafile={}", ca()), "not valid for name"),
        (&expired, format!("cafile={}", ca()), "expired"),
    ];
    for (server, query, reason) in cases {
        let dsn = format!(
            "rediss://:hunter2@localhost:{}?timeout=1&read_timeout=1&{query}",
            server.tls_port
        );
        let start = Instant::now();
        let err = lock_cycle(&dsn, "bad").unwrap_err();
        let took = start.elapsed();
        match &err {
            Error::Connection(m) => {
                assert!(m.contains(reason), "{query}: {m}");
                assert!(m.contains("TLS"), "{m}");
                assert!(!m.contains("hunter2"), "{m}");
            }
            other => panic!("{query}: expected a connection error, got {other:?}"),
        }
        assert!(took < Duration::from_millis(1500), "{query}: took {took:?}");
    }
    // The explicit opt-outs.
    lock_cycle(
        &format!(
            "rediss://localhost:{}?cafile={}&verify_peer_name=0",
            wronghost.tls_port,
            ca()
        ),
        "optout",
    )
    .unwrap();
    lock_cycle(
        &format!("rediss://localhost:{}?verify_peer=0", expired.tls_port),
        "optout",
    )
    .unwrap();
    lock_cycle(
        &format!("tls://localhost:{}?stream[verify_peer]=0", good.tls_port),
        "optout",
    )
    .unwrap();
}

#[test]
fn mutual_tls_needs_the_client_certificate() {
    let server = RedisServer::start_tls("server", true, &[]);
    let base = format!(
        "rediss://localhost:{}?timeout=1&cafile={}",
        server.tls_port,
        ca()
    );
    let err = lock_cycle(&base, "mtls").unwrap_err();
    assert!(
        matches!(&err, Error::Connection(m) if m.contains("TLS")),
        "without a client certificate: {err:?}"
    );
    lock_cycle(
        &format!(
            "{base}&cert={}&key={}",
            file("client.pem"),
            file("client.key")
        ),
        "mtls",
    )
    .unwrap();
    lock_cycle(
        &format!(
            "tls://localhost:{}?stream[cafile]={}&stream[local_cert]={}&stream[local_pk]={}",
            server.tls_port,
            ca(),
            file("client.pem"),
            file("client.key")
        ),
        "mtls",
    )
    .unwrap();
    // A missing file is named (paths are configuration), its contents never shown.
    let err = lock_cycle(
        &format!("{base}&cert=/nonexistent.pem&key=/nonexistent.key"),
        "mtls",
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Connection(m) if m.contains("/nonexistent.pem")),
        "{err:?}"
    );
}

#[test]
fn acl_users_over_tls_in_every_form() {
    let server = RedisServer::start_tls(
        "server",
        false,
        &["--user", "app", "on", ">s3cret", "~*", "&*", "+@all"],
    );
    let port = server.tls_port;
    for dsn in [
        format!("rediss://app:s3cret@localhost:{port}?cafile={}", ca()),
        format!(
            "rediss://localhost:{port}?user=app&auth=s3cret&cafile={}",
            ca()
        ),
        format!(
            "tls://localhost:{port}?auth[]=app&auth[]=s3cret&stream[cafile]={}",
            ca()
        ),
        format!(
            "tls://localhost:{port}?auth[user]=app&auth[pass]=s3cret&stream[cafile]={}",
            ca()
        ),
    ] {
        lock_cycle(&dsn, "acl").unwrap_or_else(|e| panic!("{dsn}: {e}"));
    }
    let mut raw = server.conn();
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut raw).unwrap();
    assert!(
        clients.contains("user=app"),
        "the pooled link is the app user's: {clients}"
    );
    let err = lock_cycle(
        &format!("rediss://app:wrongpw@localhost:{port}?cafile={}", ca()),
        "acl",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.to_lowercase().contains("authentication failed"),
        "{text}"
    );
    assert!(
        !text.contains("wrongpw") && !text.contains("s3cret"),
        "{text}"
    );
}

#[test]
fn a_server_that_never_answers_the_handshake_fails_within_the_connect_timeout() {
    // Accepts connections and says nothing: no TLS handshake ever completes.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut sockets = Vec::new();
        for s in listener.incoming().take(2) {
            sockets.push(s);
        }
        std::thread::sleep(Duration::from_secs(3)); // keep them open, silent
    });
    // Made before the clock starts: the first ca() generates the test PKI.
    let dsn = format!(
        "rediss://localhost:{port}?timeout=0.3&read_timeout=2&cafile={}",
        ca()
    );
    let start = Instant::now();
    let err = lock_cycle(&dsn, "silent").unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    assert!(
        took < Duration::from_millis(900),
        "the handshake waited {took:?}, not the 0.3 s connect timeout"
    );
    drop(held);
}

#[test]
fn without_a_cafile_the_system_trust_store_is_used() {
    // The store is read once per process, as its environment says
    // (SSL_CERT_FILE): so the check runs in a child process of its own.
    const CHILD: &str = "REDIS_LEASE_TEST_SYSTEM_STORE_DSN";
    if let Ok(dsn) = std::env::var(CHILD) {
        lock_cycle(&dsn, "system-store").unwrap();
        return;
    }
    let good = RedisServer::start_tls("server", false, &[]);
    let dsn = format!("rediss://localhost:{}?timeout=2", good.tls_port);
    let run = |store: &str| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "without_a_cafile_the_system_trust_store_is_used",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD, &dsn)
            .env("SSL_CERT_FILE", store)
            .env_remove("SSL_CERT_DIR")
            .output()
            .unwrap()
    };
    let trusted = run(&ca());
    assert!(
        trusted.status.success(),
        "a store with the test CA: {}",
        String::from_utf8_lossy(&trusted.stdout)
    );
    let other = run(&file("other-ca.pem"));
    assert!(!other.status.success(), "a store without it is refused");
    assert!(
        String::from_utf8_lossy(&other.stdout).contains("UnknownIssuer")
            || String::from_utf8_lossy(&other.stderr).contains("UnknownIssuer"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
}
