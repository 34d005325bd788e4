<?php
// Redis's time inside our functions, two builds side by side: for changes to the Lua scripts, whose
// cost the wall rates cannot show (a few µs in 150). Starts its own Redis, loads each build's library
// (their function names carry the code's hash), then runs one lock's four contended steps, the two
// builds' cycles alternated (A B B A ..., so neither always goes first): a fast acquire (A takes it), a queueing acquire (B waits), a release
// that grants (A's, to B) and a release with nobody waiting (B's); then a permit of a semaphore of 3
// (another permit held throughout) taken and released. Each step's time is INFO
// commandstats' FCALL usec before and after it (so it is Redis's own, not the round trip's).
// argv: so_a so_b [cycles]. Prints µs per call for each step and build (means: commandstats counts
// whole µs), and B/A. A step the change does not touch shows the spread (here: the release with
// nobody waiting, when only the queue's scripts changed).
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/loop_ops.php';

[$_, $soA, $soB] = $argv + [null, null, null];
$soB !== null || exit("usage: script_ab.php SO_A SO_B [CYCLES]\n");
$cycles = (int) ($argv[3] ?? 3000);
$redis = rl_start_redis();
$port = $redis['port'];
$r = new Redis();
$r->connect('127.0.0.1', $port);

// Each build's library, by the hash its function names carry.
$hash = [];
foreach (['A' => $soA, 'B' => $soB] as $build => $so) {
    $hash[$build] = lease_library($r, $so, $port)
        ?? exit("build $build ($so) loaded no library of its own: the same scripts as the other?\n");
}
$k = 'lock:{script_ab}';
$steps = ['fast acquire', 'queueing acquire', 'release that grants', 'release, nobody waits', 'permit acquire',
    'permit release'];
$sk = 'sem:{script_ab}:semaphore';
$r->zAdd("$sk:holders", (int) ((microtime(true) + 86400) * 1000), 'another'); // a permit held throughout
$took = [];
for ($i = 0; $i < 2 * $cycles; $i++) {
    $build = (($i & 1) ^ (($i >> 1) & 1)) ? 'B' : 'A';
    $h = $hash[$build];
    $a = bin2hex(random_bytes(16));
    $b = bin2hex(random_bytes(16));
    foreach ($steps as $n => $step) {
        if ($n === 3) {
            $r->lPop("$k:wake:$b"); // B's wake-up, as its BLPOP would take it
        }
        $t = commands_usec($r, ['fcall']);
        $reply = match ($n) {
            0 => fcall_acquire($r, $h, $k, $a, 0),
            1 => fcall_acquire($r, $h, $k, $b, 5000),
            2 => fcall_release($r, $h, $k, $a),
            3 => fcall_release($r, $h, $k, $b),
            // A semaphore of 3 permits, one held by another all along: the set is there to count.
            4 => fcall_acquire($r, $h, $sk, $a, 0, 3),
            5 => fcall_release($r, $h, $sk, $a, true),
        };
        $took[$build][$step][] = commands_usec($r, ['fcall']) - $t;
        // The steps are only comparable if both builds did the same work: the queueing acquire is
        // told busy ({0, pttl}), every other step answers 1.
        if ($n === 1 ? !(is_array($reply) && $reply[0] === 0) : ($n === 4 ? $reply !== [1, '0'] : $reply !== 1)) {
            exit("build $build, $step: unexpected reply " . json_encode($reply) . " " . $r->getLastError() . "\n");
        }
    }
}
$mean = fn (array $x): float => array_sum($x) / count($x);
printf("Redis µs per FCALL, %d cycles per build, alternated (INFO commandstats)\n", $cycles);
foreach ($steps as $step) {
    printf("  %-22s A %6.2f  B %6.2f  B/A %.3f\n", $step, $mean($took['A'][$step]), $mean($took['B'][$step]),
        $mean($took['B'][$step]) / $mean($took['A'][$step]));
}
