--TEST--
Operators' view on Redis Cluster (3 masters): RedisLease\inspect() reads a lock, a semaphore and a session on whichever master serves it; RedisLease\leases() scans every master, finds the leases spread over all three and puts the contended one first; with one master dead it answers for the others and says the answer is partial, within its time
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';

$nodes = fault_start_cluster(3, 0);
foreach ($nodes as $n) {
    // The live masters keep serving their slots while one is down.
    (new RlRaw($n['port']))->cmd('CONFIG', 'SET', 'cluster-require-full-coverage', 'no');
}
$dsn = 'redis-cluster://' . implode(',', fault_cluster_seeds($nodes)) . '?timeout=2&read_timeout=2';

// Lock names served by each master.
$byMaster = [];
for ($i = 0; count($byMaster) < 3 || min(array_map('count', $byMaster)) < 1; $i++) {
    $name = "cl$i";
    [, $port] = fault_cluster_owner($nodes[0]['port'], "lock:{{$name}}");
    $byMaster[$port][] = $name;
}
ksort($byMaster);
$names = array_map(fn($list) => $list[0], $byMaster);
rl_same('one lock name per master', 3, count(array_unique($names)));

$held = [];
foreach ($names as $port => $name) {
    $held[$port] = new DistributedLock($name, 30.0, $dsn);
    rl_ok("a lock held on the master at $port", $held[$port]->acquire());
}
$hot = reset($names);
$hotPort = array_key_first($names);
$waiters = [];
foreach (['acquire', 'acquireRead'] as $j => $how) {
    $waiters[] = rl_spawn_php('$l = new DistributedLock(' . rl_export($hot) . ', 20.0, ' . rl_export($dsn) . '); echo "go\n"; $l->' . $how . '(30.0); fgets(STDIN);');
    rl_ok("waiter $j queued on the hot lock", rl_wait_until(fn() => (int) (new RlRaw($hotPort))->cmd('ZCARD', "lock:{{$hot}}:waiters") === $j + 1, 10.0));
}
$sem = new DistributedSemaphore('clsem', 4, 30.0, $dsn);
rl_ok('3 permits held', $sem->acquire(0.0, 3));
$sid = 'clsess' . bin2hex(random_bytes(6));
$h = new RedisLockingSessionHandler($dsn);
$h->open('', 'PHPSESSID');
$h->read($sid);

$i = RedisLease\inspect($hot, 'lock', $dsn);
rl_same('inspect(): the hot lock, a writer holding, a writer then a reader waiting', ['write', ['write', 'read']],
    [$i['holders'][0]['mode'] ?? null, array_column($i['waiters'], 'mode')]);
foreach ($names as $port => $name) {
    rl_same("inspect(): the lock on the master at $port is held", 1, RedisLease\inspect($name, 'lock', $dsn)['holders_total']);
}
rl_same('inspect(): the semaphore, 3 permits', 3, RedisLease\inspect('clsem', 'semaphore', $dsn)['permits']);
rl_same('inspect(): the session, locked', 1, RedisLease\inspect($sid, 'session', $dsn)['holders_total']);

$all = RedisLease\leases(null, $dsn);
$keys = array_column($all['leases'], 'key');
rl_same('leases(): complete', [false, []], [$all['partial'], $all['why_partial']]);
rl_same('leases(): the contended lock first', "lock:{{$hot}}", $keys[0] ?? null);
$want = array_merge(array_map(fn($n) => "lock:{{$n}}", array_values($names)), ['lock:{clsem}:semaphore', '{PHPREDIS_SESSION:' . substr($sid, 0, 6) . '…}:lock']);
rl_same('leases(): every lease, from all three masters', [], array_values(array_diff($want, $keys)));

// One master dies (no replica): the others still answer, and the answer says it is partial.
$deadPort = array_key_last($names);
foreach ($nodes as $n) {
    if ($n['port'] === $deadPort) {
        rl_kill_pid($n['pid'], 'KILL');
    }
}
$t0 = microtime(true);
$part = RedisLease\leases(null, $dsn, 100, 5.0);
$took = microtime(true) - $t0;
rl_ok('leases() with a master dead: partial, naming it', $part['partial'] && str_contains(implode(' ', $part['why_partial']), (string) $deadPort), rl_fmt($part['why_partial']));
rl_ok('... the other masters\' leases still listed', in_array("lock:{{$hot}}", array_column($part['leases'], 'key'), true), rl_fmt(array_column($part['leases'], 'key')));
rl_ok('... within its time', $took < 8.0, sprintf('%.2f s', $took));
echo "done\n";
?>
--EXPECTF--
ok: one lock name per master
ok: a lock held on the master at %d
ok: a lock held on the master at %d
ok: a lock held on the master at %d
ok: waiter 0 queued on the hot lock
ok: waiter 1 queued on the hot lock
ok: 3 permits held
ok: inspect(): the hot lock, a writer holding, a writer then a reader waiting
ok: inspect(): the lock on the master at %d is held
ok: inspect(): the lock on the master at %d is held
ok: inspect(): the lock on the master at %d is held
ok: inspect(): the semaphore, 3 permits
ok: inspect(): the session, locked
ok: leases(): complete
ok: leases(): the contended lock first
ok: leases(): every lease, from all three masters
ok: leases() with a master dead: partial, naming it
ok: ... the other masters' leases still listed
ok: ... within its time
done
