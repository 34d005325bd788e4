--TEST--
Bridge, Laravel 13's lock API on the redis_lease store (runs where Laravel 13 is: scripts/cells.sh's newest-frameworks pass): isOwnedByCurrentProcess(), isOwnedBy(), isLocked() and refresh() through the Repository; betweenBlockedAttemptsSleepFor() leaves block() a handoff; Cache::withoutOverlapping() holds lockFor and waits waitFor; Cache::funnel() on the store's semaphore (limit, handoff, the failure callback, releaseAfter as the lease, an exception releasing, a bad limit refused), and under php-fpm never more than its limit inside, without polling
--SKIPIF--
<?php
require __DIR__ . '/bridge-app/skipif.inc';
if (stream_resolve_include_path('Illuminate/autoload.php') !== false) {
    require 'Illuminate/autoload.php';
    // In the newest-frameworks pass (RL_FRAMEWORKS set) an older Laravel fails the test instead.
    if (getenv('RL_FRAMEWORKS') === false
        && (!method_exists(Illuminate\Cache\Repository::class, 'funnel') || !method_exists(Illuminate\Cache\Lock::class, 'isLocked'))) {
        echo 'skip needs Laravel 13 (this is Debian\'s ', Illuminate\Foundation\Application::VERSION,
            '); scripts/cells.sh runs it on the newest Laravel Debian serves';
    }
}
?>
--INI--
extension=mbstring
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/bridge-app/harness.inc';
require 'Illuminate/autoload.php';
require BR_BRIDGE . '/autoload.php';

use Illuminate\Cache\Limiters\LimiterTimeoutException;
use Illuminate\Container\Container;
use Illuminate\Contracts\Cache\LockTimeoutException;
use RedisLease\Bridge\Laravel\RedisLeaseServiceProvider;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$key = fn (string $name) => rl_lock_key("nw:$name");
$pttl = fn (string $name) => $raw->cmd('PTTL', $key($name));
$permits = fn (string $name) => $key($name) . ':semaphore:holders';
$waiters = fn (string $name) => $key($name) . ':semaphore:waiters';

$app = new Container();
Container::setInstance($app);
$app->instance('config', new Illuminate\Config\Repository(['cache' => [
    'default' => 'leases',
    'prefix' => 'nw',
    'stores' => [
        'leases' => ['driver' => 'redis_lease', 'dsn' => $dsn, 'unbounded_ttl' => 120, 'renew_ttl' => 0.6],
    ],
]]));
(new Illuminate\Cache\CacheServiceProvider($app))->register();
(new RedisLeaseServiceProvider($app))->register();
$leases = $app['cache']->store('leases');
printf("info: Laravel %s\n", Illuminate\Foundation\Application::VERSION);
// A child process with the store in a Repository of its own, as another worker has it.
$childPrelude = 'require "Illuminate/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $leases = new RedisLease\Bridge\Laravel\LeaseRepository(new RedisLease\Bridge\Laravel\LeaseStore('
    . rl_export($dsn) . ', "nw:", 120.0, 0.6));';

// --- ownership, through the Repository ---
$a = $leases->lock('own', 30);
rl_same('get() takes a lock', true, $a->get());
rl_same('isOwnedByCurrentProcess() on the taker', true, $a->isOwnedByCurrentProcess());
$b = $leases->lock('own', 30);
rl_same('... false on another object of that name', false, $b->isOwnedByCurrentProcess());
rl_same('isOwnedBy(the taker\'s owner) on the other object', true, $b->isOwnedBy($a->owner()));
rl_same('isLocked() on the other object', true, $b->isLocked());
rl_same('restoreLock($name, $owner)->isOwnedByCurrentProcess()', true, $leases->restoreLock('own', $a->owner())->isOwnedByCurrentProcess());
rl_same('refresh(60) extends it', true, $a->refresh(60));
rl_ok('... to 60 s', $pttl('own') > 59000 && $pttl('own') <= 60000, rl_fmt($pttl('own')));
rl_same('release()', true, $a->release());
rl_same('... isLocked() false then', false, $b->isLocked());
rl_same('... isOwnedByCurrentProcess() false then', false, $a->isOwnedByCurrentProcess());
rl_same('refresh() of a released lock: false', false, $a->refresh(60));

// --- betweenBlockedAttemptsSleepFor(): nothing to tune, block() is still a handoff ---
$child = rl_spawn_php($childPrelude . '
$l = $leases->lock("blk", 10); $l->get(); echo "holding\n"; usleep(300000); $l->release(); echo "released\n";');
rl_same('another process holds "blk" (300 ms of work)', 'holding', $child->readLine(10.0));
$l = $leases->lock('blk', 10);
rl_same('betweenBlockedAttemptsSleepFor(5000) returns the lock', $l, $l->betweenBlockedAttemptsSleepFor(5000));
$t = microtime(true);
rl_same('... block(8) gets it when the holder releases', true, $l->block(8));
$waited = microtime(true) - $t;
rl_ok('... at the release, not after a 5 s sleep', $waited > 0.1 && $waited < 1.5, sprintf('%.3f s', $waited));
rl_same('... the holder did release', 'released', $child->readLine(5.0));
$l->release();

// --- Cache::withoutOverlapping($key, $callback, $lockFor, $waitFor) ---
$seen = [];
$result = $leases->withoutOverlapping('job', function () use (&$seen, $pttl, $leases) {
    $seen = ['ttl' => $pttl('job'), 'free' => $leases->lock('job')->get()];
    return 'ran';
}, 30, 2);
rl_same('withoutOverlapping() returns the callback\'s result', 'ran', $result);
rl_ok('... held for lockFor (30 s) meanwhile', $seen['ttl'] > 29000 && $seen['ttl'] <= 30000, rl_fmt($seen['ttl']));
rl_same('... nobody else could take it', false, $seen['free']);
rl_same('... released after', 0, $raw->cmd('EXISTS', $key('job')));
$seen = [];
$leases->withoutOverlapping('job0', function () use (&$seen, $pttl) {
    $seen[] = $pttl('job0');
    usleep(1500000); // the callback's work: longer than two of its 0.6 s leases
    $seen[] = $pttl('job0');
});
rl_ok('lockFor 0: a renew_ttl lease (0.6 s), renewed while the callback runs', $seen[0] > 0 && $seen[0] <= 600 && $seen[1] > 0, rl_fmt($seen));
$child = rl_spawn_php($childPrelude . '
$leases->withoutOverlapping("busy", function () { echo "holding\n"; fgets(STDIN); }, 30, 1);');
rl_same('another process is inside withoutOverlapping("busy")', 'holding', $child->readLine(10.0));
$ran = false;
$t = microtime(true);
rl_throws('... a second one: LockTimeoutException', LockTimeoutException::class,
    fn () => $leases->withoutOverlapping('busy', function () use (&$ran) { $ran = true; }, 30, 1));
$waited = microtime(true) - $t;
rl_ok('... after waitFor (1 s)', $waited >= 1.0 && $waited < 1.5, sprintf('%.3f s', $waited));
rl_same('... its callback did not run', false, $ran);
$child->send('go');
rl_same('... the first one ends', 0, $child->wait(10.0));

// --- Cache::funnel($name): the store's semaphore ---
$inside = [];
for ($i = 1; $i <= 2; $i++) {
    $inside[$i] = rl_spawn_php($childPrelude . '
$leases->funnel("exports")->limit(2)->releaseAfter(30)->block(10)->then(function () { echo "inside\n"; fgets(STDIN); });
echo "left\n";');
    rl_same("funnel: process $i of 2 is inside", 'inside', $inside[$i]->readLine(10.0));
}
$left = array_values(br_shared_leases($raw, $permits('exports')));
rl_ok('... two permits of the semaphore, each a releaseAfter (30 s) lease', count($left) === 2 && min($left) > 25.0 && max($left) <= 30.0, rl_fmt($left));
$ran = false;
$failure = $leases->funnel('exports')->limit(2)->releaseAfter(30)->block(0)
    ->then(function () use (&$ran) { $ran = true; }, fn ($e) => get_class($e));
rl_same('a third with block(0): the failure callback gets LimiterTimeoutException', LimiterTimeoutException::class, $failure);
rl_same('... its callback did not run', false, $ran);
$third = rl_spawn_php($childPrelude . '
echo "waiting\n";
$leases->funnel("exports")->limit(2)->releaseAfter(30)->block(30)->sleep(5000)->then(function () { echo "inside\n"; });');
rl_same('a third process waits (sleep(5000) set)', 'waiting', $third->readLine(10.0));
rl_ok('... queued, not polling', rl_wait_until(fn () => $raw->cmd('ZCARD', $waiters('exports')) === 1, 10.0));
$t = microtime(true);
$inside[1]->send('leave');
rl_same('one leaves', 'left', $inside[1]->readLine(10.0));
rl_same('... its permit is handed to the waiter', 'inside', $third->readLine(10.0));
rl_ok('... at once, not after a 5 s sleep', microtime(true) - $t < 1.5, sprintf('%.3f s', microtime(true) - $t));
$inside[2]->send('leave');
rl_same('... all exit', [0, 0, 0], [$inside[1]->wait(10.0), $inside[2]->wait(10.0), $third->wait(10.0)]);
rl_same('... no permit left', 0, $raw->cmd('EXISTS', $permits('exports')));
rl_same('then() returns the callback\'s result', 42, $leases->funnel('exports')->limit(1)->then(fn () => 42));
rl_throws('an exception in the callback comes through', RuntimeException::class,
    fn () => $leases->funnel('exports')->limit(1)->then(fn () => throw new RuntimeException('boom')));
rl_same('... and its permit is released', 0, $raw->cmd('EXISTS', $permits('exports')));
rl_throws('funnel() without limit(): InvalidArgumentException', InvalidArgumentException::class,
    fn () => $leases->funnel('exports')->then(fn () => 1));

// --- under php-fpm: 24 requests through funnel()->limit(3), each counting itself in and out ---
$pool = br_pool();
$base = br_laravel_base();
$env = ['APP_BASE' => $base, 'APP_SESSION_DRIVER' => 'file', 'APP_LEASE_DSN' => $dsn, 'APP_REDIS_PORT' => $srv['port']];
const N = 24;
foreach (['leases' => 'redis_lease store', 'redis' => 'Laravel\'s redis store (slot locks, polls every 250 ms)'] as $store => $label) {
    // Every worker loads the application first.
    $pool->client()->multi(array_map(fn ($i) => br_laravel_req($env, '/lock/funnel', ['store' => $store, 'limit' => 3, 'work_ms' => 0]), range(1, 8)), 30.0);
    $raw->cmd('CONFIG', 'RESETSTAT');
    $t = microtime(true);
    $rs = $pool->client()->multi(array_map(fn ($i) => br_laravel_req($env, '/lock/funnel', ['store' => $store, 'limit' => 3, 'work_ms' => 30]), range(1, N)), 90.0);
    $wall = microtime(true) - $t;
    $most = max(array_map(fn ($r) => $r->json()['inside'] ?? 0, $rs));
    $stats = rl_cmdstats($raw);
    $scripts = ($stats['fcall'] ?? 0) + ($stats['evalsha'] ?? 0) + ($stats['eval'] ?? 0);
    printf("info: funnel()->limit(3), %d requests of 30 ms, %s: %.3f s, at most %d inside at once, %d scripts, %d SET\n",
        N, $label, $wall, $most, $scripts, $stats['set'] ?? 0);
    if ($store === 'leases') {
        rl_same("$label: every request answered 200", [], br_broken($rs));
        rl_ok("$label: never more than 3 inside at once", $most >= 1 && $most <= 3, "at most $most");
        rl_ok("$label: at most 3 semaphore scripts per request (no polling)", $scripts <= 3 * N, "$scripts scripts");
        rl_same("$label: no permit left", 0, $raw->cmd('EXISTS', $permits('hammer')));
    }
}
echo "done\n";
?>
--EXPECTF--
info: Laravel %s
ok: get() takes a lock
ok: isOwnedByCurrentProcess() on the taker
ok: ... false on another object of that name
ok: isOwnedBy(the taker's owner) on the other object
ok: isLocked() on the other object
ok: restoreLock($name, $owner)->isOwnedByCurrentProcess()
ok: refresh(60) extends it
ok: ... to 60 s
ok: release()
ok: ... isLocked() false then
ok: ... isOwnedByCurrentProcess() false then
ok: refresh() of a released lock: false
ok: another process holds "blk" (300 ms of work)
ok: betweenBlockedAttemptsSleepFor(5000) returns the lock
ok: ... block(8) gets it when the holder releases
ok: ... at the release, not after a 5 s sleep
ok: ... the holder did release
ok: withoutOverlapping() returns the callback's result
ok: ... held for lockFor (30 s) meanwhile
ok: ... nobody else could take it
ok: ... released after
ok: lockFor 0: a renew_ttl lease (0.6 s), renewed while the callback runs
ok: another process is inside withoutOverlapping("busy")
ok: ... a second one: LockTimeoutException
ok: ... after waitFor (1 s)
ok: ... its callback did not run
ok: ... the first one ends
ok: funnel: process 1 of 2 is inside
ok: funnel: process 2 of 2 is inside
ok: ... two permits of the semaphore, each a releaseAfter (30 s) lease
ok: a third with block(0): the failure callback gets LimiterTimeoutException
ok: ... its callback did not run
ok: a third process waits (sleep(5000) set)
ok: ... queued, not polling
ok: one leaves
ok: ... its permit is handed to the waiter
ok: ... at once, not after a 5 s sleep
ok: ... all exit
ok: ... no permit left
ok: then() returns the callback's result
ok: an exception in the callback comes through
ok: ... and its permit is released
ok: funnel() without limit(): InvalidArgumentException
info: funnel()->limit(3), 24 requests of 30 ms, redis_lease store: %f s, at most %d inside at once, %d scripts, %d SET
ok: redis_lease store: every request answered 200
ok: redis_lease store: never more than 3 inside at once
ok: redis_lease store: at most 3 semaphore scripts per request (no polling)
ok: redis_lease store: no permit left
info: funnel()->limit(3), 24 requests of 30 ms, Laravel's redis store (slot locks, polls every 250 ms): %f s, at most %d inside at once, %d scripts, %d SET
done
