--TEST--
Bridge, Symfony shared locks on LeaseStore (Debian's Symfony 5.4 LockFactory): acquireRead() readers share and exclude a writer, each read hold with the Lock's ttl, refreshed and released alone; an upgrade (acquire() on a read lock) is first in line before a queued writer and keeps its token, a second upgrader is refused at once (acquire(true) throws, no deadlock), a reader arriving meanwhile waits; a downgrade (acquireRead() on a write lock) keeps its token and lets the queued reader in at once, not the queued writer; a read Key serialized in one process is upgraded in another; an expired read lock; bad input and an unreachable Redis
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
use Symfony\Component\Lock\BlockingSharedLockStoreInterface;
use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$store = new LeaseStore($dsn);
$factory = new LockFactory($store);
$lockKey = fn (string $name) => rl_lock_key($name);
$holders = fn (string $name) => rl_lock_key($name) . ':holders';
$waiters = fn (string $name) => rl_lock_key($name) . ':waiters';
$readLeases = fn (string $name) => br_shared_leases($raw, $holders($name));
$token = fn (Key $key) => $store->tokenOf($key);
$childPrelude = 'require "Symfony/Component/Lock/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $store = new RedisLease\Bridge\Symfony\LeaseStore(' . rl_export($dsn) . ');'
    . ' $factory = new Symfony\Component\Lock\LockFactory($store);'
    . ' $token = fn ($key) => $store->tokenOf($key);';

rl_ok('LeaseStore is a BlockingSharedLockStoreInterface (Symfony\'s Lock uses saveRead/waitAndSaveRead, no polling)',
    $store instanceof BlockingSharedLockStoreInterface);

// --- Readers share, a writer is alone ---
$k1 = new Key('catalog');
$k2 = new Key('catalog');
$r1 = $factory->createLockFromKey($k1, 10.0);
$r2 = $factory->createLockFromKey($k2, 10.0);
rl_same('acquireRead() by two Locks of one resource: both hold it', [true, true], [$r1->acquireRead(), $r2->acquireRead()]);
rl_same('... two read holds in Redis, no writer', [2, 0], [$raw->cmd('ZCARD', $holders('catalog')), $raw->cmd('EXISTS', $lockKey('catalog'))]);
$left = $readLeases('catalog');
rl_ok('... each with the Lock\'s ttl (10 s; saved with the initial 300 s, then put off as Symfony does)',
    count($left) === 2 && min($left) > 8.0 && max($left) <= 10.0, rl_fmt($left));
rl_same('isAcquired() of both', [true, true], [$r1->isAcquired(), $r2->isAcquired()]);
$w = $factory->createLock('catalog', 10.0);
rl_same('a writer cannot take it: acquire() false', false, $w->acquire());
rl_same('acquireRead() again by a reader: true (extends its own read hold)', [true, 2], [$r1->acquireRead(), $raw->cmd('ZCARD', $holders('catalog'))]);
$r1->refresh(30.0);
$left = $readLeases('catalog');
rl_ok('refresh(30) of one reader extends its hold only', ($left[$token($k1)] ?? 0) > 28.0 && ($left[$token($k2)] ?? 99) <= 10.0, rl_fmt($left));
$r1->release();
rl_same('release() of one reader: the other keeps reading', [false, true, 1], [$r1->isAcquired(), $r2->isAcquired(), $raw->cmd('ZCARD', $holders('catalog'))]);
rl_same('... the writer still cannot', false, $w->acquire());
$r2->release();
rl_same('release() of the last reader: nothing left', [0, 0], [$raw->cmd('EXISTS', $holders('catalog')), $raw->cmd('EXISTS', $lockKey('catalog'))]);
rl_same('... the writer can now', true, $w->acquire());
rl_same('... and no reader meanwhile', false, $r1->acquireRead());
$w->release();

// --- Upgrade: P and U read, a writer W queues; U's acquire(true) goes before W, on the same token ---
$pKey = new Key('doc');
$p = $factory->createLockFromKey($pKey, 30.0);
rl_same('P reads "doc"', true, $p->acquireRead());
$u = rl_spawn_php($childPrelude . '
$key = new Symfony\Component\Lock\Key("doc");
$lock = $factory->createLockFromKey($key, 30.0);
echo $lock->acquireRead() ? "reading " . $token($key) : "busy", "\n";
fgets(STDIN);
echo "upgrading\n";
$lock->acquire(true);
echo "upgraded ", $token($key), "\n";
fgets(STDIN);
$lock->release();
echo "released\n";');
[$word, $uToken] = explode(' ', (string) $u->readLine(10.0)) + [1 => null];
rl_same('U (another process) reads it too', 'reading', $word);
$wr = rl_spawn_php($childPrelude . '
$lock = $factory->createLock("doc", 30.0);
echo "waiting\n";
$lock->acquire(true);
echo "got\n";
$lock->release();');
rl_same('W (another process) waits to write', 'waiting', $wr->readLine(10.0));
rl_ok('... queued behind the readers', rl_wait_until(fn () => $raw->cmd('ZCARD', $waiters('doc')) === 1, 10.0));
$u->send('upgrade');
rl_same('U upgrades: acquire(true) on its read lock', 'upgrading', $u->readLine(10.0));
rl_ok('... U waits for P to leave, first in line, before W',
    rl_wait_until(function () use ($raw, $waiters, $uToken) {
        $queue = $raw->cmd('ZRANGE', $waiters('doc'), 0, -1);
        return count($queue) === 2 && $queue[0] === $uToken;
    }, 10.0), rl_fmt($raw->cmd('ZRANGE', $waiters('doc'), 0, -1)));
rl_same('... still two readers, no writer, while P reads', [2, 0], [$raw->cmd('ZCARD', $holders('doc')), $raw->cmd('EXISTS', $lockKey('doc'))]);
rl_same('a reader arriving now waits (a writer is first in line): acquireRead() false', false, $factory->createLock('doc', 30.0)->acquireRead());
rl_same('P\'s own upgrade, acquire(): false (other readers), P keeps its read lock', [false, true, 2],
    [$p->acquire(), $p->isAcquired(), $raw->cmd('ZCARD', $holders('doc'))]);
rl_throws('P\'s acquire(true) while U upgrades: LockConflictedException at once (both would wait for ever)',
    LockConflictedException::class, fn () => $p->acquire(true));
rl_same('... P still reads, with its token', [true, 2], [$store->exists($pKey), $raw->cmd('ZCARD', $holders('doc'))]);
$p->release();
rl_same('P releases: U has upgraded, with the token it read with', "upgraded $uToken", $u->readLine(10.0));
$value = (string) $raw->cmd('GET', $lockKey('doc'));
rl_ok('... U writes alone (the lock is its token), no reader left', str_starts_with($value, "$uToken:") && $raw->cmd('EXISTS', $holders('doc')) === 0, rl_fmt($value));
rl_same('... W still waits', [1, null], [$raw->cmd('ZCARD', $waiters('doc')), $raw->cmd('ZSCORE', $waiters('doc'), (string) $uToken)]);
$u->send('release');
rl_same('U releases', 'released', $u->readLine(10.0));
rl_same('... then W gets it', 'got', $wr->readLine(10.0));
rl_same('... both exit', [0, 0], [$u->wait(10.0), $wr->wait(10.0)]);

// --- Downgrade: P writes, a reader R then a writer W2 queue; P's acquireRead() lets R in, not W2 ---
$pKey = new Key('page');
$p = $factory->createLockFromKey($pKey, 30.0);
rl_same('P writes "page"', true, $p->acquire());
$pToken = $token($pKey);
$rd = rl_spawn_php($childPrelude . '
$lock = $factory->createLock("page", 30.0);
echo "waiting\n";
$lock->acquireRead(true);
echo "reading\n";
fgets(STDIN);
$lock->release();');
rl_same('R (another process) waits to read', 'waiting', $rd->readLine(10.0));
rl_ok('... queued', rl_wait_until(fn () => $raw->cmd('ZCARD', $waiters('page')) === 1, 10.0));
$w2 = rl_spawn_php($childPrelude . '
$lock = $factory->createLock("page", 30.0);
echo "waiting\n";
$lock->acquire(true);
echo "got\n";
$lock->release();');
rl_same('W2 (another process) waits to write', 'waiting', $w2->readLine(10.0));
rl_ok('... queued behind R', rl_wait_until(fn () => $raw->cmd('ZCARD', $waiters('page')) === 2, 10.0));
rl_same('P downgrades: acquireRead() on its write lock', true, $p->acquireRead());
rl_same('... with its token', $pToken, $token($pKey));
rl_same('... R, first in line, reads with P at once', 'reading', $rd->readLine(10.0));
rl_same('... two readers, no writer, W2 still waits', [2, 0, 1],
    [$raw->cmd('ZCARD', $holders('page')), $raw->cmd('EXISTS', $lockKey('page')), $raw->cmd('ZCARD', $waiters('page'))]);
rl_ok('... P\'s read hold has the Lock\'s ttl', ($readLeases('page')[$pToken] ?? 0) > 28.0, rl_fmt($readLeases('page')));
rl_same('a reader arriving now waits behind W2: acquireRead() false', false, $factory->createLock('page', 30.0)->acquireRead());
$p->release();
$rd->send('release');
rl_same('P and R release: W2 gets it', 'got', $w2->readLine(10.0));
rl_same('... both exit', [0, 0], [$rd->wait(10.0), $w2->wait(10.0)]);

// --- A Key serialized with an autoRelease: false read lock, upgraded in another process ---
$child = rl_spawn_php($childPrelude . '
$key = new Symfony\Component\Lock\Key("report");
$lock = $factory->createLockFromKey($key, 30.0, false);
echo $lock->acquireRead() ? base64_encode(serialize($key)) : "busy", "\n";');
$serialized = (string) $child->readLine(10.0);
rl_same('a process reads "report" (autoRelease: false) and exits', 0, $child->wait(10.0));
rl_same('... its read lock lives on', 1, $raw->cmd('ZCARD', $holders('report')));
$key = unserialize(base64_decode($serialized));
$moved = $factory->createLockFromKey($key, 30.0, false);
rl_same('isAcquired() with its Key here', true, $moved->isAcquired());
$readToken = $token($key);
rl_same('acquire() with it upgrades (no other reader)', true, $moved->acquire());
rl_ok('... the same token now writes alone',
    str_starts_with((string) $raw->cmd('GET', $lockKey('report')), "$readToken:") && $raw->cmd('EXISTS', $holders('report')) === 0);
rl_same('acquireRead() with it downgrades again', [true, 0, 1], [$moved->acquireRead(), $raw->cmd('EXISTS', $lockKey('report')), $raw->cmd('ZCARD', $holders('report'))]);
$moved->release();
rl_same('release(): nothing left', [0, 0], [$raw->cmd('EXISTS', $lockKey('report')), $raw->cmd('EXISTS', $holders('report'))]);

// --- An expired read lock ---
$shortKey = new Key('short');
$short = $factory->createLockFromKey($shortKey, 1.0);
rl_same('a read lock with a 1 s ttl', true, $short->acquireRead());
$expiredToken = $token($shortKey);
rl_ok('... its hold ends in Redis by itself', rl_wait_until(fn () => !$short->isAcquired(), 10.0));
// Redis drops the set at the lease's end to the millisecond, which may be just after the check above.
rl_same('... isAcquired() false, no live read hold left', [false, []],
    [$short->isAcquired(), array_filter($readLeases('short'), fn (float $left) => $left > 0)]);
rl_throws('refresh() of it: LockConflictedException', LockConflictedException::class, fn () => $short->refresh(10.0));
rl_same('acquire() afterwards takes the free lock afresh (as Symfony\'s RedisStore), with a new token',
    [true, true], [$short->acquire(), $token($shortKey) !== $expiredToken]);
$short->release();

// --- Bad input, Redis unreachable ---
rl_throws('acquireRead() of an empty resource: ValueError', ValueError::class, fn () => $factory->createLock('')->acquireRead());
$e = rl_throws('acquireRead() with Redis unreachable: Symfony\'s LockAcquiringException', LockAcquiringException::class,
    fn () => (new LockFactory(new LeaseStore('redis://127.0.0.1:' . rl_free_port())))->createLock('x')->acquireRead());
rl_ok('... caused by the extension\'s ConnectionException', $e?->getPrevious() instanceof RedisLease\ConnectionException,
    rl_fmt($e?->getPrevious()));
echo "done\n";
?>
--EXPECT--
ok: LeaseStore is a BlockingSharedLockStoreInterface (Symfony's Lock uses saveRead/waitAndSaveRead, no polling)
ok: acquireRead() by two Locks of one resource: both hold it
ok: ... two read holds in Redis, no writer
ok: ... each with the Lock's ttl (10 s; saved with the initial 300 s, then put off as Symfony does)
ok: isAcquired() of both
ok: a writer cannot take it: acquire() false
ok: acquireRead() again by a reader: true (extends its own read hold)
ok: refresh(30) of one reader extends its hold only
ok: release() of one reader: the other keeps reading
ok: ... the writer still cannot
ok: release() of the last reader: nothing left
ok: ... the writer can now
ok: ... and no reader meanwhile
ok: P reads "doc"
ok: U (another process) reads it too
ok: W (another process) waits to write
ok: ... queued behind the readers
ok: U upgrades: acquire(true) on its read lock
ok: ... U waits for P to leave, first in line, before W
ok: ... still two readers, no writer, while P reads
ok: a reader arriving now waits (a writer is first in line): acquireRead() false
ok: P's own upgrade, acquire(): false (other readers), P keeps its read lock
ok: P's acquire(true) while U upgrades: LockConflictedException at once (both would wait for ever)
ok: ... P still reads, with its token
ok: P releases: U has upgraded, with the token it read with
ok: ... U writes alone (the lock is its token), no reader left
ok: ... W still waits
ok: U releases
ok: ... then W gets it
ok: ... both exit
ok: P writes "page"
ok: R (another process) waits to read
ok: ... queued
ok: W2 (another process) waits to write
ok: ... queued behind R
ok: P downgrades: acquireRead() on its write lock
ok: ... with its token
ok: ... R, first in line, reads with P at once
ok: ... two readers, no writer, W2 still waits
ok: ... P's read hold has the Lock's ttl
ok: a reader arriving now waits behind W2: acquireRead() false
ok: P and R release: W2 gets it
ok: ... both exit
ok: a process reads "report" (autoRelease: false) and exits
ok: ... its read lock lives on
ok: isAcquired() with its Key here
ok: acquire() with it upgrades (no other reader)
ok: ... the same token now writes alone
ok: acquireRead() with it downgrades again
ok: release(): nothing left
ok: a read lock with a 1 s ttl
ok: ... its hold ends in Redis by itself
ok: ... isAcquired() false, no live read hold left
ok: refresh() of it: LockConflictedException
ok: acquire() afterwards takes the free lock afresh (as Symfony's RedisStore), with a new token
ok: acquireRead() of an empty resource: ValueError
ok: acquireRead() with Redis unreachable: Symfony's LockAcquiringException
ok: ... caused by the extension's ConnectionException
done
