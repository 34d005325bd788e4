--TEST--
Shared holds (a read hold, a semaphore permit) whose lease ran out: release() returns false and synchronizedRead()/synchronized() throw LockLostException, as for a write hold, also while another holder's longer lease keeps the holders set alive
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const LEASE = 0.2;
// Waits, asking Redis (never the object, which would learn of it), until the
// hold of $token under $base has lapsed: the key gone, or its holders entry
// scored in the past of Redis's clock.
$lapsed = static function (string $base, ?string $token, bool $shared) use ($raw): bool {
    return rl_wait_until(static function () use ($raw, $base, $token, $shared) {
        if (!$shared) {
            return $raw->cmd('EXISTS', $base) === 0;
        }
        $score = $raw->cmd('ZSCORE', "$base:holders", (string) $token);
        [$s, $us] = $raw->cmd('TIME');
        return $score === null || (float) $score <= $s * 1000 + intdiv((int) $us, 1000);
    }, 5.0, 0.01);
};

// Reference: a write hold.
$k = rl_key('w');
$l = new DistributedLock($k, LEASE, $dsn);
$l->acquire();
rl_ok('the write lease runs out', $lapsed(rl_lock_key($k), null, false));
rl_same('a write hold: release() after its lease ran out is false', false, $l->release());

foreach ([
    'read' => [static fn(string $k, float $ttl) => new DistributedLock($k, $ttl, $dsn), static fn($o) => $o->acquireRead(),
        static fn($o, callable $f) => $o->synchronizedRead($f), static fn(string $k) => rl_lock_key($k)],
    'permit' => [static fn(string $k, float $ttl) => new DistributedSemaphore($k, 3, $ttl, $dsn), static fn($o) => $o->acquire(),
        static fn($o, callable $f) => $o->synchronized($f), static fn(string $k) => rl_lock_key($k) . ':semaphore'],
] as $shape => [$make, $take, $sync, $base]) {
    $k = rl_key($shape);
    $short = $make($k, LEASE);
    $long = $make($k, 30.0);  // another holder, whose longer lease keeps the set alive
    rl_same("$shape: both hold", [true, true], [$take($short), $take($long)]);
    rl_ok("$shape: the short lease runs out", $lapsed($base($k), $short->getToken(), true));
    rl_same("$shape: isAcquired() after the lease ran out is false", false, $short->isAcquired());
    $short = $make($k, LEASE);
    $take($short);
    rl_ok("$shape: the short lease runs out again", $lapsed($base($k), $short->getToken(), true));
    rl_same("$shape: the holders set is still there (the longer lease)", 1, $raw->cmd('EXISTS', $base($k) . ':holders'));
    rl_same("$shape: release() after the lease ran out is false", false, $short->release());
    $r = null;
    $inside = $make($k, LEASE);
    try {
        $r = $sync($inside, static function () use ($lapsed, $base, $k, $inside) {
            rl_ok('the lease runs out inside the callback', $lapsed($base($k), $inside->getToken(), true));
            return 'result';
        });
        rl_ok("$shape: a synchronized callback that outlived its lease throws LockLostException", false, 'returned ' . rl_fmt($r));
    } catch (RedisLease\LockLostException $e) {
        rl_ok("$shape: a synchronized callback that outlived its lease throws LockLostException", true);
    }
    $long->release();
}
echo "done\n";
?>
--EXPECT--
ok: the write lease runs out
ok: a write hold: release() after its lease ran out is false
ok: read: both hold
ok: read: the short lease runs out
ok: read: isAcquired() after the lease ran out is false
ok: read: the short lease runs out again
ok: read: the holders set is still there (the longer lease)
ok: read: release() after the lease ran out is false
ok: the lease runs out inside the callback
ok: read: a synchronized callback that outlived its lease throws LockLostException
ok: permit: both hold
ok: permit: the short lease runs out
ok: permit: isAcquired() after the lease ran out is false
ok: permit: the short lease runs out again
ok: permit: the holders set is still there (the longer lease)
ok: permit: release() after the lease ran out is false
ok: the lease runs out inside the callback
ok: permit: a synchronized callback that outlived its lease throws LockLostException
done
