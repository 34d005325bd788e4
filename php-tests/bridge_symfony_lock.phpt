--TEST--
Bridge, Symfony Lock on LeaseStore (Debian's Symfony 5.4 LockFactory): acquire with the Lock's ttl, conflicts, release; acquire(true) queues and is handed the lock by the release; a Key serialized with an autoRelease: false lock is refreshed and released in another process; autoRelease frees it when the Lock goes; a lost or expired Key; acquireRead() is shared; bad input and an unreachable Redis
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Symfony/Component/Lock/autoload.php';
require BR_BRIDGE . '/autoload.php';

use RedisLease\Bridge\Symfony\LeaseStore;
use Symfony\Component\Lock\Exception\InvalidTtlException;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockExpiredException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$store = new LeaseStore($dsn);
$factory = new LockFactory($store);
$pttl = fn (string $name) => $raw->cmd('PTTL', rl_lock_key($name));
$childPrelude = 'require "Symfony/Component/Lock/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $factory = new Symfony\Component\Lock\LockFactory(new RedisLease\Bridge\Symfony\LeaseStore(' . rl_export($dsn) . '));';

// Acquire and release.
$lock = $factory->createLock('invoice', 10.0);
rl_same('acquire() takes a free lock', true, $lock->acquire());
rl_ok('... with the Lock\'s ttl (10 s; saved with the store\'s initial 300 s, then put off as Symfony does)',
    $pttl('invoice') > 9900 && $pttl('invoice') <= 10000, rl_fmt($pttl('invoice')));
rl_same('isAcquired()', true, $lock->isAcquired());
rl_ok('getRemainingLifetime() about 10 s', $lock->getRemainingLifetime() > 9.5 && $lock->getRemainingLifetime() <= 10.0, rl_fmt($lock->getRemainingLifetime()));
rl_same('acquire() again by the same Lock: true (re-entrant, as Symfony\'s stores)', true, $lock->acquire());
$other = $factory->createLock('invoice', 10.0);
rl_same('another Lock of the resource: acquire() false', false, $other->acquire());
rl_same('... isAcquired() false', false, $other->isAcquired());
$lock->refresh(20.0);
rl_ok('refresh(20)', $pttl('invoice') > 19900, rl_fmt($pttl('invoice')));
$lock->release();
rl_same('release() frees it', 0, $raw->cmd('EXISTS', rl_lock_key('invoice')));
rl_same('... isAcquired() false', false, $lock->isAcquired());
rl_same('... and the other Lock can take it', true, $other->acquire());
$other->release();

// acquire(true): the store is blocking, so Symfony does not poll; the waiter queues and the release hands it over.
$held = $factory->createLock('queue', 30.0);
$held->acquire();
$waiter = rl_spawn_php($childPrelude . '
$l = $factory->createLock("queue", 30.0);
echo "waiting\n";
$l->acquire(true);
printf("got %.6f\n", microtime(true));
$l->release();');
rl_same('a process waits in acquire(true)', 'waiting', $waiter->readLine(10.0));
rl_ok('... queued in the store (Symfony\'s polling would never queue)',
    rl_wait_until(fn () => $raw->cmd('ZCARD', rl_lock_key('queue') . ':waiters') === 1, 5.0, 0.002));
$released = microtime(true);
$held->release();
[$word, $at] = explode(' ', (string) $waiter->readLine(10.0)) + [1 => INF];
rl_same('... the release hands it to the waiter', 'got', $word);
rl_ok('... at once (Symfony polls every 100 ms)', (float) $at - $released < 0.1, sprintf('%.3f s', (float) $at - $released));
rl_same('... which exits', 0, $waiter->wait(10.0));

// A Key serialized with an autoRelease: false lock moves to another process.
$child = rl_spawn_php($childPrelude . '
$key = new Symfony\Component\Lock\Key("report");
$lock = $factory->createLockFromKey($key, 30.0, false);
echo $lock->acquire() ? base64_encode(serialize($key)) : "busy", "\n";');
$serialized = (string) $child->readLine(10.0);
rl_same('a process takes "report" (autoRelease: false) and exits', 0, $child->wait(10.0));
rl_ok('... the lock lives on with its 30 s ttl', $pttl('report') > 28000 && $pttl('report') <= 30000, rl_fmt($pttl('report')));
$key = unserialize(base64_decode($serialized));
rl_ok('its Key unserializes here', $key instanceof Key, rl_fmt($key));
$moved = $factory->createLockFromKey($key, 30.0, false);
rl_same('isAcquired() with that Key', true, $moved->isAcquired());
$moved->refresh(60.0);
rl_ok('refresh(60) with it', $pttl('report') > 59000, rl_fmt($pttl('report')));
$moved->release();
rl_same('release() with it', 0, $raw->cmd('EXISTS', rl_lock_key('report')));
rl_same('... isAcquired() false', false, $moved->isAcquired());

// autoRelease.
$auto = $factory->createLock('auto', 30.0);
$auto->acquire();
unset($auto);
rl_same('autoRelease (the default): released when the Lock goes', 0, $raw->cmd('EXISTS', rl_lock_key('auto')));
$kept = $factory->createLock('kept', 30.0, false);
$kept->acquire();
unset($kept);
rl_same('autoRelease: false: kept when the Lock goes', 1, $raw->cmd('EXISTS', rl_lock_key('kept')));

// Lost and expired.
$lost = $factory->createLock('lost', 30.0);
$lost->acquire();
DistributedLock::forceRelease('lost', $dsn);
rl_throws('refresh() of a lock taken away: LockConflictedException', LockConflictedException::class, fn () => $lost->refresh());
rl_same('... isAcquired() false', false, $lost->isAcquired());
$key = new Key('expired');
$store->save($key);
$key->reduceLifetime(-1.0); // its lifetime ran out (as after a long pause)
rl_throws('putOffExpiration() of an expired Key: LockExpiredException', LockExpiredException::class, fn () => $store->putOffExpiration($key, 10.0));
rl_same('... and the lock is given back', 0, $raw->cmd('EXISTS', rl_lock_key('expired')));
rl_same('exists() of a Key never saved: false', false, $store->exists(new Key('never')));

// Shared locks: bridge_symfony_shared_lock.phpt. Here only that the store has them (no exclusive fallback).
$read1 = $factory->createLock('shared', 30.0);
$read2 = $factory->createLock('shared', 30.0);
rl_same('acquireRead(): shared', [true, true], [$read1->acquireRead(), $read2->acquireRead()]);
$read1->release();
$read2->release();

// Two Redis servers in one CombinedStore (here two databases of one), as Symfony's high-availability
// setup: each store keeps its own token in the Key (each Redis hands out its own). Review, stop 58:
// they shared one slot, the second overwrote the first's token, and acquire() said false on a free
// lock, leaving both held for nobody for the initial ttl.
$combined = new LockFactory(new Symfony\Component\Lock\Store\CombinedStore(
    [new LeaseStore("$dsn/1"), new LeaseStore("$dsn/2")], new Symfony\Component\Lock\Strategy\UnanimousStrategy()));
$both = function () use ($raw): array {
    $held = [];
    foreach (['1', '2'] as $db) {
        $raw->cmd('SELECT', $db);
        $held[] = $raw->cmd('EXISTS', rl_lock_key('ha'));
    }
    $raw->cmd('SELECT', '0');
    return $held;
};
$ha = $combined->createLock('ha', 30.0);
rl_same('a CombinedStore of two LeaseStores: acquire() takes a free lock', true, $ha->acquire());
rl_same('... held on both Redis', [1, 1], $both());
rl_same('... isAcquired()', true, $ha->isAcquired());
rl_same('... another Lock of it: false', false, $combined->createLock('ha', 30.0)->acquire());
$ha->refresh(60.0);
$ha->release();
rl_same('... refresh() and release() free both', [0, 0], $both());

// A Key handed to a process whose store spells the same Redis's DSN another way (other timeouts, a
// scripts turned off by a deploy while Keys wait in a queue): it finds its token and releases it.
$held = $factory->createLock('handed', 30.0, false);
rl_same('a lock kept past its object (autoRelease: false)', true, $held->acquire());
$key = unserialize(serialize((fn () => $this->key)->call($held)));
$other = new LockFactory(new LeaseStore("$dsn?timeout=3&read_timeout=4&functions=0"));
$there = $other->createLockFromKey($key, 30.0, false);
rl_same('... is held, seen through a DSN spelled another way', true, $there->isAcquired());
$there->release();
rl_same('... and released there', 0, $raw->cmd('EXISTS', rl_lock_key('handed')));

// A rolling deploy: a Key of this version keeps its token where the bridge before it looked too, and a
// Key of that version (its token in the slot every store shared) is released by this one.
$held = $factory->createLock('rolling', 30.0, false);
$held->acquire();
$key = (fn () => $this->key)->call($held);
rl_same('the token is kept where the earlier bridge reads it too', $store->tokenOf($key), $key->getState(LeaseStore::class));
$held->release();
$old = new DistributedLock('rolling-old', 30.0, $dsn);
$old->acquire();
$oldKey = new Key('rolling-old');
$oldKey->setState(LeaseStore::class, $old->detach());
$factory->createLockFromKey($oldKey, 30.0, false)->release();
rl_same("a Key of the earlier bridge is released by this one", 0, $raw->cmd('EXISTS', rl_lock_key('rolling-old')));

// Bad input, Redis unreachable.
rl_throws('an initial ttl of 0: InvalidTtlException', InvalidTtlException::class, fn () => new LeaseStore($dsn, 0.0));
rl_throws('an initial ttl over 30 days: InvalidTtlException', InvalidTtlException::class, fn () => new LeaseStore($dsn, 3e6));
$e = rl_throws('a Lock ttl over 30 days: Symfony\'s LockAcquiringException, not the extension\'s ValueError', LockAcquiringException::class,
    fn () => $factory->createLock('long', 3e6)->acquire());
$cause = $e;
while ($cause !== null && !$cause instanceof InvalidTtlException) {
    $cause = $cause->getPrevious();
}
rl_ok('... caused by InvalidTtlException', $cause !== null, rl_fmt($e?->getPrevious()));
rl_same('... and nothing held', 0, $raw->cmd('EXISTS', rl_lock_key('long')));
rl_throws('an empty resource: ValueError', ValueError::class, fn () => $factory->createLock('')->acquire());
$e = rl_throws('Redis unreachable: Symfony\'s LockAcquiringException', LockAcquiringException::class,
    fn () => (new LockFactory(new LeaseStore('redis://127.0.0.1:' . rl_free_port())))->createLock('x')->acquire());
rl_ok('... caused by the extension\'s ConnectionException', $e?->getPrevious() instanceof RedisLease\ConnectionException,
    rl_fmt($e?->getPrevious()));
echo "done\n";
?>
--EXPECT--
ok: acquire() takes a free lock
ok: ... with the Lock's ttl (10 s; saved with the store's initial 300 s, then put off as Symfony does)
ok: isAcquired()
ok: getRemainingLifetime() about 10 s
ok: acquire() again by the same Lock: true (re-entrant, as Symfony's stores)
ok: another Lock of the resource: acquire() false
ok: ... isAcquired() false
ok: refresh(20)
ok: release() frees it
ok: ... isAcquired() false
ok: ... and the other Lock can take it
ok: a process waits in acquire(true)
ok: ... queued in the store (Symfony's polling would never queue)
ok: ... the release hands it to the waiter
ok: ... at once (Symfony polls every 100 ms)
ok: ... which exits
ok: a process takes "report" (autoRelease: false) and exits
ok: ... the lock lives on with its 30 s ttl
ok: its Key unserializes here
ok: isAcquired() with that Key
ok: refresh(60) with it
ok: release() with it
ok: ... isAcquired() false
ok: autoRelease (the default): released when the Lock goes
ok: autoRelease: false: kept when the Lock goes
ok: refresh() of a lock taken away: LockConflictedException
ok: ... isAcquired() false
ok: putOffExpiration() of an expired Key: LockExpiredException
ok: ... and the lock is given back
ok: exists() of a Key never saved: false
ok: acquireRead(): shared
ok: a CombinedStore of two LeaseStores: acquire() takes a free lock
ok: ... held on both Redis
ok: ... isAcquired()
ok: ... another Lock of it: false
ok: ... refresh() and release() free both
ok: a lock kept past its object (autoRelease: false)
ok: ... is held, seen through a DSN spelled another way
ok: ... and released there
ok: the token is kept where the earlier bridge reads it too
ok: a Key of the earlier bridge is released by this one
ok: an initial ttl of 0: InvalidTtlException
ok: an initial ttl over 30 days: InvalidTtlException
ok: a Lock ttl over 30 days: Symfony's LockAcquiringException, not the extension's ValueError
ok: ... caused by InvalidTtlException
ok: ... and nothing held
ok: an empty resource: ValueError
ok: Redis unreachable: Symfony's LockAcquiringException
ok: ... caused by the extension's ConnectionException
done
