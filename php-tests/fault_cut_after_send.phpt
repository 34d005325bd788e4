--TEST--
Fault: connection cut after a command reached Redis but before its reply (fault-injecting proxy): acquire, release and refresh of DistributedLock, and session open and write (class and native forms), are resolved; nothing applies twice, no lease is held that its owner does not know of
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

/** The token a cut or held command carried (its only 32-hex-digit argument). */
function cut_token(array $ev): ?string
{
    return array_values(preg_grep('/^[0-9a-f]{32}$/', $ev['command'] ?? []))[0] ?? null;
}

const TTL = 5.0;        // DistributedLock ttl
const LOCK_TTL = 2.0;   // session lock_ttl

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$proxy = FaultProxy::start($port);
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=1');

/** The fencing token in a lock value "token:fence", or null. */
function fence_of(?string $value): ?int
{
    return $value === null ? null : (int) substr($value, strrpos($value, ':') + 1);
}

/** The reply the proxy swallowed when it cut: the event, or a FAIL line. */
function cut_event(FaultProxy $proxy, string $label, string $name = 'cut'): array
{
    $ev = $proxy->awaitEvent($name, 5.0);
    rl_ok("$label: the proxy did the $name", $ev !== null, json_encode($proxy->pendingEvents()));
    return $ev ?? ['reply' => null, 'command' => []];
}

// Warm-up through the proxy: Redis has every script loaded, so the cut
// command is the script itself (not a NOSCRIPT error and a reload).
$warm = new DistributedLock(rl_key('warm'), TTL, $dsn);
rl_same('warm-up: acquire, isAcquired, refresh, release', [true, true, true, true],
    [$warm->acquire(), $warm->isAcquired(), $warm->refresh(), $warm->release()]);

// --- L1. acquire's reply cut; the proxy stays up: the extension asks again and adopts the lock ---
$k = rl_key('cut-acquire');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
$proxy->arm('cut', [$rk, rl_script_marker('acquire.lua')]);
$r = fault_outcome(fn() => $l->acquire());
$ev = cut_event($proxy, 'L1');
// Taken on the fast path: a bare 1, its fencing token left to the first request.
rl_same('L1: Redis granted the lock to the cut command', 1, $ev['reply'] ?? null);
rl_same('L1: acquire() returns true', true, $r['value'] ?? $r['exception']);
rl_same('L1: the cut command took the lock uncontended (its fencing token left to the first request)', $l->getToken() . ':', $raw->cmd('GET', $rk));
rl_same("L1: Redis's lock value carries that token", $l->getFencingToken(), fence_of($raw->cmd('GET', $rk)));
rl_same('L1: isAcquired()', true, $l->isAcquired());
rl_same('L1: release()', true, $l->release());
rl_same('L1: the key is free', 0, $raw->cmd('EXISTS', $rk));

// --- L2. acquire's reply cut and the proxy goes down at once: the outcome cannot be checked ---
$k = rl_key('cut-acquire-down');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
$proxy->arm('cut', [$rk, rl_script_marker('acquire.lua')], 'down');
$r = fault_outcome(fn() => $l->acquire());
$ev = cut_event($proxy, 'L2');
rl_same('L2: acquire() throws ConnectionException', 'RedisLease\ConnectionException', $r['exception']);
rl_ok('L2: saying the outcome is unknown', str_contains((string) $r['message'], 'unknown'), (string) $r['message']);
rl_same('L2: Redis holds the lock for the cut command', cut_token($ev) ?? 'token?', explode(':', (string) $raw->cmd('GET', $rk))[0]);
$proxy->up();
rl_same('L2: healed: isAcquired() is true (the object adopts the lease Redis granted)', true, fault_outcome(fn() => $l->isAcquired())['value']);
$fence = $l->getFencingToken();
rl_same("L2: with a fencing token, the one Redis's value carries", fence_of($raw->cmd('GET', $rk)), $fence);
rl_same('L2: release()', true, $l->release());
rl_same('L2: the key is free', 0, $raw->cmd('EXISTS', $rk));

// --- L3. as L2, but after healing the object is only destroyed ---
$k = rl_key('cut-acquire-destroy');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
$proxy->arm('cut', [$rk, rl_script_marker('acquire.lua')], 'down');
$r = fault_outcome(fn() => $l->acquire());
cut_event($proxy, 'L3');
rl_same('L3: acquire() throws ConnectionException', 'RedisLease\ConnectionException', $r['exception']);
rl_same('L3: Redis holds the lock for the cut command', 1, $raw->cmd('EXISTS', $rk));
$proxy->up();
unset($l);
rl_same('L3: after the destruction the key is free (not left to its ttl)', 0, $raw->cmd('EXISTS', $rk));

// --- L4. acquire held back (never reaches Redis) and the proxy goes down; it arrives after healing ---
$k = rl_key('hold-acquire-down');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
$proxy->arm('hold', [$rk, rl_script_marker('acquire.lua')], 'down');
$r = fault_outcome(fn() => $l->acquire());
cut_event($proxy, 'L4', 'hold');
rl_same('L4: acquire() throws ConnectionException', 'RedisLease\ConnectionException', $r['exception']);
rl_same('L4: Redis has no lock', 0, $raw->cmd('EXISTS', $rk));
$proxy->up();
rl_same('L4: healed: isAcquired() is false', false, fault_outcome(fn() => $l->isAcquired())['value']);
// The held acquire now reaches Redis, late: it must take nothing.
$late = $proxy->flush();
rl_same('L4: the late acquire is refused as voided ({0, -2})', [[0, -2]], array_column($late, 'reply'));
rl_same('L4: Redis has no lock after the late acquire', 0, $raw->cmd('EXISTS', $rk));
$other = new DistributedLock($k, TTL, $dsn);
rl_same('L4: another holder gets the lock at once', true, $other->acquire());
rl_same('L4: and releases it', true, $other->release());
unset($l, $other);

// --- L5. acquire held back, the proxy stays up: the extension voids it, tries again, wins ---
$k = rl_key('hold-acquire');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
$proxy->arm('hold', [$rk, rl_script_marker('acquire.lua')]);
$r = fault_outcome(fn() => $l->acquire());
cut_event($proxy, 'L5', 'hold');
rl_same('L5: acquire() returns true', true, $r['value'] ?? $r['exception']);
$fence = $l->getFencingToken();
$value = $raw->cmd('GET', $rk);
$late = $proxy->flush();
rl_same('L5: the late first attempt is refused as voided ({0, -2})', [[0, -2]], array_column($late, 'reply'));
rl_same("L5: the lock is still the object's", $value, $raw->cmd('GET', $rk));
rl_same("L5: Redis's value carries the object's fencing token", $fence, fence_of($value));
rl_same('L5: release()', true, $l->release());
rl_same('L5: the key is free', 0, $raw->cmd('EXISTS', $rk));

// --- L6. release's reply cut: retried, reported released (not lost) ---
$k = rl_key('cut-release');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
rl_same('L6: acquire()', true, $l->acquire());
$lost = RedisLease\metrics()['lock_lost'];
$proxy->arm('cut', [$rk, rl_script_marker('release.lua')]);
$r = fault_outcome(fn() => $l->release());
$ev = cut_event($proxy, 'L6');
rl_same('L6: Redis released it for the cut command', 1, $ev['reply']);
rl_same('L6: release() returns true', true, $r['value'] ?? $r['exception']);
rl_same('L6: no lost lease counted', $lost, RedisLease\metrics()['lock_lost']);
rl_same('L6: the key is free', 0, $raw->cmd('EXISTS', $rk));

// --- L7. refresh's reply cut: retried, the lease is extended ---
$k = rl_key('cut-refresh');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
rl_same('L7: acquire()', true, $l->acquire());
$proxy->arm('cut', [$rk, '7500']); // refresh(7.5): the only command with 7500 ms
$r = fault_outcome(fn() => $l->refresh(7.5));
$ev = cut_event($proxy, 'L7');
rl_same('L7: Redis extended it for the cut command', 1, $ev['reply']);
rl_same('L7: refresh() returns true', true, $r['value'] ?? $r['exception']);
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('L7: the lease is the new 7.5 s', $pttl > 7000 && $pttl <= 7500, rl_fmt($pttl));
rl_same('L7: release()', true, $l->release());

// --- L8. release's reply cut and the proxy goes down: the retry cannot reach Redis ---
$k = rl_key('cut-release-down');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, TTL, $dsn);
rl_same('L8: acquire()', true, $l->acquire());
$lost = RedisLease\metrics()['lock_lost'];
$proxy->arm('cut', [$rk, rl_script_marker('release.lua')], 'down');
$r = fault_outcome(fn() => $l->release());
$ev = cut_event($proxy, 'L8');
rl_same('L8: Redis released it for the cut command', 1, $ev['reply']);
rl_same('L8: release() throws ConnectionException (the retry cannot connect)', 'RedisLease\ConnectionException', $r['exception']);
rl_same('L8: the key is free', 0, $raw->cmd('EXISTS', $rk));
$proxy->up();
// Our 5 s lease cannot have run out since: only our own cut release freed the
// key, so asking again must say released, not lost.
$r = fault_outcome(fn() => $l->release());
rl_same('L8: healed: release() again reports the lock released by us (true), not lost', true, $r['value'] ?? $r['exception']);
rl_same('L8: no lost lease counted', $lost, RedisLease\metrics()['lock_lost']);
unset($l, $warm);

// --- Sessions: the same faults on the open (lock and read) and save (write and unlock) scripts ---
$options = ['lock_ttl' => LOCK_TTL, 'lock_wait' => 5.0];
foreach (ST_FORMS as $form) {
    $c = new FaultSessionChild($form, $dsn, $options);
    $sid = st_sid();
    $dataKey = st_data_key($sid);
    $lockKey = st_lock_key($sid);
    $old = ['v' => 'old'];
    $raw->cmd('SET', $dataKey, 'v|s:3:"old";', 'EX', 1440);
    // Warm-up: the session scripts are loaded.
    $j = $c->step('start', ['sid' => "warm$sid"]);
    $c->step('write');
    rl_same("$form: warm-up session", [true, []], [$j['started'] ?? null, $j['warnings'] ?? null]);

    // S1. The write's reply is cut (the proxy stays up): applied exactly once, reported written.
    $j = $c->step('start', ['sid' => $sid]);
    rl_same("$form: S1: session_start()", [true, $old], [$j['started'] ?? null, $j['data'] ?? null]);
    $c->step('set', ['values' => ['s1' => 'new']]);
    $proxy->arm('cut', [$dataKey, rl_script_marker('session_save.lua')]);
    $lost0 = $c->step('metrics')['counters']['session_lost'] ?? null;
    $j = $c->step('write');
    $ev = cut_event($proxy, "$form: S1");
    rl_same("$form: S1: Redis ran the cut save", 1, $ev['reply']);
    rl_same("$form: S1: the data is exactly the new data", $old + ['s1' => 'new'], st_decode($raw->cmd('GET', $dataKey)));
    rl_same("$form: S1: the lock is gone", 0, $raw->cmd('EXISTS', $lockKey));
    rl_same("$form: S1: the write is reported done: no warning", [], $j['warnings'] ?? null);
    rl_same("$form: S1: no lost lease counted", $lost0, $c->step('metrics')['counters']['session_lost'] ?? null);
    $now = $old + ['s1' => 'new'];

    // S2. The write held back (never reaches Redis while the request runs): the
    // retry writes it; a newer request then writes; the stale save arriving
    // late must not overwrite the newer data.
    $c->step('start', ['sid' => $sid]);
    $c->step('set', ['values' => ['s2' => 'stale']]);
    $proxy->arm('hold', [$dataKey, rl_script_marker('session_save.lua')]);
    $j = $c->step('write');
    cut_event($proxy, "$form: S2", 'hold');
    rl_same("$form: S2: the retried write succeeded without a warning", [], $j['warnings'] ?? null);
    rl_same("$form: S2: the data is the new data", $now + ['s2' => 'stale'], st_decode($raw->cmd('GET', $dataKey)));
    $j = $c->step('start', ['sid' => $sid]);
    $c->step('set', ['values' => ['s2' => 'newer']]);
    $j = $c->step('write');
    rl_same("$form: S2: a newer request wrote", [], $j['warnings'] ?? null);
    $late = $proxy->flush();
    rl_same("$form: S2: the late stale save is refused (0)", [0], array_column($late, 'reply'));
    $now += ['s2' => 'newer'];
    rl_same("$form: S2: the newer data is intact", $now, st_decode($raw->cmd('GET', $dataKey)));
    rl_same("$form: S2: no lock left", 0, $raw->cmd('EXISTS', $lockKey));

    // S3. The open's reply is cut (the proxy stays up): the session is opened once, with its data.
    $proxy->arm('cut', [$lockKey, rl_script_marker('session_open.lua')]);
    $j = $c->step('start', ['sid' => $sid]);
    $ev = cut_event($proxy, "$form: S3");
    rl_same("$form: S3: Redis locked the session for the cut open", 1, $ev['reply'][0] ?? null);
    rl_same("$form: S3: session_start() succeeds with the stored data, no warning", [true, $now, []],
        [$j['started'] ?? null, $j['data'] ?? null, $j['warnings'] ?? null]);
    $c->step('set', ['values' => ['s3' => 'x']]);
    $j = $c->step('write');
    $now += ['s3' => 'x'];
    rl_same("$form: S3: the write succeeds", [[], $now], [$j['warnings'] ?? null, st_decode($raw->cmd('GET', $dataKey))]);
    rl_same("$form: S3: no lock left", 0, $raw->cmd('EXISTS', $lockKey));

    // S4. The open held back (the proxy stays up): voided and retried; the late open takes nothing.
    $proxy->arm('hold', [$lockKey, rl_script_marker('session_open.lua')]);
    $j = $c->step('start', ['sid' => $sid]);
    cut_event($proxy, "$form: S4", 'hold');
    rl_same("$form: S4: session_start() succeeds with the stored data, no warning", [true, $now, []],
        [$j['started'] ?? null, $j['data'] ?? null, $j['warnings'] ?? null]);
    $j = $c->step('write');
    rl_same("$form: S4: the write succeeds", [], $j['warnings'] ?? null);
    $late = $proxy->flush();
    rl_same("$form: S4: the late open is refused as voided ({0, -2})", [[0, -2]], array_column($late, 'reply'));
    rl_same("$form: S4: no lock taken by it", 0, $raw->cmd('EXISTS', $lockKey));

    // S5. The write's reply is cut and the proxy goes down: the request cannot
    // learn the outcome. Redis has it all or nothing, and no lock is left.
    $c->step('start', ['sid' => $sid]);
    $c->step('set', ['values' => ['s5' => 'y']]);
    $proxy->arm('cut', [$dataKey, rl_script_marker('session_save.lua')], 'down');
    $j = $c->step('write');
    $ev = cut_event($proxy, "$form: S5");
    rl_ok("$form: S5: the write fails with our warning naming Redis", st_has_warning(st_ours($j['warnings'] ?? []), 'Redis at'),
        json_encode($j['warnings'] ?? null));
    $stored = st_decode($raw->cmd('GET', $dataKey));
    rl_same("$form: S5: the data is exactly the new data (the save ran)", $now + ['s5' => 'y'], $stored);
    rl_same("$form: S5: no lock left", 0, $raw->cmd('EXISTS', $lockKey));
    $proxy->up();
    $now = $stored;

    // S6. The open's reply is cut and the proxy goes down: session_start() fails;
    // the lock Redis granted to the lost open ends within lock_ttl.
    $proxy->arm('cut', [$lockKey, rl_script_marker('session_open.lua')], 'down');
    $j = $c->step('start', ['sid' => $sid]);
    $ev = cut_event($proxy, "$form: S6");
    rl_same("$form: S6: session_start() fails", false, $j['started'] ?? null);
    rl_ok("$form: S6: with our warning naming Redis", st_has_warning(st_ours($j['warnings'] ?? []), 'Redis at'),
        json_encode($j['warnings'] ?? null));
    $pttl = $raw->cmd('PTTL', $lockKey);
    rl_ok("$form: S6: a lock left by the lost open ends within lock_ttl", $pttl === -2 || ($pttl > 0 && $pttl <= LOCK_TTL * 1000),
        rl_fmt($pttl));
    $proxy->up();
    $j = $c->step('start', ['sid' => $sid]);
    rl_same("$form: S6: healed: session_start() succeeds with the stored data", [true, $now], [$j['started'] ?? null, $j['data'] ?? null]);
    rl_ok("$form: S6: healed: within lock_ttl", ($j['took'] ?? 99) <= LOCK_TTL + 0.5, rl_fmt($j['took'] ?? null));
    $j = $c->step('write');
    rl_same("$form: S6: and writes without a warning", [], $j['warnings'] ?? null);
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lockKey));
    rl_same("$form: the child exits cleanly", 0, $c->finish());
}
$stats = $proxy->stats();
printf("info: proxy: %d connections, %d commands forwarded, %d cut, %d held\n",
    $stats['accepted'], $stats['forwarded'], $stats['cuts'], $stats['holds']);
echo "done\n";
?>
--EXPECTF--
ok: warm-up: acquire, isAcquired, refresh, release
ok: L1: the proxy did the cut
ok: L1: Redis granted the lock to the cut command
ok: L1: acquire() returns true
ok: L1: the cut command took the lock uncontended (its fencing token left to the first request)
ok: L1: Redis's lock value carries that token
ok: L1: isAcquired()
ok: L1: release()
ok: L1: the key is free
ok: L2: the proxy did the cut
ok: L2: acquire() throws ConnectionException
ok: L2: saying the outcome is unknown
ok: L2: Redis holds the lock for the cut command
ok: L2: healed: isAcquired() is true (the object adopts the lease Redis granted)
ok: L2: with a fencing token, the one Redis's value carries
ok: L2: release()
ok: L2: the key is free
ok: L3: the proxy did the cut
ok: L3: acquire() throws ConnectionException
ok: L3: Redis holds the lock for the cut command
ok: L3: after the destruction the key is free (not left to its ttl)
ok: L4: the proxy did the hold
ok: L4: acquire() throws ConnectionException
ok: L4: Redis has no lock
ok: L4: healed: isAcquired() is false
ok: L4: the late acquire is refused as voided ({0, -2})
ok: L4: Redis has no lock after the late acquire
ok: L4: another holder gets the lock at once
ok: L4: and releases it
ok: L5: the proxy did the hold
ok: L5: acquire() returns true
ok: L5: the late first attempt is refused as voided ({0, -2})
ok: L5: the lock is still the object's
ok: L5: Redis's value carries the object's fencing token
ok: L5: release()
ok: L5: the key is free
ok: L6: acquire()
ok: L6: the proxy did the cut
ok: L6: Redis released it for the cut command
ok: L6: release() returns true
ok: L6: no lost lease counted
ok: L6: the key is free
ok: L7: acquire()
ok: L7: the proxy did the cut
ok: L7: Redis extended it for the cut command
ok: L7: refresh() returns true
ok: L7: the lease is the new 7.5 s
ok: L7: release()
ok: L8: acquire()
ok: L8: the proxy did the cut
ok: L8: Redis released it for the cut command
ok: L8: release() throws ConnectionException (the retry cannot connect)
ok: L8: the key is free
ok: L8: healed: release() again reports the lock released by us (true), not lost
ok: L8: no lost lease counted
ok: class: warm-up session
ok: class: S1: session_start()
ok: class: S1: the proxy did the cut
ok: class: S1: Redis ran the cut save
ok: class: S1: the data is exactly the new data
ok: class: S1: the lock is gone
ok: class: S1: the write is reported done: no warning
ok: class: S1: no lost lease counted
ok: class: S2: the proxy did the hold
ok: class: S2: the retried write succeeded without a warning
ok: class: S2: the data is the new data
ok: class: S2: a newer request wrote
ok: class: S2: the late stale save is refused (0)
ok: class: S2: the newer data is intact
ok: class: S2: no lock left
ok: class: S3: the proxy did the cut
ok: class: S3: Redis locked the session for the cut open
ok: class: S3: session_start() succeeds with the stored data, no warning
ok: class: S3: the write succeeds
ok: class: S3: no lock left
ok: class: S4: the proxy did the hold
ok: class: S4: session_start() succeeds with the stored data, no warning
ok: class: S4: the write succeeds
ok: class: S4: the late open is refused as voided ({0, -2})
ok: class: S4: no lock taken by it
ok: class: S5: the proxy did the cut
ok: class: S5: the write fails with our warning naming Redis
ok: class: S5: the data is exactly the new data (the save ran)
ok: class: S5: no lock left
ok: class: S6: the proxy did the cut
ok: class: S6: session_start() fails
ok: class: S6: with our warning naming Redis
ok: class: S6: a lock left by the lost open ends within lock_ttl
ok: class: S6: healed: session_start() succeeds with the stored data
ok: class: S6: healed: within lock_ttl
ok: class: S6: and writes without a warning
ok: class: no lock left
ok: class: the child exits cleanly
ok: native: warm-up session
ok: native: S1: session_start()
ok: native: S1: the proxy did the cut
ok: native: S1: Redis ran the cut save
ok: native: S1: the data is exactly the new data
ok: native: S1: the lock is gone
ok: native: S1: the write is reported done: no warning
ok: native: S1: no lost lease counted
ok: native: S2: the proxy did the hold
ok: native: S2: the retried write succeeded without a warning
ok: native: S2: the data is the new data
ok: native: S2: a newer request wrote
ok: native: S2: the late stale save is refused (0)
ok: native: S2: the newer data is intact
ok: native: S2: no lock left
ok: native: S3: the proxy did the cut
ok: native: S3: Redis locked the session for the cut open
ok: native: S3: session_start() succeeds with the stored data, no warning
ok: native: S3: the write succeeds
ok: native: S3: no lock left
ok: native: S4: the proxy did the hold
ok: native: S4: session_start() succeeds with the stored data, no warning
ok: native: S4: the write succeeds
ok: native: S4: the late open is refused as voided ({0, -2})
ok: native: S4: no lock taken by it
ok: native: S5: the proxy did the cut
ok: native: S5: the write fails with our warning naming Redis
ok: native: S5: the data is exactly the new data (the save ran)
ok: native: S5: no lock left
ok: native: S6: the proxy did the cut
ok: native: S6: session_start() fails
ok: native: S6: with our warning naming Redis
ok: native: S6: a lock left by the lost open ends within lock_ttl
ok: native: S6: healed: session_start() succeeds with the stored data
ok: native: S6: healed: within lock_ttl
ok: native: S6: and writes without a warning
ok: native: no lock left
ok: native: the child exits cleanly
info: proxy: %d connections, %d commands forwarded, %d cut, %d held
done
