--TEST--
DistributedLock: keeps working after SCRIPT FLUSH between calls (NOSCRIPT fallback)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
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
    rl_same('SCRIPT FLUSH', 'OK', $raw->cmd('SCRIPT', 'FLUSH'));
    try {
        $r = $fn();
    } catch (Throwable $e) {
        $r = get_class($e) . ': ' . $e->getMessage();
    }
    rl_same("after SCRIPT FLUSH: $label", true, $r);
}
rl_same('no lock left behind', 0, $raw->cmd('EXISTS', $rk));

unset($l, $other);
echo "done\n";
?>
--EXPECT--
ok: acquire
ok: release
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: acquire
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: isAcquired
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: getRemainingLifetime is float
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: refresh
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: contender acquire is false
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: contender acquire(wait: 0.1) is false
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: release
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: release again is false
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: synchronized
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: contender acquire
ok: SCRIPT FLUSH
ok: after SCRIPT FLUSH: contender release
ok: no lock left behind
done
