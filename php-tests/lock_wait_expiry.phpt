--TEST--
DistributedLock::acquire($wait): a waiter gets the lock when the holder's lease expires (no release, no wake-up push)
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('waitexp');
$rk = rl_lock_key($k);

$holder = new DistributedLock($k, 0.8, $dsn);
$waiter = new DistributedLock($k, 30.0, $dsn);
rl_same('holder acquires (ttl 0.8)', true, $holder->acquire());
$pttl = $raw->cmd('PTTL', $rk);
$t = microtime(true);
$r = $waiter->acquire(5.0);
$el = microtime(true) - $t;
rl_same('waiter acquire(wait: 5) succeeds once the lease expires', true, $r);
// Not before the remaining lease (minus a little clock slack) and well
// before the 5 s wait.
rl_ok('waiter got it no earlier than the remaining lease', $el >= $pttl / 1000 - 0.05,
    sprintf('waited %.3f s, remaining lease was %d ms', $el, $pttl));
rl_ok('waiter got it within 0.5 s after the lease ended', $el < $pttl / 1000 + 0.5,
    sprintf('waited %.3f s, remaining lease was %d ms', $el, $pttl));
rl_same('old holder lost it', false, $holder->isAcquired());
rl_same('waiter holds it', true, $waiter->isAcquired());
rl_same('waiter releases', true, $waiter->release());

unset($holder, $waiter);
echo "done\n";
?>
--EXPECT--
ok: holder acquires (ttl 0.8)
ok: waiter acquire(wait: 5) succeeds once the lease expires
ok: waiter got it no earlier than the remaining lease
ok: waiter got it within 0.5 s after the lease ended
ok: old holder lost it
ok: waiter holds it
ok: waiter releases
done
