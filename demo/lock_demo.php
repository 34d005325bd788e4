<?php
// The DistributedLock demo: several PHP processes contend for one lock; we show
// who held it when, with which fencing token, how long each waited, and how fast
// a release handed the lock to the next waiter. Then one process's uncontended
// acquire+release throughput.
require __DIR__ . '/redis.php';

$workers = (int) ($argv[1] ?? 6);
$rounds = (int) ($argv[2] ?? 20);
$workMs = (float) ($argv[3] ?? 2.0);

$redis = demo_start_redis();
$ext = getenv('REDIS_LEASE_SO') ?: __DIR__ . '/../target/release/libredis_lease.so';
printf("redis-server on port %d; %d processes x %d holds, %.1f ms of work per hold\n\n", $redis['port'], $workers, $rounds, $workMs);

$procs = [];
for ($w = 1; $w <= $workers; $w++) {
    $procs[$w] = proc_open(
        [PHP_BINARY, '-n', '-d', "extension=$ext", __DIR__ . '/lock_worker.php', $redis['dsn'], (string) $w, (string) $rounds, (string) $workMs],
        [1 => ['pipe', 'w'], 2 => STDERR],
        $pipes[$w]
    );
}
$holds = [];
foreach ($procs as $w => $p) {
    foreach (explode("\n", trim(stream_get_contents($pipes[$w][1]))) as $line) {
        if ($line !== '') {
            $holds[] = json_decode($line, true);
        }
    }
    if (proc_close($p) !== 0) {
        fwrite(STDERR, "worker $w failed\n");
        exit(1);
    }
}
usort($holds, fn ($a, $b) => $a['got'] <=> $b['got']);

$t0 = $holds[0]['asked'];
$gaps = [];
$waits = [];
$overlaps = 0;
$fencesRise = true;
echo "  time(ms)  worker  waited(ms)  fencing token       handoff(ms)\n";
foreach ($holds as $i => $h) {
    $waits[] = ($h['got'] - $h['asked']) * 1000;
    $handoff = '';
    if ($i > 0) {
        $prev = $holds[$i - 1];
        if ($h['got'] < $prev['released']) {
            $overlaps++;
        }
        if ($h['fence'] <= $prev['fence']) {
            $fencesRise = false;
        }
        // A handoff: this process was already waiting when the previous holder released.
        if ($h['asked'] < $prev['released']) {
            $gap = ($h['got'] - $prev['released']) * 1000;
            $gaps[] = $gap;
            $handoff = sprintf('%.3f', $gap);
        }
    }
    if ($i < 12 || $i >= count($holds) - 3) {
        printf("%10.2f  %6d  %10.2f  %-18d  %s\n", ($h['got'] - $t0) * 1000, $h['worker'], end($waits), $h['fence'], $handoff);
    } elseif ($i === 12) {
        echo "       ...\n";
    }
}

function pct(array $xs, float $p): float
{
    sort($xs);
    return $xs ? $xs[(int) min(count($xs) - 1, floor($p * (count($xs) - 1) + 0.5))] : NAN;
}

printf("\n%d holds, %d overlapping (must be 0); fencing tokens strictly increasing: %s\n", count($holds), $overlaps, $fencesRise ? 'yes' : 'NO');
printf("wait for the lock: median %.2f ms, p99 %.2f ms\n", pct($waits, 0.5), pct($waits, 0.99));
printf("handoff (release -> next waiter holds it), %d handoffs: median %.3f ms, p99 %.3f ms\n", count($gaps), pct($gaps, 0.5), pct($gaps, 0.99));

// Uncontended: one process, acquire + release in a loop.
$lock = new DistributedLock('demo:solo', ttl: 5.0, dsn: $redis['dsn']);
$n = 20000;
$start = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $lock->acquire();
    $lock->release();
}
$secs = (hrtime(true) - $start) / 1e9;
printf("uncontended acquire+release, one process: %d ops in %.2f s = %.0f ops/s (%.1f us each)\n", $n, $secs, $n / $secs, $secs / $n * 1e6);

exit($overlaps === 0 && $fencesRise ? 0 : 1);
