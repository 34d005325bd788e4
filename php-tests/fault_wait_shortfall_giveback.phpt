--TEST--
Fault: an acquire whose WAIT falls short (wait_replicas=1, no replica) gives the lock back; when that give-back fails too (Redis unreachable right then), the caller is told it has no lock and the token is not forgotten: the process's next call to that Redis frees it (before the fix, it stayed locked for its whole ttl)
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
$dsn = $proxy->dsn('connect_timeout=0.5&read_timeout=0.5&wait_replicas=1&wait_timeout=20');

$k = rl_key('shortfall');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 30.0, $dsn);
// The give-back (the release function on this key) never reaches Redis, and the
// proxy refuses every connection from then on.
$proxy->arm('hold', [$rk, rl_script_marker('release.lua')], 'down');
$r = fault_outcome(fn() => $l->acquire());
rl_same('acquire() with too few replicas throws ConnectionException', RedisLease\ConnectionException::class, $r['exception']);
rl_ok('... saying a failover could lose it', str_contains((string) $r['message'], 'acknowledged it'), (string) $r['message']);
rl_ok('... the give-back was sent and held by the proxy', $proxy->awaitEvent('hold', 5.0) !== null);
rl_same('... the object holds nothing', false, $l->isAcquired());
rl_ok('the token still holds the lock in Redis (the give-back never arrived)', $raw->cmd('PTTL', $rk) > 20000);

// Redis is reachable again (the held give-back is never delivered): the next
// claim on that endpoint, of another key, first settles what this process left.
$proxy->disarm();
$proxy->up();
$other = new DistributedLock(rl_key('shortfall-other'), 30.0, $dsn);
$r = fault_outcome(fn() => $other->acquire());
rl_same('the next acquire() (still short of replicas) throws ConnectionException', RedisLease\ConnectionException::class, $r['exception']);
rl_same('... and the first lock was freed before it', 0, $raw->cmd('EXISTS', $rk));
rl_same('... as was its own', 0, $raw->cmd('EXISTS', rl_lock_key(rl_key('shortfall-other'))));
echo "done\n";
?>
--EXPECT--
ok: acquire() with too few replicas throws ConnectionException
ok: ... saying a failover could lose it
ok: ... the give-back was sent and held by the proxy
ok: ... the object holds nothing
ok: the token still holds the lock in Redis (the give-back never arrived)
ok: the next acquire() (still short of replicas) throws ConnectionException
ok: ... and the first lock was freed before it
ok: ... as was its own
done
