<?php
// Scenario 5, one of the contending processes: lock, 1 ms of work, unlock, $n times.
// lib: lease, symfony, symfony_lease, laravel_lease, laravel_redis, ring (see below).
// Prints one line per hold: asked, got, released (microtime), for the handoff gaps.
[$_, $lib, $port, $n, $me, $all] = $argv + [4 => '0', 5 => '1'];
$key = 'bench:contend';
if ($lib === 'ring') {
    // No lock at all: the platform's floor for a handoff through Redis. The processes pass one
    // token round a ring: each blocks in BLPOP on its own list, and its "release" is one LPUSH
    // onto the next one's (no script, no queue, no fence, no expiry). Process 0 holds first.
    $r = new Redis();
    $r->connect('127.0.0.1', (int) $port);
    $first = (int) $me === 0; // (bench/run.php clears the lists before a run)
    $take = function () use ($r, $key, $me, &$first) {
        if ($first) {
            $first = false;
            return true;
        }
        $popped = $r->blPop(["$key:ring:$me"], 60);
        return is_array($popped) && count($popped) === 2;
    };
    $drop = fn () => $r->lPush("$key:ring:" . (((int) $me + 1) % (int) $all), '1');
} elseif ($lib === 'lease') {
    $lock = new DistributedLock($key, 30.0, "redis://127.0.0.1:$port");
    $take = fn () => $lock->acquire(60.0);
    $drop = function () use (&$lock) {
        return $lock->release();
    };
} elseif ($lib === 'symfony' || $lib === 'symfony_lease') {
    require '/usr/share/php/Symfony/Component/Lock/autoload.php';
    require __DIR__ . '/../bridge/autoload.php';
    if ($lib === 'symfony') {
        $r = new Redis();
        $r->connect('127.0.0.1', (int) $port);
        $store = new Symfony\Component\Lock\Store\RedisStore($r);
    } else {
        $store = new RedisLease\Bridge\Symfony\LeaseStore("redis://127.0.0.1:$port");
    }
    $lock = (new Symfony\Component\Lock\LockFactory($store))->createLock($key, 30.0);
    // Blocking: on RedisStore Symfony polls every 100 ms +- 10 ms; the bridge's store is a
    // BlockingStoreInterface, so it waits in redis_lease's queue.
    $take = fn () => $lock->acquire(true);
    $drop = function () use (&$lock) {
        return $lock->release();
    };
} else {
    // laravel_lease, laravel_redis: Cache::lock($key, 30)->block(60), then release().
    require 'Illuminate/autoload.php';
    require __DIR__ . '/../bridge/autoload.php';
    $store = $lib === 'laravel_lease'
        ? new RedisLease\Bridge\Laravel\LeaseStore("redis://127.0.0.1:$port")
        : new Illuminate\Cache\RedisStore(new Illuminate\Redis\RedisManager(new Illuminate\Container\Container(), 'phpredis',
            ['default' => ['host' => '127.0.0.1', 'port' => (int) $port, 'database' => 0]]));
    $lock = null;
    // Laravel's redis lock polls every 250 ms; the bridge's waits in redis_lease's queue.
    $take = function () use ($store, $key, &$lock) {
        $lock = $store->lock($key, 30);
        return $lock->block(60);
    };
    $drop = function () use (&$lock) {
        return $lock->release();
    };
}
fgets(STDIN); // start together
for ($i = 0; $i < (int) $n; $i++) {
    $asked = microtime(true);
    if (!$take()) {
        exit(1);
    }
    $got = microtime(true);
    usleep(1000);
    $released = microtime(true);
    $drop();
    printf("%.6f %.6f %.6f\n", $asked, $got, $released); // full microseconds
}
