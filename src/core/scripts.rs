//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! Each script is `scripts/lib.lua` (helpers shared by all of them: EVALSHA
//! scripts cannot call each other) followed by its own file. redis-rs's `Script`
//! runs EVALSHA and, on NOSCRIPT (after a restart or a `SCRIPT FLUSH`), loads the
//! script and runs it again.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    // Also the source, as `$source` (for pipelines, which cannot use a `Script`).
    ($name:ident, $source:ident, $file:literal) => {
        pub const $source: &str = concat!(
            include_str!("scripts/lib.lua"),
            include_str!(concat!("scripts/", $file))
        );
        pub static $name: LazyLock<Script> = LazyLock::new(|| Script::new($source));
    };
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
script!(FORCE_RELEASE, "force_release.lua");
script!(REFRESH, REFRESH_SOURCE, "refresh.lua");
script!(INSPECT, "inspect.lua");
script!(FENCE, "fence.lua");
script!(RESOLVE, "resolve.lua");
script!(SESSION_OPEN, "session_open.lua");
script!(SESSION_SAVE, "session_save.lua");
script!(SESSION_REVOKE, "session_revoke.lua");
script!(SESSION_PUT, "session_put.lua");
