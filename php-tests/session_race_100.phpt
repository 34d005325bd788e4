--TEST--
Session race under php-fpm (class and native forms): 100 concurrent requests on one session each add a key and none is lost; locking=off completes
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const N = 100;
const ROUNDS = 3;

/**
 * Fire N add_key requests at one fresh session at once and wait for all.
 * Returns [sid, responses keyed by i, wall time].
 */
function race(FpmPool $pool, string $form, string $dsn, array $options, int $workMs): array
{
    $sid = st_sid();
    $reqs = [];
    for ($i = 0; $i < N; $i++) {
        $reqs[$i] = st_req($form, $dsn, $options, 0, 'add_key.php',
            ['sid' => $sid, 'key' => "k$i", 'work_ms' => $workMs]);
    }
    $t = microtime(true);
    $rs = $pool->client()->multi($reqs, 60.0);
    return [$sid, $rs, microtime(true) - $t];
}

/** Requests that did not end with a well-formed JSON reply, described. */
function broken(array $rs): array
{
    $bad = [];
    foreach ($rs as $i => $r) {
        if (!$r->ok() || $r->status !== 200 || !is_array($r->json())) {
            $bad[] = "#$i " . $r->describe();
        }
    }
    return $bad;
}

foreach (ST_FORMS as $form) {
    // --- locking on (the default): every key must survive ---
    $pool = st_pool($form, $dsn, []);
    foreach ([0, 5] as $workMs) {
        for ($round = 1; $round <= ROUNDS; $round++) {
            $label = "$form, work {$workMs} ms, round $round";
            $raw->cmd('CONFIG', 'RESETSTAT');
            [$sid, $rs, $wall] = race($pool, $form, $dsn, [], $workMs);
            $stats = rl_cmdstats($raw);
            printf("info: %s: %d requests in %.3f s\n", $label, N, $wall);
            $bad = broken($rs);
            rl_ok("$label: every request answered with JSON", $bad === [], implode("\n", array_slice($bad, 0, 3)));
            $replies = array_map(static fn($r) => $r->json() ?? [], $rs);
            rl_same("$label: all ran under php-fpm", ['fpm-fcgi'], array_values(array_unique(array_column($replies, 'sapi'))));
            $notStarted = array_keys(array_filter($replies, static fn($j) => ($j['started'] ?? null) !== true));
            rl_ok("$label: session_start() true in every request", $notStarted === [],
                count($notStarted) . ' failed, e.g. ' . json_encode($replies[$notStarted[0] ?? 0] ?? null));
            $warned = array_filter($replies, static fn($j) => ($j['warnings'] ?? []) !== []);
            rl_ok("$label: no warnings", $warned === [], json_encode(array_slice($warned, 0, 2, true)));
            // With the lock, requests run one after another: each saw all
            // earlier keys, so the counts before adding are exactly 0..N-1.
            $counts = array_map(static fn($j) => $j['count_before'] ?? -1, $replies);
            sort($counts);
            rl_same("$label: requests were serialized (counts before = 0..99)", range(0, N - 1), $counts);
            $data = st_decode($raw->cmd('GET', st_data_key($sid)));
            $want = [];
            for ($i = 0; $i < N; $i++) {
                $want["k$i"] = 1;
            }
            ksort($want);
            if (is_array($data)) {
                ksort($data);
            }
            rl_same("$label: all 100 keys stored", $want, $data);
            if ($workMs > 0) {
                // Each request takes >= 5 ms, so all 8 workers are busy at once:
                // one holds the lock, seven wait for it.
                $pids = array_unique(array_map(static fn($j) => $j['pid'] ?? 0, $replies));
                rl_same("$label: all 8 workers took part", 8, count($pids));
                // Waiting is woken by the release, not polled: about one failed
                // attempt, one wake-up and one save per request (3 scripts;
                // polling every 10 ms would add ~380 more), and each handoff is
                // quick (100 x 5 ms of work = 0.5 s; 100 ms polling would need ~5 s).
                $scripts = ($stats['fcall'] ?? 0) + ($stats['evalsha'] ?? 0) + ($stats['eval'] ?? 0);
                rl_ok("$label: at most 4 lock scripts per request (no polling)", $scripts <= 4 * N,
                    "$scripts scripts, " . ($stats['blpop'] ?? 0) . ' BLPOPs');
                rl_ok("$label: wall time < 2.5 s", $wall < 2.5, sprintf('%.3f s', $wall));
            }
            rl_same("$label: lock released", 0, $raw->cmd('EXISTS', st_lock_key($sid)));
            rl_same("$label: no lock key left without a ttl", [], st_permanent_lock_keys($raw, $sid));
            $ttl = $raw->cmd('TTL', st_data_key($sid));
            rl_ok("$label: data ttl is session.gc_maxlifetime (1440)", $ttl > 1400 && $ttl <= 1440, rl_fmt($ttl));
        }
    }
    // Read back through the handler itself.
    $r = $pool->client()->request(st_req($form, $dsn, [], 0, 'read.php', ['sid' => $sid])['params']);
    $j = $r->json();
    rl_same("$form: read.php sees 100 keys", N, is_array($j['data'] ?? null) ? count($j['data']) : $r->describe());
    rl_same("$form: nothing reached PHP's error log", '', $pool->phpErrors());
    $pool->stop();

    // --- locking off: last writer wins; only completion is asserted ---
    $off = ['locking' => false];
    $pool = st_pool($form, $dsn, $off);
    foreach ([0, 5] as $workMs) {
        for ($round = 1; $round <= ROUNDS; $round++) {
            $label = "$form, locking off, work {$workMs} ms, round $round";
            [$sid, $rs, $wall] = race($pool, $form, $dsn, $off, $workMs);
            $bad = broken($rs);
            $started = count(array_filter($rs, static fn($r) => ($r->json()['started'] ?? null) === true));
            $data = st_decode($raw->cmd('GET', st_data_key($sid)));
            // Lost writes are expected here: the count is information, not an assertion.
            printf("info: %s: %d of %d keys kept, %.3f s\n", $label, is_array($data) ? count($data) : 0, N, $wall);
            rl_ok("$label: completed (every request answered, session_start() true, data stored, no lock keys)",
                $bad === [] && $started === N && is_array($data) && count($data) >= 1 && st_lock_keys($raw, $sid) === [],
                json_encode(['broken' => array_slice($bad, 0, 2), 'started' => $started, 'data' => $data,
                    'lock keys' => st_lock_keys($raw, $sid)]));
        }
    }
    $pool->stop();
}
echo "done\n";
?>
--EXPECTF--
info: class, work 0 ms, round 1: 100 requests in %f s
ok: class, work 0 ms, round 1: every request answered with JSON
ok: class, work 0 ms, round 1: all ran under php-fpm
ok: class, work 0 ms, round 1: session_start() true in every request
ok: class, work 0 ms, round 1: no warnings
ok: class, work 0 ms, round 1: requests were serialized (counts before = 0..99)
ok: class, work 0 ms, round 1: all 100 keys stored
ok: class, work 0 ms, round 1: lock released
ok: class, work 0 ms, round 1: no lock key left without a ttl
ok: class, work 0 ms, round 1: data ttl is session.gc_maxlifetime (1440)
info: class, work 0 ms, round 2: 100 requests in %f s
ok: class, work 0 ms, round 2: every request answered with JSON
ok: class, work 0 ms, round 2: all ran under php-fpm
ok: class, work 0 ms, round 2: session_start() true in every request
ok: class, work 0 ms, round 2: no warnings
ok: class, work 0 ms, round 2: requests were serialized (counts before = 0..99)
ok: class, work 0 ms, round 2: all 100 keys stored
ok: class, work 0 ms, round 2: lock released
ok: class, work 0 ms, round 2: no lock key left without a ttl
ok: class, work 0 ms, round 2: data ttl is session.gc_maxlifetime (1440)
info: class, work 0 ms, round 3: 100 requests in %f s
ok: class, work 0 ms, round 3: every request answered with JSON
ok: class, work 0 ms, round 3: all ran under php-fpm
ok: class, work 0 ms, round 3: session_start() true in every request
ok: class, work 0 ms, round 3: no warnings
ok: class, work 0 ms, round 3: requests were serialized (counts before = 0..99)
ok: class, work 0 ms, round 3: all 100 keys stored
ok: class, work 0 ms, round 3: lock released
ok: class, work 0 ms, round 3: no lock key left without a ttl
ok: class, work 0 ms, round 3: data ttl is session.gc_maxlifetime (1440)
info: class, work 5 ms, round 1: 100 requests in %f s
ok: class, work 5 ms, round 1: every request answered with JSON
ok: class, work 5 ms, round 1: all ran under php-fpm
ok: class, work 5 ms, round 1: session_start() true in every request
ok: class, work 5 ms, round 1: no warnings
ok: class, work 5 ms, round 1: requests were serialized (counts before = 0..99)
ok: class, work 5 ms, round 1: all 100 keys stored
ok: class, work 5 ms, round 1: all 8 workers took part
ok: class, work 5 ms, round 1: at most 4 lock scripts per request (no polling)
ok: class, work 5 ms, round 1: wall time < 2.5 s
ok: class, work 5 ms, round 1: lock released
ok: class, work 5 ms, round 1: no lock key left without a ttl
ok: class, work 5 ms, round 1: data ttl is session.gc_maxlifetime (1440)
info: class, work 5 ms, round 2: 100 requests in %f s
ok: class, work 5 ms, round 2: every request answered with JSON
ok: class, work 5 ms, round 2: all ran under php-fpm
ok: class, work 5 ms, round 2: session_start() true in every request
ok: class, work 5 ms, round 2: no warnings
ok: class, work 5 ms, round 2: requests were serialized (counts before = 0..99)
ok: class, work 5 ms, round 2: all 100 keys stored
ok: class, work 5 ms, round 2: all 8 workers took part
ok: class, work 5 ms, round 2: at most 4 lock scripts per request (no polling)
ok: class, work 5 ms, round 2: wall time < 2.5 s
ok: class, work 5 ms, round 2: lock released
ok: class, work 5 ms, round 2: no lock key left without a ttl
ok: class, work 5 ms, round 2: data ttl is session.gc_maxlifetime (1440)
info: class, work 5 ms, round 3: 100 requests in %f s
ok: class, work 5 ms, round 3: every request answered with JSON
ok: class, work 5 ms, round 3: all ran under php-fpm
ok: class, work 5 ms, round 3: session_start() true in every request
ok: class, work 5 ms, round 3: no warnings
ok: class, work 5 ms, round 3: requests were serialized (counts before = 0..99)
ok: class, work 5 ms, round 3: all 100 keys stored
ok: class, work 5 ms, round 3: all 8 workers took part
ok: class, work 5 ms, round 3: at most 4 lock scripts per request (no polling)
ok: class, work 5 ms, round 3: wall time < 2.5 s
ok: class, work 5 ms, round 3: lock released
ok: class, work 5 ms, round 3: no lock key left without a ttl
ok: class, work 5 ms, round 3: data ttl is session.gc_maxlifetime (1440)
ok: class: read.php sees 100 keys
ok: class: nothing reached PHP's error log
info: class, locking off, work 0 ms, round 1: %d of 100 keys kept, %f s
ok: class, locking off, work 0 ms, round 1: completed (every request answered, session_start() true, data stored, no lock keys)
info: class, locking off, work 0 ms, round 2: %d of 100 keys kept, %f s
ok: class, locking off, work 0 ms, round 2: completed (every request answered, session_start() true, data stored, no lock keys)
info: class, locking off, work 0 ms, round 3: %d of 100 keys kept, %f s
ok: class, locking off, work 0 ms, round 3: completed (every request answered, session_start() true, data stored, no lock keys)
info: class, locking off, work 5 ms, round 1: %d of 100 keys kept, %f s
ok: class, locking off, work 5 ms, round 1: completed (every request answered, session_start() true, data stored, no lock keys)
info: class, locking off, work 5 ms, round 2: %d of 100 keys kept, %f s
ok: class, locking off, work 5 ms, round 2: completed (every request answered, session_start() true, data stored, no lock keys)
info: class, locking off, work 5 ms, round 3: %d of 100 keys kept, %f s
ok: class, locking off, work 5 ms, round 3: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, work 0 ms, round 1: 100 requests in %f s
ok: native, work 0 ms, round 1: every request answered with JSON
ok: native, work 0 ms, round 1: all ran under php-fpm
ok: native, work 0 ms, round 1: session_start() true in every request
ok: native, work 0 ms, round 1: no warnings
ok: native, work 0 ms, round 1: requests were serialized (counts before = 0..99)
ok: native, work 0 ms, round 1: all 100 keys stored
ok: native, work 0 ms, round 1: lock released
ok: native, work 0 ms, round 1: no lock key left without a ttl
ok: native, work 0 ms, round 1: data ttl is session.gc_maxlifetime (1440)
info: native, work 0 ms, round 2: 100 requests in %f s
ok: native, work 0 ms, round 2: every request answered with JSON
ok: native, work 0 ms, round 2: all ran under php-fpm
ok: native, work 0 ms, round 2: session_start() true in every request
ok: native, work 0 ms, round 2: no warnings
ok: native, work 0 ms, round 2: requests were serialized (counts before = 0..99)
ok: native, work 0 ms, round 2: all 100 keys stored
ok: native, work 0 ms, round 2: lock released
ok: native, work 0 ms, round 2: no lock key left without a ttl
ok: native, work 0 ms, round 2: data ttl is session.gc_maxlifetime (1440)
info: native, work 0 ms, round 3: 100 requests in %f s
ok: native, work 0 ms, round 3: every request answered with JSON
ok: native, work 0 ms, round 3: all ran under php-fpm
ok: native, work 0 ms, round 3: session_start() true in every request
ok: native, work 0 ms, round 3: no warnings
ok: native, work 0 ms, round 3: requests were serialized (counts before = 0..99)
ok: native, work 0 ms, round 3: all 100 keys stored
ok: native, work 0 ms, round 3: lock released
ok: native, work 0 ms, round 3: no lock key left without a ttl
ok: native, work 0 ms, round 3: data ttl is session.gc_maxlifetime (1440)
info: native, work 5 ms, round 1: 100 requests in %f s
ok: native, work 5 ms, round 1: every request answered with JSON
ok: native, work 5 ms, round 1: all ran under php-fpm
ok: native, work 5 ms, round 1: session_start() true in every request
ok: native, work 5 ms, round 1: no warnings
ok: native, work 5 ms, round 1: requests were serialized (counts before = 0..99)
ok: native, work 5 ms, round 1: all 100 keys stored
ok: native, work 5 ms, round 1: all 8 workers took part
ok: native, work 5 ms, round 1: at most 4 lock scripts per request (no polling)
ok: native, work 5 ms, round 1: wall time < 2.5 s
ok: native, work 5 ms, round 1: lock released
ok: native, work 5 ms, round 1: no lock key left without a ttl
ok: native, work 5 ms, round 1: data ttl is session.gc_maxlifetime (1440)
info: native, work 5 ms, round 2: 100 requests in %f s
ok: native, work 5 ms, round 2: every request answered with JSON
ok: native, work 5 ms, round 2: all ran under php-fpm
ok: native, work 5 ms, round 2: session_start() true in every request
ok: native, work 5 ms, round 2: no warnings
ok: native, work 5 ms, round 2: requests were serialized (counts before = 0..99)
ok: native, work 5 ms, round 2: all 100 keys stored
ok: native, work 5 ms, round 2: all 8 workers took part
ok: native, work 5 ms, round 2: at most 4 lock scripts per request (no polling)
ok: native, work 5 ms, round 2: wall time < 2.5 s
ok: native, work 5 ms, round 2: lock released
ok: native, work 5 ms, round 2: no lock key left without a ttl
ok: native, work 5 ms, round 2: data ttl is session.gc_maxlifetime (1440)
info: native, work 5 ms, round 3: 100 requests in %f s
ok: native, work 5 ms, round 3: every request answered with JSON
ok: native, work 5 ms, round 3: all ran under php-fpm
ok: native, work 5 ms, round 3: session_start() true in every request
ok: native, work 5 ms, round 3: no warnings
ok: native, work 5 ms, round 3: requests were serialized (counts before = 0..99)
ok: native, work 5 ms, round 3: all 100 keys stored
ok: native, work 5 ms, round 3: all 8 workers took part
ok: native, work 5 ms, round 3: at most 4 lock scripts per request (no polling)
ok: native, work 5 ms, round 3: wall time < 2.5 s
ok: native, work 5 ms, round 3: lock released
ok: native, work 5 ms, round 3: no lock key left without a ttl
ok: native, work 5 ms, round 3: data ttl is session.gc_maxlifetime (1440)
ok: native: read.php sees 100 keys
ok: native: nothing reached PHP's error log
info: native, locking off, work 0 ms, round 1: %d of 100 keys kept, %f s
ok: native, locking off, work 0 ms, round 1: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, locking off, work 0 ms, round 2: %d of 100 keys kept, %f s
ok: native, locking off, work 0 ms, round 2: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, locking off, work 0 ms, round 3: %d of 100 keys kept, %f s
ok: native, locking off, work 0 ms, round 3: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, locking off, work 5 ms, round 1: %d of 100 keys kept, %f s
ok: native, locking off, work 5 ms, round 1: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, locking off, work 5 ms, round 2: %d of 100 keys kept, %f s
ok: native, locking off, work 5 ms, round 2: completed (every request answered, session_start() true, data stored, no lock keys)
info: native, locking off, work 5 ms, round 3: %d of 100 keys kept, %f s
ok: native, locking off, work 5 ms, round 3: completed (every request answered, session_start() true, data stored, no lock keys)
done
