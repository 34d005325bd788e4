--TEST--
DistributedLock: every method accepts named arguments (incl. out of order and skipping optionals)
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('named');
$rk = rl_lock_key($k);

$l = new DistributedLock(key: $k, ttl: 5.0, dsn: $dsn);
rl_same('constructor with all named args: getKey', $k, $l->getKey());
rl_same('acquire(wait: 0.0)', true, $l->acquire(wait: 0.0));
rl_same('refresh(ttl: 7.5)', true, $l->refresh(ttl: 7.5));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh(ttl: 7.5) set PTTL within (7000, 7500]', $pttl > 7000 && $pttl <= 7500, rl_fmt($pttl));
rl_same('refresh(ttl: null)', true, $l->refresh(ttl: null));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('refresh(ttl: null) uses the lock ttl (5 s): PTTL within (4500, 5000]', $pttl > 4500 && $pttl <= 5000, rl_fmt($pttl));

// Out-of-order named args, ttl left at its default.
$other = new DistributedLock(dsn: $dsn, key: $k);
$t = microtime(true);
rl_same('contender acquire(wait: 0.2) while held', false, $other->acquire(wait: 0.2));
$el = microtime(true) - $t;
rl_ok('acquire(wait: 0.2) waited >= 0.2 s and < 1 s', $el >= 0.2 && $el < 1.0, sprintf('%.3f s', $el));
rl_same('release()', true, $l->release());

rl_same('synchronized(callback:, wait:)', 'a', $l->synchronized(callback: fn() => 'a', wait: 1.0));
rl_same('synchronized(wait:, callback:) (reversed)', 'b', $l->synchronized(wait: 1.0, callback: fn() => 'b'));
rl_same('synchronized(callback:) with default wait', 'c', $l->synchronized(callback: fn() => 'c'));
rl_same('lock free after synchronized', 0, $raw->cmd('EXISTS', $rk));

// Default ttl (30 s) via named dsn only.
rl_same('contender (default ttl) acquire()', true, $other->acquire());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('default ttl 30 s: PTTL within (29000, 30000]', $pttl > 29000 && $pttl <= 30000, rl_fmt($pttl));
rl_same('contender release()', true, $other->release());

rl_throws('unknown named parameter in constructor', Error::class, fn() => new DistributedLock(key: $k, timeout: 1.0, dsn: $dsn));
rl_throws('unknown named parameter in acquire()', Error::class, fn() => $l->acquire(timeout: 1.0));
rl_throws('named + positional for the same parameter', Error::class, fn() => new DistributedLock($k, key: $k));
rl_throws('missing required key with only named args', ArgumentCountError::class, fn() => new DistributedLock(ttl: 1.0, dsn: $dsn));

unset($l, $other);
echo "done\n";
?>
--EXPECT--
ok: constructor with all named args: getKey
ok: acquire(wait: 0.0)
ok: refresh(ttl: 7.5)
ok: refresh(ttl: 7.5) set PTTL within (7000, 7500]
ok: refresh(ttl: null)
ok: refresh(ttl: null) uses the lock ttl (5 s): PTTL within (4500, 5000]
ok: contender acquire(wait: 0.2) while held
ok: acquire(wait: 0.2) waited >= 0.2 s and < 1 s
ok: release()
ok: synchronized(callback:, wait:)
ok: synchronized(wait:, callback:) (reversed)
ok: synchronized(callback:) with default wait
ok: lock free after synchronized
ok: contender (default ttl) acquire()
ok: default ttl 30 s: PTTL within (29000, 30000]
ok: contender release()
ok: unknown named parameter in constructor
ok: unknown named parameter in acquire()
ok: named + positional for the same parameter
ok: missing required key with only named args
done
