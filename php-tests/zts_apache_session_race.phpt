--TEST--
Threads: the seeds' session race under Apache 2.4 mpm_event + mod_php (ZTS, 2 processes x 25 threads), class and native forms: 100 concurrent requests on one session each add a key and none is lost; the requests ran on many threads of both processes at once
--SKIPIF--
<?php require __DIR__ . '/../testing/apache_pool.php'; if ($why = ApachePool::unavailable()) die("skip $why"); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/apache_pool.php';
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const N = 100;

foreach (ST_FORMS as $form) {
    $ini = st_common_ini() + ($form === 'native' ? st_native_ini($dsn, []) : []);
    $pool = ApachePool::start(['ini' => $ini]);
    foreach ([[5, 1], [5, 2], [0, 3]] as [$workMs, $round]) {
        $label = "$form, work {$workMs} ms, round $round";
        $sid = st_sid();
        $reqs = [];
        for ($i = 0; $i < N; $i++) {
            $reqs[$i] = st_req($form, $dsn, [], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => $workMs]);
        }
        $t = microtime(true);
        $rs = $pool->client()->multi($reqs, 60.0);
        $wall = microtime(true) - $t;
        $bad = array_keys(array_filter($rs, static fn($r) => !$r->ok() || $r->status !== 200 || !is_array($r->json())));
        rl_ok("$label: every request answered with JSON", $bad === [],
            implode("\n", array_map(static fn($i) => "#$i " . $rs[$i]->describe(), array_slice($bad, 0, 3))));
        $replies = array_map(static fn($r) => $r->json() ?? [], $rs);
        rl_same("$label: all ran in Apache's mod_php", ['apache2handler'], array_values(array_unique(array_column($replies, 'sapi'))));
        $notStarted = array_filter($replies, static fn($j) => ($j['started'] ?? null) !== true);
        rl_same("$label: session_start() true in every request", [], array_slice($notStarted, 0, 1, true));
        $warned = array_filter($replies, static fn($j) => ($j['warnings'] ?? []) !== []);
        rl_same("$label: no warnings", [], array_slice($warned, 0, 2, true));
        $counts = array_map(static fn($j) => $j['count_before'] ?? -1, $replies);
        sort($counts);
        rl_same("$label: requests were serialized (counts before = 0..99)", range(0, N - 1), $counts);
        $data = st_decode($raw->cmd('GET', st_data_key($sid)));
        rl_same("$label: all 100 keys stored", N, is_array($data) ? count(array_intersect_key($data, array_flip(array_map(static fn($i) => "k$i", range(0, N - 1))))) : $data);
        rl_same("$label: lock released, nothing left", [], st_lock_keys($raw, $sid));
        $pids = array_unique(array_column($replies, 'pid'));
        $threads = array_unique(array_map(static fn($j) => ($j['pid'] ?? 0) . '/' . ($j['tid'] ?? 0), $replies));
        if ($workMs > 0) {
            // 100 requests of >= 5 ms each, 50 threads: both processes and most threads take part.
            rl_same("$label: both processes served", ApachePool::PROCESSES, count($pids));
            rl_ok("$label: at least 30 threads served", count($threads) >= 30, count($threads) . ' threads');
            // Threads really ran at once: a request began in a process while another of the same process was running.
            $overlap = 0;
            foreach ($replies as $a) {
                foreach ($replies as $b) {
                    if ($a !== $b && $a['pid'] === $b['pid'] && $a['tid'] !== $b['tid'] && $b['t0'] > $a['t0'] && $b['t0'] < $a['t_end']) {
                        $overlap++;
                    }
                }
            }
            rl_ok("$label: requests overlapped inside one process (threads ran at once)", $overlap >= 50, "$overlap overlapping pairs");
        }
        printf("info: %s: %d requests in %.3f s on %d threads of %d processes\n", $label, N, $wall, count($threads), count($pids));
    }
    rl_same("$form: nothing reached PHP's error log", '', $pool->phpErrors());
    rl_ok("$form: no child crashed or was replaced", $pool->intact(), $pool->serverErrors());
    $pool->stop();
}

// Control: the same race without the lock loses keys under threads too (a race the test can see).
$pool = ApachePool::start(['ini' => st_common_ini()]);
$sid = st_sid();
$reqs = [];
for ($i = 0; $i < N; $i++) {
    $reqs[$i] = st_req('class', $dsn, ['locking' => false], 0, 'add_key.php', ['sid' => $sid, 'key' => "k$i", 'work_ms' => 5]);
}
$pool->client()->multi($reqs, 60.0);
$data = st_decode($raw->cmd('GET', st_data_key($sid)));
$kept = is_array($data) ? count($data) : 0;
rl_ok('control (locking off): keys were lost', $kept >= 1 && $kept < N, "$kept of 100 kept");
printf("info: locking off: %d of %d keys kept\n", $kept, N);
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: class, work 5 ms, round 1: every request answered with JSON
ok: class, work 5 ms, round 1: all ran in Apache's mod_php
ok: class, work 5 ms, round 1: session_start() true in every request
ok: class, work 5 ms, round 1: no warnings
ok: class, work 5 ms, round 1: requests were serialized (counts before = 0..99)
ok: class, work 5 ms, round 1: all 100 keys stored
ok: class, work 5 ms, round 1: lock released, nothing left
ok: class, work 5 ms, round 1: both processes served
ok: class, work 5 ms, round 1: at least 30 threads served
ok: class, work 5 ms, round 1: requests overlapped inside one process (threads ran at once)
info: %s
ok: class, work 5 ms, round 2: every request answered with JSON
ok: class, work 5 ms, round 2: all ran in Apache's mod_php
ok: class, work 5 ms, round 2: session_start() true in every request
ok: class, work 5 ms, round 2: no warnings
ok: class, work 5 ms, round 2: requests were serialized (counts before = 0..99)
ok: class, work 5 ms, round 2: all 100 keys stored
ok: class, work 5 ms, round 2: lock released, nothing left
ok: class, work 5 ms, round 2: both processes served
ok: class, work 5 ms, round 2: at least 30 threads served
ok: class, work 5 ms, round 2: requests overlapped inside one process (threads ran at once)
info: %s
ok: class, work 0 ms, round 3: every request answered with JSON
ok: class, work 0 ms, round 3: all ran in Apache's mod_php
ok: class, work 0 ms, round 3: session_start() true in every request
ok: class, work 0 ms, round 3: no warnings
ok: class, work 0 ms, round 3: requests were serialized (counts before = 0..99)
ok: class, work 0 ms, round 3: all 100 keys stored
ok: class, work 0 ms, round 3: lock released, nothing left
info: %s
ok: class: nothing reached PHP's error log
ok: class: no child crashed or was replaced
ok: native, work 5 ms, round 1: every request answered with JSON
ok: native, work 5 ms, round 1: all ran in Apache's mod_php
ok: native, work 5 ms, round 1: session_start() true in every request
ok: native, work 5 ms, round 1: no warnings
ok: native, work 5 ms, round 1: requests were serialized (counts before = 0..99)
ok: native, work 5 ms, round 1: all 100 keys stored
ok: native, work 5 ms, round 1: lock released, nothing left
ok: native, work 5 ms, round 1: both processes served
ok: native, work 5 ms, round 1: at least 30 threads served
ok: native, work 5 ms, round 1: requests overlapped inside one process (threads ran at once)
info: %s
ok: native, work 5 ms, round 2: every request answered with JSON
ok: native, work 5 ms, round 2: all ran in Apache's mod_php
ok: native, work 5 ms, round 2: session_start() true in every request
ok: native, work 5 ms, round 2: no warnings
ok: native, work 5 ms, round 2: requests were serialized (counts before = 0..99)
ok: native, work 5 ms, round 2: all 100 keys stored
ok: native, work 5 ms, round 2: lock released, nothing left
ok: native, work 5 ms, round 2: both processes served
ok: native, work 5 ms, round 2: at least 30 threads served
ok: native, work 5 ms, round 2: requests overlapped inside one process (threads ran at once)
info: %s
ok: native, work 0 ms, round 3: every request answered with JSON
ok: native, work 0 ms, round 3: all ran in Apache's mod_php
ok: native, work 0 ms, round 3: session_start() true in every request
ok: native, work 0 ms, round 3: no warnings
ok: native, work 0 ms, round 3: requests were serialized (counts before = 0..99)
ok: native, work 0 ms, round 3: all 100 keys stored
ok: native, work 0 ms, round 3: lock released, nothing left
info: %s
ok: native: nothing reached PHP's error log
ok: native: no child crashed or was replaced
ok: control (locking off): keys were lost
info: %s
done
