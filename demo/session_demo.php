<?php
// The seeds' race, for real: 100 concurrent requests of one session on a php-fpm
// pool, each adding one key. Without locking, writes are lost; with redis_lease,
// all 100 keys survive. PHP's own files handler (flock) runs on the same pool as
// the single-machine reference.
require __DIR__ . '/../testing/fpm_pool.php';

$requests = (int) ($argv[1] ?? 100);
$workMs = (float) ($argv[2] ?? 1.0);
$workers = (int) ($argv[3] ?? 16);
$rounds = (int) ($argv[4] ?? 5);

$redis = rl_start_redis();
$filesDir = sys_get_temp_dir() . '/redis_lease_demo_sessions_' . getmypid();
@mkdir($filesDir);
register_shutdown_function(function () use ($filesDir) {
    array_map('unlink', glob("$filesDir/*") ?: []);
    @rmdir($filesDir);
});
$pool = FpmPool::start([
    'max_children' => $workers,
    'env' => ['DEMO_REDIS_DSN' => $redis['dsn'], 'DEMO_FILES_DIR' => $filesDir],
]);
$client = $pool->client();
$raw = new RlRaw($redis['port']);
$app = __DIR__ . '/app/race.php';

printf("php-fpm: static pool of %d workers; redis-server on port %d\n", $workers, $redis['port']);
printf("%d concurrent requests on one session, each adding one key after %.1f ms of work;\n", $requests, $workMs);
printf("%d rounds per handler, interleaved; keys kept: worst round; wall time: median\n\n", $rounds);

/** Runs the race once; returns [keys kept, wall seconds, failed requests]. */
function race(FcgiClient $client, string $app, string $handler, int $n, float $workMs): array
{
    $sid = $handler . bin2hex(random_bytes(12));
    $batch = [];
    for ($i = 0; $i < $n; $i++) {
        $batch[$i] = ['params' => FcgiClient::params($app, ['handler' => $handler, 'sid' => $sid, 'key' => $i, 'work_ms' => $workMs])];
    }
    $t = hrtime(true);
    $responses = $client->multi($batch, 120.0);
    $wall = (hrtime(true) - $t) / 1e9;
    $failed = 0;
    foreach ($responses as $r) {
        $j = $r->json();
        if (!$r->ok() || !is_array($j) || !$j['started'] || !$j['written']) {
            $failed++;
        }
    }
    // Read the result back through the same handler.
    $check = $client->request(FcgiClient::params($app, ['handler' => $handler, 'sid' => $sid, 'key' => 'check', 'work_ms' => 0]));
    $kept = ($check->json()['keys'] ?? 1) - 1;
    return [$kept, $wall, $failed];
}

// Warm every worker's connection and script cache, so the rounds compare steady states.
foreach (['off', 'lease', 'files'] as $h) {
    race($client, $app, $h, $workers * 2, 0);
}

$rows = [
    'off' => 'redis_lease, locking = off (phpredis-style)',
    'lease' => 'redis_lease (native save handler)',
    'class' => 'redis_lease (RedisLockingSessionHandler)',
    'files' => "PHP files handler (flock)",
];
$walls = $kept = $failed = [];
for ($round = 0; $round < $rounds; $round++) {
    foreach ($rows as $h => $label) {
        [$k, $w, $f] = race($client, $app, $h, $requests, $workMs);
        $kept[$h] = min($kept[$h] ?? PHP_INT_MAX, $k);
        $walls[$h][] = $w;
        $failed[$h] = ($failed[$h] ?? 0) + $f;
    }
}
$median = function (array $xs): float {
    sort($xs);
    return $xs[intdiv(count($xs), 2)];
};
foreach ($rows as $h => $label) {
    printf("  %-45s kept %3d of %d keys, %7.1f ms%s\n", $label, $kept[$h], $requests, $median($walls[$h]) * 1000,
        $failed[$h] ? "  ({$failed[$h]} requests failed)" : '');
}
printf("\n  redis_lease / files wall time: %.2fx\n", $median($walls['lease']) / $median($walls['files']));

// Redis commands of one locked request, as Redis saw them (MONITOR shows the client's
// commands; those run inside our Lua scripts are marked "lua" and are not round trips).
$monitor = new RlRaw($redis['port']);
$sid = 'rt' . bin2hex(random_bytes(8));
$client->request(FcgiClient::params($app, ['handler' => 'lease', 'sid' => $sid, 'key' => 0]));
$mon = stream_socket_client("tcp://127.0.0.1:{$redis['port']}");
fwrite($mon, "MONITOR\r\n");
fgets($mon);
$client->request(FcgiClient::params($app, ['handler' => 'lease', 'sid' => $sid, 'key' => 1]));
$raw->cmd('PING'); // a marker: everything before it belongs to the request
stream_set_timeout($mon, 2);
$commands = [];
while (($line = fgets($mon)) !== false) {
    if (str_contains($line, '"PING"') || str_contains($line, '"ping"')) {
        break;
    }
    if (!str_contains($line, 'lua]')) {
        preg_match('/\] "(\w+)"/', $line, $m);
        $commands[] = strtoupper($m[1] ?? '?');
    }
}
printf("  Redis round trips of one locked request: %d (%s)\n", count($commands), implode(', ', $commands));

$pool->stop();
exit(0);
