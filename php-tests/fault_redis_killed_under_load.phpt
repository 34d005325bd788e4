--TEST--
Fault: redis-server SIGKILLed under a steady php-fpm load of sessions (class and native forms) and locks: every request succeeds or fails fast with a clear error, no worker hangs, a restart on the same port recovers without restarting php-fpm, and no acknowledged session write is lost
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fpm-app/harness.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_load.php';

const CONNECT_TIMEOUT = 0.5;
const READ_TIMEOUT = 0.5;
const LOCK_TTL = 1.0;        // session lock_ttl and DistributedLock ttl
const LOCK_WAIT = 2.0;       // > LOCK_TTL: a lease left by a request cut off by the kill only delays
const SESSIONS = 24;         // half of them in each form
const CONCURRENCY = 16;      // requests in flight, for a pool of 8 workers
const REQUEST_BOUND = 6.0;   // no request may take longer (client side, queueing included)

// Redis with an append-only file fsynced on every write, in a temp dir: a write
// Redis acknowledged survives the SIGKILL, so "acknowledged but lost" can only
// be the extension's fault. The restart reuses the directory and the port.
$dir = fault_tempdir('aof');
$redisArgs = ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', $dir];
$srv = fault_start_redis($redisArgs);
$port = $srv['port'];
$raw = new RlRaw($port);

// Timeouts three ways: the class form by a redis:// DSN, the native form by
// phpredis's save_path syntax, the locks by the ini settings.
$dsnClass = "redis://127.0.0.1:$port?connect_timeout=" . CONNECT_TIMEOUT . '&read_timeout=' . READ_TIMEOUT;
$dsnNative = "tcp://127.0.0.1:$port?timeout=" . CONNECT_TIMEOUT . '&read_timeout=' . READ_TIMEOUT;
$options = ['lock_ttl' => LOCK_TTL, 'lock_wait' => LOCK_WAIT];
// One static pool of 8 serves both forms: it is configured for the native
// form, and a class-form request installs its own handler.
$pool = st_pool('native', $dsnNative, $options, 'ini', [
    'redis_lease.dsn' => "redis://127.0.0.1:$port",
    'redis_lease.connect_timeout' => (string) CONNECT_TIMEOUT,
    'redis_lease.read_timeout' => (string) READ_TIMEOUT,
], 8);
$workersBefore = $pool->workerPids();

$sids = [];
for ($i = 0; $i < SESSIONS; $i++) {
    $sids[$i] = ['sid' => st_sid(), 'form' => ST_FORMS[$i % 2]];
}

/** Request $n: three of four are session writes (one key each), one of four a lock. */
$next = static function (int $n) use ($sids, $dsnClass, $options): array {
    if ($n % 4 === 3) {
        $key = 'fault-load-' . ($n % 3);
        $params = FcgiClient::params(ST_APP . '/fault_lock.php',
            ['op' => 'once', 'key' => $key, 'ttl' => LOCK_TTL, 'wait' => LOCK_WAIT]);
        return [$params, ['kind' => 'lock', 'key' => $key]];
    }
    // Session requests take the sessions in turn, so both forms get as many.
    $s = $sids[($n - intdiv($n + 1, 4)) % SESSIONS];
    $req = st_req($s['form'], $dsnClass, $options, 0, 'fault_session.php', ['sid' => $s['sid'], 'key' => "k$n"]);
    return [$req['params'], ['kind' => 'session', 'form' => $s['form'], 'sid' => $s['sid'], 'key' => "k$n"]];
};
$load = new FaultLoad($pool->client(), CONCURRENCY, $next, REQUEST_BOUND);

/**
 * What one ended request tells: 'ok', 'failed' (with a clear error), or
 * 'bad' (anything else: no JSON, a hang, an unclear error) and why.
 */
function classify(array $r, int $port): array
{
    $resp = $r['response'];
    $j = $resp->json();
    if (!$resp->ok() || !is_array($j)) {
        return ['bad', 'no JSON reply: ' . $resp->describe()];
    }
    $redis = "Redis at 127.0.0.1:$port";
    $took = $j['t_end'] - $j['t0'];
    if ($r['meta']['kind'] === 'lock') {
        if ($j['ok'] === true) {
            return ['ok', $took];
        }
        if ($j['exception'] === 'RedisLease\ConnectionException' && str_contains($j['message'], $redis)) {
            return ['failed', $took];
        }
        return ['bad', 'lock request: ' . json_encode($j)];
    }
    if ($j['started'] === true && $j['acked'] === true && $j['warnings'] === []) {
        return ['ok', $took];
    }
    // A failure must say so with our warning naming Redis: at session_start()
    // (false), or at the write (not acknowledged).
    $ours = st_ours($j['warnings']);
    if (!$j['acked'] && st_has_warning($ours, 'redis_lease:', $redis)) {
        return ['failed', $took];
    }
    return ['bad', 'session request: ' . json_encode($j)];
}

/** Tally $results: counts by outcome, the slowest request and failure, the first bad ones. */
function tally(array $results, int $port): array
{
    $t = ['ok' => 0, 'failed' => 0, 'bad' => 0, 'slowest_failure' => 0.0, 'slowest' => 0.0, 'bad_examples' => []];
    foreach ($results as $r) {
        [$what, $detail] = classify($r, $port);
        $t[$what]++;
        $t['slowest'] = max($t['slowest'], $r['response']->duration());
        if ($what === 'failed') {
            $t['slowest_failure'] = max($t['slowest_failure'], $detail);
        } elseif ($what === 'bad' && count($t['bad_examples']) < 3) {
            $t['bad_examples'][] = $detail;
        }
    }
    return $t;
}

// --- 1. Redis up: a warm-up load, every request succeeds ---
$load->runCount(120);
$phase1 = tally($load->results, $port);
rl_ok('before the kill: at least 120 requests ended', count($load->results) >= 120, (string) count($load->results));
rl_same('before the kill: every request succeeded', ['ok' => count($load->results), 'failed' => 0, 'bad' => 0],
    ['ok' => $phase1['ok'], 'failed' => $phase1['failed'], 'bad' => $phase1['bad']] + ($phase1['bad_examples'] ? ['why' => $phase1['bad_examples']] : []));

// --- 2. SIGKILL redis-server while requests are in flight ---
$load->runCount(40);
$inFlightAtKill = $load->inFlight();
$tKill = microtime(true);
rl_stop_redis($srv);
rl_ok('redis-server is gone', !rl_ping($port));
// The outage, under load: 1 s, or 150 more requests if they end sooner.
$load->runFor(1.0, 150);

// --- 3. Restart on the same port with the same append-only file ---
// (fault_start_redis: see there why not rl_start_redis while requests are in flight.)
$srv2 = fault_start_redis($redisArgs, $port);
$tUp = microtime(true);
$raw = new RlRaw($port);
$load->runCount(180);
$drained = $load->drain(REQUEST_BOUND + 2.0);
rl_ok('every request ended (none left in flight)', $drained, $load->inFlight() . ' still in flight');

// Sort the requests by when they ran relative to the outage.
$before = $during = $after = [];
foreach ($load->results as $r) {
    $resp = $r['response'];
    if ($resp->finished < $tKill) {
        $before[] = $r;
    } elseif ($resp->started >= $tUp) {
        $after[] = $r;
    } else {
        $during[] = $r;
    }
}
$b = tally($before, $port);
$d = tally($during, $port);
$a = tally($after, $port);
printf("info: %d requests: %d before the kill, %d overlapping the outage (%d ok, %d failed), %d after the restart; %d in flight at the kill\n",
    count($load->results), count($before), count($during), $d['ok'], $d['failed'], count($after), $inFlightAtKill);

rl_same('requests that ended before the kill all succeeded', count($before), $b['ok']);
rl_same('requests overlapping the outage: each succeeded or failed with a clear error', [], $d['bad_examples']);
rl_ok('the outage was noticed: at least 20 requests failed', $d['failed'] >= 20, "{$d['failed']} failed");
// A failure is a refused connection or a broken one, never a wait for a reply
// from a dead server: it must come well within connect + read timeout.
rl_ok('every failure came within connect_timeout + read_timeout (in the app)',
    $d['slowest_failure'] <= CONNECT_TIMEOUT + READ_TIMEOUT, sprintf('slowest failure %.3f s', $d['slowest_failure']));
$slowest = max($b['slowest'], $d['slowest'], $a['slowest']);
rl_ok('no request hung: each ended within ' . REQUEST_BOUND . ' s, queueing included', $slowest < REQUEST_BOUND,
    sprintf('slowest %.3f s', $slowest));
rl_ok('at least 150 requests began after the restart', count($after) >= 150, (string) count($after));
rl_same('requests begun after the restart all succeeded', ['ok' => count($after), 'bad' => []],
    ['ok' => $a['ok'], 'bad' => $a['bad_examples']]);

// php-fpm was not restarted, and no worker died or was replaced.
rl_ok('the php-fpm master still runs', $pool->masterRunning());
rl_same('the same 8 workers serve the pool', $workersBefore, $pool->workerPids());

// --- 4. No acknowledged session write was lost ---
$acked = $attempted = [];
foreach ($load->results as $r) {
    if ($r['meta']['kind'] !== 'session') {
        continue;
    }
    $sid = $r['meta']['sid'];
    $attempted[$sid][$r['meta']['key']] = true;
    $j = $r['response']->json();
    if (is_array($j) && $j['acked'] === true) {
        $acked[$sid][] = $r['meta']['key'];
    }
}
$lost = $phantom = [];
$ackedCount = 0;
foreach ($sids as $s) {
    $sid = $s['sid'];
    $stored = st_decode($raw->cmd('GET', st_data_key($sid))) ?? [];
    foreach ($acked[$sid] ?? [] as $key) {
        $ackedCount++;
        if (!array_key_exists($key, $stored)) {
            $lost[] = "{$s['form']} session " . substr($sid, 0, 6) . ": $key";
        }
    }
    // Nothing may appear that no request tried to write.
    foreach (array_keys($stored) as $key) {
        if (!isset($attempted[$sid][$key])) {
            $phantom[] = "{$s['form']} session " . substr($sid, 0, 6) . ": $key";
        }
    }
}
printf("info: %d acknowledged session writes checked in Redis after the restart\n", $ackedCount);
$perForm = ['class' => 0, 'native' => 0, 'lock' => 0];
foreach ($load->results as $r) {
    [$what] = classify($r, $port);
    if ($what === 'ok') {
        $perForm[$r['meta']['kind'] === 'lock' ? 'lock' : $r['meta']['form']]++;
    }
}
rl_ok('both session forms and the locks each served at least 50 requests successfully',
    min($perForm) >= 50, json_encode($perForm));
rl_ok('hundreds of acknowledged writes to check', $ackedCount >= 200, (string) $ackedCount);
rl_same('every acknowledged session write is in Redis after the restart', [], $lost);
rl_same('no key in Redis that no request wrote', [], $phantom);

// Leases cut off by the kill end by themselves: no lock key without a ttl,
// and none left once LOCK_TTL has passed.
$permanent = [];
foreach ($sids as $s) {
    $permanent = array_merge($permanent, st_permanent_lock_keys($raw, $s['sid']));
}
foreach ($raw->cmd('KEYS', 'lock:{fault-load-*') as $k) {
    if (!str_ends_with($k, ':fence') && $raw->cmd('PTTL', $k) === -1) {
        $permanent[] = $k;
    }
}
rl_same('no lock key without an expiry', [], $permanent);
$leftover = static function () use ($raw): array {
    return array_merge($raw->cmd('KEYS', '{' . ST_PREFIX . '*}:lock'), $raw->cmd('KEYS', 'lock:{*}'));
};
rl_ok('no session or lock lease left after lock_ttl', rl_wait_until(static fn() => $leftover() === [], LOCK_TTL + 1.0),
    json_encode($leftover()));

$pool->stop();
echo "done\n";
?>
--EXPECTF--
ok: before the kill: at least 120 requests ended
ok: before the kill: every request succeeded
ok: redis-server is gone
ok: every request ended (none left in flight)
info: %d requests: %d before the kill, %d overlapping the outage (%d ok, %d failed), %d after the restart; %d in flight at the kill
ok: requests that ended before the kill all succeeded
ok: requests overlapping the outage: each succeeded or failed with a clear error
ok: the outage was noticed: at least 20 requests failed
ok: every failure came within connect_timeout + read_timeout (in the app)
ok: no request hung: each ended within 6 s, queueing included
ok: at least 150 requests began after the restart
ok: requests begun after the restart all succeeded
ok: the php-fpm master still runs
ok: the same 8 workers serve the pool
info: %d acknowledged session writes checked in Redis after the restart
ok: both session forms and the locks each served at least 50 requests successfully
ok: hundreds of acknowledged writes to check
ok: every acknowledged session write is in Redis after the restart
ok: no key in Redis that no request wrote
ok: no lock key without an expiry
ok: no session or lock lease left after lock_ttl
done
