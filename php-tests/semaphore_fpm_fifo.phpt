--TEST--
DistributedSemaphore under php-fpm: 16 workers x 25 permits with limit 3: never more than 3 inside (a shared resource, one Lua check-and-set), every waiter served in the order it joined the queue (Redis's own execution order, seen by MONITOR), a SIGKILLed holder's permit free within its ttl; a Redis restart forgets the permits: new acquires start from zero, old holders learn it at release()/isAcquired()/their renewal, nothing leaks
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/../testing/fpm_pool.php';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/fpm-app/rw_common.inc';

const WORKERS = 16;
const ROUNDS = 25;
const LIMIT = 3;
const KILL_TTL = 1.0;     // the SIGKILLed holder's permit
const MARGIN = 0.5;

$srv = rl_start_redis();
$port = $srv['port'];
$raw = new RlRaw($port);
$dsn = $srv['dsn'];
$pool = FpmPool::start(['max_children' => WORKERS]);
$client = $pool->client();
$app = __DIR__ . '/fpm-app/rw_app.php';
$req = static fn(array $q) => ['params' => FcgiClient::params($app, $q, ['RL_DSN' => $dsn, 'RL_CTL_PORT' => (string) $port])];

/** Score (ms) left on $token's permit in semaphore $k, per Redis's clock; null when none. */
function permit_left(RlRaw $raw, string $k, string $token): ?int
{
    $ends = $raw->cmd('ZSCORE', rl_lock_key($k) . ':semaphore:holders', $token);
    [$s, $us] = $raw->cmd('TIME');
    return $ends === null ? null : (int) $ends - ((int) $s * 1000 + intdiv((int) $us, 1000));
}

// --- 1. 16 workers x 25 permits, limit 3, every grant and queue join seen by MONITOR ---
$key = rl_key('sem');
$res = rl_key('res-sem');
$waitersKey = rl_lock_key($key) . ':semaphore:waiters';
$holdersKey = rl_lock_key($key) . ':semaphore:holders';
$mon = stream_socket_client("tcp://127.0.0.1:$port");
fwrite($mon, "MONITOR\r\n");
fgets($mon);
$go = rl_key('go');
$calls = array_map(static fn($i) => $client->begin($req(['op' => 'sem', 'key' => $key, 'res' => $res, 'go' => $go,
    'limit' => LIMIT, 'rounds' => ROUNDS, 'hold_ms' => 5, 'ttl' => 10])['params']), range(1, WORKERS));
// All 16 start together: every worker is in its request before the go.
rl_ok('all 16 workers are in their request', rw_wait(static fn() => (int) $raw->cmd('GET', "$go:ready") === WORKERS, 10.0, $calls));
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
rl_same('every permit was had (16 x 25)', WORKERS * ROUNDS, $permits);
$r = rw_resource($raw, $res);
rl_same('never more than 3 inside', [], array_slice($r['violations'], 0, 5));
rl_same('3 were inside at once (the limit was used)', LIMIT, $r['max_inside']);
rl_same('the resource counted every permit', WORKERS * ROUNDS, $r['permits']);
rl_same('MONITOR saw a grant for every permit', WORKERS * ROUNDS, count($granted));
rl_ok('most acquires queued (>= 300 of 400)', count($joined) >= 300, (string) count($joined));
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
printf("info: %d permits in %.1f s by %d workers; %d waited in the queue; %d MONITOR lines\n",
    $permits, $elapsed, WORKERS, count($joinOrder), $lines);

// --- 2. A holder SIGKILLed: its permit frees within its ttl ---
$key = rl_key('sem-kill');
$hold = static fn(string $ctl, float $ttl, float $wait) => $req(['op' => 'hold', 'shape' => 'permit', 'key' => $key,
    'limit' => 2, 'ttl' => $ttl, 'wait' => $wait, 'ctl' => $ctl, 'go_timeout' => 20]);
$ctlA = rl_key('ctl-a');
$ctlB = rl_key('ctl-b');
$ctlW = rl_key('ctl-w');
$a = $client->begin($hold($ctlA, KILL_TTL, 0)['params']);
$b = $client->begin($hold($ctlB, 30.0, 0)['params']);
rl_ok('two workers hold the 2 permits', rw_wait(static fn() => $raw->cmd('EXISTS', "$ctlA:started", "$ctlB:started") === 2, 5.0, [$a, $b]));
$w = $client->begin($hold($ctlW, 30.0, 5.0)['params']);
rl_ok('a third queues for a permit', rw_wait(static fn() => $raw->cmd('ZCARD', rl_lock_key($key) . ':semaphore:waiters') === 1, 5.0, [$a, $b, $w]));
$tokenA = $raw->cmd('GET', "$ctlA:token");
$left = permit_left($raw, $key, $tokenA);
$pidA = (int) $raw->cmd('GET', "$ctlA:started");
$tKill = microtime(true);
rl_kill_pid($pidA, 'KILL');
rl_ok("the first holder's worker is gone", rw_wait(static fn() => in_array(fault_proc_state($pidA), [null, 'Z'], true), 3.0, [$b, $w]));
rl_ok('the waiter got a permit', rw_wait(static fn() => $raw->cmd('EXISTS', "$ctlW:started") === 1, KILL_TTL + 3.0, [$b, $w]));
$el = microtime(true) - $tKill;
rl_ok('not before the killed holder\'s permit ran out', $el >= $left / 1000 - 0.1,
    sprintf('%.3f s after the kill; %d ms were left', $el, $left));
rl_ok(sprintf('within its ttl + %.1f s of the kill', MARGIN), $el <= KILL_TTL + MARGIN, sprintf('%.3f s', $el));
$raw->cmd('SET', "$ctlB:go", '1');
$raw->cmd('SET', "$ctlW:go", '1');
FcgiClient::await([$a, $b, $w], 10.0);
$jb = $b->response->json() ?? [];
$jw = $w->response->json() ?? [];
rl_same('the other holder kept its permit and released it', [true, true], [$jb['acquired'] ?? null, $jb['released'] ?? null]);
rl_same('the waiter released its permit', [true, true], [$jw['acquired'] ?? null, $jw['released'] ?? null]);
rl_same('no permit left', 0, $raw->cmd('EXISTS', rl_lock_key($key) . ':semaphore:holders'));
printf("info: SIGKILLed holder (ttl %.1f s, %d ms left at the kill): its permit went to the waiter %.3f s after the kill\n",
    KILL_TTL, $left, $el);
$pool->awaitWorkers(5.0);
$pool->stop();

// --- 3. Redis restarts without persistence: the permits are forgotten ---
$key = rl_key('sem-restart');
$holders = rl_lock_key($key) . ':semaphore:holders';
$renewed = new DistributedSemaphore($key, LIMIT, 1.5, $dsn, autoRenew: true);
$old = [$renewed, new DistributedSemaphore($key, LIMIT, 30.0, $dsn), new DistributedSemaphore($key, LIMIT, 30.0, $dsn)];
rl_same('before: 3 permits taken', [true, true, true], array_map(static fn($s) => $s->acquire(), $old));
rl_same('before: a 4th is refused', false, (new DistributedSemaphore($key, LIMIT, 30.0, $dsn))->acquire());
rl_stop_redis($srv);
$srv = rl_start_redis([], null, $port);
$raw = new RlRaw($port);
rl_same('restarted: Redis has no permit', 0, $raw->cmd('EXISTS', $holders));
/** acquire(), allowing one ConnectionException for a pooled connection to the old server. */
$take = static function (DistributedSemaphore $s): mixed {
    $o = fault_outcome(fn() => $s->acquire());
    if ($o['exception'] === RedisLease\ConnectionException::class) {
        $o = fault_outcome(fn() => $s->acquire());
    }
    return $o['exception'] ?? $o['value'];
};
$new = [new DistributedSemaphore($key, LIMIT, 30.0, $dsn), new DistributedSemaphore($key, LIMIT, 30.0, $dsn),
    new DistributedSemaphore($key, LIMIT, 30.0, $dsn)];
rl_same('restarted: new acquires start from zero (3 permits at once)', [true, true, true], array_map($take, $new));
$fourth = new DistributedSemaphore($key, LIMIT, 30.0, $dsn);
rl_same('restarted: a 4th is still refused (the limit counts from zero)', false, $take($fourth));
rl_same('old holder: isAcquired() is false', false, $old[1]->isAcquired());
rl_same('old holder: release() is false', false, $old[2]->release());
rl_ok('old renewed holder: its renewal finds the permit gone (getToken() null) within its ttl',
    rl_wait_until(static fn() => $renewed->getToken() === null, 1.5 + MARGIN));
rl_same('old renewed holder: release() is false', false, $renewed->release());
rl_same('old holder: release() after isAcquired() is false', false, $old[1]->release());
rl_same("the old holders' releases freed none of the new permits", 3, $raw->cmd('ZCARD', $holders));
rl_same('a 4th is still refused', false, $take($fourth));
rl_same('the new holders release', [true, true, true], array_map(static fn($s) => $s->release(), $new));
// A first attempt on a pooled connection to the old server may have been voided
// (its outcome resolved on a fresh connection): its marker expires by itself.
$left = $raw->cmd('KEYS', rl_lock_key($key) . '*');
rl_same('restart: no permit, queue or wake-up left in Redis', [], array_values(array_filter($left, static fn($k) => !str_contains($k, ':void:'))));
rl_ok('restart: void markers of broken attempts expire', array_filter($left, static fn($k) => $raw->cmd('PTTL', $k) < 0) === [], json_encode($left));
$again = [new DistributedSemaphore($key, LIMIT, 30.0, $dsn), new DistributedSemaphore($key, LIMIT, 30.0, $dsn),
    new DistributedSemaphore($key, LIMIT, 30.0, $dsn)];
rl_same('3 permits again, none leaked', [true, true, true], array_map($take, $again));
rl_same('and released', [true, true, true], array_map(static fn($s) => $s->release(), $again));
echo "done\n";
?>
--EXPECTF--
ok: all 16 workers are in their request
ok: no request reported an error or a lost permit
ok: every permit was had (16 x 25)
ok: never more than 3 inside
ok: 3 were inside at once (the limit was used)
ok: the resource counted every permit
ok: MONITOR saw a grant for every permit
ok: most acquires queued (>= 300 of 400)
ok: every waiter got its permit
ok: every waiter was served in the order it joined the queue
ok: no newcomer got a permit while others were queued
ok: no permit, queue or wake-up left in Redis
info: %s
ok: two workers hold the 2 permits
ok: a third queues for a permit
ok: the first holder's worker is gone
ok: the waiter got a permit
ok: not before the killed holder's permit ran out
ok: within its ttl + 0.5 s of the kill
ok: the other holder kept its permit and released it
ok: the waiter released its permit
ok: no permit left
info: %s
ok: before: 3 permits taken
ok: before: a 4th is refused
ok: restarted: Redis has no permit
ok: restarted: new acquires start from zero (3 permits at once)
ok: restarted: a 4th is still refused (the limit counts from zero)
ok: old holder: isAcquired() is false
ok: old holder: release() is false
ok: old renewed holder: its renewal finds the permit gone (getToken() null) within its ttl
ok: old renewed holder: release() is false
ok: old holder: release() after isAcquired() is false
ok: the old holders' releases freed none of the new permits
ok: a 4th is still refused
ok: the new holders release
ok: restart: no permit, queue or wake-up left in Redis
ok: restart: void markers of broken attempts expire
ok: 3 permits again, none leaked
ok: and released
done
