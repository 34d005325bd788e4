--TEST--
DistributedLock::acquire($wait): gives up after $wait (not earlier, not much later), blocking on Redis rather than polling
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('waitto');
$rk = rl_lock_key($k);

$holder = new DistributedLock($k, 30.0, $dsn);
$waiter = new DistributedLock($k, 30.0, $dsn);
rl_same('holder acquires', true, $holder->acquire());
$val = $raw->cmd('GET', $rk);

$t = microtime(true);
$r = $waiter->acquire(0.3);
$el = microtime(true) - $t;
rl_same('acquire(wait: 0.3) while held', false, $r);
rl_ok('acquire(wait: 0.3) took >= 0.3 s and < 1 s', $el >= 0.3 && $el < 1.0, sprintf('%.3f s', $el));

$t = microtime(true);
rl_same('acquire(wait: 0) while held', false, $waiter->acquire(0.0));
$el = microtime(true) - $t;
rl_ok('acquire(wait: 0) returned in < 0.2 s', $el < 0.2, sprintf('%.3f s', $el));

// A 1.5 s wait: count the commands Redis served meanwhile. A blocking wait
// uses BLPOP on the wake list; a busy poller would issue dozens of commands.
$raw->cmd('CONFIG', 'RESETSTAT');
$t = microtime(true);
$r = $waiter->acquire(1.5);
$el = microtime(true) - $t;
$stats = rl_cmdstats($raw);
rl_same('acquire(wait: 1.5) while held', false, $r);
rl_ok('acquire(wait: 1.5) took >= 1.5 s and < 2.2 s', $el >= 1.5 && $el < 2.2, sprintf('%.3f s', $el));
rl_ok('the wait used BLPOP', ($stats['blpop'] ?? 0) >= 1, json_encode($stats));
// Our own INFO/CONFIG calls are in there too; allow generous slack.
$total = array_sum($stats);
rl_ok('no busy polling: fewer than 60 commands served during a 1.5 s wait', $total < 60, "$total commands: " . json_encode($stats));

// The waiter gave the holder's lock a fence when it queued (a lock whose fence is empty was taken with
// nobody queued since: its release skips the queue); the token is the holder's still.
$now = (string) $raw->cmd('GET', $rk);
rl_ok("holder's lock kept by the waiter, given a fence", (bool) preg_match('/^' . preg_quote($val, '/') . '[0-9]+$/', $now), $now);
rl_same('holder still holds', true, $holder->isAcquired());
rl_same('waiter does not hold', false, $waiter->isAcquired());
rl_same('holder releases', true, $holder->release());
rl_same('waiter acquires at once when free, even with a wait', true, $waiter->acquire(5.0));
rl_same('waiter releases', true, $waiter->release());

unset($holder, $waiter);
echo "done\n";
?>
--EXPECT--
ok: holder acquires
ok: acquire(wait: 0.3) while held
ok: acquire(wait: 0.3) took >= 0.3 s and < 1 s
ok: acquire(wait: 0) while held
ok: acquire(wait: 0) returned in < 0.2 s
ok: acquire(wait: 1.5) while held
ok: acquire(wait: 1.5) took >= 1.5 s and < 2.2 s
ok: the wait used BLPOP
ok: no busy polling: fewer than 60 commands served during a 1.5 s wait
ok: holder's lock kept by the waiter, given a fence
ok: holder still holds
ok: waiter does not hold
ok: holder releases
ok: waiter acquires at once when free, even with a wait
ok: waiter releases
done
