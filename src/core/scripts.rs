//! The Lua scripts, compiled into the extension and hashed once per process.
//!
//! Each script is its own file; `scripts/lib.lua` holds the helpers they share.
//! They run as Redis Functions where the server has them: one library, loaded
//! once per server (`FUNCTION LOAD`, by the first call that finds it missing),
//! holding lib.lua and every script as a function. Redis builds the helpers
//! once, at load, and functions are replicated and persisted, so they survive a
//! failover and a restart. Where a server or user cannot (Redis 6, an ACL
//! without FUNCTION, `functions=0` in the DSN) a script runs by EVALSHA,
//! preceded by only the parts of lib.lua it uses (Redis runs an EVALSHA
//! script's whole chunk on every call); when Redis does not know it (a restart,
//! `SCRIPT FLUSH`, Redis 8 evicting scripts beyond 500) by EVAL with its
//! source, which also caches it: one step that cannot be undone by a flush in
//! between, as SCRIPT LOAD then EVALSHA can. Both run the same files.

use std::borrow::Cow;
use std::sync::LazyLock;

use redis::{ConnectionLike, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, ToRedisArgs};

/// One script: its source and SHA-1 (EVALSHA) and its function's name (FCALL).
pub struct Lua {
    pub source: String,
    hash: String,
    function: String,
}

impl Lua {
    fn new(def: &Def) -> Lua {
        let source = compose(LIB, def.body);
        let hash = redis::Script::new(&source).get_hash().to_string();
        let function = function_name(def, &LIBRARY.hash);
        Lua {
            source,
            hash,
            function,
        }
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

    /// `name target numkeys keys... args...`: EVALSHA, EVAL or FCALL.
    fn command(&self, name: &str, target: &[u8]) -> redis::Cmd {
        let data = target.len()
            + 10
            + self.keys.iter().map(|k| k.len()).sum::<usize>()
            + self.args.iter().map(Vec::len).sum::<usize>();
        let mut cmd = redis::Cmd::with_capacity(3 + self.keys.len() + self.args.len(), data);
        cmd.arg(name).arg(target).arg(self.keys.len());
        for key in &self.keys {
            cmd.arg(&key[..]);
        }
        for arg in &self.args {
            cmd.arg(&arg[..]);
        }
        cmd
    }

    /// The command running it as a script: EVALSHA, or EVAL with its source.
    fn cmd(&self, by_source: bool) -> redis::Cmd {
        match by_source {
            true => self.command("EVAL", self.lua.source.as_bytes()),
            false => self.command("EVALSHA", self.lua.hash.as_bytes()),
        }
    }

    /// Runs it as a script: EVALSHA, or EVAL when Redis does not know it.
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        match self.cmd(false).query(con) {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.cmd(true).query(con)
            }
            other => other,
        }
    }

    /// FCALL of its function.
    fn fcall(&self) -> redis::Cmd {
        self.command("FCALL", self.lua.function.as_bytes())
    }

    /// Runs it on `con`: as a function where the link can (loading the library
    /// where it is missing), else as a script. It is sent again, or as a script,
    /// only after an answer that says it did not run: a function that ran and
    /// failed half-way must not run twice.
    pub fn call<T: FromRedisValue>(&self, con: &mut dyn Scripted) -> RedisResult<T> {
        if !con.functions().usable() {
            return self.invoke(con);
        }
        for _ in 0..2 {
            match self.fcall().query(con) {
                Err(e) if not_found(&e) => {}
                Err(e) if fcall_refused(&e) => {
                    con.functions().refused = true;
                    return self.invoke(con);
                }
                other => return other,
            }
            match LIBRARY.load(con) {
                Ok(()) => {}
                // The link's state is unknown: the caller decides.
                Err(e) if e.is_io_error() || e.is_timeout() => return Err(e),
                Err(e) => {
                    con.functions().refused |= !passing(&e);
                    return self.invoke(con);
                }
            }
        }
        // Flushed again between load and call: a script cannot be.
        self.invoke(con)
    }
}

/// Whether a link runs our scripts as functions: unless its DSN says
/// `functions=0` (set by the pool at each checkout), or its server or user
/// turned them down once (remembered for the link's life).
#[derive(Clone, Copy, Debug, Default)]
pub struct Functions {
    pub off: bool,
    refused: bool,
}

impl Functions {
    fn usable(&self) -> bool {
        !self.off && !self.refused
    }
}

/// A link that remembers whether it runs functions.
pub trait Scripted: ConnectionLike {
    fn functions(&mut self) -> &mut Functions;
}

/// "Function not found": nothing ran (a new server, `FUNCTION FLUSH`, a master
/// that never had it).
fn not_found(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("Function not found"))
}

/// FCALL itself refused (unknown, renamed away, not in the user's ACL): nothing
/// ran. A refusal of a command inside a function names that command instead.
fn fcall_refused(e: &redis::RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("'fcall'")
        && (text.contains("unknown command") || text.contains("no permissions"))
}

/// A refusal to load that the next call may not meet (memory full, a master
/// being demoted or loading, a Cluster resharding); any other (FUNCTION
/// unknown or not in the user's ACL, no Lua engine, a server that cannot
/// compile the library) stands for the link's life.
fn passing(e: &redis::RedisError) -> bool {
    matches!(
        e.code(),
        Some("OOM" | "READONLY" | "LOADING" | "BUSY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN")
    )
}

/// The name of `def`'s function in the library whose code hashes to `hash`.
fn function_name(def: &Def, hash: &str) -> String {
    format!("rl_{}_{hash}", def.name.to_ascii_lowercase())
}

/// The library of functions: lib.lua once, then each script as a function
/// (`rl_<script>_<hash>`). Its name and its functions' names carry the hash of
/// its code: two versions of the extension (a rolling deploy) each find their
/// own, as function names are global across libraries.
pub struct Library {
    code: String,
    hash: String,
}

impl Library {
    fn new() -> Library {
        let mut body = String::from(LIB);
        for def in DEFS {
            let flags: Vec<String> = def.flags.iter().map(|f| format!("'{f}'")).collect();
            // '@': the hash, known once the whole body is.
            body.push_str(&format!(
                "redis.register_function{{function_name='{}', flags={{{}}}, \
                 callback=function(KEYS, ARGV)\n{}\nend}}\n",
                function_name(def, "@"),
                flags.join(", "),
                def.body
            ));
        }
        let hash = redis::Script::new(&body).get_hash()[..16].to_string();
        let code = format!(
            "#!lua name=redis_lease_{hash}\n{}",
            body.replace("_@'", &format!("_{hash}'"))
        );
        Library { code, hash }
    }

    /// Loads it (on a Cluster, on every master). REPLACE: a library of this
    /// name is this code, and another process may have loaded it meanwhile.
    fn load(&self, con: &mut dyn ConnectionLike) -> RedisResult<()> {
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(&self.code)
            .query::<redis::Value>(con)
            .map(drop)
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

/// A script file and how Redis may run it as a function.
struct Def {
    name: &'static str,
    body: &'static str,
    /// `allow-oom`: it frees or renews (as an EVAL script, it would run under
    /// maxmemory: its first write is not one that grows memory, or it writes
    /// only after a delete). `no-writes`: it only reads. None: refused whole
    /// under OOM, as the script is at its first write.
    flags: &'static [&'static str],
}

const LIB: &str = include_str!("scripts/lib.lua");

macro_rules! scripts {
    ($($name:ident $index:literal $file:literal [$($flag:literal),*];)*) => {
        const DEFS: &[Def] = &[$(Def {
            name: stringify!($name),
            body: include_str!(concat!("scripts/", $file)),
            flags: &[$($flag),*],
        }),*];
        $(pub static $name: LazyLock<Lua> = LazyLock::new(|| Lua::new(&DEFS[$index]));)*
    };
}

scripts! {
    ACQUIRE 0 "acquire.lua" [];
    RELEASE 1 "release.lua" ["allow-oom"];
    FORCE_RELEASE 2 "force_release.lua" ["allow-oom"];
    REFRESH 3 "refresh.lua" ["allow-oom"];
    INSPECT 4 "inspect.lua" ["no-writes"];
    HELD 5 "held.lua" ["no-writes"];
    SURVEY 6 "survey.lua" ["no-writes"];
    FENCE 7 "fence.lua" [];
    RESOLVE 8 "resolve.lua" ["allow-oom"];
    SESSION_OPEN 9 "session_open.lua" [];
    // 'write': refused under OOM, as it was.
    SESSION_SAVE 10 "session_save.lua" [];
    // The other operations (unlock, touch, destroy).
    SESSION_UNLOCK 11 "session_save.lua" ["allow-oom"];
    SESSION_REVOKE 12 "session_revoke.lua" ["allow-oom"];
    SESSION_PUT 13 "session_put.lua" [];
}

/// The functions' library.
pub static LIBRARY: LazyLock<Library> = LazyLock::new(Library::new);
