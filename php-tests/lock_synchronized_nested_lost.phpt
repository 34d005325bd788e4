--TEST--
DistributedLock::synchronized(): a lease lost inside the callback is reported by the outer call (LockLostException) even when the callback then nests synchronized() or calls acquire(), which take a new lease
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

/**
 * Runs $l->synchronized() whose callback outlives the 0.3 s lease, lets another
 * holder take and release the lock, then calls $inner($l) (the nested call).
 * Returns [outer outcome, inner outcome].
 */
function lose_then(DistributedLock $l, DistributedLock $other, RlRaw $raw, string $rk, callable $inner): array
{
    $innerOutcome = null;
    try {
        $l->synchronized(function () use ($l, $other, $raw, $rk, $inner, &$innerOutcome) {
            rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0);
            $other->acquire();
            $other->release();
            try {
                $innerOutcome = ['value' => $inner($l)];
            } catch (Throwable $e) {
                $innerOutcome = ['exception' => get_class($e)];
            }
            return 'outer result';
        });
        $outer = 'returned normally';
    } catch (Throwable $e) {
        $outer = get_class($e);
    }
    return [$outer, $innerOutcome];
}

foreach ([
    'nested synchronized()' => fn(DistributedLock $l) => $l->synchronized(fn() => 'inner result'),
    'nested acquire()' => fn(DistributedLock $l) => $l->acquire(),
] as $label => $inner) {
    $k = rl_key('nestlost');
    $rk = rl_lock_key($k);
    $l = new DistributedLock($k, 0.3, $dsn);
    $other = new DistributedLock($k, 5.0, $dsn);
    [$outer, $innerOutcome] = lose_then($l, $other, $raw, $rk, $inner);
    rl_same("$label: the outer synchronized() throws LockLostException", RedisLease\LockLostException::class, $outer);
    echo "$label: the nested call: ", json_encode($innerOutcome), "\n";
    rl_same("$label: nothing is left held: the key is free", 0, $raw->cmd('EXISTS', $rk));
    rl_same("$label: the object holds nothing", [false, null], [$l->isAcquired(), $l->getFencingToken()]);
    rl_same("$label: the lock works again", 'again', $l->synchronized(fn() => 'again'));
}

// A nested call while the outer lease holds is unaffected: it runs, and the outer
// one releases once, normally.
$k = rl_key('nestok');
$l = new DistributedLock($k, 5.0, $dsn);
rl_same('nested synchronized() under a live lease', ['outer', 'inner'],
    $l->synchronized(fn() => ['outer', $l->synchronized(fn() => 'inner')]));
rl_same('... and the key is free afterwards', 0, $raw->cmd('EXISTS', rl_lock_key($k)));
echo "done\n";
?>
--EXPECT--
ok: nested synchronized(): the outer synchronized() throws LockLostException
nested synchronized(): the nested call: {"exception":"RedisLease\\LockLostException"}
ok: nested synchronized(): nothing is left held: the key is free
ok: nested synchronized(): the object holds nothing
ok: nested synchronized(): the lock works again
ok: nested acquire(): the outer synchronized() throws LockLostException
nested acquire(): the nested call: {"value":true}
ok: nested acquire(): nothing is left held: the key is free
ok: nested acquire(): the object holds nothing
ok: nested acquire(): the lock works again
ok: nested synchronized() under a live lease
ok: ... and the key is free afterwards
done
