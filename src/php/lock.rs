//! `DistributedLock`: converts PHP values and errors, and keeps the per-object
//! state; the lease logic is in `core::lease`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, Zval};
use ext_php_rs::zend::BailoutGuard;
use parking_lot::Mutex;

use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::lease::{seconds, Hold, Lease, LeaseKeys, Token};
use crate::php::args::{Bytes, Float};
use crate::php::errors::{lock_lost_exception, lock_timeout_exception};
use crate::php::ini;

/// Longest lock key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Leases held by this process that must not outlive the request: released at
/// RSHUTDOWN if their object has not released them yet (a fatal error skips
/// destructors of objects in cycles and static properties until after it).
static HELD: Mutex<Option<HeldLeases>> = Mutex::new(None);

/// The pid that owns the entries, and the leases by object id.
type HeldLeases = (u32, HashMap<u64, (Arc<Lease>, Token)>);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn with_held<T>(f: impl FnOnce(&mut HashMap<u64, (Arc<Lease>, Token)>) -> T) -> T {
    let mut guard = HELD.lock();
    let pid = std::process::id();
    if guard.as_ref().is_none_or(|(p, _)| *p != pid) {
        // Leases of the parent process are not ours to release after fork().
        *guard = Some((pid, HashMap::new()));
    }
    f(&mut guard.as_mut().expect("just set").1)
}

/// Releases what this request still holds; called from RSHUTDOWN.
pub fn release_request_leases() {
    let leftover: Vec<(Arc<Lease>, Token)> =
        with_held(|held| held.drain().map(|(_, v)| v).collect());
    for (lease, token) in leftover {
        // Best effort: the lease expires on its own if Redis cannot be reached.
        let _ = lease.release_token(&token);
    }
}

#[derive(Default)]
struct State {
    hold: Option<Hold>,
    /// An acquire attempt whose outcome Redis could not confirm yet.
    unresolved: Option<Token>,
    /// A release of `hold` timed out: it may have run.
    release_sent: bool,
}

/// A lease-based lock on one Redis key. See stubs/redis_lease.stub.php.
#[php_class]
#[php(name = "DistributedLock")]
#[php(flags = ClassFlags::Final)]
pub struct DistributedLock {
    id: u64,
    pid: u32,
    key: Vec<u8>,
    ttl: Duration,
    lease: Arc<Lease>,
    state: RefCell<State>,
}

/// Releases a lease when a fatal error unwinds past `synchronized()`.
struct ReleaseOnBailout(Option<(u64, Arc<Lease>, Token)>);

impl Drop for ReleaseOnBailout {
    fn drop(&mut self) {
        if let Some((id, lease, token)) = self.0.take() {
            with_held(|h| h.remove(&id));
            let _ = lease.release_token(&token);
        }
    }
}

impl DistributedLock {
    fn hold_token(&self) -> Option<Token> {
        self.state.borrow().hold.as_ref().map(|h| h.token.clone())
    }

    fn set_hold(&self, hold: Option<Hold>) {
        match &hold {
            Some(h) => {
                with_held(|held| held.insert(self.id, (self.lease.clone(), h.token.clone())))
            }
            None => with_held(|held| held.remove(&self.id)),
        };
        self.state.borrow_mut().hold = hold;
    }

    /// Settles an earlier attempt whose outcome was unknown: adopt the lease if
    /// Redis says our token holds it.
    fn resolve_unresolved(&self) -> Result<()> {
        let Some(token) = self.state.borrow().unresolved.clone() else {
            return Ok(());
        };
        let found = self.lease.resolve(&token, self.ttl)?;
        self.state.borrow_mut().unresolved = None;
        if let Some((left, fence)) = found {
            let ttl = left.unwrap_or(self.ttl);
            self.set_hold(Some(Hold::new(
                token,
                fence,
                ttl,
                std::time::Instant::now(),
            )));
        }
        Ok(())
    }

    fn do_acquire(&self, wait: Duration) -> Result<bool> {
        self.resolve_unresolved()?;
        if let Some(token) = self.hold_token() {
            // Already ours? Then acquire() is a no-op, like Symfony's. If it was lost,
            // forget it and take a new lease.
            if self.lease.inspect(&token)?.is_some() {
                return Ok(true);
            }
            self.set_hold(None);
        }
        match self.lease.acquire(self.ttl, wait) {
            Ok(hold) => {
                let got = hold.is_some();
                self.set_hold(hold);
                Ok(got)
            }
            Err(Error::Unresolved { message, token }) => {
                self.state.borrow_mut().unresolved = Some(token.clone());
                Err(Error::Unresolved { message, token })
            }
            Err(e) => Err(e),
        }
    }

    fn do_release(&self) -> Result<bool> {
        self.resolve_unresolved()?;
        let Some(hold) = self.state.borrow().hold.clone() else {
            return Ok(false);
        };
        let maybe_done = self.state.borrow().release_sent;
        match self.lease.release(&hold, maybe_done) {
            Ok(released) => {
                self.state.borrow_mut().release_sent = false;
                self.set_hold(None);
                Ok(released)
            }
            Err(e) => {
                // Still ours as far as we know; the next release() settles it.
                self.state.borrow_mut().release_sent |= matches!(e, Error::Unresolved { .. });
                Err(e)
            }
        }
    }
}

#[php_impl]
impl DistributedLock {
    #[php(defaults(ttl = 30.0))]
    pub fn __construct(key: Bytes, ttl: Float, dsn: Option<Bytes>) -> PhpResult<Self> {
        let key = key.0;
        if key.is_empty() {
            return Err(Error::invalid(
                "DistributedLock::__construct(): Argument #1 ($key) must not be empty",
            )
            .into());
        }
        if key.len() > MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "DistributedLock::__construct(): Argument #1 ($key) must be at most {MAX_KEY_LEN} bytes, {} given",
                key.len()
            ))
            .into());
        }
        let ttl = seconds(
            "DistributedLock::__construct(): Argument #2 ($ttl)",
            ttl.0,
            false,
        )?;
        let dsn = match dsn {
            Some(d) => d.into_utf8("Invalid Redis DSN: it")?,
            None => ini::get(ini::DSN),
        };
        let endpoint = Endpoint::parse(&dsn, ini::timeouts()?)?;
        let keys = LeaseKeys::for_lock(ini::get(ini::LOCK_PREFIX).as_bytes(), &key);
        Ok(DistributedLock {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            pid: std::process::id(),
            key,
            ttl,
            lease: Arc::new(Lease::new(Arc::new(endpoint), keys)),
            state: RefCell::new(State::default()),
        })
    }

    /// True when we hold the lock; false when another holder still has it after `$wait` seconds.
    #[php(defaults(wait = 0.0))]
    pub fn acquire(&self, wait: Float) -> PhpResult<bool> {
        let wait = seconds(
            "DistributedLock::acquire(): Argument #1 ($wait)",
            wait.0,
            true,
        )?;
        Ok(self.do_acquire(wait)?)
    }

    /// True when the lock was ours and is now free; false when we had lost it or never held it.
    pub fn release(&self) -> PhpResult<bool> {
        Ok(self.do_release()?)
    }

    /// Extends our lease to `$ttl` seconds from now (default: the constructor's ttl).
    pub fn refresh(&self, ttl: Option<Float>) -> PhpResult<bool> {
        let ttl = match ttl {
            Some(t) => seconds("DistributedLock::refresh(): Argument #1 ($ttl)", t.0, false)?,
            None => self.ttl,
        };
        self.resolve_unresolved()?;
        let Some(mut hold) = self.state.borrow().hold.clone() else {
            return Ok(false);
        };
        let ok = self.lease.refresh(&mut hold, ttl)?;
        self.set_hold(ok.then_some(hold));
        Ok(ok)
    }

    /// Asks Redis whether our token still holds the key.
    pub fn is_acquired(&self) -> PhpResult<bool> {
        Ok(self.get_remaining_lifetime()?.is_some())
    }

    /// Seconds left on our lease per Redis; null when we do not hold it.
    pub fn get_remaining_lifetime(&self) -> PhpResult<Option<f64>> {
        self.resolve_unresolved()?;
        let Some(token) = self.hold_token() else {
            return Ok(None);
        };
        match self.lease.inspect(&token)? {
            Some((left, _)) => Ok(Some(left.map_or(f64::INFINITY, |d| d.as_secs_f64()))),
            None => {
                self.set_hold(None);
                Ok(None)
            }
        }
    }

    /// The fencing token of our current hold; null when not held.
    pub fn get_fencing_token(&self) -> Option<i64> {
        self.state.borrow().hold.as_ref().map(|h| h.fence)
    }

    /// The key as given to the constructor.
    pub fn get_key(&self) -> Bytes {
        Bytes(self.key.clone())
    }

    /// Runs `$callback` while holding the lock and returns its result.
    #[php(defaults(wait = 10.0))]
    pub fn synchronized(&self, callback: ZendCallable, wait: Float) -> PhpResult<Zval> {
        let wait = seconds(
            "DistributedLock::synchronized(): Argument #2 ($wait)",
            wait.0,
            true,
        )?;
        // Nested in a synchronized() (or after acquire()) on this object: the outer
        // holder releases, not us.
        let nested = self.hold_token().is_some();
        if !self.do_acquire(wait)? {
            return Err(PhpException::new(
                format!(
                    "Could not acquire the lock '{}' within {:.3} seconds",
                    printable(&self.key),
                    wait.as_secs_f64()
                ),
                0,
                lock_timeout_exception(),
            ));
        }
        if nested {
            return callback.try_call(vec![]).map_err(Into::into);
        }
        let token = self.hold_token().expect("held after a successful acquire");
        let mut guard =
            BailoutGuard::new(ReleaseOnBailout(Some((self.id, self.lease.clone(), token))));
        let result = callback.try_call(vec![]);
        guard.get_mut().0 = None;
        drop(guard);
        let released = self.do_release();
        match (result, released) {
            // The callback's exception is still pending: returning Err lets it
            // propagate unchanged, whatever the release found.
            (Err(e), _) => Err(e.into()),
            (Ok(_), Err(e)) => Err(e.into()),
            (Ok(_), Ok(false)) => Err(PhpException::new(
                format!(
                    "The lease on '{}' expired or was taken before the callback finished; \
                     its result is discarded (raise the ttl or refresh() inside the callback)",
                    printable(&self.key)
                ),
                0,
                lock_lost_exception(),
            )),
            (Ok(value), Ok(true)) => Ok(value),
        }
    }
}

impl Drop for DistributedLock {
    fn drop(&mut self) {
        // Auto-release only in the process that created the object: a forked child
        // must not free its parent's lock when the child exits.
        if self.pid != std::process::id() {
            return;
        }
        let state = std::mem::take(self.state.get_mut());
        with_held(|h| h.remove(&self.id));
        if let Some(hold) = state.hold {
            let _ = self.lease.release(&hold, state.release_sent);
        }
        if let Some(token) = state.unresolved {
            let _ = self.lease.abandon(&token, self.ttl);
        }
    }
}

/// A key for a message: lossy UTF-8, no control characters, at most 100 characters.
fn printable(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let mut s: String = key.chars().filter(|c| !c.is_control()).take(100).collect();
    if key.chars().count() > 100 {
        s.push('…');
    }
    s
}
