//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! redis-rs's `Script` runs EVALSHA and, on NOSCRIPT (after a restart or a
//! `SCRIPT FLUSH`), loads the script and runs it again.

use std::sync::LazyLock;

use redis::Script;

pub static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));
pub static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));
pub static REFRESH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/refresh.lua")));
pub static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/inspect.lua")));
pub static RESOLVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/resolve.lua")));
pub static SESSION_OPEN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/session_open.lua")));
pub static SESSION_SAVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/session_save.lua")));
