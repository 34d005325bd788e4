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

$blocks = [];
foreach ($specs as $spec) {
    [$lib, $where] = explode('@', $spec) + ['', 'tcp'];
    if ($lib === 'floor') {
        [$host, $port] = explode(':', (string) getenv('BENCH_REDIS'));
        $blocks[$spec] = fn () => floor_pairs($host, $port, $per);
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

$out = ['rates' => array_map('median', $rates), 'ratios' => []];
foreach ($specs as $a) {
    foreach ($specs as $b) {
        if ($a !== $b) {
            $out['ratios']["$a/$b"] = median(array_map(fn ($x, $y) => $x / $y, $rates[$a], $rates[$b]));
        }
    }
}
echo json_encode($out), "\n";
