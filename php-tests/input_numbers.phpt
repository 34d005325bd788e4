--TEST--
Bad input: negative, NaN, INF, 1e300 and other out-of-range ttl / wait / timeout values are ValueErrors naming the argument or option; the object and its connection keep working
--INI--
session.use_cookies=0
session.cache_limiter=
--FILE--
<?php
/*
 * Out-of-range numbers everywhere a duration is taken:
 *  - DistributedLock: __construct($ttl), acquire($wait), refresh($ttl), synchronized(wait:)
 *  - RedisLockingSessionHandler options lock_ttl, lock_wait, max_waiters
 *  - the native handler's redis_lease.session.* ini settings (warning + failed session_start())
 *  - DSN timeouts and the redis_lease.*_timeout ini settings
 * Each must be a ValueError (or, for ini settings, a warning and a failed
 * call), never a Redis error, a hang or a crash; after it, the same object
 * and the same connection still work.
 */
require __DIR__ . '/inc/redis.inc';
// Session ini settings and ids can only change before output is sent: buffer it.
ob_start();
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$key = rl_key('numbers');
$rk = rl_lock_key($key);

$l = new DistributedLock($key, 5.0, $dsn);
rl_same('lock acquires before the bad calls', true, $l->acquire());
rl_same('lock releases before the bad calls', true, $l->release());
$connects = RedisLease\metrics()['connects'];

// Values no ttl or wait may take (name => value). Numeric strings go through
// PHP's coercion to float first ("1e400" is INF).
$bad = [
    '-1' => -1.0, '-0.001' => -0.001, '-1e300' => -1e300, 'NAN' => NAN, '-NAN' => -NAN, 'INF' => INF, '-INF' => -INF,
    '1e300' => 1e300, 'PHP_FLOAT_MAX' => PHP_FLOAT_MAX, 'PHP_INT_MAX' => PHP_INT_MAX, 'PHP_INT_MIN' => PHP_INT_MIN,
    '2592000.001' => 2592000.001, '1e10' => 1e10, '"1e300"' => '1e300', '"1e400"' => '1e400', '"-5"' => '-5',
];
// A ttl must also be > 0.
$badTtl = $bad + ['0' => 0.0, '-0.0' => -0.0, 'int 0' => 0];

/** The same object works normally after a refused call (same connection). */
function still_works(DistributedLock $l): string
{
    try {
        $got = [$l->acquire(), $l->isAcquired(), $l->release()];
        return $got === [true, true, true] ? '' : 'acquire/isAcquired/release gave ' . json_encode($got);
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
}

/** Runs $fn for every value: ValueError naming $arg expected; returns failures. */
function expect_value_errors(array $values, callable $fn, string $arg, ?DistributedLock $after = null): array
{
    $fails = [];
    foreach ($values as $name => $v) {
        try {
            $r = $fn($v);
            $fails[] = "$name: returned " . rl_fmt($r);
        } catch (ValueError $e) {
            if (!str_contains($e->getMessage(), $arg)) {
                $fails[] = "$name: message does not name $arg: " . $e->getMessage();
            }
        } catch (Throwable $e) {
            $fails[] = "$name: " . get_class($e) . ': ' . $e->getMessage();
        }
        if ($after !== null && ($w = still_works($after)) !== '') {
            $fails[] = "$name: afterwards the lock did not work: $w";
        }
    }
    return $fails;
}

$r = expect_value_errors($badTtl, fn($v) => new DistributedLock($key, $v, $dsn), '$ttl', $l);
rl_same('__construct($ttl): ValueError naming $ttl for ' . count($badTtl) . ' bad values', [], $r);

$r = expect_value_errors($bad, fn($v) => $l->acquire($v), '$wait', $l);
rl_same('acquire($wait): ValueError naming $wait for ' . count($bad) . ' bad values', [], $r);
rl_same('the refused acquire() calls took no lock', 0, $raw->cmd('EXISTS', $rk));

// refresh() while held: the lease must be untouched by the refused calls.
rl_same('acquire for the refresh checks', true, $l->acquire());
$fenceBefore = $l->getFencingToken();
$r = expect_value_errors($badTtl, fn($v) => $l->refresh($v), '$ttl');
rl_same('refresh($ttl) while held: ValueError naming $ttl for ' . count($badTtl) . ' bad values', [], $r);
rl_same('the lease is still ours after the refused refresh() calls', true, $l->isAcquired());
rl_same('... with the same fencing token', $fenceBefore, $l->getFencingToken());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('... and its ttl was not changed (PTTL <= 5000 ms)', $pttl > 0 && $pttl <= 5000, rl_fmt($pttl));
rl_same('release', true, $l->release());
// refresh() while not held: the argument is still checked first.
$r = expect_value_errors($badTtl, fn($v) => $l->refresh($v), '$ttl', $l);
rl_same('refresh($ttl) while not held: ValueError naming $ttl', [], $r);

$ran = 0;
$r = expect_value_errors($bad, function ($v) use ($l, &$ran) {
    return $l->synchronized(function () use (&$ran) { $ran++; }, $v);
}, '$wait', $l);
rl_same('synchronized(wait:): ValueError naming $wait for ' . count($bad) . ' bad values', [], $r);
rl_same('the callback never ran', 0, $ran);
rl_same('no lock left behind', 0, $raw->cmd('EXISTS', $rk));

/* ---- Session handler options ---- */
$optBad = [
    'lock_ttl' => $bad + ['"abc"' => 'abc', '""' => '', '86400.5' => 86400.5],
    'lock_wait' => $bad + ['"abc"' => 'abc', '86400.5' => 86400.5],
    'max_waiters' => ['-1' => -1, '1.5' => 1.5, 'NAN' => NAN, 'INF' => INF, '1e300' => 1e300, '4294967296' => 4294967296,
        'PHP_INT_MAX' => PHP_INT_MAX, 'PHP_INT_MIN' => PHP_INT_MIN, '"x"' => 'x'],
];
foreach ($optBad as $opt => $values) {
    $r = expect_value_errors($values, fn($v) => new RedisLockingSessionHandler($dsn, [$opt => $v]), $opt, $l);
    rl_same("option $opt: ValueError naming '$opt' for " . count($values) . ' bad values', [], $r);
}

/* ---- The same values as ini settings of the native handler ---- */
$warnings = [];
set_error_handler(static function (int $no, string $msg) use (&$warnings): bool {
    $warnings[] = $msg;
    return true;
});
ini_set('session.save_handler', 'redis_lease');
ini_set('session.save_path', $dsn);
rl_same('test setup: the native handler is in effect', 'redis_lease', ini_get('session.save_handler'));
$iniFails = [];
foreach (['lock_ttl' => ['-1', 'NAN', 'INF', '1e300', '-1e300', 'abc'],
          'lock_wait' => ['-1', 'NAN', 'INF', '1e300', '86401'],
          'max_waiters' => ['-1', '1.5', '1e300', '4294967296']] as $opt => $values) {
    $setting = "redis_lease.session.$opt";
    foreach ($values as $v) {
        $warnings = [];
        $old = ini_set($setting, $v);
        session_id(bin2hex(random_bytes(16)));
        try {
            $started = session_start();
        } catch (Throwable $e) {
            $started = get_class($e) . ': ' . $e->getMessage();
        }
        ini_set($setting, (string) $old);
        $named = array_filter($warnings, static fn($w) => str_contains($w, 'redis_lease:') && str_contains($w, $setting));
        if ($started !== false || $named === []) {
            $iniFails[] = "$setting=$v: session_start() gave " . rl_fmt($started) . ', warnings ' . json_encode($warnings);
            if ($started === true) {
                session_abort();
            }
        }
        if (($w = still_works($l)) !== '') {
            $iniFails[] = "$setting=$v: afterwards the lock did not work: $w";
        }
    }
}
rl_same('native handler: a bad redis_lease.session.* ini value fails session_start() with a warning naming the setting', [], $iniFails);
session_id(bin2hex(random_bytes(16)));
rl_same('native handler: with the ini values restored, session_start() works', true, session_start());
rl_same('... and writes', true, session_write_close());
restore_error_handler();

/* ---- Timeouts: DSN query parameters and ini settings ---- */
$dsnFails = [];
foreach (['timeout', 'connect_timeout', 'read_timeout'] as $p) {
    foreach (['-1', 'NaN', 'inf', '-inf', '1e300', '3600.5', 'abc'] as $v) {
        try {
            $x = new DistributedLock($key, 5.0, "$dsn?$p=$v");
            $dsnFails[] = "$p=$v: accepted";
        } catch (ValueError $e) {
            if (!str_contains($e->getMessage(), $p)) {
                $dsnFails[] = "$p=$v: message does not name $p: " . $e->getMessage();
            }
        } catch (Throwable $e) {
            $dsnFails[] = "$p=$v: " . get_class($e) . ': ' . $e->getMessage();
        }
    }
}
rl_same('DSN timeouts: ValueError naming the parameter for negative, NaN, INF, 1e300, > 3600, non-numbers', [], $dsnFails);
$iniTimeoutFails = [];
foreach (['redis_lease.connect_timeout', 'redis_lease.read_timeout'] as $setting) {
    foreach (['-1', 'NAN', 'INF', '1e300', 'abc'] as $v) {
        $old = ini_set($setting, $v);
        try {
            // No DSN timeouts: the ini settings apply (at construction).
            $x = new DistributedLock($key, 5.0, $dsn);
            $x->acquire();
            $x->release();
            $iniTimeoutFails[] = "$setting=$v: accepted";
        } catch (ValueError $e) {
            if (!str_contains($e->getMessage(), $setting)) {
                $iniTimeoutFails[] = "$setting=$v: message does not name the setting: " . $e->getMessage();
            }
        } catch (Throwable $e) {
            $iniTimeoutFails[] = "$setting=$v: " . get_class($e) . ': ' . $e->getMessage();
        } finally {
            ini_set($setting, (string) $old);
        }
    }
}
rl_same('ini timeouts: ValueError naming the setting for negative, NaN, INF, 1e300, non-numbers', [], $iniTimeoutFails);

rl_same('the lock still works at the end', '', still_works($l));
rl_same('... and every call used one connection', $connects, RedisLease\metrics()['connects']);
echo "done\n";
?>
--EXPECT--
ok: lock acquires before the bad calls
ok: lock releases before the bad calls
ok: __construct($ttl): ValueError naming $ttl for 19 bad values
ok: acquire($wait): ValueError naming $wait for 16 bad values
ok: the refused acquire() calls took no lock
ok: acquire for the refresh checks
ok: refresh($ttl) while held: ValueError naming $ttl for 19 bad values
ok: the lease is still ours after the refused refresh() calls
ok: ... with the same fencing token
ok: ... and its ttl was not changed (PTTL <= 5000 ms)
ok: release
ok: refresh($ttl) while not held: ValueError naming $ttl
ok: synchronized(wait:): ValueError naming $wait for 16 bad values
ok: the callback never ran
ok: no lock left behind
ok: option lock_ttl: ValueError naming 'lock_ttl' for 19 bad values
ok: option lock_wait: ValueError naming 'lock_wait' for 18 bad values
ok: option max_waiters: ValueError naming 'max_waiters' for 9 bad values
ok: test setup: the native handler is in effect
ok: native handler: a bad redis_lease.session.* ini value fails session_start() with a warning naming the setting
ok: native handler: with the ini values restored, session_start() works
ok: ... and writes
ok: DSN timeouts: ValueError naming the parameter for negative, NaN, INF, 1e300, > 3600, non-numbers
ok: ini timeouts: ValueError naming the setting for negative, NaN, INF, 1e300, non-numbers
ok: the lock still works at the end
ok: ... and every call used one connection
done
