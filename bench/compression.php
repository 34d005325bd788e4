<?php
/*
 * `make bench`'s compression rows (issue 29): what session compression costs and
 * saves, beside phpredis doing the same where this PHP has phpredis 6.1+.
 *
 *   php bench/compression.php [--json=FILE]      (BENCH_REPS: repetitions, default 5)
 *
 * For a 4 KiB and a 64 KiB session (compressible, as real ones are: repeated
 * JSON-ish records with varying numbers) and each algorithm (none, lzf, lz4, zstd):
 * a child PHP process runs N locked session requests (session_start, change one
 * field, session_write_close) on one session, with redis_lease's native handler
 * and, beside it, phpredis's (redis.session.compression, locking on). Measured:
 * the bytes Redis stores for the session (STRLEN), Redis's own CPU per request
 * (utime + stime of redis-server from /proc, over the N requests) and the
 * client's wall time per request. Medians of BENCH_REPS repetitions, engines and
 * algorithms interleaved. Needs redis_lease loaded with REDIS_LEASE_SO set, and
 * phpredis (igbinary + redis) for its rows.
 */

require __DIR__ . '/../php-tests/inc/redis.inc';

const REQUESTS = ['4k' => 2000, '64k' => 500];
$reps = (int) (getenv('BENCH_REPS') ?: 5);
$json = null;
foreach (array_slice($argv, 1) as $a) {
    if (preg_match('/^--json=(.+)$/', $a, $m)) {
        $json = $m[1];
    }
}
$so = getenv('REDIS_LEASE_SO') ?: '';
if ($so === '' || !is_file($so)) {
    fwrite(STDERR, "set REDIS_LEASE_SO to the built extension\n");
    exit(2);
}
$phpredisProbe = escapeshellarg(PHP_BINARY) . ' -n -d extension=igbinary -d extension=redis -r '
    . escapeshellarg('echo version_compare(phpversion("redis"), "6.1.0", ">=") && ini_get("redis.session.compression") !== false ? "yes" : "no";')
    . ' 2>/dev/null';
$phpredis = trim((string) shell_exec($phpredisProbe)) === 'yes';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$pid = rl_redis_pid($srv['port']);

/** A session's data of about $bytes serialized bytes. */
function session_data(int $bytes): array
{
    $records = [];
    for ($i = 0; strlen(serialize($records)) < $bytes; $i++) {
        $records[] = ['id' => 1000 + $i, 'sku' => 'SKU-' . (7919 * $i % 10007), 'qty' => $i % 7,
            'seen' => '2026-12-02T10:' . sprintf('%02d', $i % 60) . ':00Z', 'tags' => ['cart', 'web']];
    }
    return ['cart' => $records];
}

/** Redis's CPU time so far, in microseconds. */
function redis_cpu_us(int $pid): float
{
    $f = explode(' ', substr((string) file_get_contents("/proc/$pid/stat"), strrpos((string) file_get_contents("/proc/$pid/stat"), ')') + 2));
    return ((int) $f[11] + (int) $f[12]) * 1e6 / 100; // utime + stime, in clock ticks of 1/100 s
}

/** Runs $n requests in a child; returns [wall seconds per request, stored bytes]. */
function run(string $engine, string $algo, string $size, int $n, string $so, int $port, RlRaw $raw): array
{
    $sid = bin2hex(random_bytes(16));
    $data = var_export(session_data($size === '4k' ? 4096 : 65536), true);
    $ini = $engine === 'phpredis'
        ? "-d extension=igbinary -d extension=redis -d session.save_handler=redis -d redis.session.locking_enabled=1"
            . " -d redis.session.compression=$algo -d session.save_path=tcp://127.0.0.1:$port"
        : '-d extension=' . escapeshellarg($so) . ' -d session.save_handler=redis_lease'
            . " -d redis_lease.session.compression=$algo -d session.save_path=redis://127.0.0.1:$port";
    $code = '$d = ' . $data . '; session_id("' . $sid . '"); $t = microtime(true);'
        . 'for ($i = 0; $i < ' . $n . '; $i++) { session_start(); $_SESSION = $d; $_SESSION["n"] = $i; session_write_close(); }'
        . 'echo (microtime(true) - $t) / ' . $n . ';';
    $cmd = escapeshellarg(PHP_BINARY) . " -n $ini -d session.use_cookies=0 -d session.cache_limiter= -r " . escapeshellarg($code);
    $wall = (float) shell_exec($cmd . ' 2>/dev/null');
    return [$wall, (int) $raw->cmd('STRLEN', 'PHPREDIS_SESSION:' . $sid)];
}

$engines = $phpredis ? ['redis_lease', 'phpredis'] : ['redis_lease'];
$samples = [];
for ($rep = 0; $rep < $reps; $rep++) {
    foreach (REQUESTS as $size => $n) {
        foreach (['none', 'lzf', 'lz4', 'zstd'] as $algo) {
            foreach ($engines as $engine) {
                $cpu0 = redis_cpu_us($pid);
                [$wall, $bytes] = run($engine, $algo, $size, $n, $so, $srv['port'], $raw);
                $cpu = (redis_cpu_us($pid) - $cpu0) / $n;
                $samples["$size|$algo|$engine"][] = [$wall * 1e6, $cpu, $bytes];
            }
        }
    }
}

$median = static function (array $v): float {
    sort($v);
    $n = count($v);
    return $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
};
$rows = [];
printf("session compression, %d repetitions, medians (PHP %s, %s)%s\n", $reps, PHP_VERSION,
    trim((string) $raw->cmd('INFO', 'server') ? explode("\r\n", $raw->cmd('INFO', 'server'))[1] ?? '' : ''),
    $phpredis ? ', beside phpredis ' . trim((string) shell_exec(escapeshellarg(PHP_BINARY) . ' -n -d extension=igbinary -d extension=redis -r "echo phpversion(\'redis\');"')) : ' (no phpredis 6.1+ here)');
printf("%-5s %-5s %-12s %12s %16s %16s\n", 'size', 'algo', 'engine', 'stored bytes', 'Redis CPU us/req', 'client us/req');
foreach ($samples as $k => $s) {
    [$size, $algo, $engine] = explode('|', $k);
    $row = ['size' => $size, 'algo' => $algo, 'engine' => $engine, 'bytes' => (int) $median(array_column($s, 2)),
        'redis_cpu_us' => round($median(array_column($s, 1)), 1), 'client_us' => round($median(array_column($s, 0)), 1)];
    $rows[] = $row;
    printf("%-5s %-5s %-12s %12d %16.1f %16.1f\n", $size, $algo, $engine, $row['bytes'], $row['redis_cpu_us'], $row['client_us']);
}
if ($json !== null) {
    file_put_contents($json, json_encode(['reps' => $reps, 'php' => PHP_VERSION, 'rows' => $rows], JSON_PRETTY_PRINT) . "\n");
}
