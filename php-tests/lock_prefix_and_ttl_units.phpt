--TEST--
DistributedLock: a lock_prefix with braces is refused (it would break the one-slot rule on Redis Cluster), at startup with a warning and on use with a ValueError; ttls are whole milliseconds, rounded up, so a positive ttl below 1 ms is 1 ms (as Symfony's RedisStore does)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

foreach (['{}', 'app{x}:', 'a}'] as $prefix) {
    ini_set('redis_lease.lock_prefix', $prefix);
    $e = rl_throws("lock_prefix '$prefix': new DistributedLock() is a ValueError", ValueError::class,
        fn() => new DistributedLock('k', 1.0, $dsn));
    rl_ok('... naming the setting', $e !== null && str_contains($e->getMessage(), 'redis_lease.lock_prefix'),
        $e?->getMessage() ?? '');
}
ini_set('redis_lease.lock_prefix', 'app:');
$l = new DistributedLock('ok', 1.0, $dsn);
rl_same('a plain prefix works', [true, 1, true], [$l->acquire(), $raw->cmd('EXISTS', 'app:{ok}'), $l->release()]);

$child = rl_spawn_php('echo "started\n";', ['redis_lease.lock_prefix' => 'x{']);
$out = $child->readAll(10.0);
rl_ok('startup with a braced lock_prefix warns', str_contains($out, 'redis_lease.lock_prefix') && str_contains($out, 'started'), $out);

ini_set('redis_lease.lock_prefix', 'lock:');
$k = rl_key('units');
$l = new DistributedLock($k, 1.0005, $dsn);
$l->acquire();
$pttl = $raw->cmd('PTTL', rl_lock_key($k));
rl_ok('ttl 1.0005 s is 1001 ms in Redis', $pttl > 990 && $pttl <= 1001, (string) $pttl);
rl_same('refresh(0.0000001) is accepted (1 ms)', true, $l->refresh(0.0000001));
rl_ok('... and the lease then ends at once', rl_wait_until(fn() => $raw->cmd('EXISTS', rl_lock_key($k)) === 0, 1.0));
rl_same('... so release() reports it lost', false, $l->release());
$tiny = new DistributedLock($k, 0.0000001, $dsn);
rl_same('a ttl of 0.1 us is accepted', $k, $tiny->getKey());
echo "done\n";
?>
--EXPECT--
ok: lock_prefix '{}': new DistributedLock() is a ValueError
ok: ... naming the setting
ok: lock_prefix 'app{x}:': new DistributedLock() is a ValueError
ok: ... naming the setting
ok: lock_prefix 'a}': new DistributedLock() is a ValueError
ok: ... naming the setting
ok: a plain prefix works
ok: startup with a braced lock_prefix warns
ok: ttl 1.0005 s is 1001 ms in Redis
ok: refresh(0.0000001) is accepted (1 ms)
ok: ... and the lease then ends at once
ok: ... so release() reports it lost
ok: a ttl of 0.1 us is accepted
done
