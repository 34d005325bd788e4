//! What this process could not settle because Redis did not answer: a lease to
//! free, or a claim whose outcome is unknown (it may hold the lease, or a place in
//! the queue, or still be on its way in a socket buffer). Each is settled by the
//! process's next call to the same endpoint, so a session or lock is not blocked
//! for a whole lease because one release went unanswered.
//!
//! Settling is the leftover's own business (for a lease: free it if the token
//! holds it, and otherwise take the token out of the queue and void it). An
//! entry is dropped once it can no longer matter, or when the list is full. A
//! token listed here (its release sent, or due) is never counted on again: an
//! object that kept it asks `left_to_settle` before it would adopt it.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::pid::PerProcess;
use crate::core::token::Token;

/// More leftovers than this means Redis has been gone for a long time; the
/// oldest are dropped (their leases end by themselves).
const MAX_ENTRIES: usize = 1024;

/// Something to settle with Redis at `endpoint()`, when it answers again.
pub(crate) trait Leftover: Send + Sync {
    fn endpoint(&self) -> &Endpoint;
    /// The token it settles.
    fn token(&self) -> &Token;
    /// Settles it; an error reply that will not pass is final, any other
    /// error means "try later".
    fn settle(&self) -> Result<()>;
}

struct Entry {
    left: Arc<dyn Leftover>,
    until: Instant,
    /// Being settled by a thread right now: listed until it is done, so that
    /// `left_to_settle` still sees it.
    busy: bool,
}

/// This process's entries: a forked child does not settle its parent's, nor
/// waits on a lock another thread of its parent held at the fork (under ZTS).
static PENDING: PerProcess<Mutex<Vec<Entry>>> = PerProcess::new();
/// Whether any entry may be waiting, so that settling costs nothing otherwise.
static ANY: AtomicBool = AtomicBool::new(false);

fn with_entries<T>(f: impl FnOnce(&mut Vec<Entry>) -> T) -> T {
    let mut entries = PENDING.get(|| Mutex::new(Vec::new()), |_| {}).lock();
    let out = f(&mut entries);
    ANY.store(!entries.is_empty(), Ordering::Release);
    out
}

/// Leaves `left` to be settled later, for as long as it can matter (`keep`).
pub(crate) fn defer(left: Box<dyn Leftover>, keep: Duration) {
    with_entries(|entries| {
        if entries.len() >= MAX_ENTRIES {
            // The oldest not being settled: one that is stays listed.
            if let Some(i) = entries.iter().position(|e| !e.busy) {
                entries.remove(i);
            }
        }
        entries.push(Entry {
            left: Arc::from(left),
            until: Instant::now() + keep,
            busy: false,
        });
    });
}

/// Whether `token` is left to be settled (or being settled): its release was
/// sent, or is due, and it must never be counted on again. By the token alone
/// (128 random bits): the same server may be reached by DSNs that differ in
/// their options.
pub(crate) fn left_to_settle(token: &Token) -> bool {
    ANY.load(Ordering::Acquire)
        && with_entries(|entries| entries.iter().any(|e| e.left.token() == token))
}

/// Settles what is left for `ep`, before the caller's own command. When Redis
/// cannot be reached for that, the caller's command would fail too: the error is
/// returned instead, at the cost of one timeout, not two. A server that answers
/// but refuses for now (busy, loading, demoted) keeps what is left for a later
/// call, and lets the caller's command meet it (or find it over) on its own.
pub(crate) fn settle(ep: &Endpoint) -> Result<()> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(());
    }
    let now = Instant::now();
    loop {
        let next = with_entries(|entries| {
            entries.retain(|e| e.busy || e.until > now);
            let e = entries
                .iter_mut()
                .find(|e| !e.busy && *e.left.endpoint() == *ep)?;
            e.busy = true;
            Some(Arc::clone(&e.left))
        });
        let Some(left) = next else {
            return Ok(());
        };
        // A panic must not leave it busy (listed for ever, never settled).
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| left.settle()));
        // An error reply that will not go away by asking again: the entry
        // goes, as when settled. Still unreachable, or refused for now: it
        // stays, with the rest, for another time. Dropped, its token could keep
        // the lease (or a place in the queue) for nobody until it ran out.
        let again = !matches!(
            &outcome,
            Ok(Ok(()) | Err(Error::Reply { passing: false, .. }))
        );
        with_entries(|entries| {
            if again {
                if let Some(e) = entries.iter_mut().find(|e| Arc::ptr_eq(&e.left, &left)) {
                    e.busy = false;
                }
            } else {
                entries.retain(|e| !Arc::ptr_eq(&e.left, &left));
            }
        });
        match outcome {
            Err(p) => panic::resume_unwind(p),
            Ok(Err(Error::Reply { .. })) if again => return Ok(()),
            Ok(Err(e)) if again => return Err(e),
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::dsn::Timeouts;
    use std::sync::mpsc;

    /// A leftover whose settling waits for the test's word.
    struct Gated {
        ep: Endpoint,
        token: Token,
        started: Mutex<mpsc::Sender<()>>,
        go: Mutex<mpsc::Receiver<Result<()>>>,
    }

    impl Leftover for Gated {
        fn endpoint(&self) -> &Endpoint {
            &self.ep
        }
        fn token(&self) -> &Token {
            &self.token
        }
        fn settle(&self) -> Result<()> {
            self.started.lock().send(()).expect("test waits");
            self.go.lock().recv().expect("test answers")
        }
    }

    /// A `Gated` leftover deferred for an endpoint of its own (`prefix`): its
    /// endpoint, token, the word that settling began, and the answer to give.
    fn gated(
        prefix: &str,
    ) -> (
        Endpoint,
        Token,
        mpsc::Receiver<()>,
        mpsc::Sender<Result<()>>,
    ) {
        let dsn = format!("redis://127.0.0.1:1/?prefix={prefix}");
        let ep = Endpoint::parse(&dsn, Timeouts::default()).expect("dsn");
        let token = Token::generate();
        let (started_tx, started) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        defer(
            Box::new(Gated {
                ep: ep.clone(),
                token: token.clone(),
                started: Mutex::new(started_tx),
                go: Mutex::new(go_rx),
            }),
            Duration::from_secs(60),
        );
        (ep, token, started, go)
    }

    /// A token another thread is settling right now is still left to settle:
    /// an object asking then must not adopt it (the release may still run).
    #[test]
    fn a_token_being_settled_is_still_left_to_settle() {
        let (ep, token, started, go) = gated("pending-test");
        assert!(left_to_settle(&token));
        let settler = {
            let ep = ep.clone();
            std::thread::spawn(move || settle(&ep))
        };
        started.recv().expect("settling began");
        assert!(left_to_settle(&token), "listed while being settled");
        // Another thread settling meanwhile does not run it twice.
        assert!(settle(&ep).is_ok());
        // Unreachable: it stays for another time.
        go.send(Err(Error::Connection("down".into())))
            .expect("settler");
        assert!(settler.join().expect("settler").is_err());
        assert!(left_to_settle(&token), "kept after a failed try");
        let settler = {
            let ep = ep.clone();
            std::thread::spawn(move || settle(&ep))
        };
        started.recv().expect("settling began again");
        go.send(Ok(())).expect("settler");
        assert!(settler.join().expect("settler").is_ok());
        assert!(!left_to_settle(&token), "gone once settled");
    }

    /// A refusal that passes (a server busy or demoted for now) keeps the
    /// leftover for a later call, without failing the caller's; a refusal that
    /// stands drops it.
    #[test]
    fn a_passing_refusal_keeps_the_leftover() {
        let (ep, token, started, go) = gated("pending-passing");
        let refusal = |passing| {
            Err(Error::Reply {
                message: "refused".into(),
                passing,
            })
        };
        go.send(refusal(true)).expect("answer");
        assert!(settle(&ep).is_ok(), "the caller's command goes on");
        started.try_recv().expect("settling was tried");
        assert!(left_to_settle(&token), "kept after a passing refusal");
        go.send(refusal(false)).expect("answer");
        assert!(settle(&ep).is_ok());
        started.try_recv().expect("settling was tried again");
        assert!(!left_to_settle(&token), "dropped after a standing refusal");
    }
}
