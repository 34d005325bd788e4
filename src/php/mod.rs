//! The PHP binding layer: module registration, ini, phpinfo and request hooks.
//! Everything here converts between PHP and the core; no Redis logic lives here.

pub mod args;
pub mod errors;
pub mod ini;
pub mod inspect;
pub mod lock;
pub mod session;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};
use parking_lot::Mutex;

use crate::core::dsn::Endpoint;
use crate::core::metrics::{self as core_metrics, Scope, Snapshot, BUCKETS};

/// How many times MINIT has run in this process: a server that restarts PHP
/// without unloading the extension (Apache's graceful restart, FrankenPHP) runs
/// it again, with new class entries that RINIT must finish setting up.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The generation whose class entries are set up.
static SET_UP_DONE: AtomicU64 = AtomicU64::new(0);
/// Taken by the request that sets them up (the others wait for it).
static SET_UP: Mutex<()> = Mutex::new(());

thread_local! {
    /// The module generation whose functions this thread's table has marked.
    static FUNCTIONS_MARKED: Cell<u64> = const { Cell::new(0) };
}

/// MINIT. Runs in the php-fpm master before it forks: no sockets, no threads here.
pub fn startup(_ty: i32, module_number: i32) -> i32 {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let ok = std::panic::catch_unwind(|| {
        ext_php_rs::zend::IniEntryDef::register(ini::ENTRIES.as_slice(), module_number);
        if !session::register_save_handler() {
            session::warn("could not register the 'redis_lease' session save handler (is ext/session loaded? on a PHP newer than 8.5, only the RedisLockingSessionHandler class is offered)");
        }
        // Before php-fpm forks its workers: they all count into one shared set.
        core_metrics::share_with_children();
        crate::core::topology::init_tls();
        if let Some(problem) = session::check_ini() {
            session::warn(&format!(
                "{problem}; sessions using redis_lease will fail until it is fixed"
            ));
        }
        if let Err(e) = crate::core::lease::check_lock_prefix(ini::get(ini::LOCK_PREFIX).as_bytes())
        {
            session::warn(&format!(
                "{e}; new DistributedLock objects will throw until it is fixed"
            ));
        }
        errors::register_exceptions().is_ok()
    });
    if matches!(ok, Ok(true)) {
        0
    } else {
        -1
    }
}

/// MSHUTDOWN: the renewal thread, if this process started one, is stopped and
/// joined before PHP unloads the code it runs.
pub extern "C" fn module_shutdown(_ty: i32, _module_number: i32) -> i32 {
    let _ = std::panic::catch_unwind(crate::core::watchdog::shutdown);
    0
}

/// RINIT. Once per MINIT, finishes the class setup that MINIT cannot do
/// (ext-php-rs registers the classes after our MINIT has run). Under ZTS the
/// first requests of several threads wait here for the one doing it.
pub extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    let _ = std::panic::catch_unwind(|| {
        let generation = GENERATION.load(Ordering::Acquire);
        if SET_UP_DONE.load(Ordering::Acquire) != generation {
            let _setting_up = SET_UP.lock();
            if SET_UP_DONE.load(Ordering::Acquire) != generation {
                session::widen_read_return_type();
                mark_sensitive_parameters();
                SET_UP_DONE.store(generation, Ordering::Release);
            }
        }
        // Functions, unlike classes, are copied into each thread's own table
        // under ZTS (at the thread's start, from the unmarked global one): each
        // thread marks its copy.
        // PHP 8.3 and later share them again (one struct for every thread):
        // marking skips a parameter marked already, under the lock, so the
        // first thread marks it and the others find it done.
        if FUNCTIONS_MARKED.with(Cell::get) != generation {
            let _setting_up = SET_UP.lock();
            mark_sensitive_functions();
            FUNCTIONS_MARKED.with(|m| m.set(generation));
        }
        crate::core::request::begin();
        crate::core::pool::set_idle_timeout(ini::idle_timeout());
    });
    0
}

extern "C" {
    // The attribute of `attributes` named `name` (lower case) on parameter
    // `offset` (from 0), or null (PHP 8.0+).
    fn zend_get_parameter_attribute_str(
        attributes: *mut ext_php_rs::ffi::HashTable,
        name: *const std::ffi::c_char,
        len: usize,
        offset: u32,
    ) -> *mut std::ffi::c_void;
    // zend_add_parameter_attribute() is an inline wrapper of this (PHP 8.0+).
    fn zend_add_attribute(
        attributes: *mut *mut ext_php_rs::ffi::HashTable,
        name: *mut ext_php_rs::ffi::zend_string,
        argc: u32,
        flags: u32,
        offset: u32,
        lineno: u32,
    ) -> *mut std::ffi::c_void;
}

/// The attribute's name as the engine looks it up (lower case).
const SENSITIVE: &std::ffi::CStr = c"sensitiveparameter";

/// ZEND_ATTRIBUTE_PERSISTENT: an internal function's attributes live in
/// persistent memory.
const ATTRIBUTE_PERSISTENT: u32 = 1;

/// Marks every parameter that may carry a password (a DSN, a save path) with
/// `#[\SensitiveParameter]`, as PHP marks PDO's: exception traces, which error
/// trackers collect with their arguments, then show `SensitiveParameterValue`.
fn mark_sensitive_parameters() {
    use ext_php_rs::class::RegisteredClass;
    fn mark<C: RegisteredClass>(method: &std::ffi::CStr, offset: u32) {
        let meta = C::get_metadata();
        if meta.has_ce() {
            mark_in(&meta.ce().function_table, method, offset);
        }
    }
    mark::<lock::DistributedLock>(c"__construct", 2);
    mark::<lock::DistributedLock>(c"restore", 1);
    mark::<lock::DistributedLock>(c"restore", 3);
    mark::<lock::DistributedLock>(c"forcerelease", 1);
    mark::<lock::DistributedLock>(c"islocked", 1);
    mark::<lock::DistributedLock>(c"server", 0);
    mark::<lock::DistributedSemaphore>(c"__construct", 3);
    mark::<lock::DistributedSemaphore>(c"restore", 2);
    mark::<lock::DistributedSemaphore>(c"restore", 4);
    mark::<session::RedisLockingSessionHandler>(c"__construct", 0);
    mark::<session::RedisLockingSessionHandler>(c"open", 0);
    // A session's id is as good as its cookie, its data may hold anything: a
    // framework that turns a warning into an exception (Laravel, Symfony) would
    // put both in its error tracker's trace.
    for (method, args) in [
        (c"read", 1),
        (c"write", 2),
        (c"destroy", 1),
        (c"validateid", 1),
        (c"updatetimestamp", 2),
    ] {
        for offset in 0..args {
            mark::<session::RedisLockingSessionHandler>(method, offset);
        }
    }
}

/// Marks parameter `offset` (from 0) of function `name` (lower case) in `table`.
fn mark_in(table: &ZendHashTable, name: &std::ffi::CStr, offset: u32) {
    use ext_php_rs::ffi::{zend_function, zend_hash_str_find_ptr_lc};
    use ext_php_rs::types::ZendStr;
    // SAFETY: the table is a class's (its methods shared by every thread) or
    // this thread's function table (its own copy under ZTS, freed with the
    // thread, attributes and all); its internal functions outlive the request.
    // The attribute's name is a persistent string, leaked on purpose (the
    // engine keeps a reference).
    unsafe {
        let f = zend_hash_str_find_ptr_lc(table, name.as_ptr(), name.to_bytes().len())
            .cast::<zend_function>();
        if f.is_null() || offset >= (*f).common.num_args {
            return;
        }
        // Marked already (a function struct shared by threads, PHP 8.3+ ZTS):
        // SensitiveParameter is not repeatable.
        let attributes = (*f).common.attributes;
        if !attributes.is_null()
            && !zend_get_parameter_attribute_str(
                attributes,
                SENSITIVE.as_ptr(),
                SENSITIVE.to_bytes().len(),
                offset,
            )
            .is_null()
        {
            return;
        }
        let name = ZendStr::new("SensitiveParameter", true).into_raw();
        // Offset 0 is the function itself; parameters count from 1.
        zend_add_attribute(
            &mut (*f).common.attributes,
            name,
            0,
            ATTRIBUTE_PERSISTENT,
            offset + 1,
            0,
        );
    }
}

/// `mark_sensitive_parameters` for the extension's functions, in this thread's
/// function table.
fn mark_sensitive_functions() {
    // A namespaced function, as the engine keys it (lower case).
    fn mark(name: &std::ffi::CStr, offset: u32) {
        if let Some(table) = ext_php_rs::zend::ExecutorGlobals::get().function_table() {
            mark_in(table, name, offset);
        }
    }
    // inspect()'s key is a session's id for kind 'session'.
    mark(c"redislease\\inspect", 0);
    mark(c"redislease\\inspect", 2);
    mark(c"redislease\\leases", 1);
}

/// Whether PHP is shutting the request down (EG_FLAGS_IN_SHUTDOWN): its shutdown
/// functions, the destructors of its objects, and the extensions' RSHUTDOWN.
pub fn in_teardown() -> bool {
    const EG_FLAGS_IN_SHUTDOWN: u32 = 1 << 0;
    let flags = ext_php_rs::zend::ExecutorGlobals::get().flags;
    #[allow(clippy::unnecessary_cast)] // zend_uchar in PHP 8.2, uint8_t in 8.3-8.5: one byte
    let flags = flags as u32;
    flags & EG_FLAGS_IN_SHUTDOWN != 0
}

/// Whether this call comes from PHP's session_regenerate_id(), through whatever
/// handler objects lie between: its read is of the fresh id the session moves to.
pub fn in_regenerate() -> bool {
    let globals = ext_php_rs::zend::ExecutorGlobals::get();
    let mut frame = globals.current_execute_data;
    // SAFETY: the engine's call stack, read on the thread that runs it; a frame
    // and its function live while the frame is on the stack.
    while let Some(f) = unsafe { frame.as_ref() } {
        if let Some(func) = unsafe { f.func.as_ref() } {
            let common = unsafe { func.common };
            let internal = u32::from(common.type_) == ext_php_rs::ffi::ZEND_INTERNAL_FUNCTION;
            if internal && common.scope.is_null() {
                if let Some(name) = unsafe { common.function_name.as_ref() } {
                    if name.as_bytes() == b"session_regenerate_id" {
                        return true;
                    }
                }
            }
        }
        frame = f.prev_execute_data;
    }
    false
}

/// RSHUTDOWN: clears what the request's native session left.
pub extern "C" fn request_shutdown(_ty: i32, _module_number: i32) -> i32 {
    let _ = std::panic::catch_unwind(session::end_request);
    0
}

/// After every extension's RSHUTDOWN (and the request's objects freed, each
/// releasing what it held): leases still held by this request are released
/// here. Not in our RSHUTDOWN, which runs before ext/session's: a save handler
/// of the application's (registered without its shutdown function) writes the
/// session there, under a lock of ours it still counts on. The pool's
/// connections stay open for the worker's next request, and the watchdog
/// closes them once idle (not in the CLI, whose process ends next).
pub extern "C" fn post_deactivate() -> i32 {
    let _ = std::panic::catch_unwind(|| {
        crate::core::request::end();
        if !is_cli() {
            crate::core::watchdog::keep_watch();
        }
    });
    0
}

/// Whether PHP runs as the command line (its request ends with the process).
fn is_cli() -> bool {
    let sapi = ext_php_rs::zend::SapiModule::get();
    !sapi.name.is_null()
        // SAFETY: the SAPI's name is a static NUL-terminated string.
        && unsafe { std::ffi::CStr::from_ptr(sapi.name) }.to_bytes() == b"cli"
}

pub extern "C" fn module_info(_module: *mut ModuleEntry) {
    let _ = std::panic::catch_unwind(|| {
        info_table_start!();
        info_table_row!("redis_lease support", "enabled");
        info_table_row!("Version", env!("CARGO_PKG_VERSION"));
        let dsn = match ini::timeouts().and_then(|t| Endpoint::parse(&ini::get(ini::DSN), t)) {
            Ok(ep) => ep.redacted(),
            // The raw value may contain a password: show why, not what.
            Err(e) => format!("invalid: {e}"),
        };
        info_table_row!("Effective DSN", dsn);
        info_table_row!("Lock key prefix", ini::get(ini::LOCK_PREFIX));
        info_table_row!("Connect timeout (s)", ini::get(ini::CONNECT_TIMEOUT));
        info_table_row!("Read timeout (s)", ini::get(ini::READ_TIMEOUT));
        info_table_end!();
        info_table_start!();
        info_table_header!("Metric", "This process", "All workers");
        let server = core_metrics::snapshot(Scope::Server);
        for (c, all) in &server.counters {
            info_table_row!(c.name(), core_metrics::get(*c).to_string(), all.to_string());
        }
        info_table_end!();
    });
}

fn snapshot_array(snapshot: &Snapshot) -> PhpResult<ZBox<ZendHashTable>> {
    let mut out = ZendHashTable::new();
    for (c, v) in &snapshot.counters {
        out.insert(c.name(), *v as i64)?;
    }
    for (t, h) in &snapshot.timings {
        let mut buckets = ZendHashTable::new();
        for (bound, count) in BUCKETS.iter().zip(&h.cumulative) {
            buckets.insert(bound.to_string().as_str(), *count as i64)?;
        }
        let total = h.cumulative.last().copied().unwrap_or(0) as i64;
        buckets.insert("+Inf", total)?;
        let mut entry = ZendHashTable::new();
        entry.insert("count", total)?;
        entry.insert("sum", h.sum_seconds)?;
        entry.insert("buckets", buckets)?;
        out.insert(t.name(), entry)?;
    }
    Ok(out)
}

/// `RedisLease\metrics()`: counters by name, and per histogram `['count' => int,
/// 'sum' => float, 'buckets' => ['0.0005' => cumulative count, ..., '+Inf' => count]]`;
/// of this process, or with `$server` of every worker of this php-fpm master.
#[php_function]
#[php(name = "RedisLease\\metrics")]
#[php(defaults(server = false))]
pub fn metrics(server: args::Bool) -> PhpResult<ZBox<ZendHashTable>> {
    snapshot_array(&core_metrics::snapshot(if server.0 {
        Scope::Server
    } else {
        Scope::Process
    }))
}

/// `RedisLease\prometheus_metrics()`: every worker's metrics in Prometheus's text format.
#[php_function]
#[php(name = "RedisLease\\prometheus_metrics")]
pub fn prometheus_metrics() -> String {
    core_metrics::prometheus(&core_metrics::snapshot(Scope::Server))
}

/// `RedisLease\session_is_readonly()`: whether the session the native handler
/// read last in this request was opened read-only (the lock wait ran out with
/// on_lock_timeout = readonly), so that this request's changes are discarded.
#[php_function]
#[php(name = "RedisLease\\session_is_readonly")]
pub fn session_is_readonly() -> bool {
    session::native_readonly()
}

#[php_module]
#[php(startup = startup)]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    inspect::functions(module)
        .name("redis_lease")
        .version(env!("CARGO_PKG_VERSION"))
        .class::<lock::DistributedLock>()
        .class::<lock::DistributedSemaphore>()
        .class::<session::RedisLockingSessionHandler>()
        .function(wrap_function!(metrics))
        .function(wrap_function!(prometheus_metrics))
        .function(wrap_function!(session_is_readonly))
        .shutdown_function(module_shutdown)
        .request_startup_function(request_startup)
        .request_shutdown_function(request_shutdown)
        .post_deactivate_function(post_deactivate)
        .info_function(module_info)
}
