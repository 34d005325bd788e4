--TEST--
Bridge, Symfony Semaphore on LeaseSemaphoreStore (Debian's Symfony 5.4 SemaphoreFactory): limit 3 with 4 processes (the fourth refused until a release), each permit a lease with the Semaphore's ttl, refresh(), isAcquired(), release(), autoRelease, a killed holder's permit free within its ttl, a lost permit; a permit outliving its Key (autoRelease: false) and carried to another process by a serialized Key; weights (a Key of weight 2 takes 2 permits as one hold), bad ttls and limits, an unreachable Redis refused clearly, a DSN's password in no trace
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Symfony/Component/Semaphore/autoload.php';
require BR_BRIDGE . '/autoload.php';

use RedisLease\Bridge\Symfony\LeaseSemaphoreStore;
use Symfony\Component\Semaphore\Exception\InvalidArgumentException;
use Symfony\Component\Semaphore\Exception\RuntimeException as SemaphoreRuntimeException;
use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\SemaphoreFactory;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$store = new LeaseSemaphoreStore($dsn);
$factory = new SemaphoreFactory($store);
$permits = fn (string $name) => rl_lock_key($name) . ':semaphore:holders';
$permitLeases = fn (string $name) => array_values(br_shared_leases($raw, $permits($name)));
$childPrelude = 'require "Symfony/Component/Semaphore/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $factory = new Symfony\Component\Semaphore\SemaphoreFactory(new RedisLease\Bridge\Symfony\LeaseSemaphoreStore(' . rl_export($dsn) . '));';

// --- Limit 3: three processes hold a permit each, the fourth is refused until one releases ---
$holders = [];
for ($i = 1; $i <= 3; $i++) {
    $holders[$i] = rl_spawn_php($childPrelude . '
$semaphore = $factory->createSemaphore("api", 3, 1, 30.0);
echo $semaphore->acquire() ? "got" : "busy", "\n";
fgets(STDIN);
$semaphore->release();
echo $semaphore->isAcquired() ? "still held" : "released", "\n";');
    rl_same("process $i of 3 acquires a permit of \"api\" (limit 3)", 'got', $holders[$i]->readLine(10.0));
}
rl_same('... three permits in Redis', 3, $raw->cmd('ZCARD', $permits('api')));
$fourth = $factory->createSemaphore('api', 3, 1, 30.0);
rl_same('a fourth process: acquire() false', false, $fourth->acquire());
rl_same('... isAcquired() false, still three permits', [false, 3], [$fourth->isAcquired(), $raw->cmd('ZCARD', $permits('api'))]);
rl_throws('the store\'s save() itself: SemaphoreAcquiringException', SemaphoreAcquiringException::class,
    fn () => $store->save(new Key('api', 3), 30.0));
$holders[2]->send('release');
rl_same('process 2 releases', 'released', $holders[2]->readLine(10.0));
rl_same('... the fourth gets its permit now', [true, true, 3], [$fourth->acquire(), $fourth->isAcquired(), $raw->cmd('ZCARD', $permits('api'))]);
rl_same('acquire() again while holding: true, no second permit', [true, 3], [$fourth->acquire(), $raw->cmd('ZCARD', $permits('api'))]);
$holders[1]->send('release');
$holders[3]->send('release');
rl_same('the others release and exit', ['released', 'released', 0, 0],
    [$holders[1]->readLine(10.0), $holders[3]->readLine(10.0), $holders[1]->wait(10.0), $holders[3]->wait(10.0)]);
$fourth->release();
rl_same('... release() of the last: nothing left', [false, 0], [$fourth->isAcquired(), $raw->cmd('EXISTS', $permits('api'))]);

// --- A permit is a lease: the Semaphore's ttl, refresh(), release ---
$lease = $factory->createSemaphore('lease', 2, 1, 10.0);
$lease->acquire();
$left = $permitLeases('lease');
rl_ok('a permit has the Semaphore\'s ttl (10 s)', count($left) === 1 && $left[0] > 8.0 && $left[0] <= 10.0, rl_fmt($left));
$lease->refresh(40.0);
$left = $permitLeases('lease');
rl_ok('refresh(40) extends it', count($left) === 1 && $left[0] > 38.0 && $left[0] <= 40.0, rl_fmt($left));
$lease->release();
rl_same('release(): gone', [false, 0], [$lease->isAcquired(), $raw->cmd('EXISTS', $permits('lease'))]);
rl_throws('refresh() after release(): SemaphoreExpiredException', SemaphoreExpiredException::class, fn () => $lease->refresh());

// --- autoRelease, and a permit that outlives its Key (its token carried elsewhere) ---
$auto = $factory->createSemaphore('auto', 1, 1, 30.0);
$auto->acquire();
unset($auto);
rl_same('autoRelease (the default): released when the Semaphore goes', 0, $raw->cmd('EXISTS', $permits('auto')));
$key = new Key('kept', 1);
$kept = $factory->createSemaphoreFromKey($key, 30.0, false);
$kept->acquire();
$carried = serialize($key);
unset($kept, $key);
rl_same('autoRelease: false: kept when the Semaphore and its Key go', 1, $raw->cmd('ZCARD', $permits('kept')));
$elsewhere = rl_spawn_php($childPrelude . '
$key = unserialize(' . var_export($carried, true) . ');
$semaphore = $factory->createSemaphoreFromKey($key, 30.0, false);
echo $semaphore->isAcquired() ? "held" : "not held", "\n";
$semaphore->release();
echo $semaphore->isAcquired() ? "held" : "released", "\n";');
rl_same('... a serialized Key carries it to another process', 'held', $elsewhere->readLine(10.0));
rl_same('... which releases it by its token', 'released', $elsewhere->readLine(10.0));
rl_same('... and it is gone', 0, $raw->cmd('EXISTS', $permits('kept')));
$elsewhere->wait(10.0);

// --- A killed holder's permit is free within its ttl ---
$crash = rl_spawn_php($childPrelude . '
$semaphore = $factory->createSemaphore("crash", 1, 1, 5.0);
echo $semaphore->acquire() ? "got" : "busy", "\n";
sleep(60); // the holder\'s work, cut short by SIGKILL');
rl_same('a process holds the only permit of "crash" (ttl 5 s)', 'got', $crash->readLine(10.0));
$acquiredBy = microtime(true);
$crash->kill();
$crash->wait(10.0);
$mine = $factory->createSemaphore('crash', 1, 1, 30.0);
rl_same('killed: its permit is not freed by the kill', false, $mine->acquire());
rl_ok('... but at its ttl', rl_wait_until(fn () => $mine->acquire(), 15.0));
$freedAfter = microtime(true) - $acquiredBy;
rl_ok('... within 5 s of its acquire (and some slack)', $freedAfter <= 6.5, sprintf('%.3f s', $freedAfter));
$mine->release();

// --- A lost permit, keys that hold none ---
$lostKey = new Key('lost', 1);
$lost = $factory->createSemaphoreFromKey($lostKey, 1.0);
rl_same('a permit with a 1 s ttl', true, $lost->acquire());
rl_ok('... ends in Redis by itself', rl_wait_until(fn () => !$lost->isAcquired(), 10.0));
rl_throws('refresh() of it: SemaphoreExpiredException', SemaphoreExpiredException::class, fn () => $lost->refresh(10.0));
rl_same('exists() of a Key never saved: false', false, $store->exists(new Key('never', 1)));
rl_throws('putOffExpiration() of a Key never saved: SemaphoreExpiredException', SemaphoreExpiredException::class,
    fn () => $store->putOffExpiration(new Key('never', 1), 10.0));
$store->delete(new Key('never', 1));
rl_same('delete() of a Key never saved: nothing', 0, $raw->cmd('EXISTS', $permits('never')));

// --- Weights: a Key of weight 2 takes 2 permits at once, as one hold ---
$heavy = $factory->createSemaphore('heavy', 3, 2);
rl_same('a Semaphore of weight 2 (limit 3) acquires', true, $heavy->acquire());
rl_same('... one hold in Redis, weighing 2', [1, '2'], [$raw->cmd('ZCARD', $permits('heavy')),
    $raw->cmd('HGET', rl_lock_key('heavy') . ':semaphore:weights', $raw->cmd('ZRANGE', $permits('heavy'), 0, 0)[0] ?? '')]);
$heavy2 = $factory->createSemaphore('heavy', 3, 2);
rl_same('another of weight 2 does not fit', false, $heavy2->acquire());
$light = $factory->createSemaphore('heavy', 3, 1);
rl_same('one of weight 1 does', true, $light->acquire());
$heavy->release();
rl_same('after the first releases, the other of weight 2 fits', true, $heavy2->acquire());
$heavy2->release();
$light->release();
rl_same('... and all is free', 0, $raw->cmd('EXISTS', $permits('heavy')));

// --- Bad input ---
rl_throws('save() with a ttl of 0: InvalidArgumentException', InvalidArgumentException::class, fn () => $store->save(new Key('zero', 1), 0.0));
rl_throws('putOffExpiration() with a negative ttl: InvalidArgumentException', InvalidArgumentException::class,
    fn () => $store->putOffExpiration(new Key('zero', 1), -1.0));
rl_throws('a limit above the extension\'s (1000000): ValueError', ValueError::class, fn () => $factory->createSemaphore('huge', 2000000)->acquire());
rl_throws('an empty resource: ValueError', ValueError::class, fn () => $factory->createSemaphore('', 1)->acquire());
$e = rl_throws('Redis unreachable: Symfony\'s RuntimeException', SemaphoreRuntimeException::class,
    fn () => (new SemaphoreFactory(new LeaseSemaphoreStore('redis://:s3cret@127.0.0.1:' . rl_free_port())))->createSemaphore('x', 1)->acquire());
rl_ok('... caused by the extension\'s ConnectionException', $e?->getPrevious() instanceof RedisLease\ConnectionException, rl_fmt($e?->getPrevious()));
$traces = '';
for ($t = $e; $t !== null; $t = $t->getPrevious()) {
    $traces .= $t->getMessage() . print_r($t->getTrace(), true) . $t->getTraceAsString();
}
rl_ok('... the DSN\'s password in no message or trace', $traces !== '' && !str_contains($traces, 's3cret'), $traces);
echo "done\n";
?>
--EXPECT--
ok: process 1 of 3 acquires a permit of "api" (limit 3)
ok: process 2 of 3 acquires a permit of "api" (limit 3)
ok: process 3 of 3 acquires a permit of "api" (limit 3)
ok: ... three permits in Redis
ok: a fourth process: acquire() false
ok: ... isAcquired() false, still three permits
ok: the store's save() itself: SemaphoreAcquiringException
ok: process 2 releases
ok: ... the fourth gets its permit now
ok: acquire() again while holding: true, no second permit
ok: the others release and exit
ok: ... release() of the last: nothing left
ok: a permit has the Semaphore's ttl (10 s)
ok: refresh(40) extends it
ok: release(): gone
ok: refresh() after release(): SemaphoreExpiredException
ok: autoRelease (the default): released when the Semaphore goes
ok: autoRelease: false: kept when the Semaphore and its Key go
ok: ... a serialized Key carries it to another process
ok: ... which releases it by its token
ok: ... and it is gone
ok: a process holds the only permit of "crash" (ttl 5 s)
ok: killed: its permit is not freed by the kill
ok: ... but at its ttl
ok: ... within 5 s of its acquire (and some slack)
ok: a permit with a 1 s ttl
ok: ... ends in Redis by itself
ok: refresh() of it: SemaphoreExpiredException
ok: exists() of a Key never saved: false
ok: putOffExpiration() of a Key never saved: SemaphoreExpiredException
ok: delete() of a Key never saved: nothing
ok: a Semaphore of weight 2 (limit 3) acquires
ok: ... one hold in Redis, weighing 2
ok: another of weight 2 does not fit
ok: one of weight 1 does
ok: after the first releases, the other of weight 2 fits
ok: ... and all is free
ok: save() with a ttl of 0: InvalidArgumentException
ok: putOffExpiration() with a negative ttl: InvalidArgumentException
ok: a limit above the extension's (1000000): ValueError
ok: an empty resource: ValueError
ok: Redis unreachable: Symfony's RuntimeException
ok: ... caused by the extension's ConnectionException
ok: ... the DSN's password in no message or trace
done
