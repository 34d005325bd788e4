<?php
/*
 * `make bench`, threads: the same work on a threaded server (Apache 2.4 mpm_event + mod_php, ZTS,
 * 2 processes x 25 threads) and on php-fpm of the same ZTS PHP (16 workers), side by side in one run.
 * Runs in the ZTS cell (scripts/bench.sh: `scripts/cells.sh exec php8.2-zts+redis7.0`).
 *
 *   php bench/threads.php [--reps=5] [--json=FILE]
 *
 * 1. Contended session: 100 concurrent requests on one session (1 ms of work each): wall time, keys kept.
 * 2. Lock loop: 50 concurrent requests, each 200 acquire + release pairs of a new DistributedLock on a key of
 *    its own: pairs per second over all, and the links the server kept open to Redis meanwhile (the pool is
 *    per process, shared by its threads: links follow the commands in flight, not the threads).
 */
require __DIR__ . '/../testing/apache_pool.php';
require __DIR__ . '/../php-tests/fpm-app/harness.inc';
// median()
require __DIR__ . '/loop_ops.php';

$opts = getopt('', ['reps:', 'json:']);
$reps = (int) ($opts['reps'] ?? 5);
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

$servers = [
    'apache_threads' => static fn() => ApachePool::start(['ini' => st_common_ini()]),
    'php_fpm' => static fn() => FpmPool::start(['ini' => st_common_ini(), 'max_children' => 16]),
];
$results = ['php' => PHP_VERSION . (PHP_ZTS ? ' ZTS' : ''), 'reps' => $reps, 'rows' => []];
foreach ($servers as $name => $start) {
    $pool = $start();
    $client = $pool->client();
    $pairs = __DIR__ . '/app/pairs.php';
    // Warm every worker and thread: connections and the script cache.
    $client->multi(array_fill(0, 100, ['params' => FcgiClient::params($pairs, ['n' => 2], ['RL_DSN' => $dsn])]), 30);
    $walls = $kept = $rates = $links = [];
    for ($r = 0; $r < $reps; $r++) {
        $sid = st_sid();
        $reqs = array_map(static fn($i) => st_req('class', $dsn, [], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 1]), range(0, 99));
        $t = hrtime(true);
        $client->multi($reqs, 60);
        $walls[] = (hrtime(true) - $t) / 1e6;
        $data = st_decode($raw->cmd('GET', st_data_key($sid)));
        $kept[] = is_array($data) ? count($data) : 0;

        $calls = array_map(static fn($i) => $client->begin(FcgiClient::params($pairs, ['n' => 200, 'key' => "bench:threads:$r:$i"], ['RL_DSN' => $dsn])), range(1, 50));
        $t = hrtime(true);
        $peak = 0;
        while (!FcgiClient::pump($calls, 0.05)) {
            $peak = max($peak, count(explode("\n", trim((string) $raw->cmd('CLIENT', 'LIST')))) - 1);
        }
        $seconds = (hrtime(true) - $t) / 1e9;
        $ok = array_sum(array_map(static fn($c) => $c->response->json()['ok'] ?? 0, $calls));
        $rates[] = $ok / $seconds;
        $links[] = $peak;
    }
    $row = ['contended_session_ms' => median($walls), 'kept_min' => min($kept), 'lock_pairs_per_s' => median($rates),
        'links_peak' => max($links), 'processes' => $pool instanceof ApachePool ? ApachePool::PROCESSES : 16];
    $results['rows'][$name] = $row;
    printf("%-15s contended session %7.1f ms (kept %d of 100)   lock loop %7.0f pairs/s   links to Redis at most %d (%d processes)\n",
        $name, $row['contended_session_ms'], $row['kept_min'], $row['lock_pairs_per_s'], $row['links_peak'], $row['processes']);
    $pool->stop();
}
if (isset($opts['json'])) {
    file_put_contents($opts['json'], json_encode($results, JSON_PRETTY_PRINT) . "\n");
}
