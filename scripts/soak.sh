#!/usr/bin/env bash
# Soak test: 100,000 requests through a php-fpm pool of 8 workers, each doing a
# native redis_lease session (read, increment, write) and an auto-renewed
# DistributedLock acquire/release (bench/app/soak.php). Also checks that each
# worker's thread count stays flat (the renewal threads). Measures every worker's RSS (VmRSS in
# /proc/<pid>/status) after a warm-up and at the end, with the pool idle both
# times, and prints both and the growth per worker.
#
#   scripts/soak.sh [path/to/libredis_lease.so]
#
# Environment (all optional):
#   SOAK_REQUESTS=100000    total requests
#   SOAK_WARMUP=10000       requests before the first RSS reading
#   SOAK_CONCURRENCY=16     requests in flight
#   SOAK_SESSIONS=512       distinct session ids (each request: sid = i mod this)
#   SOAK_LOCK_KEYS=64       distinct lock keys (some requests contend)
#   SOAK_TIMEOUT=900        seconds before the run is abandoned
#   SOAK_MAX_GROWTH_KIB=1024  largest accepted RSS growth of one worker
#
# Exit 0 when every request succeeded, no session update was lost (the sum of
# the session counters in Redis equals the number of requests), all 8 workers
# lived through the run, and no worker grew by more than SOAK_MAX_GROWTH_KIB.
# It starts its own redis-server and php-fpm (testing/fpm_pool.php) and stops
# them at the end, also when interrupted.
set -u

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
so="${1:-$repo_root/target/release/libredis_lease.so}"
if [ ! -f "$so" ]; then
    echo "soak.sh: extension not found: $so" >&2
    exit 2
fi
so="$(cd "$(dirname "$so")" && pwd)/$(basename "$so")"
php_bin="$(command -v php || true)"
if [ -z "$php_bin" ]; then
    echo "soak.sh: php not found" >&2
    exit 2
fi

work="$(mktemp -d /tmp/rl-soak.XXXXXX)"
driver_pid=""
cleanup() {
    # The driver's shutdown functions stop php-fpm and redis-server; if it is
    # killed instead, the pool's watchdog and redis's parent-death signal do.
    if [ -n "$driver_pid" ] && kill -0 "$driver_pid" 2>/dev/null; then
        kill -TERM "$driver_pid" 2>/dev/null
        wait "$driver_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat > "$work/driver.php" <<'EOF'
<?php
/* The soak driver: argv[1] repo root, argv[2] extension path. */
[$root, $so] = [$argv[1], $argv[2]];
require $root . '/testing/fpm_pool.php'; // FpmPool, FcgiClient, rl_start_redis(), RlRaw

$total = (int) (getenv('SOAK_REQUESTS') ?: 100000);
$warmup = (int) (getenv('SOAK_WARMUP') ?: 10000);
$inFlight = (int) (getenv('SOAK_CONCURRENCY') ?: 16);
$nSessions = (int) (getenv('SOAK_SESSIONS') ?: 512);
$nKeys = (int) (getenv('SOAK_LOCK_KEYS') ?: 64);
$timeout = (float) (getenv('SOAK_TIMEOUT') ?: 900);
$maxGrowth = (int) (getenv('SOAK_MAX_GROWTH_KIB') ?: 1024);
$workers = 8;
$deadline = microtime(true) + $timeout;

$redis = rl_start_redis();
$pool = FpmPool::start([
    'so' => $so,
    'max_children' => $workers,
    'ini' => [
        'session.save_handler' => 'redis_lease',
        'session.save_path' => $redis['dsn'],
        'session.use_cookies' => '0',
        'session.cache_limiter' => '',
        'session.gc_probability' => '0',
        'redis_lease.dsn' => $redis['dsn'],
        'memory_limit' => '128M',
    ],
]);
$client = $pool->client();
$app = $root . '/bench/app/soak.php';
$pidsAtStart = $pool->workerPids();
printf("soak: %d requests, %d in flight, %d workers (pids %s), %d sessions, %d lock keys\n",
    $total, $inFlight, $workers, implode(' ', $pidsAtStart), $nSessions, $nKeys);

$sids = [];
for ($i = 0; $i < $nSessions; $i++) {
    $sids[] = bin2hex(random_bytes(16));
}

/** A numeric field of /proc/<pid>/status (VmRSS in KiB, Threads) for each pid; -1 when gone. */
function status_field(array $pids, string $field): array
{
    $out = [];
    foreach ($pids as $pid) {
        $status = (string) @file_get_contents("/proc/$pid/status");
        $out[$pid] = preg_match('/^' . $field . ':\s+(\d+)/m', $status, $m) ? (int) $m[1] : -1;
    }
    return $out;
}

$next = 0;          // next request number to send
$done = 0;          // requests finished
$failures = [];     // first failures, for the report
$failCount = 0;
$served = [];       // pid => requests
$calls = [];
$rssWarm = null;
$doneAtWarm = 0;
$t0 = microtime(true);
$tWarm = null;
$nextReport = 10000;
while ($done < $total) {
    if (microtime(true) > $deadline) {
        fwrite(STDERR, "soak: timed out after {$timeout} s with $done of $total requests done\n");
        exit(1);
    }
    // Warm-up reached: let the requests in flight finish, then read RSS while the pool is idle.
    $pauseForWarmup = $rssWarm === null && $next >= $warmup;
    while (!$pauseForWarmup && count($calls) < $inFlight && $next < $total) {
        $i = $next++;
        $params = FcgiClient::params($app, ['sid' => $sids[$i % $nSessions], 'key' => 'soak-' . ($i % $nKeys)]);
        $calls[$i] = $client->begin($params);
    }
    FcgiClient::pump($calls, 0.05);
    foreach ($calls as $i => $call) {
        if (!$call->done) {
            continue;
        }
        unset($calls[$i]);
        $done++;
        $r = $call->response;
        $j = $r->ok() ? $r->json() : null;
        if (!is_array($j) || ($j['ok'] ?? false) !== true) {
            $failCount++;
            if (count($failures) < 10) {
                $failures[] = "request $i: " . $r->describe() . ' ' . substr($r->body, 0, 200);
            }
            continue;
        }
        $served[$j['pid']] = ($served[$j['pid']] ?? 0) + 1;
    }
    if ($pauseForWarmup && $calls === []) {
        $rssWarm = status_field($pidsAtStart, 'VmRSS');
        $threadsWarm = status_field($pidsAtStart, 'Threads');
        $tWarm = microtime(true);
        $doneAtWarm = $done;
        printf("soak: warm-up done: %d requests in %.1f s; RSS read with the pool idle\n", $done, $tWarm - $t0);
    }
    if ($done >= $nextReport) {
        printf("soak: %6d done, %.1f s\n", $done, microtime(true) - $t0);
        $nextReport += 10000;
    }
}
$tEnd = microtime(true);
$rssEnd = status_field($pidsAtStart, 'VmRSS');
$threadsEnd = status_field($pidsAtStart, 'Threads');
$pidsAtEnd = $pool->workerPids();
printf("soak: %d requests in %.1f s (%.0f req/s after warm-up)\n", $done, $tEnd - $t0,
    ($done - $doneAtWarm) / max(0.001, $tEnd - $tWarm));

// No lost session update: every request added 1 to its session's counter.
$raw = new RlRaw($redis['port']);
$sum = 0;
$unreadable = 0;
foreach ($sids as $sid) {
    $data = $raw->cmd('GET', 'PHPREDIS_SESSION:' . $sid);
    if (is_string($data) && preg_match('/(?:^|;|\})n\|i:(\d+);/', $data, $m)) {
        $sum += (int) $m[1];
    } else {
        $unreadable++;
    }
}
$leftLocks = count($raw->cmd('KEYS', '*:lock')) + count(array_filter($raw->cmd('KEYS', 'lock:{*'),
    static fn($k) => str_ends_with($k, '}')));

echo "\nworker    requests   RSS after warm-up (KiB)   RSS at end (KiB)   growth (KiB)\n";
$maxSeen = PHP_INT_MIN;
foreach ($pidsAtStart as $pid) {
    $g = $rssEnd[$pid] - $rssWarm[$pid];
    $maxSeen = max($maxSeen, $g);
    printf("%-9d %8d   %23d   %16d   %+12d\n", $pid, $served[$pid] ?? 0, $rssWarm[$pid], $rssEnd[$pid], $g);
}
$sumWarm = array_sum($rssWarm);
$sumEnd = array_sum($rssEnd);
printf("all       %8d   %23d   %16d   %+12d   (mean %+.0f KiB per worker)\n", array_sum($served), $sumWarm, $sumEnd,
    $sumEnd - $sumWarm, ($sumEnd - $sumWarm) / count($pidsAtStart));
$afterWarm = $done - $doneAtWarm;
printf("growth per request after warm-up: %+.3f bytes (all workers, %d requests)\n",
    ($sumEnd - $sumWarm) * 1024 / max(1, $afterWarm), $afterWarm);

$problems = [];
if ($failCount > 0) {
    $problems[] = "$failCount request(s) failed, e.g.:\n    " . implode("\n    ", $failures);
}
if ($sum !== $total - $failCount || $unreadable > 0) {
    $problems[] = "session counters add up to $sum, expected " . ($total - $failCount) . " ($unreadable session(s) unreadable)";
}
if ($pidsAtEnd !== $pidsAtStart) {
    $problems[] = 'workers changed during the run: ' . implode(' ', $pidsAtStart) . ' -> ' . implode(' ', $pidsAtEnd);
}
if (in_array(-1, $rssEnd, true)) {
    $problems[] = 'a worker was gone at the end';
}
if ($leftLocks > 0) {
    $problems[] = "$leftLocks lock key(s) still held at the end";
}
printf("threads per worker after warm-up: %s; at the end: %s\n", implode(' ', $threadsWarm), implode(' ', $threadsEnd));
if ($threadsEnd !== $threadsWarm) {
    $problems[] = 'worker thread counts changed: ' . json_encode($threadsWarm) . ' -> ' . json_encode($threadsEnd);
}
if ($maxSeen > $maxGrowth) {
    $problems[] = "a worker grew by $maxSeen KiB after warm-up (limit $maxGrowth KiB)";
}
printf("session counters: %d of %d requests accounted for; locks left held: %d\n", $sum, $total, $leftLocks);
if ($problems !== []) {
    echo "soak: FAILED:\n  " . implode("\n  ", $problems) . "\n";
    exit(1);
}
echo "soak: OK\n";
exit(0);
EOF

# The driver itself does not need the extension; the pool's php.ini loads it.
"$php_bin" -n -d memory_limit=512M "$work/driver.php" "$repo_root" "$so" &
driver_pid=$!
wait "$driver_pid"
status=$?
driver_pid=""
exit $status
