//! ini settings: declared here, read at use (php-fpm pools may override them per
//! pool with php_admin_value, after MINIT).

use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;
use std::time::Duration;

use ext_php_rs::flags::IniEntryPermission;
use ext_php_rs::zend::{IniEntryDef, IniEntryDefs};

use crate::core::dsn::{Endpoint, Timeouts, MAX_TIMEOUT_SECS};
use crate::core::error::{Error, Result};
use crate::php::args::Bytes;
use crate::php::errors::php_global;

pub const DSN: &CStr = c"redis_lease.dsn";
pub const LOCK_PREFIX: &CStr = c"redis_lease.lock_prefix";
pub const CONNECT_TIMEOUT: &CStr = c"redis_lease.connect_timeout";
pub const READ_TIMEOUT: &CStr = c"redis_lease.read_timeout";
pub const IDLE_TIMEOUT: &CStr = c"redis_lease.idle_timeout";

pub static ENTRIES: IniEntryDefs<16> = IniEntryDefs::new([
    IniEntryDef::new(DSN, c"redis://127.0.0.1:6379", IniEntryPermission::All),
    IniEntryDef::new(LOCK_PREFIX, c"lock:", IniEntryPermission::All),
    IniEntryDef::new(CONNECT_TIMEOUT, c"1", IniEntryPermission::All),
    IniEntryDef::new(READ_TIMEOUT, c"2", IniEntryPermission::All),
    // Seconds an unused connection stays open (0: for ever); see core::pool.
    IniEntryDef::new(IDLE_TIMEOUT, c"60", IniEntryPermission::All),
    // Defaults of the session options; see core::session::SessionConfig::set.
    // The data's ttl in seconds; 0: session.gc_maxlifetime.
    IniEntryDef::new(c"redis_lease.session.ttl", c"0", IniEntryPermission::All),
    IniEntryDef::new(
        c"redis_lease.session.locking",
        c"1",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.lock_ttl",
        c"0",
        IniEntryPermission::All,
    ),
    // Renewed by the watchdog: with lock_ttl 0, a 10 s lease (core::session::RENEWED_LOCK_TTL).
    IniEntryDef::new(
        c"redis_lease.session.lock_renew",
        c"1",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.lock_wait",
        c"10",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.on_lock_timeout",
        c"fail",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.max_waiters",
        c"0",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.prefix",
        c"PHPREDIS_SESSION:",
        IniEntryPermission::All,
    ),
    // Empty: phpredis's redis.session.compression (and _level), so that a site
    // that compresses with phpredis switches with its php.ini as it is.
    IniEntryDef::new(
        c"redis_lease.session.compression",
        c"",
        IniEntryPermission::All,
    ),
    IniEntryDef::new(
        c"redis_lease.session.compression_level",
        c"",
        IniEntryPermission::All,
    ),
    IniEntryDef::end(),
]);

type IniString = unsafe extern "C" fn(*const c_char, usize, i32) -> *mut c_char;

/// The current value of an ini setting of ours ("" when unset).
pub fn get(name: &CStr) -> String {
    with(name, str::to_string)
}

/// Runs `f` on the current value of an ini setting of ours ("" when unset),
/// without copying it: constructors read several, per lock.
pub fn with<T>(name: &CStr, f: impl FnOnce(&str) -> T) -> T {
    // zend_ini_string is not among ext-php-rs's bindings; resolve it at run time.
    static ZEND_INI_STRING: OnceLock<Option<IniString>> = OnceLock::new();
    fn resolve() -> Option<IniString> {
        php_global::<std::ffi::c_void>(c"zend_ini_string")
            // SAFETY: the symbol has this signature in PHP 8.x (Zend/zend_ini.h).
            .map(|p| unsafe { std::mem::transmute::<*mut std::ffi::c_void, IniString>(p) })
    }
    let Some(ini_string) = ZEND_INI_STRING.get_or_init(resolve) else {
        return f("");
    };
    let bytes = name.to_bytes();
    // SAFETY: name/len describe a valid string; PHP returns a NUL-terminated value or null.
    let value = unsafe { ini_string(name.as_ptr(), bytes.len(), 0) };
    if value.is_null() {
        return f("");
    }
    // SAFETY: non-null values from zend_ini_string are NUL-terminated and live for the request.
    let value = unsafe { CStr::from_ptr(value) };
    match value.to_str() {
        Ok(v) => f(v),
        Err(_) => f(&value.to_string_lossy()),
    }
}

/// The current value of any ini setting, by name ("" when unknown).
pub fn get_str(name: &str) -> String {
    CString::new(name).map(|c| get(&c)).unwrap_or_default()
}

type CfgGetString = unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> i32;

/// A setting's value as php.ini gives it, whether or not a loaded extension
/// declares it: phpredis's `redis.session.*` are read this way when phpredis is
/// no longer loaded. ("" when absent.)
pub fn configured(name: &str) -> String {
    let declared = get_str(name);
    if !declared.is_empty() {
        return declared;
    }
    static CFG_GET_STRING: OnceLock<Option<CfgGetString>> = OnceLock::new();
    let resolve = || {
        php_global::<std::ffi::c_void>(c"cfg_get_string")
            // SAFETY: main/php_ini.h: int cfg_get_string(const char *varname, char **result).
            .map(|p| unsafe { std::mem::transmute::<*mut std::ffi::c_void, CfgGetString>(p) })
    };
    let (Some(cfg_get_string), Ok(name)) =
        (*CFG_GET_STRING.get_or_init(resolve), CString::new(name))
    else {
        return String::new();
    };
    let mut value: *mut c_char = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and an out pointer; on success PHP points it at a
    // NUL-terminated string of the configuration hash, which lives for the process.
    if unsafe { cfg_get_string(name.as_ptr(), &mut value) } != 0 || value.is_null() {
        return String::new();
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(value) }
        .to_string_lossy()
        .into_owned()
}

fn seconds(name: &CStr) -> Result<Duration> {
    with(name, |raw| match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_TIMEOUT_SECS => {
            Ok(Duration::from_secs_f64(v))
        }
        _ => Err(Error::invalid(format!(
            "ini setting {} must be a number of seconds > 0 and <= {MAX_TIMEOUT_SECS}, '{}' given",
            name.to_string_lossy(),
            raw.chars().take(32).collect::<String>()
        ))),
    })
}

/// Timeouts from ini, for DSNs that do not set their own.
pub fn timeouts() -> Result<Timeouts> {
    Ok(Timeouts {
        connect: seconds(CONNECT_TIMEOUT)?,
        read: seconds(READ_TIMEOUT)?,
    })
}

/// `redis_lease.idle_timeout`: how long an unused connection stays open; `None`
/// (0): for ever. An unreadable value keeps the default of 60 s.
pub fn idle_timeout() -> Option<Duration> {
    match get(IDLE_TIMEOUT).trim().parse::<f64>() {
        Ok(0.0) => None,
        Ok(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t.min(86_400.0))),
        _ => Some(Duration::from_secs(60)),
    }
}

/// The DSN a PHP caller gave (`what` names it in the error when it is not
/// UTF-8), else the ini setting redis_lease.dsn.
pub fn dsn(given: Option<Bytes>, what: &str) -> Result<String> {
    match given {
        Some(d) => d.into_utf8(what),
        None => Ok(get(DSN)),
    }
}

/// The endpoint of `dsn` (see `dsn`), with the ini settings' timeouts.
pub fn endpoint(given: Option<Bytes>, what: &str) -> Result<std::sync::Arc<Endpoint>> {
    Endpoint::parse_shared(&dsn(given, what)?, timeouts()?)
}
