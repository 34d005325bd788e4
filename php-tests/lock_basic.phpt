--TEST--
DistributedLock: acquire / isAcquired / fencing token / remaining lifetime / release, and a second contender
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('basic');
$rk = rl_lock_key($k);

$a = new DistributedLock($k, 5.0, $dsn);
rl_same('getKey returns the key as given', $k, $a->getKey());
rl_same('before acquire: isAcquired', false, $a->isAcquired());
rl_same('before acquire: getFencingToken', null, $a->getFencingToken());
rl_same('before acquire: getRemainingLifetime', null, $a->getRemainingLifetime());
rl_same('before acquire: release', false, $a->release());
rl_same('before acquire: refresh', false, $a->refresh());
rl_same('before acquire: no lock key in Redis', 0, $raw->cmd('EXISTS', $rk));

rl_same('acquire', true, $a->acquire());
rl_same('isAcquired', true, $a->isAcquired());
$tok = $a->getFencingToken();
rl_ok('getFencingToken is a positive int', is_int($tok) && $tok > 0, rl_fmt($tok));

// The lock value is "<32 hex token>:<fence>" under key "lock:{K}".
$val = $raw->cmd('GET', $rk);
$m = [];
rl_ok('lock value looks like <32 hex>:<fence>',
    is_string($val) && preg_match('/^[0-9a-f]{32}:(\d+)$/', $val, $m) === 1, rl_fmt($val));
rl_same('fence in lock value equals getFencingToken()', (string) $tok, $m[1] ?? null);

$pttl = $raw->cmd('PTTL', $rk);
rl_ok('PTTL of lock key is within (4000, 5000] ms', $pttl > 4000 && $pttl <= 5000, rl_fmt($pttl));
$rem = $a->getRemainingLifetime();
rl_ok('getRemainingLifetime is a float within (4, 5]', is_float($rem) && $rem > 4.0 && $rem <= 5.0, rl_fmt($rem));
rl_ok('getRemainingLifetime agrees with PTTL (within 0.2 s)',
    is_float($rem) && abs($rem - $pttl / 1000) < 0.2, 'remaining ' . rl_fmt($rem) . ', PTTL ' . rl_fmt($pttl));

// A second object (a different token) contends for the same key.
$b = new DistributedLock($k, 5.0, $dsn);
$t = microtime(true);
rl_same('second object: acquire() while held', false, $b->acquire());
$el = microtime(true) - $t;
rl_ok('second object: acquire() with no wait returns promptly (< 0.5 s)', $el < 0.5, sprintf('took %.3f s', $el));
rl_same('second object: isAcquired', false, $b->isAcquired());
rl_same('second object: getFencingToken', null, $b->getFencingToken());
rl_same('second object: getRemainingLifetime', null, $b->getRemainingLifetime());
rl_same('second object: release (never held)', false, $b->release());
rl_same('second object: refresh (never held)', false, $b->refresh());
rl_same('holder value unchanged by the contender', $val, $raw->cmd('GET', $rk));
rl_ok('holder TTL not changed by the contender', $raw->cmd('PTTL', $rk) <= $pttl, rl_fmt($raw->cmd('PTTL', $rk)));
rl_same('holder still isAcquired', true, $a->isAcquired());

// Acquiring again while holding: true, and no new lease.
$t = microtime(true);
rl_same('acquire(wait: 2) while already holding', true, $a->acquire(2.0));
rl_ok('... returns at once', microtime(true) - $t < 0.5, sprintf('%.3f s', microtime(true) - $t));
rl_same('... lock value unchanged (no new lease)', $val, $raw->cmd('GET', $rk));
rl_same('... fencing token unchanged', $tok, $a->getFencingToken());

rl_same('release', true, $a->release());
rl_same('lock key gone after release', 0, $raw->cmd('EXISTS', $rk));
rl_same('release again', false, $a->release());
rl_same('after release: isAcquired', false, $a->isAcquired());
rl_same('after release: getFencingToken', null, $a->getFencingToken());
rl_same('after release: getRemainingLifetime', null, $a->getRemainingLifetime());
rl_same('after release: refresh', false, $a->refresh());
rl_same('after release: refresh did not recreate the key', 0, $raw->cmd('EXISTS', $rk));

rl_same('second object acquires once free', true, $b->acquire());
$tok2 = $b->getFencingToken();
rl_ok('new holder gets a larger fencing token', is_int($tok2) && $tok2 > $tok, rl_fmt($tok) . ' then ' . rl_fmt($tok2));
rl_same('first object cannot acquire now', false, $a->acquire());
rl_same('second object releases', true, $b->release());

rl_same('first object re-acquires after release', true, $a->acquire());
rl_ok('fencing token grows again', $a->getFencingToken() > $tok2, rl_fmt($a->getFencingToken()));
rl_same('first object releases', true, $a->release());

// Default ttl is 30 s; an int ttl is accepted (int -> float).
$c = new DistributedLock($k, dsn: $dsn);
rl_same('default-ttl lock acquires', true, $c->acquire());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('default ttl: PTTL within (29000, 30000] ms', $pttl > 29000 && $pttl <= 30000, rl_fmt($pttl));
rl_same('default-ttl lock releases', true, $c->release());
$d = new DistributedLock($k, 2, $dsn);
rl_same('int ttl lock acquires', true, $d->acquire());
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('int ttl 2: PTTL within (1500, 2000] ms', $pttl > 1500 && $pttl <= 2000, rl_fmt($pttl));
rl_same('int ttl lock releases', true, $d->release());

unset($a, $b, $c, $d);
echo "done\n";
?>
--EXPECT--
ok: getKey returns the key as given
ok: before acquire: isAcquired
ok: before acquire: getFencingToken
ok: before acquire: getRemainingLifetime
ok: before acquire: release
ok: before acquire: refresh
ok: before acquire: no lock key in Redis
ok: acquire
ok: isAcquired
ok: getFencingToken is a positive int
ok: lock value looks like <32 hex>:<fence>
ok: fence in lock value equals getFencingToken()
ok: PTTL of lock key is within (4000, 5000] ms
ok: getRemainingLifetime is a float within (4, 5]
ok: getRemainingLifetime agrees with PTTL (within 0.2 s)
ok: second object: acquire() while held
ok: second object: acquire() with no wait returns promptly (< 0.5 s)
ok: second object: isAcquired
ok: second object: getFencingToken
ok: second object: getRemainingLifetime
ok: second object: release (never held)
ok: second object: refresh (never held)
ok: holder value unchanged by the contender
ok: holder TTL not changed by the contender
ok: holder still isAcquired
ok: acquire(wait: 2) while already holding
ok: ... returns at once
ok: ... lock value unchanged (no new lease)
ok: ... fencing token unchanged
ok: release
ok: lock key gone after release
ok: release again
ok: after release: isAcquired
ok: after release: getFencingToken
ok: after release: getRemainingLifetime
ok: after release: refresh
ok: after release: refresh did not recreate the key
ok: second object acquires once free
ok: new holder gets a larger fencing token
ok: first object cannot acquire now
ok: second object releases
ok: first object re-acquires after release
ok: fencing token grows again
ok: first object releases
ok: default-ttl lock acquires
ok: default ttl: PTTL within (29000, 30000] ms
ok: default-ttl lock releases
ok: int ttl lock acquires
ok: int ttl 2: PTTL within (1500, 2000] ms
ok: int ttl lock releases
done
