--TEST--
DistributedLock and pcntl_fork(): a child that calls methods on the parent's held object (getFencingToken(), acquire(), refresh(), isAcquired()) and exits never releases the parent's lock at its request's end, and its refresh(1.0) never cuts the lease the parent counts on, nor does it convert the parent's hold (an upgrade of its read hold, a downgrade of its write hold: false, the hold as it was) (review, stop 54: before, the refresh left 1 s of the parent's 30, and the conversions went through); a child never takes over an acquire the parent left unresolved (the parent settles it); before, the child's request end released the parent's lock in both cases (review, stop 51)
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
$dsn = $srv['dsn'];

/** Runs $child in a forked child (its outcome stored at $done), waits for it to exit. */
function in_child(RlRaw $raw, int $port, string $done, callable $child): ?string
{
    $pid = pcntl_fork();
    if ($pid === 0) {
        $outcome = $child();
        (new RlRaw($port))->cmd('SET', $done, $outcome);
        exit(0); // the child's request ends here: its shutdown hook runs
    }
    $status = 0;
    $exited = rl_wait_until(fn() => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 20.0);
    if (!$exited) {
        rl_kill_pid($pid, 'KILL');
        pcntl_waitpid($pid, $status);
    }
    rl_ok('the child exited', $exited);
    return $raw->cmd('GET', $done);
}

foreach ([false, true] as $auto) {
    $label = $auto ? 'autoRenew' : 'no autoRenew';
    $k = rl_key('fork-uses');
    $lock = new DistributedLock($k, 30.0, $dsn, $auto);
    rl_same("[$label] the parent holds the lock", true, $lock->acquire());
    $token = $lock->getToken();
    $outcome = in_child($raw, $srv['port'], rl_key('fork-uses-done'), static function () use ($lock): string {
        try {
            return json_encode([is_int($lock->getFencingToken()), $lock->acquire(), $lock->refresh(1.0), $lock->isAcquired()]);
        } catch (Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage();
        }
    });
    rl_same("[$label] in the child, the parent's hold answered as held", '[true,true,true,true]', $outcome);
    // (The child's getFencingToken() gave it a fence: the value is "<token>:<fence>".)
    rl_ok("[$label] the parent's lock is intact after the child's exit",
        str_starts_with((string) $raw->cmd('GET', rl_lock_key($k)), "$token:"));
    $left = $raw->cmd('PTTL', rl_lock_key($k));
    rl_ok("[$label] the child's refresh(1.0) left the parent's lease as it was ($left ms)", $left > 20000);
    rl_same("[$label] and still the parent's to release", true, $lock->release());
}

// The parent reads, or holds alone: the child's conversion would change what the parent holds.
foreach (['reads' => true, 'writes' => false] as $how => $read) {
    $k = rl_key("fork-$how");
    $lk = rl_lock_key($k);
    $lock = new DistributedLock($k, 30.0, $dsn);
    rl_same("[$how] the parent holds", true, $read ? $lock->acquireRead() : $lock->acquire());
    $token = $lock->getToken();
    $outcome = in_child($raw, $srv['port'], rl_key("fork-$how-done"), static function () use ($lock, $read): string {
        try {
            return json_encode([$read ? $lock->acquire(0.0) : $lock->acquireRead(0.0), $lock->refresh(1.0), $lock->isAcquired()]);
        } catch (Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage();
        }
    });
    rl_same("[$how] in the child: not converted, refreshed, held", '[false,true,true]', $outcome);
    if ($read) {
        $t = $raw->cmd('TIME');
        $left = (int) $raw->cmd('ZSCORE', "$lk:holders", $token) - ((int) $t[0] * 1000 + intdiv((int) $t[1], 1000));
        rl_ok("[$how] the parent's read hold keeps its lease ($left ms), and nobody holds alone",
            $left > 20000 && $raw->cmd('GET', $lk) === null);
    } else {
        $left = $raw->cmd('PTTL', $lk);
        rl_ok("[$how] the parent still holds alone, with its lease ($left ms), and nobody reads",
            str_starts_with((string) $raw->cmd('GET', $lk), "$token:") && $left > 20000
            && (int) $raw->cmd('ZCARD', "$lk:holders") === 0);
    }
    $other = new DistributedLock($k, 30.0, $dsn);
    rl_same("[$how] a writer is kept out", false, $other->acquire(0.0));
    rl_same("[$how] the parent releases", true, $lock->release());
}

// An acquire left unresolved (Redis stopped), whose command ran once Redis went on.
$k = rl_key('fork-unresolved');
$lk = rl_lock_key($k);
// A read timeout the calls after the pause meet in time on a loaded machine.
$lock = new DistributedLock($k, 30.0, "$dsn?read_timeout=2");
rl_ok('redis-server stopped', fault_pause($srv['pid']));
$e = fault_outcome(fn() => $lock->acquire());
rl_same('the acquire got no answer', 'RedisLease\ConnectionException', $e['exception']);
rl_ok('redis-server goes on', fault_resume($srv['pid']));
rl_ok('the late acquire ran', fault_await_late_commands($srv['port']));
$value = $raw->cmd('GET', $lk);
rl_ok('it took the lock', $value !== null);
$outcome = in_child($raw, $srv['port'], rl_key('fork-unresolved-done'), static function () use ($lock): string {
    try {
        return json_encode($lock->acquire(0.0));
    } catch (Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
});
rl_same("the child did not take over the parent's attempt (it found the lock held)", 'false', $outcome);
rl_same('the lock the late acquire took is intact after the child exit', $value, $raw->cmd('GET', $lk));
rl_same('the parent settles it: it holds the lock', true, $lock->acquire(0.0));
rl_same('... the one its attempt took', $value, $raw->cmd('GET', $lk));
rl_same('and releases it', true, $lock->release());
echo "done\n";
?>
--EXPECTF--
ok: [no autoRenew] the parent holds the lock
ok: the child exited
ok: [no autoRenew] in the child, the parent's hold answered as held
ok: [no autoRenew] the parent's lock is intact after the child's exit
ok: [no autoRenew] the child's refresh(1.0) left the parent's lease as it was (%d ms)
ok: [no autoRenew] and still the parent's to release
ok: [autoRenew] the parent holds the lock
ok: the child exited
ok: [autoRenew] in the child, the parent's hold answered as held
ok: [autoRenew] the parent's lock is intact after the child's exit
ok: [autoRenew] the child's refresh(1.0) left the parent's lease as it was (%d ms)
ok: [autoRenew] and still the parent's to release
ok: [reads] the parent holds
ok: the child exited
ok: [reads] in the child: not converted, refreshed, held
ok: [reads] the parent's read hold keeps its lease (%d ms), and nobody holds alone
ok: [reads] a writer is kept out
ok: [reads] the parent releases
ok: [writes] the parent holds
ok: the child exited
ok: [writes] in the child: not converted, refreshed, held
ok: [writes] the parent still holds alone, with its lease (%d ms), and nobody reads
ok: [writes] a writer is kept out
ok: [writes] the parent releases
ok: redis-server stopped
ok: the acquire got no answer
ok: redis-server goes on
ok: the late acquire ran
ok: it took the lock
ok: the child exited
ok: the child did not take over the parent's attempt (it found the lock held)
ok: the lock the late acquire took is intact after the child exit
ok: the parent settles it: it holds the lock
ok: ... the one its attempt took
ok: and releases it
done
