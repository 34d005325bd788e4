--TEST--
DistributedLock::synchronized(): throws RedisLease\LockTimeoutException when the lock is not free within $wait
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('synctimeout');
$rk = rl_lock_key($k);

$holder = new DistributedLock($k, 30.0, $dsn);
rl_same('holder acquires', true, $holder->acquire());
$val = $raw->cmd('GET', $rk);

$l = new DistributedLock($k, 30.0, $dsn);
$ran = false;
$t = microtime(true);
$e = rl_throws('synchronized(wait: 0.3) while held', RedisLease\LockTimeoutException::class, function () use ($l, &$ran) {
    return $l->synchronized(function () use (&$ran) { $ran = true; }, 0.3);
});
$el = microtime(true) - $t;
rl_ok('it is a LeaseException and a RuntimeException',
    $e instanceof RedisLease\LeaseException && $e instanceof RuntimeException, rl_fmt($e));
rl_ok('gave up after >= 0.3 s and < 1 s', $el >= 0.3 && $el < 1.0, sprintf('%.3f s', $el));
rl_same('callback did not run', false, $ran);
// The waiter that queued gave the holder's lock a fence (a lock whose fence is empty was taken with
// nobody queued since: its release skips the queue); its token and lease are the holder's still.
$fenced = (string) $raw->cmd('GET', $rk);
rl_ok("holder's lock kept, given a fence when the waiter queued", (bool) preg_match('/^' . preg_quote($val, '/') . '[0-9]+$/', $fenced), $fenced);
rl_same("holder's fencing token is that fence", (int) substr($fenced, strlen($val)), $holder->getFencingToken());

$t = microtime(true);
rl_throws('synchronized(wait: 0) while held', RedisLease\LockTimeoutException::class, fn() => $l->synchronized(function () use (&$ran) { $ran = true; }, 0.0));
rl_ok('wait 0 gave up at once (< 0.2 s)', microtime(true) - $t < 0.2, sprintf('%.3f s', microtime(true) - $t));
rl_same('callback still did not run', false, $ran);
rl_same('waiter does not hold', false, $l->isAcquired());
rl_same("holder's lock untouched since", $fenced, $raw->cmd('GET', $rk));

rl_same('holder releases', true, $holder->release());
rl_same('synchronized succeeds once free', 'ran', $l->synchronized(fn() => 'ran', 0.3));
rl_same('lock free afterwards', 0, $raw->cmd('EXISTS', $rk));

unset($holder, $l);
echo "done\n";
?>
--EXPECT--
ok: holder acquires
ok: synchronized(wait: 0.3) while held
ok: it is a LeaseException and a RuntimeException
ok: gave up after >= 0.3 s and < 1 s
ok: callback did not run
ok: holder's lock kept, given a fence when the waiter queued
ok: holder's fencing token is that fence
ok: synchronized(wait: 0) while held
ok: wait 0 gave up at once (< 0.2 s)
ok: callback still did not run
ok: waiter does not hold
ok: holder's lock untouched since
ok: holder releases
ok: synchronized succeeds once free
ok: lock free afterwards
done
