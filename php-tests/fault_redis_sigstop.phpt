--TEST--
Fault: redis-server stopped with SIGSTOP mid-request: read timeouts are honoured (DistributedLock and both session forms), SIGCONT recovers, a timed-out acquire is resolved truthfully afterwards and leaves no lock nobody knows of
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const READ_TIMEOUT = 0.5;
const MARGIN = 0.4;          // scheduling slack on this 2-core machine
const LOCK_TTL = 1.0;        // session lock_ttl; < LOCK_WAIT
const LOCK_WAIT = 3.0;

$srv = rl_start_redis();
$port = $srv['port'];
$pid = $srv['pid'];
$raw = new RlRaw($port);
$dsn = "redis://127.0.0.1:$port?connect_timeout=0.5&read_timeout=" . READ_TIMEOUT;
$redisAt = "Redis at 127.0.0.1:$port";

/** Time $fn() and check it threw ConnectionException naming Redis and a timeout, within read_timeout + margin. */
function timed_out(string $label, callable $fn): void
{
    global $redisAt;
    $t = microtime(true);
    $o = fault_outcome($fn);
    $el = microtime(true) - $t;
    rl_same("$label: ConnectionException", 'RedisLease\ConnectionException', $o['exception'] ?? rl_fmt($o['value']));
    rl_ok("$label: the message names Redis and the timeout", str_contains((string) $o['message'], $redisAt)
        && str_contains((string) $o['message'], 'timed out'), (string) $o['message']);
    rl_ok(sprintf('%s: gave up after read_timeout (%.1f..%.1f s)', $label, READ_TIMEOUT - 0.1, READ_TIMEOUT + MARGIN),
        $el >= READ_TIMEOUT - 0.1 && $el <= READ_TIMEOUT + MARGIN, sprintf('%.3f s', $el));
}

/** The fencing token in a lock value "token:fence", or null. */
function fence_of(?string $value): ?int
{
    return $value === null ? null : (int) substr($value, strrpos($value, ':') + 1);
}

// Warm up: the scripts are loaded, the connection is open.
$warm = new DistributedLock(rl_key('warm'), 5.0, $dsn);
rl_same('warm-up acquire', true, $warm->acquire());
rl_same('warm-up release', true, $warm->release());

// --- 1. acquire() while Redis is stopped; then isAcquired() must tell the truth ---
$k = rl_key('stop-acquire');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 5.0, $dsn);
rl_ok('redis-server stopped', fault_pause($pid));
timed_out('stopped: acquire()', fn() => $l->acquire());
// Still stopped: the next call cannot resolve it yet and fails in time too.
timed_out('still stopped: isAcquired()', fn() => $l->isAcquired());
rl_ok('redis-server resumed', fault_resume($pid));
rl_ok('Redis ran the late commands of the dropped connections', fault_await_late_commands($port));
// Whatever Redis did with the late acquire, the object must agree with it.
$value = $raw->cmd('GET', $rk);
$held = fault_outcome(fn() => $l->isAcquired());
rl_same('resumed: isAcquired() answers (no exception)', null, $held['exception']);
rl_same('resumed: isAcquired() is true exactly when Redis holds the key', $value !== null, $held['value']);
$fence = $l->getFencingToken();
rl_same("resumed: the object's fencing token is the one in Redis's value", fence_of($raw->cmd('GET', $rk)), $fence);
printf("info: the late acquire %s\n", $value !== null ? 'took the lock; the object adopted it' : 'took nothing');
rl_same('resumed: release() frees it exactly when it was held', $value !== null, $l->release());
rl_same('resumed: the key is free', 0, $raw->cmd('EXISTS', $rk));
rl_same('the next acquire() succeeds', true, $l->acquire());
rl_same('and its release()', true, $l->release());

// --- 2. acquire() while stopped, then the object is destroyed after SIGCONT ---
$k = rl_key('stop-destroy');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 5.0, $dsn);
fault_pause($pid);
timed_out('stopped: acquire() of an object destroyed later', fn() => $l->acquire());
fault_resume($pid);
fault_await_late_commands($port);
$before = $raw->cmd('GET', $rk);
unset($l);
rl_same('after the destruction no lock is left for the unknown token (Redis held it: ' . ($before !== null ? 'yes' : 'no') . ')',
    0, $raw->cmd('EXISTS', $rk));

// --- 3. Destroyed while Redis is still stopped: the orphan lease ends with its ttl ---
$k = rl_key('stop-orphan');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, LOCK_TTL, $dsn);
fault_pause($pid);
timed_out('stopped: acquire() of an object destroyed while stopped', fn() => $l->acquire());
$t = microtime(true);
unset($l); // cannot reach Redis: one read timeout, then the lease is left to its ttl
$el = microtime(true) - $t;
rl_ok('the destruction gave up within read_timeout + margin', $el <= READ_TIMEOUT + MARGIN, sprintf('%.3f s', $el));
fault_resume($pid);
fault_await_late_commands($port);
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('a lease the late acquire took has at most the ttl left', $pttl === -2 || ($pttl > 0 && $pttl <= LOCK_TTL * 1000),
    rl_fmt($pttl));
rl_ok('and it is gone within the ttl', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, LOCK_TTL + 0.5));

// --- 4. Redis stops between acquire() and release() ---
$k = rl_key('stop-release');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 5.0, $dsn);
rl_same('acquire() while Redis runs', true, $l->acquire());
$m0 = RedisLease\metrics();
fault_pause($pid);
timed_out('stopped: release()', fn() => $l->release());
fault_resume($pid);
fault_await_late_commands($port);
// The late release ran when Redis resumed. Our 5 s lease cannot have run out
// in the ~0.5 s since: if the key is free, only our own release freed it, and
// the next call must not report the lease as lost.
rl_same('resumed: the late release freed the key', 0, $raw->cmd('EXISTS', $rk));
$again = fault_outcome(fn() => $l->release());
rl_same('resumed: release() again reports the lock released by us (true), not lost', true, $again['value'] ?? $again['exception']);
rl_same('resumed: no lost lease counted (lock_lost)', $m0['lock_lost'], RedisLease\metrics()['lock_lost']);
rl_same('the next acquire() succeeds', true, $l->acquire());
rl_same('and its release()', true, $l->release());
unset($l, $warm);

// --- 5. Sessions, both forms: session_start() and the write while Redis is stopped ---
$options = ['lock_ttl' => LOCK_TTL, 'lock_wait' => LOCK_WAIT];
$nativeDsn = "tcp://127.0.0.1:$port?timeout=0.5&read_timeout=" . READ_TIMEOUT;
// The child does one step per line it reads, and answers each with one JSON line.
$childCode = <<<'PHP'
if ($mode === 'class') {
    session_set_save_handler(new RedisLockingSessionHandler($_SERVER['RL_DSN'], json_decode($_SERVER['RL_OPTIONS'], true)), true);
}
$sid = trim(fgets(STDIN));
$report = function (array $fields): void {
    // fwrite(STDOUT), not echo: output through PHP would count as headers sent.
    fwrite(STDOUT, json_encode($fields + ['warnings' => app_warning_messages()]) . "\n");
    $GLOBALS['app_warnings'] = [];
};
$timed = function (callable $fn): array {
    $t = microtime(true);
    $r = $fn();
    return [$r, microtime(true) - $t];
};
while (($step = fgets(STDIN)) !== false) {
    switch (trim($step)) {
        case 'start':
            session_id($sid);
            [$ok, $took] = $timed(fn() => session_start());
            $report(['started' => $ok, 'took' => $took, 'data' => $ok ? $_SESSION : null]);
            break;
        case 'write':
            $_SESSION['new'] = 'N';
            [$ok, $took] = $timed(fn() => session_write_close());
            $report(['closed' => $ok, 'took' => $took]);
            break;
        case 'warm':
            // A session of its own, so that Redis has the session scripts loaded
            // (a late command then runs instead of failing with NOSCRIPT).
            session_id("warm$sid");
            session_start();
            [$ok, $took] = $timed(fn() => session_write_close());
            $report(['closed' => $ok, 'took' => $took]);
            break;
        case 'exit':
            exit(0);
    }
}
PHP;

foreach (ST_FORMS as $form) {
    $sid = st_sid();
    $dataKey = st_data_key($sid);
    $lockKey = st_lock_key($sid);
    $raw->cmd('SET', $dataKey, 'old|s:1:"O";', 'EX', 1440);
    $child = st_child($form, $form === 'class' ? $dsn : $nativeDsn, $options, $childCode);
    $child->send($sid);
    $child->send('warm');
    rl_same("$form: warm-up session without warnings", [], (st_child_json($child, 5.0) ?? [])['warnings'] ?? null);

    // 5a. session_start() while Redis is stopped.
    fault_pause($pid);
    $child->send('start');
    $j = st_child_json($child, 5.0) ?? [];
    rl_same("$form: stopped: session_start() fails", false, $j['started'] ?? null);
    rl_ok("$form: stopped: with our warning naming Redis and the timeout",
        st_has_warning(st_ours($j['warnings'] ?? []), $redisAt, 'timed out'), json_encode($j['warnings'] ?? null));
    rl_ok(sprintf('%s: stopped: session_start() gave up after read_timeout (%.1f..%.1f s)', $form, READ_TIMEOUT - 0.1, READ_TIMEOUT + MARGIN),
        ($j['took'] ?? 99) >= READ_TIMEOUT - 0.1 && ($j['took'] ?? 99) <= READ_TIMEOUT + MARGIN, rl_fmt($j['took'] ?? null));
    fault_resume($pid);
    fault_await_late_commands($port);
    // The late lock-and-read ran: it may hold the session for a token nobody
    // knows any more, but no longer than lock_ttl.
    $pttl = $raw->cmd('PTTL', $lockKey);
    rl_ok("$form: a lock left by the late open expires within lock_ttl", $pttl === -2 || ($pttl > 0 && $pttl <= LOCK_TTL * 1000),
        rl_fmt($pttl));

    // 5b. Resumed: the next session_start() succeeds (at worst after that lease).
    $child->send('start');
    $j = st_child_json($child, 10.0) ?? [];
    rl_same("$form: resumed: session_start() succeeds", true, $j['started'] ?? null);
    rl_ok("$form: resumed: within lock_ttl + margin", ($j['took'] ?? 99) <= LOCK_TTL + MARGIN, rl_fmt($j['took'] ?? null));
    printf("info: %s: session_start() after SIGCONT took %.3f s (lease left by the late open: %d ms)\n",
        $form, $j['took'] ?? -1, $pttl);
    rl_same("$form: resumed: the data read is the stored data", ['old' => 'O'], $j['data'] ?? null);
    rl_same("$form: resumed: no warning", [], $j['warnings'] ?? null);

    // 5c. Redis stops while the request holds the session: the write times out.
    fault_pause($pid);
    $child->send('write');
    $j = st_child_json($child, 5.0) ?? [];
    rl_ok("$form: stopped: the write fails with our warning naming Redis and the timeout",
        st_has_warning(st_ours($j['warnings'] ?? []), 'was not written', $redisAt, 'timed out'), json_encode($j['warnings'] ?? null));
    rl_ok(sprintf('%s: stopped: the write gave up after read_timeout (%.1f..%.1f s)', $form, READ_TIMEOUT - 0.1, READ_TIMEOUT + MARGIN),
        ($j['took'] ?? 99) >= READ_TIMEOUT - 0.1 && ($j['took'] ?? 99) <= READ_TIMEOUT + MARGIN, rl_fmt($j['took'] ?? null));
    fault_resume($pid);
    fault_await_late_commands($port);
    // The write's outcome was unknown to the request; in Redis it is all or nothing.
    $stored = st_decode($raw->cmd('GET', $dataKey));
    rl_ok("$form: resumed: the data is exactly the old or exactly the new",
        in_array($stored, [['old' => 'O'], ['old' => 'O', 'new' => 'N']], true), rl_fmt($stored));
    $pttl = $raw->cmd('PTTL', $lockKey);
    rl_ok("$form: resumed: the session's lock is gone or ends within lock_ttl", $pttl === -2 || ($pttl > 0 && $pttl <= LOCK_TTL * 1000),
        rl_fmt($pttl));

    // 5d. And the session works again.
    $child->send('start');
    $j = st_child_json($child, 10.0) ?? [];
    rl_same("$form: resumed: the next session_start() succeeds", true, $j['started'] ?? null);
    rl_same("$form: resumed: and reads what Redis holds", $stored, $j['data'] ?? null);
    $child->send('write');
    $j = st_child_json($child, 5.0) ?? [];
    rl_same("$form: resumed: and writes without a warning", [], $j['warnings'] ?? null);
    rl_same("$form: the final data", ['old' => 'O', 'new' => 'N'], st_decode($raw->cmd('GET', $dataKey)));
    rl_same("$form: no lock left", 0, $raw->cmd('EXISTS', $lockKey));
    $child->send('exit');
    rl_same("$form: the child exits cleanly", 0, $child->wait(5.0));
}
echo "done\n";
?>
--EXPECTF--
ok: warm-up acquire
ok: warm-up release
ok: redis-server stopped
ok: stopped: acquire(): ConnectionException
ok: stopped: acquire(): the message names Redis and the timeout
ok: stopped: acquire(): gave up after read_timeout (0.4..0.9 s)
ok: still stopped: isAcquired(): ConnectionException
ok: still stopped: isAcquired(): the message names Redis and the timeout
ok: still stopped: isAcquired(): gave up after read_timeout (0.4..0.9 s)
ok: redis-server resumed
ok: Redis ran the late commands of the dropped connections
ok: resumed: isAcquired() answers (no exception)
ok: resumed: isAcquired() is true exactly when Redis holds the key
ok: resumed: the object's fencing token is the one in Redis's value
info: the late acquire %s
ok: resumed: release() frees it exactly when it was held
ok: resumed: the key is free
ok: the next acquire() succeeds
ok: and its release()
ok: stopped: acquire() of an object destroyed later: ConnectionException
ok: stopped: acquire() of an object destroyed later: the message names Redis and the timeout
ok: stopped: acquire() of an object destroyed later: gave up after read_timeout (0.4..0.9 s)
ok: after the destruction no lock is left for the unknown token (Redis held it: %s)
ok: stopped: acquire() of an object destroyed while stopped: ConnectionException
ok: stopped: acquire() of an object destroyed while stopped: the message names Redis and the timeout
ok: stopped: acquire() of an object destroyed while stopped: gave up after read_timeout (0.4..0.9 s)
ok: the destruction gave up within read_timeout + margin
ok: a lease the late acquire took has at most the ttl left
ok: and it is gone within the ttl
ok: acquire() while Redis runs
ok: stopped: release(): ConnectionException
ok: stopped: release(): the message names Redis and the timeout
ok: stopped: release(): gave up after read_timeout (0.4..0.9 s)
ok: resumed: the late release freed the key
ok: resumed: release() again reports the lock released by us (true), not lost
ok: resumed: no lost lease counted (lock_lost)
ok: the next acquire() succeeds
ok: and its release()
ok: class: warm-up session without warnings
ok: class: stopped: session_start() fails
ok: class: stopped: with our warning naming Redis and the timeout
ok: class: stopped: session_start() gave up after read_timeout (0.4..0.9 s)
ok: class: a lock left by the late open expires within lock_ttl
ok: class: resumed: session_start() succeeds
ok: class: resumed: within lock_ttl + margin
info: class: session_start() after SIGCONT took %f s (lease left by the late open: %i ms)
ok: class: resumed: the data read is the stored data
ok: class: resumed: no warning
ok: class: stopped: the write fails with our warning naming Redis and the timeout
ok: class: stopped: the write gave up after read_timeout (0.4..0.9 s)
ok: class: resumed: the data is exactly the old or exactly the new
ok: class: resumed: the session's lock is gone or ends within lock_ttl
ok: class: resumed: the next session_start() succeeds
ok: class: resumed: and reads what Redis holds
ok: class: resumed: and writes without a warning
ok: class: the final data
ok: class: no lock left
ok: class: the child exits cleanly
ok: native: warm-up session without warnings
ok: native: stopped: session_start() fails
ok: native: stopped: with our warning naming Redis and the timeout
ok: native: stopped: session_start() gave up after read_timeout (0.4..0.9 s)
ok: native: a lock left by the late open expires within lock_ttl
ok: native: resumed: session_start() succeeds
ok: native: resumed: within lock_ttl + margin
info: native: session_start() after SIGCONT took %f s (lease left by the late open: %i ms)
ok: native: resumed: the data read is the stored data
ok: native: resumed: no warning
ok: native: stopped: the write fails with our warning naming Redis and the timeout
ok: native: stopped: the write gave up after read_timeout (0.4..0.9 s)
ok: native: resumed: the data is exactly the old or exactly the new
ok: native: resumed: the session's lock is gone or ends within lock_ttl
ok: native: resumed: the next session_start() succeeds
ok: native: resumed: and reads what Redis holds
ok: native: resumed: and writes without a warning
ok: native: the final data
ok: native: no lock left
ok: native: the child exits cleanly
done
