--TEST--
DistributedLock::synchronized(): throws RedisLease\LockLostException when the lease expired (or was taken) before release
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('synclost');
$rk = rl_lock_key($k);

// 1. The callback outlives the lease; nobody takes over.
$l = new DistributedLock($k, 0.3, $dsn);
$called = false;
$expiredInside = null;
$e = rl_throws('callback outlives ttl: LockLostException', RedisLease\LockLostException::class,
    function () use ($l, $raw, $rk, &$called, &$expiredInside) {
        return $l->synchronized(function () use ($raw, $rk, &$called, &$expiredInside) {
            $called = true;
            // Await the lease expiry as Redis sees it.
            $expiredInside = rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0);
            return 'finished';
        });
    });
rl_same('callback ran', true, $called);
rl_same('lease expired while the callback ran', true, $expiredInside);
rl_ok('LockLostException is a LeaseException', $e instanceof RedisLease\LeaseException, rl_fmt($e));
rl_same('no key left behind', 0, $raw->cmd('EXISTS', $rk));
rl_same('isAcquired() afterwards', false, $l->isAcquired());
rl_same('getFencingToken() afterwards', null, $l->getFencingToken());

// 2. The lease expires and another holder takes the lock during the callback:
//    LockLostException, and the new holder's lock must be left intact.
$other = new DistributedLock($k, 30.0, $dsn);
$otherGot = null;
$otherVal = null;
rl_throws('lock taken over during callback: LockLostException', RedisLease\LockLostException::class,
    function () use ($l, $other, $raw, $rk, &$otherGot, &$otherVal) {
        return $l->synchronized(function () use ($other, $raw, $rk, &$otherGot, &$otherVal) {
            rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0);
            $otherGot = $other->acquire();
            $otherVal = $raw->cmd('GET', $rk);
        });
    });
rl_same('other holder acquired during the callback', true, $otherGot);
rl_same("other holder's lock value intact after the failed release", $otherVal, $raw->cmd('GET', $rk));
rl_same('other holder still holds', true, $other->isAcquired());
rl_same('other holder releases', true, $other->release());

// 3. With the lease intact at release time there is no LockLostException.
rl_same('synchronized() with a short callback on ttl 0.3 just returns', 'quick', $l->synchronized(fn() => 'quick'));

unset($l, $other);
echo "done\n";
?>
--EXPECT--
ok: callback outlives ttl: LockLostException
ok: callback ran
ok: lease expired while the callback ran
ok: LockLostException is a LeaseException
ok: no key left behind
ok: isAcquired() afterwards
ok: getFencingToken() afterwards
ok: lock taken over during callback: LockLostException
ok: other holder acquired during the callback
ok: other holder's lock value intact after the failed release
ok: other holder still holds
ok: other holder releases
ok: synchronized() with a short callback on ttl 0.3 just returns
done
