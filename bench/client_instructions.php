<?php
// The client's CPU per lock pair, as instructions (valgrind's callgrind): the lock loop
// (lock_loop.php) run twice under callgrind, 1,000 and 3,000 pairs, each process counted whole
// (PHP, the extension, libc, every thread); the difference over 2,000 pairs leaves out startup,
// warm-up and shutdown. Instructions, not seconds: the same figure on a quiet machine or a busy
// one, so a change of a few per cent shows (wall rates here move by 10% between hours).
// argv: the PHP command line to run lock_loop.php with (after '--'), libs (comma-separated).
// Env: BENCH_WHERE (tcp, the default, or cluster), BENCH_REDIS (host:port), BENCH_SEEDS (a cluster's
// host:port,...). Prints JSON {lib: instructions per pair}.
$sep = array_search('--', $argv, true);
$sep !== false || exit("usage: client_instructions.php LIBS -- PHP [ARGS...]\n");
$libs = explode(',', $argv[1]);
$php = array_slice($argv, $sep + 1);
$where = getenv('BENCH_WHERE') ?: 'tcp';

$instructions = function (string $lib, int $n) use ($php, $where): int {
    $cmd = ['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null', ...$php,
        __DIR__ . '/lock_loop.php', $lib, $where, (string) $n];
    $proc = proc_open($cmd, [1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes);
    $err = stream_get_contents($pipes[2]);
    $code = proc_close($proc);
    // "==PID== Collected : N", the process's whole count.
    preg_match('/Collected : (\d+)/', $err, $m) && $code === 0
        || throw new RuntimeException("callgrind failed for $lib ($code):\n$err");
    return (int) $m[1];
};
$out = [];
foreach ($libs as $lib) {
    $out[$lib] = intdiv($instructions($lib, 3000) - $instructions($lib, 1000), 2000);
}
echo json_encode($out), "\n";
