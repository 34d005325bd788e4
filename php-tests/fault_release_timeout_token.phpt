--TEST--
Fault: a release() that timed out may still reach Redis; its token is never used again: a later acquire() takes a fresh lease (new token and fence) and refresh() or isAcquired() report the hold gone, so the late release deletes nothing we hold; a conversion asked for then (acquire() after a read hold, acquireRead() after a write hold) takes a fresh hold of the kind asked for
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
$dsn = $proxy->dsn('connect_timeout=1&read_timeout=0.5');

/** The fencing token in a lock value "token:fence". */
function fence_of(?string $value): ?int
{
    return $value === null ? null : (int) substr($value, strrpos($value, ':') + 1);
}

$warm = new DistributedLock(rl_key('warm'), 10.0, $dsn);
rl_same('warm-up', [true, true], [$warm->acquire(), $warm->release()]);

foreach (['acquire()', 'refresh()', 'isAcquired()'] as $then) {
    $k = rl_key('reltimeout');
    $rk = rl_lock_key($k);
    $l = new DistributedLock($k, 10.0, $dsn);
    $l->acquire();
    $first = $l->getFencingToken();
    $proxy->arm('stall', [$rk, rl_script_marker('release.lua')]);
    $r = fault_outcome(fn() => $l->release());
    rl_same("$then: the stalled release() throws ConnectionException", RedisLease\ConnectionException::class, $r['exception']);
    rl_ok("$then: ... the proxy stalled it", $proxy->awaitEvent('stall', 5.0) !== null);
    $r = fault_outcome(fn() => match ($then) {
        'acquire()' => $l->acquire(),
        'refresh()' => $l->refresh(),
        'isAcquired()' => $l->isAcquired(),
    });
    $expected = $then === 'acquire()';
    rl_same("$then afterwards returns " . var_export($expected, true), $expected, $r['value'] ?? $r['exception']);
    if ($then === 'acquire()') {
        rl_ok('acquire(): a fresh lease, with a new fencing token', $l->getFencingToken() > $first,
            "first $first, now " . var_export($l->getFencingToken(), true));
    }
    // The timed-out release now reaches Redis.
    $late = $proxy->flush();
    rl_same("$then: the late release deleted nothing (0)", [0], array_column($late, 'reply'));
    rl_same("$then: the object's view matches Redis", $expected, $l->isAcquired());
    rl_same("$then: Redis holds what the object believes it holds",
        $expected ? $l->getFencingToken() : null, fence_of($raw->cmd('GET', $rk)));
    rl_same("$then: release()", $expected, $l->release());
    rl_same("$then: the key is free", 0, $raw->cmd('EXISTS', $rk));
}

// A reader's release() stalled, then acquire() (an upgrade of a hold that turns
// out released); a writer's, then acquireRead() (a downgrade): each takes a
// fresh hold of the kind asked for (before, each asked Redis to convert a hold
// its fresh token never had, and returned false at once, the lock free).
foreach (['acquire() after a read hold' => [false, 'acquire'], 'acquireRead() after a write hold' => [true, 'acquireRead']] as $then => [$wasWriter, $method]) {
    $k = rl_key('reltimeout-conv');
    $rk = rl_lock_key($k);
    $l = new DistributedLock($k, 10.0, $dsn);
    rl_same("$then: the first hold", true, $wasWriter ? $l->acquire() : $l->acquireRead());
    $old = $l->getToken();
    $proxy->arm('stall', [$rk, rl_script_marker('release.lua')]);
    $r = fault_outcome(fn() => $l->release());
    rl_same("$then: the stalled release() throws ConnectionException", RedisLease\ConnectionException::class, $r['exception']);
    rl_ok("$then: ... the proxy stalled it", $proxy->awaitEvent('stall', 5.0) !== null);
    $r = fault_outcome(fn() => $l->$method(1.0));
    rl_same("$then: returns true", true, $r['value'] ?? $r['exception']);
    rl_ok("$then: ... with a fresh token", $l->getToken() !== null && $l->getToken() !== $old);
    $late = $proxy->flush();
    rl_same("$then: the late release deleted nothing (0)", [0], array_column($late, 'reply'));
    $holds = $wasWriter
        ? $raw->cmd('ZSCORE', "$rk:holders", $l->getToken()) !== null
        : str_starts_with((string) $raw->cmd('GET', $rk), $l->getToken() . ':');
    rl_ok("$then: Redis has the hold asked for", $holds);
    rl_same("$then: release()", true, $l->release());
}
echo "done\n";
?>
--EXPECT--
ok: warm-up
ok: acquire(): the stalled release() throws ConnectionException
ok: acquire(): ... the proxy stalled it
ok: acquire() afterwards returns true
ok: acquire(): a fresh lease, with a new fencing token
ok: acquire(): the late release deleted nothing (0)
ok: acquire(): the object's view matches Redis
ok: acquire(): Redis holds what the object believes it holds
ok: acquire(): release()
ok: acquire(): the key is free
ok: refresh(): the stalled release() throws ConnectionException
ok: refresh(): ... the proxy stalled it
ok: refresh() afterwards returns false
ok: refresh(): the late release deleted nothing (0)
ok: refresh(): the object's view matches Redis
ok: refresh(): Redis holds what the object believes it holds
ok: refresh(): release()
ok: refresh(): the key is free
ok: isAcquired(): the stalled release() throws ConnectionException
ok: isAcquired(): ... the proxy stalled it
ok: isAcquired() afterwards returns false
ok: isAcquired(): the late release deleted nothing (0)
ok: isAcquired(): the object's view matches Redis
ok: isAcquired(): Redis holds what the object believes it holds
ok: isAcquired(): release()
ok: isAcquired(): the key is free
ok: acquire() after a read hold: the first hold
ok: acquire() after a read hold: the stalled release() throws ConnectionException
ok: acquire() after a read hold: ... the proxy stalled it
ok: acquire() after a read hold: returns true
ok: acquire() after a read hold: ... with a fresh token
ok: acquire() after a read hold: the late release deleted nothing (0)
ok: acquire() after a read hold: Redis has the hold asked for
ok: acquire() after a read hold: release()
ok: acquireRead() after a write hold: the first hold
ok: acquireRead() after a write hold: the stalled release() throws ConnectionException
ok: acquireRead() after a write hold: ... the proxy stalled it
ok: acquireRead() after a write hold: returns true
ok: acquireRead() after a write hold: ... with a fresh token
ok: acquireRead() after a write hold: the late release deleted nothing (0)
ok: acquireRead() after a write hold: Redis has the hold asked for
ok: acquireRead() after a write hold: release()
done
