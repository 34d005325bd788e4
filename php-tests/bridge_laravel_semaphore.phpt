--TEST--
Bridge, an at-most-N limiter from Laravel (Debian's Laravel 8.83 in the CLI): Cache::store('leases')->semaphore($name, $limit, $seconds) is a DistributedSemaphore on the store's Redis and prefix; with 2 processes inside, a third is refused (wait 0: LockTimeoutException, funnel()'s failure) or queues and is handed a permit by a release; seconds = 0 is a renew_ttl permit renewed while the callback runs and freed soon after a crash; bad limits refused
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
use RedisLease\Bridge\Laravel\RedisLeaseServiceProvider;
use RedisLease\LockTimeoutException;

$srv = rl_start_redis();
$raw = new RlRaw($srv['port']);
$dsn = $srv['dsn'];
$permits = fn (string $name) => rl_lock_key("sm:$name") . ':semaphore:holders';
$waiters = fn (string $name) => rl_lock_key("sm:$name") . ':semaphore:waiters';
$permitLeases = fn (string $name) => array_values(br_shared_leases($raw, $permits($name)));

$app = new Container();
Container::setInstance($app);
$app->instance('config', new Illuminate\Config\Repository(['cache' => [
    'default' => 'leases',
    'prefix' => 'sm',
    'stores' => [
        'leases' => ['driver' => 'redis_lease', 'dsn' => $dsn, 'renew_ttl' => 0.6],
    ],
]]));
(new Illuminate\Cache\CacheServiceProvider($app))->register();
(new RedisLeaseServiceProvider($app))->register();
$leases = $app['cache']->store('leases');
$childPrelude = 'require "Illuminate/autoload.php"; require ' . rl_export(BR_BRIDGE . '/autoload.php') . ';'
    . ' $store = new RedisLease\Bridge\Laravel\LeaseStore(' . rl_export($dsn) . ', "sm:", 120.0, 0.6);';

$semaphore = $leases->semaphore('exports', 2, 30);
rl_same('Cache::store(\'leases\')->semaphore(): a DistributedSemaphore named with the cache prefix, of the given limit',
    ['DistributedSemaphore', 'sm:exports', 2], [get_class($semaphore), $semaphore->getKey(), $semaphore->getLimit()]);

// Two processes inside, each until told to leave.
$inside = [];
for ($i = 1; $i <= 2; $i++) {
    $inside[$i] = rl_spawn_php($childPrelude . '
$store->semaphore("exports", 2, 30)->synchronized(function () { echo "inside\n"; fgets(STDIN); }, 10);
echo "left\n";');
    rl_same("process $i of 2 is inside", 'inside', $inside[$i]->readLine(10.0));
}
$left = $permitLeases('exports');
rl_ok('... two permits in Redis, each a 30 s lease', count($left) === 2 && min($left) > 25.0 && max($left) <= 30.0, rl_fmt($left));
$ran = false;
rl_throws('a third, not waiting: LockTimeoutException (what funnel()\'s failure callback gets)', LockTimeoutException::class,
    fn () => $leases->semaphore('exports', 2, 30)->synchronized(function () use (&$ran) { $ran = true; }, 0));
rl_same('... its callback did not run', false, $ran);
$third = rl_spawn_php($childPrelude . '
echo "waiting\n";
$store->semaphore("exports", 2, 30)->synchronized(function () { echo "inside\n"; }, 30);');
rl_same('a third process waits', 'waiting', $third->readLine(10.0));
rl_ok('... queued, not polling', rl_wait_until(fn () => $raw->cmd('ZCARD', $waiters('exports')) === 1, 10.0));
$inside[1]->send('leave');
rl_same('one leaves', 'left', $inside[1]->readLine(10.0));
rl_same('... its permit is handed to the waiter', 'inside', $third->readLine(10.0));
$inside[2]->send('leave');
rl_same('... all exit', [0, 0, 0], [$inside[1]->wait(10.0), $inside[2]->wait(10.0), $third->wait(10.0)]);
rl_same('... nothing left', 0, $raw->cmd('EXISTS', $permits('exports')));

// seconds = 0: the store's renew_ttl (0.6 s), renewed while the callback runs.
$renewed = rl_spawn_php($childPrelude . '
$store->semaphore("long", 1, 0)->synchronized(function () {
    echo "inside\n";
    usleep(1500000); // the work: longer than two of its 0.6 s leases
    echo "still\n";
    fgets(STDIN);
}, 10);');
rl_same('seconds = 0: a process is inside', 'inside', $renewed->readLine(10.0));
$left = $permitLeases('long');
rl_ok('... with a renew_ttl permit (0.6 s)', count($left) === 1 && $left[0] <= 0.6, rl_fmt($left));
rl_same('... still held after 1.5 s of work (renewed)', ['still', 1], [$renewed->readLine(10.0), $raw->cmd('ZCARD', $permits('long'))]);
$renewed->kill();
$t = microtime(true);
rl_ok('killed, its permit is free soon', rl_wait_until(fn () => $raw->cmd('EXISTS', $permits('long')) === 0, 10.0));
rl_ok('... within about renew_ttl', microtime(true) - $t < 2.0, sprintf('%.3f s', microtime(true) - $t));

rl_throws('a limit of 0: ValueError', ValueError::class, fn () => $leases->semaphore('bad', 0));
echo "done\n";
?>
--EXPECT--
ok: Cache::store('leases')->semaphore(): a DistributedSemaphore named with the cache prefix, of the given limit
ok: process 1 of 2 is inside
ok: process 2 of 2 is inside
ok: ... two permits in Redis, each a 30 s lease
ok: a third, not waiting: LockTimeoutException (what funnel()'s failure callback gets)
ok: ... its callback did not run
ok: a third process waits
ok: ... queued, not polling
ok: one leaves
ok: ... its permit is handed to the waiter
ok: ... all exit
ok: ... nothing left
ok: seconds = 0: a process is inside
ok: ... with a renew_ttl permit (0.6 s)
ok: ... still held after 1.5 s of work (renewed)
ok: killed, its permit is free soon
ok: ... within about renew_ttl
ok: a limit of 0: ValueError
done
