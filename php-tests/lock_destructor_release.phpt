--TEST--
DistributedLock: destroying the object releases its hold at once (unset, scope end, reassignment, script end) but never someone else's
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('dtor');
$rk = rl_lock_key($k);

$l = new DistributedLock($k, 30.0, $dsn);
rl_same('acquire', true, $l->acquire());
unset($l);
rl_same('unset() freed the key immediately', 0, $raw->cmd('EXISTS', $rk));

function hold_in_scope(string $k, string $dsn, RlRaw $raw, string $rk): void
{
    $l = new DistributedLock($k, 30.0, $dsn);
    $l->acquire();
    rl_same('held inside function', 1, $raw->cmd('EXISTS', $rk));
}
hold_in_scope($k, $dsn, $raw, $rk);
rl_same('leaving the function scope freed the key', 0, $raw->cmd('EXISTS', $rk));

$l = new DistributedLock($k, 30.0, $dsn);
$l->acquire();
$l = null;
rl_same('assigning null freed the key', 0, $raw->cmd('EXISTS', $rk));

$l = new DistributedLock($k, 30.0, $dsn);
$l->acquire();
$l = new DistributedLock($k . '-2', 30.0, $dsn);
rl_same('reassigning the variable freed the old key', 0, $raw->cmd('EXISTS', $rk));
unset($l);

// Destroying an object that does not hold the lock must leave the holder's
// key alone.
$holder = new DistributedLock($k, 30.0, $dsn);
$holder->acquire();
$val = $raw->cmd('GET', $rk);
$contender = new DistributedLock($k, 30.0, $dsn);
rl_same('contender cannot acquire', false, $contender->acquire());
unset($contender);
rl_same("destroying a contender leaves the holder's key", $val, $raw->cmd('GET', $rk));
$neverUsed = new DistributedLock($k, 30.0, $dsn);
unset($neverUsed);
rl_same("destroying a never-used object leaves the holder's key", $val, $raw->cmd('GET', $rk));
$holder->release();

// An expired former holder destroyed after someone else took over.
$old = new DistributedLock($k, 0.2, $dsn);
$old->acquire();
rl_ok('short lease expired', rl_wait_until(fn() => $raw->cmd('EXISTS', $rk) === 0, 5.0));
$new = new DistributedLock($k, 30.0, $dsn);
rl_same('new holder acquires', true, $new->acquire());
$val = $raw->cmd('GET', $rk);
unset($old);
rl_same("destroying the expired former holder leaves the new holder's key", $val, $raw->cmd('GET', $rk));
unset($new);
rl_same('destroying the new holder frees the key', 0, $raw->cmd('EXISTS', $rk));

// Child scripts that end (normally or via exit()) while holding locks.
foreach ([
    'global variable at script end' => '$l = new DistributedLock(KEY, 30.0, DSN); $l->acquire(); echo "held\n";',
    'inside an array at script end' => '$a = ["x" => new DistributedLock(KEY, 30.0, DSN)]; $a["x"]->acquire(); echo "held\n";',
    'static variable at script end' => 'function f() { static $l; $l = new DistributedLock(KEY, 30.0, DSN); $l->acquire(); } f(); echo "held\n";',
    'exit() while holding' => '$l = new DistributedLock(KEY, 30.0, DSN); $l->acquire(); echo "held\n"; exit(0);',
    'circular reference (freed by GC at shutdown)' => '$o = new stdClass(); $o->self = $o; $o->lock = new DistributedLock(KEY, 30.0, DSN); $o->lock->acquire(); unset($o); echo "held\n";',
] as $label => $body) {
    $ck = rl_key('dtorchild');
    $child = rl_spawn_php("const KEY = " . rl_export($ck) . "; const DSN = " . rl_export($dsn) . ";\n" . $body);
    $status = $child->wait(10.0);
    $out = $child->readAll(2.0);
    rl_ok("child ($label) held the lock and exited 0", $status === 0 && str_contains($out, 'held'), "status $status, output: $out");
    rl_same("child ($label): key freed at exit", 0, $raw->cmd('EXISTS', rl_lock_key($ck)));
}

echo "done\n";
?>
--EXPECT--
ok: acquire
ok: unset() freed the key immediately
ok: held inside function
ok: leaving the function scope freed the key
ok: assigning null freed the key
ok: reassigning the variable freed the old key
ok: contender cannot acquire
ok: destroying a contender leaves the holder's key
ok: destroying a never-used object leaves the holder's key
ok: short lease expired
ok: new holder acquires
ok: destroying the expired former holder leaves the new holder's key
ok: destroying the new holder frees the key
ok: child (global variable at script end) held the lock and exited 0
ok: child (global variable at script end): key freed at exit
ok: child (inside an array at script end) held the lock and exited 0
ok: child (inside an array at script end): key freed at exit
ok: child (static variable at script end) held the lock and exited 0
ok: child (static variable at script end): key freed at exit
ok: child (exit() while holding) held the lock and exited 0
ok: child (exit() while holding): key freed at exit
ok: child (circular reference (freed by GC at shutdown)) held the lock and exited 0
ok: child (circular reference (freed by GC at shutdown)): key freed at exit
done
