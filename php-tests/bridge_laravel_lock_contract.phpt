--TEST--
Bridge, Laravel lock contract (Debian's Laravel 8.83 in the CLI, and the calls Laravel 10-12 make): seconds > 0, seconds = 0 with a callback (renewed, freed soon after a crash) and without (the finite unbounded_ttl); block() waits for the holder and times out with LockTimeoutException; a lock taken by another process is restored and released; refresh(), isOwnedBy(), a given owner (Cache::funnel()); ShouldBeUnique, WithoutOverlapping and the scheduler's mutexes through the store; value methods delegated to the values store or refused by name; bad configuration refused
--SKIPIF--
<?php require __DIR__ . '/bridge-app/skipif.inc'; ?>
--INI--
extension=mbstring
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Illuminate/autoload.php';
require BR_BRIDGE . '/autoload.php';

use Illuminate\Container\Container;
use Illuminate\Contracts\Cache\LockTimeoutException;
use RedisLease\Bridge\Laravel\LeaseStore;
use RedisLease\Bridge\Laravel\RedisLeaseServiceProvider;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$key = fn (string $name) => rl_lock_key("ct:$name");
$pttl = fn (string $name) => $raw->cmd('PTTL', $key($name));

// A container with Laravel's cache provider and the bridge's, as an application has them.
$app = new Container();
Container::setInstance($app);
$app->instance('config', new Illuminate\Config\Repository(['cache' => [
    'default' => 'leases',
    'prefix' => 'ct',
    'stores' => [
        'leases' => ['driver' => 'redis_lease', 'dsn' => $dsn, 'values' => 'array', 'unbounded_ttl' => 120, 'renew_ttl' => 0.6],
        'bare' => ['driver' => 'redis_lease', 'dsn' => $dsn],
        'bad' => ['driver' => 'redis_lease', 'dsn' => $dsn, 'renew_ttl' => 0],
        'array' => ['driver' => 'array'],
    ],
]]));
(new Illuminate\Cache\CacheServiceProvider($app))->register();
(new RedisLeaseServiceProvider($app))->register();
$app->alias('cache', Illuminate\Contracts\Cache\Factory::class);
$app->alias('cache.store', Illuminate\Contracts\Cache\Repository::class);
$cache = $app['cache'];
$leases = $cache->store('leases');
/** Code for a child process: the frameworks, the bridge, and a store like "leases". */
$childPrelude = 'require "Illuminate/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $store = new RedisLease\Bridge\Laravel\LeaseStore(' . rl_export($dsn) . ', "ct:", 120.0, 0.6);';

// --- seconds ---
$l = $leases->lock('pos', 5);
rl_same('owner() before taking the lock: null (the token is the owner)', null, $l->owner());
rl_same('get() with seconds = 5 takes it', true, $l->get());
rl_ok('owner() is then its token', (bool) preg_match('/^[0-9a-f]{32}$/', (string) $l->owner()), rl_fmt($l->owner()));
rl_ok('... with a 5 s lease', $pttl('pos') > 4900 && $pttl('pos') <= 5000, rl_fmt($pttl('pos')));
unset($l);
rl_same('the hold outlives its object (a Laravel lock does)', 1, $raw->cmd('EXISTS', $key('pos')));
rl_same('another lock() of the name cannot take it', false, $leases->lock('pos', 5)->get());

$l = $leases->lock('zero');
rl_same('get() with seconds = 0 (Laravel: "no expiry") takes it', true, $l->get());
rl_ok('... for unbounded_ttl (120 s), not forever', $pttl('zero') > 119000 && $pttl('zero') <= 120000, rl_fmt($pttl('zero')));
rl_same('release() frees it', true, $l->release());
rl_same('... a second release(): false', false, $l->release());

$seen = [];
$result = $leases->lock('cb')->get(function () use (&$seen, $pttl, $leases) {
    $seen['ttl_at_start'] = $pttl('cb');
    usleep(1500000); // the callback's work: longer than two of its 0.6 s leases
    $seen['ttl_after_1.5s'] = $pttl('cb');
    $seen['free'] = $leases->lock('cb')->get();
    return 'result';
});
rl_same('seconds = 0 with a callback: get() returns the callback\'s result', 'result', $result);
rl_ok('... held with a short lease (renew_ttl = 0.6 s)', $seen['ttl_at_start'] > 0 && $seen['ttl_at_start'] <= 600, rl_fmt($seen['ttl_at_start']));
rl_ok('... renewed while the callback runs (still held after 1.5 s)', $seen['ttl_after_1.5s'] > 0, rl_fmt($seen['ttl_after_1.5s']));
rl_same('... nobody else could take it meanwhile', false, $seen['free']);
rl_same('... released when the callback returns', 0, $raw->cmd('EXISTS', $key('cb')));
rl_throws('an exception in the callback comes through', RuntimeException::class,
    fn () => $leases->lock('cb')->block(1, fn () => throw new RuntimeException('boom')));
rl_same('... and the lock is released', 0, $raw->cmd('EXISTS', $key('cb')));

$child = rl_spawn_php($childPrelude . '
$store->lock("crash")->get(function () { echo "holding\n"; sleep(60); });');
rl_same('a process holds a seconds = 0 lock in a callback', 'holding', $child->readLine(10.0));
$child->kill();
$t = microtime(true);
rl_ok('killed, its lock is free within about renew_ttl (not kept forever)', rl_wait_until(fn () => $raw->cmd('EXISTS', $key('crash')) === 0, 5.0, 0.01));
rl_ok('... within 1 s', microtime(true) - $t < 1.0, sprintf('%.3f s', microtime(true) - $t));

// --- block() ---
$child = rl_spawn_php($childPrelude . '
$l = $store->lock("blk", 10); $l->get(); echo "holding\n"; usleep(300000); $l->release(); echo "released\n";');
rl_same('another process holds "blk" (300 ms of work)', 'holding', $child->readLine(10.0));
$t = microtime(true);
rl_same('block(5) waits and gets it when the holder releases', true, $leases->lock('blk', 10)->block(5));
$waited = microtime(true) - $t;
rl_ok('... after the release, not at a polling interval (0.1-1 s)', $waited > 0.1 && $waited < 1.0, sprintf('%.3f s', $waited));
rl_same('... the holder did release', 'released', $child->readLine(5.0));
$t = microtime(true);
rl_throws('block(1) on a held lock: LockTimeoutException', LockTimeoutException::class, fn () => $leases->lock('blk', 10)->block(1));
rl_ok('... after 1 s', microtime(true) - $t >= 1.0 && microtime(true) - $t < 1.5, sprintf('%.3f s', microtime(true) - $t));
rl_same('block() with a callback returns its result', 42, $leases->lock('blk2', 10)->block(1, fn () => 42));

// --- another process's lock: restoreLock(), refresh(), isOwnedBy() ---
$child = rl_spawn_php($childPrelude . '
$l = $store->lock("job", 30); echo $l->get() ? $l->owner() : "busy", "\n";');
$owner = (string) $child->readLine(10.0);
rl_same('a process takes "job" and exits', 0, $child->wait(10.0));
rl_ok('... the lock lives on', $pttl('job') > 28000, rl_fmt($pttl('job')));
$restored = $leases->restoreLock('job', $owner);
rl_same('restoreLock($name, $owner)->owner()', $owner, $restored->owner());
rl_same('isOwnedBy($owner) (Laravel 11+)', true, $restored->isOwnedBy($owner));
rl_same('isOwnedBy(another token)', false, $restored->isOwnedBy(str_repeat('0', 32)));
rl_same('isLocked() (Laravel 13), on any lock object of that name', true, $leases->lock('job', 10)->isLocked());
rl_same('refresh(60) (Laravel 12) extends it', true, $restored->refresh(60));
rl_ok('... to 60 s', $pttl('job') > 59000, rl_fmt($pttl('job')));
rl_same('... and the hold stays after the restored object goes', 1, $raw->cmd('EXISTS', $key('job')));
rl_same('refresh() without seconds: the lease of a restored lock, unbounded_ttl', true, $leases->restoreLock('job', $owner)->refresh());
rl_ok('... 120 s, never "no expiry"', $pttl('job') > 119000 && $pttl('job') <= 120000, rl_fmt($pttl('job')));
rl_same('release() in this process', true, $restored->release());
rl_same('... it is free', 0, $raw->cmd('EXISTS', $key('job')));
rl_same('isOwnedBy($owner) afterwards: false', false, $restored->isOwnedBy($owner));
rl_same('isLocked() afterwards: false', false, $restored->isLocked());
rl_same('refresh() of a released lock: false', false, $restored->refresh(10));
// An owner that is not a token (Laravel's own random one, in a ShouldBeUnique job queued before the
// store was switched) names no hold: false, as Laravel's own locks say, never a ValueError (the job,
// run already, would fail at its lock's release and run again).
$taken = $leases->lock('job', 30);
rl_same('"job" taken again', true, $taken->get());
$foreign = $leases->restoreLock('job', 'abcdefghijklmnop');
rl_same('restoreLock() with an owner that is not a token: release() false', false, $foreign->release());
rl_same('... refresh() false', false, $foreign->refresh(60));
rl_same('... isOwnedBy() false', false, $foreign->isOwnedBy('abcdefghijklmnop'));
rl_same('... and the hold is untouched', true, $taken->isOwnedBy($taken->owner()));
rl_same('isOwnedBy() of a foreign owner on the holder: false', false, $taken->isOwnedBy('my-owner'));
rl_same('the holder releases it', true, $taken->release());

// Cache::funnel() (Laravel 12) gives its own owner and calls acquire(), then release() on the same object.
$slot = $leases->lock('slot1', 60, 'funnel-id');
rl_same('a lock given an owner: acquire() takes it', true, $slot->acquire());
rl_ok('... owner() is the token then', (bool) preg_match('/^[0-9a-f]{32}$/', (string) $slot->owner()), rl_fmt($slot->owner()));
rl_same('... release() on the same object frees it', true, $slot->release());

// forceRelease(), whoever holds it.
$leases->lock('forced', 30)->get();
$leases->lock('forced')->forceRelease();
rl_same('forceRelease() frees a lock held by another owner', 0, $raw->cmd('EXISTS', $key('forced')));

// --- the Laravel features that take their locks from a store ---
// ShouldBeUnique: Illuminate\Bus\UniqueLock takes "laravel_unique_job:<class><id>" at dispatch, for
// uniqueFor (0: until processed); the worker's CallQueuedHandler force-releases it (uniqueVia() or the
// default store).
class UniqueJob implements Illuminate\Contracts\Queue\ShouldBeUnique
{
    public $uniqueId = '7';
}
$unique = new Illuminate\Bus\UniqueLock($app->make(Illuminate\Contracts\Cache\Repository::class));
// The lock's name as this Laravel makes it (8.83: "<class><id>" inline; 10-12 getKey(); 13 "<class>:<id>").
$uniqueKey = 'laravel_unique_job:UniqueJob7';
if (method_exists(Illuminate\Bus\UniqueLock::class, 'getKey')) {
    $getKey = new ReflectionMethod(Illuminate\Bus\UniqueLock::class, 'getKey');
    $getKey->setAccessible(true);
    $uniqueKey = $getKey->isStatic() ? $getKey->invoke(null, new UniqueJob()) : $getKey->invoke($unique, new UniqueJob());
}
rl_same('ShouldBeUnique: the first dispatch takes the unique lock', true, $unique->acquire(new UniqueJob()));
rl_same('... a second dispatch does not', false, $unique->acquire(new UniqueJob()));
rl_ok('... uniqueFor = 0 lives unbounded_ttl (120 s), not forever', $pttl($uniqueKey) > 119000, rl_fmt($pttl($uniqueKey)));
$handler = new Illuminate\Queue\CallQueuedHandler(new Illuminate\Bus\Dispatcher($app), $app);
(new ReflectionMethod($handler, 'ensureUniqueJobLockIsReleased'))->invoke($handler, new UniqueJob());
rl_same('... the worker\'s release (CallQueuedHandler) frees it', 0, $raw->cmd('EXISTS', $key($uniqueKey)));
rl_same('... so it can be dispatched again', true, $unique->acquire(new UniqueJob()));

// WithoutOverlapping job middleware: the default store's lock around the job; a job that finds it held is
// released back to the queue.
class OverlapJob
{
    public $releasedWith = null;

    public function release($delay)
    {
        $this->releasedWith = $delay;
    }
}
$mw = new Illuminate\Queue\Middleware\WithoutOverlapping('order-1');
$inside = null;
$mw->handle($job = new OverlapJob(), function () use (&$inside, $pttl) {
    $inside = $pttl('laravel-queue-overlap:OverlapJob:order-1');
});
rl_ok('WithoutOverlapping: the job ran holding the lock (expireAfter 0: unbounded_ttl)', $inside > 119000, rl_fmt($inside));
rl_same('... released after the job', 0, $raw->cmd('EXISTS', $key('laravel-queue-overlap:OverlapJob:order-1')));
$leases->lock('laravel-queue-overlap:OverlapJob:order-1', 30)->get();
$ran = false;
$mw->handle($job = new OverlapJob(), function () use (&$ran) {
    $ran = true;
});
rl_same('... with the lock held elsewhere, the job does not run and is released back', [false, 0], [$ran, $job->releasedWith]);

// The scheduler on Laravel 8.83-9 (withoutOverlapping, onOneServer) and 10 (onOneServer) keeps its
// mutexes as cache values (add/has/forget): they go to the values store.
$event = new Illuminate\Console\Scheduling\Event(new Illuminate\Console\Scheduling\CacheEventMutex($cache), 'report');
$eventMutex = (new Illuminate\Console\Scheduling\CacheEventMutex($cache))->useStore('leases');
rl_same('8.83 withoutOverlapping(): create() through the values store', true, $eventMutex->create($event));
rl_same('... exists()', true, $eventMutex->exists($event));
rl_same('... a second create() fails', false, $eventMutex->create($event));
$eventMutex->forget($event);
rl_same('... forget()', false, $eventMutex->exists($event));
$serverMutex = (new Illuminate\Console\Scheduling\CacheSchedulingMutex($cache))->useStore('leases');
$now = new DateTimeImmutable();
rl_same('8.83 onOneServer(): the first server runs it', true, $serverMutex->create($event, $now));
rl_same('... the second does not', false, $serverMutex->create($event, $now));
// Laravel 10-12 CacheEventMutex / 11-12 CacheSchedulingMutex, on a store that is a LockProvider: these calls.
$store = $cache->store('leases')->getStore();
$name = $event->mutexName();
rl_same('10-12 withoutOverlapping(): create() = lock($name, expiresAt * 60)->acquire()', true, $store->lock($name, 1440 * 60)->acquire());
rl_same('... exists() = !lock(...)->get(fn () => true): true while held', true, !$store->lock($name, 1440 * 60)->get(fn () => true));
$store->lock($name, 1440 * 60)->forceRelease();
rl_same('... forget() = lock(...)->forceRelease(): exists() false after it', false, !$store->lock($name, 1440 * 60)->get(fn () => true));
rl_same('11-12 onOneServer(): lock($name . "Hi", 3600)->acquire() once per minute and event', [true, false],
    [$store->lock($name . '1200', 3600)->acquire(), $store->lock($name . '1200', 3600)->acquire()]);

// --- cache values ---
rl_same('values: put() and get() go to the values store', [true, 'v'], [$leases->put('a', 'v', 60), $leases->get('a')]);
rl_same('... add() through the values store', [false, true], [$leases->add('a', 'w', 60), $leases->add('b', 'w', 60)]);
$e = rl_throws('a store without values: get() refused', BadMethodCallException::class, fn () => $cache->store('bare')->get('a'));
rl_ok('... the message names the method and the option', $e !== null && str_contains($e->getMessage(), 'get()')
    && str_contains($e->getMessage(), "'values'"), $e?->getMessage() ?? '');
rl_same('... its locks work', true, $cache->store('bare')->lock('bare-lock', 5)->get(fn () => true));
$e = rl_throws('renew_ttl = 0: refused when the store is made', InvalidArgumentException::class, fn () => $cache->store('bad'));
rl_ok('... naming the option', $e !== null && str_contains($e->getMessage(), "'renew_ttl'"), $e?->getMessage() ?? '');
rl_throws('an empty lock name: ValueError', ValueError::class, fn () => (new LeaseStore($dsn))->lock('', 5)->get());
echo "done\n";
?>
--EXPECT--
ok: owner() before taking the lock: null (the token is the owner)
ok: get() with seconds = 5 takes it
ok: owner() is then its token
ok: ... with a 5 s lease
ok: the hold outlives its object (a Laravel lock does)
ok: another lock() of the name cannot take it
ok: get() with seconds = 0 (Laravel: "no expiry") takes it
ok: ... for unbounded_ttl (120 s), not forever
ok: release() frees it
ok: ... a second release(): false
ok: seconds = 0 with a callback: get() returns the callback's result
ok: ... held with a short lease (renew_ttl = 0.6 s)
ok: ... renewed while the callback runs (still held after 1.5 s)
ok: ... nobody else could take it meanwhile
ok: ... released when the callback returns
ok: an exception in the callback comes through
ok: ... and the lock is released
ok: a process holds a seconds = 0 lock in a callback
ok: killed, its lock is free within about renew_ttl (not kept forever)
ok: ... within 1 s
ok: another process holds "blk" (300 ms of work)
ok: block(5) waits and gets it when the holder releases
ok: ... after the release, not at a polling interval (0.1-1 s)
ok: ... the holder did release
ok: block(1) on a held lock: LockTimeoutException
ok: ... after 1 s
ok: block() with a callback returns its result
ok: a process takes "job" and exits
ok: ... the lock lives on
ok: restoreLock($name, $owner)->owner()
ok: isOwnedBy($owner) (Laravel 11+)
ok: isOwnedBy(another token)
ok: isLocked() (Laravel 13), on any lock object of that name
ok: refresh(60) (Laravel 12) extends it
ok: ... to 60 s
ok: ... and the hold stays after the restored object goes
ok: refresh() without seconds: the lease of a restored lock, unbounded_ttl
ok: ... 120 s, never "no expiry"
ok: release() in this process
ok: ... it is free
ok: isOwnedBy($owner) afterwards: false
ok: isLocked() afterwards: false
ok: refresh() of a released lock: false
ok: "job" taken again
ok: restoreLock() with an owner that is not a token: release() false
ok: ... refresh() false
ok: ... isOwnedBy() false
ok: ... and the hold is untouched
ok: isOwnedBy() of a foreign owner on the holder: false
ok: the holder releases it
ok: a lock given an owner: acquire() takes it
ok: ... owner() is the token then
ok: ... release() on the same object frees it
ok: forceRelease() frees a lock held by another owner
ok: ShouldBeUnique: the first dispatch takes the unique lock
ok: ... a second dispatch does not
ok: ... uniqueFor = 0 lives unbounded_ttl (120 s), not forever
ok: ... the worker's release (CallQueuedHandler) frees it
ok: ... so it can be dispatched again
ok: WithoutOverlapping: the job ran holding the lock (expireAfter 0: unbounded_ttl)
ok: ... released after the job
ok: ... with the lock held elsewhere, the job does not run and is released back
ok: 8.83 withoutOverlapping(): create() through the values store
ok: ... exists()
ok: ... a second create() fails
ok: ... forget()
ok: 8.83 onOneServer(): the first server runs it
ok: ... the second does not
ok: 10-12 withoutOverlapping(): create() = lock($name, expiresAt * 60)->acquire()
ok: ... exists() = !lock(...)->get(fn () => true): true while held
ok: ... forget() = lock(...)->forceRelease(): exists() false after it
ok: 11-12 onOneServer(): lock($name . "Hi", 3600)->acquire() once per minute and event
ok: values: put() and get() go to the values store
ok: ... add() through the values store
ok: a store without values: get() refused
ok: ... the message names the method and the option
ok: ... its locks work
ok: renew_ttl = 0: refused when the store is made
ok: ... naming the option
ok: an empty lock name: ValueError
done
