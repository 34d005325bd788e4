//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! Each script is its own file preceded by the parts of `scripts/lib.lua` it uses
//! (helpers shared by all of them: EVALSHA scripts cannot call each other). Only
//! those: Redis runs a script's whole chunk on every call, and defining every
//! helper each time cost a lock about 8 µs per script. A script runs by
//! EVALSHA; when Redis does not know it (a restart, `SCRIPT FLUSH`, Redis 8
//! evicting scripts beyond 500) it runs by EVAL with its source, which also
//! caches it: one step that cannot be undone by a flush in between, as
//! SCRIPT LOAD then EVALSHA can.

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::{ConnectionLike, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, ToRedisArgs};

/// One script: its source and SHA-1.
pub struct Lua {
    pub source: String,
    hash: String,
}

impl Lua {
    fn new(source: String) -> Lua {
        let hash = redis::Script::new(&source).get_hash().to_string();
        Lua { source, hash }
    }

    pub fn get_hash(&self) -> &str {
        &self.hash
    }

    /// An invocation with its first key.
    pub fn key<'a>(&'a self, key: impl Into<KeyBytes<'a>>) -> Invocation<'a> {
        let mut inv = Invocation {
            lua: self,
            keys: Vec::with_capacity(8),
            args: Vec::with_capacity(8),
        };
        inv.key(key);
        inv
    }
}

/// A key of an invocation: borrowed where it can be.
pub struct KeyBytes<'a>(Cow<'a, [u8]>);

impl<'a> From<&'a [u8]> for KeyBytes<'a> {
    fn from(k: &'a [u8]) -> Self {
        KeyBytes(Cow::Borrowed(k))
    }
}

impl<'a> From<&'a Vec<u8>> for KeyBytes<'a> {
    fn from(k: &'a Vec<u8>) -> Self {
        KeyBytes(Cow::Borrowed(k))
    }
}

impl<'a> From<&'a str> for KeyBytes<'a> {
    fn from(k: &'a str) -> Self {
        KeyBytes(Cow::Borrowed(k.as_bytes()))
    }
}

impl<'a> From<&'a String> for KeyBytes<'a> {
    fn from(k: &'a String) -> Self {
        KeyBytes(Cow::Borrowed(k.as_bytes()))
    }
}

impl From<Vec<u8>> for KeyBytes<'_> {
    fn from(k: Vec<u8>) -> Self {
        KeyBytes(Cow::Owned(k))
    }
}

/// A script with its keys and arguments, ready to run. Keys are borrowed where
/// they can be (most are the lease's own), and the command is built in one
/// buffer of the right size: this runs twice per lock, per request.
pub struct Invocation<'a> {
    lua: &'a Lua,
    keys: Vec<Cow<'a, [u8]>>,
    args: Vec<Vec<u8>>,
}

impl<'a> Invocation<'a> {
    pub fn key(&mut self, key: impl Into<KeyBytes<'a>>) -> &mut Self {
        self.keys.push(key.into().0);
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The command running it: EVALSHA, or EVAL with its source.
    fn cmd(&self, by_source: bool) -> redis::Cmd {
        let script: &[u8] = if by_source {
            self.lua.source.as_bytes()
        } else {
            self.lua.hash.as_bytes()
        };
        let data = script.len()
            + 10
            + self.keys.iter().map(|k| k.len()).sum::<usize>()
            + self.args.iter().map(Vec::len).sum::<usize>();
        let mut cmd = redis::Cmd::with_capacity(3 + self.keys.len() + self.args.len(), data);
        cmd.arg(if by_source { "EVAL" } else { "EVALSHA" })
            .arg(script)
            .arg(self.keys.len());
        for key in &self.keys {
            cmd.arg(&key[..]);
        }
        for arg in &self.args {
            cmd.arg(&arg[..]);
        }
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

/// `body` preceded by the definitions of `lib` it uses, directly or through
/// another definition, in `lib`'s order. A definition is a top-level `local`
/// statement (a function or a constant) with the comment lines just above it.
fn compose(lib: &str, body: &str) -> String {
    let mut defs: Vec<(String, String)> = Vec::new();
    let mut pending = String::new();
    for line in lib.lines() {
        let name = line
            .strip_prefix("local function ")
            .or_else(|| line.strip_prefix("local "))
            .map(|rest| identifiers(rest).next().unwrap_or_default().to_string());
        match name {
            Some(name) => defs.push((name, std::mem::take(&mut pending) + line + "\n")),
            None if line.starts_with("--") || line.is_empty() => {
                pending.push_str(line);
                pending.push('\n');
            }
            None => {
                // The rest of the definition above.
                if let Some((_, text)) = defs.last_mut() {
                    text.push_str(&std::mem::take(&mut pending));
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    let mut wanted: Vec<bool> = vec![false; defs.len()];
    let mut todo: Vec<&str> = vec![body];
    while let Some(text) = todo.pop() {
        for word in identifiers(&code_of(text)) {
            if let Some(i) = defs.iter().position(|(name, _)| name == word) {
                if !wanted[i] {
                    wanted[i] = true;
                    todo.push(&defs[i].1);
                }
            }
        }
    }
    let mut source: String = defs
        .iter()
        .zip(&wanted)
        .filter(|(_, &w)| w)
        .map(|((_, text), _)| text.as_str())
        .collect();
    source.push_str(body);
    source
}

/// `text` without its comments (a name in a comment is no use of it).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.split("--").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Lua identifiers in `text`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Lua> = LazyLock::new(|| {
            Lua::new(compose(
                include_str!("scripts/lib.lua"),
                include_str!(concat!("scripts/", $file)),
            ))
        });
    };
}

script!(ACQUIRE, "acquire.lua");
script!(RELEASE, "release.lua");
script!(FORCE_RELEASE, "force_release.lua");
script!(REFRESH, "refresh.lua");
script!(INSPECT, "inspect.lua");
script!(HELD, "held.lua");
script!(SURVEY, "survey.lua");
script!(FENCE, "fence.lua");
script!(RESOLVE, "resolve.lua");
script!(SESSION_OPEN, "session_open.lua");
script!(SESSION_SAVE, "session_save.lua");
script!(SESSION_REVOKE, "session_revoke.lua");
script!(SESSION_PUT, "session_put.lua");
