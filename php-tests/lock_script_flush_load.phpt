--TEST--
NOSCRIPT and "Function not found" at any time: SCRIPT FLUSH and FUNCTION FLUSH run back to back while 4 processes lock, refresh, inspect, fence and release (plain, contended and auto-renewed locks) and open and save sessions (class form); every operation succeeds, and the scripts were reloaded hundreds of times meanwhile (Redis 8 evicts EVAL-loaded scripts beyond 500, a failover or restart empties the cache, FUNCTION FLUSH or a new empty master loses the library: a script or function may be missing at any command; a function flushed twice in one call runs as a script, as tests/lease.rs checks; the watchdog's renewals load the library again, as tests/watchdog.rs checks); half the workers run scripts only (functions=0), whose every call and renewal may meet NOSCRIPT and load its script again by EVAL
--INI--
session.use_cookies=0
session.cache_limiter=
session.use_strict_mode=0
session.gc_probability=0
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const WORKERS = 4;
const ROUNDS = 200;

// The flusher: SCRIPT FLUSH and FUNCTION FLUSH in a loop until the workers are done (a control key says so).
$stopKey = rl_key('stop');
$flusher = rl_spawn_php('
$raw = new RlRaw(' . $srv['port'] . ');
$n = 0;
while ($raw->cmd("EXISTS", ' . rl_export($stopKey) . ') === 0) {
    $raw->cmd("SCRIPT", "FLUSH");
    $raw->cmd("FUNCTION", "FLUSH");
    $n++;
}
echo "flushes $n\n";
');

$workers = [];
for ($w = 0; $w < WORKERS; $w++) {
    $workers[] = rl_spawn_php('
$w = ' . $w . ';
// Odd workers run scripts only: EVALSHA, and EVAL after NOSCRIPT.
$dsn = ' . rl_export($dsn) . ' . ($w % 2 === 1 ? "?functions=0" : "");
$failures = [];
$ops = 0;
$current = "";
// A warning (the session handler reports failures so) is a failure of the operation that raised it.
set_error_handler(function (int $level, string $message) {
    global $failures, $current;
    $failures[$current][] = "warning: $message";
    return true;
});
/** Runs one operation; anything but the expected result, or a warning, is a failure. */
function op(string $name, callable $fn, mixed $want = true): void
{
    global $failures, $ops, $current;
    $ops++;
    $current = $name;
    try {
        $got = $fn();
    } catch (Throwable $e) {
        $failures[$name][] = get_class($e) . ": " . $e->getMessage();
        return;
    }
    if ($got !== $want) {
        $failures[$name][] = "returned " . var_export($got, true);
    }
}
// A lock renewed by the watchdog through the whole run (ttl 0.3 s: renewed every 0.1 s).
$renewed = new DistributedLock("renewed-$w-" . getmypid(), 0.3, $dsn, autoRenew: true);
op("autoRenew acquire", fn() => $renewed->acquire());
$h = new RedisLockingSessionHandler($dsn, ["lock_wait" => 2.0]);
// Failures may cascade (a session left locked until its lease ends): a time bound keeps the report.
$deadline = microtime(true) + 15.0;
for ($i = 0; $i < ' . ROUNDS . ' && microtime(true) < $deadline; $i++) {
    $l = new DistributedLock("own-$w-$i", 5.0, $dsn);
    op("acquire", fn() => $l->acquire());
    op("isAcquired", fn() => $l->isAcquired());
    op("getFencingToken", fn() => is_int($l->getFencingToken()));
    op("refresh", fn() => $l->refresh());
    op("release", fn() => $l->release());
    // A lock every worker wants: waits, queues and handoffs.
    $shared = new DistributedLock("shared-" . ($i % 3), 5.0, $dsn);
    op("synchronized (contended)", fn() => $shared->synchronized(fn() => true, 10.0));
    // A session of its own and one shared by all workers.
    foreach (["own-$w-" . ($i % 5), "shared" . ($i % 2)] as $sid) {
        op("session open", fn() => $h->open("", "PHPSESSID"));
        op("session read", fn() => is_string($h->read($sid)));
        op("session write", fn() => $h->write($sid, "n|i:$i;"));
        op("session close", fn() => $h->close());
    }
}
op("autoRenew hold kept", fn() => $renewed->isAcquired());
op("autoRenew release", fn() => $renewed->release());
echo json_encode(["ops" => $ops, "failures" => $failures]), "\n";
');
}

$ops = 0;
$failures = [];
foreach ($workers as $i => $c) {
    $line = $c->readLine(30.0);
    $j = json_decode((string) $line, true);
    if (!is_array($j)) {
        $failures["worker $i"][] = 'no report: ' . rl_fmt($line . $c->readAll(1.0));
        continue;
    }
    $ops += $j['ops'];
    foreach ($j['failures'] as $name => $list) {
        foreach ($list as $f) {
            $failures[$name][] = $f;
        }
    }
}
$raw->cmd('SET', $stopKey, '1');
$flushes = (int) substr((string) $flusher->readLine(30.0), strlen('flushes '));
$stats = rl_cmdstats($raw);
// The library comes back by FUNCTION LOAD; scripts (the functions=0 workers' calls and renewals, and
// a function flushed again before its call) by EVAL after NOSCRIPT. The extension never sends SCRIPT
// LOAD.
$functionLoads = $stats['function|load'] ?? 0;
$evals = $stats['eval'] ?? 0;

rl_ok('the workers ran ' . WORKERS * (ROUNDS * 14 + 3) . ' operations', $ops === WORKERS * (ROUNDS * 14 + 3), rl_fmt($ops));
$summary = [];
foreach ($failures as $name => $list) {
    $summary[] = "$name: " . count($list) . ' failed, e.g. ' . substr($list[0], 0, 300);
}
rl_ok('every operation succeeded while the scripts were flushed', $summary === [], "\n  " . implode("\n  ", $summary));
// The race was run: scripts flushed and loaded again many times while the workers ran.
rl_ok('SCRIPT FLUSH ran at least 500 times', $flushes >= 500, "$flushes flushes");
rl_ok('the library was loaded again at least 200 times (FUNCTION LOAD)', $functionLoads >= 200, "$functionLoads loads");
rl_ok('scripts were loaded again at least 100 times (EVAL)', $evals >= 100, "$evals EVALs");
echo "done\n";
?>
--EXPECT--
ok: the workers ran 11212 operations
ok: every operation succeeded while the scripts were flushed
ok: SCRIPT FLUSH ran at least 500 times
ok: the library was loaded again at least 200 times (FUNCTION LOAD)
ok: scripts were loaded again at least 100 times (EVAL)
done
