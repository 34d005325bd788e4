//! The PHP exception tree and the mapping from core errors to it.
//!
//! The exception classes carry no Rust data, so they are registered by hand with
//! `ClassBuilder`: they then keep `Exception::__construct($message, $code,
//! $previous)`, and users can construct and subclass them like any PHP exception
//! (a `#[php_class]` exception could not be constructed from PHP).

use std::ffi::CStr;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use ext_php_rs::builders::ClassBuilder;
use ext_php_rs::exception::PhpException;
use ext_php_rs::ffi::zend_class_entry;
use ext_php_rs::zend::{ce, ClassEntry};

use crate::core::error::Error;

static LEASE: AtomicPtr<ClassEntry> = AtomicPtr::new(null_mut());
static CONNECTION: AtomicPtr<ClassEntry> = AtomicPtr::new(null_mut());
static LOCK_TIMEOUT: AtomicPtr<ClassEntry> = AtomicPtr::new(null_mut());
static LOCK_LOST: AtomicPtr<ClassEntry> = AtomicPtr::new(null_mut());

fn loaded(slot: &AtomicPtr<ClassEntry>) -> &'static ClassEntry {
    // SAFETY: set once in MINIT to a class entry that lives as long as the module.
    unsafe { slot.load(Ordering::Acquire).as_ref() }
        .expect("redis_lease exception classes are registered in MINIT")
}

pub fn lease_exception() -> &'static ClassEntry {
    loaded(&LEASE)
}
pub fn connection_exception() -> &'static ClassEntry {
    loaded(&CONNECTION)
}
pub fn lock_timeout_exception() -> &'static ClassEntry {
    loaded(&LOCK_TIMEOUT)
}
pub fn lock_lost_exception() -> &'static ClassEntry {
    loaded(&LOCK_LOST)
}

/// A class entry exported by PHP itself, looked up at run time: linking to it
/// directly would break `cargo php stubs`, which loads the library outside PHP.
pub(crate) fn php_global<T>(name: &CStr) -> Option<*mut T> {
    // SAFETY: dlsym with a NUL-terminated name; a missing symbol gives null.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!sym.is_null()).then_some(sym.cast::<T>())
}

fn runtime_exception() -> &'static ClassEntry {
    php_global::<*mut zend_class_entry>(c"spl_ce_RuntimeException")
        // SAFETY: the symbol is a `zend_class_entry *` set by SPL's MINIT, which
        // runs before ours (SPL is always compiled into PHP).
        .and_then(|slot| unsafe { (*slot).cast::<ClassEntry>().as_ref() })
        .unwrap_or_else(ce::exception)
}

/// Registers one exception class and stores its entry in `$slot`.
macro_rules! exception_class {
    ($name:literal extends $parent:expr, $parent_name:literal => $slot:ident) => {
        ClassBuilder::new($name)
            .extends(($parent, $parent_name))
            .registration(|ce, _| $slot.store(ce, Ordering::Release))
            .register()
    };
}

/// Registers the exception classes; called from MINIT before the other classes.
pub fn register_exceptions() -> ext_php_rs::error::Result<()> {
    exception_class!("RedisLease\\LeaseException" extends runtime_exception, "\\RuntimeException" => LEASE)?;
    exception_class!("RedisLease\\ConnectionException" extends lease_exception, "\\RedisLease\\LeaseException" => CONNECTION)?;
    exception_class!("RedisLease\\LockTimeoutException" extends lease_exception, "\\RedisLease\\LeaseException" => LOCK_TIMEOUT)?;
    exception_class!("RedisLease\\LockLostException" extends lease_exception, "\\RedisLease\\LeaseException" => LOCK_LOST)?;
    Ok(())
}

impl From<Error> for PhpException {
    fn from(e: Error) -> PhpException {
        match e {
            Error::InvalidArgument(msg) => PhpException::new(msg, 0, ce::value_error()),
            Error::LockTimeout(msg) => PhpException::new(msg, 0, lock_timeout_exception()),
            Error::Connection(msg)
            | Error::Reply { message: msg, .. }
            | Error::Unresolved { message: msg, .. } => {
                PhpException::new(msg, 0, connection_exception())
            }
        }
    }
}
