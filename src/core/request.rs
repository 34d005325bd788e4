//! The leases the current request holds, so that its end frees them even when
//! their objects outlive it (a fatal error skips destructors of objects in
//! cycles and static properties until the executor shuts down).
//!
//! Kept per thread: PHP runs a request on one thread, and under ZTS several
//! requests run at once on threads of one process; one request's end must never
//! release another's locks.
//!
//! A thread that serves requests ([`begin`]) and ends in the middle of one
//! (under ZTS: no shutdown hook runs for it) frees what it still holds as it
//! goes, locks and session locks alike: otherwise the watchdog would renew them
//! for the life of the process. (A thread that never called [`begin`] keeps
//! nothing from its end: outside PHP, a holder may outlive the thread that took
//! it, moved to another one.)

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::core::lease::{Hold, Lease};

struct Held {
    /// The process the entries belong to: a forked child inherits the parent's
    /// thread-local values, but not its leases to release.
    pid: u32,
    /// This thread serves requests: its end frees what is left.
    serves: bool,
    leases: Vec<(u64, Arc<Lease>, Hold)>,
    /// Session locks: freed by the session's own close (ext/session writes and
    /// closes in its RSHUTDOWN), so only a dying thread's go here.
    sessions: Vec<(Lease, Hold)>,
}

impl Held {
    fn mine(&mut self) -> &mut Self {
        let pid = crate::core::pid::current();
        if self.pid != pid {
            self.pid = pid;
            self.serves = false;
            self.leases.clear();
            self.sessions.clear();
        }
        self
    }
}

impl Drop for Held {
    /// The thread ends: what its request still holds is freed (released, or
    /// left for the process's next call when Redis does not answer). Runs among
    /// the thread's destructors, where this thread's other thread-locals may be
    /// gone (a release that needs one panics): so every renewal stops first,
    /// and each release that fails so is left for the process's next call.
    fn drop(&mut self) {
        if !self.serves || self.pid != crate::core::pid::current() {
            return;
        }
        let held: Vec<(Arc<Lease>, Hold)> = std::mem::take(&mut self.leases)
            .into_iter()
            .map(|(_, lease, hold)| (lease, hold))
            .chain(
                std::mem::take(&mut self.sessions)
                    .into_iter()
                    .map(|(lease, hold)| (Arc::new(lease), hold)),
            )
            .collect();
        for (_, hold) in &held {
            hold.stop_watch();
        }
        for (lease, hold) in held {
            let released = std::panic::catch_unwind(AssertUnwindSafe(|| {
                lease.release_or_defer(&hold, false, true);
            }));
            if released.is_err() {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    lease.defer(hold.token.clone(), hold.ttl);
                }));
            }
        }
    }
}

thread_local! {
    static HELD: RefCell<Held> = const {
        RefCell::new(Held { pid: 0, serves: false, leases: Vec::new(), sessions: Vec::new() })
    };
}

fn with_held<T>(f: impl FnOnce(&mut Vec<(u64, Arc<Lease>, Hold)>) -> T) -> T {
    HELD.with(|held| f(&mut held.borrow_mut().mine().leases))
}

/// A request starts on this thread (PHP's request startup): from now on, the
/// thread's end frees what its request still holds.
pub fn begin() {
    let _ = HELD.try_with(|held| held.borrow_mut().mine().serves = true);
}

/// Records that this thread's request holds session lock `hold` (until
/// [`session_unlocked`]).
pub fn session_locked(lease: &Lease, hold: &Hold) {
    let _ = HELD.try_with(|held| {
        held.borrow_mut()
            .mine()
            .sessions
            .push((lease.clone(), hold.clone()));
    });
}

/// Forgets session lock `hold` (saved, closed or given up by its session).
pub fn session_unlocked(hold: &Hold) {
    let _ = HELD.try_with(|held| {
        held.borrow_mut()
            .mine()
            .sessions
            .retain(|(_, h)| h.token != hold.token);
    });
}

/// Records that object `id` holds `hold` on `lease` (replacing what it held before).
pub fn track(id: u64, lease: &Arc<Lease>, hold: &Hold) {
    with_held(|leases| {
        leases.retain(|(i, _, _)| *i != id);
        leases.push((id, lease.clone(), hold.clone()));
    });
}

/// Forgets what object `id` holds. True when it held something still tracked:
/// false means the request's end (or a bailout guard) released it already.
pub fn untrack(id: u64) -> bool {
    with_held(|leases| {
        let before = leases.len();
        leases.retain(|(i, _, _)| *i != id);
        leases.len() != before
    })
}

/// Releases what object `id` holds (after a fatal error in its callback, which
/// ends the request).
pub fn let_go(id: u64) {
    let entry = with_held(|leases| {
        let i = leases.iter().position(|(i, _, _)| *i == id)?;
        Some(leases.swap_remove(i))
    });
    if let Some((_, lease, hold)) = entry {
        lease.release_or_defer(&hold, false, true);
    }
}

/// Releases everything this request still holds: after every extension's
/// RSHUTDOWN (post-deactivate), where ext/session has written the session
/// through whatever handler the application gave it.
pub fn end() {
    for (_, lease, hold) in with_held(std::mem::take) {
        lease.release_or_defer(&hold, false, true);
    }
}

/// How many leases this request holds (for tests).
pub fn held() -> usize {
    with_held(|leases| leases.len())
}

/// How many session locks this thread's request holds (for tests).
pub fn sessions_held() -> usize {
    HELD.with(|held| held.borrow_mut().mine().sessions.len())
}
