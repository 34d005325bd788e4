//! What this process could not settle because Redis did not answer: a lease to
//! free, or a claim whose outcome is unknown (it may hold the lease, or a place in
//! the queue, or still be on its way in a socket buffer). Each is settled by the
//! process's next call to the same endpoint, so a session or lock is not blocked
//! for a whole lease because one release went unanswered.
//!
//! Settling is the leftover's own business (for a lease: free it if the token
//! holds it, and otherwise take the token out of the queue and void it). An
//! entry is dropped once it can no longer matter, or when the list is full.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};

/// More leftovers than this means Redis has been gone for a long time; the
/// oldest are dropped (their leases end by themselves).
const MAX_ENTRIES: usize = 1024;

/// Something to settle with Redis at `endpoint()`, when it answers again.
pub(crate) trait Leftover: Send {
    fn endpoint(&self) -> &Endpoint;
    /// Settles it; an error reply is final, any other error means "try later".
    fn settle(&self) -> Result<()>;
}

struct Entry {
    left: Box<dyn Leftover>,
    until: Instant,
}

/// The owning pid and its entries: a forked child does not settle its parent's.
static PENDING: Mutex<Option<(u32, Vec<Entry>)>> = Mutex::new(None);
/// Whether any entry may be waiting, so that settling costs nothing otherwise.
static ANY: AtomicBool = AtomicBool::new(false);

fn with_entries<T>(f: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
    let mut guard = PENDING.lock();
    let pid = crate::core::pid::current();
    if guard.as_ref().is_none_or(|(p, _)| *p != pid) {
        *guard = Some((pid, Vec::new()));
    }
    let entries = &mut guard.as_mut().expect("just set").1;
    let out = f(entries);
    ANY.store(!entries.is_empty(), Ordering::Release);
    out
}

/// Leaves `left` to be settled later, for as long as it can matter (`keep`).
pub(crate) fn defer(left: Box<dyn Leftover>, keep: Duration) {
    with_entries(|entries| {
        if entries.len() >= MAX_ENTRIES {
            entries.remove(0);
        }
        entries.push(Entry {
            left,
            until: Instant::now() + keep,
        });
    });
}

/// Settles what is left for `ep`, before the caller's own command. When Redis
/// cannot be reached for that, the caller's command would fail too: the error is
/// returned instead, at the cost of one timeout, not two.
pub(crate) fn settle(ep: &Endpoint) -> Result<()> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let now = Instant::now();
    let mine: Vec<Entry> = with_entries(|entries| {
        entries.retain(|e| e.until > now);
        let (mine, rest) = std::mem::take(entries)
            .into_iter()
            .partition(|e| *e.left.endpoint() == *ep);
        *entries = rest;
        mine
    });
    let mut mine = mine.into_iter();
    while let Some(entry) = mine.next() {
        match entry.left.settle() {
            Ok(()) => {}
            // An error reply will not go away by asking again: drop the entry.
            Err(Error::Reply(_)) => {}
            Err(e) => {
                // Still unreachable: keep it and the rest for another time.
                with_entries(|entries| {
                    entries.push(entry);
                    entries.extend(mine);
                });
                return Err(e);
            }
        }
    }
    Ok(())
}
