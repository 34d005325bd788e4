//! The PHP binding layer: module registration, ini, phpinfo and request hooks.
//! Everything here converts between PHP and the core; no Redis logic lives here.

pub mod args;
pub mod errors;
pub mod ini;
pub mod lock;
pub mod session;

use ext_php_rs::boxed::ZBox;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;
use ext_php_rs::zend::ModuleEntry;
use ext_php_rs::{info_table_end, info_table_header, info_table_row, info_table_start};

use crate::core::dsn::Endpoint;
use crate::core::metrics::{self as core_metrics, Scope, Snapshot, BUCKETS};

/// MINIT. Runs in the php-fpm master before it forks: no sockets, no threads here.
pub fn startup(_ty: i32, module_number: i32) -> i32 {
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

/// RINIT. Once per process, finishes the class setup that MINIT cannot do.
pub extern "C" fn request_startup(_ty: i32, _module_number: i32) -> i32 {
    static WIDENED: std::sync::Once = std::sync::Once::new();
    let _ = std::panic::catch_unwind(|| WIDENED.call_once(session::widen_read_return_type));
    0
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

/// RSHUTDOWN: leases still held by this request are released here; the pool's
/// connections stay open for the worker's next request.
pub extern "C" fn request_shutdown(_ty: i32, _module_number: i32) -> i32 {
    let _ = std::panic::catch_unwind(crate::core::request::end);
    0
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
pub fn metrics(server: bool) -> PhpResult<ZBox<ZendHashTable>> {
    snapshot_array(&core_metrics::snapshot(if server {
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

#[php_module]
#[php(startup = startup)]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    module
        .name("redis_lease")
        .version(env!("CARGO_PKG_VERSION"))
        .class::<lock::DistributedLock>()
        .class::<session::RedisLockingSessionHandler>()
        .function(wrap_function!(metrics))
        .function(wrap_function!(prometheus_metrics))
        .shutdown_function(module_shutdown)
        .request_startup_function(request_startup)
        .request_shutdown_function(request_shutdown)
        .info_function(module_info)
}
