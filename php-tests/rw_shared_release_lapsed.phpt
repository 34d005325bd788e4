--TEST--
Shared holds (a read hold, a semaphore permit) whose lease ran out: release() returns false and synchronizedRead()/synchronized() throw LockLostException, as for a write hold, also while another holder's longer lease keeps the holders set alive
--XFAIL--
Known bug (issue 20 proofs): release.lua's let_go() counts a shared hold as released when ZREM removes its token, without looking at its score (the end of its lease); an expired entry lingers until a script that contends drops it (live_holders). isAcquired() and refresh() look at the score and say the hold is gone; release() says it was ours.
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
// Expected to fail (XFAIL) until the bug is fixed: its failed checks are not
// "checks that failed in some attempt" (scripts/run-phpt.sh), and it pauses with
// time_nanosleep(): run-tests.php runs a failed test twice when it uses the usual sleep functions.
putenv('RL_FAILURE_LOG=');
function nap(float $s): void
{
    time_nanosleep((int) $s, (int) (fmod($s, 1.0) * 1e9));
}
$srv = rl_start_redis();
$dsn = $srv['dsn'];
const LEASE = 0.2;
$nap = static fn() => nap(LEASE + 0.15);

// Reference: a write hold.
$l = new DistributedLock(rl_key('w'), LEASE, $dsn);
$l->acquire();
$nap();
rl_same('a write hold: release() after its lease ran out is false', false, $l->release());

foreach ([
    'read' => [static fn(string $k, float $ttl) => new DistributedLock($k, $ttl, $dsn), static fn($o) => $o->acquireRead(),
        static fn($o, callable $f) => $o->synchronizedRead($f)],
    'permit' => [static fn(string $k, float $ttl) => new DistributedSemaphore($k, 3, $ttl, $dsn), static fn($o) => $o->acquire(),
        static fn($o, callable $f) => $o->synchronized($f)],
] as $shape => [$make, $take, $sync]) {
    $k = rl_key($shape);
    $short = $make($k, LEASE);
    $long = $make($k, 30.0);  // another holder, whose longer lease keeps the set alive
    rl_same("$shape: both hold", [true, true], [$take($short), $take($long)]);
    $nap();
    rl_same("$shape: isAcquired() after the lease ran out is false", false, $short->isAcquired());
    $short = $make($k, LEASE);
    $take($short);
    $nap();
    rl_same("$shape: release() after the lease ran out is false", false, $short->release());
    $r = null;
    try {
        $r = $sync($make($k, LEASE), static function () use ($nap) {
            $nap();
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
ok: a write hold: release() after its lease ran out is false
ok: read: both hold
ok: read: isAcquired() after the lease ran out is false
ok: read: release() after the lease ran out is false
ok: read: a synchronized callback that outlived its lease throws LockLostException
ok: permit: both hold
ok: permit: isAcquired() after the lease ran out is false
ok: permit: release() after the lease ran out is false
ok: permit: a synchronized callback that outlived its lease throws LockLostException
done
