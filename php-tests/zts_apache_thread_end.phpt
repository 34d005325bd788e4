--TEST--
Threads: a PHP thread of Apache mpm_event + mod_php (ZTS) that ends in the middle of a request (pthread_exit: no shutdown hook runs for it) frees its lock and its session lock at once, and the watchdog stops renewing them; the other threads keep serving; a request that bails out (a fatal error, max_execution_time) frees them at once too; after a graceful restart (PHP's module startup runs again) the classes are set up again (read()'s return type, the #[SensitiveParameter] marks) and locks work
--SKIPIF--
<?php require __DIR__ . '/../testing/apache_pool.php'; if ($why = ApachePool::unavailable()) die("skip $why"); if (!extension_loaded('ffi')) die('skip needs FFI'); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/apache_pool.php';
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$pool = ApachePool::start(['ini' => st_common_ini() + ['ffi.enable' => '1']]);
$client = $pool->client();
$app = __DIR__ . '/fpm-app/zts_app.php';
$req = static fn(array $q) => ['params' => FcgiClient::params($app, $q, ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port])];

// --- 1. A thread ends while it holds a lock and a session ---
$key = rl_key('vanish');
$sid = st_sid();
$ctl = rl_key('vanish-ctl');
$lockKey = rl_lock_key($key);
$sessionLock = st_lock_key($sid);
$call = $client->begin($req(['op' => 'vanish', 'key' => $key, 'sid' => $sid, 'ctl' => $ctl])['params']);
rl_ok('the request holds its lock and its session', rw_wait_held($raw, "$ctl:held", [$call]));
$held = json_decode((string) $raw->cmd('GET', "$ctl:held"), true);
rl_same('both were taken', [true, true], [$held['lock'] ?? null, $held['session'] ?? null]);
$tEnd = microtime(true);
rl_ok('its thread ended', rl_wait_until(static fn() => !is_dir("/proc/{$held['pid']}/task/{$held['tid']}"), 5.0));
rl_ok('its lock was freed within 1 s (its ttl is 10 s)', rl_wait_until(static fn() => $raw->cmd('EXISTS', $lockKey) === 0, 1.0),
    'PTTL ' . json_encode($raw->cmd('PTTL', $lockKey)));
rl_ok('its session lock was freed within 1 s (its ttl is 10 s)', rl_wait_until(static fn() => $raw->cmd('EXISTS', $sessionLock) === 0, 1.0),
    'PTTL ' . json_encode($raw->cmd('PTTL', $sessionLock)));
printf("info: freed %.3f s after the thread's end was seen\n", microtime(true) - $tEnd);
rl_same('the session was never written', null, $raw->cmd('GET', st_data_key($sid)));
// Nothing renews them now: a new holder keeps the lock and the session undisturbed.
$other = new DistributedLock($key, 5.0, $dsn);
rl_same('another holder takes the lock', true, $other->acquire());
$m0 = $client->multi(array_fill(0, 10, $req(['op' => 'metrics'])), 10.0);
$renewals = static fn(array $rs) => array_sum(array_map(static fn($r) => $r->json()['server']['auto_renewals'] ?? 0, $rs)) / max(1, count($rs));
$r0 = $renewals($m0);
usleep(1500000); // a watchdog still renewing the dead thread's holds would renew them 4 times in 1.5 s
$r1 = $renewals($client->multi(array_fill(0, 10, $req(['op' => 'metrics'])), 10.0));
rl_same('the watchdog renews nothing any more', 0.0, (float) ($r1 - $r0));
rl_same('the new holder still holds the lock', true, $other->isAcquired());
rl_same('and releases it', true, $other->release());
$rs = $client->multi(array_fill(0, 60, $req(['op' => 'counter', 'key' => rl_key('after'), 'file' => '/dev/null', 'nolock' => '1'])), 20.0);
rl_same('the other threads keep serving (60 requests)', 60, count(array_filter($rs, static fn($r) => $r->ok() && $r->status === 200)));

// --- 2. A thread's request bails out (a fatal error, max_execution_time): its holds are freed at once ---
foreach (['fatal', 'timeout'] as $how) {
    $key = rl_key("bailout-$how");
    $sid = st_sid();
    $r = $client->request($req(['op' => 'bailout', 'key' => $key, 'sid' => $sid, 'how' => $how])['params'], '', 10.0);
    $said = ['fatal' => 'Call to undefined function the_request_ends_in_a_fatal_error()', 'timeout' => 'PHP Fatal error:  Maximum execution time'][$how];
    rl_ok("$how: the request ended in PHP's bailout (its error log says so)", $r->ok() && str_contains($pool->phpErrors(), $said),
        $r->describe() . "\n" . $pool->phpErrors());
    rl_same("$how: its lock and its session lock are free right after", [0, 0],
        [$raw->cmd('EXISTS', rl_lock_key($key)), $raw->cmd('EXISTS', st_lock_key($sid))]);
    // The session module saves what it has at the end of a failed request, as under php-fpm.
    rl_ok("$how: the session's data is either saved whole or not at all", in_array($raw->cmd('GET', st_data_key($sid)), [null, 'bailed|b:1;'], true),
        json_encode($raw->cmd('GET', st_data_key($sid))));
}

// --- 3. A graceful restart: module startup runs again ---
$classes = static fn() => $client->request($req(['op' => 'classes'])['params'])->json();
// Every thread sees the marks: functions are copied into each thread's own
// table when it starts (from the global one), classes are shared.
$marksOf = static fn(array $j) => json_encode(array_intersect_key($j, array_flip(['lock_sensitive', 'handler_sensitive', 'write_sensitive', 'inspect_sensitive', 'leases_sensitive'])));
$all = array_map(static fn($r) => $r->json() ?? [], $client->multi(array_fill(0, 40, $req(['op' => 'classes'])), 20.0));
$threads = count(array_unique(array_map(static fn($j) => ($j['pid'] ?? 0) . '/' . ($j['tid'] ?? 0), $all)));
rl_ok("more than one thread answered ($threads)", $threads > 1);
rl_same('every thread marks the same parameters #[SensitiveParameter]',
    [json_encode(['lock_sensitive' => ['dsn'], 'handler_sensitive' => ['dsn'], 'write_sensitive' => ['id', 'data'], 'inspect_sensitive' => ['key', 'dsn'], 'leases_sensitive' => ['dsn']])],
    array_values(array_unique(array_map($marksOf, $all))));
$first = $classes();
rl_same('before: read() returns string|false', 'string|false', $first['read_returns'] ?? null);
$pids = $pool->childPids();
$pool->graceful();
rl_ok('after a graceful restart, new children serve', rl_wait_until(static fn() => count($pool->childPids()) === ApachePool::PROCESSES
    && array_intersect($pool->childPids(), $pids) === [] && ($classes()['read_returns'] ?? null) !== null, 15.0),
    json_encode($pool->childPids()));
$again = $classes();
rl_same('after: the classes are set up as before', array_diff_key($first, ['pid' => 1, 'tid' => 1, 't0' => 1, 't_end' => 1]),
    array_diff_key($again, ['pid' => 1, 'tid' => 1, 't0' => 1, 't_end' => 1]));
rl_ok('after: the marks are there', ($again['lock_sensitive'] ?? []) === ['dsn'] && ($again['handler_sensitive'] ?? []) === ['dsn'],
    json_encode($again));
$file = $pool->dir . '/counter-after-restart';
file_put_contents($file, '0');
chmod($file, 0666);
$rs = $client->multi(array_fill(0, 50, $req(['op' => 'counter', 'key' => rl_key('restart'), 'file' => $file])), 30.0);
rl_same('after: 50 locked increments are exact', 50, (int) file_get_contents($file));
$log = $pool->serverErrors();
rl_ok('no child crashed', !str_contains($log, 'exit signal') && !str_contains($log, 'Segmentation'), $log);
$unexpected = array_filter(explode("\n", trim($pool->phpErrors())), static fn($l) => $l !== ''
    && !str_contains($l, 'the_request_ends_in_a_fatal_error') && !str_contains($l, 'Stack trace') && !str_contains($l, '#0 {main}') && !str_contains($l, 'thrown in') && !str_contains($l, 'Maximum execution time'));
rl_same("nothing but the two bailouts reached PHP's error log", [], array_values($unexpected));
$pool->stop();
echo "done\n";

function rw_wait_held(RlRaw $raw, string $key, array $calls): bool
{
    $deadline = microtime(true) + 10.0;
    while ($raw->cmd('EXISTS', $key) !== 1) {
        if (microtime(true) > $deadline) {
            return false;
        }
        FcgiClient::pump($calls, 0.01);
    }
    return true;
}
?>
--EXPECTF--
ok: the request holds its lock and its session
ok: both were taken
ok: its thread ended
ok: its lock was freed within 1 s (its ttl is 10 s)
ok: its session lock was freed within 1 s (its ttl is 10 s)
info: freed %s
ok: the session was never written
ok: another holder takes the lock
ok: the watchdog renews nothing any more
ok: the new holder still holds the lock
ok: and releases it
ok: the other threads keep serving (60 requests)
ok: fatal: the request ended in PHP's bailout (its error log says so)
ok: fatal: its lock and its session lock are free right after
ok: fatal: the session's data is either saved whole or not at all
ok: timeout: the request ended in PHP's bailout (its error log says so)
ok: timeout: its lock and its session lock are free right after
ok: timeout: the session's data is either saved whole or not at all
ok: more than one thread answered (%d)
ok: every thread marks the same parameters #[SensitiveParameter]
ok: before: read() returns string|false
ok: after a graceful restart, new children serve
ok: after: the classes are set up as before
ok: after: the marks are there
ok: after: 50 locked increments are exact
ok: no child crashed
ok: nothing but the two bailouts reached PHP's error log
done
