--TEST--
DistributedLock queue: a waiter killed in the queue delays the next one by at most what the README says (passed over once silent for two seconds: a nap and a second of slack; handed the lock within that second, it holds it for its ttl); a waiter whose deadline passes as the lock is handed to it either holds it or leaves nothing behind
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const WTTL = 2.0; // the waiters' lease ttl

/** A child that waits (up to $wait s) for lock $k; prints "queued", then a JSON line. */
function waiter(string $k, string $dsn, float $wait): RlChild
{
    return rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', ' . WTTL . ', ' . rl_export($dsn) . ');
$got = $l->acquire(' . rl_export($wait) . ');
echo json_encode(["got" => $got, "at" => microtime(true)]), "\n";
fgets(STDIN);
if ($got) { $l->release(); }
');
}

function queued(RlRaw $raw, string $rk): int
{
    return (int) $raw->cmd('ZCARD', "$rk:waiters");
}

foreach (['silent for two seconds' => 2.2, 'killed just before the release' => 0.0] as $case => $silence) {
    $k = rl_key('deadwaiter');
    $rk = rl_lock_key($k);
    $holder = new DistributedLock($k, 30.0, $dsn);
    $holder->acquire();
    $dead = waiter($k, $dsn, 30.0);
    rl_ok("$case: the first waiter queued", rl_wait_until(fn() => queued($raw, $rk) === 1, 5.0));
    $next = waiter($k, $dsn, 30.0);
    rl_ok("$case: the second waiter queued behind it", rl_wait_until(fn() => queued($raw, $rk) === 2, 5.0));
    rl_kill_pid($dead->pid, 'KILL');
    $dead->wait(5.0);
    if ($silence > 0) {
        usleep((int) ($silence * 1e6)); // the dead waiter misses its next word to the queue
    }
    $t = microtime(true);
    rl_same("$case: release", true, $holder->release());
    $j = json_decode((string) $next->readLine(10.0), true) ?? [];
    $delay = ($j['at'] ?? INF) - $t;
    rl_same("$case: the next waiter gets the lock", true, $j['got'] ?? null);
    if ($silence > 0) {
        rl_ok("$case: at once (the dead waiter is passed over)", $delay < 0.1, sprintf('%.3f s', $delay));
    } else {
        rl_ok("$case: within the dead waiter's ttl and a second", $delay <= WTTL + 1.2, sprintf('%.3f s', $delay));
    }
    printf("info: %s: the next waiter got the lock %.3f s after the release (waiter ttl %.0f s)\n", $case, $delay, WTTL);
    $next->send('go');
    $next->wait(5.0);
    rl_same("$case: the lock is free", 0, $raw->cmd('EXISTS', $rk));
    // A dead waiter passed over keeps its place until its deadline (30 s): the
    // queue expires with it, never later.
    $pttl = $raw->cmd('PTTL', "$rk:waiters");
    rl_ok("$case: whatever is left of the queue expires by the last deadline", $pttl === -2 || ($pttl > 0 && $pttl <= 31000), (string) $pttl);
}

// A waiter whose deadline passes just as the lock is handed to it: it either
// reports the lock (and holds it) or leaves the queue with nothing taken.
$outcomes = [];
for ($i = 0; $i < 20; $i++) {
    $k = rl_key("edge$i");
    $rk = rl_lock_key($k);
    $holder = new DistributedLock($k, 30.0, $dsn);
    $holder->acquire();
    $w = waiter($k, $dsn, 0.3);
    rl_wait_until(fn() => queued($raw, $rk) === 1, 5.0);
    // Release close to the waiter's deadline, at a spread of moments around it.
    usleep(250000 + $i * 5000);
    $holder->release();
    $j = json_decode((string) $w->readLine(10.0), true) ?? [];
    $got = $j['got'] ?? null;
    $held = $raw->cmd('EXISTS', $rk);
    $outcomes[] = $got ? 'held' : 'left';
    if ($got !== ($held === 1)) {
        echo "FAIL: round $i: the waiter said ", json_encode($got), " while the lock key exists: $held\n";
    }
    $w->send('go');
    $w->wait(5.0);
    if ($raw->cmd('EXISTS', $rk) + $raw->cmd('EXISTS', "$rk:waiters") + count($raw->cmd('KEYS', "$rk:wake:*")) !== 0) {
        echo "FAIL: round $i: keys left behind\n";
    }
}
rl_ok('every edge round: the waiter held what it said, and nothing was left behind', true);
printf("info: deadline edge: %d rounds held the lock, %d left the queue\n",
    count(array_keys($outcomes, 'held')), count(array_keys($outcomes, 'left')));
echo "done\n";
?>
--EXPECTF--
ok: silent for two seconds: the first waiter queued
ok: silent for two seconds: the second waiter queued behind it
ok: silent for two seconds: release
ok: silent for two seconds: the next waiter gets the lock
ok: silent for two seconds: at once (the dead waiter is passed over)
info: silent for two seconds: the next waiter got the lock %f s after the release (waiter ttl %d s)
ok: silent for two seconds: the lock is free
ok: silent for two seconds: whatever is left of the queue expires by the last deadline
ok: killed just before the release: the first waiter queued
ok: killed just before the release: the second waiter queued behind it
ok: killed just before the release: release
ok: killed just before the release: the next waiter gets the lock
ok: killed just before the release: within the dead waiter's ttl and a second
info: killed just before the release: the next waiter got the lock %f s after the release (waiter ttl %d s)
ok: killed just before the release: the lock is free
ok: killed just before the release: whatever is left of the queue expires by the last deadline
ok: every edge round: the waiter held what it said, and nothing was left behind
info: deadline edge: %d rounds held the lock, %d left the queue
done
