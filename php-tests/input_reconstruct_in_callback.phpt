--TEST--
Bad input: __construct() called again on a lock or semaphore from inside its own synchronized() callback: the callback's hold is released with the old object, and synchronized() says the lock was lost, naming the key it held (before the fix, the message was built from the freed key: a read of freed memory, whose first bytes glibc's free list had overwritten; valgrind showed the invalid read)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

// Freed, a buffer's first 16 bytes hold glibc's free-list pointers.
$key = rl_key('reconstruct-' . str_repeat('A', 400));
$lock = new DistributedLock($key, 30.0, $dsn);
$sem = new DistributedSemaphore($key, 2, 30.0, $dsn);
$cases = [
    'lock' => [$lock, fn() => $lock->__construct(rl_key('other-' . str_repeat('B', 400)), 30.0, $dsn), rl_lock_key($key)],
    'semaphore' => [$sem, fn() => $sem->__construct(rl_key('other-' . str_repeat('B', 400)), 2, 30.0, $dsn), rl_lock_key($key) . ':semaphore:holders'],
];
foreach ($cases as $what => [$object, $reconstruct, $redisKey]) {
    $seen = null;
    $e = rl_throws("$what: synchronized() whose callback reconstructs the object throws LockLostException",
        RedisLease\LockLostException::class, function () use ($object, $reconstruct, $raw, $redisKey, &$seen) {
            return $object->synchronized(function () use ($reconstruct, $raw, $redisKey, &$seen) {
                $seen = $raw->cmd('EXISTS', $redisKey);
                $reconstruct();
                return 'done';
            });
        });
    rl_same("$what: the callback ran under the hold", 1, $seen);
    $message = $e?->getMessage() ?? '';
    rl_ok("$what: the message names the key it held", str_contains($message, "'reconstruct-" . str_repeat('A', 80)), $message);
    rl_same("$what: the hold went with the old object", 0, $raw->cmd('EXISTS', $redisKey));
    rl_same("$what: the object is the new one, usable", [true, true], [$object->acquire(), $object->release()]);
}
echo "done\n";
?>
--EXPECT--
ok: lock: synchronized() whose callback reconstructs the object throws LockLostException
ok: lock: the callback ran under the hold
ok: lock: the message names the key it held
ok: lock: the hold went with the old object
ok: lock: the object is the new one, usable
ok: semaphore: synchronized() whose callback reconstructs the object throws LockLostException
ok: semaphore: the callback ran under the hold
ok: semaphore: the message names the key it held
ok: semaphore: the hold went with the old object
ok: semaphore: the object is the new one, usable
done
