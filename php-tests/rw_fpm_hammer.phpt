--TEST--
Read/write lock under php-fpm: 8 workers hammer one lock with reads, writes, downgrades, upgrades, read holds moved to another object (whose synchronized() must refuse) and upgrades whose read lease runs out while they wait (whose queue place must not keep a writer out); a shared resource (one Lua check-and-set) shows readers overlapping, never a reader beside a writer nor two writers, no lost update, no writer between a downgrade's write and its read nor between an upgrade's read and its write; a writer gets in within the longest read hold (+ margin) while a continuous stream of readers keeps arriving; the same checks catch an app that takes no lock
--SKIPIF--
<?php require __DIR__ . '/../testing/apache_pool.php'; if ($why = rl_php_pool_unavailable()) die("skip $why"); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/apache_pool.php'; // FpmPool, or ApachePool with RL_PHP_SERVER=apache
require __DIR__ . '/fpm-app/rw_common.inc';

const WORKERS = 8;
const ROUNDS = 70;            // sections per worker in the hammer
const READ_MAX_MS = 150;      // the stream's read holds: 50..150 ms
const MARGIN = 0.35;          // scheduling slack on a loaded 2-core machine (seen: up to 0.1 s)

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$pool = rl_php_pool(['max_children' => WORKERS]);
$client = $pool->client();
$app = __DIR__ . '/fpm-app/rw_app.php';
$req = static fn(array $q) => ['params' => FcgiClient::params($app, $q, ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port])];

/** Runs $requests at once; their JSON replies (a FAIL line for each that failed). */
function run_all(FcgiClient $client, array $requests, float $timeout): array
{
    $out = [];
    foreach ($client->multi($requests, $timeout) as $i => $r) {
        $j = $r->ok() ? $r->json() : null;
        if (!is_array($j)) {
            rl_ok("request $i answered", false, $r->describe());
            $j = ['errors' => ['no answer']];
        }
        $out[$i] = $j;
    }
    return $out;
}

function sum_of(array $replies, string $field): int
{
    return array_sum(array_map(static fn(array $j) => $j[$field] ?? 0, $replies));
}

// --- 0. Control: the same app without the lock. The checks must catch it. ---
$key = rl_key('rw-none');
$res = rl_key('res-none');
$counter = rl_key('counter-none');
$replies = run_all($client, array_map(static fn($i) => $req(['op' => 'hammer', 'key' => $key, 'res' => $res,
    'counter' => $counter, 'rounds' => 20, 'seed' => 100 + $i, 'nolock' => 1]), range(1, WORKERS)), 60.0);
$r = rw_resource($raw, $res);
$writers = sum_of($replies, 'writer_sections');
$final = (int) $raw->cmd('GET', $counter);
rl_ok('control (no lock): the resource saw readers beside writers or two writers', count($r['violations']) > 0,
    count($r['violations']) . ' violations');
rl_ok('control (no lock): updates were lost', $final < $writers, "counter $final after $writers writer sections");
printf("info: control without the lock: %d violations, counter %d after %d writer sections\n",
    count($r['violations']), $final, $writers);

// --- 1. The hammer: reads, writes, downgrades and upgrades on one lock ---
$key = rl_key('rw');
$res = rl_key('res');
$counter = rl_key('counter');
$raw->cmd('SET', $counter, '0');
$go = rl_key('go');
$calls = array_map(static fn($i) => $client->begin($req(['op' => 'hammer', 'key' => $key, 'res' => $res, 'go' => $go,
    'counter' => $counter, 'rounds' => ROUNDS, 'seed' => $i])['params']), range(1, WORKERS));
rl_ok('hammer: all 8 workers are in their request', rw_wait(static fn() => (int) $raw->cmd('GET', "$go:ready") === WORKERS, 10.0, $calls));
$raw->cmd('SET', $go, '1');  // and start together
$t0 = microtime(true);
FcgiClient::await($calls, 90.0);
$elapsed = microtime(true) - $t0;
$replies = [];
foreach ($calls as $i => $c) {
    $j = $c->response->ok() ? $c->response->json() : null;
    if (!is_array($j)) {
        rl_ok("request $i answered", false, $c->response->describe());
        $j = ['errors' => ['no answer']];
    }
    $replies[$i] = $j;
}
$errors = array_merge(...array_values(array_map(static fn(array $j) => $j['errors'] ?? [], $replies)));
rl_same('hammer: no request reported an error, a lost hold or a gap', [], array_slice($errors, 0, 5));
$r = rw_resource($raw, $res);
rl_same('hammer: never a reader beside a writer, nor two writers', [], array_slice($r['violations'], 0, 5));
$writers = sum_of($replies, 'writer_sections');
rl_same('hammer: no lost update (counter = successful writer sections)', $writers, (int) $raw->cmd('GET', $counter));
rl_same('hammer: the resource counted the same writer sections', $writers, $r['writes']);
rl_same('hammer: every section ran', WORKERS * ROUNDS,
    sum_of($replies, 'read') + sum_of($replies, 'write') + sum_of($replies, 'down') + sum_of($replies, 'up')
    + sum_of($replies, 'up_refused') + sum_of($replies, 'up_timed_out') + sum_of($replies, 'moved')
    + sum_of($replies, 'lapse'));
rl_ok('hammer: read holds moved to another object ran (its synchronized() refused each time)', sum_of($replies, 'moved') >= 10,
    (string) sum_of($replies, 'moved'));
rl_ok('hammer: upgrades whose read lease ran out ran', sum_of($replies, 'lapse') >= 10, (string) sum_of($replies, 'lapse'));
$maxWait = max(array_map(static fn(array $j) => $j['max_wait'] ?? 99.0, $replies));
rl_ok('hammer: no acquire waited for a lease nobody held (longest wait under 5 s, the lock ttl is 10 s)', $maxWait < 5.0,
    sprintf('%.2f s', $maxWait));
rl_ok('hammer: readers overlapped (a reader entered while another was inside, often)', $r['overlaps'] >= 20,
    "{$r['overlaps']} overlapping entries, at most {$r['max_readers']} readers at once");
rl_ok('hammer: at least 3 readers were inside at once', $r['max_readers'] >= 3, (string) $r['max_readers']);
rl_ok('hammer: downgrades ran (no writer between their write and their read)', sum_of($replies, 'down') >= 10,
    (string) sum_of($replies, 'down'));
rl_ok('hammer: upgrades ran (no writer between their read and their write)', sum_of($replies, 'up') >= 5,
    (string) sum_of($replies, 'up'));
$refusedMax = max(array_map(static fn(array $j) => $j['up_refused_max_s'] ?? 0.0, $replies));
rl_same('hammer: no upgrade timed out (a second concurrent upgrade is refused, not left waiting)', 0,
    sum_of($replies, 'up_timed_out'));
rl_ok('hammer: a refused upgrade was refused at once (< 0.5 s)', $refusedMax < 0.5, sprintf('%.3f s', $refusedMax));
$contended = array_sum(array_map(static fn(array $j) => $j['metrics']['lock_contended'] ?? 0, $replies));
rl_ok('hammer: the workers contended (lock_contended summed > 50)', $contended > 50, (string) $contended);
rl_same('hammer: nobody left inside', [0, 0], [$r['readers'], $r['writers']]);
rl_same('hammer: no lock, read hold or queue left in Redis', [0, 0, 0],
    [$raw->cmd('EXISTS', rl_lock_key($key)), $raw->cmd('EXISTS', rl_lock_key($key) . ':holders'),
        $raw->cmd('EXISTS', rl_lock_key($key) . ':waiters')]);
printf("info: hammer: %d sections in %.1f s: %d reads, %d writes, %d downgrades, %d upgrades (%d refused at once, slowest refusal %.1f ms), %d moved read holds, %d lapsing upgrades (%d granted before the lapse); %d overlapping reader entries, at most %d readers at once; %d contended acquires, longest wait %.3f s\n",
    WORKERS * ROUNDS, $elapsed, sum_of($replies, 'read'), sum_of($replies, 'write'), sum_of($replies, 'down'),
    sum_of($replies, 'up'), sum_of($replies, 'up_refused'), $refusedMax * 1000, sum_of($replies, 'moved'),
    sum_of($replies, 'lapse'), sum_of($replies, 'lapse_upgraded'), $r['overlaps'], $r['max_readers'], $contended, $maxWait);

// --- 2. A writer's wait while readers keep arriving ---
// 6 workers read back to back (holds of 50..150 ms, so they overlap at random
// and the lock is never free of readers); a 7th asks for the lock alone 6 times,
// each time while readers are inside. FIFO: readers arriving after it queue
// behind it, so it waits at most for the read holds already inside.
$key = rl_key('rw-stream');
$res = rl_key('res-stream');
$waitersKey = rl_lock_key($key) . ':waiters';
$requests = array_map(static fn($i) => $req(['op' => 'reader_stream', 'key' => $key, 'res' => $res,
    'hold_ms' => READ_MAX_MS, 'seconds' => 4.0]), range(1, 6));
$requests['writer'] = $req(['op' => 'writer_probes', 'key' => $key, 'res' => $res, 'probes' => 6, 'gap_ms' => 300,
    'hold_ms' => 20, 'readers_before' => 2]);
$replies = run_all($client, $requests, 30.0);
$errors = array_merge(...array_values(array_map(static fn(array $j) => $j['errors'] ?? [], $replies)));
rl_same('stream: no errors', [], array_slice($errors, 0, 5));
$probes = $replies['writer']['probes'] ?? [];
rl_same('stream: 6 writer probes', 6, count($probes));
$waits = array_column($probes, 'wait');
$bound = READ_MAX_MS / 1000 + MARGIN;
rl_ok('stream: every probe asked while readers were inside', min(array_column($probes, 'readers_at_ask') ?: [0]) >= 1,
    json_encode(array_column($probes, 'readers_at_ask')));
rl_ok(sprintf('stream: every writer got in within the longest read hold + %.2f s (%.2f s)', MARGIN, $bound),
    max($waits ?: [99]) <= $bound, json_encode(array_map(static fn($w) => round($w, 3), $waits)));
rl_ok('stream: readers kept arriving and queued behind each writer', min(array_column($probes, 'queued_at_leave') ?: [0]) >= 1,
    json_encode(array_column($probes, 'queued_at_leave')));
$sections = array_map(static fn(array $j) => $j['sections'] ?? 0, array_diff_key($replies, ['writer' => 1]));
rl_ok('stream: every reader kept reading (>= 15 sections each in 4 s)', min($sections) >= 15, json_encode(array_values($sections)));
$r = rw_resource($raw, $res);
rl_same('stream: never a reader beside a writer', [], array_slice($r['violations'], 0, 5));
rl_ok('stream: readers overlapped', $r['max_readers'] >= 3, (string) $r['max_readers']);
sort($waits);
printf("info: stream: writer waits %s s (bound %.2f s); readers at ask %s; queued behind the writer at its release %s\n",
    json_encode(array_map(static fn($w) => round($w, 3), $waits)), $bound,
    json_encode(array_column($probes, 'readers_at_ask')), json_encode(array_column($probes, 'queued_at_leave')));

rl_ok('the pool still has its workers', $pool->intact());
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: control (no lock): the resource saw readers beside writers or two writers
ok: control (no lock): updates were lost
info: control without the lock: %d violations, counter %d after %d writer sections
ok: hammer: all 8 workers are in their request
ok: hammer: no request reported an error, a lost hold or a gap
ok: hammer: never a reader beside a writer, nor two writers
ok: hammer: no lost update (counter = successful writer sections)
ok: hammer: the resource counted the same writer sections
ok: hammer: every section ran
ok: hammer: read holds moved to another object ran (its synchronized() refused each time)
ok: hammer: upgrades whose read lease ran out ran
ok: hammer: no acquire waited for a lease nobody held (longest wait under 5 s, the lock ttl is 10 s)
ok: hammer: readers overlapped (a reader entered while another was inside, often)
ok: hammer: at least 3 readers were inside at once
ok: hammer: downgrades ran (no writer between their write and their read)
ok: hammer: upgrades ran (no writer between their read and their write)
ok: hammer: no upgrade timed out (a second concurrent upgrade is refused, not left waiting)
ok: hammer: a refused upgrade was refused at once (< 0.5 s)
ok: hammer: the workers contended (lock_contended summed > 50)
ok: hammer: nobody left inside
ok: hammer: no lock, read hold or queue left in Redis
info: hammer: %s
ok: stream: no errors
ok: stream: 6 writer probes
ok: stream: every probe asked while readers were inside
ok: stream: every writer got in within the longest read hold + 0.35 s (0.50 s)
ok: stream: readers kept arriving and queued behind each writer
ok: stream: every reader kept reading (>= 15 sections each in 4 s)
ok: stream: never a reader beside a writer
ok: stream: readers overlapped
info: stream: %s
ok: the pool still has its workers
done
