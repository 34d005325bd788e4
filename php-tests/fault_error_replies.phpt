--TEST--
Fault: Redis error replies (SCRIPT FLUSH, OOM under maxmemory, WRONGTYPE keys, ACL NOPERM, READONLY replica) for DistributedLock and both session forms: a ConnectionException or a session warning naming the error, never a password, and nothing half-written
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

// Both servers work in a temp dir: a replica saves the data it syncs to an RDB
// file in its working directory, which a later redis-server started there would load.
$dir = fault_tempdir('errreplies');
$srv = rl_start_redis(['--dir', $dir]);
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$options = ['lock_ttl' => 2.0, 'lock_wait' => 1.0];
$children = [];
foreach (ST_FORMS as $form) {
    $children[$form] = new FaultSessionChild($form, $dsn, $options);
}

/** Check a ConnectionException from $fn that names $code; returns the outcome. */
function conn_error(string $label, callable $fn, string $code): array
{
    $o = fault_outcome($fn);
    rl_same("$label: ConnectionException", 'RedisLease\ConnectionException', $o['exception'] ?? rl_fmt($o['value']));
    rl_ok("$label: the message names $code", str_contains((string) $o['message'], $code), (string) $o['message']);
    return $o;
}

// --- 1. SCRIPT FLUSH before every session call (the lock side is lock_script_flush.phpt) ---
foreach ($children as $form => $c) {
    $sid = st_sid();
    $flushed = static function () use ($raw): void {
        $raw->cmd('SCRIPT', 'FLUSH');
    };
    $steps = [];
    $flushed();
    $steps['start (new session)'] = $c->step('start', ['sid' => $sid]);
    $c->step('set', ['values' => ['a' => 1]]);
    $flushed();
    $steps['write'] = $c->step('write');
    $flushed();
    $steps['start again'] = $c->step('start', ['sid' => $sid]);
    $flushed();
    $steps['abort (unlock)'] = $c->step('abort');
    $flushed();
    $steps['start read_and_close'] = $c->step('start', ['sid' => $sid, 'options' => ['read_and_close' => true]]);
    $flushed();
    $steps['start to destroy'] = $c->step('start', ['sid' => $sid]);
    $flushed();
    $steps['destroy'] = $c->step('destroy');
    $results = [];
    foreach ($steps as $label => $j) {
        $results[$label] = [$j['started'] ?? $j['closed'] ?? $j['aborted'] ?? $j['destroyed'] ?? null, $j['warnings'] ?? null];
    }
    rl_same("$form: after SCRIPT FLUSH every session call succeeds without a warning", array_fill_keys(array_keys($steps), [true, []]), $results);
    rl_same("$form: the data was read back after SCRIPT FLUSH", ['a' => 1], $steps['start again']['data'] ?? null);
    rl_same("$form: destroyed after SCRIPT FLUSH: no data, no lock", [0, []], [$raw->cmd('EXISTS', st_data_key($sid)), st_lock_keys($raw, $sid)]);
}

// --- 2. maxmemory reached (noeviction): writes refused with OOM, nothing half-written ---
$raw->cmd('SET', 'filler', str_repeat('x', 1 << 20));
$raw->cmd('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
$oom = static fn() => $raw->cmd('CONFIG', 'SET', 'maxmemory', '1');
$noOom = static fn() => $raw->cmd('CONFIG', 'SET', 'maxmemory', '0');
rl_ok('Redis now refuses writes with OOM', (static function () use ($raw, $oom, $noOom): bool {
    $oom();
    try {
        $raw->cmd('SET', 'probe', '1');
        return false;
    } catch (RlRedisError $e) {
        return str_starts_with($e->getMessage(), 'OOM');
    } finally {
        $noOom();
    }
})());

$k = rl_key('oom');
$rk = rl_lock_key($k);
$held = new DistributedLock(rl_key('oom-held'), 5.0, $dsn);
rl_same('a lock taken before maxmemory is reached', true, $held->acquire());
$oom();
$l = new DistributedLock($k, 5.0, $dsn);
conn_error('OOM: acquire()', fn() => $l->acquire(), 'OOM');
$ran = false;
conn_error('OOM: synchronized()', function () use ($l, &$ran) {
    return $l->synchronized(function () use (&$ran) {
        $ran = true;
    }, 0.5);
}, 'OOM');
rl_same('OOM: the callback did not run', false, $ran);
rl_same('OOM: no lock key and no fencing counter written', [], $raw->cmd('KEYS', "lock:{{$k}}*"));
// Releasing frees memory: a lock held before must still be releasable.
rl_same('OOM: a held lock can still be inspected, refreshed and released', [true, true, true],
    [$held->isAcquired(), $held->refresh(), $held->release()]);
$noOom();
rl_same('below maxmemory again: acquire()', true, $l->acquire());
rl_same('below maxmemory again: release()', true, $l->release());

foreach ($children as $form => $c) {
    $sid = st_sid();
    $raw->cmd('SET', st_data_key($sid), 'old|i:1;', 'EX', 1440);
    // session_start() itself under OOM.
    $oom();
    $j = $c->step('start', ['sid' => $sid]);
    $noOom();
    rl_same("$form: OOM: session_start() fails", false, $j['started'] ?? null);
    rl_ok("$form: OOM: with our warning naming OOM", st_has_warning(st_ours($j['warnings'] ?? []), 'OOM'), json_encode($j['warnings'] ?? $j));
    rl_same("$form: OOM: no lock taken", [], st_lock_keys($raw, $sid));
    // The write under OOM, of a session opened before.
    $j = $c->step('start', ['sid' => $sid]);
    rl_same("$form: session_start() below maxmemory", [true, ['old' => 1]], [$j['started'] ?? null, $j['data'] ?? null]);
    $c->step('set', ['values' => ['new' => 2]]);
    $oom();
    $j = $c->step('write');
    $noOom();
    rl_ok("$form: OOM: the write fails with our warning naming OOM", st_has_warning(st_ours($j['warnings'] ?? []), 'was not written', 'OOM'),
        json_encode($j['warnings'] ?? $j));
    rl_same("$form: OOM: the old data is intact", 'old|i:1;', $raw->cmd('GET', st_data_key($sid)));
    rl_same("$form: OOM: the session is unlocked (its lock freed)", [], st_lock_keys($raw, $sid));
}
$raw->cmd('DEL', 'filler');

// --- 3. A key of the wrong type where ours should be ---
$k = rl_key('wrongtype');
$rk = rl_lock_key($k);
$raw->cmd('RPUSH', $rk, 'not', 'a', 'lock');
$l = new DistributedLock($k, 5.0, $dsn);
conn_error('lock key is a list: acquire()', fn() => $l->acquire(), 'WRONGTYPE');
conn_error('lock key is a list: acquire(wait: 0.3)', fn() => $l->acquire(0.3), 'WRONGTYPE');
rl_same('lock key is a list: left as it was', ['not', 'a', 'lock'], $raw->cmd('LRANGE', $rk, 0, -1));
rl_same('lock key is a list: no expiry put on it', -1, $raw->cmd('PTTL', $rk));
rl_same('lock key is a list: isAcquired() and release() are false', [false, false], [$l->isAcquired(), $l->release()]);

foreach ($children as $form => $c) {
    $sid = st_sid();
    $raw->cmd('HSET', st_data_key($sid), 'field', 'value');
    $j = $c->step('start', ['sid' => $sid]);
    rl_same("$form: session data is a hash: session_start() fails", false, $j['started'] ?? null);
    rl_ok("$form: session data is a hash: with our warning naming WRONGTYPE",
        st_has_warning(st_ours($j['warnings'] ?? []), 'WRONGTYPE'), json_encode($j['warnings'] ?? $j));
    rl_same("$form: session data is a hash: left as it was", ['field', 'value'], $raw->cmd('HGETALL', st_data_key($sid)));
    // The failed read did not give this request the session; it must not leave it locked either.
    rl_same("$form: session data is a hash: no lock left behind by the failed read", [], st_lock_keys($raw, $sid));
}

// --- 4. An ACL user without the permissions: NOPERM, never the password ---
const ACL_PW = 'Sekr3t-pw-Quux';
$raw->cmd('ACL', 'SETUSER', 'limited', 'on', '>' . ACL_PW, '~*', '-@all', '+ping');
$raw->cmd('ACL', 'SETUSER', 'keyless', 'on', '>' . ACL_PW, '~other:*', '+@all');
foreach (['limited' => 'no command but PING', 'keyless' => 'no access to our keys'] as $user => $what) {
    $aclDsn = "redis://$user:" . ACL_PW . "@127.0.0.1:$port";
    $l = new DistributedLock(rl_key('acl'), 5.0, $aclDsn);
    $o = fault_outcome(fn() => $l->acquire());
    rl_same("ACL user with $what: acquire() throws ConnectionException", 'RedisLease\ConnectionException', $o['exception']);
    rl_ok("ACL user with $what: the message names the NOPERM error (in any case)", stripos((string) $o['message'], 'NOPERM') !== false,
        (string) $o['message']);
    rl_ok("ACL user with $what: the message names NOPERM verbatim, as Redis sent it", str_contains((string) $o['message'], 'NOPERM'),
        (string) $o['message']);
    rl_ok("ACL user with $what: the message does not contain the password", !str_contains((string) $o['message'], ACL_PW),
        (string) $o['message']);
    foreach (ST_FORMS as $form) {
        // The native form takes the DSN from redis_lease.dsn, as the README advises
        // for passwords (PHP's own warnings print session.save_path).
        $c = new FaultSessionChild($form, $aclDsn, $options,
            $form === 'native' ? ['session.save_path' => '', 'redis_lease.dsn' => $aclDsn] : []);
        $j = $c->step('start', ['sid' => st_sid()]);
        rl_same("$form: ACL user with $what: session_start() fails", false, $j['started'] ?? null);
        rl_ok("$form: ACL user with $what: with our warning naming NOPERM", st_has_warning(st_ours($j['warnings'] ?? []), 'NOPERM'),
            json_encode($j['warnings'] ?? $j));
        rl_same("$form: ACL user with $what: no warning contains the password", [], st_leaks($j['warnings'] ?? [], ACL_PW));
        $c->finish();
    }
}

// --- 5. A read-only replica: writes refused with READONLY ---
$replica = rl_start_redis(['--replicaof', '127.0.0.1', (string) $port, '--dir', $dir]);
$rraw = new RlRaw($replica['port']);
rl_ok('the replica is linked to the primary', rl_wait_until(
    static fn() => str_contains((string) $rraw->cmd('INFO', 'replication'), 'master_link_status:up'), 10.0));
$keysBefore = $raw->cmd('DBSIZE');
$l = new DistributedLock(rl_key('replica'), 5.0, $replica['dsn']);
$o = fault_outcome(fn() => $l->acquire());
rl_same('replica: acquire() throws ConnectionException', 'RedisLease\ConnectionException', $o['exception']);
rl_ok('replica: the message names the READONLY error (in any case)', stripos((string) $o['message'], 'READONLY') !== false,
    (string) $o['message']);
rl_ok('replica: the message names READONLY verbatim, as Redis sent it', str_contains((string) $o['message'], 'READONLY'),
    (string) $o['message']);
foreach (ST_FORMS as $form) {
    $c = new FaultSessionChild($form, $replica['dsn'], $options);
    $j = $c->step('start', ['sid' => st_sid()]);
    rl_same("$form: replica: session_start() fails", false, $j['started'] ?? null);
    rl_ok("$form: replica: with our warning naming READONLY", st_has_warning(st_ours($j['warnings'] ?? []), 'READONLY'),
        json_encode($j['warnings'] ?? $j));
    $c->finish();
}
rl_same('replica: nothing was written anywhere', [$keysBefore, $keysBefore], [$raw->cmd('DBSIZE'), $rraw->cmd('DBSIZE')]);

foreach ($children as $c) {
    $c->finish();
}
echo "done\n";
?>
--EXPECT--
ok: class: after SCRIPT FLUSH every session call succeeds without a warning
ok: class: the data was read back after SCRIPT FLUSH
ok: class: destroyed after SCRIPT FLUSH: no data, no lock
ok: native: after SCRIPT FLUSH every session call succeeds without a warning
ok: native: the data was read back after SCRIPT FLUSH
ok: native: destroyed after SCRIPT FLUSH: no data, no lock
ok: Redis now refuses writes with OOM
ok: a lock taken before maxmemory is reached
ok: OOM: acquire(): ConnectionException
ok: OOM: acquire(): the message names OOM
ok: OOM: synchronized(): ConnectionException
ok: OOM: synchronized(): the message names OOM
ok: OOM: the callback did not run
ok: OOM: no lock key and no fencing counter written
ok: OOM: a held lock can still be inspected, refreshed and released
ok: below maxmemory again: acquire()
ok: below maxmemory again: release()
ok: class: OOM: session_start() fails
ok: class: OOM: with our warning naming OOM
ok: class: OOM: no lock taken
ok: class: session_start() below maxmemory
ok: class: OOM: the write fails with our warning naming OOM
ok: class: OOM: the old data is intact
ok: class: OOM: the session is unlocked (its lock freed)
ok: native: OOM: session_start() fails
ok: native: OOM: with our warning naming OOM
ok: native: OOM: no lock taken
ok: native: session_start() below maxmemory
ok: native: OOM: the write fails with our warning naming OOM
ok: native: OOM: the old data is intact
ok: native: OOM: the session is unlocked (its lock freed)
ok: lock key is a list: acquire(): ConnectionException
ok: lock key is a list: acquire(): the message names WRONGTYPE
ok: lock key is a list: acquire(wait: 0.3): ConnectionException
ok: lock key is a list: acquire(wait: 0.3): the message names WRONGTYPE
ok: lock key is a list: left as it was
ok: lock key is a list: no expiry put on it
ok: lock key is a list: isAcquired() and release() are false
ok: class: session data is a hash: session_start() fails
ok: class: session data is a hash: with our warning naming WRONGTYPE
ok: class: session data is a hash: left as it was
ok: class: session data is a hash: no lock left behind by the failed read
ok: native: session data is a hash: session_start() fails
ok: native: session data is a hash: with our warning naming WRONGTYPE
ok: native: session data is a hash: left as it was
ok: native: session data is a hash: no lock left behind by the failed read
ok: ACL user with no command but PING: acquire() throws ConnectionException
ok: ACL user with no command but PING: the message names the NOPERM error (in any case)
ok: ACL user with no command but PING: the message names NOPERM verbatim, as Redis sent it
ok: ACL user with no command but PING: the message does not contain the password
ok: class: ACL user with no command but PING: session_start() fails
ok: class: ACL user with no command but PING: with our warning naming NOPERM
ok: class: ACL user with no command but PING: no warning contains the password
ok: native: ACL user with no command but PING: session_start() fails
ok: native: ACL user with no command but PING: with our warning naming NOPERM
ok: native: ACL user with no command but PING: no warning contains the password
ok: ACL user with no access to our keys: acquire() throws ConnectionException
ok: ACL user with no access to our keys: the message names the NOPERM error (in any case)
ok: ACL user with no access to our keys: the message names NOPERM verbatim, as Redis sent it
ok: ACL user with no access to our keys: the message does not contain the password
ok: class: ACL user with no access to our keys: session_start() fails
ok: class: ACL user with no access to our keys: with our warning naming NOPERM
ok: class: ACL user with no access to our keys: no warning contains the password
ok: native: ACL user with no access to our keys: session_start() fails
ok: native: ACL user with no access to our keys: with our warning naming NOPERM
ok: native: ACL user with no access to our keys: no warning contains the password
ok: the replica is linked to the primary
ok: replica: acquire() throws ConnectionException
ok: replica: the message names the READONLY error (in any case)
ok: replica: the message names READONLY verbatim, as Redis sent it
ok: class: replica: session_start() fails
ok: class: replica: with our warning naming READONLY
ok: native: replica: session_start() fails
ok: native: replica: with our warning naming READONLY
ok: replica: nothing was written anywhere
done
