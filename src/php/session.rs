//! The session handler in its two forms, which share one `Handler`:
//! the class `RedisLockingSessionHandler` for `session_set_save_handler()`, and the
//! native save handler `session.save_handler = redis_lease` (a `ps_module`).
//!
//! Redis failures and lost leases are reported the way PHP's own session handlers
//! report them: a warning naming the cause and a failed call (session_start() or
//! session_write_close() returns false). Only bad configuration throws.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::time::Duration;

use ext_php_rs::binary::Binary;
use ext_php_rs::convert::IntoZval;
use ext_php_rs::ffi::{php_error_docref, zend_class_entry, zend_long, zend_string, E_WARNING};
use ext_php_rs::flags::{ClassFlags, DataType};
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendStr, Zval};
use ext_php_rs::zend::ClassEntry;

use crate::core::compress::Codec;
use crate::core::dsn::Endpoint;
use crate::core::error::{Error, Result};
use crate::core::metrics::{self, Counter};
use crate::core::session::{
    generate_id, short_id, Expect, Mode, Put, Saved, Session, SessionConfig, SessionStore,
    OPTION_NAMES,
};
use crate::php::args::{Bytes, Options};
use crate::php::errors::php_global;
use crate::php::ini;

/// Emits a PHP warning. Call it with no Rust borrows held: a user error handler
/// may run PHP code that calls back into us.
pub fn warn(msg: &str) {
    let text = CString::new(format!("redis_lease: {msg}").replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: a "%s" format with one NUL-terminated string argument.
    unsafe {
        php_error_docref(
            std::ptr::null(),
            E_WARNING as c_int,
            c"%s".as_ptr(),
            text.as_ptr(),
        )
    };
}

/// A value and, perhaps, a warning to emit once our borrows are released.
pub struct Out<T> {
    pub value: T,
    pub warning: Option<String>,
}

impl<T> Out<T> {
    fn ok(value: T) -> Out<T> {
        Out {
            value,
            warning: None,
        }
    }
    fn warn(value: T, warning: String) -> Out<T> {
        Out {
            value,
            warning: Some(warning),
        }
    }
    pub fn emit(self) -> T {
        if let Some(w) = &self.warning {
            warn(w);
        }
        self.value
    }
}

/// The lock ttl when none is configured: max_execution_time, or 30 s when that is 0
/// (CLI, or unlimited): a lease never lasts forever.
fn auto_lock_ttl() -> Duration {
    match ini::get_str("max_execution_time").trim().parse::<u64>() {
        Ok(n) if n > 0 => Duration::from_secs(n),
        _ => Duration::from_secs(30),
    }
}

/// The session options as the ini settings give them.
fn config_from_ini() -> Result<SessionConfig> {
    let auto = auto_lock_ttl();
    let mut config = SessionConfig {
        lock_ttl: auto,
        lock_ttl_auto: true,
        ..SessionConfig::default()
    };
    for name in OPTION_NAMES {
        let mut setting = format!("redis_lease.session.{name}");
        let mut value = ini::get_str(&setting);
        // Compression unset here: as phpredis's own setting says, so that a site
        // switching from phpredis reads (and writes) its sessions as they are.
        if value.is_empty() && name.starts_with("compression") {
            let theirs = format!("redis.session.{name}");
            value = ini::configured(&theirs);
            if !value.is_empty() {
                value = Codec::as_phpredis_reads(name, &value);
                setting = theirs;
            }
        }
        config
            .set(name, &value, auto)
            .map_err(|e| Error::invalid(format!("ini setting {setting}: {e}")))?;
    }
    Ok(config)
}

/// Checks the session ini settings at startup, for a warning instead of a
/// failing first request.
pub fn check_ini() -> Option<String> {
    config_from_ini().err().map(|e| e.to_string())
}

/// The session prefix a store on `endpoint` uses unless its options say
/// otherwise (as `build_store` sets it): the DSN's `prefix=` (a phpredis
/// Cluster save_path has one of its own), else the ini setting.
/// RedisLease\inspect() lists sessions under it.
pub fn default_prefix(endpoint: &Endpoint) -> String {
    endpoint
        .prefix
        .clone()
        .unwrap_or_else(|| ini::get_str("redis_lease.session.prefix"))
}

/// Builds a store: ini settings, then the DSN's `prefix=`, then `options`.
fn build_store(dsn: &str, options: &[(String, String)]) -> Result<SessionStore> {
    let endpoint = Endpoint::parse_shared(dsn, ini::timeouts()?)?;
    let mut config = config_from_ini()?;
    if let Some(prefix) = &endpoint.prefix {
        config.set("prefix", prefix, config.lock_ttl)?;
    }
    let auto = auto_lock_ttl();
    for (name, value) in options {
        config.set(name, value, auto)?;
    }
    config.finish();
    Ok(SessionStore::new(endpoint, config))
}

fn gc_maxlifetime() -> Duration {
    Duration::from_secs(
        ini::get_str("session.gc_maxlifetime")
            .trim()
            .parse()
            .unwrap_or(1440),
    )
}

/// Which form a handler serves: it decides what its messages name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// RedisLockingSessionHandler, called by PHP or directly (Laravel).
    Class,
    /// session.save_handler = redis_lease.
    Native,
}

/// What a request last saw of a session.
#[derive(Clone, PartialEq)]
enum Seen {
    /// Its data (`None`: it had none), and the data's stored form where that
    /// differs (compressed): what a later write expects to find.
    Data(Option<Vec<u8>>, Option<Vec<u8>>),
    /// The request destroyed it.
    Destroyed,
    /// A logout (another request's destroy) revoked this request's lock: what it
    /// writes of it later is dropped as well (quietly: its refusal was told).
    Revoked,
    /// Its stored data could not be read: it is not written over.
    Kept,
    /// A fresh id the request moved to, left unwritten (`Handler::origin`):
    /// not written later either.
    Refused,
    /// Its read failed: the request holds nothing of what is stored, and
    /// what it writes of it is refused (review, stop 58: a caller that went on
    /// with an empty session wrote it over another request's save).
    Unread,
}

/// The warning for a write of a session a logout revoked (`Saved::Revoked`).
fn revoked_message(id: &str, what: &str) -> String {
    format!(
        "session {} was not {what}: another request destroyed it (a logout) while this request \
         held its lock; it stays destroyed",
        short_id(id)
    )
}

/// The warning for a write refused because this request's lock expired: on
/// session `id` itself, or on session `old`, whose data a fresh id would carry.
fn expired_message(id: &str, what: &str, old: Option<&str>, lock_ttl: f64) -> String {
    let (on, outcome) = match old {
        None => (String::new(), "its data was kept"),
        Some(old) => (
            format!(" on session {}", short_id(old)),
            "its data is not carried to a new id",
        ),
    };
    format!(
        "session {} was not {what}: this request's lock{on} expired (lock_ttl {lock_ttl:.3} s) \
         before the request let it go, and another request may have changed it since; {outcome}",
        short_id(id)
    )
}

/// The warning for a call on session `id` that Redis refused or did not answer.
fn failed_message(id: &str, what: &str, e: &Error) -> String {
    format!("session {} was not {what}: {e}", short_id(id))
}

/// The one warning for stored data that could not be read (`Session::kept`).
fn kept_warning(why: &String) -> String {
    format!(
        "{why}; it was left as it is, and this request sees an empty session and does not write \
         it (check redis_lease.session.compression against what wrote it)"
    )
}

/// One request's session state, shared by both forms.
pub struct Handler {
    store: SessionStore,
    session: Option<Session>,
    /// The process that made the handler. A child made by pcntl_fork() inherits
    /// the parent's open session; the parent keeps it (and its lock).
    pid: u32,
    /// In a forked child, the id of the session the parent had open: the
    /// child never writes, touches or destroys it (unless it reads it itself).
    parents: Option<String>,
    /// The DSN it was built from (the native handler's save_path).
    dsn: String,
    form: Form,
    /// What this request last saw of the sessions it let go of (read, then
    /// wrote or unlocked): a later write of one of them (an early save, then the
    /// framework's own) may overwrite only that.
    seen: Vec<(String, Seen)>,
    /// The session read last was opened read-only (on_lock_timeout = readonly).
    readonly: bool,
    /// A session this request held and lost before it let go: what the request
    /// has in memory came from it, so no fresh id is written from it (Laravel's
    /// migrate() would carry a logged-out or stale state to a new id).
    lost: Option<(String, Lost)>,
    /// The session read read-only with data in it, or saved last, whose state
    /// this request has in memory (a fresh id it moves to carries it).
    origin: Option<Origin>,
    /// A fresh id was written in this request, moved to from a session it
    /// read: a later one (a second regenerate()) moved too.
    moved: bool,
}

/// A session this request read read-only (another request held its lock) and
/// found data in, or saved and let go of (an early save, Laravel's `save()`;
/// session_regenerate_id(false) saves the old id): what the request has in
/// memory came from it, or went to it, and others may change it since. A fresh id it
/// moves to (session_regenerate_id(), Laravel's and Symfony's migrate()) is
/// written with that only while the session still holds what was read: a
/// logout (or any save) by the holder meanwhile would be undone under the new
/// id. That is the moment the request's state is taken to have moved: the
/// fresh id is seen by no one else before its cookie is sent.
struct Origin {
    id: String,
    how: Came,
    /// This request destroyed the session (session_regenerate_id(true),
    /// migrate(true)): whether it still held what was read then (a saved
    /// one: whether it still had data).
    destroyed: Option<bool>,
}

/// How the request's state came from (or went to) its `Origin`.
enum Came {
    /// Read read-only: this data, in its stored form. Any save since makes
    /// what the request carries stale.
    Read(Vec<u8>),
    /// Saved by this request: only a logout since (the data gone) makes it
    /// stale. Another request's save since is an ordinary concurrent write
    /// (session_regenerate_id(false) saves the old id, which the page's other
    /// requests then go on using).
    Saved,
}

impl Origin {
    /// What a read of session `id` that found `data` leaves in memory: an
    /// origin when it was read read-only.
    fn of(id: &str, s: &Session, data: Option<&Vec<u8>>) -> Option<Origin> {
        let readonly = matches!(s.mode, Mode::Readonly) && s.kept.is_none();
        data.filter(|_| readonly).map(|d| Origin {
            id: id.to_string(),
            how: Came::Read(s.stored.clone().unwrap_or_else(|| d.clone())),
            destroyed: None,
        })
    }
}

/// How a request lost a session it held (`Handler::lost`).
#[derive(Clone, Copy, PartialEq)]
enum Lost {
    /// Its lock expired: another request may have changed the session since.
    Expired,
    /// A logout (another request's destroy) revoked its lock.
    Revoked,
}

impl Handler {
    pub fn new(store: SessionStore, dsn: String, form: Form) -> Handler {
        Handler {
            store,
            session: None,
            pid: crate::core::pid::current(),
            parents: None,
            dsn,
            form,
            seen: Vec::new(),
            readonly: false,
            lost: None,
            origin: None,
            moved: false,
        }
    }

    /// Whether the session read last was opened read-only: this request's
    /// writes are discarded (a configured outcome, so no warning says it).
    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// The data's ttl: the `ttl` option, else what PHP passes (gc_maxlifetime).
    fn ttl(&self, max_lifetime: Duration) -> Duration {
        self.store.config.ttl.unwrap_or(max_lifetime)
    }

    /// What this request saw of a session it wrote `data` to, stored as `stored`.
    fn seen_written(data: &[u8], stored: Cow<'_, [u8]>) -> Seen {
        let stored = match stored {
            Cow::Owned(s) => Some(s),
            Cow::Borrowed(_) => None,
        };
        Seen::Data(Some(data.to_vec()), stored)
    }

    /// Remembers what this request last saw of session `id`.
    fn saw(&mut self, id: &str, seen: Seen) {
        if seen == Seen::Revoked {
            self.lost = Some((id.to_string(), Lost::Revoked));
        }
        self.seen.retain(|(s, _)| s != id);
        if self.seen.len() == 4 {
            self.seen.remove(0);
        }
        self.seen.push((id.to_string(), seen));
    }

    /// What the caller called, for a message.
    fn caller(&self, method: &str) -> String {
        match self.form {
            Form::Native => "session_start()".to_string(),
            Form::Class => format!("RedisLockingSessionHandler::{method}()"),
        }
    }

    /// In a forked child, forgets the session the parent has open: writing,
    /// unlocking or destroying it here would take it from under the parent
    /// (`parents` remembers its id).
    fn note_fork(&mut self) {
        if self.pid != crate::core::pid::current() {
            self.pid = crate::core::pid::current();
            self.parents = self
                .session
                .take()
                .filter(|s| !matches!(s.mode, Mode::Done))
                .map(|s| s.id.clone());
        }
    }

    /// Whether `id` is the session the parent process has open (calls on it
    /// are left alone), after `note_fork`.
    fn parents_session(&mut self, id: &str) -> bool {
        self.note_fork();
        self.parents.as_deref() == Some(id)
    }

    /// Locks and reads session `id`: `Some(data)` ("" for a new session), `None` on failure.
    pub fn read(&mut self, id: &str) -> Out<Option<Vec<u8>>> {
        if self.parents_session(id) {
            // Read (and locked) here: the child's own from now on.
            self.parents = None;
        }
        // session_reset() reads the session it already holds open: read it again
        // under the same lock rather than unlocking it for a moment. A class
        // handler's session read read-only holds no lock: it is opened again,
        // and waits for the lock as any read. (Before, a worker that keeps its
        // handler (Octane) read it so, unlocked and read-only still, for every
        // next request of that session, whose writes were dropped, answered
        // true. Review, stop 65.) The native handler lives one request: its
        // session_reset() reads it again, read-only still, without waiting.
        let again = |s: &Session| match s.mode {
            Mode::Done => false,
            Mode::Readonly => self.form == Form::Native,
            _ => true,
        };
        if let Some(s) = self.session.as_mut().filter(|s| s.id == id && again(s)) {
            return match self.store.reread(s) {
                Ok(data) => {
                    // What the request has in memory now.
                    self.origin = Origin::of(id, s, data.as_ref());
                    Out {
                        value: Some(data.unwrap_or_default()),
                        warning: s.kept.as_ref().map(kept_warning),
                    }
                }
                Err(e) => Out::warn(
                    None,
                    format!("session {} could not be read again: {e}", short_id(id)),
                ),
            };
        }
        let mut warning = self.close().warning;
        // What the request holds from now on is this session's (a worker that
        // serves many requests, as Octane's, keeps one handler).
        self.lost = None;
        // Except when session_regenerate_id() reads the fresh id it moves to:
        // the request's state is still the origin's.
        let carried = self.origin.take().filter(|_| crate::php::in_regenerate());
        self.moved &= carried.is_some();
        let result = match self.store.open(id) {
            Ok((session, data)) => {
                match &session.kept {
                    Some(why) => {
                        warning = Some(kept_warning(why));
                        self.saw(id, Seen::Kept);
                    }
                    None => self.saw(id, Seen::Data(data.clone(), session.stored.clone())),
                }
                // A configured outcome, counted in the metrics and told by
                // isReadOnly() / RedisLease\session_is_readonly(): no warning
                // (frameworks turn warnings into errors).
                self.readonly = matches!(session.mode, Mode::Readonly);
                // (What regenerate's read finds, PHP drops: $_SESSION stays.)
                self.origin = carried.or_else(|| Origin::of(id, &session, data.as_ref()));
                self.session = Some(session);
                Some(data.unwrap_or_default())
            }
            Err(e) => {
                warning = Some(format!("{} failed: {e}", self.caller("read")));
                self.saw(id, Seen::Unread);
                // Nothing was opened: not the previous request's answer (a worker
                // that serves many requests keeps one handler).
                self.readonly = false;
                None
            }
        };
        Out {
            value: result,
            warning,
        }
    }

    fn saved(&mut self, id: &str, what: &str, result: Result<Saved>) -> Out<bool> {
        let lock_ttl = self.store.config.lock_ttl.as_secs_f64();
        // A destroy after our lease expired took effect (a logout), but what
        // this request holds may be older than what it deleted: a fresh id is
        // not written with it (review, stop 56: session_regenerate_id(true)
        // wrote it, over another request's save or logout).
        if matches!(result, Ok(Saved::LeaseLost | Saved::LostDestroyed)) && self.lost.is_none() {
            self.lost = Some((id.to_string(), Lost::Expired));
        }
        match result {
            Ok(Saved::Yes) => Out::ok(true),
            Ok(Saved::LeaseLost) => Out::warn(false, expired_message(id, what, None, lock_ttl)),
            // A logout by another request revoked our lock: its outcome, not a
            // failure. Nothing is written (nor later, under this id or a fresh
            // one: `lost`), counted (session_revoked), and told quietly: a
            // warning, which frameworks turn into an HTTP 500, failed the other
            // tab's request at every logout, and PHP warns of a false itself
            // (review, stop 58). Inside session_regenerate_id() it is refused,
            // so that it does not go on under a new id.
            Ok(Saved::Revoked) if !crate::php::in_regenerate() => Out::ok(true),
            Ok(Saved::Revoked) => Out::warn(false, revoked_message(id, what)),
            // Read-only (on_lock_timeout = readonly): a configured outcome.
            Ok(Saved::Discarded | Saved::Changed) => Out::ok(true),
            // Destroyed: what was asked (a fresh id's write is refused, above).
            Ok(Saved::LostDestroyed) => Out::ok(true),
            // The message after the colon says whether Redis refused or did not answer.
            Err(e) => Out::warn(false, failed_message(id, what, &e)),
        }
    }

    /// Whether what this request has in memory must not be written under `id`,
    /// a fresh id it moved to: it came from a session read read-only that has
    /// changed since (`Origin`).
    fn carried_stale(&self, id: &str) -> Result<bool> {
        let Some(o) = self.origin.as_ref().filter(|o| o.id != id) else {
            return Ok(false);
        };
        match (o.destroyed, &o.how) {
            (Some(same), _) => Ok(!same),
            (None, Came::Saved) => Ok(!self.store.exists(&o.id)?),
            (None, Came::Read(stored)) => Ok(!self.store.holds(&o.id, stored)?),
        }
    }

    /// This request saved `id`, which it held open, and its state went there:
    /// a fresh id it moves to later is written with it only while `id` was not
    /// logged out since (review, stop 57: after an early save, another
    /// request's logout was undone under the fresh id Laravel's regenerate()
    /// wrote).
    fn saved_origin(&mut self, id: &str) {
        self.origin = Some(Origin {
            id: id.to_string(),
            how: Came::Saved,
            destroyed: None,
        });
    }

    /// Leaves `id`, a fresh id whose carried state is stale, unwritten now and
    /// later in this request, counted as a write conflict.
    fn refused(&mut self, id: &str) {
        metrics::incr(Counter::SessionWriteConflicts);
        self.saw(id, Seen::Refused);
    }

    pub fn write(&mut self, id: &str, data: &[u8], max_lifetime: Duration) -> Out<bool> {
        if self.parents_session(id) {
            return Out::ok(true);
        }
        let ttl = self.ttl(max_lifetime);
        let open = self
            .session
            .as_ref()
            .is_some_and(|s| s.id == id && !matches!(s.mode, Mode::Done));
        if open {
            let stale = self.carried_stale(id);
            if !matches!(stale, Ok(false)) {
                // The fresh id stays unwritten, its lock freed now: quietly, as
                // the request's other writes (true: PHP would warn of a false).
                let warning = stale.err().map(|e| failed_message(id, "written", &e));
                if warning.is_none() {
                    self.refused(id);
                }
                let closed = self.close();
                return Out {
                    value: warning.is_none() && closed.value,
                    warning: warning.or(closed.warning),
                };
            }
        }
        let store = &self.store;
        let stored = store.packed(data);
        let result = match &mut self.session {
            Some(s) if s.id == id && !matches!(s.mode, Mode::Done) => {
                store.write_packed(s, &stored, ttl)
            }
            _ => return self.write_unopened(id, data, stored, ttl),
        };
        match result {
            Ok(Saved::Yes) => {
                self.saved_origin(id);
                self.saw(id, Self::seen_written(data, stored))
            }
            Ok(Saved::Revoked) => self.saw(id, Seen::Revoked),
            Ok(_) => {}
            Err(_) => {
                // Told that a logout revoked it, whose replication fell short
                // (the error): what it writes later is dropped all the same,
                // as a destroy's (review, stop 65).
                if self.session.as_ref().is_some_and(|s| s.revoked) {
                    self.saw(id, Seen::Revoked);
                }
                self.unlock_after_error();
            }
        }
        self.saved(id, "written", result)
    }

    /// A write of a session this request does not hold open: frameworks that do
    /// not go through PHP's session module (Laravel) write a fresh id after
    /// regenerate() without reading it, and save twice when the app saves early.
    /// A session this request let go of is written only over what the request
    /// last saw of it (the same data again: nothing to do), waiting for its lock
    /// as a read does: another request's write in between is never overwritten.
    /// One it never saw is written only while no other request holds (or waits
    /// for) its lock; and when the request moved to it from a session it read
    /// (a fresh id), only while nothing is stored under it: a request that got
    /// the fresh cookie and saved first keeps its save, and so does one that
    /// saved after this write timed out, which then lands late (review, stop 59:
    /// it was written over). A handler that never reads (a write-only wrapper's
    /// store, as Symfony's MigratingSessionHandler makes) writes over what is
    /// there, as it means to. A write refused that way returns false, without a warning:
    /// the framework carries on, and the conflict is counted
    /// (session_write_conflicts). One it destroyed is not written again.
    fn write_unopened(
        &mut self,
        id: &str,
        data: &[u8],
        stored: Cow<'_, [u8]>,
        ttl: Duration,
    ) -> Out<bool> {
        let seen = self.seen_of(id).cloned();
        let expected = match &seen {
            Some(Seen::Data(Some(d), _)) if d == data => return Out::ok(true),
            Some(Seen::Data(Some(d), stored)) => Expect::Data(stored.as_deref().unwrap_or(d)),
            Some(Seen::Data(None, _)) => Expect::Absent,
            // Data it could not read (it saw an empty session): kept as it is.
            // Logged out meanwhile: not written back (see `saved`).
            Some(Seen::Kept | Seen::Revoked | Seen::Refused) => return Out::ok(true),
            Some(Seen::Unread) => {
                return Out::warn(
                    false,
                    format!(
                        "session {} was not written: this request could not read it, so what \
                         it holds is not what is stored",
                        short_id(id)
                    ),
                )
            }
            Some(Seen::Destroyed) => {
                return Out::warn(
                    false,
                    format!(
                        "session {} was destroyed in this request; it is not written again",
                        short_id(id)
                    ),
                )
            }
            None => {
                // Moved here from a session it read (or saved and let go of),
                // or from a fresh id it moved to before (review, stop 61: the
                // second regenerate() of a request, its first id saved and let
                // go of, wrote with `any`, over a save of the fresh cookie).
                let moved = self.session.is_some() || self.origin.is_some() || self.moved;
                // A fresh id while another session is open (regenerate() without
                // destroying the old id): the request moved on, so that one is
                // unlocked now.
                if self.session.as_ref().is_some_and(|s| s.id != id) {
                    if let Some(w) = self.close().warning {
                        return Out::warn(false, w);
                    }
                }
                match &self.lost {
                    // Refused quietly: the revocation was counted (session_revoked),
                    // and the framework's new cookie then names an empty session,
                    // which is what the logout asked for.
                    Some((_, Lost::Revoked)) => return Out::ok(false),
                    Some((old, Lost::Expired)) => {
                        let lock_ttl = self.store.config.lock_ttl.as_secs_f64();
                        let warning = expired_message(id, "written", Some(old), lock_ttl);
                        return Out::warn(false, warning);
                    }
                    None => {}
                }
                match self.carried_stale(id) {
                    Ok(false) => {}
                    Ok(true) => {
                        self.refused(id);
                        return Out::ok(false);
                    }
                    Err(e) => return Out::warn(false, failed_message(id, "written", &e)),
                }
                if moved {
                    self.moved = true;
                    Expect::Absent
                } else {
                    Expect::Any
                }
            }
        };
        let result = match self.store.put_packed(id, &stored, ttl, expected) {
            // Another request holds it now: wait our turn (as a read would) and
            // write only over what we saw.
            Ok(Put::Busy) if seen.is_some() => self.rewrite_locked(id, &stored, ttl, expected),
            other => other,
        };
        match result {
            Ok(Put::Written) => {
                self.saw(id, Self::seen_written(data, stored));
                Out::ok(true)
            }
            // Logged out by another request meanwhile: refused quietly, as the
            // conflicts below (see `saved`).
            Ok(Put::Revoked) => {
                self.saw(id, Seen::Revoked);
                Out::ok(false)
            }
            Ok(Put::Busy | Put::Changed) => {
                metrics::incr(Counter::SessionWriteConflicts);
                Out::ok(false)
            }
            Err(e) => Out::warn(false, failed_message(id, "written", &e)),
        }
    }

    /// Takes session `id`'s lock (waiting as a read does), then writes `stored`
    /// (data in its stored form) only if the session still holds `expected`;
    /// unlocks either way.
    fn rewrite_locked(
        &mut self,
        id: &str,
        stored: &[u8],
        ttl: Duration,
        expected: Expect<'_>,
    ) -> Result<Put> {
        let (mut s, now) = match self.store.open(id) {
            Ok(opened) => opened,
            Err(Error::LockTimeout(_)) => return Ok(Put::Busy),
            Err(e) => return Err(e),
        };
        if !matches!(s.mode, Mode::Locked(_)) {
            return Ok(Put::Busy);
        }
        // `expected` is in the stored form (compressed, where it is).
        let found = s.stored.as_deref().or(now.as_deref());
        let as_seen = s.kept.is_none()
            && match expected {
                Expect::Data(d) => found == Some(d),
                Expect::Absent => now.is_none(),
                Expect::Any => true,
            };
        if !as_seen {
            self.store.close(&mut s)?;
            return Ok(Put::Changed);
        }
        let saved = self.store.write_packed(&mut s, stored, ttl);
        if saved.is_err() {
            // An error reply leaves the lock ours (close() frees it on the
            // handler's own session; this one is local, and dropping it would
            // keep the lock until its ttl).
            self.store.close_or_defer(&mut s, false);
            // Told revoked, short of replicas: as `write`'s.
            if s.revoked {
                self.saw(id, Seen::Revoked);
            }
        }
        Ok(match saved? {
            Saved::Yes => Put::Written,
            Saved::Revoked => Put::Revoked,
            _ => Put::Changed,
        })
    }

    /// A save Redis answered with an error ran nothing, and left the lock
    /// ours: freed now, not at close(), which a framework may never call (Laravel;
    /// a long-lived worker's handler would keep it until its next read).
    fn unlock_after_error(&mut self) {
        if let Some(s) = self.session.as_mut() {
            self.store.close_or_defer(s, false);
        }
    }

    /// What this request last did with (or saw of) session `id`.
    fn seen_of(&self, id: &str) -> Option<&Seen> {
        self.seen
            .iter()
            .find(|(s, _)| s == id)
            .map(|(_, seen)| seen)
    }

    pub fn update_timestamp(&mut self, id: &str, data: &[u8], max_lifetime: Duration) -> Out<bool> {
        if self.parents_session(id) {
            return Out::ok(true);
        }
        let ttl = self.ttl(max_lifetime);
        let seen = self.seen_of(id).is_some();
        let store = &self.store;
        let result = match &mut self.session {
            Some(s) if s.id == id && !matches!(s.mode, Mode::Done) => store.touch(s, ttl),
            // Saved (or closed) already in this request (an early save, then
            // PHP's lazy write of the data it read): as a write of `data` then,
            // which does nothing when that is what the request last saw of it,
            // and writes it over only what the request saw (`write_unopened`).
            _ if seen => {
                let stored = store.packed(data).into_owned();
                return self.write_unopened(id, data, Cow::Owned(stored), ttl);
            }
            // Never read here: a write-only store's (Symfony's
            // MigratingSessionHandler passes an unchanged session's
            // updateTimestamp() on to the store it migrates to). What is stored
            // has its expiry extended, as Symfony's own stores do; nothing is
            // written (another request may have saved newer data there, or
            // logged out: a write where nothing is would bring the session
            // back). Before, a warning (an HTTP 500 in a framework's debug
            // mode), and the copy expired (review, stop 61).
            _ => {
                return match store.expire(id, ttl) {
                    Ok(_) => Out::ok(true),
                    Err(e) => Out::warn(false, failed_message(id, "updated", &e)),
                }
            }
        };
        match result {
            Ok(Saved::Revoked) => self.saw(id, Seen::Revoked),
            Err(_) => self.unlock_after_error(),
            Ok(_) => {}
        }
        self.saved(id, "updated", result)
    }

    pub fn destroy(&mut self, id: &str) -> Out<bool> {
        if self.parents_session(id) {
            return Out::warn(
                false,
                format!(
                    "session {} belongs to the parent process; a forked child does not destroy it",
                    short_id(id)
                ),
            );
        }
        self.saw(id, Seen::Destroyed);
        let store = &self.store;
        let how = self.origin.as_ref().filter(|o| o.id == id).map(|o| &o.how);
        let saved = matches!(how, Some(Came::Saved));
        let read = match how {
            Some(Came::Read(stored)) => Some(stored.as_slice()),
            _ => None,
        };
        if let Some(s) = self
            .session
            .as_mut()
            .filter(|s| s.id == id && !matches!(s.mode, Mode::Done))
        {
            let result = store.destroy(s, read);
            // The logout that follows a lost lease failed: what this request
            // holds is still not carried to a fresh id (review, stop 57).
            if result.is_err() && s.lease_lost {
                self.lost.get_or_insert((id.to_string(), Lost::Expired));
            }
            // Told that a logout revoked it, whose replication fell short (the
            // error): nor when the logout revoked its hold.
            if result.is_err() && s.revoked {
                self.lost.get_or_insert((id.to_string(), Lost::Revoked));
            }
            self.origin_destroyed(
                id,
                result
                    .as_ref()
                    .ok()
                    .map(|r| !matches!(r, Saved::Changed | Saved::LostDestroyed)),
            );
            // Destroyed after our lease ran out: inside session_regenerate_id()
            // refused, so that it does not go on to write what this request
            // holds under a new id (its close and open there forget `lost`).
            if matches!(result, Ok(Saved::LostDestroyed)) && crate::php::in_regenerate() {
                let lock_ttl = self.store.config.lock_ttl.as_secs_f64();
                self.lost.get_or_insert((id.to_string(), Lost::Expired));
                return Out::warn(
                    false,
                    format!(
                        "session {} was destroyed, but this request's lock expired (lock_ttl \
                         {lock_ttl:.3} s) before the request let it go, and another request may \
                         have changed it since; its data is not carried to a new id",
                        short_id(id)
                    ),
                );
            }
            if matches!(result, Ok(Saved::Revoked)) {
                // A logout revoked this request's hold and destroyed the
                // session: what the request holds is written nowhere, under
                // this id or a fresh one (`write_unopened`).
                if self.lost.is_none() {
                    self.lost = Some((id.to_string(), Lost::Revoked));
                }
                // A second logout (another tab's, Laravel's invalidate()) asked
                // for what is done: no warning, which frameworks turn into an
                // HTTP 500 (review, stop 56). Inside session_regenerate_id() it
                // is refused, so that it does not go on under a new id.
                if !crate::php::in_regenerate() {
                    return Out::ok(true);
                }
            }
            return self.saved(id, "destroyed", result);
        }
        // Not ours to lock (e.g. an old id): delete it outright. (One this
        // request saved and moved on from: whether a logout came first.)
        let result = match saved {
            true => store.delete_existing(id),
            false => store.delete(id, read),
        };
        self.origin_destroyed(id, result.as_ref().ok().copied());
        match result {
            Ok(_) => Out::ok(true),
            Err(e) => Out::warn(
                false,
                format!("destroying session {} failed: {e}", short_id(id)),
            ),
        }
    }

    /// Notes this request's destroy of session `id`: if it is the origin, whether
    /// it still held what was read (`None`: unknown, asked again at the write).
    fn origin_destroyed(&mut self, id: &str, same: Option<bool>) {
        if let Some(o) = self.origin.as_mut().filter(|o| o.id == id) {
            o.destroyed = same;
        }
    }

    /// Unlocks without writing, if still locked.
    pub fn close(&mut self) -> Out<bool> {
        self.note_fork();
        let Some(mut s) = self.session.take() else {
            return Out::ok(true);
        };
        let closed = self.store.close(&mut s);
        if s.revoked {
            self.saw(&s.id, Seen::Revoked);
        }
        match closed {
            Ok(true) => Out::ok(true),
            // The lease had run out already: nothing of ours to free.
            Ok(false) => {
                if self.lost.is_none() {
                    self.lost = Some((s.id.clone(), Lost::Expired));
                }
                Out::ok(true)
            }
            Err(e) => Out::warn(
                false,
                format!("could not unlock session {}: {e}", short_id(&s.id)),
            ),
        }
    }

    pub fn create_sid(&mut self) -> Out<Option<String>> {
        let length = ini::get_str("session.sid_length")
            .trim()
            .parse()
            .unwrap_or(32);
        let bits = ini::get_str("session.sid_bits_per_character")
            .trim()
            .parse()
            .unwrap_or(4);
        match self.store.create_id(length, bits) {
            Ok(id) => Out::ok(Some(id)),
            // Redis could not say whether the id is taken. A fresh random id of this
            // length is as good as unique, and the read that follows reports the
            // outage; a null id would make PHP throw instead.
            Err(Error::Connection(_) | Error::Reply { .. } | Error::Unresolved { .. }) => {
                match generate_id(length, bits) {
                    Ok(id) => Out::ok(Some(id)),
                    Err(e) => Out::warn(None, format!("could not create a session id: {e}")),
                }
            }
            Err(e) => Out::warn(None, format!("could not create a session id: {e}")),
        }
    }

    pub fn validate_id(&mut self, id: &str) -> Out<bool> {
        match self.store.exists(id) {
            Ok(found) => Out::ok(found),
            Err(e) => Out::warn(
                false,
                format!("could not check session id {}: {e}", short_id(id)),
            ),
        }
    }
}

impl Drop for Handler {
    /// A handler object destroyed (or constructed again) with its session still
    /// open must not keep the lock until its ttl.
    fn drop(&mut self) {
        self.note_fork();
        if let Some(mut s) = self.session.take() {
            self.store.close_or_defer(&mut s, crate::php::in_teardown());
        }
    }
}

/// `string|false` for `read()`: declared as `string`, which the interface accepts
/// as compatible; the startup code widens it to `string|false` once the class is
/// registered (see `widen_read_return_type`).
pub struct ReadResult(Option<Vec<u8>>);

impl IntoZval for ReadResult {
    const TYPE: DataType = DataType::String;
    const NULLABLE: bool = false;

    fn set_zval(self, zv: &mut Zval, _persistent: bool) -> ext_php_rs::error::Result<()> {
        match self.0 {
            Some(bytes) => zv.set_zend_string(ZendStr::new(bytes, false)),
            None => zv.set_bool(false),
        }
        Ok(())
    }
}

fn session_ce(symbol: &CStr) -> &'static ClassEntry {
    php_global::<*mut zend_class_entry>(symbol)
        // SAFETY: ext/session's exported class-entry pointers, set in its MINIT,
        // which runs before ours (session is compiled into PHP on Debian and in
        // the official images; elsewhere load it first).
        .and_then(|slot| unsafe { (*slot).cast::<ClassEntry>().as_ref() })
        .expect("ext/session must be loaded before redis_lease")
}
fn session_iface() -> &'static ClassEntry {
    session_ce(c"php_session_iface_entry")
}
fn session_id_iface() -> &'static ClassEntry {
    session_ce(c"php_session_id_iface_entry")
}
fn session_ts_iface() -> &'static ClassEntry {
    session_ce(c"php_session_update_timestamp_iface_entry")
}

/// Sessions in Redis with a lease-based lock per session. See the stub for the options.
#[php_class]
#[php(name = "RedisLockingSessionHandler")]
#[php(flags = ClassFlags::Final)]
#[php(implements(ce = session_iface, stub = "\\SessionHandlerInterface"))]
#[php(implements(ce = session_id_iface, stub = "\\SessionIdInterface"))]
#[php(implements(ce = session_ts_iface, stub = "\\SessionUpdateTimestampHandlerInterface"))]
pub struct RedisLockingSessionHandler {
    handler: RefCell<Handler>,
}

impl RedisLockingSessionHandler {
    fn with<T>(&self, f: impl FnOnce(&mut Handler) -> Out<T>) -> T {
        let out = f(&mut self.handler.borrow_mut());
        out.emit()
    }
}

#[php_impl]
impl RedisLockingSessionHandler {
    #[php(defaults(options = Options::default()))]
    pub fn __construct(dsn: Option<Bytes>, options: Options) -> PhpResult<Self> {
        let ctx = |m: String| {
            Error::InvalidArgument(format!("RedisLockingSessionHandler::__construct(): {m}"))
        };
        let dsn = ini::dsn(dsn, "Invalid Redis DSN: it").map_err(|e| ctx(e.to_string()))?;
        let mut pairs = Vec::with_capacity(options.0.len());
        for (name, value) in options.0 {
            match value {
                // An empty string is off to the ini parser (php.ini's Off is
                // ""), but given here it is more likely an unset variable
                // than a choice to turn locking off unseen (review, stop 56):
                // false, 0 or 'off' say it.
                Ok(v) if v.trim().is_empty() && ["locking", "lock_renew"].contains(&name.as_str()) => {
                    return Err(ctx(format!(
                        "session option '{name}' must be on or off (true, false, 1, 0, 'on', 'off'), \
                         an empty string given"
                    ))
                    .into())
                }
                Ok(v) => pairs.push((name, v)),
                Err(kind) if OPTION_NAMES.contains(&name.as_str()) => {
                    return Err(ctx(format!(
                        "session option '{name}' must be a bool, int, float or string, {kind} given"
                    ))
                    .into())
                }
                // An unknown name is the better message: let build_store report it.
                Err(_) => pairs.push((name, String::new())),
            }
        }
        let store = build_store(&dsn, &pairs).map_err(|e| match e {
            Error::InvalidArgument(m) => ctx(m),
            other => other,
        })?;
        Ok(RedisLockingSessionHandler {
            handler: RefCell::new(Handler::new(store, dsn, Form::Class)),
        })
    }

    pub fn open(&self, path: String, name: String) -> bool {
        let _ = (path, name);
        true
    }

    pub fn close(&self) -> bool {
        self.with(Handler::close)
    }

    pub fn read(&self, id: Bytes) -> ReadResult {
        ReadResult(self.with(|h| h.read(&id.lossy())))
    }

    pub fn write(&self, id: Bytes, data: Binary<u8>) -> bool {
        let data: Vec<u8> = data.into();
        self.with(|h| h.write(&id.lossy(), &data, gc_maxlifetime()))
    }

    pub fn destroy(&self, id: Bytes) -> bool {
        self.with(|h| h.destroy(&id.lossy()))
    }

    /// Redis expires sessions by their ttl: nothing to collect.
    pub fn gc(&self, max_lifetime: i64) -> i64 {
        let _ = max_lifetime;
        0
    }

    #[php(name = "create_sid")]
    pub fn create_sid(&self) -> PhpResult<String> {
        self.with(Handler::create_sid).ok_or_else(|| {
            Error::Connection("could not create a session id; see the warning".into()).into()
        })
    }

    pub fn validate_id(&self, id: Bytes) -> bool {
        self.with(|h| h.validate_id(&id.lossy()))
    }

    pub fn update_timestamp(&self, id: Bytes, data: Binary<u8>) -> bool {
        let data: Vec<u8> = data.into();
        self.with(|h| h.update_timestamp(&id.lossy(), &data, gc_maxlifetime()))
    }

    /// Whether the session read last was opened read-only (the lock wait ran out
    /// with on_lock_timeout = readonly): this request's writes are discarded.
    pub fn is_read_only(&self) -> bool {
        self.handler.borrow().readonly()
    }
}

/// Widens `RedisLockingSessionHandler::read()`'s declared return type from `string`
/// to `string|false`, as the interface has it. ext-php-rs cannot declare unions,
/// and the class must first pass the interface check with the narrower type.
pub fn widen_read_return_type() {
    use ext_php_rs::class::RegisteredClass;
    use ext_php_rs::ffi::{zend_function, zend_hash_str_find_ptr_lc};
    let meta = RedisLockingSessionHandler::get_metadata();
    if !meta.has_ce() {
        return;
    }
    let ce = meta.ce();
    // SAFETY: the class is registered; its function table holds internal functions
    // whose arg_info[-1] is the return type, in memory owned by the engine for the
    // life of the process.
    unsafe {
        let f = zend_hash_str_find_ptr_lc(&ce.function_table, c"read".as_ptr(), 4)
            .cast::<zend_function>();
        if let Some(f) = f.as_mut() {
            let info = f.internal_function.arg_info;
            if !info.is_null() {
                (*info.offset(-1)).type_.type_mask |= 1 << ext_php_rs::ffi::IS_FALSE;
            }
        }
    }
}

// ---- The native save handler: session.save_handler = redis_lease ----

const SUCCESS: c_int = 0;
const FAILURE: c_int = -1;

type ModData = *mut *mut c_void;

#[repr(C)]
pub struct PsModule {
    s_name: *const c_char,
    s_open: unsafe extern "C" fn(ModData, *const c_char, *const c_char) -> c_int,
    s_close: unsafe extern "C" fn(ModData) -> c_int,
    s_read:
        unsafe extern "C" fn(ModData, *mut zend_string, *mut *mut zend_string, zend_long) -> c_int,
    s_write: unsafe extern "C" fn(ModData, *mut zend_string, *mut zend_string, zend_long) -> c_int,
    s_destroy: unsafe extern "C" fn(ModData, *mut zend_string) -> c_int,
    s_gc: unsafe extern "C" fn(ModData, zend_long, *mut zend_long) -> zend_long,
    s_create_sid: unsafe extern "C" fn(ModData) -> *mut zend_string,
    s_validate_sid: unsafe extern "C" fn(ModData, *mut zend_string) -> c_int,
    s_update_timestamp:
        unsafe extern "C" fn(ModData, *mut zend_string, *mut zend_string, zend_long) -> c_int,
}

// SAFETY: immutable after construction; PHP only reads it.
unsafe impl Sync for PsModule {}

static PS_MODULE: PsModule = PsModule {
    s_name: c"redis_lease".as_ptr(),
    s_open: ps_open,
    s_close: ps_close,
    s_read: ps_read,
    s_write: ps_write,
    s_destroy: ps_destroy,
    s_gc: ps_gc,
    s_create_sid: ps_create_sid,
    s_validate_sid: ps_validate_sid,
    s_update_timestamp: ps_update_timestamp,
};

/// The newest PHP whose `ps_module` this file's `PsModule` matches (PHP 8.5's
/// ZEND_MODULE_API_NO). The struct is the same in 8.2 to 8.5; PHP's master
/// branch changes `s_open`'s arguments to `zend_string*`, so a newer PHP gets no
/// native handler (the `RedisLockingSessionHandler` class still works) until the
/// struct is checked against it.
const NEWEST_PS_MODULE_API: u32 = 20250925;

/// Registers the native save handler with ext/session; called from MINIT.
pub fn register_save_handler() -> bool {
    if ext_php_rs::ffi::ZEND_MODULE_API_NO > NEWEST_PS_MODULE_API {
        return false;
    }
    type Register = unsafe extern "C" fn(*const PsModule) -> c_int;
    match php_global::<c_void>(c"php_session_register_module") {
        Some(f) => {
            // SAFETY: PHPAPI zend_result php_session_register_module(const ps_module *).
            let register = unsafe { std::mem::transmute::<*mut c_void, Register>(f) };
            // SAFETY: PS_MODULE lives for the whole process.
            unsafe { register(&PS_MODULE) == SUCCESS }
        }
        None => false,
    }
}

/// Runs a callback body, turning a panic into a warning and `failed`: these are
/// raw C callbacks, where an unwinding panic would abort the process.
fn guarded<T>(failed: T, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            warn("internal error in the session handler (a Rust panic); the session call failed");
            failed
        }
    }
}

/// The handler that ps_open put in `mod_data`.
///
/// # Safety
/// `mod_data` must be the pointer ext/session passes to its callbacks.
unsafe fn handler<'a>(mod_data: ModData) -> Option<&'a mut Handler> {
    if mod_data.is_null() {
        return None;
    }
    // SAFETY: set by ps_open to a leaked Box<Handler>, freed only by ps_close.
    unsafe { (*mod_data).cast::<Handler>().as_mut() }
}

/// # Safety
/// `s` must be null or a valid zend_string.
unsafe fn zstr<'a>(s: *mut zend_string) -> Option<&'a [u8]> {
    // SAFETY: per the contract above.
    unsafe { s.cast::<ZendStr>().as_ref() }.map(|z| z.as_bytes())
}

fn id_str(bytes: &[u8]) -> &str {
    // Ids are checked against PHP's id alphabet later; invalid UTF-8 fails that check.
    std::str::from_utf8(bytes).unwrap_or("\u{fffd}")
}

fn status(ok: bool) -> c_int {
    if ok {
        SUCCESS
    } else {
        FAILURE
    }
}

unsafe extern "C" fn ps_open(
    mod_data: ModData,
    save_path: *const c_char,
    _name: *const c_char,
) -> c_int {
    guarded(FAILURE, || {
        let path = if save_path.is_null() {
            String::new()
        } else {
            // SAFETY: ext/session passes a NUL-terminated string.
            unsafe { CStr::from_ptr(save_path) }
                .to_string_lossy()
                .into_owned()
        };
        let dsn = if path.trim().is_empty() {
            ini::get(ini::DSN)
        } else {
            path
        };
        // SAFETY: mod_data is ext/session's PS(mod_data) slot, null or ours.
        if let Some(h) = unsafe { handler(mod_data) } {
            // Opened again without a close. session_reset() does that with the session
            // still open: keep the handler and the lock it holds. Otherwise (a failed
            // start left it behind) replace it, unlocking what it held.
            if h.dsn == dsn && h.session.is_some() {
                return SUCCESS;
            }
            // SAFETY: the Box leaked by an earlier ps_open; the slot is refilled below.
            drop(unsafe { Box::from_raw((*mod_data).cast::<Handler>()) });
            unsafe { *mod_data = std::ptr::null_mut() };
        }
        match build_store(&dsn, &[]) {
            Ok(store) => {
                let mut h = Handler::new(store, dsn, Form::Native);
                h.origin = NATIVE_ORIGIN.take().filter(|_| crate::php::in_regenerate());
                // ext/session calls write and close only when mod_data is set.
                // SAFETY: as above.
                unsafe { *mod_data = Box::into_raw(Box::new(h)).cast() };
                SUCCESS
            }
            Err(e) => {
                warn(&format!(
                    "cannot open the session store (session.save_path): {e}"
                ));
                FAILURE
            }
        }
    })
}

unsafe extern "C" fn ps_close(mod_data: ModData) -> c_int {
    guarded(FAILURE, || {
        if mod_data.is_null() || unsafe { (*mod_data).is_null() } {
            return SUCCESS;
        }
        // SAFETY: the Box leaked by ps_open; reclaimed once, then the slot is cleared.
        let mut h = unsafe { Box::from_raw((*mod_data).cast::<Handler>()) };
        unsafe { *mod_data = std::ptr::null_mut() };
        // session_regenerate_id() closes and opens the handler before it reads
        // the fresh id: the handler it opens keeps the origin.
        NATIVE_ORIGIN.set(h.origin.take().filter(|_| crate::php::in_regenerate()));
        status(h.close().emit())
    })
}

thread_local! {
    /// Whether the native handler's last read in this request opened its
    /// session read-only (for `RedisLease\session_is_readonly()`).
    static NATIVE_READONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The origin (`Handler::origin`) of the native handler that
    /// session_regenerate_id() closed, for the one it opens.
    static NATIVE_ORIGIN: std::cell::Cell<Option<Origin>> = const { std::cell::Cell::new(None) };
}

/// Whether the session the native handler read last in this request was opened
/// read-only (see `RedisLease\session_is_readonly()`).
pub fn native_readonly() -> bool {
    NATIVE_READONLY.get()
}

/// Clears what the last request's native session left (RSHUTDOWN).
pub fn end_request() {
    NATIVE_READONLY.set(false);
    NATIVE_ORIGIN.set(None);
}

unsafe extern "C" fn ps_read(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut *mut zend_string,
    _maxlifetime: zend_long,
) -> c_int {
    guarded(FAILURE, || {
        let (Some(h), Some(id)) = (unsafe { handler(mod_data) }, unsafe { zstr(key) }) else {
            return FAILURE;
        };
        let read = h.read(id_str(id));
        NATIVE_READONLY.set(h.readonly());
        match read.emit() {
            Some(data) => {
                // SAFETY: val is ext/session's out-parameter; it takes ownership.
                unsafe {
                    *val = ZendStr::new(data, false).into_raw() as *mut ZendStr as *mut zend_string
                };
                SUCCESS
            }
            None => FAILURE,
        }
    })
}

unsafe extern "C" fn ps_write(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut zend_string,
    maxlifetime: zend_long,
) -> c_int {
    guarded(FAILURE, || {
        let (Some(h), Some(id), Some(data)) =
            (unsafe { handler(mod_data) }, unsafe { zstr(key) }, unsafe {
                zstr(val)
            })
        else {
            return FAILURE;
        };
        status(h.write(id_str(id), data, lifetime(maxlifetime)).emit())
    })
}

unsafe extern "C" fn ps_destroy(mod_data: ModData, key: *mut zend_string) -> c_int {
    guarded(FAILURE, || {
        let (Some(h), Some(id)) = (unsafe { handler(mod_data) }, unsafe { zstr(key) }) else {
            return FAILURE;
        };
        status(h.destroy(id_str(id)).emit())
    })
}

unsafe extern "C" fn ps_gc(
    _mod_data: ModData,
    _maxlifetime: zend_long,
    nrdels: *mut zend_long,
) -> zend_long {
    // Redis expires sessions by their ttl.
    if !nrdels.is_null() {
        // SAFETY: ext/session's out-parameter.
        unsafe { *nrdels = 0 };
    }
    0
}

unsafe extern "C" fn ps_create_sid(mod_data: ModData) -> *mut zend_string {
    guarded(std::ptr::null_mut(), || {
        let Some(h) = (unsafe { handler(mod_data) }) else {
            return std::ptr::null_mut();
        };
        match h.create_sid().emit() {
            Some(id) => ZendStr::new(id, false).into_raw() as *mut ZendStr as *mut zend_string,
            None => std::ptr::null_mut(),
        }
    })
}

unsafe extern "C" fn ps_validate_sid(mod_data: ModData, key: *mut zend_string) -> c_int {
    guarded(FAILURE, || {
        let (Some(h), Some(id)) = (unsafe { handler(mod_data) }, unsafe { zstr(key) }) else {
            return FAILURE;
        };
        status(h.validate_id(id_str(id)).emit())
    })
}

unsafe extern "C" fn ps_update_timestamp(
    mod_data: ModData,
    key: *mut zend_string,
    val: *mut zend_string,
    maxlifetime: zend_long,
) -> c_int {
    guarded(FAILURE, || {
        let (Some(h), Some(id), Some(data)) =
            (unsafe { handler(mod_data) }, unsafe { zstr(key) }, unsafe {
                zstr(val)
            })
        else {
            return FAILURE;
        };
        status(
            h.update_timestamp(id_str(id), data, lifetime(maxlifetime))
                .emit(),
        )
    })
}

fn lifetime(maxlifetime: zend_long) -> Duration {
    Duration::from_secs(maxlifetime.max(1) as u64)
}
