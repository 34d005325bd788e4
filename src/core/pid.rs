//! This process's id without a system call each time: glibc no longer caches
//! getpid(), and every pool checkout and request registry access asks (to tell a
//! forked child from its parent). Read once, and again in a child after fork().

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Once;

static PID: AtomicU32 = AtomicU32::new(0);
static FORKS: AtomicU32 = AtomicU32::new(0);
/// Whether the fork handler is in place: without it nothing here is cached.
static WATCHING: AtomicBool = AtomicBool::new(false);

extern "C" fn forked() {
    PID.store(0, Ordering::Relaxed);
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// `std::process::id()`, cached (asked each time if the fork handler could not
/// be registered: a cached pid would make a child take its parent's links).
pub fn current() -> u32 {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registers a handler that only stores to atomics. glibc
        // unregisters it when this library is unloaded (dlclose).
        let ok = unsafe { libc::pthread_atfork(None, None, Some(forked)) } == 0;
        WATCHING.store(ok, Ordering::Relaxed);
    });
    if !WATCHING.load(Ordering::Relaxed) {
        return std::process::id();
    }
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// How many fork()s lie between the first call of [`current`] and this process:
/// state copied into a child (a random generator's) is told from its parent's
/// even where a pid comes back (a parent exited, its pid reused by a grandchild).
/// `None` if the fork handler could not be registered: forks go unseen.
pub fn forks() -> Option<u32> {
    current();
    WATCHING
        .load(Ordering::Relaxed)
        .then(|| FORKS.load(Ordering::Relaxed))
}

/// A value of this process's own, for state that a background thread shares:
/// a forked child gets a fresh one, and never locks its parent's (a mutex the
/// parent's thread held at the fork stays locked in the child for ever). The
/// parent's is leaked in the child, after `inherited` had a chance to tidy up
/// what it can without waiting (closing its copies of sockets, say).
pub struct PerProcess<T: 'static> {
    ptr: std::sync::atomic::AtomicPtr<(u32, T)>,
}

impl<T: Send + Sync + 'static> Default for PerProcess<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    pub const fn new() -> PerProcess<T> {
        PerProcess {
            ptr: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's value, if made yet.
    pub fn current(&self) -> Option<&'static T> {
        // SAFETY: the pointer is null or points to a leaked (never freed) pair.
        let seen = unsafe { self.ptr.load(Ordering::Acquire).as_ref() }?;
        (seen.0 == current()).then_some(&seen.1)
    }

    /// This process's value, made by `make` on first use; `inherited` is given the
    /// parent's, the first time a forked child asks.
    pub fn get(&self, make: impl FnOnce() -> T, inherited: impl FnOnce(&T)) -> &'static T {
        let pid = current();
        let seen = self.ptr.load(Ordering::Acquire);
        // SAFETY: as in `current`.
        if let Some(pair) = unsafe { seen.as_ref() } {
            if pair.0 == pid {
                return &pair.1;
            }
        }
        let fresh: &'static mut (u32, T) = Box::leak(Box::new((pid, make())));
        match self
            .ptr
            .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                // SAFETY: as in `current`.
                if let Some(parent) = unsafe { seen.as_ref() } {
                    inherited(&parent.1);
                }
                &fresh.1
            }
            // Another thread of this process made one first: use that (ours leaks,
            // once).
            // SAFETY: as in `current`.
            Err(other) => unsafe { &(*other).1 },
        }
    }
}
