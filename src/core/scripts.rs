//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! Each script is `scripts/lib.lua` (helpers shared by all of them: EVALSHA
//! scripts cannot call each other) followed by its own file. A script runs by
//! EVALSHA; when Redis does not know it (a restart, `SCRIPT FLUSH`, Redis 8
//! evicting scripts beyond 500) it runs by EVAL with its source, which also
//! caches it: one step that cannot be undone by a flush in between, as
//! SCRIPT LOAD then EVALSHA can.

use std::sync::LazyLock;

use redis::{ConnectionLike, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, ToRedisArgs};

/// One script: its source and SHA-1.
pub struct Lua {
    pub source: &'static str,
    hash: String,
}

impl Lua {
    fn new(source: &'static str) -> Lua {
        let hash = redis::Script::new(source).get_hash().to_string();
        Lua { source, hash }
    }

    pub fn get_hash(&self) -> &str {
        &self.hash
    }

    /// An invocation with its first key.
    pub fn key<T: ToRedisArgs>(&self, key: T) -> Invocation<'_> {
        let mut inv = Invocation {
            lua: self,
            keys: Vec::with_capacity(6),
            args: Vec::with_capacity(6),
        };
        inv.key(key);
        inv
    }
}

/// A script with its keys and arguments, ready to run.
pub struct Invocation<'a> {
    lua: &'a Lua,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Invocation<'_> {
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The command running it: EVALSHA, or EVAL with its source.
    fn cmd(&self, by_source: bool) -> redis::Cmd {
        let mut cmd = redis::cmd(if by_source { "EVAL" } else { "EVALSHA" });
        cmd.arg(if by_source {
            self.lua.source
        } else {
            &self.lua.hash
        })
        .arg(self.keys.len())
        .arg(&self.keys)
        .arg(&self.args);
        cmd
    }

    /// Runs it: EVALSHA, or EVAL when Redis does not know the script.
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        match self.cmd(false).query(con) {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.cmd(true).query(con)
            }
            other => other,
        }
    }
}

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Lua> = LazyLock::new(|| {
            Lua::new(concat!(
                include_str!("scripts/lib.lua"),
                include_str!(concat!("scripts/", $file))
            ))
        });
    };
}

script!(ACQUIRE, "acquire.lua");
script!(RELEASE, "release.lua");
script!(FORCE_RELEASE, "force_release.lua");
script!(REFRESH, "refresh.lua");
script!(INSPECT, "inspect.lua");
script!(FENCE, "fence.lua");
script!(RESOLVE, "resolve.lua");
script!(SESSION_OPEN, "session_open.lua");
script!(SESSION_SAVE, "session_save.lua");
script!(SESSION_REVOKE, "session_revoke.lua");
script!(SESSION_PUT, "session_put.lua");
