--TEST--
DistributedLock::refresh(): extends our lease (default ttl or given ttl), keeps the token, refuses when not ours
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('refresh');
$rk = rl_lock_key($k);

$l = new DistributedLock($k, 2.0, $dsn);
rl_same('acquire (ttl 2)', true, $l->acquire());
$tok = $l->getFencingToken();
$val = $raw->cmd('GET', $rk);

// Let some of the lease run out, then extend it.
rl_ok('PTTL drops below 1700 ms', rl_wait_until(fn() => $raw->cmd('PTTL', $rk) < 1700, 5.0));
rl_same('refresh()', true, $l->refresh());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh() restored PTTL to (1800, 2000]', $pttl > 1800 && $pttl <= 2000, rl_fmt($pttl));

rl_same('refresh(10.0)', true, $l->refresh(10.0));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh(10.0): PTTL within (9500, 10000]', $pttl > 9500 && $pttl <= 10000, rl_fmt($pttl));
$rem = $l->getRemainingLifetime();
rl_ok('getRemainingLifetime() after refresh(10.0) within (9.5, 10]', is_float($rem) && $rem > 9.5 && $rem <= 10.0, rl_fmt($rem));

rl_same('refresh(0.5) can also shorten the lease', true, $l->refresh(0.5));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh(0.5): PTTL within (0, 500]', $pttl > 0 && $pttl <= 500, rl_fmt($pttl));
rl_same('refresh(null) goes back to the lock ttl', true, $l->refresh(null));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh(null): PTTL within (1800, 2000]', $pttl > 1800 && $pttl <= 2000, rl_fmt($pttl));

rl_same('refresh keeps the lock value', $val, $raw->cmd('GET', $rk));
rl_same('refresh keeps the fencing token', $tok, $l->getFencingToken());

// A contender's refresh must not touch the holder's lease.
$other = new DistributedLock($k, 60.0, $dsn);
rl_same('contender refresh()', false, $other->refresh());
rl_same('contender refresh(60.0)', false, $other->refresh(60.0));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('holder PTTL still <= 2000 after contender refresh', $pttl > 0 && $pttl <= 2000, rl_fmt($pttl));
rl_same('holder value unchanged', $val, $raw->cmd('GET', $rk));

// Refresh after expiry fails and does not resurrect the key.
rl_same('refresh(0.2)', true, $l->refresh(0.2));
rl_ok('lease expired within 5 s', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
rl_same('refresh() after expiry', false, $l->refresh());
rl_same('key not recreated by refresh()', 0, $raw->cmd('EXISTS', $rk));
rl_same('isAcquired() after expiry', false, $l->isAcquired());
rl_same('release() after expiry', false, $l->release());

unset($l, $other);
echo "done\n";
?>
--EXPECT--
ok: acquire (ttl 2)
ok: PTTL drops below 1700 ms
ok: refresh()
ok: refresh() restored PTTL to (1800, 2000]
ok: refresh(10.0)
ok: refresh(10.0): PTTL within (9500, 10000]
ok: getRemainingLifetime() after refresh(10.0) within (9.5, 10]
ok: refresh(0.5) can also shorten the lease
ok: refresh(0.5): PTTL within (0, 500]
ok: refresh(null) goes back to the lock ttl
ok: refresh(null): PTTL within (1800, 2000]
ok: refresh keeps the lock value
ok: refresh keeps the fencing token
ok: contender refresh()
ok: contender refresh(60.0)
ok: holder PTTL still <= 2000 after contender refresh
ok: holder value unchanged
ok: refresh(0.2)
ok: lease expired within 5 s
ok: refresh() after expiry
ok: key not recreated by refresh()
ok: isAcquired() after expiry
ok: release() after expiry
done
