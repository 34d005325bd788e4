<?php
// Scenario 4's ratios, paired: several lock loops in one process, in turn, in short blocks
// (rounds of one block each, the order rotated every round), each ratio the median of the
// rounds' ratios. Separate processes run seconds apart, and on this VM their rates drift by
// ±10% between runs of the same loop (docs/benchmarks.md); blocks a fraction of a second apart
// in one process see the same drift, so it cancels out of their ratio.
// argv: rounds, pairs per block, specs (comma-separated lib@where, as lock_loop.php's lib and
// where; floor@tcp is redis-benchmark -c 1 running SET NX PX, then a compare-and-delete EVAL,
// as the make bench floor row). Endpoints as lock_loop.php. Prints JSON {"rates": {spec:
// median pairs/s}, "ratios": {"a/b": median of the rounds' a/b}}.
[$_, $rounds, $per, $specs] = $argv;
[$rounds, $per, $specs] = [(int) $rounds, (int) $per, explode(',', $specs)];
require __DIR__ . '/loop_ops.php';

/** A block of $per pairs of the floor: redis-benchmark's own rate for each command. */
function floor_block(int $per): float
{
    [$host, $port] = explode(':', (string) getenv('BENCH_REDIS'));
    $cad = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';
    $rate = function (array $command) use ($host, $port, $per): float {
        $cmd = ['redis-benchmark', '-h', $host, '-p', $port, '-c', '1', '-n', (string) $per, '--csv', ...$command];
        $csv = (string) shell_exec(implode(' ', array_map('escapeshellarg', $cmd)));
        // The last line's last seven fields are numbers, rps first.
        $lines = array_values(array_filter(explode("\n", trim($csv))));
        preg_match_all('/"([0-9.]+)"/', (string) end($lines), $m);
        count($m[1]) >= 7 || throw new RuntimeException("redis-benchmark: $csv");
        return (float) $m[1][count($m[1]) - 7];
    };
    return 1 / (1 / $rate(['SET', 'bench:floor', 'v', 'NX', 'PX', '30000']) + 1 / $rate(['EVAL', $cad, '1', 'bench:floor', 'v']));
}

$blocks = [];
foreach ($specs as $spec) {
    [$lib, $where] = explode('@', $spec) + ['', 'tcp'];
    if ($lib === 'floor') {
        $blocks[$spec] = fn () => floor_block($per);
        continue;
    }
    $op = loop_op($lib, $where);
    for ($i = 0; $i < 200; $i++) {
        $op(); // warm-up: connections, script caches
    }
    $blocks[$spec] = function () use ($op, $per): float {
        $t = hrtime(true);
        for ($i = 0; $i < $per; $i++) {
            $op();
        }
        return $per / ((hrtime(true) - $t) / 1e9);
    };
}

$rates = array_fill_keys($specs, []);
for ($r = 0; $r < $rounds; $r++) {
    $shift = $r % count($specs);
    foreach ([...array_slice($specs, $shift), ...array_slice($specs, 0, $shift)] as $spec) {
        $rates[$spec][] = $blocks[$spec]();
    }
}

function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return $n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2;
}

$out = ['rates' => array_map('median', $rates), 'ratios' => []];
foreach ($specs as $a) {
    foreach ($specs as $b) {
        if ($a !== $b) {
            $out['ratios']["$a/$b"] = median(array_map(fn ($x, $y) => $x / $y, $rates[$a], $rates[$b]));
        }
    }
}
echo json_encode($out), "\n";
