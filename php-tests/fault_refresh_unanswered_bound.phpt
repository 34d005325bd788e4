--TEST--
Fault: a refresh() that shortens the lease and goes unanswered may still run, so the lock counts on the shorter lease from then on: when it did run and the lease ran out, a release() whose reply is lost reports false (not "released, held throughout", which the longer lease would have let it claim)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$proxy = FaultProxy::start($srv['port']);
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=0.3');

$k = rl_key('shorter');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 30.0, $dsn);
rl_same('acquire() for 30 s', true, $l->acquire());

// The shortening refresh is held back and the caller's read times out.
$proxy->arm('stall', [$rk, rl_script_marker('refresh.lua')]);
$r = fault_outcome(fn() => $l->refresh(0.2));
rl_same('refresh(0.2) unanswered: ConnectionException', RedisLease\ConnectionException::class, $r['exception']);
rl_ok('... the proxy held it', $proxy->awaitEvent('stall', 5.0) !== null);
// It arrives late, and runs: the lease now ends 0.2 s after it.
$proxy->flush();
rl_ok('the late refresh shortened the lease', ($t = $raw->cmd('PTTL', $rk)) > 0 && $t <= 200, (string) $t);
$deadline = microtime(true) + 5.0;
while ($raw->cmd('EXISTS', $rk) === 1 && microtime(true) < $deadline) {
    usleep(10000);
}
rl_same('... and it ran out', 0, $raw->cmd('EXISTS', $rk));

// The release runs but its reply is lost; run again, it finds nothing of ours.
$proxy->arm('cut', [$rk, rl_script_marker('release.lua')]);
$r = fault_outcome(fn() => $l->release());
rl_ok('... the proxy cut the release', $proxy->awaitEvent('cut', 5.0) !== null);
rl_same('release() after the lease ran out reports false, no exception', [false, null], [$r['value'], $r['exception']]);
echo "done\n";
?>
--EXPECT--
ok: acquire() for 30 s
ok: refresh(0.2) unanswered: ConnectionException
ok: ... the proxy held it
ok: the late refresh shortened the lease
ok: ... and it ran out
ok: ... the proxy cut the release
ok: release() after the lease ran out reports false, no exception
done
