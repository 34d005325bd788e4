--TEST--
Security: every key redis_lease creates starts with its configured prefix (redis_lease.lock_prefix, the session prefix option / ini / save_path prefix=) or "{<prefix>", whatever the lock key or session flow
--INI--
redis_lease.lock_prefix=tenantA:locks:
redis_lease.session.prefix=tenantA:ini-sess:
--FILE--
<?php
/*
 * Locks and sessions are exercised with non-default prefixes, including the
 * states that create extra keys (waiters and wake-up lists while someone
 * waits, fencing counters, regenerated and destroyed sessions, lazy writes),
 * with lock keys that look like other prefixes or contain '{', '}', ':', '*'
 * and binary bytes. Redis's whole key space is sampled while waiters exist
 * and at the end: every key must start with one of the configured prefixes,
 * or with '{' followed by a session prefix (the session lock keys).
 */
require __DIR__ . '/fpm-app/harness.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

const LOCK_A = 'tenantA:locks:';
const LOCK_B = 'tenantB:other-locks/';
const SESS_OPT = 'tenantA:opt-sess:';
const SESS_INI = 'tenantA:ini-sess:';
const SESS_PATH = 'tenantA:path-sess:';
$allowed = [LOCK_A, LOCK_B, SESS_OPT, '{' . SESS_OPT, SESS_INI, '{' . SESS_INI, SESS_PATH, '{' . SESS_PATH];
$seen = [];

/** Add every key now in Redis to $seen. */
function sample(RlRaw $raw, array &$seen): void
{
    foreach ($raw->cmd('KEYS', '*') as $k) {
        $seen[$k] = true;
    }
}

/* ---- Locks under redis_lease.lock_prefix (ini) ---- */
$keys = ['plain', 'x}', '{', '{}', '{}{', 'x}:fence', ':waiters', 'lock:', 'PHPREDIS_SESSION:abc', '*', '../../etc',
    "\r\nDEL x\r\n", "bin\0\xff", str_repeat('z', 1024), 'tenantB:other-locks/fake'];
$fences = 0;
foreach ($keys as $k) {
    $l = new DistributedLock($k, 5.0, $dsn);
    $l->acquire();
    $l->getFencingToken(); // assigns it: the counter key exists from now on
    $l->refresh(6.0);
    sample($raw, $seen);
    $fences += $raw->cmd('EXISTS', LOCK_A . '{' . $k . '}:fence');
    $l->synchronized(fn() => null, 1.0); // already held: runs and releases
    $l->release();
    unset($l);
}
rl_same('every tricky key got its fencing counter under lock_prefix', count($keys), $fences);

// A waiter: the child holds, this process waits, the child releases (wake-up lists).
$wk = 'contended';
$holder = rl_spawn_php('
$l = new DistributedLock(' . var_export($wk, true) . ', 10.0, ' . var_export($dsn, true) . ');
echo $l->acquire() ? "held\n" : "busy\n";
fgets(STDIN);
$l->release();
echo "released\n";
fgets(STDIN);
', ['redis_lease.lock_prefix' => LOCK_A]);
rl_same('the child holds the contended lock', 'held', $holder->readLine(10.0));
$waiter = rl_spawn_php('
$l = new DistributedLock(' . var_export($wk, true) . ', 10.0, ' . var_export($dsn, true) . ');
echo "waiting\n";
echo $l->acquire(10.0) ? "got it\n" : "gave up\n";
$l->release();
', ['redis_lease.lock_prefix' => LOCK_A]);
rl_same('a second child waits', 'waiting', $waiter->readLine(10.0));
// Sample the key space while it waits (its waiter entry exists then).
$waiting = rl_wait_until(static function () use ($raw, $wk): bool {
    return $raw->cmd('KEYS', LOCK_A . '{' . $wk . '}:waiters*') !== [];
}, 5.0);
rl_ok('the waiter registered itself (waiters key exists)', $waiting);
sample($raw, $seen);
$holder->send('release');
rl_same('the holder released', 'released', $holder->readLine(10.0));
rl_same('the waiter got the lock after the release', 'got it', $waiter->readLine(10.0));
sample($raw, $seen);
$holder->send('bye');

// The prefix changed at run time: new objects use the new one.
ini_set('redis_lease.lock_prefix', LOCK_B);
$lb = new DistributedLock('runtime', 5.0, $dsn);
rl_same('lock with the runtime prefix', true, $lb->acquire());
rl_same('... lives under that prefix', 1, $raw->cmd('EXISTS', LOCK_B . '{runtime}'));
sample($raw, $seen);
$lb->release();
ini_restore('redis_lease.lock_prefix');

/* ---- Sessions under three prefix sources ---- */
$flow = '
$s = app_session_start($mode, $_SERVER["ASK_ID"]);
$_SESSION["n"] = ($_SESSION["n"] ?? 0) + 1;
if ($_SERVER["DO"] === "regenerate") { session_regenerate_id(true); }
if ($_SERVER["DO"] === "destroy") { session_destroy(); }
if ($_SERVER["DO"] === "hold") { echo json_encode(["held" => true]), "\n"; fgets(STDIN); }
$w = session_status() === PHP_SESSION_ACTIVE ? session_write_close() : null;
app_reply($s + ["id_now" => session_id(), "written" => $w]);
';
$setups = [
    'class form, prefix option' => ['class', $dsn, ['prefix' => SESS_OPT], SESS_OPT],
    'native form, redis_lease.session.prefix ini' => ['native', $dsn, [], SESS_INI],
    'native form, save_path prefix=' => ['native', $dsn . '?prefix=' . SESS_PATH, [], SESS_PATH],
];
foreach ($setups as $label => [$form, $sdsn, $opts, $prefix]) {
    $sid = st_sid();
    $run = static function (string $do, string $id, array $ini = []) use ($form, $sdsn, $opts, $flow): RlChild {
        return st_child($form, $sdsn, $opts, '$_SERVER["ASK_ID"] = ' . var_export($id, true) . '; $_SERVER["DO"] = '
            . var_export($do, true) . ';' . $flow, $ini + ['session.lazy_write' => '1']);
    };
    $j = st_child_json($run('write', $sid)) ?? [];
    rl_same("$label: session written", true, $j['written'] ?? null);
    rl_same("$label: ... under its prefix", 1, $raw->cmd('EXISTS', $prefix . $sid));
    // Contention: one holds, another waits (waiter and wake keys exist meanwhile).
    $h = $run('hold', $sid);
    st_child_json($h);
    $w = $run('write', $sid);
    rl_ok("$label: a second request waits for the lock", rl_wait_until(static function () use ($raw, $prefix, $sid): bool {
        return $raw->cmd('ZCARD', '{' . $prefix . $sid . '}:lock:waiters') > 0
            || count($raw->cmd('KEYS', '{' . $prefix . $sid . '}*')) > 1;
    }, 5.0), json_encode($raw->cmd('KEYS', '*' . $sid . '*')));
    sample($raw, $seen);
    $h->send('go');
    st_child_json($h);
    rl_same("$label: the waiter wrote after the holder", true, (st_child_json($w) ?? [])['written'] ?? null);
    // Unchanged data with lazy_write: updateTimestamp.
    st_child_json(st_child($form, $sdsn, $opts, '$s = app_session_start($mode, ' . var_export($sid, true) . '); app_reply($s + ["w" => session_write_close()]);', ['session.lazy_write' => '1']));
    // Regenerate (old id deleted, new one written) and destroy.
    $j = st_child_json($run('regenerate', $sid)) ?? [];
    $new = (string) ($j['id_now'] ?? '');
    rl_ok("$label: regenerated id stored under the prefix", $new !== '' && $raw->cmd('EXISTS', $prefix . $new) === 1, rl_fmt($new));
    st_child_json($run('destroy', $new));
    rl_same("$label: destroyed", 0, $raw->cmd('EXISTS', $prefix . $new));
    sample($raw, $seen);
}

sample($raw, $seen);
$keysSeen = array_keys($seen);
$keysSeen = array_map('strval', $keysSeen);
$outside = array_values(array_filter($keysSeen, static function (string $k) use ($allowed): bool {
    foreach ($allowed as $p) {
        if (str_starts_with($k, $p)) {
            return false;
        }
    }
    return true;
}));
rl_ok('keys were sampled (at least 30 distinct)', count($keysSeen) >= 30, (string) count($keysSeen));
rl_same('every key seen starts with a configured prefix or "{" + a session prefix', [],
    array_map(static fn($k) => addcslashes($k, "\0..\37\177..\377"), $outside));
rl_same('no key uses the default prefixes lock: or PHPREDIS_SESSION:', [],
    array_values(array_filter($keysSeen, static fn($k) => str_starts_with($k, 'lock:') || (str_contains($k, 'PHPREDIS_SESSION:') && !str_starts_with($k, LOCK_A)))));
echo "done\n";
?>
--EXPECT--
ok: every tricky key got its fencing counter under lock_prefix
ok: the child holds the contended lock
ok: a second child waits
ok: the waiter registered itself (waiters key exists)
ok: the holder released
ok: the waiter got the lock after the release
ok: lock with the runtime prefix
ok: ... lives under that prefix
ok: class form, prefix option: session written
ok: class form, prefix option: ... under its prefix
ok: class form, prefix option: a second request waits for the lock
ok: class form, prefix option: the waiter wrote after the holder
ok: class form, prefix option: regenerated id stored under the prefix
ok: class form, prefix option: destroyed
ok: native form, redis_lease.session.prefix ini: session written
ok: native form, redis_lease.session.prefix ini: ... under its prefix
ok: native form, redis_lease.session.prefix ini: a second request waits for the lock
ok: native form, redis_lease.session.prefix ini: the waiter wrote after the holder
ok: native form, redis_lease.session.prefix ini: regenerated id stored under the prefix
ok: native form, redis_lease.session.prefix ini: destroyed
ok: native form, save_path prefix=: session written
ok: native form, save_path prefix=: ... under its prefix
ok: native form, save_path prefix=: a second request waits for the lock
ok: native form, save_path prefix=: the waiter wrote after the holder
ok: native form, save_path prefix=: regenerated id stored under the prefix
ok: native form, save_path prefix=: destroyed
ok: keys were sampled (at least 30 distinct)
ok: every key seen starts with a configured prefix or "{" + a session prefix
ok: no key uses the default prefixes lock: or PHPREDIS_SESSION:
done
