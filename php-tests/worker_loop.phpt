--TEST--
Long-running worker loop (no RSHUTDOWN between iterations): 10,000 iterations of session_id()/session_start()/change/session_write_close() over 100 session ids plus a DistributedLock cycle, with an exception thrown mid-iteration now and then (session open, lock held): no session or lock is inherited by the next iteration, no lock is left behind, every key has an expiry, nothing is lost, memory stays flat
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
ini_set('session.save_handler', 'redis_lease');
ini_set('session.save_path', $srv['dsn']);
ini_set('redis_lease.session.lock_wait', '0'); // an inherited lock would show as a failed start

const N = 10000;
$ids = [];
for ($i = 0; $i < 100; $i++) {
    $ids[] = bin2hex(random_bytes(16));
}
$expected = array_fill_keys($ids, 0);
$problems = [];
$thrown = 0;
$mem = [];

/** One iteration, as a worker's request handler would run it. */
function handle(int $i, string $id, string $dsn, array &$expected): void
{
    session_id($id);
    if (!session_start()) {
        throw new LogicException("iteration $i: session_start() failed (an inherited lock?)");
    }
    $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
    $lock = new DistributedLock('job:' . ($i % 10), 5.0, $dsn);
    if (!$lock->acquire()) {
        throw new LogicException("iteration $i: the lock was busy (an inherited lock?)");
    }
    if ($i % 97 === 13) {
        // Mid-iteration failure: the session is open and the lock held.
        throw new RuntimeException("iteration $i failed");
    }
    if (!session_write_close()) {
        throw new LogicException("iteration $i: session_write_close() failed");
    }
    $expected[$id]++;
    $lock->release();
}

for ($i = 0; $i < N; $i++) {
    try {
        handle($i, $ids[$i % 100], $srv['dsn'], $expected);
    } catch (RuntimeException $e) {
        // The worker loop's own cleanup: the failed request's session is
        // abandoned (its change is not kept); its lock object is gone with the
        // handler's scope.
        $thrown++;
        session_abort();
    } catch (LogicException $e) {
        $problems[] = $e->getMessage();
        if (session_status() === PHP_SESSION_ACTIVE) {
            session_abort();
        }
    }
    if ($i === 1000 || $i === N - 1) {
        gc_collect_cycles();
        $mem[] = memory_get_usage();
        preg_match('/VmRSS:\s+(\d+)/', file_get_contents('/proc/self/status'), $m);
        $rss[] = (int) $m[1];
    }
}
rl_same('no iteration inherited a session or a lock', [], array_slice($problems, 0, 5));
rl_ok('exceptions were thrown mid-iteration', $thrown >= 100, (string) $thrown);
$lost = [];
foreach ($ids as $id) {
    $data = (string) $raw->cmd('GET', 'PHPREDIS_SESSION:' . $id);
    preg_match('/n\|i:(\d+);/', $data, $m);
    if ((int) ($m[1] ?? -1) !== $expected[$id]) {
        $lost[] = "$id: " . ($m[1] ?? 'none') . ' != ' . $expected[$id];
    }
}
rl_same('every completed iteration\'s change is stored, no aborted one', [], array_slice($lost, 0, 5));
$locks = array_merge($raw->cmd('KEYS', '*:lock'), array_filter($raw->cmd('KEYS', 'lock:*'), fn($k) => !str_contains($k, '}:')));
rl_same('no lock left behind', [], $locks);
$noExpiry = array_filter($raw->cmd('KEYS', '*'), fn($k) => $raw->cmd('PTTL', $k) === -1);
rl_same('every key has an expiry', [], array_values($noExpiry));
rl_ok('PHP memory flat (iteration 1000 to 10000)', $mem[1] - $mem[0] < 64 * 1024, sprintf('%+d bytes', $mem[1] - $mem[0]));
rl_ok('RSS flat (iteration 1000 to 10000)', $rss[1] - $rss[0] < 1024, sprintf('%+d KiB', $rss[1] - $rss[0]));
printf("info: %d iterations, %d thrown; memory %+d bytes, RSS %+d KiB from iteration 1000 to the end\n",
    N, $thrown, $mem[1] - $mem[0], $rss[1] - $rss[0]);
echo "done\n";
?>
--EXPECTF--
ok: no iteration inherited a session or a lock
ok: exceptions were thrown mid-iteration
ok: every completed iteration's change is stored, no aborted one
ok: no lock left behind
ok: every key has an expiry
ok: PHP memory flat (iteration 1000 to 10000)
ok: RSS flat (iteration 1000 to 10000)
info: %d iterations, %d thrown; memory +%d bytes, RSS +%d KiB from iteration %d to the end
done
