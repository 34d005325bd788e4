--TEST--
DistributedLock autoRenew: a 1 s lease held through a 5 s sleep() (no PHP code runs) is never taken, keeps its fencing token and releases true; without autoRenew the same hold is lost; the holder SIGSTOPped or SIGKILLed frees the lock within about one ttl (the renewal thread stops with its process)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
const TTL = 1.0;

/** A child that takes lock $k (autoRenew $renew), prints its fence, then sleeps $sleep s and reports. */
function holder(string $k, string $dsn, bool $renew, float $sleep): RlChild
{
    return rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', ' . TTL . ', ' . rl_export($dsn) . ', autoRenew: ' . ($renew ? 'true' : 'false') . ');
if (!$l->acquire()) { echo "acquire failed\n"; exit(1); }
$fence = $l->getFencingToken();
echo "held $fence\n";
usleep(' . (int) ($sleep * 1e6) . ');
echo json_encode(["fence" => $l->getFencingToken(), "fence_then" => $fence, "released" => $l->release(),
    "renewals" => RedisLease\metrics()["auto_renewals"]]), "\n";
');
}

// --- 1. Held through a 5 s sleep() ---
$k = rl_key('renewed');
$child = holder($k, $dsn, true, 5.0);
$line = $child->readLine(10.0);
rl_ok('the holder has the lock', str_starts_with((string) $line, 'held '), (string) $line);
$other = new DistributedLock($k, TTL, $dsn);
$t = microtime(true);
$got = $other->acquire(4.0); // waits (woken by no release) while the holder sleeps
rl_same('another process waiting 4 s (4 ttls) never gets it', false, $got);
rl_ok('and it really waited', microtime(true) - $t >= 3.9);
$r = json_decode((string) $child->readLine(10.0), true);
rl_same('the fencing token did not change', $r['fence_then'], $r['fence']);
rl_same('release() after the sleep returns true', true, $r['released']);
rl_ok('the watchdog renewed it about every ttl/3', $r['renewals'] >= 12, (string) $r['renewals']);
rl_same('the holder exited', 0, $child->wait(5.0));
rl_same('free afterwards', true, $other->acquire());
$other->release();

// --- 2. The same without autoRenew: the lease ends during the sleep ---
$k = rl_key('unrenewed');
$child = holder($k, $dsn, false, 3.0);
rl_ok('the holder has the lock', str_starts_with((string) $child->readLine(10.0), 'held '));
$other = new DistributedLock($k, TTL, $dsn);
rl_same('without autoRenew another process gets it during the sleep', true, $other->acquire(3.0));
$r = json_decode((string) $child->readLine(10.0), true);
rl_same('and the sleeper\'s release() reports the loss', false, $r['released']);
$other->release();
$child->wait(5.0);

// --- 3. Holder stopped (SIGSTOP) or killed (SIGKILL): free within about one ttl ---
foreach (['STOP', 'KILL'] as $sig) {
    $k = rl_key("sig$sig");
    $child = holder($k, $dsn, true, 30.0);
    rl_ok("SIG$sig: the holder has the lock", str_starts_with((string) $child->readLine(10.0), 'held '));
    // Just after a renewal, the lease is a full ttl: the worst case.
    $rk = rl_lock_key($k);
    $before = $raw->cmd('PTTL', $rk);
    rl_wait_until(fn() => $raw->cmd('PTTL', $rk) > $before, 2.0, 0.005);
    $tSig = microtime(true);
    rl_kill_pid($child->pid, $sig);
    $other = new DistributedLock($k, TTL, $dsn);
    $got = $other->acquire(10.0);
    $el = microtime(true) - $tSig;
    rl_same("SIG$sig: a waiter gets the lock", true, $got);
    rl_ok("SIG$sig: within about one ttl (the renewals stopped with the process)", $el <= TTL + 0.3, sprintf('%.3f s', $el));
    printf("info: SIG%s: freed %.3f s after the signal (ttl %.1f s)\n", $sig, $el, TTL);
    $other->release();
    if ($sig === 'STOP') {
        rl_kill_pid($child->pid, 'KILL');
    }
    $child->wait(5.0);
}
echo "done\n";
?>
--EXPECTF--
ok: the holder has the lock
ok: another process waiting 4 s (4 ttls) never gets it
ok: and it really waited
ok: the fencing token did not change
ok: release() after the sleep returns true
ok: the watchdog renewed it about every ttl/3
ok: the holder exited
ok: free afterwards
ok: the holder has the lock
ok: without autoRenew another process gets it during the sleep
ok: and the sleeper's release() reports the loss
ok: SIGSTOP: the holder has the lock
ok: SIGSTOP: a waiter gets the lock
ok: SIGSTOP: within about one ttl (the renewals stopped with the process)
info: SIGSTOP: freed %f s after the signal (ttl %f s)
ok: SIGKILL: the holder has the lock
ok: SIGKILL: a waiter gets the lock
ok: SIGKILL: within about one ttl (the renewals stopped with the process)
info: SIGKILL: freed %f s after the signal (ttl %f s)
done
