--TEST--
Read/write lock: a read hold restored into a new object (DistributedLock::restore() of a detached reader's token) is known for what it is before anything depends on its kind: synchronized() refuses before running the callback while another reader holds the lock, acquire() upgrades, getFencingToken() is null; the same for a permit restored into a DistributedSemaphore
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/inc/redis.inc';
$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];

$k = rl_key('restored-read');
$a = new DistributedLock($k, 30.0, $dsn);
$b = new DistributedLock($k, 30.0, $dsn);
rl_same('A reads', true, $a->acquireRead());
rl_same('B reads beside it', true, $b->acquireRead());
$token = $a->detach();
rl_ok('A detaches its read token', is_string($token));
$r = DistributedLock::restore($k, $token, 30.0, $dsn); // autoRenew false: nothing asked yet
$ran = false;
$e = rl_throws("synchronized() on the restored read hold refuses (it would need an upgrade)", RedisLease\LeaseException::class,
    static function () use ($r, &$ran) {
        $r->synchronized(static function () use (&$ran) {
            $ran = true;
        });
    });
rl_same('the "exclusive" callback never ran beside reader B', false, $ran);
rl_ok('the message says it is a read hold', $e !== null && str_contains($e->getMessage(), 'read hold'), $e?->getMessage() ?? '');
rl_same('B still holds its read hold', true, $b->isAcquired());
rl_same('the restored hold is still held (nothing was released)', true, $r->isAcquired());
rl_same('a read hold has no fencing token', null, $r->getFencingToken());
rl_same('synchronizedRead() runs nested in it', 'read', $r->synchronizedRead(static fn() => 'read'));

// Each method first on a fresh restore: what depends on the kind asks first.
// (A restored object owns the hold: each one gives it back by detach().)
$f = DistributedLock::restore($k, $token, 30.0, $dsn);
rl_same('getFencingToken() first on a restored read hold: null', null, $f->getFencingToken());
$f->detach();
$u = DistributedLock::restore($k, $token, 30.0, $dsn);
rl_same('acquire(0.2) first on a restored read hold is an upgrade, refused while B reads', false, $u->acquire(0.2));
rl_same('... and the hold is still the same read hold afterwards', [$token, null], [$u->getToken(), $u->getFencingToken()]);
rl_same('nobody queues after the refused upgrade', 0, $raw->cmd('ZCARD', rl_lock_key($k) . ':waiters'));
$u->detach();
rl_same('B releases', true, $b->release());
$u2 = DistributedLock::restore($k, $token, 30.0, $dsn);
rl_same('acquire() first on the restored read hold, B gone: an upgrade, granted', true, $u2->acquire(1.0));
rl_ok('now a writer: it has a fencing token', is_int($u2->getFencingToken()));
rl_same('the same token holds the lock alone', $token, explode(':', (string) $raw->cmd('GET', rl_lock_key($k)))[0]);
rl_same('and no read hold is left', 0, $raw->cmd('EXISTS', rl_lock_key($k) . ':holders'));
rl_same('released', true, $u2->release());

// A writer's token restored: synchronized() nests (no release at its end).
$w = new DistributedLock($k, 30.0, $dsn);
rl_same('W writes', true, $w->acquire());
$wt = $w->detach();
$rw = DistributedLock::restore($k, $wt, 30.0, $dsn);
rl_same('synchronized() on a restored write hold runs nested', 'w', $rw->synchronized(static fn() => 'w'));
rl_same('and leaves the hold to its holder', true, $rw->isAcquired());
rl_same('released by it', true, $rw->release());

// A semaphore permit restored: synchronized() nests in it.
$sk = rl_key('restored-permit');
$s = new DistributedSemaphore($sk, 2, 30.0, $dsn);
rl_same('a permit', true, $s->acquire());
$pt = $s->detach();
$rs = DistributedSemaphore::restore($sk, 2, $pt, 30.0, $dsn);
rl_same('synchronized() on a restored permit runs nested', 'p', $rs->synchronized(static fn() => 'p'));
rl_same('the permit is still held', true, $rs->isAcquired());
rl_same('released', true, $rs->release());
echo "done\n";
?>
--EXPECT--
ok: A reads
ok: B reads beside it
ok: A detaches its read token
ok: synchronized() on the restored read hold refuses (it would need an upgrade)
ok: the "exclusive" callback never ran beside reader B
ok: the message says it is a read hold
ok: B still holds its read hold
ok: the restored hold is still held (nothing was released)
ok: a read hold has no fencing token
ok: synchronizedRead() runs nested in it
ok: getFencingToken() first on a restored read hold: null
ok: acquire(0.2) first on a restored read hold is an upgrade, refused while B reads
ok: ... and the hold is still the same read hold afterwards
ok: nobody queues after the refused upgrade
ok: B releases
ok: acquire() first on the restored read hold, B gone: an upgrade, granted
ok: now a writer: it has a fencing token
ok: the same token holds the lock alone
ok: and no read hold is left
ok: released
ok: W writes
ok: synchronized() on a restored write hold runs nested
ok: and leaves the hold to its holder
ok: released by it
ok: a permit
ok: synchronized() on a restored permit runs nested
ok: the permit is still held
ok: released
done
