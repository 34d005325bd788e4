--TEST--
Fault: an acquire whose WAIT falls short (wait_replicas=1, no replica) gives the lock back; when that give-back fails too (Redis unreachable right then), the caller is told it has no lock and the token is not forgotten: the process's next call to that Redis frees it (before the fix, it stayed locked for its whole ttl). A reader's upgrade that falls short the same way: its token, whose give-back may still run, is never counted on again; the next acquire() takes a fresh one, which the process's leftovers do not free (before the fix the object asked about the old token, kept it, and the process's next claim freed the lock behind it: two holders)
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

// --- A reader's upgrade whose WAIT falls short, its give-back unanswered ---
// The object lets the given-back token go (its give-back may still run, or runs
// at the process's next claim there): it neither refreshes it nor, asked again,
// keeps it; the next acquire() takes a fresh token, which the leftover does not
// free (before the fix the object kept the old token and the process's next
// claim freed the lock behind it: two holders).
// No 5 s delay before the replica's first sync.
$srv2 = rl_start_redis(['--repl-diskless-sync-delay', '0']);
$raw2 = new RlRaw($srv2['port']);
$replica = rl_start_redis(['--replicaof', '127.0.0.1', (string) $srv2['port']]);
$rraw = new RlRaw($replica['port']);
rl_ok('upgrade: the replica is linked', rl_wait_until(
    static fn() => str_contains((string) $rraw->cmd('INFO', 'replication'), 'master_link_status:up'), 20.0));
// Linked is not yet acknowledging (a loaded machine; once, in CI, a Valkey 8.1 replica
// let the read hold's WAIT run out): a write of its own, waited for, first.
rl_ok('upgrade: the replica acknowledges writes', rl_wait_until(static fn() => $raw2->cmd('INCR', rl_key('probe')) > 0
    && $raw2->cmd('WAIT', 1, 1000) >= 1, 20.0));
$proxy2 = FaultProxy::start($srv2['port']);
// WAIT's 1 s is for a busy machine; the stopped replica costs the upgrade that second.
$dsn2 = $proxy2->dsn('connect_timeout=2&read_timeout=2&wait_replicas=1&wait_timeout=1000');
$k = rl_key('upgrade-shortfall');
$rk = rl_lock_key($k);
$l = new DistributedLock($k, 30.0, $dsn2);
$r = fault_outcome(fn() => $l->acquireRead());
rl_ok('upgrade: a read hold, the replica acknowledging it', $r['value'] === true, json_encode($r));
$token = $l->getToken();
rl_kill_pid($replica['pid'], 'STOP');
$proxy2->arm('hold', [$rk, rl_script_marker('release.lua')], 'down');
$r = fault_outcome(fn() => $l->acquire());
rl_same('upgrade: acquire() with the replica stopped throws ConnectionException', RedisLease\ConnectionException::class, $r['exception']);
rl_ok('... the give-back was sent and held by the proxy', $proxy2->awaitEvent('hold', 5.0) !== null);
rl_ok('... so the token holds the lock alone', str_starts_with((string) $raw2->cmd('GET', $rk), "$token:"));
rl_kill_pid($replica['pid'], 'CONT');
$proxy2->disarm();
$proxy2->up();
// A write of its own, so that WAIT waits for the replica to have it.
rl_ok('the replica acknowledges again', rl_wait_until(static fn() => $raw2->cmd('INCR', rl_key('probe')) > 0
    && $raw2->cmd('WAIT', 1, 1000) >= 1, 20.0));
rl_same('upgrade: the object counts on the given-back token no more (no token, refresh() false)', [null, false],
    [$l->getToken(), fault_outcome(fn() => $l->refresh())['value'] ?? 'threw']);
rl_same('upgrade: acquire() again holds the lock', true, fault_outcome(fn() => $l->acquire())['value'] ?? null);
$now = (string) $l->getToken();
rl_ok('... by a fresh token (the given-back one is never counted on again: its give-back may still run)', $now !== '' && $now !== $token);
rl_ok('... which Redis has', str_starts_with((string) $raw2->cmd('GET', $rk), "$now:"), (string) $raw2->cmd('GET', $rk));
$other = new DistributedLock(rl_key('upgrade-other'), 30.0, $dsn2);
rl_same('another claim on that Redis', true, fault_outcome(fn() => $other->acquire())['value'] ?? null);
rl_ok('... and the lock is still the object\'s (not freed behind it)', str_starts_with((string) $raw2->cmd('GET', $rk), "$now:"),
    (string) $raw2->cmd('GET', $rk));
rl_same('... which releases it', true, $l->release());
$other->release();
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
ok: upgrade: the replica is linked
ok: upgrade: the replica acknowledges writes
ok: upgrade: a read hold, the replica acknowledging it
ok: upgrade: acquire() with the replica stopped throws ConnectionException
ok: ... the give-back was sent and held by the proxy
ok: ... so the token holds the lock alone
ok: the replica acknowledges again
ok: upgrade: the object counts on the given-back token no more (no token, refresh() false)
ok: upgrade: acquire() again holds the lock
ok: ... by a fresh token (the given-back one is never counted on again: its give-back may still run)
ok: ... which Redis has
ok: another claim on that Redis
ok: ... and the lock is still the object's (not freed behind it)
ok: ... which releases it
done
