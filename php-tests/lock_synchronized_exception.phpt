--TEST--
DistributedLock::synchronized(): the callback's exception is rethrown unchanged and the lock is released
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$k = rl_key('syncexc');
$rk = rl_lock_key($k);

class MyDomainError extends DomainException {}

$l = new DistributedLock($k, 30.0, $dsn);
$prev = new LogicException('cause');
$ex = new MyDomainError('boom in callback', 1234, $prev);
$held = null;
$caught = null;
try {
    $l->synchronized(function () use ($ex, $l, &$held) {
        $held = $l->isAcquired();
        throw $ex;
    });
} catch (Throwable $e) {
    $caught = $e;
}
rl_same('callback ran while holding the lock', true, $held);
rl_ok('the very same exception object is rethrown', $caught === $ex, rl_fmt($caught));
rl_same('class', MyDomainError::class, $caught ? get_class($caught) : null);
rl_same('message', 'boom in callback', $caught?->getMessage());
rl_same('code', 1234, $caught?->getCode());
rl_ok('previous kept', $caught?->getPrevious() === $prev);
rl_same('lock key released', 0, $raw->cmd('EXISTS', $rk));
rl_same('isAcquired() after', false, $l->isAcquired());

// An Error (not Exception) from the callback.
$caught = null;
try {
    $l->synchronized(function () { return intdiv(1, 0); });
} catch (Throwable $e) {
    $caught = $e;
}
rl_same('DivisionByZeroError rethrown', DivisionByZeroError::class, $caught ? get_class($caught) : null);
rl_same('lock key released after Error', 0, $raw->cmd('EXISTS', $rk));

// A TypeError raised inside the callback is the callback's, not ours.
$caught = null;
try {
    $l->synchronized(function () { return strlen([]); });
} catch (Throwable $e) {
    $caught = $e;
}
rl_same('TypeError from inside the callback rethrown', TypeError::class, $caught ? get_class($caught) : null);
rl_ok('TypeError message is the one from strlen()', $caught !== null && str_contains($caught->getMessage(), 'strlen'), $caught?->getMessage() ?? '');
rl_same('lock key released after TypeError', 0, $raw->cmd('EXISTS', $rk));

// A LeaseException subclass thrown by the callback is passed through as is
// (not mistaken for one of ours).
$mine = new RedisLease\LockLostException('thrown by user code');
$caught = null;
try {
    $l->synchronized(function () use ($mine) { throw $mine; });
} catch (Throwable $e) {
    $caught = $e;
}
rl_ok('user-thrown LockLostException passed through unchanged', $caught === $mine, rl_fmt($caught));
rl_same('lock key released', 0, $raw->cmd('EXISTS', $rk));

// The lock still works normally, and other processes can get it.
rl_same('acquire() after exceptions', true, $l->acquire());
rl_same('release()', true, $l->release());

// Exception thrown while an outer try/finally is active: finally runs, lock freed.
$order = [];
try {
    try {
        $l->synchronized(function () use (&$order) { $order[] = 'callback'; throw new RuntimeException('x'); });
    } finally {
        $order[] = 'finally';
    }
} catch (RuntimeException $e) {
    $order[] = 'catch';
}
rl_same('finally and catch run in order', ['callback', 'finally', 'catch'], $order);
rl_same('lock key released', 0, $raw->cmd('EXISTS', $rk));

unset($l);
echo "done\n";
?>
--EXPECT--
ok: callback ran while holding the lock
ok: the very same exception object is rethrown
ok: class
ok: message
ok: code
ok: previous kept
ok: lock key released
ok: isAcquired() after
ok: DivisionByZeroError rethrown
ok: lock key released after Error
ok: TypeError from inside the callback rethrown
ok: TypeError message is the one from strlen()
ok: lock key released after TypeError
ok: user-thrown LockLostException passed through unchanged
ok: lock key released
ok: acquire() after exceptions
ok: release()
ok: finally and catch run in order
ok: lock key released
done
