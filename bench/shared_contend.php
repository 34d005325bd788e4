<?php
// Scenario 8, one of the contending processes: take, 1 ms of work, release, $n times.
// argv: lib (lease_rw|symfony_rw: a read/write lock, a write hold one time in four, else a read
// hold; lease_sem|symfony_sem: a semaphore of 2 permits), Redis port, n, and this process's number
// (the seed of its read/write draws: both libraries draw the same).
// Prints one line per hold: asked, got, released (microtime), kind (w, r or p), for the handoff gaps.
[$_, $lib, $port, $n, $seed] = $argv;
mt_srand((int) $seed);
$key = "bench:shared-contend:$lib";
$dsn = "redis://127.0.0.1:$port";
$phpredis = static function () use ($port): Redis {
    $r = new Redis();
    $r->connect('127.0.0.1', (int) $port);
    return $r;
};
switch ($lib) {
    case 'lease_rw':
        $lock = new DistributedLock($key, 30.0, $dsn);
        $take = fn (string $kind) => $kind === 'w' ? $lock->acquire(60.0) : $lock->acquireRead(60.0);
        $drop = fn () => $lock->release();
        break;
    case 'symfony_rw':
        require '/usr/share/php/Symfony/Component/Lock/autoload.php';
        $lock = (new Symfony\Component\Lock\LockFactory(new Symfony\Component\Lock\Store\RedisStore($phpredis())))
            ->createLock($key, 30.0);
        // Blocking: RedisStore is no BlockingSharedLockStoreInterface, so both poll every 100 ms +- 10 ms.
        $take = fn (string $kind) => $kind === 'w' ? $lock->acquire(true) : $lock->acquireRead(true);
        $drop = fn () => $lock->release();
        break;
    case 'lease_sem':
        $sem = new DistributedSemaphore($key, 2, 30.0, $dsn);
        $take = fn (string $kind) => $sem->acquire(60.0);
        $drop = fn () => $sem->release();
        break;
    case 'symfony_sem':
        require '/usr/share/php/Symfony/Component/Semaphore/autoload.php';
        $sem = (new Symfony\Component\Semaphore\SemaphoreFactory(new Symfony\Component\Semaphore\Store\RedisStore($phpredis())))
            ->createSemaphore($key, 2, 1, 30.0);
        // Symfony Semaphore 5.4 has no blocking acquire: poll as Symfony Lock's blocking acquire does.
        $take = function (string $kind) use ($sem): bool {
            while (!$sem->acquire()) {
                usleep((100 + random_int(-10, 10)) * 1000);
            }
            return true;
        };
        $drop = fn () => $sem->release();
        break;
    default:
        fwrite(STDERR, "unknown lib $lib\n");
        exit(2);
}
fgets(STDIN); // start together
for ($i = 0; $i < (int) $n; $i++) {
    $kind = str_ends_with($lib, '_rw') ? (mt_rand(0, 3) === 0 ? 'w' : 'r') : 'p';
    $asked = microtime(true);
    if (!$take($kind)) {
        exit(1);
    }
    $got = microtime(true);
    usleep(1000);
    $released = microtime(true);
    $drop();
    printf("%.6f %.6f %.6f %s\n", $asked, $got, $released, $kind); // full microseconds
}
