--TEST--
phpredis's rediscluster handler on a Redis Cluster (3 masters, 1 replica each), as the anchor of cluster_sessions_and_locks.phpt: the seeds' 100-request race on php-fpm loses keys with it (it does not lock); switching the pool from rediscluster to redis_lease with the same save_path carries its sessions over
--SKIPIF--
<?php
// Needs phpredis (and igbinary, which Debian's build of it loads first) for this PHP: there is no
// php8.5-redis package, for one.
$probe = escapeshellarg(PHP_BINARY) . ' -n -d extension=igbinary -d extension=redis'
    . ' -r ' . escapeshellarg('echo extension_loaded("redis") ? "yes" : "no";') . ' 2>/dev/null';
if (trim((string) shell_exec($probe)) !== 'yes') {
    die('skip phpredis (the redis extension) is not installed for PHP ' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION);
}
?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';

const ROUNDS = 3;
const PREFIX = 'PHPREDIS_CLUSTER_SESSION:'; // phpredis's rediscluster handler's, and a seed[]= save_path's
$nodes = fault_start_cluster(3, 1);
$seeds = fault_cluster_seeds($nodes);
// phpredis's rediscluster save_path, unchanged.
$savePath = implode('&', array_map(fn($s) => "seed[]=$s", $seeds)) . '&timeout=2&read_timeout=2';

/** The keys of session $sid, read from the master serving it. */
function stored(array $nodes, string $sid): ?array
{
    [, $port] = fault_cluster_owner($nodes[0]['port'], st_data_key($sid, PREFIX));
    return st_decode((new RlRaw($port))->cmd('GET', st_data_key($sid, PREFIX)));
}

/** 100 concurrent add_key requests on one fresh session, with the pool's own save handler. */
function race(FpmPool $pool, array $nodes): array
{
    $sid = st_sid();
    $reqs = [];
    for ($i = 0; $i < 100; $i++) {
        $reqs[] = st_req('native', '', [], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 1]);
        $reqs[$i]['params'] = FcgiClient::params(ST_APP . '/add_key.php',
            ['mode' => 'ini', 'sid' => $sid, 'key' => "k$i", 'work_ms' => 1]);
    }
    $rs = $pool->client()->multi($reqs, 60.0);
    $started = count(array_filter($rs, fn($r) => ($r->json()['started'] ?? null) === true));
    return [count(stored($nodes, $sid) ?? []), $started, $sid];
}

// phpredis's rediscluster handler (no session locking on a cluster).
$pool = FpmPool::start(['max_children' => 16, 'extensions' => ['igbinary', 'redis'], 'without_redis_lease' => true,
    'ini' => st_common_ini() + ['session.save_handler' => 'rediscluster', 'session.save_path' => $savePath]]);
$lost = [];
for ($round = 1; $round <= ROUNDS; $round++) {
    [$kept, $started, $phpredisSid] = race($pool, $nodes);
    rl_same("phpredis rediscluster, round $round: 100 started", 100, $started);
    $lost[] = 100 - $kept;
    printf("info: phpredis rediscluster, round %d: %d of 100 keys kept\n", $round, $kept);
}
rl_ok('phpredis rediscluster lost keys (it does not lock)', array_sum($lost) > 0, json_encode($lost));
$pool->stop();

// Switching the handler to redis_lease, save_path unchanged: the sessions phpredis wrote carry over.
$pool = st_pool('native', $savePath, [], 'ini', [], 2);
$params = FcgiClient::params(ST_APP . '/add_key.php', ['mode' => 'ini', 'sid' => $phpredisSid, 'key' => 'after_switch']);
$j = $pool->client()->request($params)->json();
$before = 100 - end($lost);
rl_same('after the switch, the session phpredis wrote is read whole, and written back with one key more',
    [true, $before, $before + 1], [$j['started'], $j['count_before'], count(stored($nodes, $phpredisSid) ?? [])]);
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: phpredis rediscluster, round 1: 100 started
info: phpredis rediscluster, round %d: %d of %d keys kept
ok: phpredis rediscluster, round 2: 100 started
info: phpredis rediscluster, round %d: %d of %d keys kept
ok: phpredis rediscluster, round 3: 100 started
info: phpredis rediscluster, round %d: %d of %d keys kept
ok: phpredis rediscluster lost keys (it does not lock)
ok: after the switch, the session phpredis wrote is read whole, and written back with one key more
done
