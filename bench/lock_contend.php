<?php
// Scenario 5, one of the contending processes: lock, 1 ms of work, unlock, $n times.
// Prints one line per hold: asked, got, released (microtime), for the handoff gaps.
[$_, $lib, $port, $n] = $argv;
$key = 'bench:contend';
if ($lib === 'lease') {
    $lock = new DistributedLock($key, 30.0, "redis://127.0.0.1:$port");
    $take = fn () => $lock->acquire(60.0);
    $drop = fn () => $lock->release();
} else {
    require '/usr/share/php/Symfony/Component/Lock/autoload.php';
    $r = new Redis();
    $r->connect('127.0.0.1', (int) $port);
    $lock = (new Symfony\Component\Lock\LockFactory(new Symfony\Component\Lock\Store\RedisStore($r)))->createLock($key, 30.0);
    $take = fn () => $lock->acquire(true);     // blocking: Symfony polls every 100 ms +- 10 ms
    $drop = fn () => $lock->release();
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
