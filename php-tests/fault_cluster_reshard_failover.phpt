--TEST--
Fault: Redis Cluster under a steady php-fpm load of sessions (class and native forms, wait_replicas=1) and fenced locks: the slot holding live sessions and locks moves to another master while requests run (not one fails), then that master is SIGKILLed and its replica takes over; every request succeeds or fails fast with a clear error, the pool recovers without a restart, fencing tokens keep rising, and no acknowledged write is lost
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_load.php';

const PREFIX = 'PHPREDIS_CLUSTER_SESSION:';
const TIMEOUT = 0.5;
const LOCK_TTL = 2.0;
const LOCK_WAIT = 3.0;
const SESSIONS = 12;
const CONCURRENCY = 12;
const REQUEST_BOUND = 8.0;
const RECOVERY_BOUND = 20.0;

$nodes = fault_start_cluster(3, 1);
$ctl = rl_start_redis(); // the fenced store
$seeds = fault_cluster_seeds($nodes);
$timeouts = 'timeout=' . TIMEOUT . '&read_timeout=' . TIMEOUT;
$classDsn = 'redis-cluster://' . implode(',', $seeds) . "?$timeouts&prefix=" . PREFIX . '&wait_replicas=1&wait_timeout=500';
$savePath = implode('&', array_map(fn($s) => "seed[]=$s", $seeds)) . "&$timeouts&wait_replicas=1&wait_timeout=500";
$lockDsn = 'redis-cluster://' . implode(',', $seeds) . "?$timeouts";
$options = ['lock_ttl' => LOCK_TTL, 'lock_wait' => LOCK_WAIT];
$pool = st_pool('native', $savePath, $options, 'ini', [], 8);
$workersBefore = $pool->workerPids();

$sids = [];
for ($i = 0; $i < SESSIONS; $i++) {
    $sids[$i] = ['sid' => st_sid(), 'form' => ST_FORMS[$i % 2]];
}
// The locks share their sessions' slots: "lock:{PREFIX<sid>}" hashes like "PREFIX<sid>".
$lockNames = [PREFIX . $sids[0]['sid'], PREFIX . $sids[1]['sid'], PREFIX . $sids[2]['sid']];
$next = static function (int $n) use ($sids, $classDsn, $lockDsn, $lockNames, $options, $ctl): array {
    if ($n % 4 === 3) {
        $key = $lockNames[$n % 3];
        $params = FcgiClient::params(ST_APP . '/fault_lock.php',
            ['op' => 'once', 'key' => $key, 'ttl' => LOCK_TTL, 'wait' => LOCK_WAIT, 'store' => "fenced:$key"],
            ['RL_DSN' => $lockDsn, 'RL_CTL_PORT' => (string) $ctl['port']]);
        return [$params, ['kind' => 'lock', 'key' => $key]];
    }
    $s = $sids[($n - intdiv($n + 1, 4)) % SESSIONS];
    $req = st_req($s['form'], $classDsn, $options, 0, 'fault_session.php', ['sid' => $s['sid'], 'key' => "k$n"]);
    return [$req['params'], ['kind' => 'session', 'form' => $s['form'], 'sid' => $s['sid'], 'key' => "k$n"]];
};
$load = new FaultLoad($pool->client(), CONCURRENCY, $next, REQUEST_BOUND);

/** 'ok', 'failed' (fast, with a clear error naming Redis) or 'bad', and how long the app took. */
function classify(array $r): array
{
    $resp = $r['response'];
    $j = $resp->json();
    if (!$resp->ok() || !is_array($j)) {
        return ['bad', 'no JSON reply: ' . $resp->describe()];
    }
    $took = $j['t_end'] - $j['t0'];
    if ($r['meta']['kind'] === 'lock') {
        if ($j['ok'] === true && $j['stored'] === 1) {
            return ['ok', $took];
        }
        if ($j['ok'] === true) {
            return ['bad', 'the fenced store refused a fencing token: ' . json_encode($j)];
        }
        if ($j['exception'] === 'RedisLease\ConnectionException' && str_contains($j['message'], 'Redis')) {
            return ['failed', $took];
        }
        return ['bad', 'lock request: ' . json_encode($j)];
    }
    if ($j['started'] === true && $j['acked'] === true && $j['warnings'] === []) {
        return ['ok', $took];
    }
    if (!$j['acked'] && st_has_warning(st_ours($j['warnings']), 'redis_lease:', 'Redis')) {
        return ['failed', $took];
    }
    return ['bad', 'session request: ' . json_encode($j)];
}

function tally(array $results, float $since = 0.0): array
{
    $t = ['ok' => 0, 'failed' => 0, 'bad' => 0, 'slowest' => 0.0, 'slowest_failure' => 0.0, 'bad_examples' => [],
        'last_failure_began' => $since];
    foreach ($results as $r) {
        [$what, $detail] = classify($r);
        $t[$what]++;
        $t['slowest'] = max($t['slowest'], $r['response']->duration());
        if ($what === 'failed') {
            $t['slowest_failure'] = max($t['slowest_failure'], $detail);
            $t['last_failure_began'] = max($t['last_failure_began'], $r['response']->started);
        } elseif ($what === 'bad' && count($t['bad_examples']) < 3) {
            $t['bad_examples'][] = $detail;
        }
    }
    return $t;
}

/** Runs the load until 100 requests begun after a moment in a row have succeeded (bounded). */
function recover(FaultLoad $load, float $bound): bool
{
    $deadline = microtime(true) + $bound;
    $from = microtime(true);
    while (microtime(true) < $deadline) {
        $load->runFor(0.2);
        $after = array_filter($load->results, fn($r) => $r['response']->started >= $from);
        $t = tally($after);
        if (count($after) >= 100 && $t['ok'] === count($after)) {
            return true;
        }
        if ($t['failed'] + $t['bad'] > 0) {
            $from = microtime(true);
        }
    }
    return false;
}

// --- 1. Warm-up ---
$load->runCount(100);
$w = tally($load->results);
rl_same('warm-up: every request succeeded', [count($load->results), []], [$w['ok'], $w['bad_examples']]);

// --- 2. Move the slot of the busiest session and its locks to another master, under load ---
[$slot, $fromPort] = fault_cluster_owner($nodes[0]['port'], PREFIX . $sids[0]['sid']);
$masters = array_unique(array_map(fn($r) => (int) $r[2][1], (new RlRaw($nodes[0]['port']))->cmd('CLUSTER', 'SLOTS')));
$toPort = array_values(array_diff($masters, [$fromPort]))[0];
$keysBefore = (new RlRaw($fromPort))->cmd('CLUSTER', 'COUNTKEYSINSLOT', $slot);
$n1 = count($load->results);
$tMove = microtime(true);
fault_cluster_move_slot($nodes, $slot, $toPort, fn() => $load->runFor(0.05));
rl_same('the slot now lives on the other master', $toPort, fault_cluster_owner($nodes[0]['port'], PREFIX . $sids[0]['sid'])[1]);
printf("info: moved slot %d with %d keys (live session, lock, fence, queue)\n", $slot, $keysBefore);
rl_ok('the slot held live keys', $keysBefore >= 2, (string) $keysBefore);
rl_ok('resharding: requests succeed', recover($load, RECOVERY_BOUND));
$phase2 = tally(array_slice($load->results, $n1), $tMove);
// Mid-move, scripts are redirected (ASK, MOVED) or refused (TRYAGAIN) until their
// keys are on one node: none of that may reach the application.
rl_same('resharding: not one request failed', 0, $phase2['failed'] + $phase2['bad']);

// --- 3. Kill that master: its replica takes over; the node restarts and rejoins ---
$victim = array_values(array_filter($nodes, fn($n) => $n['port'] === $toPort))[0];
$n2 = count($load->results);
$tKill = microtime(true);
rl_kill_pid($victim['pid'], 'KILL');
// Keep its port (the cluster would take another server there for it) until it restarts.
rl_wait_until(fn() => ($GLOBALS['placeholder'] = @stream_socket_server("tcp://127.0.0.1:$toPort")) !== false, 5.0, 0.005);
$deadline = microtime(true) + RECOVERY_BOUND;
while (fault_cluster_owner($nodes[1]['port'] === $toPort ? $nodes[2]['port'] : $nodes[1]['port'], PREFIX . $sids[0]['sid'])[1] === $toPort
    && microtime(true) < $deadline) {
    $load->runFor(0.2);
}
fclose($GLOBALS['placeholder']);
fault_start_cluster_node($victim['dir'], $toPort); // rejoins as the new master's replica
rl_ok('failover: requests succeed again', recover($load, RECOVERY_BOUND));
$phase3 = tally(array_slice($load->results, $n2), $tKill);
rl_ok('every request ended (none left in flight)', $load->drain(REQUEST_BOUND + 2.0));

foreach (['resharding' => [$phase2, $tMove], 'failover' => [$phase3, $tKill]] as $label => [$t, $at]) {
    printf("info: %s: %d ok, %d failed fast; the last failure began %.2f s after it started; slowest failure %.3f s\n",
        $label, $t['ok'], $t['failed'], $t['last_failure_began'] - $at, $t['slowest_failure']);
    rl_same("$label: every request succeeded or failed with a clear error", [], $t['bad_examples']);
    rl_ok("$label: no request hung (each within " . REQUEST_BOUND . ' s)', $t['slowest'] < REQUEST_BOUND, sprintf('%.3f s', $t['slowest']));
    rl_ok("$label: failures stopped within " . RECOVERY_BOUND . ' s', $t['last_failure_began'] - $at < RECOVERY_BOUND);
}
rl_ok('the php-fpm master still runs', $pool->masterRunning());
rl_same('the same 8 workers serve the pool', $workersBefore, $pool->workerPids());

// --- 4. No acknowledged write lost ---
$live = array_values(array_filter($nodes, fn($n) => $n['port'] !== $toPort));
$lost = [];
$acked = 0;
foreach ($load->results as $r) {
    $j = $r['response']->json();
    if ($r['meta']['kind'] !== 'session' || !is_array($j) || $j['acked'] !== true) {
        continue;
    }
    $acked++;
    [, $port] = fault_cluster_owner($live[0]['port'], PREFIX . $r['meta']['sid']);
    $stored = st_decode((new RlRaw($port))->cmd('GET', PREFIX . $r['meta']['sid'])) ?? [];
    if (!array_key_exists($r['meta']['key'], $stored)) {
        $lost[] = $r['meta']['form'] . ' ' . $r['meta']['key'];
    }
}
printf("info: %d acknowledged session writes checked\n", $acked);
rl_ok('hundreds of acknowledged writes to check', $acked >= 200, (string) $acked);
rl_same('every acknowledged session write survived the move and the failover', [], $lost);
$locks = count(array_filter($load->results, fn($r) => $r['meta']['kind'] === 'lock' && classify($r)[0] === 'ok'));
rl_ok('dozens of fenced lock writes, every one accepted (fences kept rising)', $locks >= 50, (string) $locks);
$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: warm-up: every request succeeded
ok: the slot now lives on the other master
info: moved slot %d with %d keys (live session, lock, fence, queue)
ok: the slot held live keys
ok: resharding: requests succeed
ok: resharding: not one request failed
ok: failover: requests succeed again
ok: every request ended (none left in flight)
info: resharding: %d ok, %d failed fast; the last failure began %f s after it started; slowest failure %f s
ok: resharding: every request succeeded or failed with a clear error
ok: resharding: no request hung (each within 8 s)
ok: resharding: failures stopped within 20 s
info: failover: %d ok, %d failed fast; the last failure began %f s after it started; slowest failure %f s
ok: failover: every request succeeded or failed with a clear error
ok: failover: no request hung (each within 8 s)
ok: failover: failures stopped within 20 s
ok: the php-fpm master still runs
ok: the same 8 workers serve the pool
info: %d acknowledged session writes checked
ok: hundreds of acknowledged writes to check
ok: every acknowledged session write survived the move and the failover
ok: dozens of fenced lock writes, every one accepted (fences kept rising)
done
