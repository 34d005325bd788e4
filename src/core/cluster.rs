//! A Redis Cluster, routed here: each command goes to the master that serves
//! its first key's slot, over a plain connection to that node, as on one node.
//!
//! A MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply says the command did not run, so
//! it is sent where the reply points (after ASKING, for an ASK), with short
//! growing pauses, until the read timeout is spent. A command whose connection
//! breaks or times out is never sent again here: it may have run, and only the
//! caller knows whether a second run is safe (a release's is not). That is what
//! a lease's callers expect of any link, so they need no Cluster's own
//! bookkeeping (redis-rs's cluster client resends such a command, which took a
//! "done" marker per unlock to recognize). A node that cannot be reached before
//! anything of a call was written leaves nothing that may have run
//! (`Link::sent_nothing`): the caller fails it as a checkout that could not
//! connect, with nothing to settle.
//!
//! A Cluster announces no failover, so this process counts the changes it
//! sees (`generation`): a MOVED, or a slot map in which a slot has another
//! master. What a Sentinel service's generation guards (a grant learned from a
//! master since replaced, a hold to look for on the new master) is then
//! guarded here too, from the moment a link of this process learns of it; the
//! watchdog asks for the slot map while it watches holds, so a holder that
//! sends nothing learns of it too. A slot moved by resharding counts as well:
//! what is checked then is found where it moved.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{Cmd, ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::core::dsn::{Addr, Endpoint, Topology};
use crate::core::error::Result;
use crate::core::metrics::{self, Counter};
use crate::core::pid::PerProcess;

/// Opens a connection to one node, authenticated and, for TLS, with its
/// handshake done (topology's `node`).
pub(crate) type Connect = fn(&Endpoint, &Addr) -> Result<redis::Connection>;

/// What this process knows of a Cluster (by its seeds): its generation (see
/// the module's header), from 1 or above, so that every check of one is live;
/// and the last slot map any link of it was given (`masters_by_id`): a link
/// made after a failover compares its first map with what the others saw.
struct Known {
    topology: Topology,
    generation: u64,
    slots: Vec<(u16, u16, Vec<u8>)>,
}

/// Per process: a child forked while the watchdog thread held the lock
/// starts with a registry of its own, above every generation its parent had
/// (`HIGHEST`): a hold it inherited is then looked for again.
static KNOWN: PerProcess<Mutex<Vec<Known>>> = PerProcess::new();

/// The highest generation of any Cluster in this process (or its parent).
static HIGHEST: AtomicU64 = AtomicU64::new(0);

fn with_known<T>(ep: &Endpoint, f: impl FnOnce(&mut Known) -> T) -> T {
    let mut all = KNOWN.get(|| Mutex::new(Vec::new()), |_| {}).lock();
    let i = match all.iter().position(|k| k.topology == ep.topology) {
        Some(i) => i,
        None => {
            all.push(Known {
                topology: ep.topology.clone(),
                generation: HIGHEST.load(Ordering::Acquire) + 1,
                slots: Vec::new(),
            });
            all.len() - 1
        }
    };
    let out = f(&mut all[i]);
    HIGHEST.fetch_max(all[i].generation, Ordering::AcqRel);
    out
}

/// The current generation of `ep`'s Cluster: it grows each time this process
/// sees a slot served by another master.
pub(crate) fn generation(ep: &Endpoint) -> u64 {
    with_known(ep, |k| k.generation)
}

/// A link to `ep`'s Cluster was told a slot is served by another master.
fn switched(ep: &Endpoint) {
    with_known(ep, |k| k.generation += 1);
    metrics::incr(Counter::MasterChanges);
}

/// A MOVED: a switch, counted now; the map asked for next is taken as the
/// first (it would count the same switch again).
fn moved(ep: &Endpoint) {
    with_known(ep, |k| k.slots.clear());
    switched(ep);
}

/// A link to `ep`'s Cluster was given `slots`: a switch if they differ from
/// the last map this process was given.
fn mapped(ep: &Endpoint, slots: Vec<(u16, u16, Vec<u8>)>) {
    let changed = with_known(ep, |k| {
        let changed = !k.slots.is_empty() && k.slots != slots;
        k.slots = slots;
        changed
    });
    if changed {
        switched(ep);
    }
}

/// The slot of `key`: of its hash tag (`{...}`, when not empty), else of it all.
pub(crate) fn slot(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % 16384
}

/// Where a command must run: one slot's master, every master (a library or
/// script loaded or flushed), or any node (a command without keys).
enum Target {
    Slot(u16),
    Masters,
    Any,
}

/// A command as its caller gave it: built (`Cmd`), or already encoded as RESP
/// (our invocations, `Link::req_packed_command`), which goes out as it is.
#[derive(Clone, Copy)]
pub(crate) enum Request<'a> {
    Built(&'a Cmd),
    Packed(&'a [u8]),
}

impl Request<'_> {
    /// Which key decides where it runs (the first), as far as our own commands
    /// go: scripts and functions name their keys after a count, FUNCTION and
    /// SCRIPT go to every master, and the others either have no key or have it
    /// first.
    fn target(self) -> Target {
        match self {
            Request::Built(cmd) => target(cmd.args_iter().map(|a| match a {
                redis::Arg::Simple(a) => a,
                _ => &b""[..],
            })),
            Request::Packed(bytes) => target(resp_args(bytes)),
        }
    }

    /// Its RESP, after an ASKING.
    fn asking(self) -> Vec<u8> {
        let mut out = b"*1\r\n$6\r\nASKING\r\n".to_vec();
        match self {
            Request::Built(cmd) => cmd.write_packed_command(&mut out),
            Request::Packed(bytes) => out.extend_from_slice(bytes),
        }
        out
    }
}

/// The arguments of one command encoded as RESP (`*<n>` then `$<len>` and the
/// bytes of each), as far as they are well formed.
fn resp_args(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    // A length and what follows its line.
    fn line(b: &[u8]) -> Option<(usize, &[u8])> {
        let end = b.iter().position(|&c| c == b'\r')?;
        Some((number(&b[..end])?, b[end..].strip_prefix(b"\r\n")?))
    }
    let mut rest = bytes
        .strip_prefix(b"*")
        .and_then(line)
        .map_or(&b""[..], |(_, rest)| rest);
    std::iter::from_fn(move || {
        let (n, body) = line(rest.strip_prefix(b"$")?)?;
        let arg = body.get(..n)?;
        rest = body.get(n + 2..)?;
        Some(arg)
    })
}

/// A decimal count (at most 18 digits: no overflow).
fn number(digits: &[u8]) -> Option<usize> {
    let valid = (1..=18).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit);
    valid.then(|| {
        digits
            .iter()
            .fold(0, |n, &d| n * 10 + usize::from(d - b'0'))
    })
}

/// Where a command whose arguments are `args` runs (see `Request::target`).
fn target<'a>(mut args: impl Iterator<Item = &'a [u8]>) -> Target {
    let Some(name) = args.next() else {
        return Target::Any;
    };
    let is = |names: &[&str]| {
        names
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    };
    if is(&[
        "FCALL",
        "FCALL_RO",
        "EVAL",
        "EVALSHA",
        "EVAL_RO",
        "EVALSHA_RO",
    ]) {
        return match (args.nth(1).and_then(number), args.next()) {
            (Some(n), Some(key)) if n > 0 => Target::Slot(slot(key)),
            _ => Target::Any,
        };
    }
    if is(&["FUNCTION", "SCRIPT"]) {
        return Target::Masters;
    }
    let keyless = [
        "PING", "WAIT", "CLUSTER", "TIME", "MULTI", "EXEC", "INFO", "SCAN", "ROLE", "ASKING",
    ];
    match args.next() {
        Some(key) if !is(&keyless) => Target::Slot(slot(key)),
        _ => Target::Any,
    }
}

struct Node {
    addr: Addr,
    conn: Option<redis::Connection>,
    /// Which of this link's connections `conn` is (each one made gets the next
    /// number): a WAIT must go to the very connection that wrote.
    made: u64,
}

/// A Cluster's slot map and this link's connections to its nodes (made when
/// first needed).
pub(crate) struct Cluster {
    ep: Endpoint,
    connect: Connect,
    nodes: Vec<Node>,
    /// Each master's slot ranges: first slot, last slot, index in `nodes`; in
    /// order of first slot.
    slots: Vec<(u16, u16, usize)>,
    /// Ask for the slot map again before the next command: a MOVED or a
    /// CLUSTERDOWN said it changed, or a node stopped answering.
    stale: bool,
    /// How long a reply may take, and a command may keep being redirected.
    timeout: Duration,
    /// The slot, node and connection (`Node::made`) of each command that ran
    /// since `begin` (every round of a renewal, a library loaded between
    /// them): the WAIT that follows a write must be asked on the connection
    /// that wrote, or it would say every replica has it.
    ran: Vec<(u16, usize, u64)>,
    /// The last `Node::made` given out.
    made: u64,
    /// Whether a command was written to a node since `begin`: until one is,
    /// a failure (a node that cannot be reached, no master known) leaves
    /// nothing that may have run.
    wrote: bool,
}

/// How many redirects one command follows in a row (MOVED and ASK, with no
/// TRYAGAIN between them), at most.
const REDIRECTS: usize = 16;

fn io_error(what: &'static str, detail: String) -> RedisError {
    RedisError::from((ErrorKind::Io, what, detail))
}

impl Cluster {
    /// Learns the slot map from the first of `seeds` that answers.
    pub(crate) fn open(
        ep: &Endpoint,
        seeds: &[Addr],
        connect: Connect,
    ) -> std::result::Result<Cluster, String> {
        let mut cluster = Cluster {
            ep: ep.clone(),
            connect,
            nodes: seeds
                .iter()
                .map(|addr| Node {
                    addr: addr.clone(),
                    conn: None,
                    made: 0,
                })
                .collect(),
            slots: Vec::new(),
            stale: true,
            timeout: ep.timeouts.read,
            ran: Vec::new(),
            made: 0,
            wrote: false,
        };
        cluster.refresh(None)?;
        Ok(cluster)
    }

    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        self.timeout = timeout;
        for conn in self.nodes.iter_mut().filter_map(|n| n.conn.as_mut()) {
            conn.set_read_timeout(Some(timeout))?;
        }
        Ok(())
    }

    /// A caller's call begins (a pool checkout, a renewal): nothing of it
    /// written yet.
    pub(crate) fn begin(&mut self) {
        self.wrote = false;
        self.ran.clear();
    }

    /// Whether anything was written to a node since `begin`.
    pub(crate) fn wrote(&self) -> bool {
        self.wrote
    }

    /// The connection to node `i`, made now if there is none. One that cannot
    /// be made has the slot map asked for again (a failover may have named
    /// another master).
    fn conn(&mut self, i: usize) -> RedisResult<&mut redis::Connection> {
        let node = &mut self.nodes[i];
        if node.conn.is_none() {
            let conn = (self.connect)(&self.ep, &node.addr).map_err(|e| {
                self.stale = true;
                io_error("Cannot connect", e.to_string())
            })?;
            conn.set_read_timeout(Some(self.timeout))?;
            node.conn = Some(conn);
            self.made += 1;
            node.made = self.made;
        }
        Ok(node.conn.as_mut().expect("just made"))
    }

    /// The node at `addr`, known from now on if it was not.
    fn node_at(&mut self, addr: Addr) -> usize {
        match self.nodes.iter().position(|n| n.addr == addr) {
            Some(i) => i,
            None => {
                self.nodes.push(Node {
                    addr,
                    conn: None,
                    made: 0,
                });
                self.nodes.len() - 1
            }
        }
    }

    /// Drops node `i`'s connection (out of step, or broken) and has the slot
    /// map asked for again.
    fn broke(&mut self, i: usize) {
        self.nodes[i].conn = None;
        self.stale = true;
    }

    /// Asks for the slot map (CLUSTER SLOTS): nodes this link is connected to
    /// first, then the others it knows of (seeds, masters, replicas), until one
    /// answers or, for a command under way, its read timeout is spent.
    fn refresh(&mut self, by: Option<Instant>) -> std::result::Result<(), String> {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| self.nodes[i].conn.is_none());
        let mut why = Vec::new();
        for i in order {
            if !why.is_empty() && by.is_some_and(|by| Instant::now() >= by) {
                break;
            }
            let asked = self.nodes[i].addr.clone();
            let reply = self
                .conn(i)
                .and_then(|c| redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(c));
            let (ranges, masters) = match reply {
                Ok(v) => (parse_slots(&v, &asked), masters_by_id(&v)),
                Err(e) => {
                    if !matches!(e.kind(), ErrorKind::Server(_) | ErrorKind::Extension) {
                        self.nodes[i].conn = None;
                    }
                    why.push(format!("{asked}: {e}"));
                    continue;
                }
            };
            if ranges.is_empty() {
                why.push(format!("{asked}: serves no slots"));
                continue;
            }
            let mut slots = Vec::with_capacity(ranges.len());
            for (first, last, master, replicas) in ranges {
                slots.push((first, last, self.node_at(master)));
                for r in replicas {
                    self.node_at(r);
                }
            }
            slots.sort_unstable();
            mapped(&self.ep, masters);
            self.slots = slots;
            self.stale = false;
            return Ok(());
        }
        Err(why.join("; "))
    }

    /// Asks for the slot map now, within a read timeout; whether a node answered.
    pub(crate) fn learn_slots(&mut self) -> bool {
        self.refresh(Some(Instant::now() + self.timeout)).is_ok()
    }

    /// Asks for the slot map again if it is stale (within a read timeout; if
    /// no node answers, the old map is used).
    fn settle(&mut self) {
        if self.stale {
            let _ = self.refresh(Some(Instant::now() + self.timeout));
        }
    }

    /// The master serving `slot`, per the slot map (asked for again first when
    /// it is stale; if no node answers, the old map is tried).
    fn master_of(&mut self, slot: u16) -> RedisResult<usize> {
        self.settle();
        let at = self.slots.partition_point(|r| r.0 <= slot);
        match at.checked_sub(1).map(|i| self.slots[i]) {
            Some((_, last, node)) if slot <= last => Ok(node),
            _ => Err(io_error(
                "No master serves the slot",
                format!("slot {slot} of {}", self.ep.location()),
            )),
        }
    }

    /// Some master: one this link is connected to, if any.
    fn any_master(&mut self) -> RedisResult<usize> {
        self.settle();
        let masters = self.slots.iter().map(|r| r.2);
        let connected = masters.clone().find(|&i| self.nodes[i].conn.is_some());
        connected
            .or_else(|| masters.clone().next())
            .ok_or_else(|| io_error("No master known", self.ep.location()))
    }

    /// The masters, each once.
    fn masters(&mut self) -> Vec<usize> {
        self.settle();
        let mut masters: Vec<usize> = self.slots.iter().map(|r| r.2).collect();
        masters.sort_unstable();
        masters.dedup();
        masters
    }

    /// Runs `cmd` where it belongs, following redirects (see the module's
    /// header). An error reply comes back as a value, as from a plain link.
    pub(crate) fn run(&mut self, req: Request) -> RedisResult<Value> {
        self.route(req, Instant::now() + self.timeout)
    }

    /// `run`, redirected until `deadline` at most, noting where the command
    /// ran in `ran`.
    fn route(&mut self, cmd: Request, deadline: Instant) -> RedisResult<Value> {
        let slot = match cmd.target() {
            Target::Slot(slot) => slot,
            Target::Masters => return self.on_masters(cmd),
            Target::Any => {
                let i = self.any_master()?;
                return self.send(i, cmd, false);
            }
        };
        let mut pause = Duration::from_millis(5);
        let mut to: Option<(usize, bool)> = None;
        let mut redirects = 0;
        loop {
            let (i, asking) = match to.take() {
                Some(t) => t,
                None => match self.master_of(slot) {
                    Ok(i) => (i, false),
                    // Nothing sent: said as Redis says it, once the read timeout
                    // is spent (a failover may be naming a new master).
                    Err(_) if Instant::now() + pause >= deadline => return Ok(unserved()),
                    Err(_) => {
                        self.stale = true;
                        back_off(&mut pause);
                        continue;
                    }
                },
            };
            let reply = self.send(i, cmd, asking)?;
            let Value::ServerError(e) = &reply else {
                self.ran.push((slot, i, self.nodes[i].made));
                return Ok(reply);
            };
            let redirect = |code| {
                (e.code() == code)
                    .then(|| e.details().and_then(|d| d.split(' ').nth(1)))
                    .flatten()
                    .and_then(|to| parse_addr(to, &self.nodes[i].addr))
            };
            let next = match (redirect("MOVED"), redirect("ASK")) {
                (Some(addr), _) => {
                    // Counted now, before the reply it leads to is used: the
                    // map is asked for again only at the next command.
                    if !self.stale {
                        moved(&self.ep);
                    }
                    self.stale = true;
                    Some((self.node_at(addr), false))
                }
                (None, Some(addr)) => Some((self.node_at(addr), true)),
                (None, None) if matches!(e.code(), "TRYAGAIN" | "CLUSTERDOWN") => {
                    self.stale |= e.code() == "CLUSTERDOWN";
                    // Not a redirect loop: a script whose keys are not all on
                    // either node mid-migration is sent ASK by the old master
                    // and TRYAGAIN by the new one until the move ends, which
                    // only the deadline bounds (review, stop 58: it gave up
                    // after 16 ASKs, ~0.7 s, with the ASK as its answer).
                    redirects = 0;
                    None
                }
                _ => return Ok(reply),
            };
            redirects += usize::from(next.is_some());
            if Instant::now() + pause >= deadline || redirects > REDIRECTS {
                return Ok(reply);
            }
            match next {
                Some(_) => metrics::incr(Counter::Retries),
                None => back_off(&mut pause),
            }
            to = next;
        }
    }

    /// The connection to node `i`, for a command about to be written to it.
    fn conn_to_write(&mut self, i: usize) -> RedisResult<&mut redis::Connection> {
        self.conn(i)?;
        self.wrote = true;
        Ok(self.nodes[i].conn.as_mut().expect("just connected"))
    }

    /// Sends `cmd` to node `i` (after ASKING when `asking`). A broken
    /// connection is dropped, never used again.
    fn send(&mut self, i: usize, cmd: Request, asking: bool) -> RedisResult<Value> {
        let conn = self.conn_to_write(i)?;
        let reply = match (asking, cmd) {
            // Its error reply in its place, as a plain link's (TRYAGAIN: a
            // script whose keys are split between the two nodes for now).
            (true, _) => conn
                .req_packed_commands(&cmd.asking(), 0, 2)
                .map(|mut v| v.pop().unwrap_or(Value::Nil)),
            (false, Request::Built(cmd)) => conn.req_command(cmd),
            (false, Request::Packed(bytes)) => conn.req_packed_command(bytes),
        };
        if reply.is_err() {
            self.broke(i);
        }
        reply
    }

    /// Runs `cmd` on every master (FUNCTION LOAD, SCRIPT FLUSH...): the first
    /// error reply, else the last answer. A master that cannot be reached (or
    /// whose link broke) is passed over while another answers: one down must not
    /// keep the library from the others, where a call found it missing (each
    /// master loads it again when its own call says so). Review, stop 58.
    fn on_masters(&mut self, cmd: Request) -> RedisResult<Value> {
        let mut answer = None;
        let mut failed = None;
        for i in self.masters() {
            match self.send(i, cmd, false) {
                Ok(reply @ Value::ServerError(_)) => return Ok(reply),
                Ok(reply) => answer = Some(reply),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        match (answer, failed) {
            (Some(answer), _) => Ok(answer),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(Value::Nil),
        }
    }

    /// WAIT on each connection that ran a command on `key`'s slot since
    /// `begin` (one, unless a redirect moved some): the fewest
    /// acknowledgements. A WAIT on a connection that wrote nothing would say
    /// every replica has it: with no such connection left (dropped, or made
    /// again since, or nothing ran), an error.
    pub(crate) fn wait(&mut self, key: &[u8], cmd: &Cmd) -> RedisResult<Value> {
        let slot = slot(key);
        let mut ran: Vec<(usize, u64)> = self
            .ran
            .iter()
            .filter(|r| r.0 == slot)
            .map(|r| (r.1, r.2))
            .collect();
        ran.sort_unstable();
        ran.dedup();
        let gone =
            |&(i, made): &(usize, u64)| self.nodes[i].conn.is_none() || self.nodes[i].made != made;
        if ran.is_empty() || ran.iter().any(gone) {
            return Err(io_error(
                "WAIT without the connection that wrote",
                format!("slot {slot} of {}", self.ep.location()),
            ));
        }
        let mut nodes: Vec<usize> = ran.into_iter().map(|(i, _)| i).collect();
        nodes.dedup();
        let mut fewest: Option<Value> = None;
        for i in nodes {
            let reply = self.send(i, Request::Built(cmd), false)?;
            fewest = match (fewest, reply) {
                (Some(Value::Int(a)), Value::Int(b)) => Some(Value::Int(a.min(b))),
                (Some(error @ Value::ServerError(_)), _) => Some(error),
                (_, reply) => Some(reply),
            };
        }
        Ok(fewest.unwrap_or(Value::Nil))
    }

    /// Sends `cmds` in one round trip per node. A command without a key goes
    /// with its neighbours: a MULTI ... EXEC with the first keyed command inside
    /// it, any other with the keyed command before it (else after it). A command
    /// redirected runs again alone, where it belongs; one whose slot no master
    /// serves gets a CLUSTERDOWN error in its place, as do the others' error
    /// replies. A failed round trip fails them all.
    pub(crate) fn pipeline(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Value>> {
        // One deadline for them all: those redirected are not given a read
        // timeout each (a renewal's budget bounds the whole round trip).
        let deadline = Instant::now() + self.timeout;
        let mut replies: Vec<Option<Value>> = vec![None; cmds.len()];
        let slots: Vec<Option<u16>> = cmds
            .iter()
            .map(|c| match Request::Built(c).target() {
                Target::Slot(s) => Some(s),
                _ => None,
            })
            .collect();
        let keyed: Vec<bool> = slots.iter().map(Option::is_some).collect();
        let mut nodes: Vec<Option<usize>> = Vec::with_capacity(cmds.len());
        for (c, slot) in slots.iter().enumerate() {
            nodes.push(match slot.map(|s| self.master_of(s)) {
                Some(Ok(i)) => Some(i),
                Some(Err(_)) => {
                    replies[c] = Some(unserved());
                    None
                }
                None => None,
            });
        }
        let mut c = 0;
        while c < cmds.len() {
            if is_named(&cmds[c], "MULTI") {
                let end = (c..cmds.len())
                    .find(|&e| is_named(&cmds[e], "EXEC"))
                    .unwrap_or(cmds.len() - 1);
                let node = (c..=end).find_map(|k| nodes[k]);
                for n in &mut nodes[c..=end] {
                    *n = node;
                }
                c = end + 1;
            } else {
                c += 1;
            }
        }
        let mut prev = None;
        for (c, n) in nodes.iter_mut().enumerate() {
            if !keyed[c] && n.is_none() {
                *n = prev;
            }
            prev = n.or(prev);
        }
        let mut next = None;
        for (c, n) in nodes.iter_mut().enumerate().rev() {
            if !keyed[c] && n.is_none() {
                *n = next;
            }
            next = n.or(next);
        }
        let fallback = match nodes.iter().flatten().next() {
            Some(&i) => Some(i),
            None if replies.iter().all(Option::is_none) => Some(self.any_master()?),
            None => None,
        };
        let order: Vec<Option<usize>> = nodes
            .iter()
            .zip(&replies)
            .map(|(n, r)| if r.is_some() { None } else { n.or(fallback) })
            .collect();
        let mut targets: Vec<usize> = order.iter().flatten().copied().collect();
        targets.sort_unstable();
        targets.dedup();
        for node in targets {
            let mine: Vec<usize> = (0..cmds.len())
                .filter(|&c| order[c] == Some(node))
                .collect();
            let mut p = redis::pipe();
            p.ignore_errors();
            for &c in &mine {
                p.add_command(cmds[c].clone());
            }
            let got = match p.query::<Vec<Value>>(self.conn_to_write(node)?) {
                Ok(got) => got,
                Err(e) => {
                    self.broke(node);
                    return Err(e);
                }
            };
            for (c, v) in mine.into_iter().zip(got) {
                if let (Some(s), false) = (slots[c], matches!(v, Value::ServerError(_))) {
                    self.ran.push((s, node, self.nodes[node].made));
                }
                replies[c] = Some(v);
            }
        }
        let mut out = Vec::with_capacity(cmds.len());
        for (c, reply) in replies.into_iter().enumerate() {
            let reply = reply.unwrap_or_else(unserved);
            let moved = matches!(&reply, Value::ServerError(e)
                if matches!(e.code(), "MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN"));
            out.push(if moved && keyed[c] {
                self.route(Request::Built(&cmds[c]), deadline)?
            } else {
                reply
            });
        }
        Ok(out)
    }

    /// The masters, as the Cluster names them now.
    pub(crate) fn master_addrs(&mut self) -> Vec<Addr> {
        self.stale = true;
        self.masters()
            .into_iter()
            .map(|i| self.nodes[i].addr.clone())
            .collect()
    }

    /// Runs `cmd` on the node at `addr` (a SCAN of each master).
    pub(crate) fn run_at(&mut self, addr: Addr, cmd: &Cmd) -> RedisResult<Value> {
        let i = self.node_at(addr);
        self.send(i, Request::Built(cmd), false)
    }

    pub(crate) fn is_open(&self) -> bool {
        self.nodes
            .iter()
            .filter_map(|n| n.conn.as_ref())
            .all(|c| c.is_open())
    }

    pub(crate) fn check_connection(&mut self) -> bool {
        self.nodes
            .iter_mut()
            .filter_map(|n| n.conn.as_mut())
            .all(|c| c.check_connection())
    }
}

/// Waits `pause` before a command is asked again (counted as a retry), and
/// doubles it, up to 50 ms.
fn back_off(pause: &mut Duration) {
    metrics::incr(Counter::Retries);
    std::thread::sleep(*pause);
    *pause = (*pause * 2).min(Duration::from_millis(50));
}

/// Whether `cmd` is the command `name`.
fn is_named(cmd: &Cmd, name: &str) -> bool {
    matches!(cmd.args_iter().next(),
        Some(redis::Arg::Simple(a)) if a.eq_ignore_ascii_case(name.as_bytes()))
}

/// The reply of a command whose slot no master serves (as Redis says it).
fn unserved() -> Value {
    redis::parse_redis_value(b"-CLUSTERDOWN Hash slot not served\r\n").unwrap_or(Value::Nil)
}

/// A node the Cluster names by `host` and `port`, as `asked` named it: an
/// empty host is `asked`'s own, "?" (an endpoint the Cluster does not know) is
/// none.
fn named(host: &str, port: u16, asked: &Addr) -> Option<Addr> {
    let host = match (host, asked) {
        ("?", _) | ("", Addr::Unix(_)) => return None,
        ("", Addr::Tcp { host, .. }) => host.clone(),
        (h, _) => h.to_string(),
    };
    Some(Addr::Tcp { host, port })
}

/// `host:port` of a redirect, from the node that `answered` (see `named`).
fn parse_addr(text: &str, answered: &Addr) -> Option<Addr> {
    let (host, port) = text.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    named(host, port.parse().ok()?, answered)
}

/// CLUSTER SLOTS: `[[first, last, [host, port, id...], replica...], ...]`, as
/// the node `asked` answered it (see `named`).
#[allow(clippy::type_complexity)]
fn parse_slots(v: &Value, asked: &Addr) -> Vec<(u16, u16, Addr, Vec<Addr>)> {
    let node = |v: &Value| -> Option<Addr> {
        let Value::Array(parts) = v else { return None };
        let host = match parts.first()? {
            Value::BulkString(h) => String::from_utf8(h.clone()).ok()?,
            Value::SimpleString(h) => h.clone(),
            _ => return None,
        };
        let port = match parts.get(1)? {
            Value::Int(p) => u16::try_from(*p).ok()?,
            _ => return None,
        };
        named(&host, port, asked)
    };
    slot_ranges(v)
        .filter_map(|(first, last, nodes)| {
            let master = node(nodes.first()?)?;
            let replicas = nodes[1..].iter().filter_map(node).collect();
            Some((first, last, master, replicas))
        })
        .collect()
}

/// CLUSTER SLOTS's ranges: first slot, last slot, and the nodes serving them
/// (the master first).
fn slot_ranges(v: &Value) -> impl Iterator<Item = (u16, u16, &[Value])> {
    let ranges: &[Value] = match v {
        Value::Array(ranges) => ranges,
        _ => &[],
    };
    ranges.iter().filter_map(|range| {
        let Value::Array(parts) = range else {
            return None;
        };
        let bound = |i: usize| match parts.get(i) {
            Some(Value::Int(n)) => u16::try_from(*n).ok(),
            _ => None,
        };
        Some((bound(0)?, bound(1)?, parts.get(2..)?))
    })
}

/// CLUSTER SLOTS's ranges, each with its master's node id (its `host:port`
/// from a server too old to say): what `mapped` compares. Not addresses: links
/// that reached the Cluster by different names would see a change at every
/// poll.
fn masters_by_id(v: &Value) -> Vec<(u16, u16, Vec<u8>)> {
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => Some(b.clone()),
        Some(Value::SimpleString(s)) => Some(s.clone().into_bytes()),
        Some(Value::Int(n)) => Some(n.to_string().into_bytes()),
        _ => None,
    };
    let mut out: Vec<(u16, u16, Vec<u8>)> = slot_ranges(v)
        .filter_map(|(first, last, nodes)| {
            let Some(Value::Array(master)) = nodes.first() else {
                return None;
            };
            let id = text(master.get(2)).or_else(|| {
                Some([text(master.first())?, b":".to_vec(), text(master.get(1))?].concat())
            })?;
            Some((first, last, id))
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Values from the Cluster spec and `CLUSTER KEYSLOT`.
        // CRC16-XMODEM("123456789") is 0x31C3, below 16384.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"), "an empty tag is no tag");
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }

    #[test]
    fn commands_go_where_their_first_key_is() {
        let at = |cmd: &Cmd| {
            let packed = cmd.get_packed_command();
            let (built, sent) = (
                Request::Built(cmd).target(),
                Request::Packed(&packed).target(),
            );
            match (built, sent) {
                (Target::Slot(a), Target::Slot(b)) if a == b => Some(a),
                (Target::Slot(_), _) | (_, Target::Slot(_)) => panic!("built and packed differ"),
                _ => None,
            }
        };
        let fcall = redis::cmd("FCALL")
            .arg("f")
            .arg(2)
            .arg("k1")
            .arg("k2")
            .clone();
        assert_eq!(at(&fcall), Some(slot(b"k1")));
        let none = redis::cmd("EVALSHA").arg("sha").arg(0).arg("x").clone();
        assert!(matches!(Request::Built(&none).target(), Target::Any));
        assert_eq!(at(&none), None);
        let get = redis::cmd("get").arg("k").clone();
        assert_eq!(at(&get), Some(slot(b"k")));
        // Keys of every length, and bytes that look like RESP inside one.
        for key in [&b""[..], b"{x}\r\n$3\r\nabc", &[b'k'; 300][..]] {
            let cmd = redis::cmd("EVALSHA").arg("sha").arg(1).arg(key).clone();
            assert_eq!(at(&cmd), Some(slot(key)));
        }
        let load = redis::cmd("FUNCTION").arg("LOAD").arg("code").clone();
        assert!(matches!(Request::Built(&load).target(), Target::Masters));
        let packed = load.get_packed_command();
        assert!(matches!(Request::Packed(&packed).target(), Target::Masters));
        assert!(matches!(
            Request::Built(&redis::cmd("TIME")).target(),
            Target::Any
        ));
    }

    #[test]
    fn malformed_packed_bytes_are_no_key() {
        let packed = redis::cmd("GET").arg("k").get_packed_command();
        for cut in 0..packed.len() {
            // Cut short, or not RESP at all: routed to any node (which
            // refuses it), never a panic.
            let _ = Request::Packed(&packed[..cut]).target();
        }
        assert!(matches!(
            Request::Packed(b"GET k\r\n").target(),
            Target::Any
        ));
        assert!(matches!(
            Request::Packed(b"*2\r\n$3\r\nGET\r\n$9\r\nk\r\n").target(),
            Target::Any
        ));
    }

    #[test]
    fn redirects_name_a_node() {
        let asked = Addr::Tcp {
            host: "10.0.0.1".into(),
            port: 7000,
        };
        let at = |host: &str, port| {
            Some(Addr::Tcp {
                host: host.into(),
                port,
            })
        };
        assert_eq!(parse_addr("127.0.0.1:7002", &asked), at("127.0.0.1", 7002));
        assert_eq!(parse_addr(":7002", &asked), at("10.0.0.1", 7002));
        assert_eq!(parse_addr("[::1]:7002", &asked), at("::1", 7002));
        assert_eq!(parse_addr("nonsense", &asked), None);
    }

    /// CLUSTER SLOTS of two ranges, their masters named `hosts` with `ids`.
    fn slots_reply(hosts: [&str; 2], ids: [&str; 2]) -> Value {
        let range = |first, last, host: &str, id: &str| {
            Value::Array(vec![
                Value::Int(first),
                Value::Int(last),
                Value::Array(vec![
                    Value::BulkString(host.into()),
                    Value::Int(7000),
                    Value::BulkString(id.into()),
                ]),
            ])
        };
        Value::Array(vec![
            range(0, 8191, hosts[0], ids[0]),
            range(8192, 16383, hosts[1], ids[1]),
        ])
    }

    #[test]
    fn a_slot_served_by_another_master_is_a_switch_another_name_is_not() {
        let ep = Endpoint::parse(
            "redis-cluster://127.0.0.1:61001,127.0.0.1:61002",
            Default::default(),
        )
        .unwrap();
        let before = generation(&ep);
        assert!(before >= 1, "live from the start");
        let map = |hosts, ids| masters_by_id(&slots_reply(hosts, ids));
        mapped(&ep, map(["10.0.0.1", "10.0.0.2"], ["a", "b"]));
        assert_eq!(generation(&ep), before, "the first map is no switch");
        // The same masters by other names (a link that came in by hostname).
        mapped(&ep, map(["node1", "node2"], ["a", "b"]));
        assert_eq!(generation(&ep), before);
        // The second range's replica promoted.
        mapped(&ep, map(["node1", "node3"], ["a", "c"]));
        assert_eq!(generation(&ep), before + 1);
        mapped(&ep, map(["node1", "node3"], ["a", "c"]));
        assert_eq!(generation(&ep), before + 1, "counted once");
    }
}
