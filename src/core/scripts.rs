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

use redis::{
    ConnectionLike, ErrorKind, FromRedisValue, RedisResult, RedisWrite, ServerErrorKind,
    ToRedisArgs,
};

use crate::core::error::passing_code;

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

    /// Its function's name in the library (FCALL).
    pub fn function_name(&self) -> &str {
        &self.function
    }

    /// An invocation with its first key.
    pub fn key<'k>(&self, key: impl Into<KeyBytes<'k>>) -> Invocation<'_> {
        let mut inv = Invocation {
            lua: self,
            body: Vec::with_capacity(512),
            keys: 0,
            args: 0,
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

/// A script with its keys and arguments, ready to run. They are written once,
/// as the command's RESP, into one buffer: this runs twice per lock, and building
/// a `redis::Cmd` to encode it again cost more than the rest of the call on the
/// client (callgrind: docs/benchmarks.md). Keys come first, as in the command.
pub struct Invocation<'a> {
    lua: &'a Lua,
    /// Keys, then arguments, each a RESP bulk string.
    body: Vec<u8>,
    keys: usize,
    args: usize,
}

/// Appends a RESP bulk string (once per key and argument, ~17 per lock pair: not by
/// `bulk_of`, whose loop over parts costs more than the copy here).
fn bulk(out: &mut Vec<u8>, item: &[u8]) {
    out.reserve(item.len() + 24);
    out.push(b'$');
    decimal(out, item.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(item);
    out.extend_from_slice(b"\r\n");
}

/// Appends a RESP bulk string made of `parts`, end to end.
fn bulk_of(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len = parts.iter().map(|p| p.len()).sum();
    out.reserve(len + 24);
    out.push(b'$');
    decimal(out, len);
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

fn decimal(out: &mut Vec<u8>, n: usize) {
    if n >= 10 {
        decimal(out, n / 10);
    }
    out.push(b'0' + (n % 10) as u8);
}

/// Where `ToRedisArgs` writes an invocation's arguments.
struct Bulks<'b> {
    out: &'b mut Vec<u8>,
    count: &'b mut usize,
}

impl RedisWrite for Bulks<'_> {
    fn write_arg(&mut self, arg: &[u8]) {
        bulk(self.out, arg);
        *self.count += 1;
    }

    fn writer_for_next_arg(&mut self) -> impl std::io::Write + '_ {
        NextArg {
            to: Bulks {
                out: self.out,
                count: self.count,
            },
            bytes: Vec::new(),
        }
    }
}

/// An argument written piecewise: its length is known, and it is added, when
/// the writer is dropped.
struct NextArg<'b> {
    to: Bulks<'b>,
    bytes: Vec<u8>,
}

impl std::io::Write for NextArg<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_> {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        self.to.write_arg(&bytes);
    }
}

impl<'a> Invocation<'a> {
    pub fn key<'k>(&mut self, key: impl Into<KeyBytes<'k>>) -> &mut Self {
        debug_assert_eq!(self.args, 0, "a key after an argument");
        bulk(&mut self.body, &key.into().0);
        self.keys += 1;
        self
    }

    /// A key written from its parts, without building it first.
    pub fn key_of(&mut self, parts: &[&[u8]]) -> &mut Self {
        debug_assert_eq!(self.args, 0, "a key after an argument");
        bulk_of(&mut self.body, parts);
        self.keys += 1;
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut Bulks {
            out: &mut self.body,
            count: &mut self.args,
        });
        self
    }

    /// `name target numkeys keys... args...` (EVALSHA, EVAL or FCALL), as RESP.
    fn packed(&self, name: &str, target: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + target.len() + self.body.len());
        out.push(b'*');
        decimal(&mut out, 3 + self.keys + self.args);
        out.extend_from_slice(b"\r\n");
        bulk(&mut out, name.as_bytes());
        bulk(&mut out, target);
        // numkeys, as the bulk string of its digits.
        out.push(b'$');
        decimal(
            &mut out,
            self.keys.checked_ilog10().unwrap_or(0) as usize + 1,
        );
        out.extend_from_slice(b"\r\n");
        decimal(&mut out, self.keys);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    /// Sends it as `name target ...`, already encoded (a Cluster link routes
    /// it by its first key).
    fn query<T: FromRedisValue>(
        &self,
        con: &mut dyn ConnectionLike,
        name: &str,
        target: &[u8],
    ) -> RedisResult<T> {
        let reply = con.req_packed_command(&self.packed(name, target))?;
        Ok(redis::from_redis_value(reply.extract_error()?)?)
    }

    /// Runs it as a script: EVALSHA, or EVAL when Redis does not know it.
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        self.by_script(con)
    }

    fn by_script<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        match self.query(con, "EVALSHA", self.lua.hash.as_bytes()) {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.query(con, "EVAL", self.lua.source.as_bytes())
            }
            other => other,
        }
    }

    /// Runs it on `con`: as a function where the link can (loading the library
    /// where it is missing), else as a script. It is sent again, or as a script,
    /// only after an answer that says it did not run: a function that ran and
    /// failed half-way must not run twice.
    pub fn call<T: FromRedisValue>(&self, con: &mut dyn Scripted) -> RedisResult<T> {
        if !con.functions().usable() {
            return self.by_script(con);
        }
        for _ in 0..2 {
            match self.query(con, "FCALL", self.lua.function.as_bytes()) {
                Err(e) if not_found(&e) => {}
                Err(e) if fcall_refused(&e) => {
                    con.functions().refused = true;
                    return self.by_script(con);
                }
                other => return other,
            }
            match load_library(con) {
                Ok(()) => {}
                // The link's state is unknown: the caller decides.
                Err(e) if e.is_io_error() || e.is_timeout() => return Err(e),
                Err(_) => return self.by_script(con),
            }
        }
        // Flushed again between load and call: a script cannot be.
        self.by_script(con)
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
    pub(crate) fn usable(&self) -> bool {
        !self.off && !self.refused
    }

    /// The server or user turned FCALL down: scripts from now on.
    pub(crate) fn refuse(&mut self) {
        self.refused = true;
    }
}

/// Why a reply of a pipelined script call says it did not run (so it may be
/// sent again): the script or the function is missing, or FCALL is refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NotRun {
    NoScript,
    NoFunction,
    FcallRefused,
}

pub(crate) fn not_run(reply: &redis::Value) -> Option<NotRun> {
    let redis::Value::ServerError(e) = reply else {
        return None;
    };
    if e.code() == "NOSCRIPT" {
        return Some(NotRun::NoScript);
    }
    let e = redis::RedisError::from(e.clone());
    if not_found(&e) {
        Some(NotRun::NoFunction)
    } else if fcall_refused(&e) {
        Some(NotRun::FcallRefused)
    } else {
        None
    }
}

/// Loads the library on `con`'s server (`call`, and calls pipelined by hand).
/// An error that is not the link's (I/O, timeout) and will not pass turns the
/// link's functions off: a refusal the next call may not meet (memory full, a
/// master being demoted or loading, a Cluster resharding) leaves them on; any
/// other (FUNCTION unknown or not in the user's ACL, no Lua engine, a server
/// that cannot compile the library) stands for the link's life.
pub(crate) fn load_library(con: &mut dyn Scripted) -> RedisResult<()> {
    LIBRARY.load(con).inspect_err(|e| {
        if !(e.is_io_error() || e.is_timeout()) {
            con.functions().refused |= !passing_code(e.code());
        }
    })
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
    // Redis 7 quotes the command 'fcall', Redis 6 `fcall`.
    (text.contains("'fcall'") || text.contains("`fcall`"))
        && (text.contains("unknown command") || text.contains("no permissions"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An argument written piecewise, as some `ToRedisArgs` do.
    struct Piecewise;

    impl ToRedisArgs for Piecewise {
        fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
            use std::io::Write;
            let mut w = out.writer_for_next_arg();
            w.write_all(b"pie").unwrap();
            w.write_all(b"ce").unwrap();
        }
    }

    #[test]
    fn an_invocation_is_sent_as_redis_rs_would_send_it() {
        let owned: Vec<u8> = b"k{x}:void:t".to_vec();
        let mut inv = ACQUIRE.key(&b"k{x}"[..]);
        inv.key(owned).key("").key(&String::from("k{x}:0123456789"));
        inv.key_of(&[b"k{x}", b"", b":void:", b"tok"]).key_of(&[]);
        inv.arg("tok")
            .arg(30_000u64)
            .arg(-1i64)
            .arg(&b"\x00\r\n$3"[..])
            .arg(Piecewise)
            .arg("");
        let mut expected = redis::cmd("FCALL");
        expected
            .arg("fn")
            .arg(6)
            .arg("k{x}")
            .arg("k{x}:void:t")
            .arg("");
        expected
            .arg("k{x}:0123456789")
            .arg("k{x}:void:tok")
            .arg("")
            .arg("tok")
            .arg(30_000)
            .arg(-1);
        expected.arg(&b"\x00\r\n$3"[..]).arg("piece").arg("");
        let expected = expected.get_packed_command();
        assert_eq!(inv.packed("FCALL", b"fn"), expected);
    }

    #[test]
    fn lengths_of_every_width() {
        for n in [0, 9, 10, 99, 100, 12_345, 1 << 20] {
            let item = vec![b'x'; n];
            let mut inv = ACQUIRE.key(&item[..]);
            inv.arg(&item[..]);
            let mut expected = redis::cmd("EVALSHA");
            expected.arg("h").arg(1).arg(&item[..]).arg(&item[..]);
            assert_eq!(
                inv.packed("EVALSHA", b"h"),
                expected.get_packed_command(),
                "{n}"
            );
        }
    }
}
