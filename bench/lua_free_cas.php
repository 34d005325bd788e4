<?php
/*
 * Does a Lua-free compare-and-set help? Valkey 8.1 has SET key value IFEQ old, Valkey 9 also
 * DELIFEQ key value; each is measured side by side with EVALSHA of the equivalent script, on a
 * private server (redis-server on the PATH: scripts/cells.sh exec CELL runs this in a cell):
 *
 *   scripts/cells.sh exec php8.5+valkey9.1 php /repo/bench/lua_free_cas.php
 *
 * 1. a loop of one client, one command per round trip (what a lock's release costs), both
 *    variants interleaved in ROUNDS rounds; medians of ops/s;
 * 2. the server's own time per command (INFO commandstats usec_per_call over the same loops);
 * 3. valkey-benchmark (redis-benchmark) -c 1, and -c 1 -P 16 (pipelined: the server's cost shows),
 *    the two variants alternated; medians of requests/s.
 * Compare-and-delete runs on a hit (the key holds the value: SET first, as a release follows an
 * acquire: both loops pay the same SET); compare-and-set on a hit (old = new, so every call hits).
 */
require __DIR__ . '/../php-tests/inc/redis.inc';

const ROUNDS = 7;
const N = 20000;
const CAD = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
const CAS = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('SET', KEYS[1], ARGV[2]) end return nil";

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$info = (string) $raw->cmd('INFO', 'server');
// Valkey also reports the Redis version it is compatible with (redis_version:7.2.4).
$server = preg_match('/^valkey_version:(\S+)/m', $info, $m) ? "Valkey $m[1]"
    : (preg_match('/^redis_version:(\S+)/m', $info, $m) ? "Redis $m[1]" : 'an unknown server');
$cad = $raw->cmd('SCRIPT', 'LOAD', CAD);
$cas = $raw->cmd('SCRIPT', 'LOAD', CAS);
$has = static function (string $cmd, string ...$args) use ($raw): bool {
    try {
        $raw->cmd($cmd, ...$args);
        return true;
    } catch (RlRedisError $e) {
        return false;
    }
};
$delifeq = $has('DELIFEQ', 'probe', 'x');
$ifeq = $has('SET', 'probe', 'x', 'IFEQ', 'x');
printf("%s, PHP %s; DELIFEQ: %s, SET IFEQ: %s; %d rounds of %d calls; medians\n", $server, PHP_VERSION,
    $delifeq ? 'yes' : 'no', $ifeq ? 'yes' : 'no', ROUNDS, N);

/** name => [calls to send per iteration (the measured command last)] */
$variants = [];
if ($delifeq) {
    $variants['SET + DELIFEQ'] = [['SET', 'k', 'v'], ['DELIFEQ', 'k', 'v']];
}
$variants['SET + EVALSHA compare-and-delete'] = [['SET', 'k', 'v'], ['EVALSHA', $cad, '1', 'k', 'v']];
if ($ifeq) {
    $variants['SET IFEQ (hit)'] = [['SET', 'k', 'v', 'IFEQ', 'v']];
}
$variants['EVALSHA compare-and-set (hit)'] = [['EVALSHA', $cas, '1', 'k', 'v', 'v']];
$raw->cmd('SET', 'k', 'v');

$median = static function (array $xs): float {
    sort($xs);
    return $xs[intdiv(count($xs), 2)];
};
$usec = static function () use ($raw): array {
    $out = [];
    foreach (explode("\n", (string) $raw->cmd('INFO', 'commandstats')) as $line) {
        if (preg_match('/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/', trim($line), $mm)) {
            $out[$mm[1]] = [(int) $mm[2], (int) $mm[3]];
        }
    }
    return $out;
};

// 1 and 2: one client loop.
$rates = $server_us = [];
for ($r = 0; $r < ROUNDS; $r++) {
    foreach ($variants as $name => $calls) {
        $measured = strtolower($calls[count($calls) - 1][0]);
        $before = $usec();
        $t = hrtime(true);
        for ($i = 0; $i < N; $i++) {
            foreach ($calls as $c) {
                $raw->cmd(...$c);
            }
        }
        $dt = (hrtime(true) - $t) / 1e9;
        $after = $usec();
        $rates[$name][] = N / $dt;
        $calls_n = $after[$measured][0] - ($before[$measured][0] ?? 0);
        $server_us[$name][] = ($after[$measured][1] - ($before[$measured][1] ?? 0)) / max(1, $calls_n);
    }
}
echo "\n1-2. one client, one command per round trip (PHP loop):\n";
printf("  %-36s %14s %26s\n", 'variant', 'iterations/s', 'server usec per measured call');
foreach ($variants as $name => $_) {
    printf("  %-36s %14s %26.2f\n", $name, number_format($median($rates[$name])), $median($server_us[$name]));
}

// 3. valkey-benchmark / redis-benchmark, fixed commands.
$bench = null;
foreach (['valkey-benchmark', 'redis-benchmark'] as $b) {
    if (trim((string) shell_exec('command -v ' . $b . ' 2>/dev/null')) !== '') {
        $bench = $b;
        break;
    }
}
if ($bench === null) {
    exit("no valkey-benchmark or redis-benchmark on the PATH\n");
}
$fixed = [];
if ($delifeq) {
    // The key is deleted by the first call: the others compare against a missing key. The hit
    // case is part 1's loop; here both variants take the same miss path.
    $fixed['DELIFEQ (key missing)'] = ['DELIFEQ', 'kb', 'v'];
    $fixed['EVALSHA compare-and-delete (key missing)'] = ['EVALSHA', $cad, '1', 'kb', 'v'];
}
if ($ifeq) {
    $fixed['SET IFEQ (hit)'] = ['SET', 'k', 'v', 'IFEQ', 'v'];
    $fixed['EVALSHA compare-and-set (hit)'] = ['EVALSHA', $cas, '1', 'k', 'v', 'v'];
}
foreach ([1, 16] as $pipeline) {
    $rps = [];
    for ($r = 0; $r < ROUNDS; $r++) {
        foreach ($fixed as $name => $cmd) {
            $line = sprintf('%s -h 127.0.0.1 -p %d -c 1 -P %d -n %d -q --csv %s 2>&1', $bench, $srv['port'],
                $pipeline, $pipeline > 1 ? 10 * N : N, implode(' ', array_map('escapeshellarg', $cmd)));
            $out = (string) shell_exec($line);
            // --csv: "test","rps",...; the last line holds the numbers.
            if (!preg_match_all('/^"[^"]*","([\d.]+)"/m', $out, $mm) || $mm[1] === []) {
                exit("cannot read $bench's output:\n$line\n$out\n");
            }
            $rps[$name][] = (float) end($mm[1]);
        }
    }
    echo "\n3. $bench -c 1 -P $pipeline (requests/s):\n";
    foreach ($fixed as $name => $_) {
        printf("  %-44s %12s\n", $name, number_format($median($rps[$name])));
    }
}
