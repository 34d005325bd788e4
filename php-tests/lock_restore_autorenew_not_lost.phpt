--TEST--
restore() with autoRenew asks Redis about the token at once and watches what Redis says; the placeholder it holds until then is not watched. Before (review, stop 57), a watch of that zero-length placeholder ended at once and was counted as a lost lock (lock_lost, which operators alert on), most times out of 20 restores; a lock whose lease really runs out under a renewing watch is still counted
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$before = RedisLease\metrics();
$held = 0;
for ($i = 0; $i < 20; $i++) {
    $key = rl_key("restore-renew-$i");
    $a = new DistributedLock($key, 30.0, $srv['dsn']);
    $a->acquire();
    $token = $a->detach();
    $b = DistributedLock::restore($key, $token, 30.0, $srv['dsn'], true);
    $held += $b->isAcquired() ? 1 : 0;
    $b->release();
}
rl_same('20 restored holds, each held', 20, $held);
rl_same('no lost lock counted', 0, RedisLease\metrics()['lock_lost'] - $before['lock_lost']);

// A restored hold the watchdog finds gone is still counted.
$key = rl_key('restore-renew-gone');
$a = new DistributedLock($key, 3.0, $srv['dsn']);
$a->acquire();
$token = $a->detach();
$b = DistributedLock::restore($key, $token, 3.0, $srv['dsn'], true);
$raw->cmd('DEL', rl_lock_key($key));
$lost = static fn(): int => RedisLease\metrics()['lock_lost'] - $before['lock_lost'];
rl_ok('its renewal finds it gone, counted as a lost lock', rl_wait_until(static fn() => $lost() >= 1, 10.0));
rl_same('... once, and the object says so', [1, false], [$lost(), $b->isAcquired()]);
echo "done\n";
?>
--EXPECT--
ok: 20 restored holds, each held
ok: no lost lock counted
ok: its renewal finds it gone, counted as a lost lock
ok: ... once, and the object says so
done
