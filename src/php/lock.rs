//! `DistributedLock`: converts PHP values and errors, and keeps the per-object
//! state; the lease logic is in `core::lease`.

// `autoRenew` is PHP's parameter name: named arguments use it as written, and
// ext-php-rs takes parameter names from the Rust ones.
#![allow(non_snake_case)]

use std::cell::RefCell;
use std::time::Duration;

use ext_php_rs::exception::PhpException;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, Zval};
use ext_php_rs::zend::BailoutGuard;

use crate::core::dsn::Endpoint;
use crate::core::error::Error;
use crate::core::lease::{
    check_lock_name, check_lock_prefix, seconds, seconds_named, Lease, LeaseKeys, Token,
};
use crate::core::lock::Lock;
use crate::core::request;
use crate::php::args::{Bool, Bytes, Float, Int};
use crate::php::errors::{lease_exception, lock_lost_exception, lock_timeout_exception};
use crate::php::ini;

/// Longest lock key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// A lease-based lock on one Redis key. See stubs/redis_lease.stub.php.
#[php_class]
#[php(name = "DistributedLock")]
#[php(flags = ClassFlags::Final)]
pub struct DistributedLock {
    key: Vec<u8>,
    ttl: Duration,
    /// Borrowed only for the length of one core call: never across a PHP callback,
    /// which may call this object again.
    lock: RefCell<Lock>,
}

impl Drop for DistributedLock {
    fn drop(&mut self) {
        self.lock.get_mut().close(crate::php::in_teardown());
    }
}

/// Releases the lock when a fatal error unwinds past `synchronized()`.
struct ReleaseOnBailout(Option<u64>);

impl Drop for ReleaseOnBailout {
    fn drop(&mut self) {
        if let Some(id) = self.0.take() {
            request::let_go(id);
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

/// The key, ttl, limit and (empty) semaphore of a DistributedSemaphore method's
/// arguments.
fn semaphore_parts(
    method: &str,
    key: Bytes,
    limit: i64,
    ttl: (Float, u8),
    dsn: Option<Bytes>,
) -> Result<(Vec<u8>, Duration, u32, Lock), Error> {
    if !(1..=MAX_PERMITS).contains(&limit) {
        return Err(Error::invalid(format!(
            "DistributedSemaphore::{method}(): Argument #2 ($limit) must be between 1 and \
             {MAX_PERMITS}, {limit} given"
        )));
    }
    let (key, ttl, lease) = parts(
        "DistributedSemaphore",
        method,
        key,
        ttl,
        dsn,
        LeaseKeys::for_semaphore,
    )?;
    let limit = limit as u32;
    Ok((key, ttl, limit, Lock::semaphore(lease, limit, ttl)))
}

/// A token given to restore(), parsed (`what`: "Class::method(): Argument #n").
fn restored_token(what: &str, token: &Bytes) -> Result<Token, Error> {
    std::str::from_utf8(&token.0)
        .ok()
        .and_then(Token::parse)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what} ($token) must be a token given by getToken() (32 lowercase hexadecimal digits)"
            ))
        })
}

/// The key, ttl and lease of a lock, from a method's arguments (errors name `method`).
fn lock_parts(
    method: &str,
    key: Bytes,
    (ttl, ttl_arg): (Float, u8),
    dsn: Option<Bytes>,
) -> Result<(Vec<u8>, Duration, Lease), Error> {
    parts(
        "DistributedLock",
        method,
        key,
        (ttl, ttl_arg),
        dsn,
        LeaseKeys::for_lock,
    )
}

/// As `lock_parts`, for `class` and its keys (`keys` from the prefix and name).
fn parts(
    class: &str,
    method: &str,
    key: Bytes,
    (ttl, ttl_arg): (Float, u8),
    dsn: Option<Bytes>,
    keys: fn(&[u8], &[u8]) -> LeaseKeys,
) -> Result<(Vec<u8>, Duration, Lease), Error> {
    let key = key.0;
    if let Err(why) = check_lock_name(&key) {
        return Err(Error::invalid(format!(
            "{class}::{method}(): Argument #1 ($key) {why}"
        )));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "{class}::{method}(): Argument #1 ($key) must be at most {MAX_KEY_LEN} bytes, {} given",
            key.len()
        )));
    }
    let ttl = seconds_named(
        || format!("{class}::{method}(): Argument #{ttl_arg} ($ttl)"),
        ttl.0,
        false,
    )?;
    let endpoint = endpoint(dsn)?;
    let keys = ini::with(ini::LOCK_PREFIX, |prefix| {
        check_lock_prefix(prefix.as_bytes()).map(|()| keys(prefix.as_bytes(), &key))
    })?;
    Ok((key, ttl, Lease::new(endpoint, keys)))
}

/// The endpoint `dsn` names (null: the ini setting redis_lease.dsn).
fn endpoint(dsn: Option<Bytes>) -> Result<std::sync::Arc<Endpoint>, Error> {
    ini::endpoint(dsn, "Invalid Redis DSN: it")
}

fn lost(key: &[u8], what: &str) -> PhpException {
    lost_with(format!(
        "The lease on '{}' expired or was taken {what}; its result is discarded \
         (raise the ttl or refresh() inside the callback)",
        printable(key)
    ))
}

/// A LockLostException saying `message`.
fn lost_with(message: String) -> PhpException {
    PhpException::new(message, 0, lock_lost_exception())
}

/// What a `synchronized()` takes: the lock alone, shared, or a permit.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    Alone,
    Shared,
    /// This many permits at once.
    Permit(u32),
}

/// `synchronized()` of a lock or semaphore: takes `what` (waiting up to `wait`),
/// runs `callback`, and always releases. Nested in a hold of this object, it
/// checks (and extends) that hold and leaves the release to the outer holder.
/// `key` is a copy: the callback may call `__construct()` on the object, which
/// frees the object's own.
fn synchronized(
    lock: &RefCell<Lock>,
    key: Vec<u8>,
    method: &str,
    what: Take,
    callback: ZendCallable,
    wait: Float,
) -> PhpResult<Zval> {
    let wait = seconds(&format!("{method}(): Argument #2 ($wait)"), wait.0, true)?;
    // Nested in a synchronized() (or after acquire()) on this object: the outer
    // holder releases, not us. The lock it holds must still be ours: running
    // this callback under a new lease would hide from the outer one that part
    // of its work ran without the lock.
    // A restored hold's kind is asked first: a read token restored into a new
    // object must not pass for the lock alone.
    let held = lock.borrow_mut().holding()?;
    if let Some(shared) = held {
        if shared && what == Take::Alone {
            return Err(PhpException::new(
                format!(
                    "{method}() inside a read hold of '{}' would need an upgrade: call acquire() \
                     first (it upgrades, with nobody let in between)",
                    printable(&key)
                ),
                0,
                lease_exception(),
            ));
        }
        if !lock.borrow_mut().renew_held()? {
            return Err(lost(&key, &format!("before this nested {method}() call")));
        }
        return callback.try_call(vec![]).map_err(Into::into);
    }
    let got = match what {
        Take::Shared => lock.borrow_mut().acquire_read(wait)?,
        Take::Alone => lock.borrow_mut().acquire(wait)?,
        Take::Permit(weight) => lock.borrow_mut().acquire_permits(wait, weight)?,
    };
    if !got {
        return Err(PhpException::new(
            format!(
                "Could not acquire {} '{}' within {:.3} seconds",
                if matches!(what, Take::Permit(_)) {
                    "a permit of"
                } else {
                    "the lock"
                },
                printable(&key),
                wait.as_secs_f64()
            ),
            0,
            lock_timeout_exception(),
        ));
    }
    let (id, token) = {
        let lock = lock.borrow();
        (lock.id(), lock.token().cloned())
    };
    let mut guard = BailoutGuard::new(ReleaseOnBailout(Some(id)));
    let result = callback.try_call(vec![]);
    guard.get_mut().0 = None;
    drop(guard);
    // A pcntl_fork() child of the callback's returns here too (its exit() is an
    // exception in PHP 8): the hold is the parent's, released by the parent's
    // synchronized() when its own callback returns. The child's work was under
    // it only if it is still there (the parent may have returned first).
    if lock.borrow().inherited() {
        if let (Ok(_), Some(t)) = (&result, &token) {
            if !lock.borrow().token_alive(t)? {
                return Err(lost_with(format!(
                    "The lease on '{}' was released by the parent process, or expired or was \
                     taken, before the callback finished in this pcntl_fork() child (the hold \
                     is the parent's); the callback's result is discarded (have the parent \
                     wait for the child, pcntl_waitpid(), before its own callback returns)",
                    printable(&key)
                )));
            }
        }
        return result.map_err(Into::into);
    }
    // The callback may have lost the lease and taken a new one (a nested
    // acquire()): the outer hold still ended before its work did.
    let same_hold = lock.borrow().token() == token.as_ref();
    if let (Ok(_), Some(t)) = (&result, &token) {
        // The callback detached the hold: it is not ours to release, and it
        // lasted throughout if Redis says its token still holds it.
        let alive = match lock.borrow().token() {
            None => lock.borrow().detached_alive(t)?,
            Some(_) => None,
        };
        match alive {
            Some(true) => return result.map_err(Into::into),
            Some(false) => {
                return Err(lost(
                    &key,
                    "before the callback (which detached it) finished",
                ))
            }
            None => {}
        }
    }
    let released = lock.borrow_mut().release();
    match (result, released) {
        // The callback's exception is still pending: returning Err lets it
        // propagate unchanged, whatever the release found.
        (Err(e), _) => Err(e.into()),
        (Ok(_), Err(e)) => Err(e.into()),
        (Ok(value), Ok(true)) if same_hold => Ok(value),
        (Ok(_), Ok(_)) => Err(lost(&key, "before the callback finished")),
    }
}

#[php_impl]
impl DistributedLock {
    #[php(defaults(ttl = 30.0, autoRenew = false))]
    pub fn __construct(
        key: Bytes,
        ttl: Float,
        dsn: Option<Bytes>,
        autoRenew: Bool,
    ) -> PhpResult<Self> {
        let (key, ttl, lease) = lock_parts("__construct", key, (ttl, 2), dsn)?;
        Ok(DistributedLock {
            key,
            ttl,
            lock: RefCell::new(Lock::new(lease, ttl).with_auto_renew(autoRenew.0)),
        })
    }

    /// An object for a hold taken elsewhere (another object, another process),
    /// given its token (getToken()): it holds the lock if that token still does.
    #[php(defaults(ttl = 30.0, autoRenew = false))]
    pub fn restore(
        key: Bytes,
        token: Bytes,
        ttl: Float,
        dsn: Option<Bytes>,
        autoRenew: Bool,
    ) -> PhpResult<Self> {
        let token = restored_token("DistributedLock::restore(): Argument #2", &token)?;
        let (key, ttl, lease) = lock_parts("restore", key, (ttl, 3), dsn)?;
        let lock = Lock::restore(lease, ttl, token, autoRenew.0)?;
        Ok(DistributedLock {
            key,
            ttl,
            lock: RefCell::new(lock),
        })
    }

    /// Whether anyone holds the lock (alone, or as a reader), without taking it.
    pub fn is_locked(key: Bytes, dsn: Option<Bytes>) -> PhpResult<bool> {
        let (_, _, lease) = lock_parts("isLocked", key, (Float(1.0), 0), dsn)?;
        Ok(lease.held()?)
    }

    /// Which Redis `$dsn` (null: redis_lease.dsn) names, without any secret and
    /// the same for every spelling of it (`Endpoint::server`).
    pub fn server(dsn: Option<Bytes>) -> PhpResult<String> {
        Ok(endpoint(dsn)?.server())
    }

    /// Releases the lock whoever holds it, handing it to the first waiter (with a
    /// new fencing token). True when it was held.
    pub fn force_release(key: Bytes, dsn: Option<Bytes>) -> PhpResult<bool> {
        let (_, _, lease) = lock_parts("forceRelease", key, (Float(1.0), 0), dsn)?;
        Ok(lease.force_release()?)
    }

    /// The token of our hold (opaque; for restore() elsewhere); null when not held.
    pub fn get_token(&self) -> Option<String> {
        let token = self.lock.borrow_mut().current_token();
        token.map(|t| t.as_str().to_string())
    }

    /// Stops owning the hold here: no release at destruction or at the request's
    /// end, no renewal. Returns its token (null when not held). Throws, the
    /// hold kept, while a refresh of a hold it took, not confirmed, may still
    /// arrive.
    pub fn detach(&self) -> PhpResult<Option<String>> {
        let token = self.lock.borrow_mut().detach()?;
        Ok(token.map(|t| t.as_str().to_string()))
    }

    /// True when we hold the lock; false when another holder still has it after `$wait` seconds.
    #[php(defaults(wait = 0.0))]
    pub fn acquire(&self, wait: Float) -> PhpResult<bool> {
        let wait = seconds(
            "DistributedLock::acquire(): Argument #1 ($wait)",
            wait.0,
            true,
        )?;
        Ok(self.lock.borrow_mut().acquire(wait)?)
    }

    /// True when the lock was ours and is now free; false when we had lost it or never held it.
    pub fn release(&self) -> PhpResult<bool> {
        Ok(self.lock.borrow_mut().release()?)
    }

    /// Extends our lease to `$ttl` seconds from now (default: the constructor's ttl).
    pub fn refresh(&self, ttl: Option<Float>) -> PhpResult<bool> {
        let ttl = match ttl {
            Some(t) => seconds("DistributedLock::refresh(): Argument #1 ($ttl)", t.0, false)?,
            None => self.ttl,
        };
        Ok(self.lock.borrow_mut().refresh(ttl)?)
    }

    /// Asks Redis whether our token still holds the key.
    pub fn is_acquired(&self) -> PhpResult<bool> {
        Ok(self.lock.borrow_mut().inspect()?.is_some())
    }

    /// Seconds left on our lease per Redis; null when we do not hold it.
    pub fn get_remaining_lifetime(&self) -> PhpResult<Option<f64>> {
        let owned = self.lock.borrow_mut().inspect()?;
        Ok(owned.map(|o| o.left.map_or(f64::INFINITY, |d| d.as_secs_f64())))
    }

    /// The fencing token of our current hold; null when not held.
    pub fn get_fencing_token(&self) -> PhpResult<Option<i64>> {
        Ok(self.lock.borrow_mut().fence()?)
    }

    /// The key as given to the constructor.
    pub fn get_key(&self) -> Bytes {
        Bytes(self.key.clone())
    }

    /// Runs `$callback` while holding the lock (alone) and returns its result.
    #[php(defaults(wait = 10.0))]
    pub fn synchronized(&self, callback: ZendCallable, wait: Float) -> PhpResult<Zval> {
        let method = "DistributedLock::synchronized";
        synchronized(
            &self.lock,
            self.key.clone(),
            method,
            Take::Alone,
            callback,
            wait,
        )
    }

    /// Runs `$callback` while holding the lock as a reader and returns its result.
    #[php(defaults(wait = 10.0))]
    pub fn synchronized_read(&self, callback: ZendCallable, wait: Float) -> PhpResult<Zval> {
        let method = "DistributedLock::synchronizedRead";
        synchronized(
            &self.lock,
            self.key.clone(),
            method,
            Take::Shared,
            callback,
            wait,
        )
    }

    /// Takes the lock as a reader, shared with other readers (a writer's hold
    /// becomes a read hold); false when a writer keeps it past `$wait` seconds.
    #[php(defaults(wait = 0.0))]
    pub fn acquire_read(&self, wait: Float) -> PhpResult<bool> {
        let wait = seconds(
            "DistributedLock::acquireRead(): Argument #1 ($wait)",
            wait.0,
            true,
        )?;
        Ok(self.lock.borrow_mut().acquire_read(wait)?)
    }
}

/// Longest semaphore limit: more permits than this is not a limit.
pub const MAX_PERMITS: i64 = 1_000_000;

/// At most `limit` holders at once, each with a permit that is a lease of its
/// own. See stubs/redis_lease.stub.php.
#[php_class]
#[php(name = "DistributedSemaphore")]
#[php(flags = ClassFlags::Final)]
pub struct DistributedSemaphore {
    key: Vec<u8>,
    ttl: Duration,
    limit: u32,
    /// Borrowed only for the length of one core call (as DistributedLock's).
    lock: RefCell<Lock>,
}

impl Drop for DistributedSemaphore {
    fn drop(&mut self) {
        self.lock.get_mut().close(crate::php::in_teardown());
    }
}

impl DistributedSemaphore {
    /// `$permits` of `method` (its argument #`arg`), checked: 1 to the limit,
    /// and the weight this object holds already, if it holds one.
    fn weight(&self, method: &str, arg: u8, permits: i64) -> Result<u32, Error> {
        let name = format!("DistributedSemaphore::{method}(): Argument #{arg} ($permits)");
        let limit = i64::from(self.limit);
        if !(1..=limit).contains(&permits) {
            return Err(Error::invalid(format!(
                "{name} must be between 1 and the limit ({limit}), {permits} given"
            )));
        }
        let weight = permits as u32;
        if let Some(held) = self.lock.borrow_mut().held_weight()? {
            if held != weight {
                return Err(Error::invalid(format!(
                    "{name} is {weight}, but this object holds {held} permits: release() them first"
                )));
            }
        }
        Ok(weight)
    }
}

#[php_impl]
impl DistributedSemaphore {
    #[php(defaults(ttl = 30.0, autoRenew = false))]
    pub fn __construct(
        key: Bytes,
        limit: Int,
        ttl: Float,
        dsn: Option<Bytes>,
        autoRenew: Bool,
    ) -> PhpResult<Self> {
        let (key, ttl, limit, lock) = semaphore_parts("__construct", key, limit.0, (ttl, 3), dsn)?;
        Ok(DistributedSemaphore {
            key,
            ttl,
            limit,
            lock: RefCell::new(lock.with_auto_renew(autoRenew.0)),
        })
    }

    /// An object for a permit taken elsewhere (another object, another process),
    /// given its token (getToken()); as DistributedLock::restore().
    #[php(defaults(ttl = 30.0, autoRenew = false))]
    pub fn restore(
        key: Bytes,
        limit: Int,
        token: Bytes,
        ttl: Float,
        dsn: Option<Bytes>,
        autoRenew: Bool,
    ) -> PhpResult<Self> {
        let token = restored_token("DistributedSemaphore::restore(): Argument #3", &token)?;
        let (key, ttl, limit, lock) = semaphore_parts("restore", key, limit.0, (ttl, 4), dsn)?;
        let lock = lock.with_auto_renew(autoRenew.0).restored(token)?;
        Ok(DistributedSemaphore {
            key,
            ttl,
            limit,
            lock: RefCell::new(lock),
        })
    }

    /// Stops owning our permit here (no release when this object goes or the
    /// request ends, no renewal): it lives on until its ttl or a release by its
    /// token. Returns the token (null when we hold none). Throws, the permit
    /// kept, while a refresh of a permit it took, not confirmed, may still
    /// arrive.
    pub fn detach(&self) -> PhpResult<Option<String>> {
        let token = self.lock.borrow_mut().detach()?;
        Ok(token.map(|t| t.as_str().to_string()))
    }

    /// Takes `$permits` permits at once, as one hold (FIFO: a large request at
    /// the head of the queue is not overtaken by smaller ones); false when they
    /// are not all free within `$wait` seconds.
    #[php(defaults(wait = 0.0, permits = 1))]
    pub fn acquire(&self, wait: Float, permits: Int) -> PhpResult<bool> {
        let wait = seconds(
            "DistributedSemaphore::acquire(): Argument #1 ($wait)",
            wait.0,
            true,
        )?;
        let weight = self.weight("acquire", 2, permits.0)?;
        Ok(self.lock.borrow_mut().acquire_permits(wait, weight)?)
    }

    /// Gives our permit back (to the first waiter); false when we had lost it.
    pub fn release(&self) -> PhpResult<bool> {
        Ok(self.lock.borrow_mut().release()?)
    }

    /// Extends our permit's lease to `$ttl` seconds from now (default: the constructor's).
    pub fn refresh(&self, ttl: Option<Float>) -> PhpResult<bool> {
        let ttl = match ttl {
            Some(t) => seconds(
                "DistributedSemaphore::refresh(): Argument #1 ($ttl)",
                t.0,
                false,
            )?,
            None => self.ttl,
        };
        Ok(self.lock.borrow_mut().refresh(ttl)?)
    }

    /// Asks Redis whether our permit is still ours.
    pub fn is_acquired(&self) -> PhpResult<bool> {
        Ok(self.lock.borrow_mut().inspect()?.is_some())
    }

    /// Seconds left on our permit's lease per Redis; null when we hold none.
    pub fn get_remaining_lifetime(&self) -> PhpResult<Option<f64>> {
        let owned = self.lock.borrow_mut().inspect()?;
        Ok(owned.map(|o| o.left.map_or(f64::INFINITY, |d| d.as_secs_f64())))
    }

    /// Our permit's token (opaque); null when we hold none.
    pub fn get_token(&self) -> Option<String> {
        let token = self.lock.borrow_mut().current_token();
        token.map(|t| t.as_str().to_string())
    }

    /// The key as given to the constructor.
    pub fn get_key(&self) -> Bytes {
        Bytes(self.key.clone())
    }

    /// The limit given to the constructor.
    pub fn get_limit(&self) -> i64 {
        i64::from(self.limit)
    }

    /// Runs `$callback` while holding `$permits` permits and returns its result.
    #[php(defaults(wait = 10.0, permits = 1))]
    pub fn synchronized(
        &self,
        callback: ZendCallable,
        wait: Float,
        permits: Int,
    ) -> PhpResult<Zval> {
        let method = "DistributedSemaphore::synchronized";
        let weight = self.weight("synchronized", 3, permits.0)?;
        synchronized(
            &self.lock,
            self.key.clone(),
            method,
            Take::Permit(weight),
            callback,
            wait,
        )
    }
}
