--TEST--
DistributedLock: a holder killed with SIGKILL blocks others only until its lease runs out
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('sigkill');
$rk = rl_lock_key($k);

$child = rl_spawn_php('
$l = new DistributedLock(' . rl_export($k) . ', 1.5, ' . rl_export($dsn) . ');
if (!$l->acquire()) { echo "child: acquire failed\n"; exit(1); }
echo "held\n";
sleep(20); // simulated long work; the parent kills us long before this ends
echo "child: was not killed\n";
');

rl_same('child holds the lock', 'held', $child->readLine(10.0));
$pttl = $raw->cmd('PTTL', $rk);
rl_ok('lock key has a ttl of at most 1.5 s', $pttl > 0 && $pttl <= 1500, rl_fmt($pttl));
$tKill = microtime(true);
rl_kill_pid($child->pid, 'KILL');
rl_same('child died from SIGKILL (exit status 128+9)', 137, $child->wait(5.0));
rl_same('the killed holder did not free the key', 1, $raw->cmd('EXISTS', $rk));

$waiter = new DistributedLock($k, 30.0, $dsn);
$got = $waiter->acquire(10.0);
$el = microtime(true) - $tKill;
rl_same('acquire(wait: 10) succeeds', true, $got);
rl_ok('not before the remaining lease ran out', $el >= $pttl / 1000 - 0.1,
    sprintf('%.3f s after the kill; remaining lease was %d ms', $el, $pttl));
rl_ok('within ttl + 0.5 s of the kill', $el <= 1.5 + 0.5, sprintf('%.3f s after the kill', $el));
rl_same('release', true, $waiter->release());

unset($waiter);
echo "done\n";
?>
--EXPECT--
ok: child holds the lock
ok: lock key has a ttl of at most 1.5 s
ok: child died from SIGKILL (exit status 128+9)
ok: the killed holder did not free the key
ok: acquire(wait: 10) succeeds
ok: not before the remaining lease ran out
ok: within ttl + 0.5 s of the kill
ok: release
done
