--TEST--
DistributedSemaphore with weights under php-fpm: 12 workers take 1, 2, 3 or 5 permits at once of a semaphore of 5, 20 times each: never more than 5 permits inside (a shared resource, one Lua check-and-set), every waiter served in the order it joined the queue (Redis's own execution order, seen by MONITOR: a large request at the head is never overtaken by smaller ones behind it), nothing left in Redis
--SKIPIF--
<?php require __DIR__ . '/../testing/apache_pool.php'; if ($why = rl_php_pool_unavailable()) die("skip $why"); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/apache_pool.php'; // FpmPool, or ApachePool with RL_PHP_SERVER=apache
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/fpm-app/rw_common.inc';

const WORKERS = 12;
const ROUNDS = 20;
const LIMIT = 5;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$pool = rl_php_pool(['max_children' => WORKERS]);
$client = $pool->client();
$app = __DIR__ . '/fpm-app/rw_app.php';
$req = static fn(array $q) => ['params' => FcgiClient::params($app, $q, ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port])];

// --- 12 workers x 20 holds of 1, 2, 3 or 5 permits, limit 5, every grant and queue join seen by MONITOR ---
$key = rl_key('sem');
$res = rl_key('res-sem');
$waitersKey = rl_lock_key($key) . ':semaphore:waiters';
$holdersKey = rl_lock_key($key) . ':semaphore:holders';
$mon = stream_socket_client("tcp://127.0.0.1:$port");
fwrite($mon, "MONITOR\r\n");
fgets($mon);
$go = rl_key('go');
$calls = array_map(static fn($i) => $client->begin($req(['op' => 'sem', 'key' => $key, 'res' => $res, 'go' => $go,
    'limit' => LIMIT, 'rounds' => ROUNDS, 'hold_ms' => 5, 'ttl' => 10, 'weights' => '1,2,3,5', 'seed' => $i])['params']),
    range(1, WORKERS));
// All start together: every worker is in its request before the go.
rl_ok('all 12 workers are in their request', rw_wait(static fn() => (int) $raw->cmd('GET', "$go:ready") === WORKERS, 10.0, $calls));
$raw->cmd('SET', $go, '1');
$t0 = microtime(true);
FcgiClient::await($calls, 120.0);
$replies = [];
foreach ($calls as $i => $c) {
    $r = $c->response;
    $replies[$i] = $r->ok() && is_array($r->json()) ? $r->json() : ['errors' => [$r->describe()]];
}
$elapsed = microtime(true) - $t0;
$raw->cmd('ECHO', 'sem-fifo-end');
stream_set_timeout($mon, 10);
// Queue joins are the acquire script's ZADD to the waiters set; grants are the
// ZADD of a token to the holders set (by a release handing the permit on, by a
// waiter's own new attempt, or at once when nobody queued). MONITOR shows the
// commands scripts run, in the order Redis ran them.
// A grant to a token that never queued while others were queued would be a
// newcomer overtaking them (what a release that lets anyone grab the permit does).
$joined = $granted = $queued = [];
$overtook = [];
$lines = 0;
while (($line = fgets($mon)) !== false && !str_contains($line, 'sem-fifo-end')) {
    $lines++;
    if (preg_match('/\[0 lua\] "(ZADD|ZREM)" "([^"]+)" (?:"NX" )?(?:"[^"]+" )?"([0-9a-f]{32})"/', $line, $m)) {
        [, $cmd, $set, $token] = $m;
        if ($set === $waitersKey && $cmd === 'ZADD') {
            $joined[$token] ??= count($joined);
            $queued[$token] = true;
        } elseif ($set === $waitersKey) {
            unset($queued[$token]);
        } elseif ($set === $holdersKey && $cmd === 'ZADD' && !isset($granted[$token])) {
            $granted[$token] = count($granted);
            // (A waiter leaves the queue just before its grant: ZREM, then ZADD.)
            if (!isset($joined[$token]) && $queued !== []) {
                $overtook[] = $token;
            }
            unset($queued[$token]);
        }
    }
}
fclose($mon);
$errors = array_merge(...array_values(array_map(static fn(array $j) => $j['errors'] ?? [], $replies)));
rl_same('no request reported an error or a lost permit', [], array_slice($errors, 0, 5));
$permits = array_sum(array_map(static fn(array $j) => $j['permits'] ?? 0, $replies));
rl_same('every hold was had (12 x 20)', WORKERS * ROUNDS, $permits);
$weighed = array_sum(array_map(static fn(array $j) => $j['weighed'] ?? 0, $replies));
$r = rw_resource($raw, $res);
rl_same('never more than 5 permits inside', [], array_slice($r['violations'], 0, 5));
rl_same('5 permits were inside at once (the limit was used)', LIMIT, $r['max_inside']);
rl_same('the resource counted every hold', WORKERS * ROUNDS, $r['permits']);
rl_same('MONITOR saw a grant for every hold', WORKERS * ROUNDS, count($granted));
rl_ok('most acquires queued (>= 120 of 240)', count($joined) >= 120, (string) count($joined));
// Grant order of the tokens that queued, against their join order.
asort($granted);
$grantOrder = array_values(array_filter(array_keys($granted), static fn($t) => isset($joined[$t])));
$joinOrder = array_keys($joined);
rl_same('every waiter got its permit', count($joinOrder), count($grantOrder));
$firstOff = null;
foreach ($joinOrder as $i => $t) {
    if (($grantOrder[$i] ?? null) !== $t) {
        $firstOff = $i;
        break;
    }
}
rl_ok('every waiter was served in the order it joined the queue', $firstOff === null,
    "first difference at waiter #$firstOff of " . count($joinOrder));
rl_same('no newcomer got a permit while others were queued', 0, count($overtook));
rl_same('no permit, queue or wake-up left in Redis', [], $raw->cmd('KEYS', rl_lock_key($key) . '*'));
printf("info: %d holds of %d permits in all in %.1f s by %d workers; %d waited in the queue; %d MONITOR lines\n",
    $permits, $weighed, $elapsed, WORKERS, count($joinOrder), $lines);

$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: all 12 workers are in their request
ok: no request reported an error or a lost permit
ok: every hold was had (12 x 20)
ok: never more than 5 permits inside
ok: 5 permits were inside at once (the limit was used)
ok: the resource counted every hold
ok: MONITOR saw a grant for every hold
ok: most acquires queued (>= 120 of 240)
ok: every waiter got its permit
ok: every waiter was served in the order it joined the queue
ok: no newcomer got a permit while others were queued
ok: no permit, queue or wake-up left in Redis
info: %d holds of %d permits in all in %f s by 12 workers; %d waited in the queue; %d MONITOR lines
done
