<?php
// What a native acquire would buy, measured before it is designed in (docs/benchmarks.md, "A native
// acquire, weighed"): one process, raw phpredis sending a lock pair three ways, in turn, in blocks,
// the order rotated every round: raw phpredis's own pair (SET NX PX, then a compare-and-delete
// EVALSHA); our two functions (FCALL acquire, FCALL release: what the extension sends); and a native
// acquire (SET NX PX and EXISTS of the queue and the readers, pipelined) before our FCALL release.
// The client is the same in all three, so the differences are Redis's. Starts its own Redis.
// argv: .so of the extension (its library is loaded once), rounds, pairs per block.
// Prints pairs/s (medians), Redis's CPU per pair (INFO cpu, all rounds) and ratios (medians of rounds).
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/loop_ops.php';

[$_, $so] = $argv + [null, null];
$so !== null || exit("usage: native_probe.php SO [ROUNDS] [PAIRS]\n");
$rounds = (int) ($argv[2] ?? 40);
$per = (int) ($argv[3] ?? 1000);
$redis = rl_start_redis();
$port = $redis['port'];
// PROBE_PLACED=1: Redis on CPU 0, this client on CPU nproc-1 (as make bench's 4p. rows; it assumes
// CPUs numbered from 0, which make bench does not).
if (getenv('PROBE_PLACED')) {
    $cpus = trim((string) shell_exec('nproc'));
    exec('taskset -a -pc 0 ' . (int) $redis['pid'] . ' >/dev/null && taskset -pc ' . ((int) $cpus - 1) . ' ' . getmypid() . ' >/dev/null', $o, $placed);
    $placed === 0 || exit("PROBE_PLACED: taskset failed\n");
}
$r = new Redis();
$r->connect('127.0.0.1', $port);
$h = lease_library($r, $so, $port) ?? exit("no library loaded by $so\n");
$sha = $r->script('load', BENCH_CAS);
$k = 'lock:{probe}';
$ops = [
    'phpredis SET + CAS' => function () use ($r, $sha) {
        $t = bin2hex(random_bytes(16));
        $r->set('probe:raw', $t, ['nx', 'px' => 30000]);
        $r->evalSha($sha, ['probe:raw', $t], 1) === 1 || exit("raw pair failed\n");
    },
    'our two FCALLs' => function () use ($r, $h, $k) {
        $t = bin2hex(random_bytes(16));
        fcall_acquire($r, $h, $k, $t, 0) === 1 || exit("FCALL acquire failed\n");
        fcall_release($r, $h, $k, $t) === 1 || exit("FCALL release failed\n");
    },
    'native SET + EXISTS' => function () use ($r, $h, $k) {
        $t = bin2hex(random_bytes(16));
        $x = $r->multi(Redis::PIPELINE)->set($k, "$t:", ['nx', 'px' => 30000])->exists("$k:waiters", "$k:holders")->exec();
        ($x[0] === true && $x[1] === 0) || exit("native acquire failed\n");
        fcall_release($r, $h, $k, $t) === 1 || exit("FCALL release failed\n");
    },
];
foreach ($ops as $op) {
    for ($i = 0; $i < 200; $i++) {
        $op();
    }
}
$cpu = fn (): float => redis_cpu_seconds((string) $r->rawCommand('INFO', 'cpu')) * 1e6;
$rates = $spent = [];
for ($round = 0; $round < $rounds; $round++) {
    $names = array_keys($ops);
    for ($j = 0; $j < $round % count($names); $j++) {
        $names[] = array_shift($names);
    }
    foreach ($names as $name) {
        $c = $cpu();
        $t = hrtime(true);
        for ($i = 0; $i < $per; $i++) {
            $ops[$name]();
        }
        $rates[$name][] = $per / ((hrtime(true) - $t) / 1e9);
        $spent[$name] = ($spent[$name] ?? 0) + $cpu() - $c;
    }
}
$ratio = fn (string $a, string $b): float => median(array_map(fn ($x, $y) => $x / $y, $rates[$a], $rates[$b]));
printf("%d rounds of %d pairs, medians\n", $rounds, $per);
foreach (array_keys($ops) as $name) {
    printf("  %-20s %6.0f pairs/s  Redis CPU %5.1f µs/pair  vs raw phpredis %.3f\n", $name, median($rates[$name]),
        $spent[$name] / ($rounds * $per), $ratio($name, 'phpredis SET + CAS'));
}
printf("  native / our FCALLs: %.3f\n", $ratio('native SET + EXISTS', 'our two FCALLs'));
