--TEST--
DistributedLock::synchronized() whose callback detaches the hold: the callback's result is returned (no LockLostException) and the hold lives on under its token, not released; if the detached hold ran out before the callback finished, a LockLostException says so; the same for synchronizedRead() and DistributedSemaphore::synchronized()
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

$k = rl_key('sync-detach');
$lk = rl_lock_key($k);
$a = new DistributedLock($k, 30.0, $dsn);
$token = null;
$r = $a->synchronized(static function () use ($a, &$token) {
    $token = $a->detach();
    return 42;
});
rl_same("synchronized() returns the callback's result", 42, $r);
rl_same('the detached hold is still in Redis under its token', $token, explode(':', (string) $raw->cmd('GET', $lk))[0]);
rl_same('the object holds nothing now', null, $a->getToken());
$b = DistributedLock::restore($k, $token, 30.0, $dsn);
rl_same('restore() elsewhere releases it', true, $b->release());

// Detached, then the hold ran out before the callback finished.
$short = new DistributedLock($k, 0.2, $dsn);
$e = rl_throws('a detached hold that ran out before the callback finished: LockLostException',
    RedisLease\LockLostException::class, static function () use ($short, $raw, $lk) {
        $short->synchronized(static function () use ($short, $raw, $lk) {
            $short->detach();
            rl_wait_until(fn() => $raw->cmd('EXISTS', $lk) === 0, 5.0);
            return 'late';
        });
    });
rl_ok('the message says it was detached', $e !== null && str_contains($e->getMessage(), 'detached'), $e?->getMessage() ?? '');

// A callback that detaches and throws: its exception, unchanged.
$c = new DistributedLock($k, 30.0, $dsn);
$e = rl_throws("a callback that detaches and throws: its own exception", DomainException::class,
    static function () use ($c, &$token) {
        $c->synchronized(static function () use ($c, &$token) {
            $token = $c->detach();
            throw new DomainException('mine');
        });
    });
rl_same('... and the detached hold is left alone', $token, explode(':', (string) $raw->cmd('GET', $lk))[0]);
DistributedLock::restore($k, $token, 30.0, $dsn)->release();

// A read hold.
$rd = new DistributedLock($k, 30.0, $dsn);
$rt = null;
rl_same('synchronizedRead() with detach: the result', 'r', $rd->synchronizedRead(static function () use ($rd, &$rt) {
    $rt = $rd->detach();
    return 'r';
}));
rl_same('the read hold lives on', 1, $raw->cmd('ZCARD', "$lk:holders"));
rl_same('released by its token', true, DistributedLock::restore($k, $rt, 30.0, $dsn)->release());

// A permit.
$sk = rl_key('sync-detach-sem');
$s = new DistributedSemaphore($sk, 2, 30.0, $dsn);
$pt = null;
rl_same('DistributedSemaphore::synchronized() with detach: the result', 'p', $s->synchronized(static function () use ($s, &$pt) {
    $pt = $s->detach();
    return 'p';
}));
$p = DistributedSemaphore::restore($sk, 2, $pt, 30.0, $dsn);
rl_same('the permit lives on', true, $p->isAcquired());
rl_same('released by its token', true, $p->release());

// Detach, then try to take the lock again inside the callback: the detached
// hold still has it (so the new attempt fails), and is not released at the end.
$n = new DistributedLock($k, 30.0, $dsn);
$first = null;
$again = null;
rl_same('detach then acquire(0) inside: the result', 'again', $n->synchronized(static function () use ($n, &$first, &$again) {
    $first = $n->detach();
    $again = $n->acquire(0.0);
    return 'again';
}));
rl_same('the new attempt inside found the lock held by the detached hold', false, $again);
rl_same('the first hold still holds the lock', $first, explode(':', (string) $raw->cmd('GET', $lk))[0]);
DistributedLock::restore($k, $first, 30.0, $dsn)->release();
rl_same('nothing left', 0, $raw->cmd('EXISTS', $lk));
echo "done\n";
?>
--EXPECT--
ok: synchronized() returns the callback's result
ok: the detached hold is still in Redis under its token
ok: the object holds nothing now
ok: restore() elsewhere releases it
ok: a detached hold that ran out before the callback finished: LockLostException
ok: the message says it was detached
ok: a callback that detaches and throws: its own exception
ok: ... and the detached hold is left alone
ok: synchronizedRead() with detach: the result
ok: the read hold lives on
ok: released by its token
ok: DistributedSemaphore::synchronized() with detach: the result
ok: the permit lives on
ok: released by its token
ok: detach then acquire(0) inside: the result
ok: the new attempt inside found the lock held by the detached hold
ok: the first hold still holds the lock
ok: nothing left
done
