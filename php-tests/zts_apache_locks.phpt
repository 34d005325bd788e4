--TEST--
Threads: DistributedLock under Apache 2.4 mpm_event + mod_php (ZTS, 2 processes x 25 threads): 200 read-increment-write requests on a file counter under synchronized() end exact, their critical sections never overlap and their fencing tokens rise in counter order, while requests ran at once inside each process (without the lock, updates are lost); 20 threads hold autoRenew locks of 1 s through 3 s, renewed by one redis_lease thread per process; metrics add up across threads and processes
--SKIPIF--
<?php require __DIR__ . '/../testing/apache_pool.php'; if ($why = ApachePool::unavailable()) die("skip $why"); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/apache_pool.php';
require __DIR__ . '/fpm-app/harness.inc';

const N = 200;
const HOLDERS = 20;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$pool = ApachePool::start();
$client = $pool->client();
$app = __DIR__ . '/fpm-app/zts_app.php';
$req = static fn(array $q) => ['params' => FcgiClient::params($app, $q, ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port])];
$replies = static function (array $rs): array {
    $out = [];
    foreach ($rs as $i => $r) {
        $j = $r->ok() && $r->status === 200 ? $r->json() : null;
        $out[$i] = is_array($j) ? $j : ['error' => $r->describe()];
    }
    return $out;
};
$before = $replies([$client->request($req(['op' => 'metrics'])['params'])])[0]['server'] ?? [];

// --- 1. The counter ---
foreach (['nolock' => true, 'lock' => false] as $name => $nolock) {
    $file = $pool->dir . "/counter-$name";
    file_put_contents($file, '0');
    chmod($file, 0666);
    $key = rl_key("counter-$name");
    $rs = $replies($client->multi(array_map(static fn($i) => $req(['op' => 'counter', 'key' => $key, 'file' => $file]
        + ($nolock ? ['nolock' => '1'] : [])), range(1, N)), 90.0));
    $errors = array_filter($rs, static fn($j) => isset($j['error']) || ($j['warnings'] ?? []) !== []);
    $final = (int) file_get_contents($file);
    if ($nolock) {
        rl_same('control (no lock): every request answered', [], array_slice($errors, 0, 2, true));
        rl_ok('control (no lock): updates were lost', $final < N, "counter $final after " . N . ' increments');
        printf("info: without the lock: counter %d after %d increments\n", $final, N);
        continue;
    }
    rl_same('every request answered, without warnings', [], array_slice($errors, 0, 2, true));
    rl_same('the counter is exact', N, $final);
    // The history: each critical section, in the order of the values it wrote.
    usort($rs, static fn($a, $b) => $a['value'] <=> $b['value']);
    rl_same('every value 1..200 was written once', range(1, N), array_column($rs, 'value'));
    $overlaps = [];
    $fenceDrops = [];
    for ($i = 1; $i < count($rs); $i++) {
        if ($rs[$i]['in'] < $rs[$i - 1]['out']) {
            $overlaps[] = [$rs[$i - 1], $rs[$i]];
        }
        if ($rs[$i]['fence'] <= $rs[$i - 1]['fence']) {
            $fenceDrops[] = [$rs[$i - 1]['fence'], $rs[$i]['fence']];
        }
    }
    rl_same('no critical section began before the one before it ended', [], array_slice($overlaps, 0, 1));
    rl_same('fencing tokens rise in the order of the writes', [], array_slice($fenceDrops, 0, 3));
    // Threads ran at once: requests of one process whose lifetimes overlap.
    $together = 0;
    foreach ($rs as $a) {
        foreach ($rs as $b) {
            if ($a['pid'] === $b['pid'] && $a['tid'] !== $b['tid'] && $b['t0'] > $a['t0'] && $b['t0'] < $a['t_end']) {
                $together++;
            }
        }
    }
    $threads = count(array_unique(array_map(static fn($j) => "{$j['pid']}/{$j['tid']}", $rs)));
    rl_ok('requests ran at once inside one process (threads)', $together >= 100, "$together overlapping pairs");
    rl_same('both processes served', ApachePool::PROCESSES, count(array_unique(array_column($rs, 'pid'))));
    printf("info: with the lock: counter %d, %d threads, %d overlapping request pairs\n", $final, $threads, $together);
}

// --- 2. The watchdog renews the holds of 20 threads at once ---
$ctl = rl_key('hold');
$keys = array_map(static fn($i) => rl_key("hold-$i"), range(1, HOLDERS));
$calls = array_map(static fn($k) => $client->begin($req(['op' => 'hold', 'key' => $k, 'ttl' => 1, 'seconds' => 3, 'ctl' => $ctl])['params']), $keys);
$deadline = microtime(true) + 10.0;
while ((int) $raw->cmd('GET', "$ctl:held") !== HOLDERS && microtime(true) < $deadline) {
    FcgiClient::pump($calls, 0.01); // (the requests are sent while we wait)
}
rl_same('20 threads hold their locks', HOLDERS, (int) $raw->cmd('GET', "$ctl:held"));
$names = [];
foreach ($pool->childPids() as $pid) {
    $names[$pid] = count(array_filter($pool->threadNames($pid), static fn($n) => $n === 'redis_lease'));
}
rl_same('one redis_lease thread in each process', array_fill_keys($pool->childPids(), 1), $names);
FcgiClient::await($calls, 20.0);
$hs = $replies(array_map(static fn($c) => $c->response, $calls));
$all = static fn(string $f) => array_values(array_unique(array_column($hs, $f)));
rl_same('every hold was acquired', [true], $all('acquired'));
rl_same('every hold outlived its 1 s ttl three times over (isAcquired())', [true], $all('still_held'));
rl_same('every hold kept its fencing token', [true], $all('fence_kept'));
rl_same('every hold was released by its owner', [true], $all('released'));
rl_same('nothing left in Redis', [], array_values(array_filter($keys, static fn($k) => $raw->cmd('EXISTS', rl_lock_key($k)) === 1)));

// --- 3. Metrics across threads and processes ---
$after = $replies([$client->request($req(['op' => 'metrics'])['params'])])[0]['server'] ?? [];
rl_same('server metrics: locks acquired = 200 counter sections + 20 holds', N + HOLDERS,
    ($after['lock_acquired'] ?? 0) - ($before['lock_acquired'] ?? 0));
rl_ok('server metrics: the watchdog renewed the 20 holds (>= 3 renewals each)',
    ($after['auto_renewals'] ?? 0) - ($before['auto_renewals'] ?? 0) >= 3 * HOLDERS, json_encode($after['auto_renewals'] ?? null));
// Each process's own count, asked until both answered: they add up to the server's.
$perProcess = [];
rl_wait_until(static function () use ($client, $req, $replies, &$perProcess) {
    $rs = $replies($client->multi(array_fill(0, 20, $req(['op' => 'metrics'])), 10.0));
    foreach ($rs as $j) {
        if (isset($j['pid'])) {
            $perProcess[$j['pid']] = $j['metrics']['lock_acquired'] ?? 0;
        }
    }
    return count($perProcess) === ApachePool::PROCESSES;
}, 10.0);
rl_same('each process counts its own threads; together they make the server\'s count',
    $after['lock_acquired'] ?? -1, array_sum($perProcess));
rl_same("nothing reached PHP's error log", '', $pool->phpErrors());
rl_ok('no child crashed or was replaced', $pool->intact(), $pool->serverErrors());
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: control (no lock): every request answered
ok: control (no lock): updates were lost
info: without the lock: %s
ok: every request answered, without warnings
ok: the counter is exact
ok: every value 1..200 was written once
ok: no critical section began before the one before it ended
ok: fencing tokens rise in the order of the writes
ok: requests ran at once inside one process (threads)
ok: both processes served
info: with the lock: %s
ok: 20 threads hold their locks
ok: one redis_lease thread in each process
ok: every hold was acquired
ok: every hold outlived its 1 s ttl three times over (isAcquired())
ok: every hold kept its fencing token
ok: every hold was released by its owner
ok: nothing left in Redis
ok: server metrics: locks acquired = 200 counter sections + 20 holds
ok: server metrics: the watchdog renewed the 20 holds (>= 3 renewals each)
ok: each process counts its own threads; together they make the server's count
ok: nothing reached PHP's error log
ok: no child crashed or was replaced
done
