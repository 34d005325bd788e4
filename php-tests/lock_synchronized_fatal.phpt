--TEST--
DistributedLock: the lock is freed at once when the process dies of a fatal error, an uncaught exception or exit() while holding it
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

function run_child(string $label, string $code, string $key): void
{
    global $raw;
    $child = rl_spawn_php($code);
    $status = $child->wait(15.0);
    $out = $child->readAll(2.0);
    // Checked right after the process is gone: the ttl is 30 s, so only an
    // explicit release during shutdown can have removed the key.
    $exists = $raw->cmd('EXISTS', rl_lock_key($key));
    rl_ok("$label: child reached the point of death", str_contains($out, 'inside'), $out);
    rl_ok("$label: nothing ran after the fatal point", !str_contains($out, 'not reached'), $out);
    rl_same("$label: lock key gone immediately after the child died", 0, $exists);
    $GLOBALS['last_out'] = $out;
    $GLOBALS['last_status'] = $status;
}

// 1. E_USER_ERROR inside synchronized(): PHP bails out without running
//    destructors, so the extension must release during request shutdown.
$k1 = rl_key('fatal1');
run_child('E_USER_ERROR in synchronized', '
$l = new DistributedLock(' . rl_export($k1) . ', 30.0, ' . rl_export($dsn) . ');
$l->synchronized(function () {
    echo "inside\n";
    trigger_error("boom-fatal", E_USER_ERROR);
    echo "not reached\n";
});
echo "not reached\n";
', $k1);
rl_ok('E_USER_ERROR: fatal error reported', str_contains($last_out, 'Fatal error: boom-fatal'), $last_out);
rl_same('E_USER_ERROR: exit status 255', 255, $last_status);

// 2. Uncaught exception thrown while a lock taken with acquire() is held in a
//    global variable.
$k2 = rl_key('fatal2');
run_child('uncaught exception', '
$l = new DistributedLock(' . rl_export($k2) . ', 30.0, ' . rl_export($dsn) . ');
if (!$l->acquire()) { echo "acquire failed\n"; exit(1); }
echo "inside\n";
throw new RuntimeException("uncaught-boom");
', $k2);
rl_ok('uncaught exception: reported', str_contains($last_out, 'uncaught-boom'), $last_out);

// 3. exit() inside the synchronized() callback.
$k3 = rl_key('fatal3');
run_child('exit() in synchronized', '
$l = new DistributedLock(' . rl_export($k3) . ', 30.0, ' . rl_export($dsn) . ');
$l->synchronized(function () { echo "inside\n"; exit(3); });
echo "not reached\n";
', $k3);
rl_same('exit() in synchronized: exit status 3', 3, $last_status);

// 4. Fatal error inside synchronized(), the lock object
//    only referenced from a function's local scope.
$k4 = rl_key('fatal4');
run_child('Error in function scope', '
function work() {
    $l = new DistributedLock(' . rl_export($k4) . ', 30.0, ' . rl_export($dsn) . ');
    $l->synchronized(function () { echo "inside\n"; trigger_error("fatal-in-func", E_USER_ERROR); });
}
work();
echo "not reached\n";
', $k4);
rl_ok('fatal in function: reported', str_contains($last_out, 'fatal-in-func'), $last_out);

echo "done\n";
?>
--EXPECT--
ok: E_USER_ERROR in synchronized: child reached the point of death
ok: E_USER_ERROR in synchronized: nothing ran after the fatal point
ok: E_USER_ERROR in synchronized: lock key gone immediately after the child died
ok: E_USER_ERROR: fatal error reported
ok: E_USER_ERROR: exit status 255
ok: uncaught exception: child reached the point of death
ok: uncaught exception: nothing ran after the fatal point
ok: uncaught exception: lock key gone immediately after the child died
ok: uncaught exception: reported
ok: exit() in synchronized: child reached the point of death
ok: exit() in synchronized: nothing ran after the fatal point
ok: exit() in synchronized: lock key gone immediately after the child died
ok: exit() in synchronized: exit status 3
ok: Error in function scope: child reached the point of death
ok: Error in function scope: nothing ran after the fatal point
ok: Error in function scope: lock key gone immediately after the child died
ok: fatal in function: reported
done
