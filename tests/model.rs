//! The lease protocol, checked exhaustively with stateright (issues 23 and 27).
//!
//! A model of what `src/core` and its Lua scripts do, small enough to explore
//! every interleaving of: clients taking, waiting for, renewing and releasing a
//! lock (alone, or shared by readers, with upgrades and downgrades), a
//! semaphore's permits, a session's lock, and a token moved from one client to
//! another (detach, restore); a master and a replica with asynchronous
//! replication and WAIT, a failover (planned or a crash), links that fail after
//! a command was sent, client crashes, and a clock. No Redis, no PHP:
//! `model/redis.rs` runs the scripts, `model/reactions.rs` is the client code,
//! `model/system.rs` the rest and the properties.
//!
//! Each test runs one configuration. With the protocol as implemented, none of
//! the properties it names is violated, and the `sometimes` properties it names
//! are reached (the model does get there). With a fix reverted, (a) to (af), the
//! checker finds the violation, and the test prints the trace
//! (`cargo test --no-default-features --test model -- --nocapture`). Fixes (e),
//! (f) and (i) to (l) are bugs the model found in the protocol as it was (see
//! each test); (g) and (h) are the two bugs issue 27 reported from review,
//! reverted here to show the checker finds them.
//!
//! The default run explores about 50 million states, breadth first (the
//! largest: the planned failover of exclusive locks, 9.3 million, and of
//! read/write locks, 8.8 million), in about 90 s on two cores and up to 8 GB.
//! `MODEL_DEPTH=deep` raises the horizons, gives the first session client two
//! requests, runs the no-WAIT check on both failovers, adds links that fail
//! during a failover, and searches depth first (a state is about 1 KB: breadth
//! first would keep its whole frontier): hours. The counts are the same on
//! every run (no test asserts one: they change with the model).

#[path = "model/client.rs"]
mod client;
#[path = "model/reactions.rs"]
mod reactions;
#[path = "model/redis.rs"]
mod redis;
#[path = "model/slots.rs"]
mod slots;
#[path = "model/system.rs"]
mod system;

use std::collections::BTreeSet;
use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model};

use client::{Program, Req};
use redis::{How, RevokeMarker, Scripts};
use system::{Config, Failover, Fixes, System};

/// A checker that ran, whichever search it ran.
trait IntoBox {
    fn into_box(self) -> Box<dyn Checker<System>>;
}

impl<C: Checker<System> + 'static> IntoBox for C {
    fn into_box(self) -> Box<dyn Checker<System>> {
        Box::new(self)
    }
}

const MUTEX: &str = "mutual exclusion";
const MUTEX_OUTSIDE_WINDOW: &str = "mutual exclusion outside the failover window";
const FENCES: &str = "fencing tokens increase";
const FENCES_OUTSIDE_WINDOW: &str = "fencing tokens increase outside the failover window";
const WRITES_KEPT: &str = "acknowledged session writes are kept";
const LOGOUTS_KEPT: &str = "a logout reported done stays done";
const REVOKE_ONCE: &str = "a revocation spares the lease it handed on";
const UNREVOKED: &str = "a live session hold is never revoked";
const NOT_WOKEN_REVOKED: &str = "no waiter wakes to a grant a logout revoked";
const NOT_WOKEN_FORCED: &str = "no waiter wakes to a grant a forced release took";
const EXPIRY: &str = "every key of a lease expires in time";
const PERMITS: &str = "never more permits than the limit that admitted the last one";
const INTEREST: &str = "no grant outlives its holder's interest";
const HOLDS: &str = "no hold outlives its holder's interest";
const HANDOFF: &str = "a release leaves nobody waiting for what it freed";
const REPORTED: &str = "a claim reports a hold only while it counts on it";

fn deep() -> bool {
    std::env::var("MODEL_DEPTH").is_ok_and(|v| v == "deep")
}

/// The protocol as implemented.
fn as_implemented() -> Fixes {
    Fixes {
        grant_waits: true,
        scripts: Scripts {
            at_least: true,
            voids_refreshes: true,
            revoke_marker: RevokeMarker::Always,
            destroy_marker: true,
            busy_after_grant: true,
            open_unrevokes: true,
            revoke_unwakes: true,
            force_unwakes: true,
            put_absent: true,
            revoked_touches: true,
            refusals_leave_queue: true,
            resolve_voids_holder: true,
            grant_drops_lapsed_upgrade: true,
            weights_counted: true,
            join_assigns_fence: true,
            release_trusts_empty_fence: true,
            join_clears_wake: true,
        },
        check_reads_pttl: true,
        renewals_wait: true,
        restore_verifies: true,
        failed_conversion_asks: true,
        given_back_dropped: true,
        grant_rereads_after_switch: true,
        failed_conversion_lets_go: true,
        give_up_defers_release: true,
        answered_retry_on_its_way: true,
        grant_reconfirms: true,
        conversion_recounts: true,
        broken_conversion_lets_go: true,
        restore_waits: true,
        revoked_write_waits: true,
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
        horizon: if deep() { 3 } else { 2 },
        wait_replicas: true,
        failovers: vec![failover],
        faults: 0,
        faulty: |_| false,
        crashes: 0,
        max_lag: 2,
        max_orphans: 1,
        renew: false,
        fence_ops: true,
        give_backs_answered: false,
        abandons_fail: false,
        give_ups_apart: false,
        stored: false,
        fixes: as_implemented(),
    }
}

/// Runs the checker over every state; `stop_at`: stop at the first violation
/// of that property instead (one thread, so that the trace is always the same).
fn check(name: &str, config: Config, stop_at: Option<&'static str>) -> Box<dyn Checker<System>> {
    let started = Instant::now();
    let builder = System { config }.checker();
    let checker = match stop_at {
        Some(property) => builder
            .threads(1)
            .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
            .spawn_bfs()
            .join()
            .into_box(),
        // Deep runs search depth first: breadth first keeps its whole frontier
        // (a state is about 1 KB), depth first only its path.
        None if deep() => builder.threads(2).spawn_dfs().join().into_box(),
        None => builder.threads(2).spawn_bfs().join().into_box(),
    };
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
fn assert_holds(checker: &dyn Checker<System>, properties: &[&'static str], reached: &[&str]) {
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
fn assert_violated(checker: &dyn Checker<System>, property: &'static str) {
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("no violation of {property} found"));
    print_trace(checker.model(), property, path);
}

/// Prints a trace: each action, what it did, and the state after it.
fn print_trace(
    model: &System,
    property: &str,
    path: stateright::Path<system::State, system::Action>,
) {
    let steps = path.into_vec();
    println!(
        "counterexample to \"{property}\" ({} steps):",
        steps.len() - 1
    );
    println!("     {}", steps[0].0.summary());
    for pair in steps.windows(2) {
        let Some(action) = pair[0].1 else {
            continue;
        };
        let (_, said) = system::narrated(|| model.next_state(&pair[0].0, action));
        println!("{action:?}");
        for line in said {
            println!("   . {line}");
        }
        println!("     {}", pair[1].0.summary());
    }
}

const LOCK_PROPERTIES: [&str; 8] = [
    MUTEX, FENCES, EXPIRY, PERMITS, INTEREST, HOLDS, HANDOFF, REPORTED,
];

#[test]
fn one_holder_across_a_planned_failover_with_wait_replicas() {
    let checker = check("planned failover", locks(Failover::Planned), None);
    assert_holds(
        &*checker,
        &LOCK_PROPERTIES,
        &[
            "a waiter is handed the lock",
            "a hold on the promoted master",
            "a grant read after its bound extended before it was reported",
        ],
    );
}

#[test]
fn one_holder_across_a_crash_with_wait_replicas() {
    let checker = check("crash", locks(Failover::Crash), None);
    assert_holds(
        &*checker,
        &LOCK_PROPERTIES,
        &[
            "a waiter is handed the lock",
            "a hold on the promoted master",
        ],
    );
}

/// Fix (a) reverted: a lock handed to a waiter is counted on before the replica
/// has it; the failover loses the handoff, and the new master grants it again.
/// Fix (w) reverted (review, stop 55): a grant whose WAIT (or reply) is read
/// only once its bound has passed is reported held; the caller, told it holds,
/// counts on a lease Redis may have given to another (with a semaphore, no
/// fencing token stops the second holder).
#[test]
fn reverted_w_a_grant_read_after_its_bound_is_reported_held() {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.fixes.grant_reconfirms = false;
    let checker = check("(w) a late grant reported", config, Some(REPORTED));
    assert_violated(&*checker, REPORTED);
}

#[test]
fn reverted_a_handoff_not_waited_for_gives_two_holders() {
    let mut config = locks(Failover::Planned);
    config.fixes.grant_waits = false;
    // Without messages left in the network, the shortest trace is the plain
    // story: a release hands the lock on, and the waiter counts on it at once.
    config.max_orphans = 0;
    let checker = check("(a) handoff without WAIT", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Without WAIT a failover may lose what the master acknowledged: two clients
/// may hold the lock from the promotion until each has heard of the switch and
/// had its hold checked on the new master (the failover window). After that,
/// only one, since the check lowers the holder's bound to what the new master
/// keeps (a refresh the replica never got may have raised it; see (e)).
fn no_wait(failover: Failover) -> Config {
    let mut config = locks(failover);
    config.wait_replicas = false;
    config.clients[0] = Program::Lock {
        acquires: 2,
        refreshes: 1,
    };
    config.refresh_ttls = vec![2];
    config
}

#[test]
fn without_wait_one_holder_outside_the_failover_window() {
    let failovers = if deep() {
        vec![Failover::Crash, Failover::Planned]
    } else {
        vec![Failover::Crash]
    };
    for failover in failovers {
        let config = no_wait(failover);
        let checker = check(&format!("no WAIT, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &[
                MUTEX_OUTSIDE_WINDOW,
                FENCES_OUTSIDE_WINDOW,
                EXPIRY,
                INTEREST,
                HOLDS,
            ],
            &["a hold on the promoted master"],
        );
    }
}

/// Fix (e) reverted, a bug the model found: the watchdog's check after a switch
/// reads only whether the token is there, and goes on counting on the holder's
/// bound, which an extension the replica never got may have raised past what
/// the new master keeps (watchdog.rs `check` now lowers it to the PTTL).
#[test]
fn reverted_e_a_check_that_trusts_an_unreplicated_extension_gives_two_holders() {
    let mut config = no_wait(Failover::Crash);
    config.fixes.check_reads_pttl = false;
    let checker = check("(e) check without PTTL", config, Some(MUTEX_OUTSIDE_WINDOW));
    assert_violated(&*checker, MUTEX_OUTSIDE_WINDOW);
}

/// Fix (k) reverted, a bug this model found: a claim whose attempt's link broke
/// adopts its token, which holds the lock (handed to it by an earlier attempt's
/// place in the queue), and releases it; the broken attempt then arrives and
/// takes the lock for nobody, until its ttl.
#[test]
fn reverted_k_a_late_attempt_of_an_adopted_token_takes_the_lock_for_nobody() {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.faults = 1;
    config.faulty = |_| true;
    config.fixes.scripts.resolve_voids_holder = false;
    let checker = check(
        "(k) resolve leaves a holder unvoided",
        config,
        Some(INTEREST),
    );
    assert_violated(&*checker, INTEREST);
}

/// Links that fail after a command was sent: resolve.lua adopts what our token
/// took or voids it, and a late arrival of a voided attempt takes nothing. A
/// client may crash (a holder, a waiter, one in the middle of a call).
#[test]
fn broken_links_and_crashes_leave_one_holder() {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.faults = 1;
    config.faulty = |_| true;
    config.crashes = 1;
    let checker = check("broken links", config, None);
    assert_holds(
        &*checker,
        &LOCK_PROPERTIES,
        &["a waiter is handed the lock"],
    );
}

/// The watchdog renews while the holder refreshes to a longer ttl: a renewal
/// sent before the refresh may run after it.
fn renewals() -> Config {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.wait_replicas = false;
    config.renew = true;
    config.clients = vec![
        Program::Lock {
            acquires: 1,
            refreshes: 1,
        },
        Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
    ];
    config.refresh_ttls = vec![4];
    config.horizon = if deep() { 5 } else { 3 };
    config
}

#[test]
fn renewals_never_shorten_a_lease() {
    let checker = check("renewals", renewals(), None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
}

/// Fix (c) reverted: a renewal sets the expiry exactly, and cuts back the
/// holder's longer refresh that overtook it.
#[test]
fn reverted_c_a_renewal_that_shortens_gives_two_holders() {
    let mut config = renewals();
    config.fixes.scripts.at_least = false;
    let checker = check("(c) renewal sets exactly", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// The holder refreshes twice, to a short ttl and to a long one, and one link
/// may fail: a refresh that got no answer is left in the network, to run after
/// a later one was answered.
fn late_refreshes() -> Config {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.wait_replicas = false;
    config.clients = vec![
        Program::Lock {
            acquires: 1,
            refreshes: 2,
        },
        Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
    ];
    config.refresh_ttls = vec![1, 4];
    config.faults = 1;
    config.faulty = |req| {
        matches!(
            req,
            Req::Refresh {
                how: How::Holder { .. },
                ..
            }
        )
    };
    config.fence_ops = false;
    config.horizon = if deep() { 5 } else { 4 };
    config
}

#[test]
fn a_late_refresh_never_cuts_a_later_one() {
    let checker = check("late refreshes", late_refreshes(), None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    let checker = check("late refreshes, renewed", late_refreshes_renewed(), None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    // With wait_replicas (a refresh answered short of replicas keeps the ids
    // it voided listed).
    let mut config = late_refreshes();
    config.wait_replicas = true;
    let checker = check("late refreshes, wait_replicas", config, None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
}

/// The watchdog renews meanwhile: a renewal counts no more than the shortest
/// refresh on its way (or never answered) may leave from its start. Two links
/// may fail.
fn late_refreshes_renewed() -> Config {
    let mut config = late_refreshes();
    config.renew = true;
    config.faults = 2;
    config
}

/// A semaphore's permit refreshes as a lock holder does (refresh.lua's other
/// branch: its end in `<lock>:holders`), and a late refresh of a permit must
/// not cut a later one either: the other client would be admitted past the
/// limit while the holder counts on the longer refresh.
/// (The holder takes `weight` permits, the other two, of `weight` + 1: one
/// of them at a time.)
fn late_permit_refreshes(weight: u8) -> Config {
    let mut config = late_refreshes();
    let limit = weight + 1;
    config.clients = vec![
        Program::Permit {
            acquires: 1,
            limit,
            weight,
            refreshes: 2,
            detach: false,
        },
        Program::Permit {
            acquires: 1,
            limit,
            weight: 2,
            refreshes: 0,
            detach: false,
        },
    ];
    config
}

#[test]
fn a_late_refresh_of_a_permit_never_cuts_a_later_one() {
    for weight in [1, 2] {
        let checker = check(
            &format!("late permit refreshes, weight {weight}"),
            late_permit_refreshes(weight),
            None,
        );
        assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    }
    let mut config = late_permit_refreshes(1);
    config.renew = true;
    config.faults = 2;
    let checker = check("late permit refreshes, renewed", config, None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
}

/// Fix (u) reverted, for permits: a refresh left unanswered runs after the
/// holder's later, longer one, and cuts its permit's end back; the other
/// client's two permits are admitted beside the holder's (three of two).
#[test]
fn reverted_u_a_late_permit_refresh_admits_past_the_limit() {
    let mut config = late_permit_refreshes(1);
    config.fixes.scripts.voids_refreshes = false;
    let checker = check("(u) permit refreshes not voided", config, Some(PERMITS));
    assert_violated(&*checker, PERMITS);
}

/// Fix (v) reverted: a refresh whose first run's link broke is answered on its
/// second; the holder's next refresh (longer) gets no answer, and a renewal
/// counts its whole ttl; the first run then arrives and cuts the lease.
#[test]
fn reverted_v_an_answered_retry_forgotten_by_the_watch_gives_two_holders() {
    let mut config = late_refreshes_renewed();
    config.fixes.answered_retry_on_its_way = false;
    let checker = check("(v) answered retry forgotten", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Fix (u) reverted: a refresh left unanswered runs after the holder's later,
/// longer refresh was answered, and cuts the lease back to its own ttl; the
/// other client takes the lock while the holder counts on the longer one.
#[test]
fn reverted_u_a_late_refresh_that_cuts_a_later_one_gives_two_holders() {
    let mut config = late_refreshes();
    config.fixes.scripts.voids_refreshes = false;
    let checker = check("(u) refreshes not voided", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// A reader refreshes its read hold for a shorter ttl, and the refresh gets
/// no answer (it may still run); then it upgrades. Run after the upgrade, the
/// refresh would end the write lock at its own ttl: the converted hold carries
/// its bound (`Hold::carry_unanswered`), and read after it, is extended first
/// (fix (x)). The other client takes the lock alone.
fn refreshed_upgrades() -> Config {
    let mut config = late_refreshes();
    config.clients = vec![
        Program::Reader {
            acquires: 1,
            upgrade: true,
            detach: false,
            retry: false,
            refresh: true,
        },
        Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
    ];
    config.refresh_ttls = vec![1];
    config
}

#[test]
fn an_upgrade_carrying_an_unanswered_refresh_is_counted_on_only_as_redis_may_keep_it() {
    let checker = check("refreshed upgrades", refreshed_upgrades(), None);
    assert_holds(
        &*checker,
        &LOCK_PROPERTIES,
        &[
            "an upgrade granted",
            "a conversion read after a carried refresh's bound extended before it was reported",
        ],
    );
    // The watchdog renews the read hold meanwhile (two links may fail); and
    // with wait_replicas (the extension WAITed for).
    let mut config = refreshed_upgrades();
    config.renew = true;
    config.faults = 2;
    let checker = check("refreshed upgrades, renewed", config, None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    let mut config = refreshed_upgrades();
    config.wait_replicas = true;
    let checker = check("refreshed upgrades, wait_replicas", config, None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
}

/// A writer refreshes its write hold for a shorter ttl, the refresh gets no
/// answer, and then it downgrades: the downgrade carries the refresh's bound
/// as an upgrade does (`Lock::convert`). A reader waits to read.
fn refreshed_downgrades() -> Config {
    let mut config = refreshed_upgrades();
    config.clients = vec![
        Program::Writer {
            acquires: 1,
            downgrade: true,
            retry: false,
            retry_alone: false,
            detach: false,
            refresh: true,
            reupgrade: false,
        },
        Program::Reader {
            acquires: 1,
            upgrade: false,
            detach: false,
            retry: false,
            refresh: false,
        },
    ];
    config
}

#[test]
fn a_downgrade_carrying_an_unanswered_refresh_is_counted_on_only_as_redis_may_keep_it() {
    // (A downgrade never waits, and the model has no slow replies: it is read
    // at once, never after the carried bound; the recount is the upgrade's.)
    let checker = check("refreshed downgrades", refreshed_downgrades(), None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &["a downgrade"]);
    let mut config = refreshed_downgrades();
    config.renew = true;
    config.faults = 2;
    let checker = check("refreshed downgrades, renewed", config, None);
    assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
}

/// Fix (x) reverted (review, stop 55): the upgrade is read after the carried
/// refresh's bound and reported held; the refresh may then run and end the
/// write lock under its holder, and the other client takes it.
#[test]
fn reverted_x_an_upgrade_read_after_a_carried_refresh_could_end_it_is_reported_held() {
    let mut config = refreshed_upgrades();
    config.fixes.conversion_recounts = false;
    let checker = check(
        "(x) a carried refresh's bound passed",
        config,
        Some(REPORTED),
    );
    assert_violated(&*checker, REPORTED);
}

/// Two requests of one session, wait_replicas=1, a failover.
fn sessions(failover: Failover) -> Config {
    let mut config = locks(failover);
    let opens = if deep() { 2 } else { 1 };
    config.clients = vec![
        Program::Session {
            opens,
            logout: false,
        },
        Program::Session {
            opens: 1,
            logout: false,
        },
    ];
    config.fence_ops = false;
    config
}

#[test]
fn acknowledged_session_writes_survive_a_failover_with_wait_replicas() {
    for failover in [Failover::Planned, Failover::Crash] {
        let checker = check(&format!("sessions, {failover:?}"), sessions(failover), None);
        assert_holds(
            &*checker,
            &[WRITES_KEPT, EXPIRY, INTEREST, HOLDS],
            &["a session write acknowledged"],
        );
    }
}

/// A logout (session_revoke.lua) while two requests of the session hold and
/// wait for its lock; the logout's reply may be lost, and its second run (or
/// its first, late) come after the lock was handed on.
fn revocations(marker: RevokeMarker) -> Config {
    let mut config = locks(Failover::Planned);
    config.clients = vec![
        Program::Session {
            opens: 1,
            logout: false,
        },
        Program::Session {
            opens: 1,
            logout: false,
        },
        Program::Revoker { revokes: 1 },
    ];
    config.failovers = vec![];
    config.wait_replicas = false;
    config.fence_ops = false;
    config.faults = 1;
    config.faulty = |req| matches!(req, client::Req::Revoke { .. });
    config.fixes.scripts.revoke_marker = marker;
    config
}

/// With a marker on every run, a logout acts
/// once, and deletes only what was written before it took effect.
#[test]
fn a_revocation_acts_once_with_its_marker_on_every_run() {
    let checker = check(
        "revocations, marker always",
        revocations(RevokeMarker::Always),
        None,
    );
    assert_holds(
        &*checker,
        &[
            WRITES_KEPT,
            LOGOUTS_KEPT,
            REVOKE_ONCE,
            UNREVOKED,
            NOT_WOKEN_REVOKED,
            EXPIRY,
            INTEREST,
            HOLDS,
        ],
        &["a session write acknowledged"],
    );
}

/// Fix (ab) reverted: session_open.lua leaves a token in `<lock>:revoked`
/// when it asks again after a grant a logout revoked before it woke; the hold
/// it takes then is told "revoked" by its saves (review, stop 59).
#[test]
fn reverted_ab_a_waiter_revoked_before_it_woke_holds_as_revoked() {
    let mut config = revocations(RevokeMarker::Always);
    config.fixes.scripts.open_unrevokes = false;
    let checker = check("(ab) open keeps the revocation", config, Some(UNREVOKED));
    assert_violated(&*checker, UNREVOKED);
}

/// Fix (ac) reverted: session_revoke.lua leaves the revoked holder's wake-up
/// list; a waiter handed the lock and revoked before it woke pops the session
/// as it was before the logout (review, stop 59).
#[test]
fn reverted_ac_a_waiter_revoked_before_it_woke_pops_the_old_session() {
    let mut config = revocations(RevokeMarker::Always);
    config.fixes.scripts.revoke_unwakes = false;
    let checker = check(
        "(ac) revoke leaves the wake-up",
        config,
        Some(NOT_WOKEN_REVOKED),
    );
    assert_violated(&*checker, NOT_WOKEN_REVOKED);
}

/// Fix (b) reverted: session_revoke.lua without its marker. Its second run
/// revokes the lease its first run handed to the waiting request.
#[test]
fn reverted_b_a_revocation_without_marker_revokes_the_next_holder() {
    let checker = check(
        "(b) revoke without marker",
        revocations(RevokeMarker::Never),
        Some(REVOKE_ONCE),
    );
    assert_violated(&*checker, REVOKE_ONCE);
}

/// Fix (f) reverted, a bug the model found: the marker left only when the lock
/// was handed on, so a second run after a first that found the session unlocked
/// deletes what a request wrote between the two.
#[test]
fn reverted_f_a_revocation_marked_only_on_handoff_deletes_a_saved_write() {
    let checker = check(
        "(f) revoke marker on handoff only",
        revocations(RevokeMarker::OnHandoff),
        Some(WRITES_KEPT),
    );
    assert_violated(&*checker, WRITES_KEPT);
}

/// A logout by a request that holds the session (a locked destroy), and a
/// request waiting for it; the destroy's reply may be lost, and its second run
/// find the lock handed to the waiter, which may have saved since.
fn logouts(failover: Option<Failover>) -> Config {
    let mut config = locks(failover.unwrap_or(Failover::Planned));
    config.clients = vec![
        Program::Session {
            opens: 1,
            logout: true,
        },
        Program::Session {
            opens: 1,
            logout: false,
        },
    ];
    if failover.is_none() {
        config.failovers = vec![];
        config.wait_replicas = false;
    }
    config.fence_ops = false;
    config.faults = 1;
    config.faulty = |req| matches!(req, client::Req::Destroy { .. });
    config
}

/// A destroy run again after a lost reply asks for its first run's marker:
/// what the waiter saved since is kept (review, stop 56), with and without a
/// failover.
#[test]
fn a_logout_run_again_after_a_lost_reply_keeps_a_later_save() {
    for failover in [None, Some(Failover::Planned), Some(Failover::Crash)] {
        let checker = check(&format!("logouts, {failover:?}"), logouts(failover), None);
        assert_holds(
            &*checker,
            &[
                WRITES_KEPT,
                LOGOUTS_KEPT,
                MUTEX,
                UNREVOKED,
                NOT_WOKEN_REVOKED,
                EXPIRY,
                INTEREST,
                HOLDS,
            ],
            &[
                "a session write acknowledged",
                "a logout run again finds it took effect",
            ],
        );
    }
}

/// Fix (z) reverted: the destroy run again takes "the data is gone" for done;
/// the waiter's save is there, so the logout falls back on a revocation, which
/// deletes that acknowledged save.
#[test]
fn reverted_z_a_logout_run_again_deletes_a_later_save() {
    let mut config = logouts(None);
    config.fixes.scripts.destroy_marker = false;
    let checker = check("(z) destroy without marker", config, Some(WRITES_KEPT));
    assert_violated(&*checker, WRITES_KEPT);
}

/// A stored session: a request opens and destroys it (a locked logout) while
/// another request logs it out (session_revoke.lua, `SessionStore::delete`),
/// wait_replicas=1, a failover. Told "revoked", the destroy counts on that
/// logout, which the revoker's WAIT may have found unreplicated.
fn logout_races(failover: Failover) -> Config {
    let mut config = locks(failover);
    config.clients = vec![
        Program::Session {
            opens: 1,
            logout: true,
        },
        Program::Revoker { revokes: 1 },
    ];
    config.stored = true;
    config.fence_ops = false;
    config
}

/// A request's write (no destroy) while another request logs the session out:
/// told "revoked", the write is reported done (the session is logged out, its
/// changes dropped), which counts on that logout as a destroy does.
fn write_races(failover: Failover) -> Config {
    let mut config = logout_races(failover);
    config.clients[0] = Program::Session {
        opens: 1,
        logout: false,
    };
    config
}

/// A logout reported done (a destroy, or a revocation) is not undone by a
/// failover: a destroy told "revoked" WAITs for a write of its own after the
/// logout (review, stop 61), and so does a write told so (stop 65).
#[test]
fn a_logout_reported_done_survives_a_failover() {
    type Races = (
        &'static str,
        fn(Failover) -> Config,
        &'static [&'static str],
    );
    let races: [Races; 2] = [
        (
            "logout races",
            logout_races,
            &[
                "a destroy counts on another's logout",
                "a destroy told revoked runs again after a switch",
            ],
        ),
        (
            "write races",
            write_races,
            &["a write counts on another's logout"],
        ),
    ];
    for (races, config, reached) in races {
        for failover in [Failover::Planned, Failover::Crash] {
            let checker = check(&format!("{races}, {failover:?}"), config(failover), None);
            assert_holds(
                &*checker,
                &[
                    LOGOUTS_KEPT,
                    WRITES_KEPT,
                    UNREVOKED,
                    NOT_WOKEN_REVOKED,
                    EXPIRY,
                    INTEREST,
                    HOLDS,
                ],
                reached,
            );
        }
    }
}

/// Fix (ah) reverted: a write told "revoked" is reported done at once; the
/// logout it counted on had not reached the replica, which a crash promotes:
/// the session is back, without the write's changes.
#[test]
fn reverted_ah_a_write_told_revoked_is_undone_by_a_failover() {
    let mut config = write_races(Failover::Crash);
    config.fixes.revoked_write_waits = false;
    let checker = check("(ah) revoked write at once", config, Some(LOGOUTS_KEPT));
    assert_violated(&*checker, LOGOUTS_KEPT);
}

/// Fix (ae) reverted: session_save.lua told "revoked" writes nothing, and
/// the destroy is reported done at once; the logout it counted on had not
/// reached the replica, which a crash promotes: the session is back.
#[test]
fn reverted_ae_a_destroy_told_revoked_is_undone_by_a_failover() {
    let mut config = logout_races(Failover::Crash);
    config.fixes.scripts.revoked_touches = false;
    let checker = check("(ae) revoked without a write", config, Some(LOGOUTS_KEPT));
    assert_violated(&*checker, LOGOUTS_KEPT);
}

/// A request writes the session's id without holding it: a fresh id it moved
/// to (session_put.lua, 'absent'), beside a request of the session that opens
/// and saves. The write's reply may be lost, its command run late (after that
/// save), or run again and answered by its marker; with a failover,
/// wait_replicas=1.
fn puts(failover: Option<Failover>) -> Config {
    let mut config = locks(failover.unwrap_or(Failover::Planned));
    config.clients = vec![
        Program::Session {
            opens: 1,
            logout: false,
        },
        Program::Putter,
    ];
    if failover.is_none() {
        config.failovers = vec![];
        config.wait_replicas = false;
    }
    config.fence_ops = false;
    config.faults = 1;
    config.faulty = |req| matches!(req, client::Req::Put { .. });
    config
}

/// A fresh id's write never undoes an acknowledged save, run late or again,
/// with and without a failover (stop 61: session_put.lua had no step here).
#[test]
fn a_fresh_id_written_late_or_again_keeps_an_acknowledged_save() {
    for failover in [None, Some(Failover::Planned), Some(Failover::Crash)] {
        let checker = check(&format!("puts, {failover:?}"), puts(failover), None);
        assert_holds(
            &*checker,
            &[WRITES_KEPT, EXPIRY, INTEREST, HOLDS],
            &[
                "a session write acknowledged",
                "a fresh id's write answered by its marker",
            ],
        );
    }
}

/// Fix (ad) reverted: a fresh id written with 'any' (whatever is stored).
/// Its write that timed out lands after the session's next request saved and
/// was acknowledged, and writes over that save (review, stop 59).
#[test]
fn reverted_ad_a_fresh_id_written_late_writes_over_a_save() {
    let mut config = puts(None);
    config.fixes.scripts.put_absent = false;
    let checker = check("(ad) put with any", config, Some(WRITES_KEPT));
    assert_violated(&*checker, WRITES_KEPT);
}

/// Without WAIT, a failover loses what the master acknowledged: the property
/// above can fail in this setting.
#[test]
fn without_wait_replicas_a_failover_loses_an_acknowledged_write() {
    let mut config = sessions(Failover::Crash);
    config.wait_replicas = false;
    let checker = check("sessions without WAIT", config, Some(WRITES_KEPT));
    assert_violated(&*checker, WRITES_KEPT);
}

/// The watchdog renews (and WAITs for its renewals) while a failover happens.
fn renewals_and_failover(failover: Failover) -> Config {
    let mut config = locks(failover);
    config.renew = true;
    config.fence_ops = false;
    config.clients = vec![
        Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
        Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
    ];
    config.horizon = if deep() { 4 } else { 2 };
    config
}

#[test]
fn renewals_across_a_failover_with_wait_replicas() {
    for failover in [Failover::Planned, Failover::Crash] {
        let config = renewals_and_failover(failover);
        let checker = check(&format!("renewals, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &LOCK_PROPERTIES,
            &["a hold on the promoted master"],
        );
    }
}

/// Fix (d) reverted: a renewal counts before the replica has it, and a
/// failover ends the lease sooner than its holder counts on.
#[test]
fn reverted_d_a_renewal_not_waited_for_gives_two_holders() {
    let mut config = renewals_and_failover(Failover::Crash);
    config.fixes.renewals_wait = false;
    let checker = check("(d) renewal without WAIT", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Deep only (breadth first, it outgrows the machine's memory): links that fail
/// while a failover happens.
#[test]
fn broken_links_across_a_failover_with_wait_replicas() {
    if !deep() {
        return;
    }
    for failover in [Failover::Planned, Failover::Crash] {
        let mut config = locks(failover);
        config.horizon = 2;
        config.faults = 1;
        config.faulty = |_| true;
        let checker = check(&format!("broken links, {failover:?}"), config, None);
        assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    }
}

// ---- Read/write locks, semaphores and moved tokens (issue 27) ----

fn reader(upgrade: bool, detach: bool) -> Program {
    Program::Reader {
        acquires: 1,
        upgrade,
        detach,
        retry: false,
        refresh: false,
    }
}

fn writer(downgrade: bool) -> Program {
    Program::Writer {
        acquires: 1,
        downgrade,
        retry: false,
        retry_alone: false,
        detach: false,
        refresh: false,
        reupgrade: false,
    }
}

/// The restorer of a lock's token (which asks for no permits).
const RESTORER: Program = Program::Restorer { permits: 0 };

fn permits(acquires: u8, limit: u8) -> Program {
    weighted(acquires, limit, 1)
}

fn weighted(acquires: u8, limit: u8, weight: u8) -> Program {
    Program::Permit {
        acquires,
        limit,
        weight,
        refreshes: 0,
        detach: false,
    }
}

/// Two readers that may upgrade and a writer that may downgrade, on one lock.
fn read_write() -> Config {
    let mut config = locks(Failover::Planned);
    config.clients = vec![reader(true, false), reader(true, false), writer(true)];
    config.failovers = vec![];
    config.wait_replicas = false;
    config.horizon = if deep() { 4 } else { 3 };
    config
}

const RW_PROPERTIES: [&str; 8] = [
    MUTEX, FENCES, EXPIRY, PERMITS, INTEREST, HOLDS, HANDOFF, REPORTED,
];

/// Readers share; a writer is alone; a writer queued before later readers goes
/// first; readers queued together are woken together; an upgrade lets nobody
/// in between; an upgrade whose read lease runs out while it waits, or that
/// finds another reader waiting to upgrade, ends out of the queue; a downgrade
/// lets the queued readers in with it.
#[test]
fn read_write_locks_one_writer_never_beside_a_reader() {
    let checker = check("read/write locks", read_write(), None);
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &[
            "readers share the lock",
            "readers woken together",
            "a writer queued ahead of a later reader",
            "an upgrade granted",
            "a downgrade",
            "a conversion whose hold ran out",
        ],
    );
}

/// Fix (h) reverted, the second bug of issue 27: acquire.lua's refusal of an
/// upgrade whose read lease ran out while it waited leaves its queue entry, and
/// the next release hands the lock to that abandoned token.
#[test]
fn reverted_h_a_lapsed_upgrade_left_in_the_queue_is_handed_the_lock() {
    let mut config = read_write();
    // As the code was: the refusal left the entry, and grant() served it.
    config.fixes.scripts.refusals_leave_queue = false;
    config.fixes.scripts.grant_drops_lapsed_upgrade = false;
    let checker = check("(h) refusals leave the queue entry", config, Some(INTEREST));
    assert_violated(&*checker, INTEREST);
    // The hold it was granted is nobody's, whenever it is looked at.
    assert_violated(&*checker, HOLDS);
}

/// Fix (j) reverted, a bug this model found: a reader granted while it waited
/// took its hold by another path (acquire.lua's fast path, once the grant's
/// lease ran out), which left the grant's wake-up on its list; its upgrade then
/// popped that wake-up as the lock alone, beside another reader. (j) cleared
/// an upgrade's list; (p), which replaced it, clears any waiter's as it queues.
#[test]
fn reverted_j_a_stale_wake_up_popped_by_an_upgrade_gives_a_writer_beside_a_reader() {
    let mut config = read_write();
    config.fixes.scripts.join_clears_wake = false;
    let checker = check("(j) upgrade keeps a stale wake-up", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Read/write locks with links that fail after a command was sent and a
/// client that may crash: conversions settled by resolve.lua, a broken
/// conversion's hold asked about before it is counted on again.
fn read_write_faults() -> Config {
    let mut config = read_write();
    config.clients = vec![reader(true, false), writer(true)];
    config.faults = 1;
    config.faulty = |_| true;
    config.crashes = 1;
    config.horizon = if deep() { 3 } else { 2 };
    config
}

#[test]
fn read_write_locks_through_broken_links_and_crashes() {
    let checker = check("read/write, broken links", read_write_faults(), None);
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &["an upgrade granted", "a downgrade"],
    );
}

/// A writer whose downgrade gets no reply in time (the attempt left in the
/// network, to run late) and who then calls acquire() again, beside a reader.
fn downgrade_retried_as_acquire() -> Config {
    let mut config = read_write_faults();
    config.clients = vec![
        reader(false, false),
        Program::Writer {
            acquires: 1,
            downgrade: true,
            retry: false,
            retry_alone: true,
            detach: false,
            refresh: false,
            reupgrade: false,
        },
    ];
    config.crashes = 0;
    // The late downgrade and the let-go hold's release, both in the network.
    config.max_orphans = 2;
    config
}

#[test]
fn a_failed_downgrade_retried_as_acquire_never_holds_beside_a_reader() {
    let checker = check(
        "downgrade retried as acquire()",
        downgrade_retried_as_acquire(),
        None,
    );
    assert_holds(&*checker, &RW_PROPERTIES, &["a downgrade"]);
}

/// Fix (s) reverted, found by review: the writer's downgrade gets no reply in
/// time; acquire() again asks Redis (verify), finds the lock still alone its
/// own, and counts on it; the late downgrade then runs and lets the reader in
/// beside it.
#[test]
fn reverted_s_a_late_downgrade_lets_a_reader_in_beside_a_writer_that_asked() {
    let mut config = downgrade_retried_as_acquire();
    config.fixes.failed_conversion_lets_go = false;
    let checker = check("(s) a failed downgrade asked about", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// A writer downgrades (its link may break once, the attempt left in the
/// network to run late), then upgrades again, beside a reader.
fn conversions_after_a_broken_link() -> Config {
    // As `downgrade_retried_as_acquire`: the late attempt and the let-go
    // hold's release may both be in the network.
    let mut config = downgrade_retried_as_acquire();
    config.clients[1] = Program::Writer {
        acquires: 1,
        downgrade: true,
        retry: false,
        retry_alone: false,
        detach: false,
        refresh: false,
        reupgrade: true,
    };
    config
}

#[test]
fn a_conversion_whose_link_broke_never_runs_beside_a_later_one() {
    let checker = check(
        "conversions after a broken link",
        conversions_after_a_broken_link(),
        None,
    );
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &["a downgrade", "a downgraded writer upgraded again"],
    );
}

/// Fix (y) reverted (review, stop 56): the writer's downgrade is sent and its
/// link breaks; resolve.lua finds the token still the writer, and the
/// downgrade is sent again with the same token and holds; the writer upgrades
/// again and holds the lock alone; the first downgrade then runs, and lets the
/// reader in beside it.
#[test]
fn reverted_y_a_late_downgrade_lets_a_reader_in_beside_the_writer_it_upgraded_to() {
    let mut config = conversions_after_a_broken_link();
    config.fixes.broken_conversion_lets_go = false;
    let checker = check("(y) a broken conversion asked again", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Fix (l) reverted, a bug this model found: an upgrade whose attempt got no
/// reply in time gives up with an error; its holder releases the read hold;
/// the upgrade's place in the queue stays, and the next release hands the lock
/// alone to that token, which nobody waits for any more.
#[test]
fn reverted_l_an_upgrade_without_its_read_hold_is_handed_the_lock_for_nobody() {
    let mut config = read_write_faults();
    config.fixes.scripts.grant_drops_lapsed_upgrade = false;
    let checker = check("(l) grant serves a lapsed upgrade", config, Some(INTEREST));
    assert_violated(&*checker, INTEREST);
}

/// Fix (i) reverted: a conversion whose reply was lost goes on counting on the
/// hold it had, which the attempt may have converted (a downgrade that ran
/// lets readers in beside a holder that still counts on the lock alone).
#[test]
fn reverted_i_a_failed_conversion_that_keeps_its_kind_gives_a_writer_beside_a_reader() {
    let mut config = read_write_faults();
    config.fixes.failed_conversion_asks = false;
    let checker = check("(i) failed conversion keeps its kind", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// A reader whose upgrade, and a writer whose downgrade, may throw (a WAIT
/// shortfall gives the grant back, a reply goes missing) and who then call
/// acquire() (acquireRead()) again on the same object, wait_replicas=1, a
/// failover.
fn retried_conversions(failover: Failover) -> Config {
    let mut config = read_write_failover(failover);
    config.clients = vec![
        Program::Reader {
            acquires: 1,
            upgrade: true,
            detach: false,
            retry: true,
            refresh: false,
        },
        Program::Writer {
            acquires: 1,
            downgrade: false,
            retry: false,
            retry_alone: false,
            detach: false,
            refresh: false,
            reupgrade: false,
        },
    ];
    config
}

#[test]
fn retried_conversions_never_count_on_a_given_back_token() {
    for failover in [Failover::Planned, Failover::Crash] {
        let checker = check(
            &format!("retried conversions, {failover:?}"),
            retried_conversions(failover),
            None,
        );
        assert_holds(
            &*checker,
            &RW_PROPERTIES,
            &["a retried upgrade holds the lock alone"],
        );
    }
}

/// Fix (q) reverted, found by review: a reader's upgrade is granted, its WAIT
/// falls short and the lock is given back, a give-back that runs by itself
/// (sent, or due at the process's next call); the user calls acquire() again on
/// the object, which asks Redis about the token, finds the lock still alone
/// its own and keeps it; the give-back then frees it behind the reader, and
/// the writer takes it.
#[test]
fn reverted_q_a_retried_acquire_keeps_a_given_back_token_beside_a_writer() {
    let mut config = retried_conversions(Failover::Planned);
    config.fixes.given_back_dropped = false;
    // (s) lets the failed upgrade's hold go before acquire() could ask about
    // it; (q) guards the asking, as the code did before (s) and still does
    // for a restored or unresolved token.
    config.fixes.failed_conversion_lets_go = false;
    let checker = check("(q) a given-back token kept", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// As `retried_conversions`, but each give-back is answered (it ran): no
/// token is left pending, so the object keeps its hold of unknown kind and a
/// retried acquire() asks Redis (`verify`), finds nothing and claims afresh.
#[test]
fn retried_conversions_after_an_answered_give_back_ask_first() {
    for failover in [Failover::Planned, Failover::Crash] {
        let mut config = retried_conversions(failover);
        config.give_backs_answered = true;
        let checker = check(&format!("answered give-backs, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &RW_PROPERTIES,
            &["a retried upgrade holds the lock alone"],
        );
    }
}

/// Fix (r) reverted, found by the model once a give-back could be answered: a
/// reader's upgrade falls short and its give-back, run on the master, hands
/// the lock to a queued writer there; the master is replaced before the
/// writer's wake-up is read, the reader upgrades again and releases on the new
/// master, which hands the lock to the same writer token with a fence of its
/// own; the writer's refresh runs on the new master, and it counts on the old
/// master's lower fence, after the reader's higher one.
#[test]
fn reverted_r_a_wake_up_from_the_old_master_gives_a_fence_lower_than_the_last() {
    let mut config = retried_conversions(Failover::Planned);
    config.give_backs_answered = true;
    config.fixes.grant_rereads_after_switch = false;
    // The upgrade retried on the same hold, as before (s).
    config.fixes.failed_conversion_lets_go = false;
    let checker = check("(r) a wake-up's fence kept", config, Some(FENCES));
    assert_violated(&*checker, FENCES);
}

/// A writer whose downgrade may throw and who then calls acquireRead() again,
/// beside a reader, wait_replicas=1, a failover.
fn retried_downgrades(failover: Failover) -> Config {
    let mut config = read_write_failover(failover);
    config.clients = vec![
        reader(false, false),
        Program::Writer {
            acquires: 1,
            downgrade: true,
            retry: true,
            retry_alone: false,
            detach: false,
            refresh: false,
            reupgrade: false,
        },
    ];
    config
}

#[test]
fn retried_downgrades_never_count_on_a_given_back_token() {
    for failover in [Failover::Planned, Failover::Crash] {
        let checker = check(
            &format!("retried downgrades, {failover:?}"),
            retried_downgrades(failover),
            None,
        );
        assert_holds(
            &*checker,
            &RW_PROPERTIES,
            &["a retried downgrade holds the lock shared"],
        );
    }
}

/// Locks whose give-up after a WAIT shortfall gets no reply: the claim's
/// token, given back by a release still in the network, is left unresolved
/// for the lock's next acquire() (`Lock::settle`).
fn unanswered_give_ups(failover: Failover) -> Config {
    let mut config = locks(failover);
    config.abandons_fail = true;
    // The give-back and the give-up's resolve, both in the network.
    config.max_orphans = 2;
    // Fences are the lock configurations' (20M states with them, up to 14 GB).
    config.fence_ops = false;
    config
}

#[test]
fn an_unresolved_given_back_token_is_never_adopted() {
    for failover in [Failover::Planned, Failover::Crash] {
        let config = unanswered_give_ups(failover);
        let checker = check(&format!("unanswered give-ups, {failover:?}"), config, None);
        assert_holds(&*checker, &LOCK_PROPERTIES, &[]);
    }
}

/// Give-ups as the code sends them (`Lease::give_up`): resolve.lua, then, for
/// a token it found holding, a release whose reply is lost, left to run late
/// (after a failover, after the lease ran out and another took it) or never.
/// Before, the model ran both as one step (`Req::Abandon`) and could not lose
/// the release alone (review, issue 30).
fn give_ups_apart(failover: Failover) -> Config {
    let mut config = locks(failover);
    config.give_ups_apart = true;
    // The release and a give-back, both in the network.
    config.max_orphans = 2;
    config.fence_ops = false;
    config
}

#[test]
fn a_give_up_whose_release_is_lost_leaves_one_holder() {
    for failover in [Failover::Planned, Failover::Crash] {
        let config = give_ups_apart(failover);
        let checker = check(&format!("give-ups apart, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &LOCK_PROPERTIES,
            &["a waiter is handed the lock"],
        );
    }
    // Sessions give up the same way (a waiter's open that fails).
    let mut config = sessions(Failover::Planned);
    config.give_ups_apart = true;
    config.max_orphans = 2;
    let checker = check("session give-ups apart", config, None);
    assert_holds(
        &*checker,
        &[WRITES_KEPT, EXPIRY, INTEREST, HOLDS],
        &["a session write acknowledged"],
    );
}

/// Fix (t) reverted (stop 47's review, now in the model): the give-up's
/// release goes unanswered and the token is left to the lock's next acquire(),
/// which adopts the lock resolve.lua still finds; the late release then frees
/// it behind the holder, and another client takes it.
#[test]
fn reverted_t_a_give_up_whose_release_is_lost_is_adopted_beside_another_holder() {
    let mut config = give_ups_apart(Failover::Planned);
    config.fixes.give_up_defers_release = false;
    let checker = check("(t) a give-up's token adopted", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// Fix (q) reverted in `Lock::settle`: the next acquire() asks resolve.lua
/// about the unresolved token before its give-back runs, adopts the lock it
/// still holds, and the give-back then frees it behind the holder.
#[test]
fn reverted_q_settle_adopts_a_given_back_token_beside_another_holder() {
    let mut config = unanswered_give_ups(Failover::Planned);
    config.fixes.given_back_dropped = false;
    let checker = check("(q) settle adopts a given-back token", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// A reader that upgrades and a writer that downgrades, wait_replicas=1, a
/// failover: the watchdog's check finds read holds on the new master too.
fn read_write_failover(failover: Failover) -> Config {
    let mut config = locks(failover);
    // Upgrades get their fence from the grant; the holder's own fence.lua call
    // is covered by the lock configurations.
    config.fence_ops = false;
    config.clients = vec![reader(true, false), writer(true)];
    config
}

#[test]
fn read_write_locks_across_a_failover_with_wait_replicas() {
    for failover in [Failover::Planned, Failover::Crash] {
        let config = read_write_failover(failover);
        let checker = check(&format!("read/write, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &RW_PROPERTIES,
            &["a hold on the promoted master"],
        );
    }
}

/// Three semaphore objects on one key, with limits 1, 2 and 2: a permit is
/// admitted while fewer than the admitting object's limit are held; a released
/// permit goes to the first waiter; a crashed holder's permit frees at its ttl.
fn semaphores() -> Config {
    let mut config = locks(Failover::Planned);
    config.clients = vec![permits(2, 1), permits(1, 2), permits(2, 2)];
    config.failovers = vec![];
    config.wait_replicas = false;
    config.fence_ops = false;
    config.crashes = 1;
    config.horizon = if deep() { 5 } else { 4 };
    config
}

#[test]
fn semaphore_permits_never_exceed_the_admitting_limit() {
    let checker = check("semaphores", semaphores(), None);
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &["permits at the limit", "a permit handed to a waiter"],
    );
}

/// Fix (aa) reverted: a newcomer whose attempt hands a permit to the waiter at
/// the head of the queue (a crashed holder's ran out) is told its token was
/// voided, gives up without leaving the queue, and is handed a permit for
/// nobody.
#[test]
fn reverted_aa_a_newcomer_told_voided_is_handed_a_permit_for_nobody() {
    let mut config = semaphores();
    config.fixes.scripts.busy_after_grant = false;
    let checker = check("(aa) busy counted before the grant", config, Some(INTEREST));
    assert_violated(&*checker, INTEREST);
}

/// Several permits at once (issue 28): a semaphore of 3, a client taking 2 at a
/// time (twice), one taking 1, one taking 3 (all of them); FIFO, so the large
/// request at the head is not overtaken by a smaller one behind it.
fn weighted_semaphores() -> Config {
    let mut config = semaphores();
    config.clients = vec![weighted(2, 3, 2), weighted(1, 3, 1), weighted(1, 3, 3)];
    config
}

#[test]
fn weighted_permits_never_exceed_the_admitting_limit() {
    let checker = check("weighted semaphores", weighted_semaphores(), None);
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &[
            "permits at the limit",
            "a permit handed to a waiter",
            "several permits at once, beside another holder",
        ],
    );
}

/// Weighted permits through links that fail after a command was sent, and a
/// client that may crash (review, stop 51: permits were checked without faults):
/// a lost acquire's permits adopted with their weight (resolve.lua) or voided,
/// a lost release sent again finding nothing, a crashed holder's permits freed
/// at their ttl.
fn weighted_semaphore_faults() -> Config {
    let mut config = weighted_semaphores();
    config.clients = vec![weighted(1, 3, 2), weighted(1, 3, 2), weighted(1, 3, 1)];
    config.faults = 1;
    config.faulty = |_| true;
    config.horizon = if deep() { 3 } else { 2 };
    config
}

#[test]
fn weighted_permits_through_broken_links_and_crashes() {
    let checker = check(
        "weighted semaphores, broken links",
        weighted_semaphore_faults(),
        None,
    );
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &["permits at the limit", "a permit handed to a waiter"],
    );
}

/// Fix (k) reverted, for permits: resolve.lua adopts a permit its token took
/// without voiding the token, and the late attempt then takes permits for
/// nobody.
#[test]
fn reverted_k_a_late_permit_attempt_of_an_adopted_token_takes_permits_for_nobody() {
    let mut config = weighted_semaphore_faults();
    config.fixes.scripts.resolve_voids_holder = false;
    let checker = check("(k) for permits", config, Some(INTEREST));
    assert_violated(&*checker, INTEREST);
}

/// Fix (m) reverted: a hold of several permits counted as one admits past the
/// limit.
#[test]
fn reverted_m_weights_counted_as_one_admit_past_the_limit() {
    let mut config = weighted_semaphores();
    config.fixes.scripts.weights_counted = false;
    let checker = check("(m) a weighted hold counted as one", config, Some(PERMITS));
    assert_violated(&*checker, PERMITS);
}

/// Fix (n) reverted: a waiter joins behind a lock taken on the fast path
/// without giving it a fence, so its holder's release, trusting the empty fence
/// to mean nobody queued (o), deletes it and hands it to nobody: the waiter
/// sleeps until it asks again, with the lock free.
#[test]
fn reverted_n_a_release_trusting_an_empty_fence_strands_a_waiter() {
    let mut config = locks(Failover::Planned);
    config.failovers = vec![];
    config.wait_replicas = false;
    config.fixes.scripts.join_assigns_fence = false;
    let checker = check(
        "(n) a join that leaves the fence empty",
        config,
        Some(HANDOFF),
    );
    assert_violated(&*checker, HANDOFF);
}

#[test]
fn semaphore_permits_across_a_failover_with_wait_replicas() {
    for failover in [Failover::Planned, Failover::Crash] {
        let mut config = locks(failover);
        config.clients = vec![permits(2, 1), weighted(1, 3, 2)];
        config.fence_ops = false;
        let checker = check(&format!("semaphores, {failover:?}"), config, None);
        assert_holds(
            &*checker,
            &RW_PROPERTIES,
            &["a hold on the promoted master"],
        );
    }
}

/// A reader detaches its token; another client restores it and calls
/// synchronized() (the lock alone) on it, while a second reader reads.
fn moved_tokens() -> Config {
    let mut config = read_write();
    config.clients = vec![reader(false, true), reader(true, false), RESTORER];
    config.horizon = if deep() { 5 } else { 4 };
    config
}

#[test]
fn a_restored_token_is_asked_about_before_it_is_relied_on() {
    let checker = check("moved tokens", moved_tokens(), None);
    assert_holds(
        &*checker,
        &RW_PROPERTIES,
        &["readers share the lock", "a restored hold relied on"],
    );
}

/// Fix (g) reverted, the first bug of issue 27: synchronized() on a restored
/// read token takes it for the lock alone, and runs its callback beside the
/// other reader.
#[test]
fn reverted_g_a_restored_read_token_taken_for_the_lock_alone_gives_a_writer_beside_a_reader() {
    let mut config = moved_tokens();
    config.fixes.restore_verifies = false;
    let checker = check("(g) restore without asking", config, Some(MUTEX));
    assert_violated(&*checker, MUTEX);
}

/// A writer detaches its token; another client restores it and calls
/// synchronized() on it, while a reader reads: the restored hold is relied on
/// only once Redis says it holds the lock alone (its lease may have run out,
/// and the reader come in, meanwhile).
fn moved_write_tokens() -> Config {
    let mut config = read_write();
    let mut detaching = writer(false);
    if let Program::Writer { detach, .. } = &mut detaching {
        *detach = true;
    }
    config.clients = vec![detaching, reader(false, false), RESTORER];
    config.horizon = if deep() { 5 } else { 4 };
    config
}

#[test]
fn a_restored_write_token_is_relied_on_only_while_it_holds_alone() {
    let checker = check("moved write tokens", moved_write_tokens(), None);
    assert_holds(&*checker, &RW_PROPERTIES, &["a restored hold relied on"]);
}

/// The same across a failover, with wait_replicas=1: the writer (`read`: a
/// reader, beside a writer) may refresh its hold (ttl 4 of 2) before it
/// detaches, and that refresh's WAIT may fall short, leaving the master's
/// lease longer than the replica's.
fn restores_across_failover(failover: Failover, read: bool) -> Config {
    let mut config = moved_write_tokens();
    if read {
        config.clients = vec![
            Program::Reader {
                acquires: 1,
                upgrade: false,
                detach: true,
                retry: false,
                refresh: true,
            },
            writer(false),
            RESTORER,
        ];
    } else if let Program::Writer { refresh, .. } = &mut config.clients[0] {
        *refresh = true;
    }
    config.refresh_ttls = vec![4];
    config.failovers = vec![failover];
    config.wait_replicas = true;
    config.fence_ops = false;
    config.horizon = if deep() { 4 } else { 2 };
    config
}

/// A restored token counts on no more lease than the replica has: the read
/// is followed by a refresh that shortens nothing, WAITed for (stop 60).
#[test]
fn a_restored_hold_counts_on_no_more_than_the_replica_has() {
    for read in [false, true] {
        for failover in [Failover::Planned, Failover::Crash] {
            let name = format!("restores across a failover, {failover:?}, read {read}");
            let checker = check(&name, restores_across_failover(failover, read), None);
            assert_holds(&*checker, &RW_PROPERTIES, &["a restored hold relied on"]);
        }
    }
}

/// Fix (af) reverted: the restorer counts on the master's lease, which the
/// holder's refresh lengthened without the replica: a crash promotes the
/// replica, the lease ends there, and the other client comes in beside the
/// restorer (a reader beside a restored writer, a writer beside a restored
/// reader).
#[test]
fn reverted_af_a_restored_hold_counts_on_a_lease_the_replica_lacks() {
    for read in [false, true] {
        let mut config = restores_across_failover(Failover::Crash, read);
        config.fixes.restore_waits = false;
        let name = format!("(af) restore without WAIT, read {read}");
        let checker = check(&name, config, Some(MUTEX));
        assert_violated(&*checker, MUTEX);
    }
}

/// A semaphore of two: one client takes a permit and detaches its token;
/// another restores it and calls acquire() of `asked` permits on it, while a
/// third takes a permit. The restored permit is counted on only as Redis
/// describes it: its weight (acquire() of another weight throws) and its lease
/// (it may have run out, and let the third in, meanwhile).
fn moved_permits(asked: u8) -> Config {
    let mut config = semaphores();
    let mut detaching = permits(1, 2);
    if let Program::Permit { detach, .. } = &mut detaching {
        *detach = true;
    }
    config.clients = vec![
        detaching,
        permits(1, 2),
        Program::Restorer { permits: asked },
    ];
    config.horizon = if deep() { 6 } else { 5 };
    config
}

/// The same through links that fail after a command was sent (the question,
/// the extension, the release).
fn moved_permit_faults(asked: u8) -> Config {
    let mut config = moved_permits(asked);
    config.faults = 1;
    config.faulty = |_| true;
    config.horizon = if deep() { 5 } else { 4 };
    config
}

#[test]
fn a_restored_permit_is_counted_on_only_as_redis_describes_it() {
    for asked in [1, 2] {
        for (name, config) in [
            ("moved permits", moved_permits(asked)),
            ("moved permits, broken links", moved_permit_faults(asked)),
        ] {
            let checker = check(&format!("{name}, acquire({asked})"), config, None);
            assert_holds(
                &*checker,
                &RW_PROPERTIES,
                &["permits at the limit", "a restored hold relied on"],
            );
        }
    }
}

/// Fix (g) reverted for a permit: acquire(2) on a restored permit of one
/// takes the hold for two without asking, extends it, and counts on two
/// beside the third client's permit: three of two.
#[test]
fn reverted_g_a_restored_permit_taken_for_the_weight_asked_admits_past_the_limit() {
    let mut config = moved_permits(2);
    config.fixes.restore_verifies = false;
    let checker = check("(g) permit restored without asking", config, Some(PERMITS));
    assert_violated(&*checker, PERMITS);
}

/// A restored permit across a failover, with wait_replicas=1: a semaphore of
/// two; the detaching client may refresh its permit of one (ttl 4 of 2)
/// before it detaches, and that refresh's WAIT may fall short, leaving the
/// master's lease longer than the replica's; a third client asks for two.
fn permits_restored_across_failover(failover: Failover) -> Config {
    let mut config = moved_permits(1);
    config.clients = vec![
        Program::Permit {
            acquires: 1,
            limit: 2,
            weight: 1,
            refreshes: 1,
            detach: true,
        },
        weighted(1, 2, 2),
        Program::Restorer { permits: 1 },
    ];
    config.refresh_ttls = vec![4];
    config.failovers = vec![failover];
    config.wait_replicas = true;
    config.crashes = 0;
    config.horizon = if deep() { 4 } else { 2 };
    config
}

/// A restored permit counts on no more than the replica has: never three
/// permits of two. (With fix (af) reverted too, within these bounds: the
/// restorer's `acquire()` extends the permit, WAITed for, before it counts.)
#[test]
fn a_restored_permit_counts_on_no_more_than_the_replica_has() {
    for failover in [Failover::Planned, Failover::Crash] {
        for restore_waits in [true, false] {
            let name =
                format!("permits restored across a failover, {failover:?}, (af) {restore_waits}");
            let mut config = permits_restored_across_failover(failover);
            config.fixes.restore_waits = restore_waits;
            let checker = check(&name, config, None);
            assert_holds(
                &*checker,
                &RW_PROPERTIES,
                &["permits at the limit", "a restored hold relied on"],
            );
        }
    }
}

/// Waiters that may stall past their lease: their wait (3) outlasts the ttl
/// (1), so a grant one never read can end while it still waits and asks again.
fn long_waits(clients: Vec<Program>) -> Config {
    let mut config = locks(Failover::Planned);
    config.clients = clients;
    config.failovers = vec![];
    config.wait_replicas = false;
    config.ttl = 1;
    config.wait = 3;
    config.horizon = 4;
    config
}

fn long_wait_cases() -> [(&'static str, Vec<Program>, &'static str); 4] {
    let lock = |acquires| Program::Lock {
        acquires,
        refreshes: 0,
    };
    [
        (
            "locks",
            vec![lock(2), lock(1)],
            "a waiter is handed the lock",
        ),
        (
            "sessions",
            vec![
                Program::Session {
                    opens: 2,
                    logout: false,
                },
                Program::Session {
                    opens: 1,
                    logout: false,
                },
            ],
            "a session write acknowledged",
        ),
        (
            "readers and a writer",
            vec![reader(false, false), reader(false, false), writer(false)],
            "readers share the lock",
        ),
        (
            "permits",
            vec![permits(2, 1), permits(1, 1)],
            "a waiter is handed the lock",
        ),
    ]
}

#[test]
fn a_waiter_that_outwaits_its_grant_holds_nothing() {
    for (name, clients, reached) in long_wait_cases() {
        let mut config = long_waits(clients);
        config.fence_ops = name == "locks";
        let checker = check(&format!("long waits, {name}"), config, None);
        assert_holds(
            &*checker,
            &[
                MUTEX,
                FENCES,
                EXPIRY,
                PERMITS,
                INTEREST,
                HOLDS,
                HANDOFF,
                WRITES_KEPT,
            ],
            &[reached],
        );
    }
}

/// Fix (p) reverted, found by review: a waiter's grant ends unread (it stalled
/// past the ttl) and another client takes what it was granted; the waiter's
/// next attempt queues it again, and its BLPOP pops the old grant: two holders
/// (a lock, a writer beside readers, permits over the limit). A session's
/// request would hold its lock beside another too, but no property here sees
/// it: the stale holder's save is owner-checked and refused, so no acknowledged
/// write is lost (tests/session.rs checks its wake-up is cleared).
#[test]
fn reverted_p_a_grant_left_unread_popped_later_gives_two_holders() {
    for (name, clients, _) in long_wait_cases() {
        if name == "sessions" {
            continue;
        }
        let mut config = long_waits(clients);
        config.fence_ops = name == "locks";
        config.fixes.scripts.join_clears_wake = false;
        let property = if name == "permits" { PERMITS } else { MUTEX };
        let checker = check(
            &format!("(p) a join keeps a stale wake-up, {name}"),
            config,
            Some(property),
        );
        assert_violated(&*checker, property);
    }
}

/// A forced release (`forceRelease()`, force_release.lua) while one client
/// holds the lock (and takes it again after) and another waits for it, alone
/// or as a reader; the forced release's reply may be lost (sent again, it
/// answers by its marker). Whoever it took the lock from learns so at its
/// next call: its hold is not counted in mutual exclusion until it asks again.
fn forced(reader: bool) -> Config {
    let mut config = locks(Failover::Planned);
    let waiter = match reader {
        true => Program::Reader {
            acquires: 1,
            upgrade: false,
            detach: false,
            retry: false,
            refresh: false,
        },
        false => Program::Lock {
            acquires: 1,
            refreshes: 0,
        },
    };
    config.clients = vec![
        Program::Lock {
            acquires: 2,
            refreshes: 0,
        },
        waiter,
        Program::Forcer,
    ];
    config.failovers = vec![];
    config.wait_replicas = false;
    config.fence_ops = false;
    config.faults = 1;
    config.faulty = |req| matches!(req, client::Req::Force { .. });
    config
}

/// A forced release takes the lock from its holder, and the grant from a
/// waiter the release before it handed the lock (or a reader its shared
/// hold) that has not read it yet: that waiter asks again (fix (ag)).
#[test]
fn a_forced_release_takes_the_grant_of_a_waiter_not_woken_yet() {
    for reader in [false, true] {
        let name = format!(
            "forced release, waiter {}",
            ["alone", "reader"][usize::from(reader)]
        );
        let checker = check(&name, forced(reader), None);
        assert_holds(
            &*checker,
            &[
                MUTEX,
                NOT_WOKEN_FORCED,
                EXPIRY,
                INTEREST,
                HOLDS,
                HANDOFF,
                REPORTED,
            ],
            &[
                "a forced release takes a grant before its waiter woke",
                "a waiter is handed the lock",
            ],
        );
    }
}

/// Fix (ag) reverted: force_release.lua leaves the wake-up lists of the holds
/// it takes; a waiter handed the lock by the release before it pops that
/// grant after the forced release and holds beside the next holder (review,
/// stop 64).
#[test]
fn reverted_ag_a_waiter_granted_before_a_forced_release_holds_beside_the_next() {
    for (reader, property) in [(false, NOT_WOKEN_FORCED), (false, MUTEX), (true, MUTEX)] {
        let mut config = forced(reader);
        config.fixes.scripts.force_unwakes = false;
        let checker = check(
            "(ag) forced release leaves the wake-up",
            config,
            Some(property),
        );
        assert_violated(&*checker, property);
    }
}
