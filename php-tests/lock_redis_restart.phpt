--TEST--
DistributedLock: while Redis is down every call that needs it throws ConnectionException (never false); after a restart the same objects work again
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$port = $srv['port'];
$dsn = $srv['dsn'];
$k = rl_key('restart');

$l = new DistributedLock($k, 30.0, $dsn);
rl_same('acquire while up', true, $l->acquire());
rl_same('release while up', true, $l->release());

rl_stop_redis($srv);
rl_ok('redis is down', !rl_ping($port));
foreach ([
    'acquire()' => fn() => $l->acquire(),
    'acquire(wait: 0.5)' => fn() => $l->acquire(0.5),
    'synchronized()' => fn() => $l->synchronized(fn() => 'ran', 0.5),
] as $label => $fn) {
    $t = microtime(true);
    rl_throws("down: $label", RedisLease\ConnectionException::class, $fn);
    rl_ok("down: $label failed fast", microtime(true) - $t < 1.5, sprintf('%.3f s', microtime(true) - $t));
}

// Same port again; the objects must reconnect by themselves.
$srv2 = rl_start_redis([], null, $port);
$raw = new RlRaw($port);
try {
    $r = $l->acquire();
} catch (Throwable $e) {
    $r = get_class($e) . ': ' . $e->getMessage();
}
rl_same('after restart: acquire', true, $r);
rl_same('after restart: isAcquired', true, $l->isAcquired());
rl_same('after restart: lock key present', 1, $raw->cmd('EXISTS', rl_lock_key($k)));
rl_same('after restart: release', true, $l->release());

// Restart while a connection sits idle (no failing call in between): the
// first call may hit the dead connection; it must either succeed (retry) or
// throw ConnectionException - and the next call must work.
$k2 = rl_key('restart2');
$m = new DistributedLock($k2, 30.0, $dsn);
rl_same('second object acquires', true, $m->acquire());
rl_same('second object releases', true, $m->release());
rl_stop_redis($srv2);
$srv3 = rl_start_redis([], null, $port);
try {
    $first = $m->acquire();
} catch (RedisLease\ConnectionException $e) {
    $first = 'ConnectionException';
} catch (Throwable $e) {
    $first = get_class($e) . ': ' . $e->getMessage();
}
rl_ok('idle connection after restart: first call succeeds or throws ConnectionException',
    $first === true || $first === 'ConnectionException', rl_fmt($first));
if ($first !== true) {
    try {
        $second = $m->acquire();
    } catch (Throwable $e) {
        $second = get_class($e) . ': ' . $e->getMessage();
    }
} else {
    $second = true;
}
rl_same('idle connection after restart: holds the lock (at the latest on the second call)', true, $second);
rl_same('release', true, $m->release());

unset($l, $m);
echo "done\n";
?>
--EXPECT--
ok: acquire while up
ok: release while up
ok: redis is down
ok: down: acquire()
ok: down: acquire() failed fast
ok: down: acquire(wait: 0.5)
ok: down: acquire(wait: 0.5) failed fast
ok: down: synchronized()
ok: down: synchronized() failed fast
ok: after restart: acquire
ok: after restart: isAcquired
ok: after restart: lock key present
ok: after restart: release
ok: second object acquires
ok: second object releases
ok: idle connection after restart: first call succeeds or throws ConnectionException
ok: idle connection after restart: holds the lock (at the latest on the second call)
ok: release
done
