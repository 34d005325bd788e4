//! This process's id without a system call each time: glibc no longer caches
//! getpid(), and every pool checkout and request registry access asks (to tell a
//! forked child from its parent). Read once, and again in a child after fork().

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn forked() {
    PID.store(0, Ordering::Relaxed);
}

/// `std::process::id()`, cached.
pub fn current() -> u32 {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic. glibc
        // unregisters it when this library is unloaded (dlclose).
        unsafe {
            libc::pthread_atfork(None, None, Some(forked));
        }
    });
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}
