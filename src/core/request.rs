//! The leases the current request holds, so that its end frees them even when
//! their objects outlive it (a fatal error skips destructors of objects in
//! cycles and static properties until after the request's shutdown hook).
//!
//! Kept per thread: PHP runs a request on one thread, and under ZTS several
//! requests run at once on threads of one process; one request's end must never
//! release another's locks.

use std::cell::RefCell;
use std::sync::Arc;

use crate::core::lease::{Hold, Lease};

struct Held {
    /// The process the entries belong to: a forked child inherits the parent's
    /// thread-local values, but not its leases to release.
    pid: u32,
    leases: Vec<(u64, Arc<Lease>, Hold)>,
}

thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held { pid: 0, leases: Vec::new() }) };
}

fn with_held<T>(f: impl FnOnce(&mut Vec<(u64, Arc<Lease>, Hold)>) -> T) -> T {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        let pid = crate::core::pid::current();
        if held.pid != pid {
            held.pid = pid;
            held.leases.clear();
        }
        f(&mut held.leases)
    })
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

/// Releases everything this request still holds: the request's shutdown hook.
pub fn end() {
    for (_, lease, hold) in with_held(std::mem::take) {
        lease.release_or_defer(&hold, false, true);
    }
}

/// How many leases this request holds (for tests).
pub fn held() -> usize {
    with_held(|leases| leases.len())
}
