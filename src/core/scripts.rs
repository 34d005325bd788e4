//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! Each script is `scripts/lib.lua` (helpers shared by all of them: EVALSHA
//! scripts cannot call each other) followed by its own file. redis-rs's `Script`
//! runs EVALSHA and, on NOSCRIPT (after a restart or a `SCRIPT FLUSH`), loads the
//! script and runs it again.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("scripts/lib.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

script!(ACQUIRE, "acquire.lua");
script!(RELEASE, "release.lua");
script!(REFRESH, "refresh.lua");

/// refresh.lua with its helpers, for the watchdog's pipelined EVALSHA/EVAL.
pub const REFRESH_SOURCE: &str = concat!(
    include_str!("scripts/lib.lua"),
    include_str!("scripts/refresh.lua")
);
script!(INSPECT, "inspect.lua");
script!(FENCE, "fence.lua");
script!(RESOLVE, "resolve.lua");
script!(SESSION_OPEN, "session_open.lua");
script!(SESSION_SAVE, "session_save.lua");
script!(SESSION_REVOKE, "session_revoke.lua");
