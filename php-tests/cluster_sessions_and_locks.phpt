--TEST--
Redis Cluster (3 masters, 1 replica each): the seeds' 100-request race on php-fpm keeps 100 of 100 keys every round with both session forms (native with phpredis's seed[]= save_path, class with redis-cluster://); 8 processes of synchronized increments over lock names on all three masters lose no update, with fencing tokens strictly increasing per name (phpredis's own rediscluster handler on the same race, and the switch from it: cluster_phpredis_rediscluster.phpt)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const ROUNDS = 3;
$nodes = fault_start_cluster(3, 1);
$seeds = fault_cluster_seeds($nodes);
$classDsn = 'redis-cluster://' . implode(',', $seeds) . '?timeout=2&read_timeout=2';
// phpredis's rediscluster save_path, unchanged.
$savePath = implode('&', array_map(fn($s) => "seed[]=$s", $seeds)) . '&timeout=2&read_timeout=2';

/** The keys of session $sid, read from the master serving it. */
function stored(array $nodes, string $sid, string $prefix): ?array
{
    [, $port] = fault_cluster_owner($nodes[0]['port'], st_data_key($sid, $prefix));
    return st_decode((new RlRaw($port))->cmd('GET', st_data_key($sid, $prefix)));
}

/** 100 concurrent add_key requests on one fresh session; [keys kept, requests started]. */
function race(FpmPool $pool, array $nodes, string $mode, string $dsn): array
{
    $sid = st_sid();
    $reqs = [];
    for ($i = 0; $i < 100; $i++) {
        $reqs[] = st_req($mode, $dsn, [], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 1]);
    }
    $rs = $pool->client()->multi($reqs, 60.0);
    $started = count(array_filter($rs, fn($r) => ($r->json()['started'] ?? null) === true));
    // The class form's redis-cluster:// has redis_lease's default prefix; a seed[]=
    // save_path (redis_lease's native form, as phpredis's rediscluster handler, so
    // that existing sessions carry over) has PHPREDIS_CLUSTER_SESSION:.
    $prefix = $mode === 'class' ? ST_PREFIX : 'PHPREDIS_CLUSTER_SESSION:';
    return [count(stored($nodes, $sid, $prefix) ?? []), $started];
}

foreach (['native' => $savePath, 'class' => $classDsn] as $form => $dsn) {
    $pool = st_pool($form, $dsn, [], 'ini', [], 16);
    for ($round = 1; $round <= ROUNDS; $round++) {
        [$kept, $started] = race($pool, $nodes, $form, $dsn);
        rl_same("$form on the cluster, round $round: 100 started, 100 of 100 keys kept", [100, 100], [$started, $kept]);
    }
    rl_same("$form: nothing in PHP's error log", '', $pool->phpErrors());
    $pool->stop();
}

// --- Locks: 8 processes, synchronized increments of a counter per name, names on three masters ---
$names = [];
$owners = [];
for ($i = 0; count($names) < 3; $i++) {
    [, $port] = fault_cluster_owner($nodes[0]['port'], "lock:{counter$i}");
    if (!in_array($port, $owners, true)) {
        $owners[] = $port;
        $names[] = "counter$i";
    }
}
$children = [];
for ($p = 0; $p < 8; $p++) {
    $children[] = rl_spawn_php('
$dsn = ' . rl_export($classDsn) . ';
$names = ' . rl_export($names) . ';
$log = [];
for ($i = 0; $i < 40; $i++) {
    $name = $names[($i + ' . $p . ') % 3];
    $lock = new DistributedLock($name, 5.0, $dsn);
    $lock->synchronized(function () use ($lock, $name, &$log) {
        // A read-modify-write of a counter kept beside the lock: lost updates
        // would show any overlap.
        $c = new RedisLockingSessionHandler(' . rl_export($classDsn) . ', ["locking" => false]);
        $v = (int) $c->read("cnt" . $name);
        usleep(300);
        $c->write("cnt" . $name, (string) ($v + 1));
        $log[] = [$name, $v, $lock->getFencingToken()];
    }, 30.0);
}
echo json_encode($log), "\n";
', st_common_ini());
}
$grants = [];
foreach ($children as $c) {
    foreach (json_decode((string) $c->readLine(120.0), true) ?? [] as [$name, $before, $fence]) {
        $grants[$name][$before] = $fence;
    }
}
$total = 0;
$rising = true;
foreach ($names as $name) {
    $final = (int) ((new RlRaw(fault_cluster_owner($nodes[0]['port'], "PHPREDIS_SESSION:cnt$name")[1]))->cmd('GET', "PHPREDIS_SESSION:cnt$name"));
    $total += $final;
    ksort($grants[$name]);
    $fences = array_values($grants[$name]);
    for ($i = 1; $i < count($fences); $i++) {
        $rising = $rising && $fences[$i] > $fences[$i - 1];
    }
    rl_same("lock $name: every increment counted (each grant saw 0, 1, 2, ...)", range(0, count($grants[$name]) - 1), array_keys($grants[$name]));
}
rl_same('8 x 40 synchronized increments, none lost', 320, $total);
rl_ok('fencing tokens strictly increase with every grant of a name', $rising);
echo "done\n";
?>
--EXPECTF--
ok: native on the cluster, round 1: 100 started, 100 of 100 keys kept
ok: native on the cluster, round 2: 100 started, 100 of 100 keys kept
ok: native on the cluster, round 3: 100 started, 100 of 100 keys kept
ok: native: nothing in PHP's error log
ok: class on the cluster, round 1: 100 started, 100 of 100 keys kept
ok: class on the cluster, round 2: 100 started, 100 of 100 keys kept
ok: class on the cluster, round 3: 100 started, 100 of 100 keys kept
ok: class: nothing in PHP's error log
ok: lock counter0: every increment counted (each grant saw 0, 1, 2, ...)
ok: lock counter1: every increment counted (each grant saw 0, 1, 2, ...)
ok: lock counter2: every increment counted (each grant saw 0, 1, 2, ...)
ok: 8 x 40 synchronized increments, none lost
ok: fencing tokens strictly increase with every grant of a name
done
