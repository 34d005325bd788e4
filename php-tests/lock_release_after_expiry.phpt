--TEST--
DistributedLock: after the lease expires and another holder takes over, the old holder cannot release, refresh or see it
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('expiry');
$rk = rl_lock_key($k);

$a = new DistributedLock($k, 0.3, $dsn);
$b = new DistributedLock($k, 30.0, $dsn);
rl_same('A acquires (ttl 0.3)', true, $a->acquire());
$tokA = $a->getFencingToken();
rl_same('B cannot acquire while A holds', false, $b->acquire());

// Await A's expiry, as Redis sees it.
$expired = rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0);
rl_ok('lock key expired on its own within 5 s', $expired);

rl_same('B acquires after expiry', true, $b->acquire());
$tokB = $b->getFencingToken();
$valB = $raw->cmd('GET', $rk);
rl_ok('B token > A token', is_int($tokB) && $tokB > $tokA, rl_fmt($tokA) . ' then ' . rl_fmt($tokB));

// Old holder A: every operation must see that the lock is no longer its own
// and must leave B's key alone.
rl_same('A release() after losing the lock', false, $a->release());
rl_same("B's value unchanged after A release()", $valB, $raw->cmd('GET', $rk));
rl_same('A refresh() after losing the lock', false, $a->refresh());
rl_same('A refresh(ttl: 60) after losing the lock', false, $a->refresh(60.0));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok("B's TTL not touched by A refresh() (PTTL within (29000, 30000])", $pttl > 29000 && $pttl <= 30000, rl_fmt($pttl));
rl_same('A isAcquired()', false, $a->isAcquired());
rl_same('A getFencingToken()', null, $a->getFencingToken());
rl_same('A getRemainingLifetime()', null, $a->getRemainingLifetime());
rl_same('A acquire() while B holds', false, $a->acquire());
rl_same("B's value unchanged after all of A's calls", $valB, $raw->cmd('GET', $rk));
rl_same('B isAcquired()', true, $b->isAcquired());
rl_same('B getFencingToken() unchanged', $tokB, $b->getFencingToken());
rl_same('B release()', true, $b->release());
rl_same('key gone after B release()', 0, $raw->cmd('EXISTS', $rk));

// Expiry with nobody taking over: release/refresh are false and must not
// recreate the key.
$c = new DistributedLock($k, 0.3, $dsn);
rl_same('C acquires (ttl 0.3)', true, $c->acquire());
rl_ok('C lock key expired within 5 s', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
rl_same('C isAcquired() after expiry', false, $c->isAcquired());
rl_same('C refresh() after expiry', false, $c->refresh());
rl_same('C refresh() did not recreate the key', 0, $raw->cmd('EXISTS', $rk));
rl_same('C release() after expiry', false, $c->release());
rl_same('C getFencingToken() after expiry', null, $c->getFencingToken());
rl_same('C can acquire again', true, $c->acquire());
rl_same('C releases', true, $c->release());

unset($a, $b, $c);
echo "done\n";
?>
--EXPECT--
ok: A acquires (ttl 0.3)
ok: B cannot acquire while A holds
ok: lock key expired on its own within 5 s
ok: B acquires after expiry
ok: B token > A token
ok: A release() after losing the lock
ok: B's value unchanged after A release()
ok: A refresh() after losing the lock
ok: A refresh(ttl: 60) after losing the lock
ok: B's TTL not touched by A refresh() (PTTL within (29000, 30000])
ok: A isAcquired()
ok: A getFencingToken()
ok: A getRemainingLifetime()
ok: A acquire() while B holds
ok: B's value unchanged after all of A's calls
ok: B isAcquired()
ok: B getFencingToken() unchanged
ok: B release()
ok: key gone after B release()
ok: C acquires (ttl 0.3)
ok: C lock key expired within 5 s
ok: C isAcquired() after expiry
ok: C refresh() after expiry
ok: C refresh() did not recreate the key
ok: C release() after expiry
ok: C getFencingToken() after expiry
ok: C can acquire again
ok: C releases
done
