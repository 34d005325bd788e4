--TEST--
RedisLease\metrics(): per-process counters and histograms move with acquisitions, contention, busy, renewals, lost leases, connections
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('metrics');
$rk = rl_lock_key($k);

/** Change of every counter (int entries) plus each histogram's count. */
function delta(array $before, array $after): array
{
    $d = [];
    foreach ($after as $name => $v) {
        if (is_int($v)) {
            $d[$name] = $v - ($before[$name] ?? 0);
        } elseif (is_array($v) && isset($v['count'])) {
            $d["$name.count"] = $v['count'] - ($before[$name]['count'] ?? 0);
        }
    }
    return $d;
}
function check_delta(string $label, array $d, array $expect): void
{
    $got = array_intersect_key($d, $expect);
    ksort($got);
    ksort($expect);
    rl_ok($label, $got === $expect, 'expected ' . json_encode($expect) . ', got ' . json_encode($got) . ' (all: ' . json_encode($d) . ')');
}

$m = RedisLease\metrics();
$a = new DistributedLock($k, 5.0, $dsn);
$b = new DistributedLock($k, 5.0, $dsn);
$a->acquire();
check_delta('first acquire: acquired +1, one connection opened', delta($m, RedisLease\metrics()),
    ['lock_acquired' => 1, 'connects' => 1, 'lock_busy' => 0, 'lock_contended' => 0]);

$m = RedisLease\metrics();
$b->acquire();
check_delta('refused acquire: busy +1, acquired +0, no new connection', delta($m, RedisLease\metrics()),
    ['lock_acquired' => 0, 'lock_busy' => 1, 'connects' => 0]);

$m = RedisLease\metrics();
$a->refresh();
$a->refresh(10.0);
check_delta('two refreshes: renewals +2', delta($m, RedisLease\metrics()), ['lock_renewals' => 2, 'lock_lost' => 0]);

$m = RedisLease\metrics();
try {
    $b->synchronized(fn() => null, 0.1);
} catch (RedisLease\LockTimeoutException $e) {
}
check_delta('synchronized timeout: busy +1, acquired +0', delta($m, RedisLease\metrics()),
    ['lock_busy' => 1, 'lock_acquired' => 0]);

$m = RedisLease\metrics();
$a->release();
check_delta('release: released +1, hold histogram +1', delta($m, RedisLease\metrics()),
    ['lock_released' => 1, 'lock_hold_seconds.count' => 1, 'lock_lost' => 0]);

// An acquisition that had to wait for the holder (here: its lease expiry)
// and then succeeded counts as contended, and its wait is observed.
$short = new DistributedLock($k, 0.3, $dsn);
$short->acquire();
$m = RedisLease\metrics();
$got = $b->acquire(5.0);
$d = delta($m, RedisLease\metrics());
rl_same('waited-then-acquired: acquire(wait: 5) succeeds', true, $got);
check_delta('waited-then-acquired: acquired +1, contended +1, busy +0, wait histogram +1', $d,
    ['lock_acquired' => 1, 'lock_contended' => 1, 'lock_busy' => 0, 'lock_wait_seconds.count' => 1]);
$b->release();

// Release and refresh of an expired lease both count as lost.
$c = new DistributedLock($k, 0.2, $dsn);
$c->acquire();
rl_ok('lease expired', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
$m = RedisLease\metrics();
$c->refresh();
check_delta('refresh of an expired lease: lost +1, renewals +0', delta($m, RedisLease\metrics()),
    ['lock_lost' => 1, 'lock_renewals' => 0]);
$c->acquire();
rl_ok('lease expired again', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
$m = RedisLease\metrics();
$c->release();
check_delta('release of an expired lease: lost +1, released +0', delta($m, RedisLease\metrics()),
    ['lock_lost' => 1, 'lock_released' => 0]);

$m = RedisLease\metrics();
try {
    (new DistributedLock($k, 1.0, 'redis://127.0.0.1:' . rl_free_port()))->acquire();
} catch (RedisLease\ConnectionException $e) {
}
$d = delta($m, RedisLease\metrics());
rl_ok('connection failure: connection_errors +1 or more', ($d['connection_errors'] ?? 0) >= 1, json_encode($d));

// Shape: counters are non-negative ints; histograms have count, sum and
// cumulative buckets ending in '+Inf' == count.
$all = RedisLease\metrics();
$ints = array_filter($all, 'is_int');
rl_ok('counters never negative', $ints !== [] && min($ints) >= 0, json_encode($ints));
foreach (['lock_wait_seconds', 'lock_hold_seconds'] as $h) {
    $v = $all[$h] ?? null;
    $ok = is_array($v) && is_int($v['count'] ?? null) && is_float($v['sum'] ?? null) && is_array($v['buckets'] ?? null)
        && array_key_last($v['buckets']) === '+Inf' && $v['buckets']['+Inf'] === $v['count'];
    $prev = 0;
    foreach ($ok ? $v['buckets'] : [] as $n) {
        $ok = $ok && is_int($n) && $n >= $prev;
        $prev = $n;
    }
    rl_ok("$h: count, sum and cumulative buckets ending in +Inf == count", $ok, json_encode($v));
}
rl_same('a fresh child process starts from zero', '0', (function () {
    $c = rl_spawn_php('echo RedisLease\metrics()["lock_acquired"], "\n";');
    $line = $c->readLine(10.0);
    $c->wait(5.0);
    return $line;
})());

unset($a, $b, $c, $short);
echo "done\n";
?>
--EXPECT--
ok: first acquire: acquired +1, one connection opened
ok: refused acquire: busy +1, acquired +0, no new connection
ok: two refreshes: renewals +2
ok: synchronized timeout: busy +1, acquired +0
ok: release: released +1, hold histogram +1
ok: waited-then-acquired: acquire(wait: 5) succeeds
ok: waited-then-acquired: acquired +1, contended +1, busy +0, wait histogram +1
ok: lease expired
ok: refresh of an expired lease: lost +1, renewals +0
ok: lease expired again
ok: release of an expired lease: lost +1, released +0
ok: connection failure: connection_errors +1 or more
ok: counters never negative
ok: lock_wait_seconds: count, sum and cumulative buckets ending in +Inf == count
ok: lock_hold_seconds: count, sum and cumulative buckets ending in +Inf == count
ok: a fresh child process starts from zero
done
