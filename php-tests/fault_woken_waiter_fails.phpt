--TEST--
Fault: the waiter a release wakes (hands the lock to) fails right then (its wake-up reply is lost and Redis becomes unreachable for it): the next waiter gets the lock within about that waiter's ttl, instead of sleeping on while nobody uses it
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
$k = rl_key('woken');
$rk = rl_lock_key($k);

/** Clients blocked in BLPOP on this lock's wake-up list(s). */
function blocked(RlRaw $raw): int
{
    return substr_count($raw->cmd('CLIENT', 'LIST'), 'cmd=blpop');
}

/** A child that waits for the lock: prints a JSON line with the outcome and when it came. */
function waiter(string $k, string $dsn, float $ttl, float $wait): RlChild
{
    return rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', ' . rl_export($ttl) . ', ' . rl_export($dsn) . ');
try {
    $got = $l->acquire(' . rl_export($wait) . ');
    $out = ["got" => $got];
} catch (Throwable $e) {
    $out = ["exception" => get_class($e)];
}
echo json_encode($out + ["at" => microtime(true)]), "\n";
fgets(STDIN);
if (!empty($out["got"])) { $l->release(); }
');
}

$holder = new DistributedLock($k, 30.0, $srv['dsn']);
rl_same('the holder has the lock (ttl 30 s)', true, $holder->acquire());
// The first waiter talks through the proxy: its wake-up reply is cut, then Redis
// is out of its reach.
$proxy->arm('cut', ['BLPOP', $rk . ':wake'], 'down');
$a = waiter($k, $proxy->dsn('connect_timeout=0.5&read_timeout=0.5'), 1.0, 10.0);
rl_ok('waiter A is blocked', rl_wait_until(fn() => blocked($raw) === 1, 5.0, 0.002));
$b = waiter($k, $srv['dsn'], 30.0, 5.0);
rl_ok('waiter B is blocked behind it', rl_wait_until(fn() => blocked($raw) === 2, 5.0, 0.002));

$released = microtime(true);
rl_same('the holder releases', true, $holder->release());
$ra = json_decode((string) $a->readLine(10.0), true) ?? [];
$rb = json_decode((string) $b->readLine(10.0), true) ?? [];
rl_same('waiter A fails with a ConnectionException', RedisLease\ConnectionException::class, $ra['exception'] ?? $ra);
rl_same('waiter B gets the lock', true, $rb['got'] ?? $rb);
$after = ($rb['at'] ?? INF) - $released;
rl_ok("waiter B gets it within about A's ttl (1 s) of the release, not after its own 5 s wait",
    $after < 3.0, sprintf('%.2f s', $after));
$b->send("\n");
$a->send("\n");
$b->wait();
$a->wait();
rl_same('the key is free at the end', 0, $raw->cmd('EXISTS', $rk));
echo "done\n";
?>
--EXPECT--
ok: the holder has the lock (ttl 30 s)
ok: waiter A is blocked
ok: waiter B is blocked behind it
ok: the holder releases
ok: waiter A fails with a ConnectionException
ok: waiter B gets the lock
ok: waiter B gets it within about A's ttl (1 s) of the release, not after its own 5 s wait
ok: the key is free at the end
done
