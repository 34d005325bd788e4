--TEST--
DistributedLock autoRenew under faults and load: Redis stopped (SIGSTOP) during renewals reports the hold lost no later than its expiry and never blocks the holder (release() false at once, synchronized() throws LockLostException); whatever ends a hold (release, destructor, synchronized) stops its renewal at once; after pcntl_fork() parent and child each renew only their own holds; 1,000 renewed holds in one process are renewed in pipelined round trips
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'] . '?read_timeout=5';
const TTL = 1.0;

function renewals(): int
{
    return RedisLease\metrics()['auto_renewals'];
}

/** Waits (bounded) for the next renewal of $k: its lease is then a whole ttl. */
function after_renewal(RlRaw $raw, string $k): void
{
    $before = renewals();
    rl_wait_until(fn() => renewals() > $before, 2 * TTL, 0.002);
}

/** Calls $probe every 2 ms until it returns true; [seconds it took, slowest call]. */
function until(callable $probe, float $limit): array
{
    $t0 = microtime(true);
    $slowest = 0.0;
    while (microtime(true) - $t0 < $limit) {
        $t = microtime(true);
        $done = $probe();
        $slowest = max($slowest, microtime(true) - $t);
        if ($done) {
            break;
        }
        usleep(2000);
    }
    return [microtime(true) - $t0, $slowest];
}

// --- 1. Redis stops answering while a renewed lock is held ---
$k = rl_key('stalled');
$l = new DistributedLock($k, TTL, $dsn, autoRenew: true);
rl_same('acquired', true, $l->acquire());
rl_ok('its fencing token (assigned now: later calls ask no one)', is_int($l->getFencingToken()));
after_renewal($raw, $k);
rl_ok('Redis paused', fault_pause($srv['pid']));
[$took, $slowest] = until(fn() => $l->getFencingToken() === null, 3 * TTL);
rl_ok('the hold is reported lost no later than its expiry (one ttl after the last renewal)', $took <= TTL + 0.05, sprintf('%.3f s', $took));
rl_ok('and not long before it', $took >= TTL / 2, sprintf('%.3f s', $took));
rl_ok('the holder\'s calls never waited for the renewer', $slowest < 0.01, sprintf('slowest %.4f s', $slowest));
$t = microtime(true);
rl_same('release() reports the loss', false, $l->release());
rl_ok('at once, with Redis still stopped', microtime(true) - $t < 0.01, sprintf('%.4f s', microtime(true) - $t));
printf("info: lost %.3f s after Redis stopped (ttl %.1f s); slowest holder call %.2f ms\n", $took, TTL, $slowest * 1000);
fault_resume($srv['pid']);

$l = new DistributedLock(rl_key('stalled-sync'), TTL, $dsn, autoRenew: true);
rl_throws('synchronized() throws LockLostException when Redis stalls past the lease', RedisLease\LockLostException::class,
    function () use ($l, $raw, $srv) {
        $l->synchronized(function () use ($l, $raw, $srv) {
            $l->getFencingToken();
            after_renewal($raw, '');
            fault_pause($srv['pid']);
            until(fn() => $l->getFencingToken() === null, 3 * TTL);
            fault_resume($srv['pid']);
            return 'result';
        });
    });

// --- 2. Whatever ends a hold stops its renewal at once ---
$ends = [
    'release()' => function (string $k) use ($dsn) {
        $l = new DistributedLock($k, 0.3, $dsn, autoRenew: true);
        $l->acquire();
        usleep(250000);
        $l->release();
        return $l;
    },
    'the destructor' => function (string $k) use ($dsn) {
        $l = new DistributedLock($k, 0.3, $dsn, autoRenew: true);
        $l->acquire();
        usleep(250000);
        return null;
    },
    'the end of synchronized()' => function (string $k) use ($dsn) {
        $l = new DistributedLock($k, 0.3, $dsn, autoRenew: true);
        $l->synchronized(fn() => usleep(250000));
        return $l;
    },
    'an exception in synchronized()' => function (string $k) use ($dsn) {
        $l = new DistributedLock($k, 0.3, $dsn, autoRenew: true);
        try {
            $l->synchronized(function () {
                usleep(250000);
                throw new RuntimeException('x');
            });
        } catch (RuntimeException) {
        }
        return $l;
    },
];
foreach ($ends as $what => $end) {
    $before = renewals();
    $keep = $end(rl_key('ends'));
    $during = renewals() - $before;
    $after = renewals();
    usleep(400000); // more than three renewal periods of 0.1 s: renewals would show
    // Held 0.25 s with a 0.3 s ttl: renewed every 0.1 s, so 2 or 3 times.
    rl_ok("$what: renewed while held", $during >= 2, "$during renewals");
    rl_same("$what: not renewed once after", 0, renewals() - $after);
    rl_same("$what: the lock is free", 0, $raw->cmd('EXISTS', rl_lock_key(rl_key('ends'))));
    unset($keep);
}

// --- 3. fork(): each process renews only its own holds ---
$ka = rl_key('forkparent');
$kb = rl_key('forkchild');
$a = new DistributedLock($ka, 0.6, $dsn, autoRenew: true);
rl_same('parent acquires before fork', true, $a->acquire());
$mon = stream_socket_client("tcp://127.0.0.1:{$srv['port']}");
fwrite($mon, "MONITOR\r\n");
fgets($mon);
$result = rl_tempfile('.txt');
$pid = pcntl_fork();
if ($pid === 0) {
    $b = new DistributedLock($kb, 0.6, $dsn, autoRenew: true);
    $ok = $b->acquire();
    usleep(2000000); // six renewal periods of both locks
    file_put_contents($result, json_encode([$ok, $b->release()]));
    // Not exit(): the child's copy of the parent's renewal thread's memory (its
    // buffers, its queue) can never be freed in the child, as that thread does
    // not exist here, and valgrind would report it at a normal exit. A fixed
    // few KiB per fork, not a leak that grows.
    rl_kill_pid(getmypid(), 'KILL');
}
$status = 0;
rl_ok('the child ends', rl_wait_until(fn() => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 10.0));
rl_same("the child's lock was held throughout (it released true)", [true, true], json_decode((string) file_get_contents($result), true));
$raw->cmd('ECHO', 'fork-end');
stream_set_timeout($mon, 5);
$renewers = [$ka => [], $kb => []];
while (($line = fgets($mon)) !== false && !str_contains($line, 'fork-end')) {
    // 1764... [0 127.0.0.1:54321] "FCALL" "rl_refresh_<hash>" "<numkeys>" "lock:{key}" ... (or
    // "EVALSHA" "<sha>" where functions are not run)
    if (preg_match('/\[\d+ ([\d.:]+)\] "(?:FCALL" "rl_refresh_[0-9a-f]+|EVALSHA" "' . rl_script_sha('refresh.lua') . ')" "\d+" "lock:\{([^}]*)\}"/', $line, $m)) {
        $renewers[$m[2]][$m[1]] = true;
    }
}
fclose($mon);
rl_same("the parent's lock was renewed over one connection only (the parent's)", 1, count($renewers[$ka]));
rl_same("the child's lock was renewed over one connection only (the child's)", 1, count($renewers[$kb]));
rl_ok('by two different connections', array_keys($renewers[$ka]) !== array_keys($renewers[$kb]));
rl_same("the parent's lock is still held after the child exited", true, $a->isAcquired());
rl_same('parent release()', true, $a->release());

// --- 4. 1,000 renewed holds in one process ---
$locks = [];
for ($i = 0; $i < 1000; $i++) {
    $locks[$i] = new DistributedLock(rl_key("many$i"), TTL, $dsn, autoRenew: true);
    $locks[$i]->acquire();
}
$m0 = RedisLease\metrics();
$c0 = rl_cmdstats($raw);
$t = microtime(true);
usleep(3000000);
$secs = microtime(true) - $t;
$m1 = RedisLease\metrics();
$c1 = rl_cmdstats($raw);
$renewed = $m1['auto_renewals'] - $m0['auto_renewals'];
$trips = $m1['renewal_round_trips'] - $m0['renewal_round_trips'];
$calls = ($c1['fcall'] ?? 0) + ($c1['evalsha'] ?? 0) - ($c0['fcall'] ?? 0) - ($c0['evalsha'] ?? 0);
printf("info: 1000 holds, ttl %.1f s: %.0f renewals/s in %.1f round trips/s (%d FCALL and EVALSHA seen by Redis)\n",
    TTL, $renewed / $secs, $trips / $secs, $calls);
rl_ok('every hold renewed about every ttl/3', $renewed >= 1000 * 8, (string) $renewed);
rl_ok('in pipelined round trips, not one each', $trips * 100 < $renewed, "$trips round trips");
$released = 0;
foreach ($locks as $l) {
    $released += $l->release() ? 1 : 0;
}
rl_same('all 1000 were held throughout', 1000, $released);
echo "done\n";
?>
--EXPECTF--
ok: acquired
ok: its fencing token (assigned now: later calls ask no one)
ok: Redis paused
ok: the hold is reported lost no later than its expiry (one ttl after the last renewal)
ok: and not long before it
ok: the holder's calls never waited for the renewer
ok: release() reports the loss
ok: at once, with Redis still stopped
info: lost %f s after Redis stopped (ttl %f s); slowest holder call %f ms
ok: synchronized() throws LockLostException when Redis stalls past the lease
ok: release(): renewed while held
ok: release(): not renewed once after
ok: release(): the lock is free
ok: the destructor: renewed while held
ok: the destructor: not renewed once after
ok: the destructor: the lock is free
ok: the end of synchronized(): renewed while held
ok: the end of synchronized(): not renewed once after
ok: the end of synchronized(): the lock is free
ok: an exception in synchronized(): renewed while held
ok: an exception in synchronized(): not renewed once after
ok: an exception in synchronized(): the lock is free
ok: parent acquires before fork
ok: the child ends
ok: the child's lock was held throughout (it released true)
ok: the parent's lock was renewed over one connection only (the parent's)
ok: the child's lock was renewed over one connection only (the child's)
ok: by two different connections
ok: the parent's lock is still held after the child exited
ok: parent release()
info: %d holds, ttl %f s: %d renewals/s in %f round trips/s (%d FCALL and EVALSHA seen by Redis)
ok: every hold renewed about every ttl/3
ok: in pipelined round trips, not one each
ok: all 1000 were held throughout
done
