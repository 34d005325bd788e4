--TEST--
DistributedLock: keeps working after SCRIPT FLUSH and FUNCTION FLUSH between calls (the library loaded again, NOSCRIPT fallback), with functions and with functions=0
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
foreach (['functions' => $srv['dsn'], 'functions=0' => $srv['dsn'] . '?functions=0'] as $mode => $dsn) {
    $k = rl_key('flush');
    $rk = rl_lock_key($k);

    $l = new DistributedLock($k, 5.0, $dsn);
    $other = new DistributedLock($k, 5.0, $dsn);
    // Warm up: scripts get loaded/cached by the first calls.
    rl_same('acquire', true, $l->acquire());
    rl_same('release', true, $l->release());

    $steps = [
        'acquire' => fn() => $l->acquire(),
        'isAcquired' => fn() => $l->isAcquired(),
        'getRemainingLifetime is float' => fn() => is_float($l->getRemainingLifetime()),
        'refresh' => fn() => $l->refresh(),
        'contender acquire is false' => fn() => $other->acquire() === false,
        'contender acquire(wait: 0.1) is false' => fn() => $other->acquire(0.1) === false,
        'release' => fn() => $l->release(),
        'release again is false' => fn() => $l->release() === false,
        'synchronized' => fn() => $l->synchronized(fn() => true),
        'contender acquire' => fn() => $other->acquire(),
        'contender release' => fn() => $other->release(),
    ];
    foreach ($steps as $label => $fn) {
        rl_same('SCRIPT FLUSH, FUNCTION FLUSH', ['OK', 'OK'], [$raw->cmd('SCRIPT', 'FLUSH'), $raw->cmd('FUNCTION', 'FLUSH')]);
        try {
            $r = $fn();
        } catch (Throwable $e) {
            $r = get_class($e) . ': ' . $e->getMessage();
        }
        rl_same("$mode: after the flushes: $label", true, $r);
    }
    rl_same("$mode: no lock left behind", 0, $raw->cmd('EXISTS', $rk));
    unset($l, $other);
}
echo "done\n";
?>
--EXPECT--
ok: acquire
ok: release
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: acquire
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: isAcquired
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: getRemainingLifetime is float
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: refresh
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: contender acquire is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: contender acquire(wait: 0.1) is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: release
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: release again is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: synchronized
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: contender acquire
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions: after the flushes: contender release
ok: functions: no lock left behind
ok: acquire
ok: release
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: acquire
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: isAcquired
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: getRemainingLifetime is float
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: refresh
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: contender acquire is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: contender acquire(wait: 0.1) is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: release
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: release again is false
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: synchronized
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: contender acquire
ok: SCRIPT FLUSH, FUNCTION FLUSH
ok: functions=0: after the flushes: contender release
ok: functions=0: no lock left behind
done
