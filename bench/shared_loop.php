<?php
// Scenario 7: a read lock or a semaphore of 3 permits, taken and released in a loop in one process.
// argv: lib (lease_read|symfony_read|lease_sem|symfony_sem), n. BENCH_REDIS (host:port) is the Redis.
[$_, $lib, $n] = $argv;
$n = (int) $n;
$key = "bench:shared:$lib";
[$host, $port] = explode(':', getenv('BENCH_REDIS'));
$phpredis = static function () use ($host, $port): Redis {
    $r = new Redis();
    $r->connect($host, (int) $port);
    return $r;
};
switch ($lib) {
    case 'lease_read':
        $lock = new DistributedLock($key, 30.0, "redis://$host:$port");
        $op = function () use ($lock) { $lock->acquireRead(); $lock->release(); };
        break;
    case 'lease_sem':
        $sem = new DistributedSemaphore($key, 3, 30.0, "redis://$host:$port");
        $op = function () use ($sem) { $sem->acquire(); $sem->release(); };
        break;
    case 'symfony_read':
        // Symfony Lock 5.4's RedisStore is a SharedLockStoreInterface: acquireRead() is its saveRead().
        require '/usr/share/php/Symfony/Component/Lock/autoload.php';
        $lock = (new Symfony\Component\Lock\LockFactory(new Symfony\Component\Lock\Store\RedisStore($phpredis())))
            ->createLock($key, 30.0);
        $op = function () use ($lock) { $lock->acquireRead(); $lock->release(); };
        break;
    case 'symfony_sem':
        require '/usr/share/php/Symfony/Component/Semaphore/autoload.php';
        $sem = (new Symfony\Component\Semaphore\SemaphoreFactory(new Symfony\Component\Semaphore\Store\RedisStore($phpredis())))
            ->createSemaphore($key, 3, 1, 30.0);
        $op = function () use ($sem) { $sem->acquire(); $sem->release(); };
        break;
    default:
        fwrite(STDERR, "unknown lib $lib\n");
        exit(2);
}
for ($i = 0; $i < 200; $i++) {
    $op(); // warm-up: connections, script caches
}
$t = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $op();
}
echo json_encode(['ops_per_s' => $n / ((hrtime(true) - $t) / 1e9)]);
