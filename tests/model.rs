//! The lease protocol, checked exhaustively with stateright (issue 23).
//!
//! A model of what `src/core` and its Lua scripts do, small enough to explore
//! every interleaving of: clients taking, waiting for, renewing and releasing a
//! lock (or a session's lock), a master and a replica with asynchronous
//! replication and WAIT, a failover (planned or a crash), links that fail after
//! a command was sent, and a clock. No Redis, no PHP: `tests/model/redis.rs`
//! runs the scripts, `tests/model/reactions.rs` is the client code.
//!
//! Each test runs one configuration and checks the properties of
//! `tests/model/system.rs` (`System::properties`): with the protocol as fixed,
//! none is violated; with a fix reverted, the checker finds the violation, and
//! the test prints the trace.
//!
//! `MODEL_DEPTH=deep cargo test --release --no-default-features --test model`
//! runs longer horizons and more clients (minutes to hours).

#[path = "model/client.rs"]
mod client;
#[path = "model/reactions.rs"]
mod reactions;
#[path = "model/redis.rs"]
mod redis;
#[path = "model/system.rs"]
mod system;

use std::collections::BTreeSet;
use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model};

use client::Program;
use redis::{RevokeMarker, Scripts};
use system::{Config, Failover, Fixes, System};

const MUTEX: &str = "mutual exclusion";
const MUTEX_OUTSIDE_WINDOW: &str = "mutual exclusion outside the failover window";
const FENCES: &str = "fencing tokens increase";
const WRITES_KEPT: &str = "acknowledged session writes are kept";
const REVOKE_ONCE: &str = "a revocation spares the lease it handed on";
const EXPIRY: &str = "every key of a lease expires in time";

fn deep() -> bool {
    std::env::var("MODEL_DEPTH").is_ok_and(|v| v == "deep")
}

/// The protocol as implemented.
fn as_implemented() -> Fixes {
    Fixes {
        grant_waits: true,
        scripts: Scripts {
            at_least: true,
            revoke_marker: RevokeMarker::OnHandoff,
        },
        check_reads_pttl: false,
    }
}

/// Two lock clients (one takes the lock twice), wait_replicas=1, a failover.
fn locks(failover: Failover) -> Config {
    Config {
        clients: vec![
            Program::Lock {
                acquires: 2,
                refreshes: 0,
            },
            Program::Lock {
                acquires: 1,
                refreshes: 0,
            },
        ],
        ttl: 2,
        refresh_ttls: vec![],
        wait: 2,
        horizon: if deep() { 4 } else { 2 },
        wait_replicas: true,
        failovers: vec![failover],
        faults: 0,
        faulty: |_| false,
        crashes: 0,
        max_lag: 2,
        max_orphans: 1,
        renew: false,
        fence_ops: true,
        fixes: as_implemented(),
    }
}

/// Runs the checker over every state; `stop_at`: stop at the first violation
/// of that property instead (one thread, so that the trace is always the same).
fn check(name: &str, config: Config, stop_at: Option<&'static str>) -> impl Checker<System> {
    let started = Instant::now();
    let builder = System { config }.checker();
    let checker = match stop_at {
        Some(property) => builder
            .threads(1)
            .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property]))),
        None => builder.threads(2),
    }
    .spawn_bfs()
    .join();
    println!(
        "{name}: {} states ({} visits), depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

/// Asserts that none of `properties` is violated, and that each of `reached`
/// (sometimes-properties) was: the model does get there.
fn assert_holds(checker: &impl Checker<System>, properties: &[&'static str], reached: &[&str]) {
    let found = checker.discoveries();
    for &p in properties {
        if let Some(path) = found.get(p) {
            print_trace(checker.model(), p, path.clone());
            panic!("violated: {p}");
        }
    }
    for &r in reached {
        assert!(found.contains_key(r), "never reached: {r}");
    }
}

/// Asserts that the checker found a violation of `property`, and prints it.
fn assert_violated(checker: &impl Checker<System>, property: &'static str) {
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("no violation of {property} found"));
    print_trace(checker.model(), property, path);
}

fn print_trace(
    model: &System,
    property: &str,
    path: stateright::Path<system::State, system::Action>,
) {
    let _ = model;
    let steps = path.into_vec();
    println!(
        "counterexample to \"{property}\" ({} steps):",
        steps.len() - 1
    );
    println!("   {}", steps[0].0.summary());
    for pair in steps.windows(2) {
        if let Some(action) = pair[0].1 {
            println!("{action:?}");
            println!("   {}", pair[1].0.summary());
        }
    }
}

const LOCK_PROPERTIES: [&str; 3] = [MUTEX, FENCES, EXPIRY];

#[test]
fn one_holder_across_a_planned_failover_with_wait_replicas() {
    let checker = check("planned failover", locks(Failover::Planned), None);
    assert_holds(
        &checker,
        &LOCK_PROPERTIES,
        &[
            "a waiter is handed the lock",
            "a hold on the promoted master",
        ],
    );
}

#[test]
fn one_holder_across_a_crash_with_wait_replicas() {
    let checker = check("crash", locks(Failover::Crash), None);
    assert_holds(
        &checker,
        &LOCK_PROPERTIES,
        &[
            "a waiter is handed the lock",
            "a hold on the promoted master",
        ],
    );
}

/// Fix (a) reverted: a lock handed to a waiter is counted on before the replica
/// has it; the failover loses the handoff, and the new master grants it again.
#[test]
fn reverted_a_handoff_not_waited_for_gives_two_holders() {
    let mut config = locks(Failover::Planned);
    config.fixes.grant_waits = false;
    let checker = check("(a) handoff without WAIT", config, Some(MUTEX));
    assert_violated(&checker, MUTEX);
}
