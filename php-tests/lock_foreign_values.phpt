--TEST--
DistributedLock: a lock key holding someone else's data (foreign string, other token, wrong type) is never overwritten or deleted
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// A plain string that is not one of our lock values, without a TTL.
$k = rl_key('foreign');
$rk = rl_lock_key($k);
$raw->cmd('SET', $rk, 'not-a-lock-value');
$l = new DistributedLock($k, 5.0, $dsn);
rl_same('acquire() on a foreign string value', false, $l->acquire());
rl_same('isAcquired()', false, $l->isAcquired());
rl_same('release()', false, $l->release());
rl_same('refresh()', false, $l->refresh());
rl_same('foreign value untouched', 'not-a-lock-value', $raw->cmd('GET', $rk));
rl_same('foreign value still has no TTL', -1, $raw->cmd('PTTL', $rk));
rl_ok('acquire(wait: 0.3) gives up (the foreign key never expires)', $l->acquire(0.3) === false);
rl_same('synchronized(wait: 0.2) throws LockTimeoutException',
    'RedisLease\LockTimeoutException', (function () use ($l) {
        try {
            $l->synchronized(fn() => 1, 0.2);
            return 'no exception';
        } catch (Throwable $e) {
            return get_class($e);
        }
    })());
unset($l);
rl_same('foreign value survives the object', 'not-a-lock-value', $raw->cmd('GET', $rk));

// A value that looks like someone else's lock (another token).
$k2 = rl_key('foreign2');
$rk2 = rl_lock_key($k2);
$theirs = str_repeat('ab', 16) . ':1';
$raw->cmd('SET', $rk2, $theirs, 'PX', 30000);
$l2 = new DistributedLock($k2, 5.0, $dsn);
rl_same("acquire() while another token holds it", false, $l2->acquire());
rl_same('release() does not delete their lock', false, $l2->release());
rl_same('their lock value untouched', $theirs, $raw->cmd('GET', $rk2));
unset($l2);

// The lock key holds a list: Redis answers WRONGTYPE to string commands.
$k3 = rl_key('wrongtype');
$rk3 = rl_lock_key($k3);
$raw->cmd('RPUSH', $rk3, 'x');
$l3 = new DistributedLock($k3, 5.0, $dsn);
try {
    $r = $l3->acquire();
} catch (Throwable $e) {
    $r = $e;
}
// Either Redis' WRONGTYPE surfaces as a ConnectionException (the documented
// behaviour), or the key is simply seen as held; it must never be replaced.
rl_ok('acquire() on a list key: ConnectionException or false',
    $r === false || $r instanceof RedisLease\ConnectionException, rl_fmt($r) . ($r instanceof Throwable ? ': ' . $r->getMessage() : ''));
rl_same('the list is untouched', ['x'], $raw->cmd('LRANGE', $rk3, 0, -1));
unset($l3);
rl_same('the list survives the object', ['x'], $raw->cmd('LRANGE', $rk3, 0, -1));

echo "done\n";
?>
--EXPECT--
ok: acquire() on a foreign string value
ok: isAcquired()
ok: release()
ok: refresh()
ok: foreign value untouched
ok: foreign value still has no TTL
ok: acquire(wait: 0.3) gives up (the foreign key never expires)
ok: synchronized(wait: 0.2) throws LockTimeoutException
ok: foreign value survives the object
ok: acquire() while another token holds it
ok: release() does not delete their lock
ok: their lock value untouched
ok: acquire() on a list key: ConnectionException or false
ok: the list is untouched
ok: the list survives the object
done
