--TEST--
DistributedLock::forceRelease() whose reply is lost after it ran (the fault proxy cuts it) is sent again and answers as its first run did (its own marker): the lock the first run handed to the waiter stays the waiter's; a second run used to free it
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
require __DIR__ . '/../testing/fault_helpers.php';
require __DIR__ . '/../testing/fault_proxy.php';

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$scripts = __DIR__ . '/../src/core/scripts/';
$acquireLua = rl_script_compose(file_get_contents($scripts . 'lib.lua'), file_get_contents($scripts . 'acquire.lua'));
// acquire.lua as the extension sends it (KEYS and ARGV as in lease.rs).
$acquire = static fn(string $lk, string $t, string $mode, int $waitMs) => $raw->cmd('EVAL', $acquireLua, 6, $lk,
    "$lk:fence", "$lk:waiters", "$lk:terms", "$lk:void:$t", "$lk:holders", $t, '30000', (string) $waitMs, $mode, '0');
$k = rl_key('forced');
$lk = rl_lock_key($k);
[$th, $tw] = [str_repeat('a', 32), str_repeat('b', 32)];
rl_same('H takes the lock', 1, $acquire($lk, $th, 'w', 0));
rl_same('W queues for it', 0, $acquire($lk, $tw, 'w', 20000)[0]);

$proxy = FaultProxy::start($srv['port']);
$pdsn = $proxy->dsn('connect_timeout=1&read_timeout=1');
// Warm up through the proxy: the link made, the library loaded.
$warm = new DistributedLock(rl_key('warm'), 5.0, $pdsn);
rl_same('warm-up', true, $warm->acquire() && $warm->release());
$proxy->arm('cut', [$lk, rl_script_marker('force_release.lua')]);
rl_same('forceRelease(): its first reply lost, it says the lock was held', true, DistributedLock::forceRelease($k, $pdsn));
rl_ok('the first run was cut after it ran', $proxy->awaitEvent('cut', 5.0) !== null);
$v = $raw->cmd('GET', $lk);
rl_ok('W holds what the first run handed it', is_string($v) && str_starts_with($v, "$tw:"), var_export($v, true));
rl_same('nobody queues', 0, $raw->cmd('ZCARD', "$lk:waiters"));
echo "done\n";
?>
--EXPECT--
ok: H takes the lock
ok: W queues for it
ok: warm-up
ok: forceRelease(): its first reply lost, it says the lock was held
ok: the first run was cut after it ran
ok: W holds what the first run handed it
ok: nobody queues
done
