--TEST--
DistributedLock and pcntl_fork(): an object made before the fork and used by the child to take its own lock is released when the child drops it (unset), and the child's watchdog stops renewing it; the parent's own hold on an object copied into the child is still never released by the child
--SKIPIF--
<?php if (!function_exists('pcntl_fork')) die('skip pcntl_fork not available'); ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

foreach ([false, true] as $auto) {
    $label = $auto ? 'autoRenew' : 'no autoRenew';
    $k = rl_key('fork-own');
    $lk = rl_lock_key($k);
    $kp = rl_key('fork-parent');
    $obj = new DistributedLock($k, 1.0, $dsn, $auto);       // made before the fork, used by the child
    $parentHeld = new DistributedLock($kp, 30.0, $dsn);      // the parent's own hold, copied into the child
    rl_same("[$label] the parent holds its own lock", true, $parentHeld->acquire());
    $parentValue = $raw->cmd('GET', rl_lock_key($kp));
    $done = rl_key('child-done');
    $pid = pcntl_fork();
    if ($pid === 0) {
        $ok = $obj->acquire();
        $raw2 = new RlRaw($srv['port']);
        $raw2->cmd('SET', "$done:acquired", $ok ? '1' : '0');
        unset($obj);               // the child's own lock: released here
        unset($parentHeld);        // the parent's: never released by the child
        $raw2->cmd('SET', "$done:value", (string) $raw2->cmd('GET', $lk));
        $raw2->cmd('SET', $done, '1');
        // Stay alive well past the ttl: a watchdog still renewing would keep the lock.
        usleep(3_000_000);
        exit(0);
    }
    rl_ok("[$label] the child ran", rl_wait_until(fn() => $raw->cmd('EXISTS', $done) === 1, 10.0));
    rl_same("[$label] the child took the lock", '1', $raw->cmd('GET', "$done:acquired"));
    rl_same("[$label] unset() in the child released it at once", '', $raw->cmd('GET', "$done:value"));
    $p = new DistributedLock($k, 1.0, $dsn);
    rl_same("[$label] the parent gets it at once while the child lives", true, $p->acquire(0.0));
    rl_same("[$label] and keeps it (no renewal of the child's token took it back)", true, $p->isAcquired());
    $p->release();
    $renewed = false;
    // For the child's remaining life (about 3 s): nothing renews its token.
    $until = microtime(true) + 2.0;
    while (microtime(true) < $until) {
        if ($raw->cmd('EXISTS', $lk) === 1) {
            $renewed = true;
        }
        usleep(50_000);
    }
    rl_same("[$label] no lease on the key while the child lived on", false, $renewed);
    rl_same("[$label] the parent's own hold is intact in Redis", $parentValue, $raw->cmd('GET', rl_lock_key($kp)));
    rl_same("[$label] and still the parent's", true, $parentHeld->isAcquired());
    $status = 0;
    rl_ok("[$label] the child exited", rl_wait_until(fn() => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 10.0));
    rl_same("[$label] the parent's hold survived the child's exit", true, $parentHeld->release());
}
echo "done\n";
?>
--EXPECT--
ok: [no autoRenew] the parent holds its own lock
ok: [no autoRenew] the child ran
ok: [no autoRenew] the child took the lock
ok: [no autoRenew] unset() in the child released it at once
ok: [no autoRenew] the parent gets it at once while the child lives
ok: [no autoRenew] and keeps it (no renewal of the child's token took it back)
ok: [no autoRenew] no lease on the key while the child lived on
ok: [no autoRenew] the parent's own hold is intact in Redis
ok: [no autoRenew] and still the parent's
ok: [no autoRenew] the child exited
ok: [no autoRenew] the parent's hold survived the child's exit
ok: [autoRenew] the parent holds its own lock
ok: [autoRenew] the child ran
ok: [autoRenew] the child took the lock
ok: [autoRenew] unset() in the child released it at once
ok: [autoRenew] the parent gets it at once while the child lives
ok: [autoRenew] and keeps it (no renewal of the child's token took it back)
ok: [autoRenew] no lease on the key while the child lived on
ok: [autoRenew] the parent's own hold is intact in Redis
ok: [autoRenew] and still the parent's
ok: [autoRenew] the child exited
ok: [autoRenew] the parent's hold survived the child's exit
done
