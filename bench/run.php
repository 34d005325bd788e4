<?php
// `make bench`: every scenario against redis_lease and the anchors (PHP's files
// handler, phpredis 5.3.7, Symfony Lock's RedisStore, Laravel's redis lock), in one run on this
// machine; the framework rows run the frameworks' lock APIs on the bridge's stores (bridge/) beside them.
// Timings are noisy: each figure is the median of several interleaved repetitions,
// and ratios compare figures of the same run. Prints a table; writes JSON to
// bench/results/.
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
// median(), the floor, the lock loops' operations.
require __DIR__ . '/loop_ops.php';

$reps = (int) (getenv('BENCH_REPS') ?: 5);
$so = FpmPool::extensionPath(getenv('REDIS_LEASE_SO') ?: null);
$php = [PHP_BINARY, '-n', '-d', 'extension=igbinary', '-d', 'extension=redis', '-d', "extension=$so"];
$redis = rl_start_redis();
$port = $redis['port'];
$raw = new RlRaw($port);
// The same Redis behind TLS (a throwaway CA), and a cluster of three masters.
$tlsRedis = rl_start_redis_tls();
$ca = rl_pki() . '/ca.pem';
$cluster = fault_start_cluster(3, 0);
$endpoints = ['BENCH_REDIS' => "127.0.0.1:$port", 'BENCH_TLS' => "127.0.0.1:{$tlsRedis['tls_port']}",
    'BENCH_CA' => $ca, 'BENCH_SEEDS' => implode(',', fault_cluster_seeds($cluster))];
foreach ($endpoints as $k => $v) {
    putenv("$k=$v");
}
$files = sys_get_temp_dir() . '/redis_lease_bench_' . getmypid();
@mkdir($files);
register_shutdown_function(fn () => exec('rm -rf ' . escapeshellarg($files)));

function pct(array $xs, float $p): float
{
    sort($xs);
    return $xs[(int) min(count($xs) - 1, round($p * (count($xs) - 1)))];
}

function redis_cpu(RlRaw $raw): float
{
    return redis_cpu_seconds((string) $raw->cmd('INFO', 'cpu'));
}

/**
 * What $work (which does $ops operations) cost the Redis behind $raw, per operation, in µs: its CPU
 * (less what it spends idle in the same time) and its commands' own time (INFO commandstats: a
 * script's or function's time includes the commands it calls). The rest of the CPU is the round
 * trips themselves (reading, parsing, replying): see the PING row.
 */
function redis_cost(RlRaw $raw, callable $work, int $ops): array
{
    static $idle = null;
    if ($idle === null) {
        $c = redis_cpu($raw);
        usleep(1000000);
        $idle = max(0.0, redis_cpu($raw) - $c);
    }
    $raw->cmd('CONFIG', 'RESETSTAT');
    $c0 = redis_cpu($raw);
    $t0 = hrtime(true);
    $result = $work();
    $secs = (hrtime(true) - $t0) / 1e9;
    $cpu = redis_cpu($raw) - $c0 - $idle * $secs;
    $usec = 0;
    foreach (explode("\n", (string) $raw->cmd('INFO', 'commandstats')) as $line) {
        if (preg_match('/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/', trim($line), $m) && !in_array($m[1], ['info', 'config|resetstat'], true)) {
            $usec += (int) $m[2];
        }
    }
    return ['cpu_us' => $cpu * 1e6 / $ops, 'cmd_us' => $usec / $ops, 'result' => $result];
}

/** Medians of redis_cost() figures, over the repetitions. */
function cost_medians(array $costs): array
{
    return ['redis_cpu_us' => median(array_column($costs, 'cpu_us')), 'redis_cmd_us' => median(array_column($costs, 'cmd_us'))];
}

function say(string $fmt, ...$args): void
{
    vprintf($fmt, $args);
    flush();
}

$results = ['machine' => php_uname('n') . ' ' . php_uname('r'), 'cores' => (int) shell_exec('nproc'),
    'php' => PHP_VERSION, 'phpredis' => phpversion('redis') ?: '5.3.7', 'redis' => $raw->cmd('INFO', 'server'),
    'reps' => $reps, 'scenarios' => []];
preg_match('/redis_version:(\S+)/', $results['redis'], $m);
$results['redis'] = $m[1] ?? '?';

$pool = FpmPool::start([
    'max_children' => 16,
    'extensions' => ['igbinary', 'redis'],
    // phpredis 5.3.7 ignores stream[cafile] in a session save_path (redis_lease reads it): PHP's
    // default CA file is how phpredis's sessions trust the test CA.
    'ini' => ['session.gc_probability' => '0', 'max_execution_time' => '30', 'openssl.cafile' => $ca],
]);
$client = $pool->client();
$extra = $endpoints + ['BENCH_FILES' => $files];
$app = __DIR__ . '/app/session.php';
// Session ids may not hold '_' (the handlers' names do).
$sessionReq = fn (string $h, string $sid, $key, float $work = 0) => ['params' => FcgiClient::params($app,
    ['h' => $h, 'sid' => str_replace('_', '-', $sid), 'key' => $key, 'work_ms' => $work], $extra)];

// Warm every worker: connections and script caches.
foreach (['lease', 'lease_norenew', 'phpredis', 'phpredis_lock', 'files', 'lease_tls', 'phpredis_lock_tls', 'lease_cluster'] as $h) {
    $client->multi(array_map(fn ($i) => $sessionReq($h, "warm$h$i", 0), range(0, 63)), 30);
}

// ---- 1. Contended session: 100 concurrent requests, one session, 1 ms of work each.
say("1. contended session (100 concurrent requests on one session, 1 ms work, 16 workers)\n");
$handlers = ['lease', 'files', 'phpredis_lock', 'phpredis', 'lease_tls', 'phpredis_lock_tls', 'lease_cluster'];
$s1 = [];
for ($r = 0; $r < $reps; $r++) {
    foreach ($handlers as $h) {
        $sid = "s1$h" . bin2hex(random_bytes(8));
        $batch = array_map(fn ($i) => $sessionReq($h, $sid, $i, 1.0), range(0, 99));
        $t = hrtime(true);
        $responses = $client->multi($batch, 120);
        $wall = (hrtime(true) - $t) / 1e9;
        $check = $client->request($sessionReq($h, $sid, 'check')['params']);
        $s1[$h]['wall'][] = $wall;
        $s1[$h]['kept'][] = ($check->json()['keys'] ?? 1) - 1;
        $s1[$h]['failed'][] = count(array_filter($responses, fn ($x) => !$x->ok() || !($x->json()['started'] ?? false)));
    }
}
foreach ($handlers as $h) {
    $s1[$h] = ['wall_ms' => median($s1[$h]['wall']) * 1000, 'kept_min' => min($s1[$h]['kept']),
        'kept_max' => max($s1[$h]['kept']), 'failed' => array_sum($s1[$h]['failed'])];
    say("   %-18s %8.1f ms  kept %d-%d of 100\n", $h, $s1[$h]['wall_ms'], $s1[$h]['kept_min'], $s1[$h]['kept_max']);
}
$results['scenarios']['contended_session'] = $s1;

// ---- 2. Uncontended sessions at full load: 16 requests in flight, each on its own session.
say("2. uncontended sessions (16 in flight, a session each, 1600 requests)\n");
$s2 = $s2cost = [];
$handlers = ['lease', 'files', 'phpredis_lock', 'phpredis', 'lease_norenew'];
for ($r = 0; $r < $reps; $r++) {
    foreach ($handlers as $h) {
        $cost = redis_cost($raw, function () use ($client, $sessionReq, $h, $r): float {
            $t = hrtime(true);
            for ($wave = 0; $wave < 100; $wave++) {
                $client->multi(array_map(fn ($i) => $sessionReq($h, "s2$h$r$i", $wave), range(0, 15)), 30);
            }
            return 1600 / ((hrtime(true) - $t) / 1e9);
        }, 1600);
        $s2[$h][] = $cost['result'];
        $s2cost[$h][] = $cost;
    }
}
foreach ($handlers as $h) {
    $s2[$h] = ['req_per_s' => median($s2[$h])] + cost_medians($s2cost[$h]);
    say("   %-14s %8.0f req/s   Redis: %5.1f µs CPU, %5.1f µs in commands per request\n", $h, $s2[$h]['req_per_s'],
        $s2[$h]['redis_cpu_us'], $s2[$h]['redis_cmd_us']);
}
$results['scenarios']['uncontended_sessions'] = $s2;

// ---- 3. Redis commands (round trips) per locked session request, seen by MONITOR.
say("3. Redis round trips per locked session request\n");
$s3 = [];
foreach (['lease', 'phpredis_lock'] as $h) {
    $sid = "s3$h" . bin2hex(random_bytes(6));
    $client->request($sessionReq($h, $sid, 'first')['params']);
    $mon = stream_socket_client("tcp://127.0.0.1:$port");
    fwrite($mon, "MONITOR\r\n");
    fgets($mon);
    for ($i = 0; $i < 20; $i++) {
        $client->request($sessionReq($h, $sid, $i)['params']);
    }
    $raw->cmd('ECHO', 'bench-marker');
    stream_set_timeout($mon, 5);
    $cmds = [];
    while (($line = fgets($mon)) !== false && !str_contains($line, 'bench-marker')) {
        if (!str_contains($line, 'lua]') && preg_match('/\] "(\w+)"/', $line, $mm)) {
            $cmds[] = strtoupper($mm[1]);
        }
    }
    fclose($mon);
    $s3[$h] = ['round_trips_per_request' => count($cmds) / 20, 'commands' => array_count_values($cmds)];
    say("   %-14s %.1f round trips  %s\n", $h, count($cmds) / 20, json_encode(array_count_values($cmds)));
}
// A waiter: a request that finds the session locked queues (one script), sleeps in
// BLPOP and wakes holding the session (the release handed it over), then saves.
$sid = 's3w' . bin2hex(random_bytes(6));
$client->request($sessionReq('lease', $sid, 'first')['params']);
$mon = stream_socket_client("tcp://127.0.0.1:$port");
fwrite($mon, "MONITOR\r\n");
fgets($mon);
$waiters = [];
for ($i = 0; $i < 10; $i++) {
    $holder = $client->begin($sessionReq('lease', $sid, "h$i", 30.0)['params']);
    usleep(5000);
    $waiter = $client->begin($sessionReq('lease', $sid, "w$i")['params']);
    FcgiClient::await([$holder, $waiter], 10.0);
}
$raw->cmd('ECHO', 'bench-marker');
stream_set_timeout($mon, 5);
$byClient = [];
while (($line = fgets($mon)) !== false && !str_contains($line, 'bench-marker')) {
    if (!str_contains($line, 'lua]') && preg_match('/\[\d+ ([^\]]+)\] "(\w+)"/', $line, $mm)) {
        $byClient[$mm[1]][] = strtoupper($mm[2]);
    }
}
fclose($mon);
// Requests of one worker share its connection: each request is its commands up
// to its second script (open, then save); a waiter's have a BLPOP between.
$waiterTrips = [];
foreach ($byClient as $cmds) {
    $req = [];
    foreach ($cmds as $c) {
        $req[] = $c;
        if (count(array_keys($req, 'FCALL', true)) + count(array_keys($req, 'EVALSHA', true)) === 2) {
            if (in_array('BLPOP', $req, true)) {
                $waiterTrips[] = count($req);
            }
            $req = [];
        }
    }
}
$s3['lease_waiter'] = ['round_trips_per_request' => $waiterTrips ? median($waiterTrips) : null, 'samples' => count($waiterTrips),
    'critical_path_round_trips_per_handoff' => 0];
say("   %-14s %.1f round trips for a waiter (queue, BLPOP that returns holding the session, save; %d samples);"
    . " 0 round trips between a release and the waiter holding the lock\n",
    'lease waiter', $s3['lease_waiter']['round_trips_per_request'] ?? -1, count($waiterTrips));
$results['scenarios']['round_trips'] = $s3;

// ---- 4. DistributedLock acquire+release in a loop, one process.
say("4. acquire+release loop in one process (20000 pairs)\n");
$s4 = $s4cost = [];
$run = function (array $cmd): array {
    $out = shell_exec(implode(' ', array_map('escapeshellarg', $cmd)));
    return json_decode((string) $out, true) ?? throw new RuntimeException("failed: " . implode(' ', $cmd) . "\n$out");
};
// The framework rows: Laravel's Cache::lock() and Symfony's LockFactory on the bridge's stores (bridge/)
// and on their own Redis stores (phpredis), a new lock object per lock as applications write it.
$loops = ['lease tcp', 'lease_new tcp', 'lease_evalsha tcp', 'phpredis tcp', 'symfony tcp', 'symfony_new tcp', 'lease tls', 'phpredis tls',
    'lease cluster', 'phpredis cluster', 'laravel_lease tcp', 'laravel_redis tcp', 'symfony_lease tcp'];
// The floor: what Redis's own C client gets for the same two commands (SET NX PX, then a
// compare-and-delete EVAL), one connection, one at a time, as lock pairs per second; and redis-rs
// alone doing the same (examples/floor.rs): between that and the floor is redis-rs's share.
$floorBin = getenv('REDIS_LEASE_FLOOR') ?: dirname(__DIR__) . '/target/release/examples/floor';
// The lock loop again with the client and a Redis of its own on one CPU (taskset): no wake-up
// crosses CPUs, so the rate is what the two processes' CPU time allows. On this VM a wake-up
// across CPUs costs more than the work of a lock pair and scatters the rates above between runs;
// on one CPU they move by a few per cent.
$cpu = (string) max(0, (int) shell_exec('nproc') - 1);
$oneCpu = rl_start_redis();
exec("taskset -pc $cpu {$oneCpu['pid']} 2>&1", $tasksetOut, $pinned);
for ($r = 0; $r < $reps; $r++) {
    if ($pinned === 0) {
        foreach (['lease', 'phpredis'] as $lib) {
            $s4["$lib one-cpu"][] = $run(['env', "BENCH_REDIS=127.0.0.1:{$oneCpu['port']}", 'taskset', '-c', $cpu, ...$php,
                __DIR__ . '/lock_loop.php', $lib, 'tcp', '20000'])['ops_per_s'];
        }
    }
    foreach ($loops as $loop) {
        [$lib, $where] = explode(' ', $loop);
        $n = str_starts_with($lib, 'symfony') || str_starts_with($lib, 'laravel') ? '5000' : '20000';
        $loopRun = fn () => $run([...$php, __DIR__ . '/lock_loop.php', $lib, $where, $n])['ops_per_s'];
        if ($where !== 'tcp') {
            $s4[$loop][] = $loopRun();
            continue;
        }
        // With its 200 warm-up pairs.
        $cost = redis_cost($raw, $loopRun, (int) $n + 200);
        $s4[$loop][] = $cost['result'];
        $s4cost[$loop][] = $cost;
    }
    // What one round trip costs Redis, besides the command: a PING pair is two.
    $s4cost['ping pair'][] = redis_cost($raw, fn () => redis_benchmark_rps('127.0.0.1', (string) $port, 20000, ['PING']), 10000);
    $s4['floor tcp'][] = floor_pairs('127.0.0.1', (string) $port, 20000);
    if (is_executable($floorBin)) {
        $s4['redis-rs tcp'][] = $run([$floorBin, "127.0.0.1:$port", '20000'])['ops_per_s'];
    }
}
$loops = array_keys($s4);
foreach ($loops as $loop) {
    $s4[$loop] = ['ops_per_s' => median($s4[$loop])] + (isset($s4cost[$loop]) ? cost_medians($s4cost[$loop]) : []);
    say("   %-18s %8.0f ops/s%s\n", $loop, $s4[$loop]['ops_per_s'], isset($s4cost[$loop])
        ? sprintf('   Redis: %5.1f µs CPU, %5.1f µs in commands per pair', $s4[$loop]['redis_cpu_us'], $s4[$loop]['redis_cmd_us']) : '');
}
$s4['ping pair'] = cost_medians($s4cost['ping pair']);
say("   %-18s              Redis: %5.1f µs CPU, %5.1f µs in commands per pair\n", 'PING pair', $s4['ping pair']['redis_cpu_us'], $s4['ping pair']['redis_cmd_us']);
$results['scenarios']['lock_loop'] = $s4;

// ---- 4p. Scenario 4's ratios, paired and placed: the loops of one comparison in turn in one
// process, in blocks of 1,000 pairs (bench/paired_loop.php), the client on one CPU and every
// Redis on another (taskset). The rates above come from separate processes wherever the
// scheduler puts them: on this VM a loop runs 2-4x as fast when its client and Redis share a
// CPU (no wake-up across CPUs) as when they do not, so which processes happened to share one
// moved those ratios by ±10% from run to run. Here every loop runs as Redis's clients do on a
// server of their own, and the drift of the hour cancels out of each ratio. The targets against
// raw phpredis, the floor, TLS and the Cluster are judged on these rows (Symfony's stay above).
//
// The CPUs this process may use (a container's cpuset need not start at 0), and each server's own
// list, put back after.
preg_match('/^Cpus_allowed_list:\s*(\S+)/m', (string) @file_get_contents('/proc/self/status'), $m);
$allowed = [];
foreach (explode(',', $m[1] ?? '') as $range) {
    [$lo, $hi] = array_map('intval', explode('-', $range)) + [1 => null];
    $allowed = [...$allowed, ...range($lo, $hi ?? $lo)];
}
$servers = [$redis['pid'], $tlsRedis['pid'], ...array_column($cluster, 'pid')];
$own = [];
foreach ($servers as $pid) {
    // "pid 123's current affinity list: 0,1"
    exec("taskset -a -pc $pid 2>/dev/null", $out, $rc);
    if ($rc === 0 && preg_match('/list:\s*(\S+)\s*$/', (string) end($out), $l)) {
        $own[$pid] = $l[1];
    }
    $out = [];
}
$placed = count($allowed) >= 2 && count($own) === count($servers);
$place = function (?int $cpu) use ($own): bool {
    $ok = true;
    foreach ($own as $pid => $list) {
        exec('taskset -a -pc ' . escapeshellarg($cpu === null ? $list : (string) $cpu) . " $pid 2>&1", $out, $rc);
        $ok = $ok && $rc === 0;
    }
    return $ok;
};
$paired = ['tcp' => 'lease@tcp,lease_new@tcp,phpredis@tcp,floor@tcp', 'tls' => 'lease@tls,phpredis@tls',
    'cluster' => 'lease@cluster,lease@tcp,phpredis@cluster'];
$s4p = ['rates' => [], 'ratios' => []];
try {
    $placed = $placed && $place($allowed[0]);
    say("4p. lock loops paired in one process, %s (20 rounds of 1,000 pairs)\n",
        $placed ? 'client and Redis on separate CPUs' : 'NOT placed (no taskset or one CPU)');
    for ($r = 0; $r < $reps; $r++) {
        foreach ($paired as $group => $specs) {
            $client = $placed ? ['taskset', '-c', (string) end($allowed)] : [];
            $out = $run([...$client, ...$php, __DIR__ . '/paired_loop.php', '20', '1000', $specs]);
            foreach ($out['ratios'] as $pair => $ratio) {
                $s4p['ratios'][$pair][] = $ratio;
            }
            foreach ($out['rates'] as $spec => $rate) {
                $s4p['rates']["$spec ($group)"][] = $rate;
            }
        }
    }
} finally {
    $place(null);
}
$s4p = ['placed' => $placed, 'rates' => array_map('median', $s4p['rates']), 'ratios' => array_map('median', $s4p['ratios'])];
foreach ($s4p['rates'] as $spec => $rate) {
    say("   %-24s %8.0f ops/s\n", $spec, $rate);
}
$results['scenarios']['lock_loop_paired'] = $s4p;

// ---- 4c. The client's CPU per lock pair, as instructions (callgrind): the same figure in a quiet hour
// or a busy one, where the wall rates above move by 10%.
$s4c = null;
if (trim((string) shell_exec('command -v valgrind')) !== '') {
    say("4c. client instructions per lock pair (callgrind, 3,000 pairs less 1,000)\n");
    $s4c = $run([PHP_BINARY, __DIR__ . '/client_instructions.php', 'lease,lease_new,phpredis', '--', ...$php]);
    // The same on the cluster (raw phpredis: RedisCluster): what routing costs the client.
    putenv('BENCH_WHERE=cluster');
    foreach ($run([PHP_BINARY, __DIR__ . '/client_instructions.php', 'lease,phpredis', '--', ...$php]) as $lib => $n) {
        $s4c["$lib cluster"] = $n;
    }
    putenv('BENCH_WHERE');
    foreach ($s4c as $lib => $n) {
        say("   %-18s %8d instructions per pair\n", $lib, $n);
    }
    $results['scenarios']['client_instructions'] = $s4c;
}

// ---- 5. Contended DistributedLock: 8 processes, lock, 1 ms of work, unlock.
say("5. contended lock (8 processes: lock, 1 ms work, unlock)\n");
$s5 = [];
$contend = function (string $lib, int $each) use ($php, $port, $raw): array {
    $n = 8;
    if ($lib === 'ring') {
        // The last hold of a run hands the ring's token on to a process that has finished: cleared, or
        // the next run on this Redis would start with two tokens.
        $raw->cmd('DEL', ...array_map(fn (int $i) => "bench:contend:ring:$i", range(0, $n - 1)));
    }
    $procs = $pipes = [];
    $errors = tempnam(sys_get_temp_dir(), 'bench-contend');
    for ($i = 0; $i < $n; $i++) {
        $procs[$i] = proc_open([...$php, __DIR__ . '/lock_contend.php', $lib, (string) $port, (string) $each, (string) $i, (string) $n],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $errors, 'a']], $pipes[$i]);
    }
    $t = microtime(true);
    foreach ($pipes as $p) {
        fwrite($p[0], "go\n");
    }
    $holds = [];
    foreach ($pipes as $i => $p) {
        foreach (explode("\n", trim(stream_get_contents($p[1]))) as $line) {
            if ($line !== '') {
                $holds[] = array_map('floatval', explode(' ', $line));
            }
        }
        if (proc_close($procs[$i]) !== 0) {
            throw new RuntimeException("a $lib contender failed: " . file_get_contents($errors));
        }
    }
    unlink($errors);
    $wall = microtime(true) - $t;
    usort($holds, fn ($a, $b) => $a[1] <=> $b[1]);
    $gaps = [];
    for ($i = 1; $i < count($holds); $i++) {
        if ($holds[$i][0] < $holds[$i - 1][2]) {       // was waiting when the previous holder released
            $gaps[] = ($holds[$i][1] - $holds[$i - 1][2]) * 1000;
        }
    }
    return ['holds' => count($holds), 'per_s' => count($holds) / $wall, 'gaps' => $gaps];
};
// Holds per process: fewer for the polling locks (Symfony's RedisStore 100 ms, Laravel's redis lock 250 ms).
// ring: no lock, the floor of any handoff through Redis on this machine (one LPUSH wakes the next
// process's BLPOP); it moves with the machine's wake-up latency as much as the lock does.
$contenders = ['lease' => 50, 'ring' => 50, 'symfony' => 6, 'symfony_lease' => 50, 'laravel_lease' => 50, 'laravel_redis' => 3];
for ($r = 0; $r < $reps; $r++) {
    foreach ($contenders as $lib => $each) {
        $x = $contend($lib, $each);
        $s5[$lib]['per_s'][] = $x['per_s'];
        $s5[$lib]['gaps'] = array_merge($s5[$lib]['gaps'] ?? [], $x['gaps']);
    }
}
foreach (array_keys($contenders) as $lib) {
    $g = $s5[$lib]['gaps'];
    $s5[$lib] = ['holds_per_s' => median($s5[$lib]['per_s']), 'handoffs' => count($g),
        'gap_median_ms' => $g ? median($g) : null, 'gap_p99_ms' => $g ? pct($g, 0.99) : null];
    say("   %-14s %8.1f holds/s  handoff gap median %.3f ms, p99 %.3f ms (%d handoffs)\n", $lib,
        $s5[$lib]['holds_per_s'], $s5[$lib]['gap_median_ms'], $s5[$lib]['gap_p99_ms'], $s5[$lib]['handoffs']);
}
$results['scenarios']['contended_lock'] = $s5;
$pool->stop();

// ---- 6. Memory: RSS of a php-fpm worker with and without the extension, after 10,000 requests.
say("6. worker RSS after 10000 requests (4 workers)\n");
$s6 = [];
foreach (['without' => 'hello.php', 'with' => 'work.php'] as $variant => $script) {
    $p = FpmPool::start(['max_children' => 4, 'without_redis_lease' => $variant === 'without',
        'ini' => ['session.gc_probability' => '0']]);
    $c = $p->client();
    for ($wave = 0; $wave < 625; $wave++) {
        $c->multi(array_map(fn ($i) => ['params' => FcgiClient::params(__DIR__ . "/app/$script", ['n' => $wave * 16 + $i], $extra)], range(0, 15)), 30);
    }
    // RSS counts the pages of shared libraries a worker has mapped (the extension's code is one
    // copy in the page cache for every worker); PSS divides shared pages among their users, and
    // USS is what the worker alone has (what killing it would free).
    $rss = $pss = $uss = [];
    foreach ($p->workerPids() as $pid) {
        preg_match('/VmRSS:\s+(\d+) kB/', (string) @file_get_contents("/proc/$pid/status"), $mm);
        $rss[] = (int) ($mm[1] ?? 0);
        $rollup = (string) @file_get_contents("/proc/$pid/smaps_rollup");
        preg_match_all('/^(Pss|Private_Clean|Private_Dirty):\s+(\d+)/m', $rollup, $mm, PREG_SET_ORDER);
        $kib = array_column($mm, 2, 1);
        $pss[] = (int) ($kib['Pss'] ?? 0);
        $uss[] = (int) ($kib['Private_Clean'] ?? 0) + (int) ($kib['Private_Dirty'] ?? 0);
    }
    $s6[$variant] = ['rss_kib_median' => median($rss), 'rss_kib' => $rss, 'pss_kib_median' => median($pss),
        'uss_kib_median' => median($uss)];
    $p->stop();
    say("   %-8s %6.0f KiB median worker RSS, %6.0f PSS, %6.0f USS\n", $variant, $s6[$variant]['rss_kib_median'],
        $s6[$variant]['pss_kib_median'], $s6[$variant]['uss_kib_median']);
}
$s6['extra_kib'] = $s6['with']['rss_kib_median'] - $s6['without']['rss_kib_median'];
$s6['extra_pss_kib'] = $s6['with']['pss_kib_median'] - $s6['without']['pss_kib_median'];
$s6['extra_uss_kib'] = $s6['with']['uss_kib_median'] - $s6['without']['uss_kib_median'];
$results['scenarios']['memory'] = $s6;

// ---- 7. Read locks and semaphores (3 permits): acquire+release in a loop, one process, against
// Symfony Lock 5.4's RedisStore read locks (saveRead) and Symfony Semaphore 5.4's RedisStore.
say("7. read lock and semaphore (3 permits): acquire+release loop in one process\n");
$s7 = $s7cost = [];
$loops7 = ['lease_read', 'symfony_read', 'lease_sem', 'symfony_sem'];
for ($r = 0; $r < $reps; $r++) {
    foreach ($loops7 as $lib) {
        $n7 = str_starts_with($lib, 'symfony') ? 5000 : 20000;
        $cost = redis_cost($raw, fn () => $run([...$php, __DIR__ . '/shared_loop.php', $lib, (string) $n7])['ops_per_s'], $n7 + 200);
        $s7[$lib][] = $cost['result'];
        $s7cost[$lib][] = $cost;
    }
}
foreach ($loops7 as $lib) {
    $s7[$lib] = ['ops_per_s' => median($s7[$lib])] + cost_medians($s7cost[$lib]);
    say("   %-18s %8.0f ops/s   Redis: %5.1f µs CPU, %5.1f µs in commands per pair\n", $lib, $s7[$lib]['ops_per_s'],
        $s7[$lib]['redis_cpu_us'], $s7[$lib]['redis_cmd_us']);
}
$results['scenarios']['shared_loop'] = $s7;

// ---- 8. Contended read/write lock (a write one time in four, the same draws for both libraries)
// and semaphore (2 permits): 8 processes, 1 ms of work per hold. Symfony blocks by polling every
// 100 +- 10 ms (its Lock's blocking loop; Semaphore 5.4 has none, so shared_contend.php polls alike).
// A handoff is a hold that waited (got >= asked + 1 ms) and got in after a release made while it
// waited; its gap runs from the last release before it got in.
say("8. contended read/write lock (1 write in 4) and semaphore of 2 (8 processes, 1 ms work)\n");
$contendShared = function (string $lib, int $each) use ($php, $port): array {
    $procs = $pipes = [];
    $errors = tempnam(sys_get_temp_dir(), 'bench-contend');
    for ($i = 0; $i < 8; $i++) {
        $procs[$i] = proc_open([...$php, __DIR__ . '/shared_contend.php', $lib, (string) $port, (string) $each, (string) $i],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $errors, 'a']], $pipes[$i]);
    }
    $t = microtime(true);
    foreach ($pipes as $p) {
        fwrite($p[0], "go\n");
    }
    $holds = [];
    foreach ($pipes as $i => $p) {
        foreach (explode("\n", trim(stream_get_contents($p[1]))) as $line) {
            if ($line !== '') {
                $holds[] = array_map('floatval', array_slice(explode(' ', $line), 0, 3));
            }
        }
        if (proc_close($procs[$i]) !== 0) {
            throw new RuntimeException("a $lib contender failed: " . file_get_contents($errors));
        }
    }
    unlink($errors);
    $wall = microtime(true) - $t;
    $releases = array_column($holds, 2);
    sort($releases);
    $gaps = [];
    foreach ($holds as [$asked, $got]) {
        if ($got - $asked < 0.001) {
            continue;
        }
        $last = null;
        foreach ($releases as $rel) {
            if ($rel > $got) {
                break;
            }
            $last = $rel;
        }
        if ($last !== null && $last > $asked) {
            $gaps[] = ($got - $last) * 1000;
        }
    }
    return ['per_s' => count($holds) / $wall, 'gaps' => $gaps];
};
$s8 = [];
$contenders8 = ['lease_rw' => 50, 'symfony_rw' => 6, 'lease_sem' => 50, 'symfony_sem' => 6];
for ($r = 0; $r < $reps; $r++) {
    foreach ($contenders8 as $lib => $each) {
        $x = $contendShared($lib, $each);
        $s8[$lib]['per_s'][] = $x['per_s'];
        $s8[$lib]['gaps'] = array_merge($s8[$lib]['gaps'] ?? [], $x['gaps']);
    }
}
foreach (array_keys($contenders8) as $lib) {
    $g = $s8[$lib]['gaps'];
    $s8[$lib] = ['holds_per_s' => median($s8[$lib]['per_s']), 'handoffs' => count($g),
        'gap_median_ms' => $g ? median($g) : null, 'gap_p99_ms' => $g ? pct($g, 0.99) : null];
    say("   %-14s %8.1f holds/s  handoff gap median %.3f ms, p99 %.3f ms (%d handoffs)\n", $lib,
        $s8[$lib]['holds_per_s'], $s8[$lib]['gap_median_ms'], $s8[$lib]['gap_p99_ms'], $s8[$lib]['handoffs']);
}
$results['scenarios']['contended_shared'] = $s8;
$sharedRows = [
    ['7. read-lock loop: ops/s vs Symfony Lock (acquireRead, saveRead)', $s7['lease_read']['ops_per_s'] / $s7['symfony_read']['ops_per_s'],
        sprintf('(%.0f vs %.0f ops/s)', $s7['lease_read']['ops_per_s'], $s7['symfony_read']['ops_per_s'])],
    ['7. semaphore loop: ops/s vs Symfony Semaphore', $s7['lease_sem']['ops_per_s'] / $s7['symfony_sem']['ops_per_s'],
        sprintf('(%.0f vs %.0f ops/s)', $s7['lease_sem']['ops_per_s'], $s7['symfony_sem']['ops_per_s'])],
    ['8. contended read/write lock: handoff gap median (ms)', $s8['lease_rw']['gap_median_ms'],
        sprintf('(p99 %.2f; Symfony: median %.1f, p99 %.1f)', $s8['lease_rw']['gap_p99_ms'], $s8['symfony_rw']['gap_median_ms'], $s8['symfony_rw']['gap_p99_ms'])],
    ['8. contended read/write lock: holds/s vs Symfony', $s8['lease_rw']['holds_per_s'] / $s8['symfony_rw']['holds_per_s'],
        sprintf('(%.0f vs %.0f holds/s)', $s8['lease_rw']['holds_per_s'], $s8['symfony_rw']['holds_per_s'])],
    ['8. contended semaphore: handoff gap median (ms)', $s8['lease_sem']['gap_median_ms'],
        sprintf('(p99 %.2f; Symfony: median %.1f, p99 %.1f)', $s8['lease_sem']['gap_p99_ms'], $s8['symfony_sem']['gap_median_ms'], $s8['symfony_sem']['gap_p99_ms'])],
    ['8. contended semaphore: holds/s vs Symfony', $s8['lease_sem']['holds_per_s'] / $s8['symfony_sem']['holds_per_s'],
        sprintf('(%.0f vs %.0f holds/s)', $s8['lease_sem']['holds_per_s'], $s8['symfony_sem']['holds_per_s'])],
];

// ---- The table: each target with the measured ratio.
$r1 = $s1['lease']['wall_ms'];
// Redis's CPU and its commands' time per operation, ours vs the anchor's, in µs.
$cpuVs = fn (array $a, array $b) => sprintf('(CPU %.1f vs %.1f µs; commands %.1f vs %.1f µs)',
    $a['redis_cpu_us'], $b['redis_cpu_us'], $a['redis_cmd_us'], $b['redis_cmd_us']);
// Scenario 4's targets against raw phpredis, the floor, TLS and the Cluster are judged on the paired,
// placed rows (4p.); the unplaced ones are kept beside them.
$unplaced = '(the 4p. row below is the measure)';
$pr = fn (string $pair): float => $s4p['ratios'][$pair];
// Unplaced (no taskset, one CPU), the 4p. rows are still paired, and say so.
$p4 = $s4p['placed'] ? '4p.' : '4p. (NOT placed)';
$rows = [
    ['1. contended session: wall vs files', $r1 / $s1['files']['wall_ms'], '<= 1.05x'],
    ['1. contended session: wall vs phpredis+locking', $r1 / $s1['phpredis_lock']['wall_ms'], '<= 0.75x'],
    ['1. contended session: keys kept (worst round)', $s1['lease']['kept_min'], '100 of 100'],
    ['2. uncontended sessions: req/s vs phpredis (no locking)', $s2['lease']['req_per_s'] / $s2['phpredis']['req_per_s'], '>= 1.0x'],
    ['2. uncontended sessions: req/s, renewed (default) vs not', $s2['lease']['req_per_s'] / $s2['lease_norenew']['req_per_s'], '>= 0.97x'],
    ['3. round trips per locked request', $s3['lease']['round_trips_per_request'], '<= 2 (phpredis: ' . $s3['phpredis_lock']['round_trips_per_request'] . ')'],
    ['3. round trips per contended request (a waiter, MONITOR)', $s3['lease_waiter']['round_trips_per_request'], '<= 2 (0 between release and holding)'],
    ['R. Redis CPU per lock pair vs raw phpredis (reused object)', $s4['lease tcp']['redis_cpu_us'] / $s4['phpredis tcp']['redis_cpu_us'], '<= 1.30x ' . $cpuVs($s4['lease tcp'], $s4['phpredis tcp'])],
    ['R. Redis CPU per lock pair vs raw phpredis (new object per lock)', $s4['lease_new tcp']['redis_cpu_us'] / $s4['phpredis tcp']['redis_cpu_us'], '<= 1.30x ' . $cpuVs($s4['lease_new tcp'], $s4['phpredis tcp'])],
    ['R. Redis CPU per lock pair by EVALSHA (functions=0) vs raw phpredis', $s4['lease_evalsha tcp']['redis_cpu_us'] / $s4['phpredis tcp']['redis_cpu_us'], $cpuVs($s4['lease_evalsha tcp'], $s4['phpredis tcp'])],
    ['R. Redis CPU per lock pair, Symfony RedisStore vs raw phpredis', $s4['symfony_new tcp']['redis_cpu_us'] / $s4['phpredis tcp']['redis_cpu_us'], $cpuVs($s4['symfony_new tcp'], $s4['phpredis tcp'])],
    ['R. Redis CPU per locked session request vs phpredis\'s locking', $s2['lease']['redis_cpu_us'] / $s2['phpredis_lock']['redis_cpu_us'], '<= 1.0x ' . $cpuVs($s2['lease'], $s2['phpredis_lock'])],
    ['R. Redis CPU per locked session request vs phpredis, no locking', $s2['lease']['redis_cpu_us'] / $s2['phpredis']['redis_cpu_us'], $cpuVs($s2['lease'], $s2['phpredis'])],
    ['R. Redis CPU per read-lock pair vs Symfony RedisStore', $s7['lease_read']['redis_cpu_us'] / $s7['symfony_read']['redis_cpu_us'], $cpuVs($s7['lease_read'], $s7['symfony_read'])],
    ['R. Redis CPU per semaphore pair vs Symfony Semaphore', $s7['lease_sem']['redis_cpu_us'] / $s7['symfony_sem']['redis_cpu_us'], $cpuVs($s7['lease_sem'], $s7['symfony_sem'])],
    ['R. Redis CPU per PING pair (two round trips, no work; µs)', $s4['ping pair']['redis_cpu_us'], '(what any 2-round-trip lock costs Redis at least)'],
    ['4. lock loop: ops/s vs raw phpredis (separate processes, unplaced)', $s4['lease tcp']['ops_per_s'] / $s4['phpredis tcp']['ops_per_s'], $unplaced],
    ["$p4 lock loop: ops/s vs raw phpredis", $pr('lease@tcp/phpredis@tcp'), '>= 0.95x'],
    ['4. lock loop: ops/s vs Symfony Lock', $s4['lease tcp']['ops_per_s'] / $s4['symfony tcp']['ops_per_s'], '>= 3x'],
    ['4. lock loop, new object per lock: ops/s vs raw phpredis (separate processes, unplaced)', $s4['lease_new tcp']['ops_per_s'] / $s4['phpredis tcp']['ops_per_s'], $unplaced],
    ["$p4 lock loop, new object per lock: ops/s vs raw phpredis", $pr('lease_new@tcp/phpredis@tcp'), '>= 0.95x'],
    ['4. lock loop, client and Redis on one CPU: ops/s vs raw phpredis', isset($s4['lease one-cpu']) ? $s4['lease one-cpu']['ops_per_s'] / $s4['phpredis one-cpu']['ops_per_s'] : 'no taskset', isset($s4['lease one-cpu']) ? sprintf('(%.0f vs %.0f ops/s: no cross-CPU wake-ups)', $s4['lease one-cpu']['ops_per_s'], $s4['phpredis one-cpu']['ops_per_s']) : ''],
    ['4. lock loop, new object per lock: ops/s vs Symfony Lock', $s4['lease_new tcp']['ops_per_s'] / $s4['symfony_new tcp']['ops_per_s'], '>= 3x'],
    ['4. floor: redis-benchmark -c 1, SET NX PX + compare-and-delete EVAL (pairs/s)', round($s4['floor tcp']['ops_per_s']), ''],
    ['4. lock loop, new object per lock: ops/s vs the floor (separate processes, unplaced)', $s4['lease_new tcp']['ops_per_s'] / $s4['floor tcp']['ops_per_s'], $unplaced],
    ['4. raw phpredis vs the floor (separate processes, unplaced)', $s4['phpredis tcp']['ops_per_s'] / $s4['floor tcp']['ops_per_s'], ''],
    ["$p4 lock loop, new object per lock: ops/s vs the floor", $pr('lease_new@tcp/floor@tcp'), '>= 0.90x'],
    ["$p4 raw phpredis vs the floor", $pr('phpredis@tcp/floor@tcp'), '(no PHP client is at the floor: the line for any)'],
    ['4. redis-rs alone (examples/floor.rs) vs the floor', isset($s4['redis-rs tcp']) ? $s4['redis-rs tcp']['ops_per_s'] / $s4['floor tcp']['ops_per_s'] : 'not built', '(what the client library leaves)'],
    ['C. client instructions per lock pair vs raw phpredis (reused object)', $s4c ? $s4c['lease'] / $s4c['phpredis'] : 'no valgrind', $s4c ? "({$s4c['lease']} vs {$s4c['phpredis']}; callgrind, whole process)" : ''],
    ['C. client instructions per lock pair vs raw phpredis (new object per lock)', $s4c ? $s4c['lease_new'] / $s4c['phpredis'] : 'no valgrind', $s4c ? "({$s4c['lease_new']} vs {$s4c['phpredis']})" : ''],
    ['C. client instructions per lock pair on Cluster vs raw phpredis RedisCluster', $s4c ? $s4c['lease cluster'] / $s4c['phpredis cluster'] : 'no valgrind', $s4c ? "({$s4c['lease cluster']} vs {$s4c['phpredis cluster']})" : ''],
    ['4. raw phpredis floor vs Symfony Lock (new object per lock)', $s4['phpredis tcp']['ops_per_s'] / $s4['symfony_new tcp']['ops_per_s'], '(the most any 2-round-trip lock can reach)'],
    ['TLS 1. contended session: wall vs phpredis+locking over TLS', $s1['lease_tls']['wall_ms'] / $s1['phpredis_lock_tls']['wall_ms'], '<= 0.75x'],
    ['TLS 1. contended session: keys kept (worst round)', $s1['lease_tls']['kept_min'], '100 of 100'],
    ['TLS 4. lock loop: ops/s vs raw phpredis over TLS (separate processes, unplaced)', $s4['lease tls']['ops_per_s'] / $s4['phpredis tls']['ops_per_s'], $unplaced],
    ["TLS $p4 lock loop: ops/s vs raw phpredis over TLS", $pr('lease@tls/phpredis@tls'), '>= 0.95x'],
    ['TLS 4. lock loop: ops/s, TLS vs plain TCP', $s4['lease tls']['ops_per_s'] / $s4['lease tcp']['ops_per_s'], ''],
    ['Cluster 1. contended session: wall vs single node', $s1['lease_cluster']['wall_ms'] / $r1, '<= 1.10x'],
    ['Cluster 1. contended session: keys kept (worst round)', $s1['lease_cluster']['kept_min'], '100 of 100'],
    ['Cluster 4. lock loop: ops/s vs single node (separate processes, unplaced)', $s4['lease cluster']['ops_per_s'] / $s4['lease tcp']['ops_per_s'], $unplaced],
    ['Cluster 4. lock loop: ops/s vs raw phpredis RedisCluster (separate processes, unplaced)', $s4['lease cluster']['ops_per_s'] / $s4['phpredis cluster']['ops_per_s'], $unplaced],
    ["Cluster $p4 lock loop: ops/s vs single node", $pr('lease@cluster/lease@tcp'), '>= 0.90x'],
    ["Cluster $p4 lock loop: ops/s vs raw phpredis RedisCluster", $pr('lease@cluster/phpredis@cluster'), '>= 0.95x'],
    ['5. contended lock: handoff gap median (ms)', $s5['lease']['gap_median_ms'], '<= 0.15 (Symfony: ' . round($s5['symfony']['gap_median_ms'], 1) . ')'],
    ['5. contended lock: handoff gap over the floor (ms)', $s5['lease']['gap_median_ms'] - $s5['ring']['gap_median_ms'],
        '(floor: ' . sprintf('%.3f', $s5['ring']['gap_median_ms']) . ' ms, an LPUSH waking a BLPOP)'],
    ['5. contended lock: holds/s vs Symfony', $s5['lease']['holds_per_s'] / $s5['symfony']['holds_per_s'], ''],
    ['6. extra RSS per worker (KiB)', $s6['extra_kib'], '< 2048'],
    ['6. extra PSS per worker (KiB; shared pages divided among workers)', $s6['extra_pss_kib'], '< 1024'],
    ['6. extra USS per worker (KiB; its own memory)', $s6['extra_uss_kib'], '< 512'],
    ['Laravel 4. Cache::lock get+release: ops/s, redis_lease store vs Laravel\'s redis store', $s4['laravel_lease tcp']['ops_per_s'] / $s4['laravel_redis tcp']['ops_per_s'], ''],
    ['Symfony 4. LockFactory acquire+release: ops/s, LeaseStore vs RedisStore', $s4['symfony_lease tcp']['ops_per_s'] / $s4['symfony_new tcp']['ops_per_s'], ''],
    ['Laravel 5. block(): holds/s, redis_lease store vs Laravel\'s redis store', $s5['laravel_lease']['holds_per_s'] / $s5['laravel_redis']['holds_per_s'], ''],
    ['Laravel 5. block(): handoff gap median (ms), redis_lease store', $s5['laravel_lease']['gap_median_ms'], '(Laravel\'s redis: ' . round($s5['laravel_redis']['gap_median_ms'] ?? 0, 1) . ')'],
    ['Symfony 5. acquire(true): holds/s, LeaseStore vs RedisStore', $s5['symfony_lease']['holds_per_s'] / $s5['symfony']['holds_per_s'], ''],
    ['Symfony 5. acquire(true): handoff gap median (ms), LeaseStore', $s5['symfony_lease']['gap_median_ms'], '(RedisStore: ' . round($s5['symfony']['gap_median_ms'] ?? 0, 1) . ')'],
];
say("\n%-62s %10s   %s\n", 'measure', 'result', 'target');
$rows = array_merge($rows, $sharedRows); // 7 and 8: read locks and semaphores
foreach ($rows as [$what, $value, $target]) {
    say("%-62s %10s   %s\n", $what, is_float($value) ? sprintf('%.2f', $value) : $value, $target);
}
$results['summary'] = array_map(fn ($r) => ['measure' => $r[0], 'result' => $r[1], 'target' => $r[2]], $rows);
$json = json_encode($results, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES);
file_put_contents(__DIR__ . '/results/latest.json', $json . "\n");
file_put_contents(__DIR__ . '/results/' . date('Y-m-d\TH-i-s') . '.json', $json . "\n");
say("\nwritten: bench/results/latest.json\n");
