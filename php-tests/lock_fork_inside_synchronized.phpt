--TEST--
DistributedLock/DistributedSemaphore::synchronized() whose callback forks: the child's copy of synchronized() returns (its callback returned, or called exit()) without releasing the parent's hold, which the parent is still inside; the parent's synchronized() releases it when its own callback returns (review, stop 55: before, the child released the parent's lock as its callback ended, another process could take it while the parent still worked, and the parent's synchronized() threw LockLostException). A child whose callback returns after the parent's released the hold gets LockLostException, as an outlived callback does (review of stop 55: before, it returned the result of work done under nobody's hold)
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
$parent = getmypid();

/** Waits for child $pid to exit; true when it did. */
function reap(int $pid): bool
{
    if ($pid <= 0) {
        return false;
    }
    $status = 0;
    $exited = rl_wait_until(fn() => pcntl_waitpid($pid, $status, WNOHANG) === $pid, 20.0);
    if (!$exited) {
        rl_kill_pid($pid, 'KILL');
        pcntl_waitpid($pid, $status);
    }
    return $exited;
}

$cases = [
    'lock, the child returns' => [false, 'return'],
    'lock, the child calls exit()' => [false, 'exit'],
    'semaphore, the child returns' => [true, 'return'],
    'semaphore, the child calls exit()' => [true, 'exit'],
    'lock, the parent returns first' => [false, 'outlived'],
    'semaphore, the parent returns first' => [true, 'outlived'],
];
foreach ($cases as $label => [$semaphore, $how]) {
    $k = rl_key('fork-sync');
    $done = rl_key('fork-sync-done');
    $lock = $semaphore ? new DistributedSemaphore($k, 1, 30.0, $dsn) : new DistributedLock($k, 30.0, $dsn);
    $held = $semaphore
        ? fn(string $t) => $raw->cmd('ZSCORE', rl_lock_key($k) . ':semaphore:holders', $t) !== null
        : fn(string $t) => str_starts_with((string) $raw->cmd('GET', rl_lock_key($k)), "$t:") || $raw->cmd('GET', rl_lock_key($k)) === $t;
    $other = fn() => $semaphore ? new DistributedSemaphore($k, 1, 30.0, $dsn) : new DistributedLock($k, 30.0, $dsn);
    $child = 0;
    $sync = function () use ($lock, $how, $done, $srv, $raw, $held, $other, $label, &$child) {
        return $lock->synchronized(function () use ($lock, $how, $done, $srv, $raw, $held, $other, $label, &$child): string {
            $token = $lock->getToken();
            $pid = pcntl_fork();
            if ($pid === 0) {
                $mine = new RlRaw($srv['port']);
                $mine->cmd('SET', "$done:in", 'yes');
                if ($how === 'exit') {
                    exit(0);
                }
                if ($how === 'outlived') {
                    rl_wait_until(fn() => $mine->cmd('GET', "$done:released") === 'yes', 20.0);
                }
                return 'child';
            }
            if ($how === 'outlived') {
                $child = $pid;
                return 'parent';
            }
            rl_ok("[$label] the child exited", reap($pid));
            rl_same("[$label] the child ran", 'yes', $raw->cmd('GET', "$done:in"));
            rl_ok("[$label] the parent still holds, inside its callback", $held($token));
            rl_same("[$label] another process cannot take it", false, $other()->acquire(0.0));
            return 'parent';
        });
    };
    try {
        $result = $sync();
    } catch (RedisLease\LockLostException $e) {
        $result = 'lost';
    } catch (Throwable $e) {
        // Anything else is named where the test compares (the child's too).
        $result = get_class($e);
    }
    if (getmypid() !== $parent) {
        // The child's synchronized() returned (its callback did): it leaves.
        (new RlRaw($srv['port']))->cmd('SET', $done, "returned $result");
        exit(0);
    }
    rl_same("[$label] the parent's synchronized() returns its callback's value", 'parent', $result);
    if ($how === 'return') {
        rl_same("[$label] the child's synchronized() returned its callback's value", 'returned child', $raw->cmd('GET', $done));
    }
    if ($how === 'outlived') {
        $raw->cmd('SET', "$done:released", 'yes');
        rl_ok("[$label] the child exited", reap($child));
        rl_same("[$label] the child's synchronized() threw LockLostException", 'returned lost', $raw->cmd('GET', $done));
    }
    rl_same("[$label] released by the parent as its callback returned", true, $other()->acquire(0.0));
}
echo "done\n";
?>
--EXPECT--
ok: [lock, the child returns] the child exited
ok: [lock, the child returns] the child ran
ok: [lock, the child returns] the parent still holds, inside its callback
ok: [lock, the child returns] another process cannot take it
ok: [lock, the child returns] the parent's synchronized() returns its callback's value
ok: [lock, the child returns] the child's synchronized() returned its callback's value
ok: [lock, the child returns] released by the parent as its callback returned
ok: [lock, the child calls exit()] the child exited
ok: [lock, the child calls exit()] the child ran
ok: [lock, the child calls exit()] the parent still holds, inside its callback
ok: [lock, the child calls exit()] another process cannot take it
ok: [lock, the child calls exit()] the parent's synchronized() returns its callback's value
ok: [lock, the child calls exit()] released by the parent as its callback returned
ok: [semaphore, the child returns] the child exited
ok: [semaphore, the child returns] the child ran
ok: [semaphore, the child returns] the parent still holds, inside its callback
ok: [semaphore, the child returns] another process cannot take it
ok: [semaphore, the child returns] the parent's synchronized() returns its callback's value
ok: [semaphore, the child returns] the child's synchronized() returned its callback's value
ok: [semaphore, the child returns] released by the parent as its callback returned
ok: [semaphore, the child calls exit()] the child exited
ok: [semaphore, the child calls exit()] the child ran
ok: [semaphore, the child calls exit()] the parent still holds, inside its callback
ok: [semaphore, the child calls exit()] another process cannot take it
ok: [semaphore, the child calls exit()] the parent's synchronized() returns its callback's value
ok: [semaphore, the child calls exit()] released by the parent as its callback returned
ok: [lock, the parent returns first] the parent's synchronized() returns its callback's value
ok: [lock, the parent returns first] the child exited
ok: [lock, the parent returns first] the child's synchronized() threw LockLostException
ok: [lock, the parent returns first] released by the parent as its callback returned
ok: [semaphore, the parent returns first] the parent's synchronized() returns its callback's value
ok: [semaphore, the parent returns first] the child exited
ok: [semaphore, the parent returns first] the child's synchronized() threw LockLostException
ok: [semaphore, the parent returns first] released by the parent as its callback returned
done
